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
    """The command could not be started inside the cgroup.

    ``errno`` is the error of ``exec`` (``ENOENT``: no such command; ``EACCES``/``ENOEXEC``: not
    executable) and ``None`` when joining the cgroup failed before ``exec``.
    """

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


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


def _set_pdeathsig() -> None:
    """``prctl(PR_SET_PDEATHSIG, SIGKILL)``: the child dies with the process that started it."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG = 1 (linux/prctl.h), SIGKILL = 9


def spawn_in_cgroup(argv: Sequence[str], attach_files: Sequence[str], env: Mapping[str, str],
                    cwd: str | None = None, pre_exec: Callable[[], None] | None = None,
                    pdeathsig: bool = False) -> int:
    """Fork, join the cgroup(s), ``exec``; returns the child's pid or raises :class:`SpawnError`.

    ``pre_exec`` runs in the child after it joined the cgroup (as root, the only moment it may write
    ``cgroup.procs``) and before ``cwd``/``exec``: :mod:`runner_wrapper.isolation` drops privileges there.
    ``pdeathsig``: the command is SIGKILLed if this process dies first (``measure``; a SIGKILLed
    ``measure`` must not leave it running).
    """
    if pdeathsig:
        import ctypes  # noqa: F401 - loaded before fork, so the child only calls into it
    parent = os.getpid()
    r, w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:  # child: only async-signal-safe-ish work, then exec
        step = "cgroup"
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
                step = "user"
                pre_exec()
            if pdeathsig:
                # Only now: the kernel clears the parent-death signal whenever the credentials change
                # (kernel/cred.c commit_creds: "task->pdeath_signal = 0" on a new euid/egid), so set
                # before pre_exec drops to the build user it would be gone.
                step = "pdeathsig"
                _set_pdeathsig()
                if os.getppid() != parent:  # the parent died before prctl took effect
                    os._exit(137)
            if cwd:
                step = "cwd"
                os.chdir(cwd)
            step = "exec"
            os.execvpe(argv[0], list(argv), dict(env))
        except BaseException as exc:  # noqa: BLE001 - report anything to the parent
            try:
                # "<step> <errno> <text>": the command as given, never execvpe's last PATH candidate.
                code = getattr(exc, "errno", None) or 0
                text = getattr(exc, "strerror", None) or str(exc)
                if step != "exec" and getattr(exc, "filename", None):
                    text = f"{exc.filename}: {text}"  # type: ignore[attr-defined]
                os.write(w, f"{step} {code} {text}".encode()[:1000])
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
        step, code, text = (b"".join(chunks).decode("utf-8", "replace").split(" ", 2) + ["", ""])[:3]
        errno = int(code) if code.isdigit() and int(code) else None
        if step == "exec":
            raise SpawnError(f"{argv[0]}: {text}", errno)
        if step == "cwd":
            raise SpawnError(f"cannot change to {cwd}: {text}")
        if step == "user":
            raise SpawnError(f"cannot switch to the build user: {text}")
        if step == "pdeathsig":
            raise SpawnError(f"cannot set the parent-death signal: {text}")
        raise SpawnError(f"cannot join the cgroup: {text}")
    return pid


def wait_child(pid: int) -> Exit:
    """``wait4`` the child (signal handlers may run meanwhile; EINTR is retried by Python)."""
    _pid, status, ru = os.wait4(pid, 0)
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    return Exit(code=code, signal=sig, user_seconds=ru.ru_utime, system_seconds=ru.ru_stime,
                maxrss_bytes=ru.ru_maxrss * 1024)
