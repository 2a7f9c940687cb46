"""Finding the signed usage record; forged markers are ignored and counted."""

from __future__ import annotations

import dataclasses

from retry_bot.classify import classify, extract_verified_record
from runner_wrapper.record import encode_marker, sign_record

from .conftest import KEY, facts, usage_record


def marker(rec, key=KEY, key_id="farm") -> bytes:
    return encode_marker(rec.to_dict(), key, key_id).encode()


def test_valid_marker_is_found_and_used(taxonomy):
    trace = b"build...\n" + marker(usage_record(oom_kills=1, exit_code=137)) + b"\nERROR: Job failed: exit status 137\n"
    rec, why = extract_verified_record(trace, {"farm": KEY})
    assert why is None and rec.usage.oom_kills == 1
    assert classify(facts(), trace, taxonomy, rec).rule == "record-oom-kill"


def test_forged_marker_is_rejected_with_a_reason(taxonomy):
    good = usage_record(oom_kills=0)
    forged = dataclasses.replace(good, usage=dataclasses.replace(good.usage, oom_kills=3))
    # sign with the wrong key: looks like a marker, does not verify
    trace = b"x\n" + marker(forged, key=b"attacker-key-0123456789") + b"\n"
    rec, why = extract_verified_record(trace, {"farm": KEY})
    assert rec is None and "does not verify" in why
    assert classify(facts(), trace, taxonomy, rec).family.value != "oom"


def test_unknown_key_and_no_keys():
    trace = marker(usage_record(), key_id="other")
    rec, why = extract_verified_record(trace, {"farm": KEY})
    assert rec is None and "unknown key id" in why
    rec, why = extract_verified_record(marker(usage_record()), {})
    assert rec is None and "no signing key" in why


def test_newest_verifying_marker_wins_and_rejections_are_counted():
    old = marker(usage_record(oom_kills=0))
    new = marker(usage_record(oom_kills=2))
    tampered = marker(usage_record(oom_kills=9), key=b"x" * 32)
    rec, why = extract_verified_record(old + b"\n" + new + b"\n" + tampered + b"\n", {"farm": KEY})
    assert rec.usage.oom_kills == 2 and why.startswith("1 usage marker(s) rejected")


def test_no_marker():
    assert extract_verified_record(b"plain log\n", {"farm": KEY}) == (None, None)


def test_unsigned_dict_in_marker_is_rejected():
    import base64, json
    body = base64.urlsafe_b64encode(json.dumps(usage_record().to_dict()).encode()).decode()
    rec, why = extract_verified_record(f"RIGHTSIZER-USAGE v1 {body}\n".encode(), {"farm": KEY})
    assert rec is None and "not signed" in why
    assert sign_record  # the contract helper stays importable
