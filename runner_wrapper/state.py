"""Per-job state carried between driver calls (``prepare`` -> ``run`` x N -> ``cleanup``).

Each driver call is a separate process, so what one stage measured is kept in
a small JSON file ``job-<id>.json`` under ``[executor] state_dir`` (or the job's
``$TMPDIR`` when no state dir is configured or it is not writable).  Writes are
atomic (temporary file + rename).  The file also names the live driver
(pid + kernel start time) so the stale-cgroup reaper can tell a running job
from a crashed one.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, NamedTuple

__all__ = ["JobState", "StageFigures", "state_path", "load_state", "save_state", "delete_state",
           "process_start_ticks", "driver_alive", "utc_now"]


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class StageFigures(NamedTuple):
    """One ``run`` call, with the split CPU figures the record's totals need."""

    name: str
    attempt: int
    wall_seconds: float
    exit_code: int | None
    oom_kills: int = 0
    memory_peak_bytes: int | None = None
    memory_mean_bytes: int | None = None
    cpu_user_seconds: float | None = None
    cpu_system_seconds: float | None = None
    cpu_max_cores: float | None = None
    memory_failcnt: int | None = None
    memory_pressure_usec: int | None = None
    cpu_pressure_usec: int | None = None
    #: Processes left behind by the stage script and killed by the wrapper.
    leftover_killed: int = 0

    @property
    def cpu_seconds(self) -> float | None:
        if self.cpu_user_seconds is None and self.cpu_system_seconds is None:
            return None
        return (self.cpu_user_seconds or 0.0) + (self.cpu_system_seconds or 0.0)


class JobState:
    """Mutable per-job state (a plain class: defining dataclasses costs start-up time)."""

    __slots__ = ("job_id", "backend", "started_at", "started_epoch", "identity", "limits", "approximate",
                 "stages", "driver", "updated_epoch", "signed", "notes")

    def __init__(self, job_id: int, backend: str, started_at: str, started_epoch: float,
                 identity: dict[str, Any] | None = None, limits: dict[str, Any] | None = None,
                 approximate: bool = False, stages: list[StageFigures] | None = None,
                 driver: dict[str, int] | None = None, updated_epoch: float = 0.0, signed: bool = False,
                 notes: list[str] | None = None) -> None:
        self.job_id = job_id
        self.backend = backend
        self.started_at = started_at
        self.started_epoch = started_epoch
        self.identity: dict[str, Any] = identity or {}
        self.limits: dict[str, Any] = limits or {}
        self.approximate = approximate
        self.stages: list[StageFigures] = stages or []
        #: ``{"pid": int, "start": int}`` of the driver currently running a stage, else ``None``.
        self.driver = driver
        self.updated_epoch = updated_epoch
        self.signed = signed
        self.notes: list[str] = notes or []

    def next_attempt(self, stage: str) -> int:
        return 1 + sum(1 for s in self.stages if s.name == stage)

    def to_json(self) -> str:
        d = {k: getattr(self, k) for k in self.__slots__}
        d["stages"] = [s._asdict() for s in self.stages]
        return json.dumps(d, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "JobState":
        d = json.loads(text)
        stages = [StageFigures(**s) for s in d.pop("stages", [])]
        return cls(stages=stages, **d)


def state_path(state_dir: str, tmpdir: str | None, job_id: int) -> str:
    """Where the job's state lives: the state dir if usable, else ``$TMPDIR``."""
    name = f"job-{job_id}.json"
    if state_dir:
        try:
            os.makedirs(state_dir, mode=0o700, exist_ok=True)
            if os.access(state_dir, os.W_OK):
                return os.path.join(state_dir, name)
        except OSError:
            pass
    return os.path.join(tmpdir or os.environ.get("TMPDIR") or "/tmp", name)


def load_state(path: str) -> JobState | None:
    try:
        with open(path, "r") as fh:
            return JobState.from_json(fh.read())
    except FileNotFoundError:
        return None
    except (ValueError, TypeError):
        return None  # a torn or foreign file: start afresh rather than fail the build


def save_state(path: str, state: JobState) -> None:
    state.updated_epoch = time.time()
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        fh.write(state.to_json())
    os.replace(tmp, path)


def delete_state(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def process_start_ticks(pid: int) -> int | None:
    """Field 22 of ``/proc/PID/stat``: distinguishes a live driver from a recycled pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    try:
        return int(data[data.rindex(b")") + 2:].split()[19])
    except (ValueError, IndexError):
        return None


def driver_alive(driver: dict[str, int] | None) -> bool:
    if not driver:
        return False
    return process_start_ticks(int(driver.get("pid", 0))) == driver.get("start")
