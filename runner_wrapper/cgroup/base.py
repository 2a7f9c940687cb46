"""The interface every measurement backend implements, and shared helpers."""

from __future__ import annotations

import errno
import os
import time

from runner_wrapper.lean import Record

TYPE_CHECKING = False
if TYPE_CHECKING:  # no runtime import of typing: this module is on every stage's start-up path
    from typing import Callable, Iterable

_SIGKILL = 9

__all__ = ["CgroupError", "Counters", "Sample", "Group", "Backend", "read_text", "read_int", "write_text",
           "parse_flat_keyed", "kill_pids_until_empty"]


class CgroupError(RuntimeError):
    """The cgroup filesystem refused an operation; the message names the file and the errno text."""


class Counters(Record):
    """What the kernel (or the fallback) says about one group, read before it is removed.

    ``memory_peak_bytes``: high-water mark (``memory.peak`` / ``memory.max_usage_in_bytes``),
    ``None`` if unknown; ``approximate``: figures come from sampling rather than kernel counters.
    """

    __slots__ = ("memory_peak_bytes", "memory_current_bytes", "oom_kills", "cpu_user_seconds",
                 "cpu_system_seconds", "memory_failcnt", "memory_pressure_usec", "cpu_pressure_usec", "approximate")
    _fields = __slots__
    _field_defaults = {"memory_peak_bytes": None, "memory_current_bytes": None, "oom_kills": 0,
                       "cpu_user_seconds": None, "cpu_system_seconds": None, "memory_failcnt": None,
                       "memory_pressure_usec": None, "cpu_pressure_usec": None, "approximate": False}
    memory_peak_bytes: int | None
    memory_current_bytes: int | None
    oom_kills: int
    cpu_user_seconds: float | None
    cpu_system_seconds: float | None
    memory_failcnt: int | None
    memory_pressure_usec: int | None
    cpu_pressure_usec: int | None
    approximate: bool

    @property
    def cpu_seconds(self) -> float | None:
        if self.cpu_user_seconds is None and self.cpu_system_seconds is None:
            return None
        return (self.cpu_user_seconds or 0.0) + (self.cpu_system_seconds or 0.0)


class Sample(Record):
    """One cheap reading for the sampler: current memory and cumulative CPU seconds."""

    __slots__ = ("memory_bytes", "cpu_seconds")
    _fields = __slots__
    _field_defaults: dict[str, object] = {}
    memory_bytes: int | None
    cpu_seconds: float | None


class Group:
    """One cgroup (or, for the fallback, one tracked process tree)."""

    backend: "Backend"
    rel: str

    def exists(self) -> bool:
        raise NotImplementedError

    def create(self) -> None:
        """Create the group (and missing ancestors); existing is fine."""
        raise NotImplementedError

    def apply_limits(self, memory_bytes: int | None, cpu_cores: float | None) -> list[str]:
        """Apply limits; returns human lines describing what was written."""
        raise NotImplementedError

    def attach_files(self) -> list[str]:
        """Files a freshly forked child writes its own pid to, before ``exec`` (empty for the fallback)."""
        raise NotImplementedError

    def add_pid(self, pid: int) -> None:
        raise NotImplementedError

    def pids(self) -> set[int]:
        raise NotImplementedError

    def read(self) -> Counters:
        raise NotImplementedError

    def sample(self) -> Sample:
        raise NotImplementedError

    def kill_all(self, timeout: float = 5.0) -> int:
        """Kill every process in the group; returns how many pids were signalled."""
        raise NotImplementedError

    def remove(self) -> None:
        """Remove the group (children first).  Processes must be gone (see :meth:`kill_all`)."""
        raise NotImplementedError

    def children(self) -> list[str]:
        """Names of child groups."""
        raise NotImplementedError

    def age_seconds(self, now: float | None = None) -> float:
        raise NotImplementedError


class Backend:
    #: ``cgroup-v2``, ``cgroup-v1`` or ``psutil`` (the record's ``host.backend``).
    name: str = ""
    approximate: bool = False
    #: Whether limits are enforced by the kernel.
    enforces_limits: bool = True

    def group(self, rel: str) -> Group:
        raise NotImplementedError

    def describe(self) -> dict[str, object]:
        """Facts for ``doctor`` (paths, controllers, features)."""
        raise NotImplementedError


# --------------------------------------------------------------------------- file helpers


def read_text(path: str) -> str:
    with open(path, "r") as fh:
        return fh.read()


def read_int(path: str) -> int | None:
    """An integer file (``max`` and missing files give ``None``)."""
    try:
        text = read_text(path).strip()
    except FileNotFoundError:
        return None
    if not text or text == "max":
        return None
    try:
        return int(text.split()[0])
    except ValueError:
        return None


def write_text(path: str, value: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError as exc:
        raise CgroupError(f"cannot open {path} for writing: {exc.strerror}") from None
    try:
        os.write(fd, value.encode())
    except OSError as exc:
        raise CgroupError(f"cannot write {value!r} to {path}: {exc.strerror}") from None
    finally:
        os.close(fd)


def parse_flat_keyed(text: str) -> dict[str, int]:
    """``key value`` lines (``memory.events``, ``cpu.stat``, ``memory.oom_control``) to a dict."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                out[parts[0]] = int(parts[1])
            except ValueError:
                pass
    return out


def parse_pids(text: str) -> set[int]:
    return {int(x) for x in text.split() if x.isdigit()}


def tree_pids(directory: str) -> set[int]:
    """Every pid in the cgroup at ``directory`` and its descendants (``cgroup.procs``, v1 and v2 alike);
    a child removed while walking is skipped."""
    out: set[int] = set()
    for root, _dirs, _files in os.walk(directory):
        try:
            out |= parse_pids(read_text(os.path.join(root, "cgroup.procs")))
        except FileNotFoundError:
            pass
    return out


def kill_pids_until_empty(list_pids: "Callable[[], set[int]]", timeout: float) -> int:
    """SIGKILL every listed pid, again and again, until the list is empty or ``timeout`` passes.

    Repeating matters: a process may fork between our read of the pid list and
    the kill.  Returns the number of distinct pids signalled.
    """
    me = os.getpid()
    signalled: set[int] = set()
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        pids = list_pids() - {me}
        if not pids:
            return len(signalled)
        for pid in pids:
            try:
                os.kill(pid, _SIGKILL)
                signalled.add(pid)
            except ProcessLookupError:
                pass
            except OSError as exc:  # pragma: no cover - EPERM on foreign processes
                if exc.errno != errno.ESRCH:
                    raise CgroupError(f"cannot kill pid {pid}: {exc.strerror}") from None
        if time.monotonic() > deadline:
            raise CgroupError(f"processes still alive after {timeout:.0f} s of SIGKILL: {sorted(pids)[:10]}")
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def rmdir_tree(path: str, rmdir: "Callable[[str], None]" = os.rmdir) -> None:
    """Remove a cgroup directory and its child cgroups, deepest first (cgroupfs has no rmtree)."""
    if not os.path.isdir(path):
        return
    for entry in _subdirs(path):
        rmdir_tree(os.path.join(path, entry), rmdir)
    for attempt in range(50):
        try:
            rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno == errno.EBUSY and attempt < 49:  # last task still exiting
                time.sleep(0.01)
                continue
            raise CgroupError(f"cannot remove cgroup {path}: {exc.strerror}") from None


def _subdirs(path: str) -> Iterable[str]:
    try:
        with os.scandir(path) as it:
            return [e.name for e in it if e.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return []
