"""`retry-bot classify`: offline explanation of one job, text and JSON, clear errors."""

from __future__ import annotations

import json
import os

import pytest

from retry_bot.cli import main
from runner_wrapper.record import encode_marker

from .conftest import KEY, usage_record

TRACE = b"\x1b[0KRunning with gitlab-runner\n" + b"g++: fatal error: Killed signal terminated program cc1plus\n" \
        b"make: *** [all] Error 2\nERROR: Job failed: exit code 2\n"


def run(capsys, *args):
    rc = main(["--log-format", "json", "classify", *args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def trace(tmp_path):
    f = tmp_path / "job.log"
    f.write_bytes(TRACE)
    return f


def test_text_output(capsys, trace):
    rc, out, _ = run(capsys, "--trace", str(trace), "--failure-reason", "script_failure")
    assert rc == 0
    assert "oom / compiler_oom" in out and "rule compiler-killed" in out and "action:" in out


def test_json_output_has_the_contract_fields(capsys, trace, tmp_path):
    job = tmp_path / "job.json"
    job.write_text(json.dumps({
        "id": 99, "name": "build:linux", "stage": "build", "ref": "main", "status": "failed",
        "tag_list": ["docker"], "failure_reason": "script_failure",
        "pipeline": {"id": 5, "project_id": 3, "ref": "main", "sha": "abc", "source": "push"},
        "user": {"username": "ada"}, "runner": {"description": "r1"},
        "web_url": "https://gitlab.example/g/p/-/jobs/99"}))
    rc, out, _ = run(capsys, "--trace", str(trace), "--job-json", str(job), "--format", "json")
    assert rc == 0
    d = json.loads(out)
    for key in ("category", "family", "rule", "evidence", "action", "confidence", "reason"):
        assert key in d
    assert (d["job_id"], d["family"], d["category"]) == (99, "oom", "compiler_oom")
    assert d["action"] in ("retry", "resize", "none")
    assert d["evidence"] and "cc1plus" in d["evidence"][-1]
    assert d["probability"] is None  # a rule's verdict: no probability, no floor


def test_a_learned_verdict_shows_its_probability_and_the_floor_it_is_held_to(capsys, tmp_path):
    f = tmp_path / "learned.log"
    f.write_bytes(b"cc1plus killed signal terminated program out of memory java heap\n" * 3)
    rc, out, _ = run(capsys, "--trace", str(f), "--failure-reason", "script_failure", "--exit-code", "1",
                     "--format", "json")
    d = json.loads(out)
    assert rc == 0 and d["rule"] == "learned:oom" and 0.6 <= d["probability"] <= 1, d
    if d["probability"] >= 0.9:
        assert d["action"] == "resize" and d["decision"]["rule"] == "categories.learned_oom", d["reason"]
    else:
        assert d["action"] == "none" and d["decision"]["rule"] == "categories.learned_oom.min_probability"
        assert "below min_probability 0.90 (categories.learned_oom)" in d["reason"], d["reason"]
    rc, out, _ = run(capsys, "--trace", str(f), "--failure-reason", "script_failure", "--exit-code", "1")
    assert f"weak evidence, p={d['probability']:.2f}]" in out, out


def test_signed_record_is_verified_with_the_env_key(capsys, tmp_path, monkeypatch):
    f = tmp_path / "job.log"
    f.write_bytes(b"compiling\n" + encode_marker(usage_record(job_id=42, oom_kills=1).to_dict(), KEY, "farm").encode()
                  + b"\nERROR: Job failed: exit status 137\n")
    monkeypatch.setenv("MY_KEY", KEY.decode())
    rc, out, err = run(capsys, "--trace", str(f), "--signing-key-env", "MY_KEY", "--signing-key-id", "farm",
                       "--format", "json")
    d = json.loads(out)
    assert rc == 0 and d["rule"] == "record-oom-kill" and d["usage_record"]["verified"]
    assert KEY.decode() not in err  # the key never reaches the logs
    monkeypatch.delenv("MY_KEY")
    rc, out, _ = run(capsys, "--trace", str(f), "--signing-key-env", "MY_KEY", "--format", "json")
    d = json.loads(out)
    assert d["rule"] != "record-oom-kill" and d["usage_record"]["rejected"]


def test_unknown_failure_reason_is_a_warning(capsys, trace):
    rc, out, err = run(capsys, "--trace", str(trace), "--failure-reason", "martian_failure", "--format", "json")
    assert rc == 0 and "unknown failure_reason" in json.loads(out)["warnings"][0]
    assert "unknown_failure_reason" in err


def test_bad_inputs_exit_2_with_a_message(capsys, trace, tmp_path):
    rc, _, err = run(capsys, "--trace", str(tmp_path / "missing.log"))
    assert rc == 2 and "no such file" in err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    rc, _, err = run(capsys, "--trace", str(trace), "--job-json", str(bad))
    assert rc == 2 and "not valid JSON" in err and "line 1" in err
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"id": "abc"}))
    rc, _, err = run(capsys, "--trace", str(trace), "--job-json", str(wrong))
    assert rc == 2 and "id: expected an integer" in err
    tax = tmp_path / "tax.toml"
    tax.write_text("[[rule]]\nname = 'x'\nstage = 'reason'\ncategory = 'x'\nfamily = 'nope'\ndescription='d'\nexit_codes=[1]\n")
    rc, _, err = run(capsys, "--trace", str(trace), "--taxonomy", str(tax))
    assert rc == 2 and "unknown family" in err and f"{tax}:5" in err
    rc, _, err = run(capsys, "--trace", str(tmp_path))
    assert rc == 2


def test_binary_100mb_trace(capsys, tmp_path):
    f = tmp_path / "huge.log"
    with open(f, "wb") as fh:
        fh.write(os.urandom(1 << 16))
        fh.truncate(100 * 2**20)
        fh.seek(0, os.SEEK_END)
        fh.write(b"\nERROR: Job failed (system failure): Error in container build: exit code: 137, reason: 'OOMKilled'\n")
    rc, out, _ = run(capsys, "--trace", str(f), "--format", "json")
    d = json.loads(out)
    assert rc == 0 and d["rule"] == "kubernetes-oomkilled" and d["trace_bytes_read"] == 256 * 1024


def test_stdin_trace(capsys, monkeypatch):
    import io
    import sys
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(TRACE)))
    rc, out, _ = run(capsys, "--trace", "-", "--format", "json")
    assert rc == 0 and json.loads(out)["category"] == "compiler_oom"


def _record_trace(tmp_path, record):
    f = tmp_path / "rec.log"
    f.write_bytes(b"compiling\n" + encode_marker(record.to_dict(), KEY, "farm").encode()
                  + b"\nERROR: Job failed: exit status 137\n")
    return f


def test_without_job_json_the_verified_record_names_the_job(capsys, tmp_path, monkeypatch):
    """Regression: decide() dropped a record for job 4242 because the facts said job 0."""
    from runner_wrapper.quantity import parse_memory

    mib64 = 64 * 2**20
    rec = usage_record(job_id=4242, oom_kills=1, exit_code=137, peak=mib64, limit=mib64)
    monkeypatch.setenv("MY_KEY", KEY.decode())
    rc, out, _ = run(capsys, "--trace", str(_record_trace(tmp_path, rec)), "--signing-key-env", "MY_KEY",
                     "--signing-key-id", "farm", "--format", "json")
    d = json.loads(out)
    assert rc == 0 and d["rule"] == "record-oom-kill"
    assert (d["job_id"], d["job_name"], d["facts_source"]) == (4242, "build", "usage-record")
    if "decision" not in d:
        pytest.skip("the decision module is not available")
    assert d["action"] == "resize", d["reason"]
    limits = [parse_memory(v) for k, v in d["decision"]["variables"].items() if "MEMORY_LIMIT" in k]
    assert limits and limits[0] > mib64  # resized from the record's limit and peak, not a default
    assert "job 4242 'build' failed" in d["reason"] and "job 0" not in d["reason"]


def test_job_json_still_wins_over_the_record(capsys, tmp_path, monkeypatch):
    rec = usage_record(job_id=4242, oom_kills=1)
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"id": 7, "name": "other", "status": "failed", "failure_reason": "script_failure"}))
    monkeypatch.setenv("MY_KEY", KEY.decode())
    rc, out, _ = run(capsys, "--trace", str(_record_trace(tmp_path, rec)), "--signing-key-env", "MY_KEY",
                     "--signing-key-id", "farm", "--job-json", str(job), "--format", "json")
    d = json.loads(out)
    assert rc == 0 and (d["job_id"], d["facts_source"]) == (7, "job-json")
    assert d["rule"] != "record-oom-kill"  # the record is another job's: ignored, and said so
    # rejected where it is extracted, as a replay bound to another job, and said so
    assert d["usage_record"]["verified"] is False
    assert "replayed usage marker of job 4242" in d["usage_record"]["rejected"]


def test_reason_reads_naturally_without_job_facts(capsys, trace):
    rc, out, _ = run(capsys, "--trace", str(trace), "--format", "json")
    d = json.loads(out)
    assert rc == 0 and d["job_id"] is None and d["job_name"] is None and d["facts_source"] == "none"
    assert "job 0" not in d["reason"] and "''" not in d["reason"], d["reason"]
    if "decision" in d:
        assert d["reason"].startswith("the job of this trace failed: oom"), d["reason"]
        assert d["decision"]["reason"] == d["reason"]
    rc, out, _ = run(capsys, "--trace", str(trace))
    assert rc == 0 and "job 0" not in out and out.startswith("job: oom / compiler_oom")
