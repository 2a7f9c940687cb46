"""The stand-in from a shell: serve it with a runner loop, and drive it while a real bot runs.

A fault drill an admin can run by hand (docs/standin.md, "Fault drill")::

    python -m standin.gitlab serve --info drill/standin.json &     # GitLab + 2 runners
    export STANDIN_INFO=drill/standin.json
    python -m standin.gitlab fail --job build --preset oom --times 2
    python -m standin.gitlab pipeline
    retry-bot run --config drill/bot.toml &                                   # the real bot
    kill -KILL %2 ; retry-bot run --config drill/bot.toml &                   # SIGKILL, restart
    python -m standin.gitlab check       # no job retried or re-created twice
    retry-bot state check --state sqlite:///.../state.sqlite3                 # no open intent

``serve`` starts the stand-in, ``--runners`` runner loops (each job succeeds after
``--job-seconds``, its script run by bash, unless a ``fail`` rule matches it) and a **control endpoint** on
another loopback port, protected by its own bearer token.  It writes both URLs and
tokens to ``--info`` (mode 0600), where the other sub-commands find them
(``--info`` or ``$STANDIN_INFO``).  ``retry-bot demo --keep --serve`` serves the
same control endpoint over the demo's stand-in and runners.

Sub-commands: ``serve``, ``pipeline``, ``fail``, ``hold`` (hold GitLab's answer
to a write, to SIGKILL the bot mid-action), ``jobs``, ``check``.  Exit codes: 0
done, 1 ``check`` found a job acted on twice, 2 bad input or no stand-in.
"""

from __future__ import annotations

import argparse
import collections
import fnmatch
import json
import os
import re
import secrets
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:
    from standin.gitlab.server import StandIn
    from standin.gitlab.state import Job

__all__ = ["FailRules", "ControlServer", "PRESETS", "RUNNER_FAILURE_REASONS", "main", "write_info",
           "drill_bot_config"]

INFO_ENV = "STANDIN_INFO"

#: The failure reasons a runner may report: the JobResponse's ``features.failure_reasons``
#: plus those every GitLab supports (gitlab-runner common/failure_reason_mapper.go,
#: ``alwaysSupportedFailureReasons``; the constants are in common/network.go).  Anything else
#: is refused here, where the real runner would send ``unknown_failure`` instead.
RUNNER_FAILURE_REASONS = ("script_failure", "runner_system_failure", "job_execution_timeout", "unknown_failure")

#: Typical failures, as a build log shows them (the classifier's taxonomy knows each).
PRESETS: dict[str, dict[str, Any]] = {
    "oom": {"reason": "script_failure", "exit_code": 137,
            "log": "g++: fatal error: Killed signal terminated program cc1plus\ncompilation terminated.\n"
                   "ERROR: Job failed: exit code 137\n"},
    "dns": {"reason": "script_failure", "exit_code": 128,
            "log": "fatal: unable to access 'https://github.com/spack/spack.git/': Could not resolve host: "
                   "github.com\nERROR: Job failed: exit code 128\n"},
    "compile": {"reason": "script_failure", "exit_code": 2,
                "log": "main.c:3:1: error: expected ';' before '}' token\nmake: *** [all] Error 2\n"
                       "ERROR: Job failed: exit code 2\n"},
    "runner": {"reason": "runner_system_failure", "exit_code": None,
               "log": "ERROR: Job failed (system failure): prepare environment: exit status 1\n"},
}


class ControlError(ValueError):
    """A control request that cannot be carried out (the message says why)."""


# --------------------------------------------------------------------------- failing jobs on demand


class FailRules:
    """Make the next jobs whose name matches fail with a chosen reason (thread-safe).

    :meth:`wrap` turns a runner executor into one that consults the rules first: a
    matching job is failed as the runner would report it (reason, exit code, log)
    without running; any other job runs normally.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[dict[str, Any]] = []

    def add(self, job: str, reason: str, exit_code: int | None = None, log: str = "", times: int = 1) -> dict:
        if not isinstance(job, str) or not job:
            raise ControlError("job: give a job name or a glob (e.g. \"build\", \"test-*\")")
        if reason not in RUNNER_FAILURE_REASONS:
            raise ControlError(f"reason {reason!r}: a runner reports one of {', '.join(RUNNER_FAILURE_REASONS)}")
        if exit_code is not None and (isinstance(exit_code, bool) or not isinstance(exit_code, int)
                                      or not 0 <= exit_code <= 255):
            raise ControlError(f"exit_code {exit_code!r}: an exit code is from 0 to 255")
        if isinstance(times, bool) or not isinstance(times, int) or not 1 <= times <= 10_000:
            raise ControlError(f"times {times!r}: from 1 to 10000")
        rule = {"job": job, "reason": reason, "exit_code": exit_code, "log": str(log or ""), "times": times}
        with self._lock:
            self._rules.append(rule)
        return dict(rule)

    def take(self, name: str) -> dict[str, Any] | None:
        """The first rule matching job ``name``, with one use consumed; ``None`` when none matches."""
        with self._lock:
            for rule in self._rules:
                if fnmatch.fnmatchcase(name, rule["job"]):
                    rule["times"] -= 1
                    if rule["times"] <= 0:
                        self._rules.remove(rule)
                    return dict(rule)
        return None

    def pending(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(r) for r in self._rules]

    def wrap(self, execute: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
        def run(payload: dict[str, Any]) -> Any:
            rule = self.take(str(payload.get("job_info", {}).get("name", "")))
            if rule is None:
                return execute(payload)
            return {"status": "failed", "failure_reason": rule["reason"], "exit_code": rule["exit_code"],
                    "log": f"Running with the stand-in runner (drill: failing on demand)\n{rule['log']}"}
        return run


def shell_executor(seconds: float, timeout: float = 120.0) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """GitLab Runner's shell executor, reduced: the job's script under ``bash -e`` in a fresh directory,
    with the job's variables in the environment, then its ``artifacts:paths``; each job takes at
    least ``seconds``.  (The bot's ``retry-bot:generate`` job needs a real script run.)
    """
    import subprocess
    import tempfile

    from standin.gitlab.payload import collect_artifacts

    def run(payload: dict[str, Any]) -> dict[str, Any]:
        started = time.monotonic()
        env = {**os.environ, **{str(v["key"]): str(v["value"]) for v in payload.get("variables", [])}}
        script = "\n".join(str(line) for step in payload.get("steps", []) if step.get("name") == "script"
                           for line in step.get("script", []))
        with tempfile.TemporaryDirectory(prefix="standin-job-") as wd:
            try:
                p = subprocess.run(["bash", "-ec", script], cwd=wd, env=env, capture_output=True, timeout=timeout)
                code, out = p.returncode, p.stdout + p.stderr
            except subprocess.TimeoutExpired:
                code, out = None, b"ERROR: Job failed: execution took longer than the stand-in runner allows\n"
            artifacts = collect_artifacts(payload, wd) if code == 0 else None
        time.sleep(max(0.0, seconds - (time.monotonic() - started)))
        log = b"Running with the stand-in runner (shell)\n" + out
        if code == 0:
            return {"status": "success", "exit_code": 0, "log": log + b"Job succeeded\n", "artifacts": artifacts}
        if code is None:
            return {"status": "failed", "failure_reason": "job_execution_timeout", "exit_code": None, "log": log}
        return {"status": "failed", "failure_reason": "script_failure", "exit_code": code,
                "log": log + f"ERROR: Job failed: exit code {code}\n".encode()}
    return run


# --------------------------------------------------------------------------- the control endpoint


def check_report(standin: StandIn) -> dict[str, Any]:
    """What the bot did to each failed job, from GitLab's side: retries and re-created pipelines.

    ``doubled`` lists the jobs acted on more than once (a retry twice, or two pipelines
    carrying ``RETRY_BOT_FAILED_JOB_ID`` for the same job): exactly-once was broken.
    """
    with standin.state.lock:
        jobs = [j for j in standin.jobs() if not j.spec.is_bridge]
        retries = collections.Counter(j.retry_of for j in jobs if j.retry_of is not None)
        created: collections.Counter[int] = collections.Counter()
        for p in standin.pipelines():
            v = standin.pipeline_variables(p.id)
            if str(v.get("RETRY_BOT_FAILED_JOB_ID", "")).isdigit():
                created[int(v["RETRY_BOT_FAILED_JOB_ID"])] += 1
        failed = [j for j in jobs if j.status == "failed"]
        doubled = sorted({jid for jid, n in retries.items() if n > 1} | {jid for jid, n in created.items() if n > 1})
        untouched = [j.id for j in failed if j.id not in retries and j.id not in created]
        return {"jobs": len(jobs), "failed": len(failed), "retried": dict(sorted(retries.items())),
                "recreated": dict(sorted(created.items())), "doubled": doubled,
                "failed_without_follow_up": untouched,
                "running_or_pending": sum(j.status in ("pending", "running") for j in jobs)}


def _job_row(standin: StandIn, job: Job) -> dict[str, Any]:
    return {"id": job.id, "name": job.name, "status": job.status, "pipeline_id": job.pipeline_id,
            "failure_reason": job.failure_reason, "exit_code": job.exit_code, "manual": bool(job.manual),
            "retry_of": job.retry_of,
            "variables": {v["key"]: v["value"] for v in (job.job_variables or [])}}


class ControlServer:
    """Loopback HTTP control of a running stand-in (bearer ``token``), on :mod:`retry_bot.httpserver`.

    ``GET /control/jobs[?project=P]``, ``GET /control/check``, ``POST /control/pipelines``
    ``{project, ref, variables}``, ``POST /control/fail`` ``{job, reason, exit_code, log, times}``,
    ``POST /control/hold`` ``{method, path, seconds, times}``.
    """

    def __init__(self, standin: StandIn, rules: FailRules, *, project: str, token: str | None = None,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        from retry_bot.httpserver import BoundedHTTPServer

        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("the control endpoint listens on loopback only")
        self.standin = standin
        self.rules = rules
        self.project = project
        self.token = token or secrets.token_urlsafe(24)
        self.httpd = BoundedHTTPServer((host, port), self._handler(), max_connections=64, workers=2,
                                       max_body=64 * 1024)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "ControlServer":
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="standin-control", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def answer(self, method: str, path: str, query: Mapping[str, list[str]], body: Any) -> tuple[int, Any]:
        """One control request -> ``(status, JSON)``; pure dispatch over the stand-in's Python API."""
        from standin.gitlab import Fault

        s = self.standin
        if method == "GET" and path == "/control/jobs":
            project = (query.get("project") or [None])[0]
            return 200, [_job_row(s, j) for j in s.jobs(project) if not j.spec.is_bridge]
        if method == "GET" and path == "/control/check":
            return 200, {**check_report(s), "pending_fail_rules": self.rules.pending()}
        if method != "POST":
            return 404, {"error": f"no {method} {path}"}
        if not isinstance(body, dict):
            return 400, {"error": "send a JSON object"}
        if path == "/control/pipelines":
            variables = body.get("variables") or None
            if variables is not None and not isinstance(variables, dict):
                return 400, {"error": "variables: a JSON object {KEY: VALUE}"}
            pipe = s.create_pipeline(str(body.get("project") or self.project), body.get("ref") or None,
                                     variables=variables)
            return 201, {"pipeline_id": pipe.id, "jobs": [s.get_job(j).name for j in pipe.job_ids]}
        if path == "/control/fail":
            rule = self.rules.add(body.get("job"), body.get("reason"), body.get("exit_code"), body.get("log", ""),
                                  body.get("times", 1))
            return 201, rule
        if path == "/control/hold":
            pattern, seconds, times = body.get("path"), body.get("seconds", 30), body.get("times", 1)
            try:
                re.compile(str(pattern))
            except re.error as exc:
                return 400, {"error": f"path {pattern!r} is not a regular expression: {exc}"}
            if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not 0 < seconds <= 600:
                return 400, {"error": "seconds: from 0 to 600"}
            if isinstance(times, bool) or not isinstance(times, int) or not 1 <= times <= 1000:
                return 400, {"error": "times: from 1 to 1000"}
            # GitLab performs the write, then its answer hangs: the bot is mid-action.
            s.faults.add(Fault("slow", method=str(body.get("method") or "POST"), path=str(pattern), phase="after",
                               delay=float(seconds), times=times))
            return 201, {"held": pattern, "seconds": seconds, "times": times}
        return 404, {"error": f"no {method} {path}"}

    def _handler(self) -> type:
        from retry_bot.httpserver import RequestHandler

        control = self

        class Handler(RequestHandler):
            def _reply(self, status: int, payload: Any) -> None:
                data = (json.dumps(payload, default=str) + "\n").encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _do(self) -> None:
                import hmac

                auth = self.headers.get("Authorization", "")
                if not hmac.compare_digest(auth.encode(), f"Bearer {control.token}".encode()):
                    self._reply(401, {"error": "send Authorization: Bearer <control token from the info file>"})
                    return
                parts = urlsplit(self.path)
                body: Any = None
                if self.command == "POST":
                    try:
                        length = int(self.headers.get("Content-Length") or 0)
                        body = json.loads(self.rfile.read(length) or b"{}")
                    except ValueError:
                        self._reply(400, {"error": "the body is not JSON"})
                        return
                try:
                    status, payload = control.answer(self.command, parts.path, parse_qs(parts.query), body)
                except ControlError as exc:
                    status, payload = 400, {"error": str(exc)}
                except (KeyError, ValueError) as exc:  # the stand-in's own refusals (unknown project...)
                    status, payload = 400, {"error": str(exc).strip("'\"")}
                self._reply(status, payload)

            do_GET = _do
            do_POST = _do

        return Handler


def _secret_file(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(value + "\n")


def drill_bot_config(directory: str | Path, url: str, token: str, project: str,
                     signing: tuple[str, str] | None = None, interval: float = 1.0) -> Path:
    """``bot.toml`` for the real ``retry-bot run`` against a stand-in, written into ``directory``:
    the token (and signing key) in 0600 files, the state in ``state.sqlite3``, and ``policy.toml``
    (the shipped policy, unless one is there already: edit it for the drill)."""
    from retry_bot.policy import default_policy_text

    d = Path(directory).resolve()
    d.mkdir(parents=True, exist_ok=True)
    _secret_file(d / "gitlab-token", token)
    policy = d / "policy.toml"
    if not policy.exists():
        policy.write_text(default_policy_text())
    keys = ""
    if signing is not None:
        _secret_file(d / "signing-key", signing[1])
        keys = f'[[signing.keys]]\nid = "{signing[0]}"\nfile = "{d / "signing-key"}"\n'
    cfg = d / "bot.toml"
    cfg.write_text(f"""# retry-bot run --config {cfg}   (against the stand-in at {url})
[gitlab]
url = "{url}"
token_file = "{d / 'gitlab-token'}"
request_timeout_seconds = 5
[poll]
projects = ["{project}"]
interval_seconds = {interval}
lookback_hours = 1
[bot]
policy = "{policy}"
state_url = "sqlite:///{d / 'state.sqlite3'}"
{keys}[leader]
enabled = false
""")
    return cfg


def write_info(path: str | Path, **info: Any) -> Path:
    """Write the stand-in's URLs and tokens for the other sub-commands (mode 0600)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(info, fh, indent=2)
        fh.write("\n")
    return p


# --------------------------------------------------------------------------- command line


def _load_info(path: str | None) -> dict[str, Any]:
    where = path or os.environ.get(INFO_ENV) or "standin.json"
    try:
        info = json.loads(Path(where).read_text())
    except OSError as exc:
        raise ControlError(f"cannot read the stand-in's info file {where}: {exc.strerror or exc} "
                           f"(start one with: python -m standin.gitlab serve --info {where})") from None
    except ValueError:
        raise ControlError(f"{where} is not a stand-in info file (JSON)") from None
    if not isinstance(info, dict) or not info.get("control_url") or not info.get("control_token"):
        raise ControlError(f"{where} has no control_url/control_token")
    return info


def _call(info: Mapping[str, Any], method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(str(info["control_url"]) + path, data=data, method=method,
                                 headers={"Authorization": f"Bearer {info['control_token']}",
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as exc:
        try:
            detail = json.loads(exc.read()).get("error")
        except ValueError:
            detail = exc.reason
        raise ControlError(f"the stand-in refused: {detail}") from None
    except OSError as exc:
        raise ControlError(f"no stand-in at {info['control_url']}: {getattr(exc, 'reason', exc)}") from None


def _serve(args: argparse.Namespace) -> int:
    from standin.gitlab.ciconfig import CiConfigError
    from standin.gitlab.server import StandIn

    try:
        config: Any = args.ci_config.read_text() if args.ci_config else DRILL_CI_CONFIG
    except OSError as exc:
        print(f"cannot read --ci-config: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if not 0 <= args.runners <= 16:
        print(f"--runners {args.runners}: from 0 to 16", file=sys.stderr)
        return 2
    from standin.demo import TEMPLATE_PATH, template_text

    standin = StandIn(port=args.port, token=args.token)
    try:
        # The CI template is a repository file, for `include: local` (as the demo does).
        standin.add_project(args.project, config, files={TEMPLATE_PATH: template_text()})
    except (CiConfigError, ValueError) as exc:
        print(f"invalid CI configuration {args.ci_config}: {exc}", file=sys.stderr)
        return 2
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    rules = FailRules()
    with standin:
        for _ in range(args.runners):
            standin.attach_runner(rules.wrap(shell_executor(args.job_seconds)), poll_interval=0.05)
        control = ControlServer(standin, rules, project=args.project, port=args.control_port).start()
        try:
            if args.info:
                write_info(args.info, url=standin.url, token=standin.token, project=args.project,
                           control_url=control.url, control_token=control.token)
                drill_bot_config(Path(args.info).parent, standin.url, standin.token, args.project)
            print(f"url={standin.url} token={standin.token} project={args.project} control={control.url}"
                  + (f" info={args.info}" if args.info else ""), flush=True)
            done.wait()
        finally:
            control.close()
    return 0


#: The project ``serve`` creates without ``--ci-config``: the bot's CI template included, as a
#: project writes it (packaging/gitlab-ci/example.gitlab-ci.yml), and three quick jobs.
DRILL_CI_CONFIG = """\
include:
  - local: packaging/gitlab-ci/retry-bot.yml
stages: [build, test]
build:
  stage: build
  rules: [!reference [.retry-bot:skip, rules], {when: on_success}]
  variables: {KUBERNETES_MEMORY_LIMIT: 2Gi}
  script: [echo compiling]
fetch:
  stage: build
  rules: [!reference [.retry-bot:skip, rules], {when: on_success}]
  script: [echo fetching sources]
test:
  stage: test
  rules: [!reference [.retry-bot:skip, rules], {when: on_success}]
  script: [echo testing]
"""


def _pipeline(args: argparse.Namespace, info: Mapping[str, Any]) -> int:
    body: dict[str, Any] = {"project": args.project or info.get("project"), "ref": args.ref}
    if args.variable:
        body["variables"] = dict(v.split("=", 1) for v in args.variable)
    r = _call(info, "POST", "/control/pipelines", body)
    print(f"pipeline {r['pipeline_id']}: {', '.join(r['jobs'])}")
    return 0


def _fail(args: argparse.Namespace, info: Mapping[str, Any]) -> int:
    rule = dict(PRESETS[args.preset]) if args.preset else {"reason": "script_failure", "exit_code": 1, "log": ""}
    if args.reason:
        rule["reason"] = args.reason
    if args.exit_code is not None:
        rule["exit_code"] = args.exit_code
    if args.log is not None:
        rule["log"] = args.log.replace("\\n", "\n") + ("" if args.log.endswith("\\n") else "\n")
    r = _call(info, "POST", "/control/fail", {"job": args.job, "times": args.times, **rule})
    print(f"the next {r['times']} job(s) named {r['job']!r} fail with {r['reason']}"
          + (f", exit code {r['exit_code']}" if r["exit_code"] is not None else ""))
    return 0


def _hold(args: argparse.Namespace, info: Mapping[str, Any]) -> int:
    r = _call(info, "POST", "/control/hold", {"method": args.method, "path": args.path, "seconds": args.seconds,
                                              "times": args.times})
    print(f"the next {r['times']} {args.method} {r['held']} will be done, then answered after {r['seconds']} s")
    return 0


def _jobs(args: argparse.Namespace, info: Mapping[str, Any]) -> int:
    rows = _call(info, "GET", "/control/jobs" + (f"?project={args.project}" if args.project else ""))
    if args.format == "json":
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        extra = " ".join(x for x in (
            f"{r['failure_reason']} exit {r['exit_code']}" if r["status"] == "failed" else "",
            f"retry of {r['retry_of']}" if r["retry_of"] else "",
            "manual" if r["manual"] else "",
            " ".join(f"{k}={v}" for k, v in r["variables"].items())) if x)
        print(f"{r['id']:>6}  pipeline {r['pipeline_id']:<5} {r['name']:<20} {r['status']:<9} {extra}".rstrip())
    return 0


def _check(args: argparse.Namespace, info: Mapping[str, Any]) -> int:
    r = _call(info, "GET", "/control/check")
    if args.format == "json":
        print(json.dumps(r, indent=2))
    else:
        print(f"{r['jobs']} jobs, {r['failed']} failed; retried: {len(r['retried'])}, re-created: "
              f"{len(r['recreated'])}, failed with no follow-up (left alone, or not decided yet): "
              f"{len(r['failed_without_follow_up'])}; pending or running: {r['running_or_pending']}")
        if r["doubled"]:
            print(f"DOUBLED: job(s) {', '.join(map(str, r['doubled']))} were acted on more than once")
        else:
            print("no job was retried or re-created twice")
    return 1 if r["doubled"] else 0


def build_parser() -> argparse.ArgumentParser:
    from standin.gitlab.server import DEFAULT_TOKEN

    p = argparse.ArgumentParser(prog="python -m standin.gitlab",
                                description="Run the GitLab stand-in, and drive it while a real bot runs "
                                            "(fault drills; docs/standin.md).")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    s = sub.add_parser("serve", help="the stand-in, runner loops and the control endpoint, until SIGINT/SIGTERM")
    s.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (default: ephemeral)")
    s.add_argument("--token", default=DEFAULT_TOKEN, help="the Maintainer token to accept")
    s.add_argument("--project", default="team/app", help="project path to create (default: team/app)")
    s.add_argument("--ci-config", type=Path, help="YAML CI configuration for the project")
    s.add_argument("--runners", type=int, default=2, help="runner loops executing jobs (default 2; 0: none)")
    s.add_argument("--job-seconds", type=float, default=0.5, help="how long each job runs (default 0.5)")
    s.add_argument("--control-port", type=int, default=0, help="port of the control endpoint (default: ephemeral)")
    s.add_argument("--info", help="write URLs and tokens here (mode 0600) for the other sub-commands, and "
                                  "bot.toml, policy.toml and gitlab-token beside it for the real bot")
    s.set_defaults(func=None)

    def client(name: str, helptext: str) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=helptext)
        c.add_argument("--info", help=f"the serve command's info file (default: ${INFO_ENV}, else ./standin.json)")
        return c

    c = client("pipeline", "create a pipeline (as a push)")
    c.add_argument("--project", help="default: the served project")
    c.add_argument("--ref", default=None, help="branch (default: the project's default branch)")
    c.add_argument("--variable", action="append", metavar="KEY=VALUE", help="pipeline variable (repeatable)")
    c.set_defaults(func=_pipeline)
    c = client("fail", "make the next jobs of that name fail with a chosen reason (instead of running)")
    c.add_argument("--job", required=True, help="job name or glob (\"build\", \"test-*\")")
    c.add_argument("--preset", choices=sorted(PRESETS), help="a typical failure: reason, exit code and log")
    c.add_argument("--reason", choices=RUNNER_FAILURE_REASONS, help="GitLab failure_reason, as the runner reports it")
    c.add_argument("--exit-code", type=int, help="the job's exit code")
    c.add_argument("--log", help="the job log's last lines (\\n for new lines)")
    c.add_argument("--times", type=int, default=1, help="how many jobs (default 1)")
    c.set_defaults(func=_fail)
    c = client("hold", "do the next matching write, then hold GitLab's answer (SIGKILL the bot meanwhile)")
    c.add_argument("--path", required=True, help=r"regular expression of the API path, e.g. '/jobs/\d+/retry$'")
    c.add_argument("--method", default="POST")
    c.add_argument("--seconds", type=float, default=30.0)
    c.add_argument("--times", type=int, default=1)
    c.set_defaults(func=_hold)
    c = client("jobs", "list the jobs: status, failure reason, retries, manual copies")
    c.add_argument("--project")
    c.add_argument("--format", choices=("text", "json"), default="text")
    c.set_defaults(func=_jobs)
    c = client("check", "exit 1 if any job was retried or re-created more than once")
    c.add_argument("--format", choices=("text", "json"), default="text")
    c.set_defaults(func=_check)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        # The original form (python -m standin.gitlab --ci-config FILE): no runner loops.
        argv = ["serve", "--runners", "0", *argv]
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    try:
        return int(args.func(args, _load_info(args.info)))
    except ControlError as exc:
        print(f"standin {args.command}: {exc}", file=sys.stderr)
        return 2
