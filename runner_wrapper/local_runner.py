"""A small, faithful emulation of GitLab Runner's custom-executor call sequence.

It drives a custom executor exactly as GitLab Runner does (gitlab-mechanics.md
§1): a per-job ``TMPDIR`` holding ``response.json``; the environment of every
driver call (``BUILD_FAILURE_EXIT_CODE=1``, ``SYSTEM_FAILURE_EXIT_CODE=2``,
``BUILD_EXIT_CODE_FILE``, ``JOB_RESPONSE_FILE``, ``job_env`` from ``config``,
then ``CUSTOM_ENV_<KEY>`` for every job variable); ``config`` -> ``prepare``
(retried up to 3 times with ``cleanup`` in between on non-build errors) -> one
``run SCRIPT STAGE`` per non-empty stage with generated bash scripts
(``prepare_script``, ``get_sources``, ``build_script`` and ``step_<name>``,
``after_script``, ``upload_artifacts_on_success|failure``,
``cleanup_file_variables``) -> ``cleanup``; and it interprets exit codes as in §1.5.

It is used by the tests and by the retry bot's demo::

    from runner_wrapper.local_runner import run_job
    result = run_job(payload, driver_cmd=["runner-wrapper", "executor"], workdir=Path("/tmp/w"))
    result.status, result.failure_reason, result.exit_code, result.log

Not emulated: git, caches, artifacts transfer, services, images (their stages
only echo), and ``graceful_kill_timeout`` escalation beyond one SIGTERM -> SIGKILL.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

__all__ = ["JobResult", "StageCall", "run_job", "BUILD_FAILURE_EXIT_CODE", "SYSTEM_FAILURE_EXIT_CODE"]

BUILD_FAILURE_EXIT_CODE = 1
SYSTEM_FAILURE_EXIT_CODE = 2
PREPARATION_RETRIES = 3


@dataclass(frozen=True)
class StageCall:
    """One driver invocation and how the runner read it."""

    stage: str
    driver_exit: int
    #: ``ok``, ``build_error`` or ``system_failure``.
    outcome: str
    #: The exit code GitLab records for a build error (from ``BUILD_EXIT_CODE_FILE``), else ``None``.
    exit_code: int | None = None
    message: str = ""


@dataclass(frozen=True)
class JobResult:
    #: ``success`` or ``failed`` (GitLab's job status).
    status: str
    #: ``None`` on success; else ``script_failure``, ``runner_system_failure``, ``job_execution_timeout``.
    failure_reason: str | None
    #: The job's exit code as GitLab records it (``None`` for system failures, as in GitLab).
    exit_code: int | None
    #: The job log (trace) as GitLab would store it.
    log: bytes
    #: Output that goes to the runner's own log, not the job log (``config`` stdout, ``cleanup``).
    runner_log: bytes = b""
    stages: tuple[StageCall, ...] = ()
    #: The parsed ``config`` JSON (``{}`` when empty).
    config: dict[str, Any] = field(default_factory=dict)
    tmpdir: Path | None = None


class _Fail(Exception):
    def __init__(self, call: StageCall) -> None:
        super().__init__(call.message)
        self.call = call


def _interpret(stage: str, rc: int, exit_code_file: Path) -> StageCall:
    """§1.5: how GitLab Runner reads a driver's exit."""
    if rc == 0:
        return StageCall(stage, rc, "ok")
    if rc == BUILD_FAILURE_EXIT_CODE:
        try:
            first = exit_code_file.read_text().splitlines()[0].strip() if exit_code_file.exists() else ""
        except (OSError, IndexError):
            first = ""
        if not exit_code_file.exists():
            return StageCall(stage, rc, "build_error", 1, "exit status 1")
        try:
            n = int(first)
        except ValueError:
            return StageCall(stage, rc, "system_failure", None,
                             f"unknown failure: BUILD_EXIT_CODE_FILE holds {first!r}")
        return StageCall(stage, rc, "build_error", n, f"exit status {n}")
    if rc == SYSTEM_FAILURE_EXIT_CODE:
        return StageCall(stage, rc, "system_failure", None, f"exit status {rc}")
    return StageCall(stage, rc, "system_failure", None,
                     f"unknown Custom executor executable exit code {rc}; executable execution terminated with: "
                     f"exit status {rc}")


def _variables(payload: Mapping[str, Any]) -> list[tuple[str, str]]:
    out = []
    for v in payload.get("variables") or []:
        if isinstance(v, Mapping) and isinstance(v.get("key"), str):
            out.append((v["key"], "" if v.get("value") is None else str(v.get("value"))))
    return out


def _script(exports: list[tuple[str, str]], lines: Sequence[str], cd: str | None, echo: bool = True) -> str:
    body = ["#!/usr/bin/env bash", "set -eo pipefail", "set +o noclobber"]
    body += [f"export {k}={shlex.quote(v)}" for k, v in exports if k.isidentifier()]
    if cd:
        body.append(f"cd {shlex.quote(cd)}")
    for ln in lines:
        if echo:
            body.append(f"echo {shlex.quote('$ ' + ln)}")
        body.append(ln)
    return "\n".join(body) + "\n"


def run_job(payload: dict[str, Any], *, driver_cmd: list[str], workdir: Path, extra_env: dict[str, str] | None = None,
            preparation_retry_interval: float = 3.0, script_timeout: float | None = None,
            graceful_kill_timeout: float = 10.0) -> JobResult:
    """Run one job payload through a custom-executor driver, as GitLab Runner would.

    ``driver_cmd`` is the driver command *before* the stage word, e.g.
    ``["runner-wrapper", "--config", "w.toml", "executor"]``; ``config``, ``prepare``,
    ``run SCRIPT STAGE`` and ``cleanup`` are appended.  ``workdir`` receives the job's
    ``TMPDIR`` (``custom-executor*``).  ``extra_env`` is added to the runner's own
    environment.  ``script_timeout`` emulates the job timeout during the user script:
    SIGTERM to the driver's process group, then SIGKILL after ``graceful_kill_timeout``.
    """
    # Driver calls run in TMPDIR (§1.3): resolve a relative driver path against our cwd first.
    if driver_cmd and os.sep in driver_cmd[0] and not os.path.isabs(driver_cmd[0]):
        driver_cmd = [os.path.abspath(driver_cmd[0])] + list(driver_cmd[1:])
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    tmpdir = Path(tempfile.mkdtemp(prefix="custom-executor", dir=workdir))
    response = tmpdir / "response.json"
    response.write_text(json.dumps(payload))
    exit_code_file = tmpdir / "build_exit_code"
    variables = _variables(payload)

    base = dict(os.environ)
    base.update(extra_env or {})
    base.update({"TMPDIR": str(tmpdir), "BUILD_FAILURE_EXIT_CODE": str(BUILD_FAILURE_EXIT_CODE),
                 "SYSTEM_FAILURE_EXIT_CODE": str(SYSTEM_FAILURE_EXIT_CODE),
                 "BUILD_EXIT_CODE_FILE": str(exit_code_file), "JOB_RESPONSE_FILE": str(response)})
    log = bytearray()
    runner_log = bytearray()
    calls: list[StageCall] = []
    job_env: dict[str, str] = {}

    def line(text: str) -> None:
        log.extend(text.encode() + b"\n")

    def env() -> dict[str, str]:
        e = dict(base)
        e.update(job_env)  # before CUSTOM_ENV_*, so it cannot override them (§1.2)
        for k, v in variables:
            e[f"CUSTOM_ENV_{k}"] = v
        return e

    def call(args: list[str], stage: str, to: bytearray, timeout: float | None = None,
             split_stdout: bool = False) -> tuple[StageCall, bytes]:
        if exit_code_file.exists():
            exit_code_file.unlink()
        proc = subprocess.Popen(driver_cmd + args, env=env(), cwd=tmpdir, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE if split_stdout else subprocess.STDOUT,
                                process_group=0)
        timed_out = False
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                out, err = proc.communicate(timeout=graceful_kill_timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
        if split_stdout:
            to.extend(err or b"")
        else:
            to.extend(out or b"")
        c = _interpret(stage, proc.returncode, exit_code_file)
        if timed_out:
            c = StageCall(stage, proc.returncode, "timeout", None, "execution took longer than the timeout")
        calls.append(c)
        return c, (out or b"") if split_stdout else b""

    def result(status: str, reason: str | None, code: int | None, cfg: dict[str, Any]) -> JobResult:
        return JobResult(status=status, failure_reason=reason, exit_code=code, log=bytes(log),
                         runner_log=bytes(runner_log), stages=tuple(calls), config=cfg, tmpdir=tmpdir)

    line("Running with gitlab-runner (runner_wrapper.local_runner emulation)")
    line('Preparing the "custom" executor')

    # ---- config + prepare, retried on anything but a build error (§1.6)
    config: dict[str, Any] = {}
    prepared = False
    last_fail: StageCall | None = None
    for attempt in range(1, PREPARATION_RETRIES + 1):
        job_env = {}
        c, out = call(["config"], "config", log, split_stdout=True)
        runner_log.extend(out)
        if c.outcome == "ok":
            try:
                config = json.loads(out) if out.strip() else {}
                if not isinstance(config, dict):
                    raise ValueError("not an object")
            except ValueError as exc:
                c = StageCall("config", c.driver_exit, "system_failure", None,
                              f"error while parsing JSON output: {exc}")
                calls[-1] = c
        if c.outcome == "ok":
            job_env = {str(k): str(v) for k, v in (config.get("job_env") or {}).items()}
            drv = config.get("driver") or {}
            if drv.get("name"):
                line(f"Using Custom executor with driver {drv.get('name')} {drv.get('version', '')}...")
            else:
                line("Using Custom executor...")
            c = call(["prepare"], "prepare", log)[0]
        if c.outcome == "ok":
            prepared = True
            break
        last_fail = c
        if c.outcome == "build_error":
            break
        line(f"ERROR: Preparation failed: {c.message}")
        call(["cleanup"], "cleanup", runner_log)
        if attempt < PREPARATION_RETRIES:
            line(f"Will be retried in {preparation_retry_interval:g}s ...")
            time.sleep(preparation_retry_interval)

    if not prepared:
        call(["cleanup"], "cleanup", runner_log)
        assert last_fail is not None
        if last_fail.outcome == "build_error":
            line(f"ERROR: Job failed: {last_fail.message}")
            return result("failed", "script_failure", last_fail.exit_code, config)
        line(f"ERROR: Job failed (system failure): {last_fail.message}")
        return result("failed", "runner_system_failure", None, config)

    # ---- stages
    builds_dir = str(config.get("builds_dir") or "/builds")
    info = payload.get("job_info") or {}
    project_dir = os.path.join(builds_dir, str(info.get("project_full_path") or info.get("project_name")
                                               or f"project-{info.get('project_id', 0)}"))
    exports = variables + [("CI_BUILDS_DIR", builds_dir), ("CI_PROJECT_DIR", project_dir), ("CI_SERVER", "yes")]
    counter = [0]

    def write_script(text: str) -> Path:
        counter[0] += 1
        d = tmpdir / f"script{counter[0]:03d}"
        d.mkdir(mode=0o700)
        p = d / "script."
        p.write_text(text)
        p.chmod(0o700)
        return p

    def stage(name: str, text: str, header: str, timeout: float | None = None) -> StageCall:
        line(header)
        if name == "build_script":
            line("WARNING: Starting with version 17.0 the 'build_script' stage will be replaced with 'step_script'")
        c = call(["run", str(write_script(text)), name], name, log, timeout=timeout)[0]
        return c

    failure: StageCall | None = None
    system: StageCall | None = None
    steps = [s for s in payload.get("steps") or [] if isinstance(s, Mapping)]
    user_steps = [s for s in steps if s.get("name") != "after_script"]
    after = next((s for s in steps if s.get("name") == "after_script"), None)

    prep = [("prepare_script", _script([], ['echo "Running on $(hostname) via local_runner..."'], None, echo=False),
             "Preparing environment"),
            ("get_sources", _script(exports, ['echo "Fetching changes (emulated: no git)..."',
                                              f"mkdir -p {shlex.quote(project_dir)}"], None, echo=False),
             "Getting source from Git repository")]
    for name, text, header in prep:
        c = stage(name, text, header)
        if c.outcome == "build_error":
            failure = c
            break
        if c.outcome != "ok":
            system = c
            break

    status_ok = failure is None and system is None
    if status_ok:
        for s in user_steps:
            sname = "build_script" if s.get("name") == "script" else f"step_{s.get('name')}"
            lines = [str(x) for x in s.get("script") or []]
            if not lines:
                continue
            c = stage(sname, _script(exports, lines, project_dir),
                      f'Executing "{"step_script" if sname == "build_script" else sname}" stage of the job script',
                      timeout=script_timeout)
            if c.outcome == "timeout":
                system = c
                break
            if c.outcome == "build_error":
                failure = c
                break
            if c.outcome != "ok":
                system = c
                break
        if system is None or system.outcome == "timeout":
            if after and after.get("script"):
                job_status = "failed" if (failure or system) else "success"
                c = stage("after_script", _script(exports + [("CI_JOB_STATUS", job_status)],
                                                  [str(x) for x in after["script"]], project_dir), "Running after_script")
                if c.outcome != "ok":
                    line(f"WARNING: after_script failed, but job will continue unaffected: {c.message}")
    if system is None or system.outcome == "timeout":
        if payload.get("artifacts"):
            ok = failure is None and system is None
            stage("upload_artifacts_on_success" if ok else "upload_artifacts_on_failure",
                  _script([], ['echo "Uploading artifacts (emulated)..."'], None, echo=False), "Uploading artifacts")
        c = stage("cleanup_file_variables", _script([], ["true"], None, echo=False),
                  "Cleaning up project directory and file based variables")
        if c.outcome != "ok":
            line(f"WARNING: cleanup_file_variables failed: {c.message}")
    call(["cleanup"], "cleanup", runner_log)

    if system is not None:
        if system.outcome == "timeout":
            line("ERROR: Job failed: execution took longer than the timeout")
            return result("failed", "job_execution_timeout", None, config)
        line(f"ERROR: Job failed (system failure): {system.message}")
        return result("failed", "runner_system_failure", None, config)
    if failure is not None:
        line(f"ERROR: Job failed: {failure.message}")
        return result("failed", "script_failure", failure.exit_code, config)
    line("Job succeeded")
    return result("success", None, 0, config)
