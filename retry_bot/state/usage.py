"""Usage records as stored rows: the columns predictions query, and the dedupe key (pure)."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

from runner_wrapper.record import RecordError, UsageRecord, canonical_json

__all__ = ["usage_row", "dedupe_key", "is_trusted"]


def dedupe_key(record: Mapping[str, Any]) -> str:
    """The identity of one job run, so a record ingested twice (or from two sources) is stored once.

    A GitLab job id runs once (a retry gets a new id), so the key is the job id
    with the run's start and finish times; the same run read from a spool file
    and from a trace marker (which may have dropped per-stage figures, and so
    has another signature) gives the same key.  Records without a job id fall
    back to a hash of their canonical JSON (signature excluded).
    """
    job = record.get("job") if isinstance(record.get("job"), Mapping) else None
    if job is not None and isinstance(job.get("id"), int):
        ident = json.dumps([job["id"], record.get("started_at"), record.get("finished_at")])
        return "run:" + hashlib.sha256(ident.encode()).hexdigest()
    return "sha256:" + hashlib.sha256(canonical_json(record)).hexdigest()


def is_trusted(rec: UsageRecord) -> bool:
    """Default trust: a protected ref that succeeded or was OOM-killed (gantry excludes PR builds)."""
    return rec.job.protected is True and (rec.exit_code == 0 or rec.oom_killed)


def usage_row(record: Mapping[str, Any], trusted: bool | None = None) -> dict[str, Any]:
    """Columns of ``usage_records`` for one record; raises :class:`RecordError` on a malformed one.

    The signature is *not* checked here: the ingest edge verifies it first and
    counts rejects with :meth:`Store.count_rejected`.
    """
    rec = UsageRecord.from_dict(record)
    u = rec.usage
    cpu = None
    if u.cpu_user_seconds is not None or u.cpu_system_seconds is not None:
        cpu = (u.cpu_user_seconds or 0.0) + (u.cpu_system_seconds or 0.0)
    try:
        raw = json.dumps(dict(record), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise RecordError(f"usage record is not plain JSON: {exc}") from exc
    return {
        "dedupe_key": dedupe_key(record),
        "job_id": rec.job.id,
        "project_id": rec.job.project_id,
        "project_path": rec.job.project_path,
        "ref": rec.job.ref,
        "protected": None if rec.job.protected is None else bool(rec.job.protected),
        "job_name": rec.job.name,
        "key_fields": json.dumps(dict(rec.job.variables), sort_keys=True),
        "memory_peak_bytes": u.memory_peak_bytes,
        "memory_mean_bytes": u.memory_mean_bytes,
        "memory_limit_bytes": rec.limits.memory_limit_bytes,
        "memory_request_bytes": rec.limits.memory_request_bytes,
        "cpu_request_cores": rec.limits.cpu_request_cores,
        "cpu_seconds": cpu,
        "cpu_mean_cores": u.cpu_mean_cores,
        "wall_seconds": u.wall_seconds,
        "oom_killed": rec.oom_killed,
        "exit_code": rec.exit_code,
        "started_at": rec.started_at,
        "finished_at": rec.finished_at,
        "trusted": is_trusted(rec) if trusted is None else bool(trusted),
        "raw": raw,
    }
