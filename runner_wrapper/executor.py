"""The custom executor driver: ``config``, ``prepare``, ``run SCRIPT STAGE``, ``cleanup``.

Follows gitlab-mechanics.md §1 exactly:

- exit codes come from ``BUILD_FAILURE_EXIT_CODE`` / ``SYSTEM_FAILURE_EXIT_CODE``
  and the real exit code goes to ``BUILD_EXIT_CODE_FILE`` (§1.5), so GitLab records
  the script's own code, and 137 when the stage's cgroup recorded an OOM kill;
- job identity comes from ``JOB_RESPONSE_FILE`` (§1.3), never ``CUSTOM_ENV_*``;
- every ``run`` gets its own child cgroup ``job-<id>/<stage>-<attempt>`` (§1.4, §1.6);
- SIGTERM kills the whole cgroup, not only the process group (§1.7);
- counters are read before a cgroup is removed (§1.8);
- ``run`` prints the signed usage marker (``cleanup`` output never reaches the job log).

Each handler returns the process exit code; nothing here lets a traceback
escape (the CLI turns any unexpected error into the system-failure code).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from typing import Any, Mapping, NamedTuple

from runner_wrapper.config import WrapperConfig
from runner_wrapper.sinks import say
from runner_wrapper.state import (
    JobState, StageFigures, delete_state, driver_alive, load_state, process_start_ticks, save_state, state_path,
    utc_now,
)

__all__ = ["DriverEnv", "SystemFailure", "cmd_config", "cmd_prepare", "cmd_run", "cmd_cleanup",
           "reap_stale", "backend_by_name", "job_group_name", "stage_group_name"]


class SystemFailure(RuntimeError):
    """An infrastructure fault of the wrapper or host: exit ``$SYSTEM_FAILURE_EXIT_CODE``."""


class DriverEnv(NamedTuple):
    """The variables GitLab Runner sets for every driver call (§1.3)."""

    build_failure: int
    system_failure: int
    exit_code_file: str | None
    job_response_file: str | None
    tmpdir: str | None

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


def job_group_name(job_id: int) -> str:
    return f"job-{job_id}"


_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def stage_group_name(job_id: int, stage: str, attempt: int) -> str:
    safe = _SAFE.sub("_", stage)[:80] or "stage"
    return f"{job_group_name(job_id)}/{safe}-{attempt}"


def backend_by_name(name: str, cfg: WrapperConfig):  # -> Backend
    """Re-open the backend ``prepare`` chose (stored in the job state)."""
    if name == "cgroup-v1":
        from runner_wrapper.cgroup.v1 import V1Backend

        return V1Backend(cfg.cgroup.v1_root, cfg.cgroup.parent, cfg.cgroup.limit_swap)
    if name == "cgroup-v2":
        from runner_wrapper.cgroup.v2 import V2Backend, find_cgroup2_mount

        return V2Backend(cfg.cgroup.v2_root or find_cgroup2_mount() or "/sys/fs/cgroup", cfg.cgroup.parent)
    from runner_wrapper.cgroup.fallback import PsutilBackend

    return PsutilBackend(enforce_memory=cfg.executor.psutil_enforce_memory)


def _select(cfg: WrapperConfig):
    from runner_wrapper.cgroup.base import CgroupError
    from runner_wrapper.cgroup.detect import select_backend

    try:
        return select_backend(cfg.cgroup, enforce_memory=cfg.executor.psutil_enforce_memory).backend
    except CgroupError as exc:
        raise SystemFailure(str(exc)) from None


def _load_job(env: DriverEnv):
    from runner_wrapper.job import JobError, load_job

    try:
        return load_job(env.job_response_file or "")
    except JobError as exc:
        raise SystemFailure(str(exc)) from None


def _job_id(env: DriverEnv) -> int:
    """Only the job id, cheaply (``run`` starts once per stage); full parsing is :func:`_load_job`."""
    try:
        with open(env.job_response_file or "", "rb") as fh:
            job_id = json.loads(fh.read()).get("id")
    except (OSError, ValueError, AttributeError):
        job_id = None
    if isinstance(job_id, bool) or not isinstance(job_id, int) or job_id <= 0:
        _load_job(env)  # raises SystemFailure with the precise reason
        raise SystemFailure("JOB_RESPONSE_FILE has no valid job id")
    return job_id


def _log():
    from runner_wrapper.logconfig import get_logger

    return get_logger("runner_wrapper.executor")


# --------------------------------------------------------------------------- config


def cmd_config(cfg: WrapperConfig, environ: Mapping[str, str], out: Any = None) -> int:
    """Print the JSON GitLab Runner reads (§1.2); reap stale job cgroups on the way."""
    import socket

    from runner_wrapper import DRIVER_NAME, __version__

    out = out or sys.stdout
    try:
        reap_stale(cfg, _select(cfg))
    except Exception as exc:  # reaping is housekeeping: never fail the job for it
        _log().warning("stale cgroup reaping failed", error=str(exc))
    from runner_wrapper.config import CONFIG_JSON_ENV, config_to_json

    job_env = dict(cfg.executor.job_env)
    if cfg.source:
        job_env.setdefault("RUNNER_WRAPPER_CONFIG", cfg.source)
    cached = config_to_json(cfg)
    if cached:
        job_env[CONFIG_JSON_ENV] = cached
    doc = {
        "builds_dir": cfg.executor.builds_dir,
        "cache_dir": cfg.executor.cache_dir,
        "builds_dir_is_shared": cfg.executor.builds_dir_is_shared,
        "hostname": cfg.executor.hostname or socket.gethostname(),
        "driver": {"name": DRIVER_NAME, "version": __version__},
        "job_env": job_env,
        "shell": "bash",
    }
    out.write(json.dumps(doc) + "\n")
    out.flush()
    return 0


# --------------------------------------------------------------------------- reaping


def reap_stale(cfg: WrapperConfig, backend: Any, now: float | None = None) -> list[str]:
    """Remove job cgroups of crashed jobs: no live driver and no activity for ``stale_after_seconds``."""
    if backend.name == "psutil":
        return []
    now = time.time() if now is None else now
    parent = backend.group("")
    reaped: list[str] = []
    for name in parent.children():
        m = re.fullmatch(r"job-(\d+)", name)
        if not m:
            continue
        job_id = int(m.group(1))
        path = state_path(cfg.executor.state_dir, None, job_id) if cfg.executor.state_dir else None
        st = load_state(path) if path else None
        if st is not None and driver_alive(st.driver):
            continue
        group = backend.group(name)
        last = max(st.updated_epoch if st else 0.0, now - group.age_seconds(now))
        if now - last < cfg.cgroup.stale_after_seconds:
            continue
        killed = group.kill_all()
        group.remove()
        if path:
            delete_state(path)
        reaped.append(name)
        _log().warning("reaped stale job cgroup", cgroup=name, processes_killed=killed,
                       idle_seconds=round(now - last))
    return reaped


# --------------------------------------------------------------------------- prepare


def _host_caps() -> tuple[int, float]:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        cpus = float(len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover
        cpus = float(os.cpu_count() or 1)
    return mem, cpus


def _decide_limits(cfg: WrapperConfig, job: Any, environ: Mapping[str, str]):
    from runner_wrapper.limits import has_explicit_limits, resolve_limits

    suggested: dict[str, str] = {}
    notes: list[str] = []
    if cfg.allocation.url and not has_explicit_limits(job.variables, cfg.variables):
        from runner_wrapper.allocation import build_spec, fetch_allocation

        spec = build_spec(job.variables, job.identity.name)
        token = environ.get(cfg.allocation.token_env) if cfg.allocation.token_env else None
        alloc = fetch_allocation(cfg.allocation.url, spec, job.identity.name, job.identity.project_path,
                                 job.identity.ref, token, cfg.allocation.timeout)
        if alloc.variables:
            rename = dict(zip(("KUBERNETES_MEMORY_LIMIT", "KUBERNETES_MEMORY_REQUEST", "KUBERNETES_CPU_LIMIT",
                               "KUBERNETES_CPU_REQUEST"),
                              (cfg.variables.memory_limit, cfg.variables.memory_request, cfg.variables.cpu_limit,
                               cfg.variables.cpu_request)))
            suggested = {rename[k]: v for k, v in alloc.variables.items()}
            shown = ", ".join(f"{k}={v}" for k, v in sorted(alloc.variables.items()))
            notes.append(f"using the allocation endpoint's suggestion for {spec!r}: {shown}")
        else:
            notes.append(f"{alloc.reason}: using the defaults from wrapper.toml")
    mem, cpus = _host_caps()
    decision = resolve_limits(job.variables, cfg.variables, cfg.limits, mem, cpus, suggested=suggested)
    return decision, notes


def _open_job(cfg: WrapperConfig, env: DriverEnv, environ: Mapping[str, str], job: Any, announce: bool) -> JobState:
    """Create the job cgroup, apply limits and write the state (``prepare``, or ``run`` without it)."""
    backend = _select(cfg)
    try:
        reap_stale(cfg, backend)
    except Exception as exc:
        _log().warning("stale cgroup reaping failed", error=str(exc))
    decision, notes = _decide_limits(cfg, job, environ)
    for line in notes + list(decision.messages):
        say(line)
    from runner_wrapper.cgroup.base import CgroupError

    group = backend.group(job_group_name(job.id))
    try:
        if group.exists():  # a retried prepare (§1.6) or a recycled id: start clean
            group.kill_all()
            group.remove()
        group.create()
        if hasattr(group, "make_parent_of_stages"):
            group.make_parent_of_stages()
        written = group.apply_limits(decision.applied.memory_limit_bytes, decision.applied.cpu_limit_cores)
    except CgroupError as exc:
        raise SystemFailure(f"cannot set up the job cgroup: {exc}") from None
    where = getattr(group, "dir", None) or getattr(group, "dirs", {}).get("memory", "")
    say(f"measuring with {backend.name} backend" + (f" in {where}" if where else "")
        + (f" ({'; '.join(written)})" if written and announce else ""))
    if backend.approximate:
        say("WARNING: no cgroup can be created on this host: figures are approximate (psutil sampling)")
    key = cfg.signing.resolve_key(environ)
    if not key:
        say("WARNING: no signing key configured: usage records are unsigned and the retry bot will ignore them")
    from dataclasses import asdict

    now = time.time()
    state = JobState(job_id=job.id, backend=backend.name, started_at=utc_now(), started_epoch=now,
                     identity=asdict(job.identity), limits=asdict(decision.applied),
                     approximate=backend.approximate, signed=bool(key))
    save_state(state_path(cfg.executor.state_dir, env.tmpdir, job.id), state)
    return state


def cmd_prepare(cfg: WrapperConfig, environ: Mapping[str, str]) -> int:
    env = DriverEnv.from_environ(environ)
    try:
        job = _load_job(env)
        _open_job(cfg, env, environ, job, announce=True)
    except SystemFailure as exc:
        say(f"ERROR: {exc}")
        return env.system_failure
    return 0


# --------------------------------------------------------------------------- run


def _child_env(cfg: WrapperConfig, environ: Mapping[str, str]) -> dict[str, str]:
    """The build's environment: the driver's, minus the wrapper's own secrets."""
    secret = {cfg.signing.key_env, cfg.sinks.collector_token_env, cfg.allocation.token_env,
              "RUNNER_WRAPPER_CONFIG_JSON"}
    return {k: v for k, v in environ.items() if k not in secret}


def run_in_group(argv: list[str], group: Any, env: Mapping[str, str], interval: float,
                 on_signal: Any = None, cwd: str | None = None) -> tuple[Any, Any, Any, int, int | None]:
    """Run ``argv`` inside ``group`` with the sampler and a cgroup-killing SIGTERM handler.

    Returns ``(exit, counters, sampler_result, leftover_killed, signal_received)``.
    Shared by ``executor run`` and ``measure``.
    """
    from runner_wrapper.process import spawn_in_cgroup, wait_child
    from runner_wrapper.sampler import Sampler

    received: list[int] = []

    def handler(signum: int, _frame: Any) -> None:
        received.append(signum)
        try:
            group.kill_all(timeout=8.0)
        except Exception:  # the wait below still reaps the child
            pass
        if on_signal:
            on_signal(signum)

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        pid = spawn_in_cgroup(argv, group.attach_files(), env, cwd=cwd)
        if not group.attach_files():
            group.add_pid(pid)
        sampler = Sampler(group.sample, interval).start()
        ex = wait_child(pid)
        if hasattr(group, "note_rusage"):
            group.note_rusage(ex.user_seconds, ex.system_seconds, ex.maxrss_bytes)
        result = sampler.stop()
        leftover = group.kill_all(timeout=8.0)
        counters = group.read()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return ex, counters, result, leftover, (received[0] if received else None)


def _hb(n: int | None) -> str:
    from runner_wrapper.quantity import human_bytes  # lazy: decimal is not free to import

    return human_bytes(n)


def _write_exit_code(env: DriverEnv, code: int) -> None:
    if not env.exit_code_file:
        raise SystemFailure("BUILD_EXIT_CODE_FILE is not set: cannot report the build's exit code to GitLab")
    try:
        with open(env.exit_code_file, "w") as fh:
            fh.write(f"{code}\n")
    except OSError as exc:
        raise SystemFailure(f"cannot write BUILD_EXIT_CODE_FILE {env.exit_code_file}: {exc.strerror}") from None


def _print_marker(cfg: WrapperConfig, environ: Mapping[str, str], state: JobState) -> dict[str, Any]:
    from runner_wrapper.accounting import build_record, host_info
    from runner_wrapper.sinks import marker_line

    host = host_info(state.backend, state.approximate, cfg.executor.hostname, cfg.executor.runner_name)
    rec = build_record(state, host, time.time(), utc_now()).to_dict()
    key = cfg.signing.resolve_key(environ)
    try:
        line = marker_line(rec, key, cfg.signing.key_id)
    except ValueError as exc:
        say(f"WARNING: usage record not printed: {exc}")
        return rec
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    return rec


def cmd_run(cfg: WrapperConfig, environ: Mapping[str, str], script: str, stage: str) -> int:
    """Run one stage script in its own cgroup; exit per §1.5."""
    from runner_wrapper.accounting import is_main_stage
    from runner_wrapper.cgroup.base import CgroupError
    from runner_wrapper.process import SpawnError

    env = DriverEnv.from_environ(environ)
    try:
        job_id = _job_id(env)
        spath = state_path(cfg.executor.state_dir, env.tmpdir, job_id)
        state = load_state(spath)
        if state is None or state.job_id != job_id:  # prepare_exec not configured, or its state lost
            state = _open_job(cfg, env, environ, _load_job(env), announce=False)
        backend = backend_by_name(state.backend, cfg)
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
        state.driver = {"pid": os.getpid(), "start": process_start_ticks(os.getpid()) or 0}
        save_state(spath, state)

        started = time.monotonic()
        try:
            ex, counters, sampled, leftover, got_signal = run_in_group(
                list(cfg.executor.shell) + [script], group, _child_env(cfg, environ), cfg.sampler_interval)
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
            _log().warning("stage cgroup not removed; cleanup will retry", error=str(exc))

        oom = counters.oom_kills
        # An OOM kill fails the stage with 137 (§1.5 OOM recipe) unless the script still succeeded
        # (a build tool that retried a killed compiler): then the job keeps its success, with a warning.
        code = 137 if oom and ex.shell_code != 0 else ex.shell_code
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
            say(f"received {signal.Signals(got_signal).name}: killed every process in the stage's cgroup")
        elif leftover:
            say(f"stage {stage} left {leftover} process(es) running; they were killed")
        if oom:
            lim = limits.get("memory_limit_bytes")
            approx = " (approximate: psutil sampling)" if counters.approximate else ""
            what = f"{oom} process{'es' if oom != 1 else ''} killed"
            if code == 137:
                say(f"OOM: the build was killed at its memory limit of {_hb(lim) if lim else 'the host memory'}"
                    f" (peak {_hb(peak)}, {what}){approx}")
            else:
                say(f"WARNING: OOM: {what} at the memory limit of {_hb(lim) if lim else 'the host memory'}"
                    f" (peak {_hb(peak)}), but the stage script still succeeded{approx}")
        if is_main_stage(stage) or code != 0:
            cpu = state.stages[-1].cpu_seconds
            say(f"{stage}: peak memory {_hb(peak)}, CPU {cpu or 0:.1f} s"
                + (f" (max {sampled.cpu_max_cores:.1f} cores)" if sampled.cpu_max_cores is not None else "")
                + f", wall {wall:.1f} s" + (" [approximate]" if counters.approximate else ""))
            _print_marker(cfg, environ, state)
        if code == 0:
            return 0
        _write_exit_code(env, code)
        return env.build_failure
    except SystemFailure as exc:
        say(f"ERROR: {exc}")
        return env.system_failure


# --------------------------------------------------------------------------- cleanup


def cmd_cleanup(cfg: WrapperConfig, environ: Mapping[str, str]) -> int:
    """Kill leftovers, read the job cgroup, emit the final record to every sink, remove the cgroup."""
    from runner_wrapper.accounting import build_record, host_info
    from runner_wrapper.cgroup.base import CgroupError
    from runner_wrapper.sinks import append_spool, signed_dict

    log = _log()
    env = DriverEnv.from_environ(environ)
    try:
        job = _load_job(env)
    except SystemFailure as exc:
        log.error("cleanup: no job", error=str(exc))
        return env.system_failure
    spath = state_path(cfg.executor.state_dir, env.tmpdir, job.id)
    state = load_state(spath)
    backend = backend_by_name(state.backend, cfg) if state else _select(cfg)
    group = backend.group(job_group_name(job.id))
    counters = None
    rc = 0
    try:
        if group.exists():
            killed = group.kill_all(timeout=8.0)
            if killed:
                log.warning("cleanup killed leftover processes", job_id=job.id, processes=killed)
            if backend.name != "psutil":
                counters = group.read()
            group.remove()
    except CgroupError as exc:
        log.error("cleanup could not remove the job cgroup", job_id=job.id, error=str(exc))
        rc = env.system_failure
    if state is None:
        log.warning("no job state: prepare did not run or its state was lost; no usage record", job_id=job.id)
        return rc
    host = host_info(state.backend, state.approximate, cfg.executor.hostname, cfg.executor.runner_name)
    record = build_record(state, host, time.time(), utc_now(), job_counters=counters).to_dict()
    data = signed_dict(record, cfg.signing.resolve_key(environ), cfg.signing.key_id)
    if cfg.sinks.spool:
        try:
            append_spool(cfg.sinks.spool, data)
        except OSError as exc:
            log.error("usage record not spooled", path=cfg.sinks.spool, error=exc.strerror)
            rc = env.system_failure
    if cfg.sinks.collector_url:
        from runner_wrapper.sinks import CollectorError, post_collector

        token = environ.get(cfg.sinks.collector_token_env) if cfg.sinks.collector_token_env else None
        try:
            post_collector(cfg.sinks.collector_url, data, token, cfg.sinks.collector_timeout,
                           cfg.sinks.collector_attempts)
        except CollectorError as exc:
            log.warning("usage record kept in the spool only", error=str(exc), spool=cfg.sinks.spool)
    if cfg.sinks.textfile:
        try:
            from runner_wrapper.sinks import write_textfile

            write_textfile(cfg.sinks.textfile, data)
        except OSError as exc:
            log.warning("textfile not written", path=cfg.sinks.textfile, error=str(exc))
    delete_state(spath)
    log.info("usage recorded", job_id=job.id, memory_peak_bytes=record["usage"]["memory_peak_bytes"],
             oom_kills=record["usage"]["oom_kills"], signed="signature" in data)
    return rc
