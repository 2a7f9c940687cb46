"""Start a command already inside a cgroup, and wait for it.

The child is forked, writes its own pid to the group's ``cgroup.procs`` files
(``0`` to the ``tasks`` files on cgroup v1, see :meth:`V1Group.attach_files`),
and only then ``exec``-s the command, so not one instruction of the build runs
outside the cgroup.  Its stdin/stdout/stderr are inherited: the build's output
reaches the job log unchanged, without passing through Python.  An error in the
child before ``exec`` (cgroup refused the pid, command not found) is reported
back through a close-on-exec pipe, as :mod:`subprocess` does.
"""

from __future__ import annotations

import _signal  # the C half of `signal`, which would import enum (start-up time on every stage)
import os

from runner_wrapper.lean import Record

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing and signal (which imports enum) stay out of the per-stage start-up path
    from typing import Callable, Mapping, Sequence

__all__ = ["SpawnError", "Exit", "spawn_in_cgroup", "wait_child"]


class SpawnError(RuntimeError):
    """The command could not be started inside the cgroup."""


class Exit(Record):
    """How the child ended, with its resource usage (``wait4``)."""

    __slots__ = ("code", "signal", "user_seconds", "system_seconds", "maxrss_bytes")
    _fields = __slots__
    _field_defaults: dict[str, object] = {}
    code: int | None
    signal: int | None
    user_seconds: float
    system_seconds: float
    maxrss_bytes: int

    @property
    def shell_code(self) -> int:
        """The shell convention: the exit code, or 128 + signal number."""
        if self.code is not None:
            return self.code
        return 128 + (self.signal or 0)


def spawn_in_cgroup(argv: Sequence[str], attach_files: Sequence[str], env: Mapping[str, str],
                    cwd: str | None = None, pre_exec: Callable[[], None] | None = None) -> int:
    """Fork, join the cgroup(s), ``exec``; returns the child's pid or raises :class:`SpawnError`.

    ``pre_exec`` runs in the child after it joined the cgroup (as root, the only moment it may write
    ``cgroup.procs``) and before ``cwd``/``exec``: :mod:`runner_wrapper.isolation` drops privileges there.
    """
    r, w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:  # child: only async-signal-safe-ish work, then exec
        try:
            os.close(r)
            for sig in (_signal.SIGPIPE, _signal.SIGXFSZ, _signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP):
                _signal.signal(sig, _signal.SIG_DFL)
            me = str(os.getpid()).encode()
            for path in attach_files:
                fd = os.open(path, os.O_WRONLY)
                try:
                    # v1 ``tasks``: "0" = this (only) thread, the attach without the global lock.
                    os.write(fd, b"0" if path.endswith("/tasks") else me)
                finally:
                    os.close(fd)
            if pre_exec is not None:
                pre_exec()
            if cwd:
                os.chdir(cwd)
            os.execvpe(argv[0], list(argv), dict(env))
        except BaseException as exc:  # noqa: BLE001 - report anything to the parent
            try:
                what = getattr(exc, "filename", None) or argv[0]
                os.write(w, f"{what}: {getattr(exc, 'strerror', None) or exc}".encode()[:1000])
            finally:
                os._exit(127)
    os.close(w)
    chunks = []
    while True:
        data = os.read(r, 1024)
        if not data:
            break
        chunks.append(data)
    os.close(r)
    if chunks:
        os.waitpid(pid, 0)
        raise SpawnError(b"".join(chunks).decode("utf-8", "replace"))
    return pid


def wait_child(pid: int) -> Exit:
    """``wait4`` the child (signal handlers may run meanwhile; EINTR is retried by Python)."""
    _pid, status, ru = os.wait4(pid, 0)
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    return Exit(code=code, signal=sig, user_seconds=ru.ru_utime, system_seconds=ru.ru_stime,
                maxrss_bytes=ru.ru_maxrss * 1024)
