"""Finding the runner wrapper's signed usage record in a trace, bound to the job it claims to be.

A build can print anything into its own log, including a genuine, correctly signed marker of
*another* job (copied from a public job log): a replay.  The signature proves the wrapper wrote it,
not that it describes this job.  So a marker only counts for the job it names (``job.id``, and
``job.project_id`` when both are known), and among this job's markers the one covering the most wall time wins (markers are cumulative, so a replay of
the job's own earlier marker cannot hide what came after it).  See ``docs/usage-record.md``,
"Threat model".
"""

from __future__ import annotations

from typing import Mapping

from runner_wrapper.record import RecordError, UsageRecord, find_markers, verify_record

__all__ = ["extract_verified_record"]


def _foreign(record: UsageRecord, job_id: int | None, project_id: int | None) -> str | None:
    """Why a verified record is not this job's, or ``None``.

    Job ids are unique in a GitLab instance (the primary key of ``ci_builds``), so the id binds a
    record to one job; the project is checked too.  Times are not compared with GitLab's: a runner
    host's clock may be off, and rejecting a genuine record for it would silently drop kernel OOM
    evidence (docs/usage-record.md, "Threat model").
    """
    rj = record.job
    if job_id and rj.id != job_id:
        return f"replayed usage marker of job {rj.id} (project {rj.project_id}), not this job {job_id}: ignored"
    if job_id and project_id and rj.project_id is not None and rj.project_id != project_id:
        return f"usage marker of job {rj.id} in project {rj.project_id}, not this job's project {project_id}: ignored"
    return None


def extract_verified_record(trace: bytes, keys: Mapping[str, bytes], *, job_id: int | None = None,
                            project_id: int | None = None) -> tuple[UsageRecord | None, str | None]:
    """Return this job's usage record from the trace, and why other markers were rejected.

    ``job_id``/``project_id`` name the job the trace belongs to (from GitLab, never from the trace);
    every marker whose signature verifies but that names another job or another project is rejected
    as a replay.  Without ``job_id`` (an offline trace) the markers must
    all name one job; when verified markers of several jobs are present none is trusted.

    ``(record, None)``: a record verified and no marker was rejected;
    ``(record, reason)``: a record verified but some other marker was rejected;
    ``(None, reason)``: markers were present but none is this job's (forged, unknown key, malformed,
    replayed, ambiguous);
    ``(None, None)``: no marker at all.
    Without ``keys`` every marker is rejected (nothing can be trusted).
    """
    try:
        markers = find_markers(trace)
    except Exception as exc:  # pragma: no cover - find_markers is defensive already
        return None, f"cannot scan for usage markers: {exc}"
    if not markers:
        return None, None
    rejected: list[str] = []
    mine: list[tuple[float, int, UsageRecord]] = []
    for position, data in enumerate(markers):
        if not keys:
            rejected.append("no signing key configured")
            continue
        try:
            record = verify_record(data, keys)
        except RecordError as exc:
            rejected.append(str(exc))
            continue
        why = _foreign(record, job_id, project_id)
        if why:
            rejected.append(why)
            continue
        mine.append((record.usage.wall_seconds, position, record))
    found: UsageRecord | None = None
    if mine:
        jobs = sorted({(r.job.id, r.job.project_id) for _w, _p, r in mine}, key=str)
        if len(jobs) > 1:  # only possible without job_id
            rejected.append("verified usage markers of several jobs (" + ", ".join(
                f"job {j} project {p}" for j, p in jobs) + "): cannot tell which is this job's; none trusted")
        else:
            found = max(mine, key=lambda t: (t[0], t[1]))[2]
    if not rejected:
        return found, None
    uniq = list(dict.fromkeys(rejected))
    reason = f"{len(rejected)} usage marker(s) rejected: " + "; ".join(uniq)
    return found, reason
