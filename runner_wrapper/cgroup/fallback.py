"""psutil fallback: where no cgroup can be created, sample the process tree.

Everything here is **approximate** (peers.md §12.6): polling misses short
spikes, summed RSS counts shared pages once per process, page cache and kernel
memory are invisible, and a process that escapes with ``setsid`` and is
re-parented to init leaves the tree.  Records from this backend carry
``host.approximate = true``.

Optionally the memory limit is enforced by killing the tree when its summed
RSS exceeds the limit; such a kill counts as one OOM kill.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from runner_wrapper.cgroup.base import Backend, Counters, Group, Sample

__all__ = ["PsutilBackend", "PsutilGroup"]


class PsutilBackend(Backend):
    name = "psutil"
    approximate = True

    def __init__(self, enforce_memory: bool = True) -> None:
        self.enforces_limits = enforce_memory
        self.enforce_memory = enforce_memory

    def group(self, rel: str) -> "PsutilGroup":
        return PsutilGroup(self, rel)

    def describe(self) -> dict[str, object]:
        return {"backend": self.name, "approximate": True,
                "memory_peak_file": "none (summed RSS of the process tree, sampled)",
                "enforce_memory": self.enforce_memory, "cgroup_kill": False}


class PsutilGroup(Group):
    """A process tree rooted at the pids given to :meth:`add_pid`."""

    def __init__(self, backend: PsutilBackend, rel: str) -> None:
        self.backend = backend
        self.rel = rel
        self.roots: list[int] = []
        self.memory_limit: int | None = None
        self._known: set[int] = set()
        self._peak = 0
        self._last_mem: int | None = None
        self._cpu_by_pid: dict[int, float] = {}
        self._oom_kills = 0
        self._rusage: tuple[float, float, int] | None = None
        self._lock = threading.Lock()
        self._created = time.time()

    def exists(self) -> bool:
        return True

    def create(self) -> None:
        return None

    def apply_limits(self, memory_bytes: int | None, cpu_cores: float | None) -> list[str]:
        self.memory_limit = memory_bytes
        done = []
        if memory_bytes is not None and self.backend.enforce_memory:
            done.append(f"memory limit {memory_bytes} enforced by killing the process tree (sampled RSS)")
        if cpu_cores is not None:
            done.append("CPU limit not enforced (no cgroup)")
        return done

    def attach_files(self) -> list[str]:
        return []

    def add_pid(self, pid: int) -> None:
        self.roots.append(pid)
        self._known.add(pid)

    def _procs(self) -> list["object"]:
        import psutil

        procs = []
        for pid in list(self._known):
            try:
                p = psutil.Process(pid)
                if p.status() == psutil.STATUS_ZOMBIE:
                    continue
                procs.append(p)
                for c in p.children(recursive=True):
                    if c.pid not in self._known:
                        self._known.add(c.pid)
                        procs.append(c)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                self._known.discard(pid)
        return procs

    def pids(self) -> set[int]:
        return {p.pid for p in self._procs()}  # type: ignore[attr-defined]

    def sample(self) -> Sample:
        import psutil

        mem = 0
        with self._lock:
            for p in self._procs():
                try:
                    with p.oneshot():  # type: ignore[attr-defined]
                        mem += p.memory_info().rss  # type: ignore[attr-defined]
                        t = p.cpu_times()  # type: ignore[attr-defined]
                        self._cpu_by_pid[p.pid] = t.user + t.system  # type: ignore[attr-defined]
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
            self._peak = max(self._peak, mem)
            self._last_mem = mem
            over = self.memory_limit is not None and self.backend.enforce_memory and mem > self.memory_limit
        if over:
            self._oom_kills += 1
            self.kill_all()
        return Sample(memory_bytes=mem, cpu_seconds=sum(self._cpu_by_pid.values()))

    def note_rusage(self, user: float, system: float, maxrss_bytes: int) -> None:
        """Resource usage of the waited-for root (includes its waited-for descendants).

        A forked child's ``ru_maxrss`` also counts the driver's own image before ``exec`` (Linux
        ``exec_mmap`` keeps the old mm's high-water mark in ``signal->maxrss``, kernel/fs/exec.c), so a
        figure no larger than the driver's resident size says nothing about the build: it is dropped,
        and the sampled peak stands.
        """
        import psutil

        try:
            own = psutil.Process().memory_info().rss
        except psutil.Error:
            own = 0
        if maxrss_bytes <= own * 1.1:
            maxrss_bytes = 0
        self._rusage = (user, system, maxrss_bytes)

    def read(self) -> Counters:
        peak = self._peak or None
        user = system = None
        if self._rusage:
            user, system, maxrss = self._rusage
            peak = max(peak or 0, maxrss) or None
        elif self._cpu_by_pid:
            user = sum(self._cpu_by_pid.values())
            system = 0.0
        return Counters(memory_peak_bytes=peak, memory_current_bytes=self._last_mem, oom_kills=self._oom_kills,
                        cpu_user_seconds=user, cpu_system_seconds=system, approximate=True)

    def kill_all(self, timeout: float = 5.0) -> int:
        killed: set[int] = set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pids = self.pids() - {os.getpid()}
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.add(pid)
                except ProcessLookupError:
                    pass
            time.sleep(0.01)
        return len(killed)

    def remove(self) -> None:
        return None

    def children(self) -> list[str]:
        return []

    def age_seconds(self, now: float | None = None) -> float:
        return (now if now is not None else time.time()) - self._created
