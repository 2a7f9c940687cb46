"""``executor run SCRIPT STAGE``: one build stage in its own cgroup, on a lean start-up path.

GitLab Runner starts the driver once per stage, so every millisecond of
start-up is build time.  This module imports only ``os``, ``sys``, ``time``,
``marshal``, ``binascii``, ``_signal`` (the C half of :mod:`signal`, which would
import ``enum``), ``threading`` for the sampler, and the wrapper's own lean
modules (:mod:`~runner_wrapper.state`, :mod:`~runner_wrapper.process`,
:mod:`~runner_wrapper.cgroup.v1` / ``.v2``).  ``typing``, ``argparse``,
``structlog``, ``tomllib``, ``json`` (which imports ``re`` and ``enum``),
``hashlib`` and the configuration classes stay out:

- :func:`fast_main` runs a stage from the settings ``config`` handed over in
  ``$RUNNER_WRAPPER_STAGE_SETTINGS`` (:func:`encode_settings`) and the job state
  ``prepare`` wrote; when either is missing or from another version (or the
  backend is the psutil fallback) it returns ``None`` *before doing anything*
  and the CLI takes the full path (:func:`runner_wrapper.executor.cmd_run`),
  which ends in the same :func:`run_stage`;
- the usage marker is built and signed only after the main stage and after
  failing stages, as before, from plain dicts (:func:`runner_wrapper.sinks.marker_line`).
"""

from __future__ import annotations

import _signal
import os
import sys
import time

from runner_wrapper.humanize import human_bytes
from runner_wrapper.sinks import say
from runner_wrapper.state import StageFigures, load_state, process_start_ticks, save_state, state_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping

    from runner_wrapper.state import JobState

__all__ = ["DriverEnv", "SystemFailure", "StageSettings", "fast_main", "encode_settings", "decode_settings",
           "read_job_id", "SETTINGS_ENV", "run_stage", "run_in_group",
           "stage_group_name", "job_group_name", "check_exit_code_file", "child_env"]

_HANDLED = (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP)
_SIGNAL_NAMES = {_signal.SIGTERM: "SIGTERM", _signal.SIGINT: "SIGINT", _signal.SIGHUP: "SIGHUP"}
CONFIG_JSON_ENV = "RUNNER_WRAPPER_CONFIG_JSON"  # same name as runner_wrapper.config.CONFIG_JSON_ENV
#: ``config`` hands the stage settings to ``run`` under this name (``job_env``); like the JSON
#: configuration, only GitLab Runner sets it (job variables arrive as ``CUSTOM_ENV_*``).
SETTINGS_ENV = "RUNNER_WRAPPER_STAGE_SETTINGS"
_SETTINGS_FORMAT = 2
CONFIG_ENV = "RUNNER_WRAPPER_CONFIG"
#: The default names of the wrapper's secrets: hidden from builds even when the configuration names
#: others (an admin who moved the key to ``key_file`` may have left the old variable in the runner's env).
_DEFAULT_SECRET_ENV = ("RIGHTSIZER_SIGNING_KEY", "RIGHTSIZER_COLLECTOR_TOKEN", "RIGHTSIZER_ALLOCATION_TOKEN")
DEFAULT_CONFIG_PATH = "/etc/gitlab-rightsizer/wrapper.toml"


class SystemFailure(RuntimeError):
    """An infrastructure fault of the wrapper or host: exit ``$SYSTEM_FAILURE_EXIT_CODE``."""


class DriverEnv:
    """The variables GitLab Runner sets for every driver call (gitlab-mechanics.md §1.3)."""

    __slots__ = ("build_failure", "system_failure", "exit_code_file", "job_response_file", "tmpdir")

    def __init__(self, build_failure: int, system_failure: int, exit_code_file: str | None,
                 job_response_file: str | None, tmpdir: str | None) -> None:
        self.build_failure = build_failure
        self.system_failure = system_failure
        self.exit_code_file = exit_code_file
        self.job_response_file = job_response_file
        self.tmpdir = tmpdir

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> "DriverEnv":
        def code(name: str, fallback: int) -> int:
            # Read, never hard-code; the fallbacks only serve a manual run outside GitLab Runner.
            try:
                return int(environ.get(name, ""))
            except ValueError:
                return fallback

        return cls(build_failure=code("BUILD_FAILURE_EXIT_CODE", 1), system_failure=code("SYSTEM_FAILURE_EXIT_CODE", 2),
                   exit_code_file=environ.get("BUILD_EXIT_CODE_FILE") or None,
                   job_response_file=environ.get("JOB_RESPONSE_FILE") or None,
                   tmpdir=environ.get("TMPDIR") or None)


class StageSettings:
    """The few settings a stage needs, from a :class:`~runner_wrapper.config.WrapperConfig` or its JSON."""

    __slots__ = ("state_dir", "shell", "sampler_interval", "hidden_env", "key_env", "key", "key_id", "hostname",
                 "runner_name", "v1_root", "v2_root", "parent", "limit_swap", "psutil_enforce_memory",
                 "key_file", "build_user", "build_dir", "kill_grace")

    def __init__(self, **kw: Any) -> None:
        for name in self.__slots__:
            setattr(self, name, kw[name])

    @classmethod
    def from_config(cls, cfg: Any) -> "StageSettings":
        return cls.from_dict({name: (sub._asdict() if hasattr(sub, "_asdict") else sub)
                              for name, sub in cfg._asdict().items()})

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "StageSettings":
        """From ``config_to_json``'s document; ``KeyError``/``TypeError`` when it is not one."""
        ex, cg, sig = d["executor"], d["cgroup"], d["signing"]
        hidden = {d["sinks"]["collector_token_env"], d["allocation"]["token_env"], sig["key_env"], CONFIG_JSON_ENV,
                  SETTINGS_ENV, *_DEFAULT_SECRET_ENV}
        return cls(state_dir=ex["state_dir"], shell=tuple(ex["shell"]), sampler_interval=float(d["sampler_interval"]),
                   hidden_env=frozenset(h for h in hidden if h), key_env=sig["key_env"], key=sig["key"],
                   key_id=sig["key_id"], hostname=ex["hostname"], runner_name=ex["runner_name"],
                   v1_root=cg["v1_root"], v2_root=cg["v2_root"], parent=cg["parent"], limit_swap=cg["limit_swap"],
                   psutil_enforce_memory=ex["psutil_enforce_memory"], key_file=sig.get("key_file", ""),
                   build_user=sig.get("build_user", ""), build_dir=sig.get("build_dir", ""),
                   kill_grace=float(ex["kill_grace_seconds"]))

    def resolve_key(self, environ: Mapping[str, str]) -> bytes | None:
        if self.key_file:  # read only now, by the driver (the build cannot: runner_wrapper.isolation)
            from runner_wrapper.isolation import read_key_file

            try:
                return read_key_file(self.key_file)
            except (OSError, ValueError):
                return None
        value = (environ.get(self.key_env, "") if self.key_env else "") or self.key
        return value.encode("utf-8") if value else None


def encode_settings(s: StageSettings, source: str | None) -> str:
    """``$RUNNER_WRAPPER_STAGE_SETTINGS``: hex of :mod:`marshal` data, tagged with the format, the
    wrapper and Python versions and the configuration file it came from (parsing it costs no import:
    JSON would import ``re`` and ``enum``, 10-18 ms of every stage).  Never carries a literal key."""
    import marshal
    from binascii import b2a_hex

    from runner_wrapper import __version__

    fields = {name: getattr(s, name) for name in StageSettings.__slots__}
    fields["key"] = ""
    fields["hidden_env"] = tuple(sorted(s.hidden_env))
    doc = {"format": _SETTINGS_FORMAT, "wrapper": __version__, "python": tuple(sys.version_info[:2]),
           "source": source, "settings": fields}
    return b2a_hex(marshal.dumps(doc)).decode("ascii")


def decode_settings(text: str, wanted_source: str) -> StageSettings | None:
    """Inverse of :func:`encode_settings`; ``None`` when it is not from this wrapper, this Python and
    the configuration file this call names (the caller then reads the file)."""
    import marshal
    from binascii import a2b_hex

    from runner_wrapper import __version__

    try:
        doc = marshal.loads(a2b_hex(text))
        if (doc["format"], doc["wrapper"], tuple(doc["python"])) != (_SETTINGS_FORMAT, __version__,
                                                                     tuple(sys.version_info[:2])):
            return None
        if doc["source"] != wanted_source and not (doc["source"] is None and not os.path.exists(wanted_source)):
            return None
        fields = dict(doc["settings"])
        fields["hidden_env"] = frozenset(fields["hidden_env"])
        fields["shell"] = tuple(fields["shell"])
        return StageSettings(**fields)
    except (ValueError, EOFError, TypeError, KeyError, AttributeError):
        return None


def job_group_name(job_id: int) -> str:
    return f"job-{job_id}"


_SAFE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def stage_group_name(job_id: int, stage: str, attempt: int) -> str:
    """``job-<id>/<stage>-<attempt>``; each run of characters unsafe in a path becomes one ``_``."""
    out: list[str] = []
    replaced = False
    for ch in stage:
        if ch in _SAFE_CHARS:
            out.append(ch)
            replaced = False
        elif not replaced:
            out.append("_")
            replaced = True
    safe = "".join(out)[:80] or "stage"
    return f"{job_group_name(job_id)}/{safe}-{attempt}"


def open_backend(name: str, s: StageSettings):  # -> Backend
    """Re-open the backend ``prepare`` chose (stored in the job state)."""
    if name == "cgroup-v1":
        from runner_wrapper.cgroup.v1 import V1Backend

        return V1Backend(s.v1_root, s.parent, s.limit_swap)
    if name == "cgroup-v2":
        from runner_wrapper.cgroup.v2 import V2Backend, find_cgroup2_mount

        return V2Backend(s.v2_root or find_cgroup2_mount() or "/sys/fs/cgroup", s.parent)
    from runner_wrapper.cgroup.fallback import PsutilBackend

    return PsutilBackend(enforce_memory=s.psutil_enforce_memory)


def child_env(s: StageSettings, environ: Mapping[str, str]) -> dict[str, str]:
    """The build's environment: the driver's, minus the wrapper's own secrets."""
    return {k: v for k, v in environ.items() if k not in s.hidden_env}


#: Said when a stage fails under a runner that sets no ``BUILD_EXIT_CODE_FILE`` (docs/admin-guide.md).
NO_EXIT_CODE_FILE = ("WARNING: BUILD_EXIT_CODE_FILE is not set (GitLab Runner older than 17.9): GitLab records "
                     "exit code 1 for this failure instead of {code}")


def check_exit_code_file(env: DriverEnv) -> None:
    """Start every ``run`` with an *empty* exit-code file (done *before* the script runs).

    GitLab Runner never deletes ``$BUILD_EXIT_CODE_FILE`` between stages (only the whole TMPDIR at
    cleanup) and reads it whenever a driver call exits with the build-failure code (gitlab-runner
    ``executors/custom/command/command.go`` ``parseBuildFailure``): a file it cannot open gives a
    ``BuildError`` with exit code 1 (``script_failure``); otherwise the first line goes through
    ``strconv.Atoi``, and an empty line fails it, which gives an ``UnknownFailureError``, i.e.
    ``runner_system_failure``.  So the file is *truncated*, not removed: every deliberate build
    failure writes its code (:func:`_write_exit_code`), and an exit 1 that wrote nothing -- the
    wrapper died of an uncaught exception, Python's exit status 1 -- then reads as the system
    failure it is, never as the build's ``script_failure``, nor with an earlier stage's code.
    Runners before 17.9 set no such variable: the stage runs anyway (GitLab then records 1 for
    every failure).
    """
    if not env.exit_code_file:
        return
    parent = os.path.dirname(env.exit_code_file) or "."
    if not os.path.isdir(parent):
        raise SystemFailure(f"BUILD_EXIT_CODE_FILE {env.exit_code_file}: directory {parent} does not exist")
    try:
        # O_NOFOLLOW: the runner's TMPDIR is 0700, but never follow a link planted there.
        os.close(os.open(env.exit_code_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o600))
    except OSError as exc:
        raise SystemFailure(f"cannot empty the previous stage's BUILD_EXIT_CODE_FILE {env.exit_code_file}: "
                            f"{exc.strerror}") from None


def _write_exit_code(env: DriverEnv, code: int) -> None:
    if not env.exit_code_file:
        say(NO_EXIT_CODE_FILE.format(code=code))
        return
    try:
        with open(env.exit_code_file, "w") as fh:
            fh.write(f"{code}\n")
    except OSError as exc:
        raise SystemFailure(f"cannot write BUILD_EXIT_CODE_FILE {env.exit_code_file}: {exc.strerror}") from None


def _alive(pid: int) -> bool:
    """Whether ``pid`` (our child) has not exited yet; does not reap it (``WNOWAIT``)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:
        return False


def forward_signal(group: Any, signum: int) -> int:
    """Send ``signum`` to every process of ``group`` (setsid escapees included); returns how many."""
    me = os.getpid()
    sent = 0
    try:
        pids = group.pids()
    except Exception:  # the group may be gone already
        return 0
    for pid in pids:
        if pid == me:
            continue
        try:
            os.kill(pid, signum)
            sent += 1
        except OSError:  # exited meanwhile, or not ours
            pass
    return sent


def run_in_group(argv: list[str], group: Any, env: Mapping[str, str], interval: float,
                 on_signal: Any = None, cwd: str | None = None, grace: float = 0.0,
                 pdeathsig: bool = False, pre_exec: Any = None) -> tuple[Any, Any, Any, int, int | None]:
    """Run ``argv`` inside ``group`` with the sampler and a graceful, then cgroup-killing, SIGTERM handler.

    GitLab Runner cancels or times out a driver call with SIGTERM to the driver's process group,
    then SIGKILL after ``graceful_kill_timeout`` (gitlab-runner ``helpers/process/killer.go``,
    ``killer_unix.go``).  The first SIGTERM/SIGINT/SIGHUP is forwarded to every process of the
    group -- processes that left the process group with ``setsid`` too -- which then get ``grace``
    seconds to exit (a build's TERM trap runs); after that, or at a second signal, the whole group
    is killed (``cgroup.kill`` on v2).  ``grace=0`` kills at once.  ``pre_exec`` runs in the child
    before ``exec`` (:mod:`runner_wrapper.isolation` drops to the build user there).

    Returns ``(exit, counters, sampler_result, leftover_killed, signal_received)``.
    Shared by ``executor run`` and ``measure``.
    """
    from runner_wrapper.process import spawn_in_cgroup, wait_child
    from runner_wrapper.sampler import Sampler

    received: list[int] = []
    deadline: list[float] = []

    def kill_now() -> None:
        try:
            group.kill_all(timeout=8.0)
        except Exception:  # the wait below still reaps the child
            pass

    def handler(signum: int, _frame: Any) -> None:
        received.append(signum)
        if len(received) == 1 and grace > 0:
            deadline.append(time.monotonic() + grace)
            forward_signal(group, _signal.SIGTERM)
            _signal.setitimer(_signal.ITIMER_REAL, grace)
        else:
            kill_now()
        if on_signal:
            on_signal(signum)

    def on_alarm(_signum: int, _frame: Any) -> None:
        kill_now()

    old = {s: _signal.signal(s, handler) for s in _HANDLED}
    old[_signal.SIGALRM] = _signal.signal(_signal.SIGALRM, on_alarm)
    try:
        attach = group.attach_files()
        pid = spawn_in_cgroup(argv, attach, env, cwd=cwd, pre_exec=pre_exec, pdeathsig=pdeathsig)
        if not attach:
            group.add_pid(pid)
        sampler = Sampler(group.sample, interval, alive=lambda: _alive(pid)).start()
        ex = wait_child(pid)
        if deadline:  # the shell is gone: what it left still gets the rest of the grace period
            while time.monotonic() < deadline[0] and group.pids():
                time.sleep(0.02)
        _signal.setitimer(_signal.ITIMER_REAL, 0)
        if hasattr(group, "note_rusage"):
            group.note_rusage(ex.user_seconds, ex.system_seconds, ex.maxrss_bytes)
        result = sampler.stop()
        leftover = group.kill_all(timeout=8.0)
        counters = group.read()
    finally:
        _signal.setitimer(_signal.ITIMER_REAL, 0)
        for s, h in old.items():
            _signal.signal(s, h)
    return ex, counters, result, leftover, (received[0] if received else None)


def stage_exit_code(shell_code: int, oom_kills: int, got_signal: int | None) -> int:
    """The code GitLab records for a stage (gitlab-mechanics.md §1.5).

    137 only for a real OOM kill (the cgroup's ``oom_kill`` counter rose and the script failed); a
    stage canceled or timed out through a signal records ``128 + signal`` (143 for SIGTERM), whatever
    the killed shell returned, so a cancel never reads like a kill for memory.  An OOM kill that the
    script survived (a build tool retried the killed compiler) keeps the script's success.
    """
    if oom_kills and shell_code != 0:
        return 137
    if got_signal is not None and shell_code != 0:
        return 128 + got_signal
    return shell_code


def _print_marker(s: StageSettings, environ: Mapping[str, str], state: JobState) -> None:
    from runner_wrapper.accounting import host_dict, record_dict
    from runner_wrapper.sinks import marker_line
    from runner_wrapper.state import utc_now

    host = host_dict(state.backend, state.approximate, s.hostname, s.runner_name)
    rec = record_dict(state, host, time.time(), utc_now())
    try:
        line = marker_line(rec, s.resolve_key(environ), s.key_id)
    except ValueError as exc:
        say(f"WARNING: usage record not printed: {exc}")
        return
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _warn(s: StageSettings, message: str, **fields: Any) -> None:
    """A warning on stderr through structlog, imported only now (rare path)."""
    from runner_wrapper.logconfig import get_logger, register_secret

    for name in s.hidden_env:  # the signing key and the collector/allocation tokens
        register_secret(os.environ.get(name))
    get_logger("runner_wrapper.executor").warning(message, **fields)


def run_stage(s: StageSettings, environ: Mapping[str, str], env: DriverEnv, script: str, stage: str,
              job_id: int, spath: str, state: JobState) -> int:
    """Run one stage script in its own child cgroup of the job's; exit per gitlab-mechanics.md §1.5.

    Raises :class:`SystemFailure` for faults of the wrapper or host.
    """
    from runner_wrapper.cgroup.base import CgroupError
    from runner_wrapper.process import SpawnError

    main_stage = stage in ("build_script", "step_script")  # runner_wrapper.accounting.MAIN_STAGES
    backend = open_backend(state.backend, s)
    attempt = state.next_attempt(stage)
    argv, build_env, pre_exec = list(s.shell) + [script], child_env(s, environ), None
    if s.build_user:  # the build runs as another user: it cannot read the signing key (docs/usage-record.md)
        from runner_wrapper.isolation import IsolationError, job_build_dir, resolve_build_user, stage_launch

        try:
            user = resolve_build_user(s.build_user)
            copy, build_env, pre_exec = stage_launch(user, job_build_dir(s.build_dir, job_id, user), script,
                                                     stage, attempt, build_env)
        except IsolationError as exc:
            raise SystemFailure(str(exc)) from None
        argv[-1] = copy
    if record_lost_stage(state, backend, job_id):  # the stage before was SIGKILLed with its driver
        attempt = state.next_attempt(stage)
    group = backend.group(stage_group_name(job_id, stage, attempt))
    limits = state.limits
    try:
        if group.exists():  # left by a driver that was SIGKILLed before it could record the stage
            group.kill_all()
            group.remove()
        group.create()
        group.apply_limits(limits.get("memory_limit_bytes"), limits.get("cpu_limit_cores"))
    except CgroupError as exc:
        raise SystemFailure(f"cannot create the cgroup for stage {stage}: {exc}") from None
    state.driver = {"pid": os.getpid(), "start": process_start_ticks(os.getpid()) or 0, "stage": stage,
                    "attempt": attempt, "since": int(time.time())}
    save_state(spath, state)

    started = time.monotonic()
    try:
        # The build stays in the driver's process group: GitLab Runner's force kill (SIGKILL to that
        # group) must reach it, or it would keep the stage's output pipe open after the driver died.
        ex, counters, sampled, leftover, got_signal = run_in_group(
            argv, group, build_env, s.sampler_interval, grace=s.kill_grace, pre_exec=pre_exec)
    except SpawnError as exc:
        try:
            group.remove()
        except CgroupError:
            pass
        raise SystemFailure(f"cannot start the stage script in its cgroup: {exc}") from None
    wall = time.monotonic() - started
    try:
        group.remove()
    except CgroupError as exc:
        _warn(s, "stage cgroup not removed; cleanup will retry", error=str(exc))

    oom = counters.oom_kills
    code = stage_exit_code(ex.shell_code, oom, got_signal)
    peak = counters.memory_peak_bytes if counters.memory_peak_bytes is not None else sampled.memory_max_bytes
    state.stages.append(StageFigures(
        name=stage, attempt=attempt, wall_seconds=wall, exit_code=code, oom_kills=oom,
        memory_peak_bytes=peak, memory_mean_bytes=sampled.memory_mean_bytes,
        cpu_user_seconds=counters.cpu_user_seconds if counters.cpu_user_seconds is not None else ex.user_seconds,
        cpu_system_seconds=(counters.cpu_system_seconds if counters.cpu_system_seconds is not None
                            else ex.system_seconds),
        cpu_max_cores=round(sampled.cpu_max_cores, 3) if sampled.cpu_max_cores is not None else None,
        memory_failcnt=counters.memory_failcnt, memory_pressure_usec=counters.memory_pressure_usec,
        cpu_pressure_usec=counters.cpu_pressure_usec, leftover_killed=leftover,
    ))
    state.driver = None
    save_state(spath, state)

    if got_signal is not None:
        said = (f": the stage's processes got SIGTERM and {s.kill_grace:g} s to exit, then every process left"
                if s.kill_grace > 0 else ": every process")
        say(f"received {_SIGNAL_NAMES.get(got_signal, got_signal)}{said} in its cgroup was killed "
            f"(recorded as exit {code})")
    elif leftover:
        say(f"stage {stage} left {leftover} process(es) running; they were killed")
    if oom:
        lim = limits.get("memory_limit_bytes")
        approx = " (approximate: psutil sampling)" if counters.approximate else ""
        what = f"{oom} process{'es' if oom != 1 else ''} killed"
        if code == 137:
            say(f"OOM: the build was killed at its memory limit of {human_bytes(lim) if lim else 'the host memory'}"
                f" (peak {human_bytes(peak)}, {what}){approx}")
        else:
            say(f"WARNING: OOM: {what} at the memory limit of {human_bytes(lim) if lim else 'the host memory'}"
                f" (peak {human_bytes(peak)}), but the stage script still succeeded{approx}")
    if main_stage or code != 0:
        cpu = state.stages[-1].cpu_seconds
        say(f"{stage}: peak memory {human_bytes(peak)}, CPU {cpu or 0:.1f} s"
            + (f" (max {sampled.cpu_max_cores:.1f} cores)" if sampled.cpu_max_cores is not None else "")
            + f", wall {wall:.1f} s" + (" [approximate]" if counters.approximate else ""))
        _print_marker(s, environ, state)
    if code == 0:
        return 0
    _write_exit_code(env, code)
    return env.build_failure


#: The exit code recorded for a stage whose driver died without recording it: 128 + SIGKILL, what the
#: shell reports for a SIGKILLed script (not a success, so the record is never trusted as one).
LOST_STAGE_EXIT_CODE = 137


def record_lost_stage(state: Any, backend: Any, job_id: int) -> bool:
    """Record the stage a SIGKILLed driver was running, if any; ``True`` when one was recorded.

    A driver killed outright (SIGKILL after GitLab Runner's ``graceful_kill_timeout``, the host's
    OOM killer) never records its stage: without this the job's record would list only the other
    stages and could read as a success.  The stage's cgroup, if it is still there, gives what the
    kernel counted; its processes are killed and it is removed.  The next ``run`` and ``cleanup``
    call it (the state names the stage; a live driver is left alone).
    """
    from runner_wrapper.cgroup.base import CgroupError
    from runner_wrapper.state import driver_alive

    d = state.driver
    if not d or not d.get("stage") or driver_alive(d):
        return False
    stage, attempt = str(d["stage"]), int(d.get("attempt") or state.next_attempt(str(d["stage"])))
    counters = None
    leftover = 0
    try:
        group = backend.group(stage_group_name(job_id, stage, attempt))
        if group.exists():
            leftover = group.kill_all()
            if getattr(backend, "name", "") != "psutil":
                counters = group.read()
            group.remove()
    except CgroupError:
        pass  # cleanup removes the job's whole tree
    since = float(d.get("since") or 0)
    state.stages.append(StageFigures(
        name=stage, attempt=attempt, wall_seconds=max(0.0, time.time() - since) if since else 0.0,
        exit_code=LOST_STAGE_EXIT_CODE, oom_kills=getattr(counters, "oom_kills", 0) or 0,
        memory_peak_bytes=getattr(counters, "memory_peak_bytes", None), memory_mean_bytes=None,
        cpu_user_seconds=getattr(counters, "cpu_user_seconds", None),
        cpu_system_seconds=getattr(counters, "cpu_system_seconds", None), cpu_max_cores=None,
        memory_failcnt=getattr(counters, "memory_failcnt", None),
        memory_pressure_usec=getattr(counters, "memory_pressure_usec", None),
        cpu_pressure_usec=getattr(counters, "cpu_pressure_usec", None), leftover_killed=leftover))
    state.driver = None
    say(f"stage {stage} (attempt {attempt}) was not recorded by its driver, which is gone (SIGKILLed?): "
        f"recorded as exit {LOST_STAGE_EXIT_CODE}")
    return True


def read_job_id(path: str | None) -> int | None:
    """The job id of ``JOB_RESPONSE_FILE`` without a JSON parser, else ``None``.

    GitLab Runner writes the payload with Go's ``encoding/json``, which emits struct fields in
    declaration order, and ``id`` is the first field of ``JobResponse``: the file starts
    ``{"id":123,``.  Only that exact shape (whitespace allowed) is accepted; anything else returns
    ``None`` and the caller takes the full path, which parses the whole file.
    """
    try:
        with open(path or "", "rb") as fh:
            head = fh.read(64)
    except OSError:
        return None
    rest = head.lstrip()
    if not rest.startswith(b"{"):
        return None
    rest = rest[1:].lstrip()
    if not rest.startswith(b'"id"'):
        return None
    rest = rest[4:].lstrip()
    if not rest.startswith(b":"):
        return None
    rest = rest[1:].lstrip()
    digits = b""
    while rest[:1].isdigit():
        digits, rest = digits + rest[:1], rest[1:]
    rest = rest.lstrip()
    if not digits or not rest[:1] in (b",", b"}") or len(digits) > 18:
        return None
    job_id = int(digits)
    return job_id if job_id > 0 else None


def fast_main(config_path: str | None, script: str, stage: str, environ: Mapping[str, str] | None = None) -> int | None:
    """``executor run`` without the configuration module; ``None`` = take the full path instead.

    Returns ``None`` (having changed nothing) unless ``config`` handed over the stage settings of the
    same file, ``prepare`` left the job's state, and the backend is a cgroup one.
    """
    environ = os.environ if environ is None else environ
    encoded = environ.get(SETTINGS_ENV)
    if not encoded:
        return None
    s = decode_settings(encoded, config_path or environ.get(CONFIG_ENV) or DEFAULT_CONFIG_PATH)
    if s is None:
        return None
    env = DriverEnv.from_environ(environ)
    job_id = read_job_id(env.job_response_file)
    if job_id is None:
        return None
    spath = state_path(s.state_dir, env.tmpdir, job_id)
    state = load_state(spath)
    if state is None or state.job_id != job_id or state.backend not in ("cgroup-v1", "cgroup-v2"):
        return None
    try:
        check_exit_code_file(env)
        return run_stage(s, environ, env, script, stage, job_id, spath, state)
    except SystemFailure as exc:
        say(f"ERROR: {exc}")
        return env.system_failure
