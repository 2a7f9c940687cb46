"""Turn per-stage figures into the job's :class:`~runner_wrapper.record.UsageRecord` (pure).

Totals: the memory peak is the largest stage peak (or the job cgroup's own
high-water mark, when read at cleanup); CPU seconds add up; the mean memory is
the wall-time-weighted mean of the stage means; the mean cores are CPU seconds
over stage wall time; OOM kills add up.  The job's exit code is the first
non-zero exit of a stage that decides the job's status (``after_script`` and
``cleanup_file_variables`` failures do not fail a GitLab job; a retried stage counts by
its last attempt), else 0.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: typing stays out of the per-stage start-up path
from runner_wrapper.state import JobState, StageFigures

if TYPE_CHECKING:  # the record module is imported lazily: most stages never build a record
    from runner_wrapper.cgroup.base import Counters
    from runner_wrapper.record import HostInfo, UsageRecord

__all__ = ["MAIN_STAGES", "NON_DECIDING_STAGES", "is_main_stage", "build_record", "record_dict", "host_info",
           "host_dict", "job_exit_code"]

#: The main build stage: ``build_script`` on the custom executor, ``step_script`` elsewhere (§1.4).
MAIN_STAGES = frozenset({"build_script", "step_script"})
#: Stages whose failure GitLab does not turn into a job failure.
NON_DECIDING_STAGES = frozenset({"after_script", "cleanup_file_variables"})


def is_main_stage(stage: str) -> bool:
    return stage in MAIN_STAGES


def host_dict(backend: str, approximate: bool, hostname: str = "", runner: str = "") -> dict[str, object]:
    """The record's ``host`` object (``os.uname().nodename`` is what ``socket.gethostname()`` returns on
    Linux, without importing :mod:`socket`)."""
    from runner_wrapper import __version__

    uname = os.uname()
    return {"hostname": hostname or uname.nodename, "runner": runner or None, "backend": backend,
            "approximate": approximate, "kernel": uname.release, "wrapper_version": __version__}


def host_info(backend: str, approximate: bool, hostname: str = "", runner: str = "") -> "HostInfo":
    from runner_wrapper.record import HostInfo

    return HostInfo(**host_dict(backend, approximate, hostname, runner))  # type: ignore[arg-type]


def job_exit_code(stages: list[StageFigures], after_script_decides: bool = False) -> int | None:
    """The job's exit code as GitLab records it: the first failing deciding stage's.

    ``after_script_decides``: the job set ``AFTER_SCRIPT_IGNORE_ERRORS=false``, so an ``after_script``
    failure fails the job too (gitlab-runner ``common/build.go``).
    """
    if not stages:
        return None
    last_attempt = {s.name: s.attempt for s in stages}
    ignored = NON_DECIDING_STAGES - {"after_script"} if after_script_decides else NON_DECIDING_STAGES
    for s in stages:
        if s.name in ignored or s.attempt < last_attempt[s.name]:
            continue  # a retried stage (GET_SOURCES_ATTEMPTS...) counts by its last attempt
        if s.exit_code not in (0, None):
            return s.exit_code
    return 0


def _sum(values: list[float | int | None]) -> float | int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _max(values: list[float | int | None]) -> float | int | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def build_record(state: JobState, host: "HostInfo", now_epoch: float, finished_at: str,
                 job_counters: "Counters | None" = None) -> "UsageRecord":
    """The record for everything measured so far (cumulative; call again after each stage)."""
    from dataclasses import asdict

    from runner_wrapper.record import UsageRecord

    return UsageRecord.from_dict(record_dict(state, asdict(host), now_epoch, finished_at, job_counters))


def record_dict(state: JobState, host: dict[str, object], now_epoch: float, finished_at: str,
                job_counters: "Counters | None" = None) -> dict[str, object]:
    """:func:`build_record` as the plain JSON object ``UsageRecord.to_dict()`` gives, without importing
    :mod:`runner_wrapper.record` (dataclasses and hashlib cost ~50 ms of a stage's start-up).

    The layout is the schema's (``runner_wrapper/usage-record.schema.json``); a test checks that it
    equals ``build_record(...).to_dict()``.
    """
    st = state.stages
    peak = _max([s.memory_peak_bytes for s in st] + [job_counters.memory_peak_bytes if job_counters else None])
    user = _sum([s.cpu_user_seconds for s in st])
    system = _sum([s.cpu_system_seconds for s in st])
    if job_counters and job_counters.cpu_seconds is not None and not job_counters.approximate:
        # The job cgroup also saw processes the stages left behind until cleanup killed them.
        if (job_counters.cpu_user_seconds or 0) > (user or 0):
            user = job_counters.cpu_user_seconds
        if (job_counters.cpu_system_seconds or 0) > (system or 0):
            system = job_counters.cpu_system_seconds
    weighted = [(s.memory_mean_bytes, s.wall_seconds) for s in st if s.memory_mean_bytes is not None]
    wall_w = sum(w for _, w in weighted)
    mem_mean = int(sum(m * w for m, w in weighted) / wall_w) if wall_w > 0 else (
        weighted[-1][0] if weighted else None)
    stage_wall = sum(s.wall_seconds for s in st)
    cpu_total = (user or 0.0) + (system or 0.0)
    mean_cores = round(cpu_total / stage_wall, 4) if stage_wall > 0 and (user is not None or system is not None) \
        else None
    oom = sum(s.oom_kills for s in st)
    if job_counters:
        oom = max(oom, job_counters.oom_kills)
    usage = {
        "wall_seconds": round(max(0.0, now_epoch - state.started_epoch), 3),
        "memory_peak_bytes": int(peak) if peak is not None else None,
        "memory_mean_bytes": mem_mean,
        "cpu_user_seconds": round(user, 4) if user is not None else None,
        "cpu_system_seconds": round(system, 4) if system is not None else None,
        "cpu_mean_cores": mean_cores,
        "cpu_max_cores": _max([s.cpu_max_cores for s in st]),
        "oom_kills": oom,
        "memory_failcnt": _sum([s.memory_failcnt for s in st]),
        "memory_pressure_usec": _sum([s.memory_pressure_usec for s in st]),
        "cpu_pressure_usec": _sum([s.cpu_pressure_usec for s in st]),
    }
    stages = [{"name": s.name, "attempt": s.attempt, "wall_seconds": round(s.wall_seconds, 3),
               "exit_code": s.exit_code, "oom_kills": s.oom_kills, "memory_peak_bytes": s.memory_peak_bytes,
               "memory_mean_bytes": s.memory_mean_bytes,
               "cpu_seconds": round(s.cpu_seconds, 4) if s.cpu_seconds is not None else None,
               "cpu_max_cores": s.cpu_max_cores} for s in st]
    job = {"id": state.job_id, "project_id": None, "project_path": None, "pipeline_id": None, "name": None,
           "stage": None, "ref": None, "protected": None, "url": None, "variables": {}}
    job.update(state.identity)
    job["variables"] = dict(job.get("variables") or {})  # type: ignore[call-overload]
    limits = {"memory_limit_bytes": None, "memory_request_bytes": None, "cpu_limit_cores": None,
              "cpu_request_cores": None, "sources": {}}
    limits.update(state.limits)
    limits["sources"] = dict(limits.get("sources") or {})  # type: ignore[call-overload]
    return {
        "job": job,
        "host": dict(host),
        "limits": limits,
        "usage": usage,
        "started_at": state.started_at,
        "finished_at": finished_at,
        "exit_code": job_exit_code(st, getattr(state, "after_script_decides", False)),
        "stages": stages,
        "stages_truncated": False,
        "schema": "gitlab-rightsizer/usage-record/v1",  # runner_wrapper.record.SCHEMA
    }
