"""The stand-in server: real HTTP on loopback, the Python control API, and the runner hook.

Typical use in a test::

    with StandIn() as gl:                      # starts on 127.0.0.1:<ephemeral>
        gl.add_project("team/app", {"build": {"script": ["make"]}})
        pipe = gl.create_pipeline("team/app", "main")
        job = gl.next_pending_job(start=True)
        gl.finish_job(job.id, "failed", failure_reason="script_failure", exit_code=137, trace=b"Killed\\n")
        client = gitlab.Gitlab(gl.url, private_token=gl.token)
        ...
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Sequence, Any, Callable, Iterable, Mapping, Protocol
from urllib.parse import parse_qs, urlsplit

from runner_wrapper.logconfig import get_logger
from standin.gitlab import graphql_api, rest
from standin.gitlab.faults import Fault, FaultInjector
from standin.gitlab.payload import build_payload, collect_artifacts
from standin.gitlab.state import GitLabState, Job, Pipeline, Project, User

__all__ = ["StandIn", "Call", "RunnerLoop", "JobOutcome", "DEFAULT_TOKEN"]

DEFAULT_TOKEN = "standin-token"
log = get_logger("standin.gitlab")


@dataclass(frozen=True)
class Call:
    """One request as the stand-in saw it (``status`` is ``None`` for a dropped connection)."""

    method: str
    path: str
    query: str
    status: int | None
    fault: str | None
    started: float
    duration: float


class JobOutcome(Protocol):
    """What an executor returns: runner_wrapper's ``JobResult`` has these attributes."""

    status: str
    failure_reason: str | None
    exit_code: int | None
    log: bytes | str


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], standin: "StandIn") -> None:
        self.standin = standin
        super().__init__(addr, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up (timeout, closed socket) is normal here; anything else is logged."""
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            return
        log.error("standin.handler_error", client=str(client_address), error=repr(exc))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = 60
    disable_nagle_algorithm = True   # headers and body are separate writes; avoid 40 ms delayed-ACK stalls

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return  # requests are recorded in StandIn.calls; keep stderr quiet

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def _token(self) -> str | None:
        token = self.headers.get("PRIVATE-TOKEN") or self.headers.get("JOB-TOKEN")
        auth = self.headers.get("Authorization", "")
        if not token and auth.lower().startswith("bearer "):
            token = auth[7:].strip()
        return token

    def _body(self) -> tuple[dict[str, Any], str | None]:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.close_connection = True
            return {}, "Content-Length is not a number"
        raw = self.rfile.read(length) if length > 0 else b""
        if not raw:
            return {}, None
        ctype = self.headers.get("Content-Type", "")
        if "json" in ctype:
            try:
                data = json.loads(raw)
            except ValueError:
                return {}, "request body is not valid JSON"
            return (data if isinstance(data, dict) else {}), None
        if "x-www-form-urlencoded" in ctype:
            return {k: v[-1] for k, v in parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True).items()}, None
        return {}, None

    def _handle(self) -> None:
        standin = self.server.standin
        started = time.monotonic()
        parts = urlsplit(self.path)
        path, query_string = parts.path, parts.query
        body, body_error = self._body()
        standin._arrived(self.command, path)
        fault = standin.faults.decide(self.command, path)

        def faulted(phase: str) -> bool:
            """Apply ``fault`` if it is due in ``phase``; ``True`` when it answered the request itself."""
            if fault is None or fault.phase != phase:
                return False
            if fault.kind == "slow":
                standin._sleep(fault.delay)
                return False
            # Each request is recorded just before its answer goes out, so ``calls`` is in answer order.
            standin._record(self.command, path, query_string, self._status_of(fault), fault.label, started)
            self._apply(fault)
            return True

        if faulted("before"):
            return
        response = self._serve(path, query_string, body, body_error)
        if faulted("after"):
            return
        standin._record(self.command, path, query_string, response.status,
                        fault.label if fault is not None else None, started)
        self._send(response)

    @staticmethod
    def _status_of(fault: Fault) -> int | None:
        return {"drop": None, "rate_limit": 429, "status": fault.status}.get(fault.kind)

    def _serve(self, path: str, query_string: str, body: dict[str, Any], body_error: str | None) -> rest.Response:
        standin = self.server.standin
        user = standin.state.user_for_token(self._token())
        if body_error:
            return rest.error_response(400, body_error)
        if path == "/api/graphql" and self.command == "POST":
            if self._token() and user is None:
                return rest.json_response(401, {"errors": [{"message": "Invalid token"}]})
            query = body.get("query")
            if not isinstance(query, str):
                return rest.json_response(200, {"errors": [{"message": "No query string was present"}]})
            variables = body.get("variables") if isinstance(body.get("variables"), dict) else None
            return rest.json_response(200, graphql_api.execute(standin.state, user, query, variables,
                                                               body.get("operationName")))
        if not path.startswith("/api/v4/"):
            return rest.json_response(404, {"error": "404 Not Found"})
        query = parse_qs(query_string, keep_blank_values=True)
        try:
            return rest.dispatch(rest.Request(self.command, path, query, body, user, standin.state,
                                              token=self._token()))
        except Exception as exc:  # a stand-in bug must show as a 500, not kill the connection
            log.error("standin.internal_error", path=path, error=repr(exc))
            return rest.error_response(500, "500 Internal Server Error")

    def _send(self, response: rest.Response) -> None:
        try:
            self._write(response)
        except (ConnectionError, TimeoutError):
            self.close_connection = True   # the client gave up (e.g. timed out on a slow answer)

    def _write(self, response: rest.Response) -> None:
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        for key, value in response.headers.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    def _apply(self, fault: Fault) -> None:
        if fault.kind == "drop":
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if fault.kind == "rate_limit":
            retry_after = fault.retry_after if fault.retry_after is not None else 1
            reset = int(time.time()) + (fault.rate_limit_reset if fault.rate_limit_reset is not None else retry_after)
            headers = {"RateLimit-Limit": str(fault.limit), "RateLimit-Observed": str(fault.limit + 1), "RateLimit-Remaining": "0",
                       "RateLimit-Reset": str(reset), "RateLimit-ResetTime": formatdate(reset, usegmt=True)}
            if fault.retry_after is not None:
                headers["Retry-After"] = str(fault.retry_after)
            self._send(rest.Response(429, b"Retry later\n", "text/plain", headers))
            return
        text = {500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
                504: "Gateway Timeout"}.get(fault.status, "Error")
        self._send(rest.Response(fault.status, f"{fault.status} {text}\n".encode(), "text/plain"))


class RunnerLoop:
    """A background runner: claims pending jobs matching ``tags`` and runs them through ``execute``.

    ``execute(payload) -> outcome`` gets :func:`~standin.gitlab.payload.build_payload`'s dict
    and returns an object (or a dict) with ``status``, ``failure_reason``, ``exit_code``, ``log`` and
    optionally ``artifacts`` (``{path: bytes}``).  An exception in ``execute`` fails the job with
    ``runner_system_failure``, like a broken executor would.
    """

    def __init__(self, standin: "StandIn", execute: Callable[[dict[str, Any]], Any], *,
                 tags: Iterable[str] = (), run_untagged: bool = True, poll_interval: float = 0.05,
                 name: str = "standin-runner",
                 workdir_of: Callable[[dict[str, Any]], str | Path] | None = None) -> None:
        self.standin = standin
        self.workdir_of = workdir_of
        self.execute = execute
        self.tags = tuple(tags)
        self.run_untagged = run_untagged
        self.poll_interval = poll_interval
        self.name = name
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.jobs_run: list[int] = []

    def start(self) -> "RunnerLoop":
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _loop(self) -> None:
        runner = {"id": 1, "description": self.name, "ip_address": "127.0.0.1", "active": True, "paused": False,
                  "is_shared": False, "runner_type": "project_type", "name": "gitlab-runner", "online": True,
                  "status": "online", "tags": list(self.tags)}
        while not self._stop.is_set():
            job = self.standin.state.next_pending_job(self.tags, run_untagged=self.run_untagged, start=True,
                                                      runner=runner)
            if job is None:
                self._stop.wait(self.poll_interval)
                continue
            self.run_one(job.id)

    def run_one(self, job_id: int) -> None:
        payload = self.standin.job_payload(job_id)
        try:
            outcome = self.execute(payload)
            get = outcome.get if isinstance(outcome, Mapping) else (lambda k, d=None: getattr(outcome, k, d))
            status = str(get("status"))
            log_data = get("log", b"") or b""
            artifacts = get("artifacts") or None
            if artifacts is None and self.workdir_of is not None:
                artifacts = collect_artifacts(payload, self.workdir_of(payload)) or None
            self.standin.finish_job(job_id, status if status in ("success", "failed", "canceled") else "failed",
                                    failure_reason=get("failure_reason"), exit_code=get("exit_code"),
                                    trace=log_data.encode() if isinstance(log_data, str) else bytes(log_data),
                                    artifacts=artifacts)
        except Exception as exc:
            log.error("standin.executor_failed", job_id=job_id, error=repr(exc))
            try:
                self.standin.finish_job(job_id, "failed", failure_reason="runner_system_failure",
                                        trace=f"executor error: {exc!r}\n".encode())
            except Exception:
                pass
        self.jobs_run.append(job_id)


class StandIn:
    """A stateful GitLab stand-in on ``127.0.0.1``: REST ``/api/v4`` subset, GraphQL, control API, faults.

    ``token`` is accepted as a Maintainer's personal access token (``add_token`` adds more users).
    ``seed`` makes probabilistic faults reproducible.  ``clock`` stamps created/started/finished times.
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, token: str = DEFAULT_TOKEN,
                 username: str = "retry-bot", seed: int | None = 0,
                 clock: Callable[[], float] = time.time, gitlab_version: str = "18.6.0",
                 processing_delay: float = 0.0) -> None:
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("the stand-in only listens on loopback")
        self.host, self.port = host, port
        self.token = token
        self.state = GitLabState(clock=clock, gitlab_version=gitlab_version, processing_delay=processing_delay)
        self.user: User = self.state.add_user(username, token, "maintainer")
        self.faults = FaultInjector(seed)
        self._calls: list[Call] = []
        self._arrivals: list[tuple[str, str]] = []
        self._calls_lock = threading.Condition()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._runners: list[RunnerLoop] = []

    # ------------------------------------------------------------ lifecycle
    def start(self) -> str:
        """Start serving; returns the base URL (``http://127.0.0.1:PORT``)."""
        if self._server is not None:
            return self.url
        self._stopping.clear()
        self._server = _Server((self.host, self.port), self)
        self.port = self._server.server_address[1]
        self.state.base_url = self.url
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="gitlab-standin", daemon=True)
        self._thread.start()
        log.info("standin.started", url=self.url)
        return self.url

    def stop(self) -> None:
        """Stop runner loops and the server; sleeping fault handlers are woken up."""
        self._stopping.set()
        for runner in self._runners:
            runner.stop()
        self._runners.clear()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def __enter__(self) -> "StandIn":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _sleep(self, seconds: float) -> None:
        self._stopping.wait(seconds)

    # ------------------------------------------------------------- requests
    def _record(self, method: str, path: str, query: str, status: int | None, fault: str | None,
                started: float) -> None:
        call = Call(method, path, query, status, fault, started, time.monotonic() - started)
        with self._calls_lock:
            self._calls.append(call)

    def _arrived(self, method: str, path: str) -> None:
        with self._calls_lock:
            self._arrivals.append((method, path))
            self._calls_lock.notify_all()

    def wait_for_request(self, method: str | None = None, path_regex: str | None = None, *,
                         count: int = 1, timeout: float = 10.0) -> bool:
        """Block until ``count`` matching requests have **arrived** (before any fault or answer).

        Unlike :attr:`calls`, which records a request when its answer goes out, this sees a request
        that is still held by a ``slow`` fault: e.g. to SIGKILL a client in the middle of an action.
        """
        import re

        rx = re.compile(path_regex) if path_regex else None

        def seen() -> int:
            return sum(1 for m, p in self._arrivals if (method is None or m == method) and (rx is None or rx.search(p)))

        with self._calls_lock:
            return self._calls_lock.wait_for(lambda: seen() >= count, timeout)

    @property
    def calls(self) -> list[Call]:
        """Every request served so far (a copy), in arrival-completion order."""
        with self._calls_lock:
            return list(self._calls)

    def calls_matching(self, method: str | None = None, path_regex: str | None = None) -> list[Call]:
        import re

        rx = re.compile(path_regex) if path_regex else None
        return [c for c in self.calls if (method is None or c.method == method) and (rx is None or rx.search(c.path))]

    def reset_calls(self) -> None:
        """Forget the request log (``calls``) and the arrivals ``wait_for_request`` counts."""
        with self._calls_lock:
            self._calls.clear()
            self._arrivals.clear()

    # ---------------------------------------------------------- control API
    def add_token(self, token: str, username: str, role: str = "developer",
                  scopes: Sequence[str] = ("api",)) -> User:
        return self.state.add_user(username, token, role, scopes)

    def add_project(self, path: str, ci_config: Mapping[str, Any] | str, *, default_branch: str = "main",
                    pipeline_variables_min_role: str = "developer", files: Mapping[str, str] | None = None,
                    protected_branches: Mapping[str, Mapping[str, Any]] | None = None) -> Project:
        return self.state.add_project(path, ci_config, default_branch=default_branch,
                                      pipeline_variables_min_role=pipeline_variables_min_role, files=files,
                                      protected_branches=protected_branches)

    def add_project_hook(self, project: int | str, url: str, **kw: Any) -> dict[str, Any]:
        """Add a project webhook (configuration only; :class:`~.hooks.HookSender` sends events):
        ``token``, ``enable_ssl_verification``, ``alert_status``, ``job_events``... (:func:`.hooks.add_project_hook`)."""
        from standin.gitlab.hooks import add_project_hook

        return add_project_hook(self.state, project, url, **kw)

    def set_ci_config(self, project: int | str, ci_config: Mapping[str, Any] | str, *, ref: str | None = None,
                      files: Mapping[str, str] | None = None) -> str:
        return self.state.set_ci_config(project, ci_config, ref=ref, files=files)

    def create_pipeline(self, project: int | str, ref: str | None = None, *, source: str = "push",
                        variables: Mapping[str, str] | Iterable[Mapping[str, str]] | None = None) -> Pipeline:
        return self.state.create_pipeline(project, ref, source=source, variables=variables, user=self.user)

    def next_pending_job(self, tags: Iterable[str] | None = None, *, run_untagged: bool = True,
                         start: bool = False) -> Job | None:
        return self.state.next_pending_job(tags, run_untagged=run_untagged, start=start)

    def start_job(self, job_id: int) -> Job:
        return self.state.start_job(job_id)

    def finish_job(self, job_id: int, status: str, failure_reason: str | None = None, exit_code: int | None = None,
                   trace: bytes = b"", artifacts: Mapping[str, bytes | str] | None = None) -> Job:
        return self.state.finish_job(job_id, status, failure_reason=failure_reason, exit_code=exit_code,
                                     trace=trace, artifacts=artifacts)

    def run_job(self, job_id: int, status: str, failure_reason: str | None = None, exit_code: int | None = None,
                trace: bytes = b"", artifacts: Mapping[str, bytes | str] | None = None) -> Job:
        """``start_job`` then ``finish_job`` (a pending job run to completion in one step)."""
        self.start_job(job_id)
        return self.finish_job(job_id, status, failure_reason, exit_code, trace, artifacts)

    def append_trace(self, job_id: int, data: bytes) -> None:
        self.state.append_trace(job_id, data)

    def cancel_job(self, job_id: int) -> Job:
        return self.state.cancel_job(job_id)

    def retry_job(self, job_id: int) -> Job:
        return self.state.retry_job(job_id, user=self.user)

    def jobs(self, project: int | str | None = None, *, pipeline_id: int | None = None) -> list[Job]:
        """All jobs (builds and bridges), oldest first, optionally of one project or pipeline."""
        with self.state.lock:
            pid = self.state.project(project).id if project is not None else None
            return [j for j in sorted(self.state.jobs.values(), key=lambda j: j.id)
                    if (pid is None or j.project_id == pid) and (pipeline_id is None or j.pipeline_id == pipeline_id)]

    def get_job(self, job_id: int) -> Job:
        return self.state.job(job_id)

    def pipelines(self, project: int | str | None = None) -> list[Pipeline]:
        with self.state.lock:
            pid = self.state.project(project).id if project is not None else None
            return [p for p in sorted(self.state.pipelines.values(), key=lambda p: p.id)
                    if pid is None or p.project_id == pid]

    def get_pipeline(self, pipeline_id: int) -> Pipeline:
        return self.state.pipeline(pipeline_id)

    def pipeline_variables(self, pipeline_id: int) -> dict[str, str]:
        return {v["key"]: v["value"] for v in self.state.pipeline_variables(pipeline_id)}

    def on_job_change(self, callback: Callable[[Job], None]) -> None:
        """Call ``callback(job)`` on every job status change (for timelines).

        It runs under the state lock, inside the request or control call that changed the job:
        keep it quick, and do not call the stand-in's HTTP API from it.
        """
        self.state.job_listeners.append(callback)

    def job_payload(self, job_id: int) -> dict[str, Any]:
        return build_payload(self.state, job_id)

    def attach_runner(self, execute: Callable[[dict[str, Any]], Any], *, tags: Iterable[str] = (),
                      run_untagged: bool = True, poll_interval: float = 0.05,
                      workdir_of: Callable[[dict[str, Any]], str | Path] | None = None) -> RunnerLoop:
        """Start a :class:`RunnerLoop` (the pluggable executor hook); stopped by :meth:`stop`.

        ``workdir_of(payload)`` names the job's work directory when ``execute`` returns no
        ``artifacts``: the files under the job's ``artifacts:paths`` are then read from there.
        """
        runner = RunnerLoop(self, execute, tags=tags, run_untagged=run_untagged, poll_interval=poll_interval,
                            name=f"standin-runner-{len(self._runners) + 1}", workdir_of=workdir_of)
        self._runners.append(runner)
        return runner.start()

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.02) -> bool:
        """Poll ``predicate`` (under the state lock) until true or ``timeout``; returns the last value."""
        deadline = time.monotonic() + timeout
        while True:
            with self.state.lock:
                if predicate():
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(interval)
