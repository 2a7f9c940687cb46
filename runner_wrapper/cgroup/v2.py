"""cgroup v2: the unified hierarchy.

Counters (gitlab-mechanics.md §1.8, peers.md §12.1): ``memory.peak`` (Linux
5.19+; without it the sampler's maximum of ``memory.current`` is used and the
record says so), ``memory.events`` ``oom_kill``, ``cpu.stat`` ``user_usec`` /
``system_usec``, and PSI ``memory.pressure`` / ``cpu.pressure`` ``total=`` where
the kernel has them.  Limits: ``memory.max``, ``cpu.max`` = ``"QUOTA 100000"``.
Kill: ``cgroup.kill`` (5.14+), then SIGKILL of anything still listed.

The "no internal processes" rule means a cgroup that has child cgroups with
controllers cannot hold processes itself: the job cgroup holds none, each stage
runs in its own child, and the job cgroup enables ``+memory +cpu`` for them.
"""

from __future__ import annotations

import os
import time
TYPE_CHECKING = False
if TYPE_CHECKING:  # typing stays out of the per-stage start-up path
    from typing import Callable

from runner_wrapper.cgroup.base import (
    Backend, CgroupError, Counters, Group, Sample, kill_pids_until_empty, parse_flat_keyed, parse_pids,
    read_int, read_text, rmdir_tree, write_text,
)

__all__ = ["V2Backend", "V2Group", "find_cgroup2_mount", "CPU_PERIOD_US"]

CPU_PERIOD_US = 100_000
WANTED = ("memory", "cpu")


def find_cgroup2_mount(mountinfo: str = "/proc/self/mountinfo") -> str | None:
    """The cgroup2 mount point (``/sys/fs/cgroup`` on pure v2, ``/sys/fs/cgroup/unified`` on hybrid)."""
    try:
        text = read_text(mountinfo)
    except OSError:
        return None
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        if right.split(" ", 1)[0] == "cgroup2":
            return left.split()[4]
    return None


def _pressure_total(path: str) -> int | None:
    try:
        text = read_text(path)
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("some "):
            for part in line.split():
                if part.startswith("total="):
                    try:
                        return int(part[6:])
                    except ValueError:
                        return None
    return None


class V2Backend(Backend):
    name = "cgroup-v2"

    def __init__(self, root: str, parent: str, rmdir: Callable[[str], None] = os.rmdir) -> None:
        self.root = root
        self.parent = parent.strip("/")
        #: Injectable for tests on a fake cgroupfs (a plain directory cannot be ``rmdir``-ed with files in it).
        self.rmdir = rmdir

    @property
    def parent_dir(self) -> str:
        return os.path.join(self.root, self.parent)

    def group(self, rel: str) -> "V2Group":
        return V2Group(self, rel.strip("/"))

    def available_controllers(self) -> set[str]:
        """Controllers offered to the parent: its own ``cgroup.controllers`` or its nearest existing ancestor's."""
        d = self.parent_dir
        while True:
            try:
                return set(read_text(os.path.join(d, "cgroup.controllers")).split())
            except FileNotFoundError:
                if os.path.normpath(d) == os.path.normpath(self.root):
                    return set()
                d = os.path.dirname(d)

    def describe(self) -> dict[str, object]:
        probe = self.parent_dir if os.path.isdir(self.parent_dir) else self.root
        return {
            "backend": self.name,
            "root": self.root,
            "parent": self.parent,
            "controllers": sorted(self.available_controllers()),
            "memory_peak_file": "memory.peak" if os.path.exists(os.path.join(probe, "memory.peak"))
            or os.path.exists(os.path.join(self.root, "memory.peak")) else "memory.current (sampled)",
            "cgroup_kill": os.path.exists(os.path.join(probe, "cgroup.kill")),
            "psi": os.path.exists(os.path.join(probe, "memory.pressure")),
        }

    def enable_controllers(self, directory: str) -> None:
        """Enable memory and cpu for the children of ``directory`` (and of its ancestors below the root)."""
        chain = []
        d = os.path.normpath(directory)
        root = os.path.normpath(self.root)
        while d != root and d.startswith(root):
            chain.append(d)
            d = os.path.dirname(d)
        chain.append(root)
        for d in reversed(chain):
            sub = os.path.join(d, "cgroup.subtree_control")
            try:
                have = set(read_text(sub).split())
                offered = set(read_text(os.path.join(d, "cgroup.controllers")).split())
            except FileNotFoundError:
                continue
            missing = [c for c in WANTED if c in offered and c not in have]
            if missing:
                write_text(sub, " ".join("+" + c for c in missing))


class V2Group(Group):
    def __init__(self, backend: V2Backend, rel: str) -> None:
        self.backend = backend
        self.rel = rel
        self.dir = os.path.join(backend.root, backend.parent, rel)

    def _f(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def exists(self) -> bool:
        return os.path.isdir(self.dir)

    def create(self) -> None:
        self.backend.enable_controllers(os.path.dirname(self.dir))
        try:
            os.makedirs(self.dir, exist_ok=True)
        except OSError as exc:
            raise CgroupError(f"cannot create cgroup {self.dir}: {exc.strerror}") from None

    def make_parent_of_stages(self) -> None:
        """Let this (job) cgroup delegate memory and cpu to its stage children."""
        self.backend.enable_controllers(self.dir)

    def apply_limits(self, memory_bytes: int | None, cpu_cores: float | None) -> list[str]:
        done: list[str] = []
        if memory_bytes is not None:
            write_text(self._f("memory.max"), str(int(memory_bytes)))
            done.append(f"memory.max={int(memory_bytes)}")
            if os.path.exists(self._f("memory.swap.max")):
                write_text(self._f("memory.swap.max"), "0")
                done.append("memory.swap.max=0")
        if cpu_cores is not None:
            quota = max(1000, int(round(cpu_cores * CPU_PERIOD_US)))
            write_text(self._f("cpu.max"), f"{quota} {CPU_PERIOD_US}")
            done.append(f"cpu.max={quota} {CPU_PERIOD_US}")
        return done

    def attach_files(self) -> list[str]:
        return [self._f("cgroup.procs")]

    def add_pid(self, pid: int) -> None:
        write_text(self._f("cgroup.procs"), str(pid))

    def pids(self) -> set[int]:
        out: set[int] = set()
        for root, _dirs, _files in os.walk(self.dir):
            try:
                out |= parse_pids(read_text(os.path.join(root, "cgroup.procs")))
            except FileNotFoundError:
                pass
        return out

    def read(self) -> Counters:
        if not self.exists():
            raise CgroupError(f"cgroup {self.dir} is gone: counters cannot be read")
        try:
            events = parse_flat_keyed(read_text(self._f("memory.events")))
        except FileNotFoundError:
            events = {}
        try:
            cpu = parse_flat_keyed(read_text(self._f("cpu.stat")))
        except FileNotFoundError:
            cpu = {}
        return Counters(
            memory_peak_bytes=read_int(self._f("memory.peak")),
            memory_current_bytes=read_int(self._f("memory.current")),
            oom_kills=events.get("oom_kill", 0),
            cpu_user_seconds=cpu["user_usec"] / 1e6 if "user_usec" in cpu else None,
            cpu_system_seconds=cpu["system_usec"] / 1e6 if "system_usec" in cpu else None,
            memory_failcnt=events.get("max"),
            memory_pressure_usec=_pressure_total(self._f("memory.pressure")),
            cpu_pressure_usec=_pressure_total(self._f("cpu.pressure")),
        )

    def sample(self) -> Sample:
        mem = read_int(self._f("memory.current"))
        try:
            usage = parse_flat_keyed(read_text(self._f("cpu.stat"))).get("usage_usec")
        except FileNotFoundError:
            usage = None
        return Sample(memory_bytes=mem, cpu_seconds=usage / 1e6 if usage is not None else None)

    def kill_all(self, timeout: float = 5.0) -> int:
        if not self.exists():
            return 0
        before = self.pids()
        if os.path.exists(self._f("cgroup.kill")):
            try:
                write_text(self._f("cgroup.kill"), "1")
            except CgroupError:
                pass
            # The kernel empties cgroup.procs asynchronously; give it a moment before SIGKILLing leftovers.
            deadline = time.monotonic() + 0.5
            while self.pids() and time.monotonic() < deadline:
                time.sleep(0.005)
        return max(len(before), kill_pids_until_empty(self.pids, timeout))

    def remove(self) -> None:
        rmdir_tree(self.dir, self.backend.rmdir)

    def children(self) -> list[str]:
        try:
            with os.scandir(self.dir) as it:
                return sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
        except FileNotFoundError:
            return []

    def age_seconds(self, now: float | None = None) -> float:
        try:
            st = os.stat(self.dir)
        except FileNotFoundError:
            return 0.0
        return (now if now is not None else time.time()) - st.st_mtime
