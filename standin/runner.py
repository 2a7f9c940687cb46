"""A faithful emulation of GitLab Runner's custom-executor call sequence, for tests and the demo.

Every behaviour below is GitLab Runner's (``R`` = gitlab-org/gitlab-runner at d79f3e7b, 19.4.0-pre;
the custom-executor parts are unchanged since v17.9.0; gitlab-mechanics.md §1 and §11.4):

- **Preparation** (``config`` + ``prepare``) is tried ``PREPARATION_RETRIES = 3`` times,
  ``PreparationRetryInterval = 3 s`` apart, each attempt with a fresh ``TMPDIR`` holding a fresh
  ``response.json``, and ``cleanup`` (then removal of that TMPDIR) after each failed attempt; a
  build error (driver exit ``BUILD_FAILURE_EXIT_CODE``) is not retried (R ``common/build.go``
  ``retryCreateExecutor``, ``common/consts.go``; ``executors/custom/custom.go`` ``Prepare``,
  ``Cleanup``).  Invalid ``config`` JSON -- whitespace only, or a key of the wrong type, included
  (:func:`parse_config_output`) -- is ``error while parsing JSON output`` (retried).
- **Environment of every driver call** (R ``executors/custom/command/command.go`` ``New``,
  ``executors/custom/custom.go`` ``prepareCommand``): the runner's own environment, then
  ``TMPDIR``, ``BUILD_FAILURE_EXIT_CODE=1``, ``SYSTEM_FAILURE_EXIT_CODE=2``,
  ``BUILD_EXIT_CODE_FILE``, ``JOB_RESPONSE_FILE``, then ``job_env`` from ``config``, then
  ``CUSTOM_ENV_<KEY>`` for *all* job variables -- predefined ones included -- **after expansion**
  (R ``Build.GetAllVariables`` -> ``JobVariables.Expand``), and ``CUSTOM_ENV_CI_JOB_SERVICES``.
  The last duplicate wins (Go's ``os/exec`` keeps the last value of a key), so ``job_env``
  overrides the runner's own values but not ``CUSTOM_ENV_*``.  ``JOB_RESPONSE_FILE`` is the raw,
  unexpanded payload.
- **Expansion** is :func:`go_expand`, Go's ``os.Expand`` (Go ``src/os/env.go``; the runner is built
  with Go 1.26, R ``go.mod``) as the runner calls it with ``Variables.Get`` (R
  ``common/spec/variables.go`` ``ExpandValue``, ``ExpandWith``, ``value``): ``$NAME`` and
  ``${NAME}`` become the last value of NAME (empty if unset) -- for a **file** variable its path,
  ``path.Join($RUNNER_TEMP_PROJECT_DIR, NAME)``, not its contents (``tmpFile``) -- ``$$`` becomes
  ``$``, ``$?``, ``$*``, ``$#``, ``$@``, ``$!`` and ``$0``-``$9`` become empty, a ``$`` not followed
  by a name (``$(``, ``$.``, ``$ ``) is **kept**, ``${}`` and an unclosed ``${`` are eaten; a
  trailing ``$`` stays.  Variables marked ``raw`` are not expanded.  The list expanded is R
  ``Build.GetAllVariables``: the predefined variables that come before the job's (R
  ``getBaseVariablesBeforeJob``, ``GetDefaultVariables``: ``CI_BUILDS_DIR``, ``CI_PROJECT_DIR``,
  ``CI_CONCURRENT_ID``, ``CI_CONCURRENT_PROJECT_ID``, ``CI_SERVER``, ``CI_JOB_STATUS=running``,
  ``CI_JOB_TIMEOUT``: ``runner_info.timeout`` or ``DefaultTimeout`` 7200, R ``GetBuildTimeout``), the
  job's variables, then those that come *after* them and so win over a
  job variable of the same name (R ``getBaseVariablesAfterJob``: ``CI_SHARED_ENVIRONMENT=true``,
  always for the custom executor, R ``custom.go`` ``featuresUpdater``; ``RUNNER_TEMP_PROJECT_DIR`` =
  ``<project dir>.tmp``).
- **Stage order and skipping** (R ``common/build.go`` ``executeScript``, ``attemptExecuteStage``,
  ``executeAfterScript``, ``executeArchiveCache``, ``executeUploadArtifacts``,
  ``removeFileBasedVariables``): ``prepare_script`` (on failure nothing else runs);
  ``get_sources`` (``GET_SOURCES_ATTEMPTS``, with ``clear_worktree`` before each retry),
  ``restore_cache`` (``RESTORE_CACHE_ATTEMPTS``), ``download_artifacts``
  (``ARTIFACT_DOWNLOAD_ATTEMPTS``), attempts clamped to 1-10; then, only if those passed, the user
  steps in order (``script`` is passed as ``build_script``, R ``custom.go`` ``Run``; others as
  ``step_<name>``), stopping at the first failure, and ``after_script`` with ``CI_JOB_STATUS``;
  then ``archive_cache`` or ``archive_cache_on_failure``, ``upload_artifacts_on_success`` or
  ``upload_artifacts_on_failure``, ``cleanup_file_variables`` (its errors are only logged).  A
  stage with nothing to do (an empty script, no cache, no artifacts, no dependencies) is skipped:
  the driver is not called.  ``after_script`` errors are ignored unless the job sets
  ``AFTER_SCRIPT_IGNORE_ERRORS`` to a false value (parsed like the runner's ``JobVariables.Bool``).
- **Cancel** (UI/API) cancels only the user script: ``after_script`` (``CI_JOB_STATUS=canceled``),
  the ``*_on_failure`` stages and ``cleanup_file_variables`` still run; the job ends ``canceled``.
  A **job timeout** runs no further ``run``; the job fails with ``job_execution_timeout``.
  ``cleanup`` always runs.  A driver call being ended gets SIGTERM to its process group (each call
  is its own group, stdin ``/dev/null``), then SIGKILL after ``graceful_kill_timeout``, then the
  runner gives up after ``force_kill_timeout`` (R ``helpers/process/killer.go``).
- **Exit codes** (R ``command.go`` ``waitForCommand``, ``parseBuildFailure``): 0 ok;
  ``BUILD_FAILURE_EXIT_CODE`` a build error whose code is the first line of
  ``BUILD_EXIT_CODE_FILE`` (``bufio.ScanLines``, then ``strconv.Atoi`` with no trimming: a
  malformed or empty line is an unknown failure, i.e. a system failure; a missing file is exit
  code 1); ``SYSTEM_FAILURE_EXIT_CODE`` a system failure; anything else ``unknown Custom executor
  executable exit code N``.  The runner never deletes the file between stages, only the whole
  TMPDIR at cleanup: a stale code stays readable, as on a real runner.
- **Builds directory** (R ``common/build.go`` ``ProjectUniqueDir``, ``ProjectSlug``;
  ``commands/builds_helper.go`` ``addBuild``): ``builds_dir_is_shared`` true gives
  ``<builds_dir>/<runner short token>/<concurrent project id>/<project path>``, false
  ``<builds_dir>/<project path>``; the concurrent ids are the lowest free slots among the jobs this
  process is running.

Not emulated: git, caches and artifact transfer (those stages only echo), services, images,
``RUNNER_SCRIPT_TIMEOUT``/``RUNNER_AFTER_SCRIPT_TIMEOUT``, the ``*_exec_timeout`` keys, and the trace
sections' timestamps.

Usage (tests and ``retry-bot demo``)::

    from standin.runner import run_job
    result = run_job(payload, driver_cmd=["runner-wrapper", "executor"], workdir=Path("/tmp/w"))
    result.status, result.failure_reason, result.exit_code, result.log
"""

from __future__ import annotations

import json
import os
import posixpath
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import urlsplit

__all__ = ["JobResult", "StageCall", "run_job", "go_expand", "expand_variables", "atoi", "read_exit_code_file",
           "project_unique_dir", "BUILD_FAILURE_EXIT_CODE", "SYSTEM_FAILURE_EXIT_CODE", "PREPARATION_RETRIES"]

#: R ``executors/custom/command/command.go``.
BUILD_FAILURE_EXIT_CODE = 1
SYSTEM_FAILURE_EXIT_CODE = 2
#: R ``common/consts.go`` ``PreparationRetries``.
PREPARATION_RETRIES = 3
#: R ``helpers/process`` ``KillTimeout`` (the code's value; the docs say 600 s).
FORCE_KILL_TIMEOUT = 10.0


@dataclass(frozen=True)
class StageCall:
    """One driver invocation and how the runner read it."""

    stage: str
    driver_exit: int
    #: ``ok``, ``build_error``, ``configuration_error``, ``system_failure``, ``canceled`` or ``timeout``.
    outcome: str
    #: The exit code GitLab records for a build error (from ``BUILD_EXIT_CODE_FILE``), else ``None``.
    exit_code: int | None = None
    message: str = ""


@dataclass(frozen=True)
class JobResult:
    #: ``success``, ``failed`` or ``canceled`` (GitLab's job status).
    status: str
    #: ``None`` on success and cancel; else ``script_failure``, ``runner_system_failure``,
    #: ``job_execution_timeout``.
    failure_reason: str | None
    #: The job's exit code as GitLab records it (``None`` for system failures and timeouts, as in GitLab).
    exit_code: int | None
    #: The job log (trace) as GitLab would store it.
    log: bytes
    #: Output that goes to the runner's own log, not the job log (``config`` stdout, ``cleanup``).
    runner_log: bytes = b""
    stages: tuple[StageCall, ...] = ()
    #: The parsed ``config`` JSON (``{}`` when empty).
    config: dict[str, Any] = field(default_factory=dict)
    #: The last preparation attempt's TMPDIR (removed at cleanup, as the runner does).
    tmpdir: Path | None = None
    #: ``CI_PROJECT_DIR``: where the job's checkout would be.
    project_dir: Path | None = None


# --------------------------------------------------------------------------- pure helpers

_SPECIAL = frozenset("*#$@!?-0123456789")
_ALNUM = frozenset("_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _shell_name(s: str) -> tuple[str, int]:
    """Go ``os.getShellName``: the name after a ``$`` and how many characters it takes."""
    if s[0] == "{":
        if len(s) > 2 and s[1] in _SPECIAL and s[2] == "}":
            return s[1:2], 3
        for i in range(1, len(s)):
            if s[i] == "}":
                return s[1:i], i + 1  # "${}" gives ("", 2): eaten
        return "", 1  # bad syntax: eat "${"
    if s[0] in _SPECIAL:
        return s[0:1], 1
    i = 0
    while i < len(s) and s[i] in _ALNUM:
        i += 1
    return s[:i], i


def go_expand(value: str, lookup: Callable[[str], str]) -> str:
    """Go's ``os.Expand(value, lookup)`` (Go ``src/os/env.go``), as GitLab Runner expands job variables:
    invalid syntax (``${}``, an unclosed ``${``) is eaten, a ``$`` not followed by a name is left
    untouched, a trailing ``$`` stays."""
    out: list[str] = []
    i = 0
    j = 0
    while j < len(value):
        if value[j] == "$" and j + 1 < len(value):
            out.append(value[i:j])
            name, w = _shell_name(value[j + 1:])
            if name == "" and w > 0:
                pass  # invalid syntax: eat the characters
            elif name == "":
                out.append("$")  # valid syntax, but no name: leave the dollar untouched
            else:
                out.append(lookup(name))
            j += w
            i = j + 1
        j += 1
    if not out:
        return value
    return "".join(out) + value[i:]


def _variables_value(variables: Sequence[Mapping[str, Any]], key: str) -> str:
    """R ``Variables.Value``: the *last* variable of that name's value (a file variable's contents)."""
    for v in reversed(variables):
        if v["key"] == key:
            return str(v["value"])
    return ""


def _variables_get(variables: Sequence[Mapping[str, Any]]) -> Callable[[str], str]:
    """R ``Variables.Get`` (``value(key, pathnames=true)``): ``$`` -> ``$``; the shell's
    positional/special names -> empty; else the *last* variable of that name -- for a file variable
    the path the runner writes it to, ``path.Join(Value("RUNNER_TEMP_PROJECT_DIR"), key)``
    (R ``tmpFile``) -- or empty."""
    def get(key: str) -> str:
        if key == "$":
            return "$"
        if key in ("*", "#", "@", "!", "?") or (len(key) == 1 and key.isdigit()):
            return ""
        for v in reversed(variables):
            if v["key"] == key:
                if v.get("file"):
                    return posixpath.normpath(posixpath.join(_variables_value(variables, "RUNNER_TEMP_PROJECT_DIR"),
                                                             key))
                return str(v["value"])
        return ""

    return get


def expand_variables(variables: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """R ``JobVariables.Expand``: every non-``raw`` value expanded against the unexpanded list."""
    get = _variables_get(variables)
    return [dict(v, value=v["value"] if v.get("raw") else go_expand(str(v["value"]), get)) for v in variables]


def atoi(text: str) -> int:
    """Go's ``strconv.Atoi`` on 64 bits: an optional sign and decimal digits, nothing else (no
    whitespace, no ``_``); ``ValueError`` otherwise."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not all("0" <= c <= "9" for c in digits):
        raise ValueError(f"strconv.Atoi: parsing {text!r}: invalid syntax")
    n = int(text)
    if not -2**63 <= n < 2**63:
        raise ValueError(f"strconv.Atoi: parsing {text!r}: value out of range")
    return n


def read_exit_code_file(path: Path) -> int | None | str:
    """The code in ``BUILD_EXIT_CODE_FILE`` as the runner reads it: ``None`` when the file cannot be
    opened (exit code 1), else ``strconv.Atoi`` of its first ``bufio.ScanLines`` line; the error
    text when that fails (the runner then reports an unknown failure)."""
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        data = b""  # Go's os.Open opens a directory; reading it fails, so the scanner yields "" (Atoi error)
    except OSError:
        return None
    first = data.split(b"\n", 1)[0] if data else b""
    if first.endswith(b"\r"):  # ScanLines drops one trailing \r
        first = first[:-1]
    text = first.decode("utf-8", "replace")
    try:
        return atoi(text)
    except ValueError as exc:
        return str(exc)


def _setting_bool(value: str, default: bool) -> bool:
    """A boolean build setting as R ``common/build_settings.go`` ``validate`` reads it: Go's
    ``strconv.ParseBool`` of the raw value (``1 t T TRUE true True`` / ``0 f F FALSE false False``,
    no lower-casing); empty or anything else is the default (the runner logs the invalid value)."""
    if value in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if value in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return default


def _attempts(value: str) -> int:
    """``GET_SOURCES_ATTEMPTS`` and friends: default 1, clamped to 1-10 (R ``attemptExecuteStage``)."""
    try:
        n = atoi(value)
    except ValueError:
        return 1
    return max(1, min(10, n))


#: R ``common/consts.go`` ``DefaultTimeout`` (seconds), used when the payload gives none.
DEFAULT_TIMEOUT = 7200


def _build_timeout(value: Any) -> int:
    """R ``Build.GetBuildTimeout``: ``runner_info.timeout`` when positive, else ``DefaultTimeout``."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else DEFAULT_TIMEOUT


def project_slug(payload: Mapping[str, Any]) -> str:
    """R ``Build.ProjectSlug``: the repository URL's path without ``.git``; ``project-<id>`` when unusable."""
    repo = str((payload.get("git_info") or {}).get("repo_url") or "")
    info = payload.get("job_info") or {}
    try:
        parts = urlsplit(repo)
    except ValueError:
        parts = None
    if parts is not None and parts.netloc:
        slug = os.path.normpath(parts.path[:-4] if parts.path.endswith(".git") else parts.path).strip("/")
        if slug and slug != "." and ".." not in slug:
            return slug
    return f"project-{info.get('project_id', 0)}"


def project_unique_dir(payload: Mapping[str, Any], shared: bool, short_token: str, project_runner_id: int) -> str:
    """R ``Build.ProjectUniqueDir``, relative to the builds dir."""
    slug = project_slug(payload)
    return f"{short_token}/{project_runner_id}/{slug}" if shared else slug


# Concurrent ids, as R commands/builds_helper.go addBuild assigns them: the lowest free slot.
_SLOTS_LOCK = threading.Lock()
_RUNNER_SLOTS: dict[str, set[int]] = {}
_PROJECT_SLOTS: dict[tuple[str, Any], set[int]] = {}


def _acquire(table: dict[Any, set[int]], key: Any) -> int:
    with _SLOTS_LOCK:
        used = table.setdefault(key, set())
        n = 0
        while n in used:
            n += 1
        used.add(n)
        return n


def _release(table: dict[Any, set[int]], key: Any, n: int) -> None:
    with _SLOTS_LOCK:
        table.get(key, set()).discard(n)


#: R ``executors/custom/api/config.go`` ``ConfigExecOutput``: each key's JSON type (``None`` = ``null``).
_CONFIG_STRINGS = ("hostname", "builds_dir", "cache_dir", "shell")


def parse_config_output(out: bytes) -> dict[str, Any]:
    """``config``'s stdout as R ``custom.go`` ``dynamicConfig`` reads it: Go's ``json.Unmarshal`` into
    ``ConfigExecOutput``, so a wrong type (``"builds_dir_is_shared": "true"``, a number for
    ``builds_dir``, a non-string ``job_env`` value) is an error like invalid JSON; unknown keys are
    ignored; ``null`` is "not set".  ``ValueError`` with the reason."""
    doc = json.loads(out)
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ValueError(f"json: cannot unmarshal {type(doc).__name__} into Go value of type ConfigExecOutput")

    def want(ok: bool, key: str, go_type: str) -> None:
        if not ok:
            raise ValueError(f"json: cannot unmarshal {type(doc[key]).__name__} into Go struct field "
                             f"ConfigExecOutput.{key} of type {go_type}")

    for key in _CONFIG_STRINGS:
        if doc.get(key) is not None:
            want(isinstance(doc[key], str), key, "string")
    if doc.get("builds_dir_is_shared") is not None:
        want(isinstance(doc["builds_dir_is_shared"], bool), "builds_dir_is_shared", "bool")
    if doc.get("job_env") is not None:
        want(isinstance(doc["job_env"], dict) and all(isinstance(v, str) or v is None for v in doc["job_env"].values()),
             "job_env", "map[string]string")
        doc["job_env"] = {k: v or "" for k, v in doc["job_env"].items()}
    if doc.get("driver") is not None:
        drv = doc["driver"]
        want(isinstance(drv, dict) and all(isinstance(drv.get(k), str) or drv.get(k) is None
                                           for k in ("name", "version")), "driver", "api.DriverInfo")
    return {k: v for k, v in doc.items() if v is not None}


def _signal_group(pgid: int, sig: int) -> None:
    """``kill(-pgid, sig)``; a group that is already gone is not an error."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _interpret(stage: str, rc: int, exit_code_file: Path) -> StageCall:
    """How GitLab Runner reads a driver's exit (R ``command.go`` ``waitForCommand``)."""
    if rc == 0:
        return StageCall(stage, rc, "ok")
    if rc == BUILD_FAILURE_EXIT_CODE:
        code = read_exit_code_file(exit_code_file)
        if code is None:
            return StageCall(stage, rc, "build_error", 1, "exit status 1")
        if isinstance(code, str):
            return StageCall(stage, rc, "system_failure", None,
                             f"unknown Custom executor executable exit code {SYSTEM_FAILURE_EXIT_CODE}; "
                             f"executable execution terminated with: exit status {rc} ({code})")
        return StageCall(stage, rc, "build_error", code, f"exit status {code}")
    if rc == SYSTEM_FAILURE_EXIT_CODE:
        return StageCall(stage, rc, "system_failure", None, f"exit status {rc}")
    return StageCall(stage, rc, "system_failure", None,
                     f"unknown Custom executor executable exit code {rc}; executable execution terminated with: "
                     f"exit status {rc}")


def _script(exports: Sequence[tuple[str, str]], lines: Sequence[str], cd: str | None, echo: bool = True) -> str:
    body = ["#!/usr/bin/env bash", "set -eo pipefail", "set +o noclobber"]
    body += [f"export {k}={shlex.quote(v)}" for k, v in exports if k.isidentifier()]
    if cd:
        body.append(f"cd {shlex.quote(cd)}")
    for ln in lines:
        if echo:
            body.append(f"echo {shlex.quote('$ ' + ln)}")
        body.append(ln)
    return "\n".join(body) + "\n"


# --------------------------------------------------------------------------- the job


def run_job(payload: dict[str, Any], *, driver_cmd: list[str], workdir: Path, extra_env: dict[str, str] | None = None,
            preparation_retry_interval: float = 3.0, script_timeout: float | None = None,
            graceful_kill_timeout: float = 10.0, force_kill_timeout: float = FORCE_KILL_TIMEOUT,
            job_timeout: float | None = None, cancel: threading.Event | None = None,
            cancel_after: float | None = None, builds_dir: str = "/builds", cache_dir: str = "/cache",
            short_token: str = "local000") -> JobResult:
    """Run one job payload through a custom-executor driver, as GitLab Runner would.

    ``driver_cmd`` is the driver command *before* the stage word, e.g.
    ``["runner-wrapper", "--config", "w.toml", "executor"]``; ``config``, ``prepare``,
    ``run SCRIPT STAGE`` and ``cleanup`` are appended.  ``workdir`` receives the job's
    ``TMPDIR`` (``custom-executor*``).  ``extra_env`` is added to the runner's own environment.
    ``builds_dir``/``cache_dir`` are the ``[[runners]]`` values (``config`` may override them).

    Ending a job early: ``job_timeout`` seconds after the job starts it times out;
    ``script_timeout`` does the same that many seconds into the user script; ``cancel`` (an event
    set by another thread) or ``cancel_after`` (seconds into the user script) cancels it.
    """
    if driver_cmd and os.sep in driver_cmd[0] and not os.path.isabs(driver_cmd[0]):
        driver_cmd = [os.path.abspath(driver_cmd[0])] + list(driver_cmd[1:])  # calls run in TMPDIR
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    job_started = time.monotonic()
    deadline: list[float] = [job_started + job_timeout] if job_timeout is not None else []
    info = payload.get("job_info") or {}
    runner_id = _acquire(_RUNNER_SLOTS, short_token)
    project_key = (short_token, info.get("project_id"))
    project_runner_id = _acquire(_PROJECT_SLOTS, project_key)
    try:
        return _Job(payload, driver_cmd, workdir, extra_env or {}, preparation_retry_interval, script_timeout,
                    graceful_kill_timeout, force_kill_timeout, deadline, cancel, cancel_after, builds_dir,
                    cache_dir, short_token, runner_id, project_runner_id).run()
    finally:
        _release(_RUNNER_SLOTS, short_token, runner_id)
        _release(_PROJECT_SLOTS, project_key, project_runner_id)


class _Job:
    """One job's run; :func:`run_job` is the interface."""

    def __init__(self, payload: dict[str, Any], driver_cmd: list[str], workdir: Path, extra_env: dict[str, str],
                 retry_interval: float, script_timeout: float | None, graceful: float, force: float,
                 deadline: list[float], cancel: threading.Event | None, cancel_after: float | None,
                 builds_dir: str, cache_dir: str, short_token: str, runner_id: int, project_runner_id: int) -> None:
        self.payload = payload
        self.driver_cmd = driver_cmd
        self.workdir = workdir
        self.retry_interval = retry_interval
        self.script_timeout = script_timeout
        self.graceful = graceful
        self.force = force
        self.deadline = deadline
        self.cancel = cancel or threading.Event()
        self.cancel_after = cancel_after
        self.builds_dir = builds_dir
        self.cache_dir = cache_dir
        self.short_token = short_token
        self.runner_id = runner_id
        self.project_runner_id = project_runner_id
        self.base = dict(os.environ)
        self.base.update(extra_env)
        self.log = bytearray()
        self.runner_log = bytearray()
        self.calls: list[StageCall] = []
        self.job_env: dict[str, str] = {}
        self.config: dict[str, Any] = {}
        self.tmpdir: Path | None = None
        self.custom_env: list[tuple[str, str]] = []
        self.script_deadline: float | None = None  # cancel_after / script_timeout, set when the script starts
        self.script_canceled = False
        self.timed_out = False
        self.counter = 0

    # ---------------------------------------------------------------- plumbing

    def line(self, text: str) -> None:
        self.log.extend(text.encode() + b"\n")

    @property
    def exit_code_file(self) -> Path:
        assert self.tmpdir is not None
        return self.tmpdir / "build_exit_code"

    def env(self) -> dict[str, str]:
        assert self.tmpdir is not None
        e = dict(self.base)
        e.update({"TMPDIR": str(self.tmpdir), "BUILD_FAILURE_EXIT_CODE": str(BUILD_FAILURE_EXIT_CODE),
                  "SYSTEM_FAILURE_EXIT_CODE": str(SYSTEM_FAILURE_EXIT_CODE),
                  "BUILD_EXIT_CODE_FILE": str(self.exit_code_file),
                  "JOB_RESPONSE_FILE": str(self.tmpdir / "response.json")})
        e.update(self.job_env)  # after the runner's values (it overrides them), before CUSTOM_ENV_*
        for k, v in self.custom_env:
            e[f"CUSTOM_ENV_{k}"] = v  # in order: the last duplicate wins
        return e

    def _ending(self, script: bool) -> str | None:
        """``timeout`` / ``canceled`` when the call must be ended now."""
        now = time.monotonic()
        if self.deadline and now >= self.deadline[0]:
            return "timeout"
        if script and (self.cancel.is_set() or (self.script_deadline is not None and now >= self.script_deadline)):
            return "canceled"
        return None

    def call(self, args: list[str], stage: str, to: bytearray, script: bool = False,
             split_stdout: bool = False) -> tuple[StageCall, bytes]:
        """One driver call in its own process group, stdin ``/dev/null``, cwd TMPDIR (R ``command.go``)."""
        proc = subprocess.Popen(self.driver_cmd + args, env=self.env(), cwd=self.tmpdir, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE if split_stdout else subprocess.STDOUT, process_group=0)
        ended: str | None = None
        out = err = b""
        while True:
            try:
                out, err = proc.communicate(timeout=0.02)
                break
            except subprocess.TimeoutExpired:
                ended = self._ending(script)
                if ended:
                    break
        if ended:
            # R helpers/process/killer.go: SIGTERM to the group, graceful_kill_timeout, SIGKILL,
            # force_kill_timeout, then give up.
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                out, err = proc.communicate(timeout=self.graceful)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                try:
                    out, err = proc.communicate(timeout=self.force)
                except subprocess.TimeoutExpired:
                    out, err = b"", b""
        to.extend((err if split_stdout else out) or b"")
        if ended == "timeout":
            self.timed_out = True
            c = StageCall(stage, proc.returncode if proc.returncode is not None else -1, "timeout", None,
                          "execution took longer than the timeout")
        elif ended == "canceled":
            self.script_canceled = True
            c = StageCall(stage, proc.returncode if proc.returncode is not None else -1, "canceled", None,
                          "script canceled externally (UI, API)")
        else:
            c = _interpret(stage, proc.returncode, self.exit_code_file)
        self.calls.append(c)
        return c, (out or b"") if split_stdout else b""

    def cleanup(self) -> None:
        """``cleanup_exec`` (output to the runner log only), then the TMPDIR is removed (R ``custom.go`` ``Cleanup``)."""
        self.call(["cleanup"], "cleanup", self.runner_log)
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)

    def write_script(self, text: str) -> Path:
        assert self.tmpdir is not None
        self.counter += 1
        d = Path(tempfile.mkdtemp(prefix="script", dir=self.tmpdir))
        p = d / "script."
        p.write_text(text)
        p.chmod(0o700)
        return p

    def result(self, status: str, reason: str | None, code: int | None, project_dir: str | None = None) -> JobResult:
        return JobResult(status=status, failure_reason=reason, exit_code=code, log=bytes(self.log),
                         runner_log=bytes(self.runner_log), stages=tuple(self.calls), config=self.config,
                         tmpdir=self.tmpdir, project_dir=Path(project_dir) if project_dir else None)

    # ---------------------------------------------------------------- preparation

    def prepare(self) -> StageCall | None:
        """``None`` when prepared, else the failing call (R ``retryCreateExecutor``)."""
        last: StageCall | None = None
        for attempt in range(1, PREPARATION_RETRIES + 1):
            self.tmpdir = Path(tempfile.mkdtemp(prefix="custom-executor", dir=self.workdir))  # 0700, fresh
            (self.tmpdir / "response.json").write_text(json.dumps(self.payload))
            self.job_env = {}
            self.config = {}
            self.custom_env = []
            c, out = self.call(["config"], "config", self.log, split_stdout=True)  # stderr to the job log
            self.runner_log.extend(out)
            if c.outcome == "ok" and out:  # R dynamicConfig: only an empty stdout means "no overrides"
                try:
                    self.config = parse_config_output(out)
                except ValueError as exc:
                    c = StageCall("config", c.driver_exit, "system_failure", None,
                                  f"error while parsing JSON output: {exc}")
                    self.calls[-1] = c
            if c.outcome == "ok":
                self.job_env = {str(k): str(v) for k, v in (self.config.get("job_env") or {}).items()}
                self.custom_env = self.variables()
                # R common/build.go StartBuild (from PrepareBuildAndShell, before prepare_exec): an empty
                # builds_dir or cache_dir -- the [[runners]] value or config's -- is a configuration
                # error, a BuildError (not retried).
                for key, default in (("builds_dir", self.builds_dir), ("cache_dir", self.cache_dir)):
                    if self.config.get(key, default) == "":
                        c = StageCall("config", c.driver_exit, "configuration_error", None,
                                      f"the {key} is not configured")
                        self.calls[-1] = c
                        break
            if c.outcome == "ok":
                drv = self.config.get("driver") or {}  # R custom.go logStartupMessage: set, even if ""
                if drv.get("name") is not None and drv.get("version") is not None:
                    self.line(f"Using Custom executor with driver {drv['name']} {drv['version']}...")
                elif drv.get("name") is not None:
                    self.line(f"Using Custom executor with driver {drv['name']}...")
                else:
                    self.line("Using Custom executor...")
                c = self.call(["prepare"], "prepare", self.log)[0]
            if c.outcome == "ok":
                return None
            last = c
            self.cleanup()  # after every failed attempt, the build error one included
            if c.outcome in ("build_error", "configuration_error", "timeout"):
                return c
            self.line(f"ERROR: Preparation failed: {c.message}")
            if attempt < PREPARATION_RETRIES:
                self.line(f"Will be retried in {self.retry_interval:g}s ...")
                time.sleep(self.retry_interval)
        return last

    # ---------------------------------------------------------------- variables and directories

    @property
    def shared(self) -> bool:
        v = self.config.get("builds_dir_is_shared")
        return v if isinstance(v, bool) else False

    def project_dir(self) -> str:
        root = self.config.get("builds_dir") or self.builds_dir
        return os.path.join(str(root), project_unique_dir(self.payload, self.shared, self.short_token,
                                                          self.project_runner_id))

    def variables(self) -> list[tuple[str, str]]:
        """All job variables after expansion, predefined ones first (R ``GetAllVariables``)."""
        timeout = (self.payload.get("runner_info") or {}).get("timeout")
        project_dir = self.project_dir()
        # R getBaseVariablesBeforeJob (Runner.GetVariables, then GetDefaultVariables).
        before = [("CI_RUNNER_SHORT_TOKEN", self.short_token),
                  ("CI_BUILDS_DIR", str(self.config.get("builds_dir") or self.builds_dir)),
                  ("CI_PROJECT_DIR", project_dir),
                  ("CI_CONCURRENT_ID", str(self.runner_id)),
                  ("CI_CONCURRENT_PROJECT_ID", str(self.project_runner_id)),
                  ("CI_SERVER", "yes"), ("CI_JOB_STATUS", "running"),
                  ("CI_JOB_TIMEOUT", str(_build_timeout(timeout)))]
        # R getBaseVariablesAfterJob: after the job's variables, so these win over a job variable.
        # CI_SHARED_ENVIRONMENT, not CI_DISPOSABLE_ENVIRONMENT: the custom executor always declares
        # features.Shared (R executors/custom/custom.go featuresUpdater), whatever builds_dir_is_shared says.
        after = [("CI_SHARED_ENVIRONMENT", "true"),
                 ("RUNNER_TEMP_PROJECT_DIR", project_dir + ".tmp")]
        items: list[dict[str, Any]] = [{"key": k, "value": v, "raw": False} for k, v in before]
        for v in self.payload.get("variables") or []:
            if isinstance(v, Mapping) and isinstance(v.get("key"), str):
                items.append({"key": v["key"], "value": "" if v.get("value") is None else str(v["value"]),
                              "raw": bool(v.get("raw")), "file": bool(v.get("file"))})
        items += [{"key": k, "value": v, "raw": False} for k, v in after]
        out = [(v["key"], v["value"]) for v in expand_variables(items)]
        services = self.payload.get("services") or []
        out.append(("CI_JOB_SERVICES", json.dumps([
            {"name": s.get("name"), "alias": s.get("alias", ""), "entrypoint": s.get("entrypoint"),
             "command": s.get("command")} for s in services if isinstance(s, Mapping)]) if services else ""))
        return out

    def lookup(self, key: str) -> str:
        for k, v in reversed(self.custom_env):
            if k == key:
                return v
        return ""

    # ---------------------------------------------------------------- stages

    def stage(self, name: str, text: str, header: str, script: bool = False) -> StageCall:
        self.line(header)
        if name == "build_script":
            self.line("WARNING: Starting with version 17.0 the 'build_script' stage will be replaced with "
                      "'step_script': https://gitlab.com/groups/gitlab-org/-/epics/6112")
        return self.call(["run", str(self.write_script(text)), name], name, self.log, script=script)[0]

    def attempt_stage(self, name: str, text: str, header: str, attempts: int,
                      before_retry: Callable[[], StageCall] | None = None) -> StageCall:
        """R ``attemptExecuteStage``."""
        c = self.stage(name, text, header)
        n = 1
        while c.outcome not in ("ok", "timeout") and n < attempts:
            n += 1
            if before_retry is not None:
                before_retry()
            c = self.stage(name, text, header)
        return c

    def run(self) -> JobResult:
        self.line("Running with gitlab-runner (standin.runner emulation)")
        self.line('Preparing the "custom" executor')
        failed = self.prepare()
        if failed is not None:
            return self.verdict(failed, None)  # cleanup ran after the failed attempt

        project_dir = self.project_dir()
        exports = list(self.custom_env)
        failure: StageCall | None = None

        # prepare_script: on failure, nothing else runs.
        c = self.stage("prepare_script", _script([], ['echo "Running on $(hostname) via standin.runner..."'], None,
                                                 echo=False), "Preparing environment")
        if c.outcome != "ok":
            self.cleanup()
            return self.verdict(c, project_dir)

        get_sources = _script(exports, ['echo "Fetching changes (emulated: no git)..."',
                                        f"mkdir -p {shlex.quote(project_dir)}"], None, echo=False)
        clear = _script(exports, ['echo "Deleting the worktree (emulated)..."'], None, echo=False)
        c = self.attempt_stage("get_sources", get_sources, "Getting source from Git repository",
                               _attempts(self.lookup("GET_SOURCES_ATTEMPTS")),
                               lambda: self.stage("clear_worktree", clear, "Clearing the worktree"))
        caches = [x for x in self.payload.get("cache") or [] if isinstance(x, Mapping) and x.get("paths")]
        if c.outcome == "ok" and any(x.get("policy", "pull-push") in ("pull", "pull-push") for x in caches):
            c = self.attempt_stage("restore_cache", _script([], ['echo "Restoring cache (emulated)..."'], None,
                                                            echo=False), "Restoring cache",
                                   _attempts(self.lookup("RESTORE_CACHE_ATTEMPTS")))
        deps = [d for d in self.payload.get("dependencies") or []
                if isinstance(d, Mapping) and (d.get("artifacts_file") or {}).get("filename")]
        if c.outcome == "ok" and deps:
            c = self.attempt_stage("download_artifacts", _script([], ['echo "Downloading artifacts (emulated)..."'],
                                                                 None, echo=False), "Downloading artifacts",
                                   _attempts(self.lookup("ARTIFACT_DOWNLOAD_ATTEMPTS")))
        if c.outcome != "ok":
            failure = c

        steps = [s for s in self.payload.get("steps") or [] if isinstance(s, Mapping)]
        if failure is None:
            if self.cancel_after is not None:
                self.script_deadline = time.monotonic() + self.cancel_after
            if self.script_timeout is not None:  # the job times out this long into the script
                self.deadline[:] = [min(self.deadline + [time.monotonic() + self.script_timeout])]
            for s in steps:
                if s.get("name") == "after_script":
                    continue
                lines = [str(x) for x in s.get("script") or []]
                if not lines:
                    continue  # nothing to do: the driver is not called
                sname = "build_script" if s.get("name") == "script" else f"step_{s.get('name')}"
                shown = "step_script" if sname == "build_script" else sname
                c = self.stage(sname, _script(exports, lines, project_dir), f'Executing "{shown}" stage of the job script',
                               script=True)
                if c.outcome != "ok":
                    failure = c
                    break
            after = next((s for s in steps if s.get("name") == "after_script" and s.get("script")), None)
            if after is not None and not self.timed_out:
                status = ("canceled" if self.script_canceled else "failed" if failure is not None else "success")
                c = self.stage("after_script", _script(exports + [("CI_JOB_STATUS", status)],
                                                       [str(x) for x in after["script"]], project_dir),
                               "Running after_script")
                if c.outcome not in ("ok",) and not self.timed_out:
                    # R build_settings.go: AfterScriptIgnoreErrors, DefaultAfterScriptIgnoreErrors = true.
                    if failure is None and not _setting_bool(self.lookup("AFTER_SCRIPT_IGNORE_ERRORS"), True):
                        failure = c
                    else:
                        self.line(f"WARNING: after_script failed, but job will continue unaffected: {c.message}")

        ok = failure is None
        if not self.timed_out:
            on = ("on_success", "always") if ok else ("on_failure", "always")
            if any(x.get("when", "on_success") in on and x.get("policy", "pull-push") in ("push", "pull-push")
                   for x in caches):
                name = "archive_cache" if ok else "archive_cache_on_failure"
                c = self.stage(name, _script([], ['echo "Saving cache (emulated)..."'], None, echo=False),
                               "Saving cache for " + ("successful" if ok else "failed") + " job")
                if c.outcome != "ok" and failure is None:
                    failure = c
        if not self.timed_out:
            arts = [a for a in self.payload.get("artifacts") or [] if isinstance(a, Mapping)]
            on = ("on_success", "always") if ok else ("on_failure", "always")
            if any(a.get("when", "on_success") in on for a in arts):
                name = "upload_artifacts_on_success" if ok else "upload_artifacts_on_failure"
                c = self.stage(name, _script([], ['echo "Uploading artifacts (emulated)..."'], None, echo=False),
                               "Uploading artifacts for " + ("successful" if ok else "failed") + " job")
                if c.outcome != "ok" and failure is None:
                    failure = c
        if not self.timed_out:
            c = self.stage("cleanup_file_variables", _script([], ["true"], None, echo=False),
                           "Cleaning up project directory and file based variables")
            if c.outcome != "ok" and not self.timed_out:
                self.line(f"WARNING: cleanup_file_variables failed: {c.message}")
        self.cleanup()
        return self.verdict(failure, project_dir)

    def verdict(self, failure: StageCall | None, project_dir: str | None) -> JobResult:
        if self.timed_out:
            self.line("ERROR: Job failed: execution took longer than the timeout")
            return self.result("failed", "job_execution_timeout", None, project_dir)
        if self.script_canceled:
            self.line("ERROR: Job failed: canceled")
            return self.result("canceled", None, None, project_dir)
        if failure is None:
            self.line("Job succeeded")
            return self.result("success", None, 0, project_dir)
        if failure.outcome == "build_error":
            self.line(f"ERROR: Job failed: {failure.message}")
            return self.result("failed", "script_failure", failure.exit_code, project_dir)
        if failure.outcome == "configuration_error":
            # R common/failure_reason_mapper.go: sent as is when the instance lists it in
            # features.failure_reasons, else runner_configuration_error -> script_failure.
            supported = (self.payload.get("features") or {}).get("failure_reasons") or []
            reason = "runner_configuration_error" if "runner_configuration_error" in supported else "script_failure"
            self.line(f"ERROR: Job failed: {failure.message}")
            return self.result("failed", reason, None, project_dir)
        self.line(f"ERROR: Job failed (system failure): {failure.message}")
        return self.result("failed", "runner_system_failure", None, project_dir)
