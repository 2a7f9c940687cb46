"""cgroup v1: separate ``memory``, ``cpu`` and ``cpuacct`` hierarchies.

Counters (peers.md §12.2): ``memory.max_usage_in_bytes`` (peak, RSS + cache),
``memory.oom_control`` ``oom_kill`` (Linux 4.13+), ``memory.failcnt``,
``cpuacct.usage_user`` / ``cpuacct.usage_sys`` (ns; ``cpuacct.stat`` ticks on
older kernels).  Limits: ``memory.limit_in_bytes`` (and
``memory.memsw.limit_in_bytes`` when swap accounting exists, so swapping cannot
hide an OOM), ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us`` = 100000.
v1 has no ``cgroup.kill``: :meth:`V1Group.kill_all` SIGKILLs every pid in
``cgroup.procs`` until the group is empty.
"""

from __future__ import annotations

import os
import time

from runner_wrapper.cgroup.base import (
    Backend, CgroupError, Counters, Group, Sample, kill_pids_until_empty, parse_flat_keyed,
    read_int, read_text, rmdir_tree, tree_pids, write_text,
)

__all__ = ["V1Backend", "V1Group", "CFS_PERIOD_US", "v1_hierarchies"]

CFS_PERIOD_US = 100_000
CONTROLLERS = ("memory", "cpu", "cpuacct")


def v1_hierarchies(v1_root: str) -> dict[str, str]:
    """Mounted v1 hierarchies under ``v1_root`` for the controllers we use (combined mounts allowed)."""
    found: dict[str, str] = {}
    for c in CONTROLLERS:
        path = os.path.join(v1_root, c)
        if os.path.isfile(os.path.join(path, "cgroup.procs")):
            found[c] = os.path.realpath(path)
    return found


class V1Backend(Backend):
    name = "cgroup-v1"

    def __init__(self, v1_root: str, parent: str, limit_swap: bool = True) -> None:
        self.v1_root = v1_root
        self.parent = parent.strip("/")
        self.hierarchies = v1_hierarchies(v1_root)
        if "memory" not in self.hierarchies:
            raise CgroupError(f"no cgroup v1 memory hierarchy under {v1_root}")
        self.limit_swap = limit_swap

    def group(self, rel: str) -> "V1Group":
        return V1Group(self, rel.strip("/"))

    def parent_dirs(self) -> dict[str, str]:
        return {c: os.path.join(root, self.parent) for c, root in self.hierarchies.items()}

    def describe(self) -> dict[str, object]:
        mem = self.hierarchies["memory"]
        return {
            "backend": self.name,
            "hierarchies": dict(self.hierarchies),
            "parent": self.parent,
            "controllers": sorted(self.hierarchies),
            "memory_peak_file": "memory.max_usage_in_bytes",
            "oom_kill_counter": "oom_kill" in read_text(os.path.join(mem, "memory.oom_control")),
            "swap_accounting": os.path.exists(os.path.join(mem, "memory.memsw.limit_in_bytes")),
            "cgroup_kill": False,
        }


class V1Group(Group):
    def __init__(self, backend: V1Backend, rel: str) -> None:
        self.backend = backend
        self.rel = rel
        self.dirs = {c: os.path.join(root, backend.parent, rel) for c, root in backend.hierarchies.items()}
        # One directory per distinct mount (cpu and cpuacct are often co-mounted).
        self._unique = list(dict.fromkeys(self.dirs.values()))
        self._cpu_limited = False

    def _f(self, controller: str, name: str) -> str:
        return os.path.join(self.dirs[controller], name)

    def exists(self) -> bool:
        return os.path.isdir(self.dirs["memory"])

    def create(self) -> None:
        for d in self._unique:
            try:
                os.makedirs(d, exist_ok=True)
            except OSError as exc:
                raise CgroupError(f"cannot create cgroup {d}: {exc.strerror}") from None
        # Hierarchical accounting so the job group's peak covers its stage children.
        use_h = self._f("memory", "memory.use_hierarchy")
        try:
            if read_int(use_h) == 0:
                write_text(use_h, "1")
        except (CgroupError, OSError):
            pass  # read-only on modern kernels (always hierarchical)

    def apply_limits(self, memory_bytes: int | None, cpu_cores: float | None) -> list[str]:
        done: list[str] = []
        if memory_bytes is not None:
            write_text(self._f("memory", "memory.limit_in_bytes"), str(int(memory_bytes)))
            done.append(f"memory.limit_in_bytes={int(memory_bytes)}")
            memsw = self._f("memory", "memory.memsw.limit_in_bytes")
            if self.backend.limit_swap and os.path.exists(memsw):
                try:
                    write_text(memsw, str(int(memory_bytes)))
                    done.append(f"memory.memsw.limit_in_bytes={int(memory_bytes)}")
                except CgroupError:
                    pass  # swap accounting disabled at boot: the memory limit still holds
        if cpu_cores is not None and "cpu" in self.dirs:
            self._cpu_limited = True
            quota = max(1000, int(round(cpu_cores * CFS_PERIOD_US)))
            write_text(self._f("cpu", "cpu.cfs_period_us"), str(CFS_PERIOD_US))
            write_text(self._f("cpu", "cpu.cfs_quota_us"), str(quota))
            done.append(f"cpu.cfs_quota_us={quota} cpu.cfs_period_us={CFS_PERIOD_US}")
        return done

    def attach_files(self) -> list[str]:
        """The ``tasks`` files: the freshly forked, single-threaded child writes ``0`` (itself) there.

        Moving *the current thread* is the one attach for which the kernel (6.0+) skips the global
        ``cgroup_threadgroup_rwsem`` write lock, whose first use in a process waits for an RCU grace
        period (10-20 ms measured here, on every stage); writing a pid to ``cgroup.procs`` takes it.
        A forked child has one thread, so moving the thread moves the process.  The cpu hierarchy
        (when it is a separate mount) is skipped unless a CPU limit was applied: cpuacct still
        accounts the CPU time.
        """
        dirs = self._unique
        if not self._cpu_limited and "cpu" in self.dirs and self.dirs["cpu"] not in (
                self.dirs.get("cpuacct"), self.dirs["memory"]):
            dirs = [d for d in dirs if d != self.dirs["cpu"]]
        return [os.path.join(d, "tasks") for d in dirs]

    def add_pid(self, pid: int) -> None:
        for f in self.attach_files():
            write_text(os.path.join(os.path.dirname(f), "cgroup.procs"), str(pid))

    def pids(self) -> set[int]:
        out: set[int] = set()
        for d in self._unique:
            out |= tree_pids(d)
        return out

    def read(self) -> Counters:
        mem = self.dirs["memory"]
        try:
            oom = parse_flat_keyed(read_text(os.path.join(mem, "memory.oom_control")))
        except FileNotFoundError:
            raise CgroupError(f"cgroup {mem} is gone: counters cannot be read") from None
        user = system = None
        if "cpuacct" in self.dirs:
            # cpuacct.usage is exact (scheduler runtime, ns); usage_user/usage_sys come from tick-based
            # cpustat (and count IRQ time as system), so they only give the user/system *split*.
            total = read_int(self._f("cpuacct", "cpuacct.usage"))
            u = read_int(self._f("cpuacct", "cpuacct.usage_user"))
            s = read_int(self._f("cpuacct", "cpuacct.usage_sys"))
            if total is not None and u is not None and s is not None:
                share = u / (u + s) if (u + s) > 0 else 1.0
                user, system = total * share / 1e9, total * (1 - share) / 1e9
            else:
                try:
                    st = parse_flat_keyed(read_text(self._f("cpuacct", "cpuacct.stat")))
                    tck = os.sysconf("SC_CLK_TCK")
                    user, system = st.get("user", 0) / tck, st.get("system", 0) / tck
                except FileNotFoundError:
                    pass
        return Counters(
            memory_peak_bytes=read_int(os.path.join(mem, "memory.max_usage_in_bytes")),
            memory_current_bytes=read_int(os.path.join(mem, "memory.usage_in_bytes")),
            oom_kills=oom.get("oom_kill", 0) + self._children_oom_kills(),
            cpu_user_seconds=user,
            cpu_system_seconds=system,
            memory_failcnt=read_int(os.path.join(mem, "memory.failcnt")),
        )

    def _children_oom_kills(self) -> int:
        # v1 counts oom_kill only in the victim's own memcg (not hierarchically).
        total = 0
        mem = self.dirs["memory"]
        for root, dirs, _files in os.walk(mem):
            if root == mem:
                continue
            try:
                total += parse_flat_keyed(read_text(os.path.join(root, "memory.oom_control"))).get("oom_kill", 0)
            except FileNotFoundError:
                pass
        return total

    def sample(self) -> Sample:
        mem = read_int(self._f("memory", "memory.usage_in_bytes"))
        cpu = read_int(self._f("cpuacct", "cpuacct.usage")) if "cpuacct" in self.dirs else None
        return Sample(memory_bytes=mem, cpu_seconds=cpu / 1e9 if cpu is not None else None)

    def kill_all(self, timeout: float = 5.0) -> int:
        if not self.exists():
            return 0
        return kill_pids_until_empty(self.pids, timeout)

    def remove(self) -> None:
        for d in self._unique:
            rmdir_tree(d)

    def children(self) -> list[str]:
        try:
            with os.scandir(self.dirs["memory"]) as it:
                return sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
        except FileNotFoundError:
            return []

    def age_seconds(self, now: float | None = None) -> float:
        try:
            st = os.stat(self.dirs["memory"])
        except FileNotFoundError:
            return 0.0
        return (now if now is not None else time.time()) - st.st_mtime
