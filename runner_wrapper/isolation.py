"""Keep the signing key out of the build's reach: run the build as a separate, unprivileged user.

The threat (``docs/usage-record.md``, "Threat model"): GitLab Runner starts every driver call with
its own uid and the build inherits it (gitlab-mechanics.md §11.4), so anything the driver can read --
its ``/proc/<pid>/environ``, ``wrapper.toml``, a key file, the job state the next marker is built
from -- the build can read or write too, and a build that has the key can sign any figures.

The enforcement mirrors what GitLab Runner's own shell executor does on a packaged install: the
service runs as root and the scripts run as an unprivileged user (``gitlab-runner run --user``,
R: ``docs/executors/shell.md`` "Running as unprivileged user").  With ``[signing] build_user`` set
and the driver running as root, each stage script runs as that user, so the kernel refuses it:

- ``/proc/<driver pid>/environ`` and ``/proc/<driver pid>/mem`` of every root ancestor
  (``ptrace_may_access``: another uid and no ``CAP_SYS_PTRACE``, kernel ``Documentation/filesystems/proc.rst``);
- the key file (``[signing] key_file``, mode 0600 root) and the runner's ``TMPDIR`` (0700, the job
  response file, the exit-code file and, by default, the job state);
- signals to the driver, writes to its cgroup files (root-owned) and moving itself out of the cgroup.

The build still needs its script (in the runner's 0700 ``TMPDIR``): the driver reads it, and the child,
*after* dropping its privileges, writes the copy into the job's build directory
``<[signing] build_dir>/job-<id>`` (owned by the build user, also its ``TMPDIR``), so root never writes
into a directory the build controls.  ``HOME``, ``USER`` and ``LOGNAME`` are the build user's, as
``su`` sets them (util-linux ``su(1)``), which is how the shell executor switches user.

Imports only :mod:`os` at module level (the stage path is start-up sensitive); :mod:`pwd` and
:mod:`grp` are C built-ins loaded when a build user is configured.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

__all__ = ["IsolationError", "BuildUser", "resolve_build_user", "read_key_file", "key_file_problem",
           "job_build_dir", "stage_launch", "remove_job_build_dir", "DEFAULT_BUILD_DIR"]

#: Where per-job build directories live (root-owned, mode 0711: the build user may traverse, not list).
DEFAULT_BUILD_DIR = "/var/lib/gitlab-rightsizer/build"


class IsolationError(RuntimeError):
    """The build cannot be isolated as configured (message names the setting and the fix)."""


class BuildUser:
    """The unprivileged user a build runs as."""

    __slots__ = ("name", "uid", "gid", "groups", "home")

    def __init__(self, name: str, uid: int, gid: int, groups: tuple[int, ...], home: str) -> None:
        self.name, self.uid, self.gid, self.groups, self.home = name, uid, gid, groups, home


def resolve_build_user(name: str, euid: int | None = None) -> BuildUser:
    """Look ``[signing] build_user`` up; :class:`IsolationError` when it cannot be enforced."""
    euid = os.geteuid() if euid is None else euid
    if euid != 0:
        raise IsolationError(f"[signing] build_user = {name!r} needs the driver to run as root (it runs as uid "
                             f"{euid}): run gitlab-runner as root, or leave build_user empty (records can then be "
                             f"forged by builds, see docs/usage-record.md)")
    import pwd

    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        raise IsolationError(f"[signing] build_user = {name!r}: no such user on this host") from None
    if pw.pw_uid == 0:
        raise IsolationError(f"[signing] build_user = {name!r} is root (uid 0): use an unprivileged user")
    try:
        groups = tuple(os.getgrouplist(name, pw.pw_gid))
    except OSError:
        groups = (pw.pw_gid,)
    return BuildUser(name, pw.pw_uid, pw.pw_gid, groups, pw.pw_dir)


def read_key_file(path: str) -> bytes:
    """The key in ``[signing] key_file``: its first line without surrounding whitespace.

    Raises :class:`OSError` when unreadable and :class:`ValueError` when empty.
    """
    with open(path, "rb") as fh:
        first = fh.read(4096).split(b"\n", 1)[0].strip()
    if not first:
        raise ValueError(f"{path}: the key file is empty")
    return first


def key_file_problem(path: str, build_uid: int | None = None) -> str | None:
    """Why ``path`` does not keep the key from builds, or ``None`` when it does.

    The file and every directory above it must be owned by root (or the driver's uid) and not
    writable by others; the file must not be readable by group or others (0600/0400).
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"[signing] key_file {path}: cannot read: {exc.strerror}"
    owners = {0, os.geteuid()}
    if st.st_uid not in owners or (build_uid is not None and st.st_uid == build_uid):
        return f"[signing] key_file {path} is owned by uid {st.st_uid}: it must belong to root"
    if st.st_mode & 0o077:
        return (f"[signing] key_file {path} has mode {st.st_mode & 0o777:04o}: builds can read it; "
                f"chmod 0600 it")
    d = os.path.dirname(os.path.abspath(path))
    while True:
        try:
            dst = os.stat(d)
        except OSError as exc:
            return f"[signing] key_file {path}: cannot inspect {d}: {exc.strerror}"
        if dst.st_uid not in owners or (dst.st_mode & 0o022 and not dst.st_mode & 0o1000):  # sticky: only the owner renames
            return f"[signing] key_file {path}: directory {d} can be changed by others: the key can be replaced"
        if d == "/":
            return None
        d = os.path.dirname(d)


def job_build_dir(base: str, job_id: int, user: BuildUser) -> str:
    """``<base>/job-<id>``, mode 0700, owned by the build user (created on first use).

    ``base`` is created root-owned 0711 when missing; it must not be writable by anyone but root
    (else a build could plant ``job-<next id>`` as a symlink for a later job).
    """
    try:
        os.makedirs(base, mode=0o711, exist_ok=True)
        st = os.lstat(base)
    except OSError as exc:
        raise IsolationError(f"[signing] build_dir {base}: cannot create: {exc.strerror}") from None
    if st.st_uid != 0 or st.st_mode & 0o022 or (st.st_mode & 0o170000) != 0o040000:  # S_ISDIR, not a symlink
        raise IsolationError(f"[signing] build_dir {base} must be a directory owned by root and writable only "
                             f"by root (it is uid {st.st_uid}, mode {st.st_mode & 0o777:04o})")
    path = os.path.join(base, f"job-{job_id}")
    try:
        os.mkdir(path, 0o700)
        os.chown(path, user.uid, user.gid)
    except FileExistsError:
        st = os.lstat(path)
        if (st.st_mode & 0o170000) != 0o040000 or st.st_uid != user.uid:
            raise IsolationError(f"{path} is not a directory of build user {user.name}") from None
    except OSError as exc:
        raise IsolationError(f"{path}: cannot create: {exc.strerror}") from None
    return path


def drop_privileges(user: BuildUser) -> None:
    """In the forked child: become ``user`` for good (groups, then gid, then uid)."""
    os.setgroups(list(user.groups))
    os.setresgid(user.gid, user.gid, user.gid)
    os.setresuid(user.uid, user.uid, user.uid)


def stage_launch(user: BuildUser, build_dir: str, script: str, stage: str, attempt: int,
                 environ: dict[str, str]) -> tuple[str, dict[str, str], "Callable[[], None]"]:
    """How to start one stage as ``user``: ``(script_copy_path, env, pre_exec)``.

    The driver reads ``script`` now (as root); ``pre_exec`` runs in the forked child after it joined
    the cgroup: it drops privileges, then writes the copy (``O_EXCL|O_NOFOLLOW``, as the build user).
    """
    try:
        with open(script, "rb") as fh:
            body = fh.read()
    except OSError as exc:
        raise IsolationError(f"cannot read the stage script {script}: {exc.strerror}") from None
    safe = "".join(ch if ch.isalnum() or ch in "_.-" else "_" for ch in stage)[:80] or "stage"
    copy = os.path.join(build_dir, f".rightsizer-{safe}-{attempt}.sh")
    env = dict(environ)
    env.update(TMPDIR=build_dir, HOME=user.home, USER=user.name, LOGNAME=user.name)

    def pre_exec() -> None:
        drop_privileges(user)
        try:
            os.unlink(copy)
        except FileNotFoundError:
            pass
        fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o500)
        try:
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.chdir(build_dir)

    return copy, env, pre_exec


def remove_job_build_dir(base: str, job_id: int, user: BuildUser) -> None:
    """Empty ``<base>/job-<id>`` *as the build user* (a forked child), then remove it as root.

    Root never follows a path the build controls: the tree is deleted with the build's own rights
    and only the (root-owned) base directory's entry is removed by root.
    """
    path = os.path.join(base, f"job-{job_id}")
    if not os.path.isdir(path):
        return
    pid = os.fork()
    if pid == 0:
        try:
            drop_privileges(user)
            # Builds leave read-only trees (Go's module cache is 0555, ``chmod -R a-w``): make every
            # directory writable first, as its owner, or its entries cannot be unlinked.  Symbolic
            # links are not directories here; following one is harmless with the build's own rights.
            os.chmod(path, 0o700)
            for _root, dirs, _files, rootfd in os.fwalk(path, topdown=True):
                for name in dirs:
                    try:
                        os.chmod(name, 0o700, dir_fd=rootfd)
                    except OSError:
                        pass
            for root, dirs, files, rootfd in os.fwalk(path, topdown=False):
                for name in files:
                    os.unlink(name, dir_fd=rootfd)
                for name in dirs:
                    try:
                        os.rmdir(name, dir_fd=rootfd)
                    except NotADirectoryError:  # a symlink to a directory
                        os.unlink(name, dir_fd=rootfd)
            os._exit(0)
        except BaseException:  # noqa: BLE001 - the parent reports the leftover
            os._exit(1)
    _pid, status = os.waitpid(pid, 0)
    try:
        os.rmdir(path)
    except OSError as exc:
        raise IsolationError(f"{path}: not removed: {exc.strerror}") from None


def protection_report(signing, builds_dir: str, state_dir: str, config_path: str | None,
                      euid: int | None = None) -> tuple[str, list[str], list[str]]:
    """What ``doctor`` says about record forgery: ``(summary, warnings, problems)``.

    ``signing`` is a :class:`runner_wrapper.config.SigningSettings`.  A warning means records can be
    forged by builds on this host (the wrapper still works); a problem means a stage will fail or
    the key is exposed although ``build_user`` is set.
    """
    euid = os.geteuid() if euid is None else euid
    warnings: list[str] = []
    problems: list[str] = []
    if not signing.build_user:
        warnings.append(
            f"usage records can be forged by builds: they run with the driver's uid {euid} and can read the "
            f"signing key (/proc/<driver pid>/environ, wrapper.toml, the key file); run gitlab-runner as root "
            f"and set [signing] build_user (docs/usage-record.md, threat model)")
        return f"NOT enforced: builds run as the driver (uid {euid})", warnings, problems
    try:
        user = resolve_build_user(signing.build_user, euid)
    except IsolationError as exc:
        problems.append(str(exc))
        return "NOT enforced: build_user cannot be used", warnings, problems
    if signing.key_file:
        why = key_file_problem(signing.key_file, user.uid)
        if why:
            problems.append(why)
    elif signing.key and config_path:
        try:
            mode = os.stat(config_path).st_mode
        except OSError:
            mode = 0
        if mode & 0o044:
            problems.append(f"{config_path} holds the signing key ([signing] key) and is readable by builds "
                            f"(mode {mode & 0o777:04o}): move the key to [signing] key_file (mode 0600)")
    for what, path in (("state_dir", state_dir), ("build_dir", signing.build_dir)):
        try:
            st = os.stat(path) if path else None
        except OSError:
            continue
        if st is not None and (st.st_uid == user.uid or st.st_mode & 0o002 and not st.st_mode & 0o1000):
            problems.append(f"[{'executor' if what == 'state_dir' else 'signing'}] {what} {path} can be changed "
                            f"by build user {user.name}: builds could rewrite what the record is built from")
    try:
        owner = os.stat(builds_dir).st_uid if builds_dir else user.uid
    except OSError:
        owner = user.uid
    if owner != user.uid:
        warnings.append(f"[executor] builds_dir {builds_dir} belongs to uid {owner}, not build user {user.name} "
                        f"(uid {user.uid}): builds cannot clone into it; chown it")
    return f"enforced: builds run as {user.name} (uid {user.uid}), the key stays with root", warnings, problems
