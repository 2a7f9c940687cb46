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
import sys
import time
from typing import Any, Mapping

from runner_wrapper.config import WrapperConfig
from runner_wrapper.sinks import say
from runner_wrapper.stagerun import (
    DriverEnv, StageSettings, SystemFailure, check_exit_code_file, job_group_name, run_in_group, run_stage,
    stage_group_name,
)
from runner_wrapper.state import JobState, delete_state, driver_alive, load_state, save_state, state_path, utc_now

__all__ = ["DriverEnv", "SystemFailure", "register_secrets", "cmd_config", "cmd_prepare", "cmd_run", "cmd_cleanup",
           "reap_stale", "backend_by_name", "job_group_name", "stage_group_name"]


def backend_by_name(name: str, cfg: WrapperConfig):  # -> Backend
    """Re-open the backend ``prepare`` chose (stored in the job state)."""
    from runner_wrapper.stagerun import open_backend

    return open_backend(name, StageSettings.from_config(cfg))


def _select(cfg: WrapperConfig):
    from runner_wrapper.cgroup.base import CgroupError
    from runner_wrapper.cgroup.detect import select_backend

    try:
        return select_backend(cfg.cgroup, enforce_memory=cfg.executor.psutil_enforce_memory).backend
    except CgroupError as exc:
        raise SystemFailure(str(exc)) from None


def register_secrets(cfg: WrapperConfig, environ: Mapping[str, str]) -> None:
    """Register the wrapper's own secrets with the log redactor: the signing key and the collector
    and allocation tokens (the job token is registered when the job payload is read)."""
    from runner_wrapper.logconfig import register_secret

    register_secret(cfg.signing.resolve_key(environ))
    for name in (cfg.sinks.collector_token_env, cfg.allocation.token_env):
        if name:
            register_secret(environ.get(name))


def _load_job(env: DriverEnv, cfg: WrapperConfig | None = None):
    from runner_wrapper.job import DEFAULT_RECORDED_VARIABLES, JobError, load_job

    try:
        return load_job(env.job_response_file or "", cfg.record.variables if cfg else DEFAULT_RECORDED_VARIABLES)
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
    if cached:  # None when the file holds a literal signing key: that never goes through the environment
        from runner_wrapper.stagerun import SETTINGS_ENV, encode_settings

        job_env[CONFIG_JSON_ENV] = cached
        job_env[SETTINGS_ENV] = encode_settings(StageSettings.from_config(cfg), cfg.source)
    doc: dict[str, Any] = {}
    # An empty builds_dir/cache_dir in this JSON is a configuration error on the runner
    # (gitlab-runner executors/custom/api/config.go, ConfigExecOutput.InjectInto): leave them out,
    # and the runner's own [[runners]] builds_dir/cache_dir apply.
    if cfg.executor.builds_dir:
        doc["builds_dir"] = cfg.executor.builds_dir
    if cfg.executor.cache_dir:
        doc["cache_dir"] = cfg.executor.cache_dir
    doc.update({
        "builds_dir_is_shared": cfg.executor.builds_dir_is_shared,
        "hostname": cfg.executor.hostname or socket.gethostname(),
        "driver": {"name": DRIVER_NAME, "version": __version__},
        "job_env": job_env,
        "shell": "bash",
    })
    out.write(json.dumps(doc) + "\n")
    out.flush()
    return 0


# --------------------------------------------------------------------------- reaping


def reap_dead_measures(backend: Any) -> list[str]:
    """Kill and remove ``measure-<pid>-<ticks>`` groups whose ``measure`` process is gone (SIGKILLed):
    their owner is named exactly, so a dead owner means nobody will ever read or remove them."""
    if backend.name == "psutil":
        return []
    from runner_wrapper.state import process_start_ticks

    reaped: list[str] = []
    for name in backend.group("").children():
        m = re.fullmatch(r"measure-(\d+)-(\d+)", name)
        if not m or process_start_ticks(int(m.group(1))) == int(m.group(2)):
            continue
        group = backend.group(name)
        killed = group.kill_all()
        group.remove()
        reaped.append(name)
        _log().warning("reaped the cgroup of a killed measure", cgroup=name, processes_killed=killed)
    return reaped


def _remove_build_dir(cfg: WrapperConfig, job_id: int) -> None:
    """The build user's per-job directory (``<[signing] build_dir>/job-<id>``), when there is one."""
    if not cfg.signing.build_user:
        return
    from runner_wrapper.isolation import IsolationError, remove_job_build_dir, resolve_build_user

    try:
        remove_job_build_dir(cfg.signing.build_dir, job_id, resolve_build_user(cfg.signing.build_user))
    except IsolationError as exc:
        _log().warning("build directory not removed", job_id=job_id, error=str(exc))


def reap_stale(cfg: WrapperConfig, backend: Any, now: float | None = None) -> list[str]:
    """Remove job cgroups of crashed jobs, and the groups of killed ``measure`` runs.

    A job cgroup is reaped only after ``stale_after_seconds`` without activity, never while its state
    names a live driver, and never while it holds a live process (in it or in a stage child) unless
    its state proves the owner dead: a driver recorded mid-stage that no longer exists (SIGKILLed;
    what it left is then killed).  The directory's mtime alone proves nothing: the kernel moves it
    when a stage child is created or removed (kernfs; checked on cgroup v1), not while a stage runs,
    so with ``state_dir = ""`` (no state the reaper can see) a stage running longer than
    ``stale_after_seconds`` would look idle; its processes do not.  Between two stages the cgroup is
    empty, but the last stage child's removal has just moved the mtime.
    """
    if backend.name == "psutil":
        return []
    now = time.time() if now is None else now
    parent = backend.group("")
    reaped: list[str] = reap_dead_measures(backend)
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
        owner_dead = st is not None and bool(st.driver)  # recorded mid-stage, and not alive (checked above)
        if not owner_dead and group.pids():  # a stage may be running: never kill a live build
            continue
        last = max(st.updated_epoch if st else 0.0, now - group.age_seconds(now))
        if now - last < cfg.cgroup.stale_after_seconds:
            continue
        killed = group.kill_all()
        group.remove()
        if path:
            delete_state(path)
        _remove_build_dir(cfg, job_id)
        reaped.append(name)
        _log().warning("reaped stale job cgroup", cgroup=name, processes_killed=killed,
                       idle_seconds=round(now - last))
    reaped += reap_orphan_states(cfg, parent, now)
    return reaped


def reap_orphan_states(cfg: WrapperConfig, parent: Any, now: float) -> list[str]:
    """Remove state files no job will read again: ``job-<id>.state`` without its job cgroup, and
    ``save_state``'s temporary files, idle for ``stale_after_seconds``.

    A driver killed after its cleanup removed the job cgroup (and spooled the record) but before
    it deleted the state, or between ``save_state``'s write and its rename, leaves them; the cgroup
    sweep above never sees them (it starts from the cgroups).  A live job always has its cgroup
    (prepare makes it before it saves the state; cleanup removes it first); a state of the psutil
    fallback (a job that got no cgroup) or one naming a live driver is never removed.
    """
    sdir = cfg.executor.state_dir
    if not sdir:
        return []
    try:
        names = os.listdir(sdir)
    except OSError:
        return []
    live = set(parent.children())
    out = []
    for fname in names:
        m = re.fullmatch(r"job-(\d+)\.state(\.\d+\.tmp)?", fname)
        if not m or (m.group(1) and not m.group(2) and f"job-{m.group(1)}" in live):
            continue
        path = os.path.join(sdir, fname)
        try:
            if now - os.stat(path).st_mtime < cfg.cgroup.stale_after_seconds:
                continue
            if not m.group(2):
                st = load_state(path)
                if st is not None and (st.backend not in ("cgroup-v1", "cgroup-v2") or driver_alive(st.driver)):
                    continue
            os.unlink(path)
        except OSError:
            continue
        out.append(fname)
        _log().warning("removed orphaned job state", file=fname)
    return out


# --------------------------------------------------------------------------- prepare


def _host_caps() -> tuple[int, float]:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        cpus = float(len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover
        cpus = float(os.cpu_count() or 1)
    return mem, cpus


def expanded_variables(variables: Mapping[str, str], environ: Mapping[str, str], names: Any) -> dict[str, str]:
    """The job's variables with ``names`` taken from ``CUSTOM_ENV_<NAME>`` where the runner set them.

    ``JOB_RESPONSE_FILE`` holds the raw payload (``KUBERNETES_MEMORY_LIMIT: $SIZE``); the runner
    expands every non-raw variable (gitlab-runner ``common/build.go`` ``GetAllVariables`` ->
    ``Expand``) before exporting it as ``CUSTOM_ENV_*`` (``executors/custom/custom.go``
    ``prepareCommand``), and the Kubernetes executor reads the same expanded values.  Job identity
    stays with the payload (users can override ``CUSTOM_ENV_*``; limits are the user's to set anyway).
    """
    out = dict(variables)
    for name in names:
        value = environ.get(f"CUSTOM_ENV_{name}")
        if value is not None:
            out[name] = value
    return out


def _decide_limits(cfg: WrapperConfig, job: Any, environ: Mapping[str, str]):
    from runner_wrapper.limits import has_explicit_limits, resolve_limits

    suggested: dict[str, str] = {}
    notes: list[str] = []
    variables = expanded_variables(job.variables, environ, cfg.variables.all())
    if cfg.allocation.url and not has_explicit_limits(variables, cfg.variables):
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
    decision = resolve_limits(variables, cfg.variables, cfg.limits, mem, cpus, suggested=suggested)
    return decision, notes


def after_script_decides(variables: Mapping[str, str], environ: Mapping[str, str]) -> bool:
    """Whether an ``after_script`` failure fails the job: ``AFTER_SCRIPT_IGNORE_ERRORS`` is true
    unless set to a false value (Go's ``strconv.ParseBool``; gitlab-runner ``common/build.go``
    ``executeAfterScript``)."""
    raw = environ.get("CUSTOM_ENV_AFTER_SCRIPT_IGNORE_ERRORS", variables.get("AFTER_SCRIPT_IGNORE_ERRORS", ""))
    return raw in ("0", "f", "F", "false", "FALSE", "False")


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
        say(f"WARNING: {cfg.signing.missing_key_reason()}: usage records are unsigned and the retry bot will "
            f"ignore them")
    from dataclasses import asdict

    now = time.time()
    state = JobState(job_id=job.id, backend=backend.name, started_at=utc_now(), started_epoch=now,
                     identity=asdict(job.identity), limits=asdict(decision.applied),
                     approximate=backend.approximate, signed=bool(key),
                     after_script_decides=after_script_decides(job.variables, environ))
    save_state(state_path(cfg.executor.state_dir, env.tmpdir, job.id), state)
    return state


def cmd_prepare(cfg: WrapperConfig, environ: Mapping[str, str]) -> int:
    env = DriverEnv.from_environ(environ)
    try:
        job = _load_job(env, cfg)
        _open_job(cfg, env, environ, job, announce=True)
    except SystemFailure as exc:
        say(f"ERROR: {exc}")
        return env.system_failure
    return 0


# --------------------------------------------------------------------------- run


def _child_env(cfg: WrapperConfig, environ: Mapping[str, str]) -> dict[str, str]:
    """The build's environment: the driver's, minus the wrapper's own secrets."""
    from runner_wrapper.stagerun import child_env

    return child_env(StageSettings.from_config(cfg), environ)


def cmd_run(cfg: WrapperConfig, environ: Mapping[str, str], script: str, stage: str) -> int:
    """Run one stage script in its own cgroup; exit per §1.5 (the full path: any backend, with or
    without ``prepare``; the lean path is :func:`runner_wrapper.stagerun.fast_main`)."""
    env = DriverEnv.from_environ(environ)
    try:
        check_exit_code_file(env)  # before the script runs, not after
        job_id = _job_id(env)
        spath = state_path(cfg.executor.state_dir, env.tmpdir, job_id)
        state = load_state(spath)
        if state is None or state.job_id != job_id:  # prepare_exec not configured, or its state lost
            state = _open_job(cfg, env, environ, _load_job(env, cfg), announce=False)
        return run_stage(StageSettings.from_config(cfg), environ, env, script, stage, job_id, spath, state)
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
        job = _load_job(env, cfg)
    except SystemFailure as exc:
        log.error("cleanup: no job", error=str(exc))
        return env.system_failure
    spath = state_path(cfg.executor.state_dir, env.tmpdir, job.id)
    state = load_state(spath)
    backend = backend_by_name(state.backend, cfg) if state else _select(cfg)
    if state is not None:
        from runner_wrapper.stagerun import record_lost_stage

        if record_lost_stage(state, backend, job.id):  # the last stage's driver was SIGKILLed
            log.warning("cleanup: a stage's driver died without recording it", job_id=job.id,
                        stage=state.stages[-1].name, exit_code=state.stages[-1].exit_code)
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
    _remove_build_dir(cfg, job.id)  # the build user's per-job directory (runner_wrapper.isolation)
    if state is None:
        log.warning("no job state: prepare did not run or its state was lost; no usage record", job_id=job.id)
        return rc
    host = host_info(state.backend, state.approximate, cfg.executor.hostname, cfg.executor.runner_name)
    record = build_record(state, host, time.time(), utc_now(), job_counters=counters).to_dict()
    data = signed_dict(record, cfg.signing.resolve_key(environ), cfg.signing.key_id)
    spooled = False
    collector_error = ""
    if cfg.sinks.spool:
        try:
            append_spool(cfg.sinks.spool, data)
            spooled = True
        except OSError as exc:
            log.error("usage record not spooled", path=cfg.sinks.spool, error=exc.strerror)
            rc = env.system_failure
    delivered = False
    if cfg.sinks.collector_url:
        from runner_wrapper.sinks import CollectorError, post_collector

        token = environ.get(cfg.sinks.collector_token_env) if cfg.sinks.collector_token_env else None
        try:
            post_collector(cfg.sinks.collector_url, data, token, cfg.sinks.collector_timeout,
                           cfg.sinks.collector_attempts)
            delivered = True
        except CollectorError as exc:
            if spooled:
                log.warning("usage record kept in the spool only", error=str(exc), spool=cfg.sinks.spool)
            else:
                collector_error = str(exc)
    if not spooled and not delivered and (cfg.sinks.spool or cfg.sinks.collector_url):
        # Say exactly where the record is: neither durable sink has it; only the marker that the
        # main stage printed in the job log does (without what ran after it).
        log.error("usage record in the job-log marker only",
                  spool=(f"{cfg.sinks.spool}: write failed" if cfg.sinks.spool else "not configured"),
                  collector=(f"{cfg.sinks.collector_url}: {collector_error}" if cfg.sinks.collector_url
                             else "not configured"),
                  job_id=job.id)
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
