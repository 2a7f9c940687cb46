"""A plain directory that behaves like the kernel's cgroup2 filesystem, for :class:`V2Backend`.

Every rule below is the kernel's, from Documentation/admin-guide/cgroup-v2.rst (Linux 6.1, the
Debian 12 kernel the real-kernel lane boots: tests/vm/cgroup2-lane.sh) and gitlab-mechanics.md §11.5;
where the fake is stricter than the kernel it says so.  Where it is more permissive it is listed in
docs/standin.md ("Fake cgroup v2 filesystem").

- "Controlling Controllers / Enabling and Disabling": a child's ``<controller>.*`` interface files
  exist only when its parent lists the controller in ``cgroup.subtree_control``; enabling one later
  adds the files to existing children.
- "Top-down Constraint": ``+ctrl`` in ``cgroup.subtree_control`` needs ``ctrl`` in the cgroup's own
  ``cgroup.controllers`` (else ``ENOENT``).
- "No Internal Process Constraint": a non-root cgroup with processes cannot enable domain controllers
  for its children, and a non-root cgroup whose ``subtree_control`` enables controllers cannot take
  processes (both ``EBUSY``).  The root is exempt.
- "Core Interface Files": ``cgroup.kill`` (5.14+) exists in non-root cgroups only; ``cpu.stat``
  (``usage_usec user_usec system_usec``) is a core file present without the cpu controller; the PSI
  files ``*.pressure`` are present in every cgroup.
- "Memory": ``memory.current/peak/max/events/swap.max`` exist in non-root cgroups only (the root is
  never limited).  Debian 6.1 root listing (checked in the VM): ``cgroup.controllers cgroup.max.depth
  cgroup.max.descendants cgroup.pressure cgroup.procs cgroup.stat cgroup.subtree_control
  cgroup.threads cpu.pressure cpu.stat cpuset.cpus.effective cpuset.mems.effective io.cost.model
  io.cost.qos io.pressure io.stat memory.numa_stat memory.pressure memory.reclaim memory.stat
  misc.capacity``.
- kernfs cannot create files: opening a missing interface file with ``O_CREAT`` is ``EACCES``
  (checked on this host's cgroupfs).
- ``rmdir`` of a cgroup with child cgroups or live processes is ``EBUSY``; an empty cgroup's
  interface files go with it.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
from pathlib import Path

from runner_wrapper.cgroup.base import CgroupError

#: The order the kernel lists controllers in (cgroup.controllers of Debian 6.1's root).
KERNEL_ORDER = ("cpuset", "cpu", "io", "memory", "hugetlb", "pids", "rdma", "misc")

ROOT_FILES = {
    "cgroup.max.depth": "max\n", "cgroup.max.descendants": "max\n", "cgroup.stat": "nr_descendants 0\n",
    "cgroup.procs": "", "cgroup.threads": "", "cgroup.subtree_control": "",
    "cpu.stat": "usage_usec 0\nuser_usec 0\nsystem_usec 0\n", "memory.stat": "anon 0\n",
    "memory.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
    "cpu.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
    "io.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
}
CORE_FILES = {
    **ROOT_FILES, "cgroup.events": "populated 0\nfrozen 0\n", "cgroup.type": "domain\n", "cgroup.freeze": "0\n",
    "cgroup.kill": "",
}
CONTROLLER_FILES = {
    "memory": {"memory.current": "0\n", "memory.peak": "0\n", "memory.max": "max\n", "memory.high": "max\n",
               "memory.low": "0\n", "memory.min": "0\n", "memory.oom.group": "0\n", "memory.swap.max": "max\n",
               "memory.swap.current": "0\n",
               "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
               "memory.events.local": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n"},
    "cpu": {"cpu.max": "max 100000\n", "cpu.weight": "100\n"},
    "pids": {"pids.max": "max\n", "pids.current": "0\n"},
    "io": {"io.max": "", "io.weight": "default 100\n"},
}
CPU_STAT_WITH_CPU = "usage_usec 0\nuser_usec 0\nsystem_usec 0\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n"


def _oserror(code: int, path: str) -> OSError:
    return OSError(code, os.strerror(code), path)


class FakeCgroup2:
    """The kernel's side of a cgroup2 mount at ``root``: pass :meth:`mkdir`, :meth:`rmdir` and
    :meth:`write` to ``V2Backend(root, parent, rmdir=..., mkdir=..., write=...)``."""

    def __init__(self, root: Path, controllers: tuple[str, ...] = ("cpuset", "cpu", "io", "memory", "hugetlb",
                                                                       "pids")) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        for name, text in ROOT_FILES.items():
            (self.root / name).write_text(text)
        (self.root / "cgroup.controllers").write_text(" ".join(controllers) + "\n")
        #: Every accepted write, in order: (path relative to the root, value).
        self.writes: list[tuple[str, str]] = []

    # ------------------------------------------------------------------ helpers
    def _rel(self, path: str | Path) -> str:
        return os.path.relpath(path, self.root)

    @staticmethod
    def _set(path: Path) -> list[str]:
        return path.read_text().split()

    def _is_root(self, d: Path) -> bool:
        return d.resolve() == self.root.resolve()

    def _add_controller_files(self, d: Path, ctrl: str) -> None:
        for name, text in CONTROLLER_FILES.get(ctrl, {}).items():
            if not (d / name).exists():
                (d / name).write_text(text)
        if ctrl == "cpu":
            (d / "cpu.stat").write_text(CPU_STAT_WITH_CPU)
        offered = set(self._set(d / "cgroup.controllers")) | {ctrl}
        (d / "cgroup.controllers").write_text(" ".join(c for c in KERNEL_ORDER if c in offered) + "\n")

    def _children(self, d: Path) -> list[Path]:
        return [e for e in d.iterdir() if e.is_dir()]

    # ------------------------------------------------------------------ the kernel's operations
    def mkdir(self, path: str) -> None:
        d = Path(path)
        os.mkdir(d)  # FileNotFoundError without the parent, FileExistsError if it exists: as the kernel
        for name, text in CORE_FILES.items():
            (d / name).write_text(text)
        (d / "cgroup.controllers").write_text("")
        for ctrl in self._set(d.parent / "cgroup.subtree_control"):
            self._add_controller_files(d, ctrl)

    def rmdir(self, path: str) -> None:
        d = Path(path)
        if not d.is_dir():
            raise _oserror(errno.ENOENT, path)
        if self._is_root(d) or self._children(d) or (d / "cgroup.procs").read_text().split():
            raise _oserror(errno.EBUSY, path)
        shutil.rmtree(d)

    def write(self, path: str, value: str) -> None:
        p = Path(path)
        if not p.exists():  # kernfs: no O_CREAT
            raise CgroupError(f"cannot open {path} for writing: {os.strerror(errno.EACCES)}")
        d, name = p.parent, p.name

        def refuse(code: int) -> None:
            raise CgroupError(f"cannot write {value!r} to {path}: {os.strerror(code)}")

        if name == "cgroup.subtree_control":
            enabled = self._set(p)
            offered = set(self._set(d / "cgroup.controllers"))
            for tok in value.split():
                if tok[:1] not in "+-" or not tok[1:]:
                    refuse(errno.EINVAL)
                if tok[1:] not in offered:
                    refuse(errno.ENOENT)
            adds = [t[1:] for t in value.split() if t[0] == "+" and t[1:] not in enabled]
            if adds and not self._is_root(d) and (d / "cgroup.procs").read_text().split():
                refuse(errno.EBUSY)
            now = [c for c in KERNEL_ORDER
                   if (c in enabled or c in adds) and f"-{c}" not in value.split()]
            p.write_text(" ".join(now) + ("\n" if now else ""))
            for child in self._children(d):
                for ctrl in adds:
                    self._add_controller_files(child, ctrl)
        elif name == "cgroup.procs":
            if not value.strip().isdigit():
                refuse(errno.EINVAL)
            if not self._is_root(d) and self._set(d / "cgroup.subtree_control"):
                refuse(errno.EBUSY)
            pids = self._set(p)
            p.write_text("\n".join(pids + [value.strip()]) + "\n")
        elif name == "cgroup.kill":
            if value.strip() != "1":
                refuse(errno.EINVAL)
            # The kernel SIGKILLs every task of the cgroup and its descendants; exited tasks leave cgroup.procs.
            for sub, _dirs, _files in os.walk(d):
                procs = Path(sub) / "cgroup.procs"
                for pid in self._set(procs):
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                procs.write_text("")
        elif name in ("memory.max", "memory.high", "memory.swap.max"):
            v = value.strip()
            if v != "max" and not v.isdigit():
                refuse(errno.EINVAL)
            p.write_text(v + "\n")
        elif name == "cpu.max":
            parts = value.split()
            if not parts or len(parts) > 2 or not (parts[0] == "max" or parts[0].isdigit()) \
                    or (len(parts) == 2 and not parts[1].isdigit()):
                refuse(errno.EINVAL)
            p.write_text(value.strip() + "\n")
        else:
            p.write_text(value)
        self.writes.append((self._rel(p), value))

    # ------------------------------------------------------------------ what a test plays as the kernel
    def set_counters(self, d: Path, **files: str) -> None:
        """Counter files the kernel maintains (``memory.peak`` ...); only files that exist can be set."""
        for name, text in files.items():
            name = name.replace("_", ".", 1)
            if not (d / name).exists():
                raise AssertionError(f"{d / name} does not exist in this cgroup (controller not enabled?)")
            (d / name).write_text(text)
