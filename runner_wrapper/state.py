"""Per-job state carried between driver calls (``prepare`` -> ``run`` x N -> ``cleanup``).

Each driver call is a separate process, so what one stage measured is kept in
a small file ``job-<id>.state`` under ``[executor] state_dir`` (or the job's
``$TMPDIR`` when no state dir is configured or it is not writable).  Writes are
atomic (temporary file + rename).

The file is :mod:`marshal` data of plain dicts, lists and numbers behind a magic
line, not JSON: ``import json`` pulls in ``re`` and ``enum`` (10-18 ms measured),
and ``run`` reads and writes this file on every stage.  It is written and read
only by the same installed wrapper (one interpreter); an unreadable, foreign or
torn file reads as "no state".  ``python -c 'import marshal,sys;
print(marshal.loads(open(sys.argv[1],"rb").read()[9:]))' job-42.state`` shows it.  The file also names the live driver
(pid + kernel start time) so the stale-cgroup reaper can tell a running job
from a crashed one.
"""

from __future__ import annotations

import marshal
import os
import time

from runner_wrapper.lean import Record

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing stays out of the per-stage start-up path
    from typing import Any

__all__ = ["JobState", "StageFigures", "state_path", "load_state", "save_state", "delete_state",
           "process_start_ticks", "driver_alive", "utc_now"]


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class StageFigures(Record):
    """One ``run`` call, with the split CPU figures the record's totals need."""

    __slots__ = ("name", "attempt", "wall_seconds", "exit_code", "oom_kills", "memory_peak_bytes",
                 "memory_mean_bytes", "cpu_user_seconds", "cpu_system_seconds", "cpu_max_cores", "memory_failcnt",
                 "memory_pressure_usec", "cpu_pressure_usec", "leftover_killed")
    _fields = __slots__
    _field_defaults = {"oom_kills": 0, "memory_peak_bytes": None, "memory_mean_bytes": None,
                       "cpu_user_seconds": None, "cpu_system_seconds": None, "cpu_max_cores": None,
                       "memory_failcnt": None, "memory_pressure_usec": None, "cpu_pressure_usec": None,
                       "leftover_killed": 0}

    name: str
    attempt: int
    wall_seconds: float
    exit_code: int | None
    oom_kills: int
    memory_peak_bytes: int | None
    memory_mean_bytes: int | None
    cpu_user_seconds: float | None
    cpu_system_seconds: float | None
    cpu_max_cores: float | None
    memory_failcnt: int | None
    memory_pressure_usec: int | None
    cpu_pressure_usec: int | None
    #: Processes left behind by the stage script and killed by the wrapper.
    leftover_killed: int

    @property
    def cpu_seconds(self) -> float | None:
        if self.cpu_user_seconds is None and self.cpu_system_seconds is None:
            return None
        return (self.cpu_user_seconds or 0.0) + (self.cpu_system_seconds or 0.0)


class JobState:
    """Mutable per-job state (a plain class: defining dataclasses costs start-up time)."""

    __slots__ = ("job_id", "backend", "started_at", "started_epoch", "identity", "limits", "approximate",
                 "stages", "driver", "updated_epoch", "signed", "notes", "after_script_decides")

    def __init__(self, job_id: int, backend: str, started_at: str, started_epoch: float,
                 identity: dict[str, Any] | None = None, limits: dict[str, Any] | None = None,
                 approximate: bool = False, stages: list[StageFigures] | None = None,
                 driver: dict[str, Any] | None = None, updated_epoch: float = 0.0, signed: bool = False,
                 notes: list[str] | None = None, after_script_decides: bool = False) -> None:
        self.job_id = job_id
        self.backend = backend
        self.started_at = started_at
        self.started_epoch = started_epoch
        self.identity: dict[str, Any] = identity or {}
        self.limits: dict[str, Any] = limits or {}
        self.approximate = approximate
        self.stages: list[StageFigures] = stages or []
        #: The driver currently running a stage, else ``None``: ``{"pid": int, "start": int}`` (its
        #: process start ticks: a recycled pid is not it) and the stage it runs (``"stage"``,
        #: ``"attempt"``, ``"since"`` epoch seconds), so a stage whose driver was SIGKILLed is still
        #: recorded (:func:`runner_wrapper.stagerun.record_lost_stage`).
        self.driver = driver
        self.updated_epoch = updated_epoch
        self.signed = signed
        self.notes: list[str] = notes or []
        #: ``AFTER_SCRIPT_IGNORE_ERRORS=false``: an ``after_script`` failure fails the job.
        self.after_script_decides = after_script_decides

    def next_attempt(self, stage: str) -> int:
        return 1 + sum(1 for s in self.stages if s.name == stage)

    def to_bytes(self) -> bytes:
        d = {k: getattr(self, k) for k in self.__slots__}
        d["stages"] = [s._asdict() for s in self.stages]
        return STATE_MAGIC + marshal.dumps(d)

    @classmethod
    def from_bytes(cls, data: bytes) -> "JobState":
        """Raises ``ValueError`` for anything but a state this wrapper wrote."""
        if not data.startswith(STATE_MAGIC):
            raise ValueError("not a runner-wrapper job state")
        try:
            d = marshal.loads(data[len(STATE_MAGIC):])
            stages = [StageFigures(**s) for s in d.pop("stages", [])]
            return cls(stages=stages, **d)
        except (EOFError, TypeError, AttributeError) as exc:
            raise ValueError(f"torn or foreign job state: {exc}") from None


#: First bytes of a state file (format version 1).
STATE_MAGIC = b"RWSTATE1\n"


def state_path(state_dir: str, tmpdir: str | None, job_id: int) -> str:
    """Where the job's state lives: the state dir if usable, else ``$TMPDIR``."""
    name = f"job-{job_id}.state"
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
        with open(path, "rb") as fh:
            return JobState.from_bytes(fh.read())
    except FileNotFoundError:
        return None
    except ValueError:
        return None  # a torn or foreign file: start afresh rather than fail the build


def save_state(path: str, state: JobState) -> None:
    state.updated_epoch = time.time()
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(state.to_bytes())
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


def driver_alive(driver: dict[str, Any] | None) -> bool:
    if not driver:
        return False
    return process_start_ticks(int(driver.get("pid", 0))) == driver.get("start")
