"""Replayed usage records: a genuine, correctly signed marker printed into a job's log by that job's
build (copied from another job's log, or the job's own earlier one) must never hide the job's own
record, and must never change which job the classifier judges (docs/usage-record.md, "Threat model")."""

from __future__ import annotations

import dataclasses
import json

from retry_bot.classify import classify, extract_verified_record
from retry_bot.cli import main
from runner_wrapper.record import JobIdentity, encode_marker

from .conftest import KEY, facts, usage_record

GiB = 2**30
KEYS = {"farm": KEY}


def record(job_id: int, project_id: int | None = 7, oom_kills: int = 0, peak: int = 900 * 2**20,
           wall: float = 10.0, started_at: str = "2026-11-01T10:00:00Z", limit: int = 1024 * 2**20):
    base = usage_record(job_id=job_id, oom_kills=oom_kills, peak=peak, limit=limit)
    return dataclasses.replace(
        base, job=JobIdentity(id=job_id, project_id=project_id, name="build",
                              variables={"KUBERNETES_MEMORY_LIMIT": f"{limit // 2**20}Mi"}),
        usage=dataclasses.replace(base.usage, wall_seconds=wall), started_at=started_at)


def line(rec) -> bytes:
    return encode_marker(rec.to_dict(), KEY, "farm").encode()


def trace(*lines: bytes) -> bytes:
    return b"compiling\n" + b"\n".join(lines) + b"\nERROR: Job failed: exit status 1\n"


def test_another_jobs_genuine_marker_after_ours_does_not_hide_ours(taxonomy):
    ours = record(902)
    theirs = record(901, oom_kills=1, peak=64 * GiB, limit=64 * GiB)
    t = trace(line(ours), line(theirs))
    rec, why = extract_verified_record(t, KEYS, job_id=902, project_id=7)
    assert rec is not None and rec.job.id == 902 and rec.usage.oom_kills == 0
    assert "replayed usage marker of job 901 (project 7), not this job 902" in why
    verdict = classify(facts(job_id=902, failure_reason="script_failure", exit_code=1), t, taxonomy, rec)
    assert verdict.family.value != "oom"


def test_a_replay_alone_is_no_record_at_all():
    rec, why = extract_verified_record(trace(line(record(901, oom_kills=1))), KEYS, job_id=902, project_id=7)
    assert rec is None and "replayed usage marker of job 901" in why


def test_same_job_id_in_another_project_is_rejected():
    other_project = record(902, project_id=8, oom_kills=1)
    rec, why = extract_verified_record(trace(line(other_project)), KEYS, job_id=902, project_id=7)
    assert rec is None and "in project 8, not this job's project 7" in why


def test_a_runner_clock_far_off_does_not_lose_the_jobs_own_record():
    # times are not compared with GitLab's: a host with a wrong clock keeps its OOM evidence
    skewed = record(902, oom_kills=1, started_at="2019-01-01T00:00:00Z")
    rec, why = extract_verified_record(trace(line(skewed)), KEYS, job_id=902, project_id=7)
    assert rec is not None and rec.oom_killed and why is None


def test_replaying_the_jobs_own_earlier_marker_cannot_hide_a_later_oom():
    # build_script's marker (no OOM), a later step_* stage OOM-killed (cumulative marker), then
    # after_script prints the first marker again: the record covering the most wall time wins.
    first = record(902, wall=10.0)
    later = record(902, wall=25.0, oom_kills=1)
    rec, _why = extract_verified_record(trace(line(first), line(later), line(first)), KEYS)
    assert rec.usage.oom_kills == 1 and rec.usage.wall_seconds == 25.0


def test_offline_trace_with_markers_of_two_jobs_trusts_neither():
    t = trace(line(record(902)), line(record(901, oom_kills=1)))
    rec, why = extract_verified_record(t, KEYS)
    assert rec is None and "cannot tell which is this job's" in why


def _cli(capsys, tmp_path, monkeypatch, t: bytes, job: dict | None):
    f = tmp_path / "job.log"
    f.write_bytes(t)
    args = ["--log-format", "json", "classify", "--trace", str(f), "--signing-key-env", "MY_KEY",
            "--signing-key-id", "farm", "--format", "json"]
    if job is not None:
        (tmp_path / "job.json").write_text(json.dumps(job))
        args += ["--job-json", str(tmp_path / "job.json")]
    monkeypatch.setenv("MY_KEY", KEY.decode())
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


def test_classify_command_keeps_the_jobs_own_record_and_identity(capsys, tmp_path, monkeypatch):
    t = trace(line(record(902)), line(record(901, oom_kills=1, peak=64 * GiB, limit=64 * GiB)))
    job = {"id": 902, "name": "build", "status": "failed", "failure_reason": "script_failure",
           "project": {"id": 7, "path_with_namespace": "group/p"}}
    d = _cli(capsys, tmp_path, monkeypatch, t, job)
    assert d["job_id"] == 902 and d["usage_record"]["job_id"] == 902
    assert d["usage_record"]["oom_kills"] == 0 and d["family"] != "oom"


def test_classify_command_offline_never_takes_the_replayed_jobs_identity(capsys, tmp_path, monkeypatch):
    t = trace(line(record(902)), line(record(901, oom_kills=1, peak=64 * GiB, limit=64 * GiB)))
    d = _cli(capsys, tmp_path, monkeypatch, t, None)
    assert d["job_id"] is None and d["facts_source"] == "none" and d["usage_record"]["verified"] is False
    assert d["family"] != "oom"

