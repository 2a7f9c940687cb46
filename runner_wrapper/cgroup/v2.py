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

Rules of a real kernel (Documentation/admin-guide/cgroup-v2.rst, "Enabling and
Disabling" and "Top-down Constraint"; gitlab-mechanics.md §11.5, verified on
Debian 12's 6.1 kernel): a child's ``memory.*`` and ``cpu.*`` interface files
exist only when its parent lists the controller in ``cgroup.subtree_control``;
the kernel adds them to existing children when the controller is enabled later,
but the wrapper never relies on that: :meth:`V2Group.create` creates every
missing level one at a time and enables ``+memory +cpu`` in each level *before*
creating the next, so the first job's very first stage already has
``memory.peak``.  The root cgroup has no ``memory.peak``, ``memory.max``,
``memory.current`` or ``cgroup.kill``, so capabilities are probed in a child
(:meth:`V2Backend.probe_child`).
"""

from __future__ import annotations

import os
import time
TYPE_CHECKING = False
if TYPE_CHECKING:  # typing stays out of the per-stage start-up path
    from typing import Callable

from runner_wrapper.cgroup.base import (
    Backend, CgroupError, Counters, Group, Sample, kill_pids_until_empty, parse_flat_keyed,
    read_int, read_text, rmdir_tree, tree_pids, write_text,
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

    def __init__(self, root: str, parent: str, rmdir: Callable[[str], None] = os.rmdir,
                 mkdir: Callable[[str], None] = os.mkdir, write: Callable[[str, str], None] = write_text) -> None:
        self.root = root
        self.parent = parent.strip("/")
        #: The three operations by which the kernel reacts to the wrapper (it creates a new cgroup's
        #: interface files on ``mkdir``, refuses ``rmdir`` of a non-empty one, and interprets writes).
        #: Injectable so tests can play the kernel on a plain directory (tests/wrapper/fake_cgroup_v2.py).
        self.rmdir = rmdir
        self.mkdir = mkdir
        self.write = write

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

    def probe_child(self) -> dict[str, object]:
        """Create a throw-away child of the parent, see which interface files the kernel gives it, remove it.

        The root cgroup never has ``memory.peak``, ``memory.max`` or ``cgroup.kill`` (cgroup-v2.rst: the
        root is exempt from resource control), so only a child tells what a job's cgroup will have.
        The probe is made in the parent, or in its nearest existing ancestor when the parent does not exist
        yet (so ``doctor`` run as root never creates a root-owned parent that a delegated runner could not
        write), with the controllers enabled as :meth:`V2Group.create` does.
        """
        base = os.path.normpath(self.parent_dir)
        root = os.path.normpath(self.root)
        while not os.path.isdir(base) and base.startswith(root + os.sep):
            base = os.path.dirname(base)
        probe = os.path.join(base, f"rightsizer-probe-{os.getpid()}")
        try:
            self.enable_controllers(base)
            self.mkdir(probe)
        except FileExistsError:
            pass
        except (CgroupError, OSError) as exc:
            return {"probe_error": str(exc) if isinstance(exc, CgroupError) else
                    f"cannot create cgroup {probe}: {exc.strerror}"}
        try:
            has = {name: os.path.exists(os.path.join(probe, name))
                   for name in ("memory.peak", "memory.max", "memory.events", "cpu.max", "cgroup.kill",
                                "memory.pressure")}
        finally:
            try:
                rmdir_tree(probe, self.rmdir)
            except CgroupError:
                pass
        return {"probe_cgroup": probe, **has}

    def describe(self) -> dict[str, object]:
        probe = self.probe_child()
        if "probe_error" in probe:
            unknown = f"unknown (no probe cgroup: {probe['probe_error']})"
            peak: str = unknown
            kill: object = None
            psi: object = None
        else:
            peak = "memory.peak" if probe["memory.peak"] else "memory.current (sampled)"
            kill = probe["cgroup.kill"]
            psi = probe["memory.pressure"]
        return {
            "backend": self.name,
            "root": self.root,
            "parent": self.parent,
            "controllers": sorted(self.available_controllers()),
            "probe": probe,
            "memory_peak_file": peak,
            "cgroup_kill": kill,
            "psi": psi,
        }

    def enable_controllers(self, directory: str) -> None:
        """Enable memory and cpu for the children of ``directory`` (which must exist) and of its ancestors.

        From the root down, each level gets the wanted controllers it is offered (its
        ``cgroup.controllers``) and lacks; asking for one that is not offered is ``ENOENT``
        (cgroup-v2.rst, "Top-down Constraint").  A delegated parent's ancestors already have them
        (systemd's ``Delegate=``), so nothing is written there.
        """
        chain = []
        d = os.path.normpath(directory)
        root = os.path.normpath(self.root)
        while d != root and d.startswith(root + os.sep):
            chain.append(d)
            d = os.path.dirname(d)
        chain.append(root)
        for d in reversed(chain):
            sub = os.path.join(d, "cgroup.subtree_control")
            try:
                have = set(read_text(sub).split())
                offered = set(read_text(os.path.join(d, "cgroup.controllers")).split())
            except FileNotFoundError:
                raise CgroupError(f"{d} is not a cgroup v2 directory (no cgroup.subtree_control)") from None
            missing = [c for c in WANTED if c in offered and c not in have]
            if missing:
                self.write(sub, " ".join("+" + c for c in missing))

    def make_dirs(self, directory: str) -> None:
        """Create ``directory`` and any missing ancestor below the root, one level at a time.

        Each existing level, from the root down, enables ``+memory +cpu`` for its children *before* the
        next level is created, so every new cgroup is born with ``memory.peak``/``memory.max``/``cpu.max``.
        Ancestors that already enable them (a delegated parent's, set up by systemd) are only read.
        """
        root = os.path.normpath(self.root)
        target = os.path.normpath(directory)
        missing: list[str] = []
        d = target
        while d != root and d.startswith(root + os.sep) and not os.path.isdir(d):
            missing.append(d)
            d = os.path.dirname(d)
        for new in reversed(missing):
            self.enable_controllers(os.path.dirname(new))
            try:
                self.mkdir(new)
            except FileExistsError:
                pass
            except OSError as exc:
                raise CgroupError(f"cannot create cgroup {new}: {exc.strerror}") from None


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
        """Create the cgroup (and missing ancestors), its parent's controllers enabled first."""
        if os.path.isdir(self.dir):
            return
        parent = os.path.dirname(self.dir)
        self.backend.make_dirs(parent)
        # Also for an existing parent: a parent made by an older wrapper, or by an admin, may lack them.
        self.backend.enable_controllers(parent)
        try:
            self.backend.mkdir(self.dir)
        except FileExistsError:
            pass
        except OSError as exc:
            raise CgroupError(f"cannot create cgroup {self.dir}: {exc.strerror}") from None

    def make_parent_of_stages(self) -> None:
        """Let this (job) cgroup delegate memory and cpu to its stage children."""
        self.backend.enable_controllers(self.dir)

    def _require(self, name: str, controller: str) -> str:
        path = self._f(name)
        if not os.path.exists(path):
            raise CgroupError(f"{path} does not exist: the {controller} controller is not enabled for "
                              f"{self.dir} (its parent's cgroup.subtree_control lacks +{controller})")
        return path

    def apply_limits(self, memory_bytes: int | None, cpu_cores: float | None) -> list[str]:
        done: list[str] = []
        if memory_bytes is not None:
            self.backend.write(self._require("memory.max", "memory"), str(int(memory_bytes)))
            done.append(f"memory.max={int(memory_bytes)}")
            if os.path.exists(self._f("memory.swap.max")):
                self.backend.write(self._f("memory.swap.max"), "0")
                done.append("memory.swap.max=0")
        if cpu_cores is not None:
            quota = max(1000, int(round(cpu_cores * CPU_PERIOD_US)))
            self.backend.write(self._require("cpu.max", "cpu"), f"{quota} {CPU_PERIOD_US}")
            done.append(f"cpu.max={quota} {CPU_PERIOD_US}")
        return done

    def attach_files(self) -> list[str]:
        return [self._f("cgroup.procs")]

    def add_pid(self, pid: int) -> None:
        self.backend.write(self._f("cgroup.procs"), str(pid))

    def pids(self) -> set[int]:
        return tree_pids(self.dir)

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
                self.backend.write(self._f("cgroup.kill"), "1")
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
