"""The usage record contract: schema, HMAC signature, job-log marker."""

import json

import pytest

from runner_wrapper.record import (
    MARKER_MAX_BYTES, AppliedLimits, HostInfo, JobIdentity, RecordError, StageUsage, Usage,
    UsageRecord, encode_marker, find_markers, sign_record, verify_record,
)

KEY = b"k" * 32


def make_record(stages=2, oom=0):
    return UsageRecord(
        job=JobIdentity(id=42, project_id=7, project_path="g/p", pipeline_id=9, name="build",
                        ref="main", protected=True, variables={"KUBERNETES_MEMORY_LIMIT": "128Mi"}),
        host=HostInfo(hostname="h1", backend="cgroup-v1", kernel="6.1"),
        limits=AppliedLimits(memory_limit_bytes=128 * 2**20, sources={"memory_limit": "job variable"}),
        usage=Usage(wall_seconds=3.5, memory_peak_bytes=128 * 2**20, oom_kills=oom, cpu_user_seconds=1.0),
        started_at="2026-01-01T00:00:00Z", finished_at="2026-01-01T00:00:03Z",
        exit_code=137 if oom else 0,
        stages=tuple(StageUsage(name=f"step_{i}", attempt=1, wall_seconds=1.0, exit_code=0) for i in range(stages)),
    )


def test_roundtrip_and_verify():
    rec = make_record(oom=1)
    signed = sign_record(rec.to_dict(), KEY, "farm")
    back = verify_record(json.loads(json.dumps(signed)), {"farm": KEY})
    assert back == rec and back.oom_killed


def test_forged_record_is_rejected():
    signed = sign_record(make_record().to_dict(), KEY, "farm")
    signed["usage"]["memory_peak_bytes"] = 10**12  # "I need 1 TB"
    with pytest.raises(RecordError, match="does not verify"):
        verify_record(signed, {"farm": KEY})
    with pytest.raises(RecordError, match="unknown key id"):
        verify_record(sign_record(make_record().to_dict(), KEY, "other"), {"farm": KEY})
    with pytest.raises(RecordError, match="not signed"):
        verify_record(make_record().to_dict(), {"farm": KEY})


def test_marker_roundtrip_in_noisy_binary_trace():
    line = encode_marker(make_record().to_dict(), KEY, "farm")
    assert len(line) < MARKER_MAX_BYTES
    trace = b"\x00\xff garbage\r\n\x1b[0;m" + line.encode() + b"\x1b[0;m\nmore\n"
    found = find_markers(trace)
    assert len(found) == 1
    assert verify_record(found[0], {"farm": KEY}).job.id == 42


def test_marker_drops_stages_to_fit():
    rec = make_record(stages=200)
    line = encode_marker(rec.to_dict(), KEY)
    assert len(line) + 1 <= MARKER_MAX_BYTES
    back = verify_record(find_markers(line)[0], {"default": KEY})
    assert back.stages_truncated and back.stages == () and back.usage == rec.usage


@pytest.mark.parametrize("mutate,fragment", [
    (lambda d: d.update(schema="v0"), "unsupported usage record schema"),
    (lambda d: d["job"].pop("id"), "job: missing required"),
    (lambda d: d["usage"].update(memory_peak_bytes="big"), "usage.memory_peak_bytes: expected an integer"),
    (lambda d: d.update(job=[]), "job: expected an object"),
])
def test_malformed_records_name_the_problem(mutate, fragment):
    d = make_record().to_dict()
    mutate(d)
    with pytest.raises(RecordError, match=fragment):
        UsageRecord.from_dict(d)
