"""``runner-wrapper measure [--memory-limit 2G] [--cpus 2] [--json] -- CMD ...``

Runs CMD in a fresh cgroup (or the psutil fallback), exits with CMD's exit code
(137 when the cgroup recorded an OOM kill) and prints a short summary on stderr,
like ``/usr/bin/time -v`` but with the kernel's own peak and OOM counters.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any, Sequence

from runner_wrapper.config import WrapperConfig

__all__ = ["Measurement", "measure_command", "format_summary"]


@dataclass(frozen=True)
class Measurement:
    command: list[str]
    backend: str
    approximate: bool
    exit_code: int
    oom_kills: int
    wall_seconds: float
    memory_peak_bytes: int | None
    memory_mean_bytes: int | None
    cpu_user_seconds: float | None
    cpu_system_seconds: float | None
    cpu_mean_cores: float | None
    cpu_max_cores: float | None
    memory_limit_bytes: int | None
    cpu_limit_cores: float | None


def measure_group_name(pid: int) -> str:
    """``measure-<pid>-<start ticks>``: names its owner, so a group whose ``measure`` was SIGKILLed
    can be told from a running one and reaped (:func:`runner_wrapper.executor.reap_dead_measures`)."""
    from runner_wrapper.state import process_start_ticks

    return f"measure-{pid}-{process_start_ticks(pid) or 0}"


def measure_command(cfg: WrapperConfig, argv: Sequence[str], memory_limit: int | None = None,
                    cpus: float | None = None) -> Measurement:
    """Run ``argv`` in a fresh group; raises :class:`~runner_wrapper.cgroup.base.CgroupError` on set-up faults."""
    from runner_wrapper.cgroup.detect import select_backend
    from runner_wrapper.executor import reap_dead_measures
    from runner_wrapper.stagerun import run_in_group, stage_exit_code

    backend = select_backend(cfg.cgroup, enforce_memory=cfg.executor.psutil_enforce_memory).backend
    try:  # what an earlier, SIGKILLed measure left behind
        reap_dead_measures(backend)
    except Exception:  # noqa: BLE001 - housekeeping never fails the measurement
        pass
    group = backend.group(measure_group_name(os.getpid()))
    group.create()
    try:
        group.apply_limits(memory_limit, cpus)
        started = time.monotonic()
        ex, counters, sampled, _left, sig = run_in_group(list(argv), group, dict(os.environ), cfg.sampler_interval,
                                                         grace=cfg.executor.kill_grace_seconds, pdeathsig=True)
        wall = time.monotonic() - started
    finally:
        try:
            group.kill_all()
            group.remove()
        except Exception:  # noqa: BLE001 - best effort
            pass
    user = counters.cpu_user_seconds if counters.cpu_user_seconds is not None else ex.user_seconds
    system = counters.cpu_system_seconds if counters.cpu_system_seconds is not None else ex.system_seconds
    peak = counters.memory_peak_bytes if counters.memory_peak_bytes is not None else sampled.memory_max_bytes
    return Measurement(
        command=list(argv), backend=backend.name, approximate=counters.approximate,
        exit_code=stage_exit_code(ex.shell_code, counters.oom_kills, sig), oom_kills=counters.oom_kills,
        wall_seconds=round(wall, 3), memory_peak_bytes=peak, memory_mean_bytes=sampled.memory_mean_bytes,
        cpu_user_seconds=round(user, 4), cpu_system_seconds=round(system, 4),
        cpu_mean_cores=round((user + system) / wall, 3) if wall > 0 else None,
        cpu_max_cores=round(sampled.cpu_max_cores, 3) if sampled.cpu_max_cores is not None else None,
        memory_limit_bytes=memory_limit, cpu_limit_cores=cpus,
    )



def _or_unknown(text: str | None) -> str:
    """Sampled figures of a run shorter than two sampling intervals are unknown, never 0."""
    return text if text is not None else "unknown (run too short to sample)"

def format_summary(m: Measurement) -> str:
    from runner_wrapper.quantity import human_bytes

    lines = [
        f"command: {' '.join(m.command)}",
        f"exit code: {m.exit_code}" + (f" (OOM: {m.oom_kills} process(es) killed at the memory limit)"
                                       if m.oom_kills else ""),
        f"wall: {m.wall_seconds:.2f} s",
        f"memory peak: {human_bytes(m.memory_peak_bytes)}"
        + (f" of limit {human_bytes(m.memory_limit_bytes)}" if m.memory_limit_bytes else "")
        + f"; mean {_or_unknown(human_bytes(m.memory_mean_bytes) if m.memory_mean_bytes is not None else None)}",
        f"cpu: user {m.cpu_user_seconds or 0:.2f} s, system {m.cpu_system_seconds or 0:.2f} s; "
        f"mean {_or_unknown(f'{m.cpu_mean_cores:.2f} cores' if m.cpu_mean_cores is not None else None)}, "
        f"max {_or_unknown(f'{m.cpu_max_cores:.2f} cores' if m.cpu_max_cores is not None else None)}",
        f"backend: {m.backend}" + (" (approximate)" if m.approximate else ""),
    ]
    return "\n".join("runner-wrapper measure: " + ln for ln in lines)


def run_measure(cfg: WrapperConfig, argv: Sequence[str], memory_limit: int | None, cpus: float | None,
                as_json: bool, err: Any = None) -> int:
    from runner_wrapper.cgroup.base import CgroupError
    from runner_wrapper.process import SpawnError

    err = err or sys.stderr
    if not argv:
        err.write("runner-wrapper measure: no command given (usage: measure [options] -- CMD ...)\n")
        return 2
    try:
        m = measure_command(cfg, argv, memory_limit, cpus)
    except SpawnError as exc:
        import errno

        # The shell's codes (POSIX "Command Search and Execution"): 127 not found, 126 not executable.
        if exc.errno == errno.ENOENT:
            err.write(f"runner-wrapper measure: {argv[0]}: command not found\n")
            return 127
        if exc.errno in (errno.EACCES, errno.ENOEXEC, errno.EPERM, errno.EISDIR):
            err.write(f"runner-wrapper measure: {argv[0]}: cannot execute: {os.strerror(exc.errno)}\n")
            return 126
        err.write(f"runner-wrapper measure: cannot start {argv[0]}: {exc}\n")
        return 125
    except CgroupError as exc:
        err.write(f"runner-wrapper measure: {exc}\n")
        return 125
    err.write((json.dumps(asdict(m)) if as_json else format_summary(m)) + "\n")
    err.flush()
    return m.exit_code
