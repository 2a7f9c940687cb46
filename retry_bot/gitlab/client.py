"""The GitLab edge: python-gitlab for REST, its GraphQL client for what REST lacks.

Everything the bot asks GitLab goes through :class:`GitLabClient`, which adds
what python-gitlab leaves to the caller:

* **Bounded retries with tenacity.**  Reads (``GET``, GraphQL queries) are
  retried on transient failures (5xx, 52x, connection errors, timeouts) and
  on 429.  A 429 waits for ``Retry-After`` (seconds or an HTTP date), else
  until ``RateLimit-Reset`` (Unix time), else an exponential backoff with
  jitter; every wait is capped and the number of attempts is bounded.
  python-gitlab's own retry loop is switched off so there is exactly one.
* **Writes are never blindly repeated.**  A ``POST`` that is not idempotent
  (retry, play, create pipeline, ``jobRetry``) is retried only when GitLab
  certainly did not act on it: a 429, or a connection that could not be
  opened.  Any other failure raises :class:`AmbiguousWrite`; the caller then
  reads GitLab's state before deciding whether to act again
  (see :mod:`retry_bot.live.actions`).  When those retries run out, the write
  raises :class:`WriteNotSent` (GitLab did nothing: the caller keeps its
  intent and tries later); only a definite refusal (a 4xx other than 429
  and 408) raises :class:`WriteRejected`.
* **Pacing** (:class:`RequestPacer`): a token bucket bounded by a configured
  budget per minute (the token is shared with other tools) and by GitLab's
  ``RateLimit-Limit/Remaining/Reset`` headers; a 429 blocks only the endpoint
  it answered for (until its ``Retry-After``), not every call.
* **Keyset pagination** for the project jobs list (``order_by=id``,
  ``sort=desc``, following ``Link: rel="next"``), one page per request and
  each page retried on its own.
* **An API-call counter**: every HTTP request (including retries) is reported
  to an optional observer, which the daemon wires to Prometheus and the
  benchmark reads directly.

The token is held by the python-gitlab and httpx clients only; it is
registered with :func:`runner_wrapper.logconfig.register_secret` so it can
never reach a log line.
"""

from __future__ import annotations

import email.utils
import random
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping
from urllib.parse import quote

import gitlab
import gitlab.exceptions
import httpx
import requests
import tenacity

from retry_bot.gitlab.pacing import RequestPacer
from retry_bot.isotime import parse_iso_time
from runner_wrapper.logconfig import get_logger, register_secret

__all__ = [
    "GitLabClient",
    "RetrySettings",
    "ApiCall",
    "CallCounter",
    "GitLabApiError",
    "AmbiguousWrite",
    "WriteRejected",
    "WriteNotSent",
    "RequestPacer",
    "NotFound",
    "GraphQLSchemaError",
    "GitLabFeatures",
    "parse_time",
    "MIN_SUPPORTED_VERSION",
]

log = get_logger("retry_bot.gitlab")

#: HTTP statuses that mean "try again later" for a read.
TRANSIENT_STATUSES = frozenset({408, 409, 500, 502, 503, 504} | set(range(520, 531)))


# --------------------------------------------------------------------------- errors


class GitLabApiError(RuntimeError):
    """A GitLab call failed for good (after the bounded retries, or a 4xx)."""

    def __init__(self, message: str, *, status: int | None = None, what: str = ""):
        self.status = status
        self.what = what
        super().__init__(f"{what}: {message}" if what else message)


class NotFound(GitLabApiError):
    """404: the object does not exist (or the token may not see it)."""


class GraphQLSchemaError(GitLabApiError):
    """GitLab refused a GraphQL document as invalid for its schema (HTTP 200, ``errors``, no ``data``).

    Never transient: the same document fails the same way on every attempt
    (gitlab-mechanics §11.3), so it is neither retried nor "tried again next cycle".
    """


class WriteRejected(GitLabApiError):
    """GitLab answered a write with a 4xx: it certainly did not act."""


class WriteNotSent(GitLabApiError):
    """A write GitLab certainly did not act on, and may accept later.

    Raised when a write met only 429s (or connections that never opened) until
    the bounded retries ran out, or when the pacer holds its endpoint longer
    than a write may wait.  Not a failure: keep the intent and try again later
    (``retry_after``: GitLab's hint in seconds, when it gave one).
    """

    def __init__(self, message: str, *, status: int | None = None, what: str = "",
                 retry_after: float | None = None):
        self.retry_after = retry_after
        super().__init__(message, status=status, what=what)


class AmbiguousWrite(GitLabApiError):
    """A write failed in a way that leaves GitLab's state unknown (5xx, timeout, reset).

    Never repeat the write blindly: read GitLab's state first.
    """


# --------------------------------------------------------------------------- accounting


@dataclass(frozen=True)
class ApiCall:
    """One HTTP request to GitLab, reported to the observer."""

    api: str  # "rest" or "graphql"
    method: str
    endpoint: str  # path with ids replaced by ":id"
    status: int | None  # None: no response (connection error, timeout)
    seconds: float


class CallCounter:
    """Thread-safe totals of API calls; ``snapshot()`` for benchmarks and tests."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.total = 0
        self.errors = 0
        self.by_endpoint: dict[str, int] = {}

    def __call__(self, call: ApiCall) -> None:
        with self._lock:
            self.total += 1
            if call.status is None or call.status >= 400:
                self.errors += 1
            key = f"{call.method} {call.endpoint}"
            self.by_endpoint[key] = self.by_endpoint.get(key, 0) + 1

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"total": self.total, "errors": self.errors, "by_endpoint": dict(self.by_endpoint)}


def _endpoint_of(path: str) -> str:
    """``/api/v4/projects/12/jobs/345/trace`` -> ``/projects/:id/jobs/:id/trace``."""
    p = path.split("?", 1)[0]
    if "/api/v4" in p:
        p = p.split("/api/v4", 1)[1]
    parts = []
    prev = ""
    for seg in p.split("/"):
        if seg.isdigit() or (prev == "projects" and seg) or (prev == "groups" and seg):
            parts.append(":id")
        elif prev == "branches" and seg:
            parts.append(":branch")  # bounded metric labels: never one per branch name
        else:
            parts.append(seg)
        prev = seg
    return "/".join(parts) or "/"


# --------------------------------------------------------------------------- versions

#: Oldest GitLab the bot supports; older ones are refused by ``retry-bot doctor`` and degrade in the bot.
MIN_SUPPORTED_VERSION = (16, 0)


@dataclass(frozen=True)
class GitLabFeatures:
    """What the GitLab the bot talks to can do, from its version (``GET /version``).

    * ``exit_code``: ``CiJob.exitCode`` exists from 16.10;
    * ``job_retry``: ``jobRetry(input: {id: CiProcessableID!, variables:})`` from 16.4
      (MR 130222; before, ``CiBuildID``): below it the bot uses REST retry and play only.

    ``CiJob.pipeline`` became a ``PipelineInterface`` after 18.0; the bot's query uses
    ``... on Pipeline { source }``, valid on every version, so it needs no flag.
    """

    version: str = ""
    exit_code: bool = True
    job_retry: bool = True

    @classmethod
    def from_version(cls, version: str) -> "GitLabFeatures":
        v = parse_version(version)
        if v is None:  # unknown: assume a current GitLab (a wrong guess shows as a GraphQL error)
            return cls(version=version)
        return cls(version=version, exit_code=v >= (16, 10), job_retry=v >= (16, 4))

    @property
    def supported(self) -> bool:
        v = parse_version(self.version)
        return v is None or v >= MIN_SUPPORTED_VERSION

    def missing(self) -> list[str]:
        """What this GitLab lacks, one clear sentence each."""
        out = []
        if not self.supported:
            out.append(f"GitLab {self.version} is older than {'.'.join(map(str, MIN_SUPPORTED_VERSION))}, "
                       "the oldest version the retry bot supports")
        if not self.exit_code:
            out.append(f"GitLab {self.version} has no CiJob.exitCode (16.10+): OOM kills are recognised from the "
                       "signed usage record and the log only")
        if not self.job_retry:
            out.append(f"GitLab {self.version} has no jobRetry(id: CiProcessableID) (16.4+): the bot uses REST retry "
                       "and play only, so a failed manual job or a copy is re-created through a child pipeline")
        return out


def parse_version(version: str | None) -> tuple[int, int] | None:
    """``"17.11.2-ee"`` -> ``(17, 11)``; ``None`` when unreadable."""
    import re as _re

    m = _re.match(r"^\s*v?(\d+)\.(\d+)", version or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class RetrySettings:
    """Bounds for the retry loop around every call."""

    #: Attempts per call, the first included.
    max_attempts: int = 5
    #: Give up on a call after this many seconds of retrying.
    max_total_seconds: float = 120.0
    #: The longest single wait (also caps Retry-After / RateLimit-Reset).
    max_wait_seconds: float = 60.0
    #: Base of the exponential backoff when GitLab gives no hint.
    backoff_base_seconds: float = 0.5
    #: HTTP timeout of one request.
    request_timeout_seconds: float = 30.0
    #: A write whose endpoint is held (a 429's ``Retry-After``) longer than this is not
    #: waited for: it raises :class:`WriteNotSent` at once and the bot moves on.
    write_max_pacing_wait_seconds: float = 5.0


# --------------------------------------------------------------------------- helpers


class _Transient(Exception):
    """Internal: a failure worth another attempt; carries the wait hint."""

    def __init__(self, message: str, *, status: int | None, hint: float | None):
        self.status = status
        self.hint = hint
        super().__init__(message)


def _retry_hint(headers: Mapping[str, str] | None, now: float) -> float | None:
    """Seconds GitLab asked us to wait: ``Retry-After`` first, then ``RateLimit-Reset``."""
    if not headers:
        return None
    h = {k.lower(): v for k, v in headers.items()}
    ra = h.get("retry-after")
    if ra:
        ra = ra.strip()
        try:
            return max(0.0, float(ra))
        except ValueError:
            try:
                dt = email.utils.parsedate_to_datetime(ra)
                return max(0.0, dt.timestamp() - now)
            except (TypeError, ValueError):
                pass
    reset = h.get("ratelimit-reset")
    if reset:
        try:
            return max(0.0, float(reset) - now)
        except ValueError:
            pass
    return None


#: GitLab's ISO 8601 timestamps (``2026-11-21T23:19:16.123Z``) as aware datetimes (one parser: isotime.py).
parse_time = parse_iso_time


class _NoRetryGitlab(gitlab.Gitlab):
    """python-gitlab with its own retry loop off: tenacity in :class:`GitLabClient` owns retries."""

    def http_request(self, *args: Any, **kwargs: Any) -> requests.Response:  # noqa: D102
        kwargs["obey_rate_limit"] = False
        kwargs["retry_transient_errors"] = False
        kwargs["max_retries"] = 0
        return super().http_request(*args, **kwargs)


# --------------------------------------------------------------------------- client


class GitLabClient:
    """python-gitlab REST + GraphQL with bounded retries and call accounting.

    Args:
        url: GitLab base URL (``https://gitlab.example.com``).
        token: a personal, project or group access token (never logged).
        retry: bounds of the retry loop.
        observer: called with an :class:`ApiCall` for every HTTP request.
        sleep: injectable for tests.
        pacer: paces every request (default: GitLab's headers and 429s only, no budget).
    """

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        retry: RetrySettings = RetrySettings(),
        observer: Callable[[ApiCall], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        user_agent: str = "gitlab-rightsizer-retry-bot",
        pacer: RequestPacer | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.settings = retry
        self.pacer = pacer if pacer is not None else RequestPacer(None, wall=clock)
        self._observer = observer
        self._sleep = sleep
        self._clock = clock
        self._local = threading.local()
        register_secret(token)
        session = requests.Session()
        session.hooks["response"].append(self._on_rest_response)
        self.gl = _NoRetryGitlab(
            self.url,
            private_token=token,
            timeout=retry.request_timeout_seconds,
            session=session,
            per_page=100,
            user_agent=user_agent,
        )
        # python-gitlab's GraphQL only sets the Authorization header on a client it
        # builds itself; ours carries the accounting hooks, so it sets the header too.
        gql_headers = {"User-Agent": user_agent}
        if token:
            gql_headers["Authorization"] = f"Bearer {token}"
        self._httpx = httpx.Client(
            timeout=retry.request_timeout_seconds,
            headers=gql_headers,
            event_hooks={"request": [self._on_gql_request], "response": [self._on_gql_response]},
        )
        self.gql = gitlab.GraphQL(
            self.url,
            token=token,
            client=self._httpx,
            max_retries=0,
            obey_rate_limit=False,
            retry_transient_errors=False,
        )

    def close(self) -> None:
        """Close both HTTP sessions."""
        try:
            self.gl.session.close()
        finally:
            self._httpx.close()

    def _pause(self, seconds: float) -> None:
        """Sleep between attempts; the pacer counts the time as passed (the hint it holds is served)."""
        t0 = time.monotonic()
        self._sleep(seconds)
        self.pacer.slept(seconds, time.monotonic() - t0)

    # ---------------------------------------------------------------- accounting hooks

    def _report(self, call: ApiCall) -> None:
        if self._observer is not None:
            try:
                self._observer(call)
            except Exception:  # an observer must never break a call
                log.warning("api_call_observer_failed", exc_info=True)

    def _on_rest_response(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        self._local.headers = dict(response.headers)
        self._local.got_response = True
        if response.status_code != 429:  # a 429 is fed with its endpoint by _classify_http
            self.pacer.observe(response.headers)
        self._report(ApiCall("rest", response.request.method or "GET", _endpoint_of(response.request.path_url),
                             response.status_code, response.elapsed.total_seconds()))

    def _on_gql_request(self, request: httpx.Request) -> None:
        request.extensions["rb_start"] = time.monotonic()
        self._local.got_response = False

    def _on_gql_response(self, response: httpx.Response) -> None:
        self._local.headers = dict(response.headers)
        self._local.got_response = True
        if response.status_code != 429:
            self.pacer.observe(response.headers)
        start = response.request.extensions.get("rb_start", time.monotonic())
        self._report(ApiCall("graphql", "POST", "/graphql", response.status_code, time.monotonic() - start))

    def _no_response(self, api: str, method: str, endpoint: str) -> None:
        self._report(ApiCall(api, method, endpoint, None, 0.0))

    # ---------------------------------------------------------------- the retry loop

    def _call(self, what: str, fn: Callable[[], Any], *, write: bool = False, api: str = "rest",
              endpoint: str = "") -> Any:
        """Run ``fn`` with bounded retries; map failures to this module's errors."""
        s = self.settings
        key = "POST /graphql" if api == "graphql" else f"{'POST' if write else 'GET'} {_endpoint_of(endpoint or what)}"

        def wait(state: tenacity.RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            hint = getattr(exc, "hint", None)
            if hint is not None:
                return min(hint, s.max_wait_seconds)
            base = s.backoff_base_seconds * (2 ** (state.attempt_number - 1))
            return min(base + random.uniform(0, s.backoff_base_seconds), s.max_wait_seconds)

        def attempt() -> Any:
            # A read waits for its turn (it is what the bot needs to make progress); a write
            # held long is deferred instead, so the bot goes on with other jobs meanwhile.
            waited = self.pacer.acquire(key, sleep=self._sleep,
                                        max_wait=s.write_max_pacing_wait_seconds if write else None)
            if waited < 0:
                raise WriteNotSent(f"not sent: GitLab asked to wait {-waited:.0f}s more for this endpoint",
                                   status=429, what=what, retry_after=-waited)
            self._local.headers = None
            self._local.got_response = False
            try:
                return fn()
            except gitlab.exceptions.GitlabHttpError as exc:
                raise self._classify_http(exc, what, write, key) from exc
            except gitlab.exceptions.GitlabError as exc:  # e.g. GitlabJobPlayError wrapping a status
                if exc.response_code:
                    raise self._classify_http(exc, what, write, key) from exc
                raise GitLabApiError(str(exc), what=what) from exc
            except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError,
                    httpx.TransportError) as exc:
                if api == "rest" and not getattr(self._local, "got_response", False):
                    self._no_response(api, "POST" if write else "GET", endpoint or what)
                elif api == "graphql" and not getattr(self._local, "got_response", False):
                    self._no_response(api, "POST", "/graphql")
                never_sent = isinstance(exc, (requests.exceptions.ConnectTimeout, httpx.ConnectError,
                                              httpx.ConnectTimeout)) or (
                    isinstance(exc, requests.ConnectionError) and _is_refused(exc))
                if write and not never_sent:
                    raise AmbiguousWrite(f"no answer ({type(exc).__name__}); the write may have happened",
                                         what=what) from exc
                raise _Transient(f"{type(exc).__name__}: {exc}", status=None, hint=None) from exc

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(_Transient),
            stop=tenacity.stop_after_attempt(max(1, s.max_attempts)) | tenacity.stop_after_delay(s.max_total_seconds),
            wait=wait,
            sleep=self._pause,
            reraise=True,
            before_sleep=lambda st: log.info(
                "gitlab_call_retry", call=what, attempt=st.attempt_number,
                error=str(st.outcome.exception()) if st.outcome else None,
                wait_seconds=round(st.next_action.sleep, 2) if st.next_action else None),
        )
        try:
            return retrying(attempt)
        except _Transient as exc:
            if write:
                # Only 429 / refused connections are retried for writes; running out of
                # attempts on those means GitLab never acted, and may accept it later:
                # not a refusal (the caller keeps its intent and tries again).
                raise WriteNotSent(f"not sent after {s.max_attempts} attempts: {exc}", status=exc.status,
                                   what=what, retry_after=exc.hint) from exc
            raise GitLabApiError(f"gave up after {s.max_attempts} attempts: {exc}", status=exc.status,
                                 what=what) from exc

    def _classify_http(self, exc: gitlab.exceptions.GitlabError, what: str, write: bool, key: str = "") -> Exception:
        status = exc.response_code
        msg = exc.error_message if isinstance(exc.error_message, str) else repr(exc.error_message)
        if status == 429:
            headers = getattr(self._local, "headers", None)
            hint = _retry_hint(headers, self._clock())
            if hint is not None:
                hint = min(hint, self.settings.max_wait_seconds)
            self.pacer.observe(headers, key=key, status=429, hint=hint)
            if write and hint is not None and hint > self.settings.write_max_pacing_wait_seconds:
                # Not worth stalling the bot for: GitLab did not act; the caller tries again later.
                return WriteNotSent(f"429 {msg}; GitLab asked to wait {hint:.0f}s", status=429, what=what,
                                    retry_after=hint)
            return _Transient(f"429 {msg}", status=429, hint=hint)
        if status is not None and (status in TRANSIENT_STATUSES):
            if write:
                return AmbiguousWrite(f"{status} {msg}", status=status, what=what)
            return _Transient(f"{status} {msg}", status=status, hint=None)
        if status == 404:
            return NotFound(f"404 {msg}", status=status, what=what)
        if write:
            return WriteRejected(f"{status} {msg}", status=status, what=what)
        return GitLabApiError(f"{status} {msg}", status=status, what=what)

    # ---------------------------------------------------------------- REST reads

    def _project_path(self, project: int | str) -> str:
        return f"/projects/{quote(str(project), safe='')}"

    def version(self) -> str:
        """``GET /version`` (any authenticated token): ``"17.11.2-ee"``."""
        res = self._call("GitLab version", lambda: self.gl.http_get("/version"), endpoint="/version")
        return str((res or {}).get("version", "")) if isinstance(res, Mapping) else ""

    def features(self) -> GitLabFeatures:
        """What this GitLab supports (read once per client; a failed read assumes a current GitLab)."""
        cached = getattr(self, "_features", None)
        if cached is not None:
            return cached
        if self._clock() < getattr(self, "_features_retry_at", 0.0):
            return GitLabFeatures()
        try:
            feats = GitLabFeatures.from_version(self.version())
        except GitLabApiError as exc:
            # Not asked again for 5 minutes: one failed read must not double every later call.
            self._features_retry_at = self._clock() + 300.0
            log.warning("gitlab_version_unknown", error=str(exc), note="assuming a current GitLab")
            return GitLabFeatures()
        for problem in feats.missing():
            log.warning("gitlab_feature_missing", version=feats.version, problem=problem)
        self._features: GitLabFeatures | None = feats
        return feats

    def current_user(self) -> dict[str, Any]:
        """``GET /user``: the token's user (``username`` finds the bot's own pipelines)."""
        res = self._call("current user", lambda: self.gl.http_get("/user"), endpoint="/user")
        return dict(res) if isinstance(res, Mapping) else {}

    def get_project(self, project: int | str) -> dict[str, Any]:
        """``GET /projects/:id`` (id or full path)."""
        path = self._project_path(project)
        return self._call(f"get project {project}", lambda: self.gl.http_get(path), endpoint=path)

    def group_projects(self, group: int | str, *, include_subgroups: bool = True) -> list[dict[str, Any]]:
        """Every project of a group (keyset by id), archived ones excluded."""
        path = f"/groups/{quote(str(group), safe='')}/projects"
        query = {"include_subgroups": include_subgroups, "archived": False, "simple": True,
                 "order_by": "id", "sort": "asc", "pagination": "keyset", "per_page": 100}
        return list(self._keyset(f"list projects of group {group}", path, query))

    def _keyset(self, what: str, path: str, query: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Follow ``Link: rel="next"`` one page at a time, each page retried on its own."""
        url: str = path
        q: dict[str, Any] | None = query
        while url:
            def page(u: str = url, qq: dict[str, Any] | None = q) -> requests.Response:
                return self.gl.http_request("get", u, query_data=qq)

            resp = self._call(what, page, endpoint=path)
            try:
                rows = resp.json()
            except ValueError as exc:
                raise GitLabApiError(f"answer is not JSON: {exc}", what=what) from exc
            if not isinstance(rows, list):
                raise GitLabApiError(f"expected a JSON list, got {type(rows).__name__}", what=what)
            yield from rows
            nxt = resp.links.get("next", {}).get("url")
            if not nxt and resp.headers.get("X-Next-Page"):
                # Offset pagination fallback (servers without keyset support).
                q = dict(query)
                q.pop("pagination", None)
                q["page"] = resp.headers["X-Next-Page"]
                url = path
                continue
            url, q = (nxt, None) if nxt else ("", None)

    def iter_failed_jobs(self, project: int | str, *, per_page: int = 100) -> Iterator[dict[str, Any]]:
        """Failed jobs of a project (child pipelines included), newest id first.

        The caller stops iterating at its look-back bound (``created_at``);
        pages are fetched lazily, so an idle project costs one request.
        """
        path = f"{self._project_path(project)}/jobs"
        query = {"scope[]": "failed", "pagination": "keyset", "order_by": "id", "sort": "desc",
                 "per_page": per_page}
        return self._keyset(f"list failed jobs of project {project}", path, query)

    def get_job(self, project: int | str, job_id: int) -> dict[str, Any]:
        """``GET /projects/:id/jobs/:job_id``."""
        path = f"{self._project_path(project)}/jobs/{int(job_id)}"
        return self._call(f"get job {job_id}", lambda: self.gl.http_get(path), endpoint=path)

    def trace_tail(self, project: int | str, job_id: int, max_bytes: int = 256 * 1024) -> bytes:
        """The last ``max_bytes`` of a job's log, streamed in bounded memory.

        GitLab has no range parameter for traces (mechanics §2.3), so the whole
        log is streamed and only its tail is kept.
        """
        path = f"{self._project_path(project)}/jobs/{int(job_id)}/trace"

        def fetch() -> bytes:
            resp = self.gl.http_request("get", path, streamed=True)
            buf = bytearray()
            try:
                for chunk in resp.iter_content(chunk_size=64 * 1024):
                    buf += chunk
                    if len(buf) > 2 * max_bytes:
                        del buf[: len(buf) - max_bytes]
            finally:
                resp.close()
            return bytes(buf[-max_bytes:]) if max_bytes else b""

        return self._call(f"trace of job {job_id}", fetch, endpoint=path)

    def pipeline(self, project: int | str, pipeline_id: int) -> dict[str, Any]:
        path = f"{self._project_path(project)}/pipelines/{int(pipeline_id)}"
        return self._call(f"get pipeline {pipeline_id}", lambda: self.gl.http_get(path), endpoint=path)

    def latest_pipelines(self, project: int | str, ref: str, *, source: str | None = None,
                         limit: int = 20, username: str | None = None) -> list[dict[str, Any]]:
        """The newest pipelines on ``ref`` (id desc), one page; ``username``: only that user's."""
        path = f"{self._project_path(project)}/pipelines"
        query: dict[str, Any] = {"ref": ref, "order_by": "id", "sort": "desc", "per_page": limit}
        if source:
            query["source"] = source
        if username:
            query["username"] = username
        rows = self._call(f"list pipelines on {ref}",
                          lambda: self.gl.http_get(path, query_data=query), endpoint=path)
        return list(rows) if isinstance(rows, list) else []

    def branch_head(self, project: int | str, ref: str) -> str | None:
        """The commit ``ref`` points at now (``GET /projects/:id/repository/branches/:ref``).

        When GitLab answers 404 (``ref`` is a tag or the branch is gone), the newest non-child pipeline's sha on ``ref``
        stands in: it misses a ``[skip ci]`` push, which is why a re-created job also
        carries ``RETRY_BOT_ORIGIN_SHA``.  ``None`` when neither is known.
        """
        path = f"{self._project_path(project)}/repository/branches/{quote(ref, safe='')}"
        try:
            branch = self._call(f"branch {ref}", lambda: self.gl.http_get(path), endpoint=path)
        except NotFound:
            branch = None
        if isinstance(branch, Mapping):
            sha = (branch.get("commit") or {}).get("id")
            if sha:
                return str(sha)
        for p in self.latest_pipelines(project, ref, limit=5):
            if p.get("source") != "parent_pipeline" and p.get("sha"):
                return str(p["sha"])
        return None

    def pipeline_variables(self, project: int | str, pipeline_id: int) -> dict[str, str]:
        """``GET /projects/:id/pipelines/:pid/variables`` as a dict."""
        path = f"{self._project_path(project)}/pipelines/{int(pipeline_id)}/variables"
        rows = self._call(f"variables of pipeline {pipeline_id}",
                          lambda: self.gl.http_get(path), endpoint=path)
        out: dict[str, str] = {}
        for r in rows or []:
            if isinstance(r, Mapping) and "key" in r:
                out[str(r["key"])] = "" if r.get("value") is None else str(r.get("value"))
        return out

    def pipeline_jobs(self, project: int | str, pipeline_id: int, *,
                      include_retried: bool = False) -> list[dict[str, Any]]:
        path = f"{self._project_path(project)}/pipelines/{int(pipeline_id)}/jobs"
        query = {"include_retried": include_retried, "per_page": 100}
        return list(self._keyset(f"jobs of pipeline {pipeline_id}", path, query))

    def pipeline_bridges(self, project: int | str, pipeline_id: int) -> list[dict[str, Any]]:
        path = f"{self._project_path(project)}/pipelines/{int(pipeline_id)}/bridges"
        return list(self._keyset(f"bridges of pipeline {pipeline_id}", path, {"per_page": 100}))

    def merged_ci_yaml(self, project: int | str, sha: str) -> str:
        """The pipeline's merged CI configuration at ``sha`` (``GET .../ci/lint?content_ref=``).

        The answer always carries ``merged_yaml`` (G ``lib/api/lint.rb``: the GET has no
        ``include_merged_yaml`` parameter; only the retired ``POST /ci/lint`` had one).
        """
        path = f"{self._project_path(project)}/ci/lint"
        query = {"content_ref": sha}
        res = self._call(f"ci lint at {sha[:12]}", lambda: self.gl.http_get(path, query_data=query), endpoint=path)
        if not isinstance(res, Mapping):
            raise GitLabApiError("ci lint answer is not an object", what="ci lint")
        if res.get("valid") is False and not res.get("merged_yaml"):
            raise GitLabApiError(f"CI configuration at {sha[:12]} is invalid: {res.get('errors')}", what="ci lint")
        merged = res.get("merged_yaml")
        if not isinstance(merged, str) or not merged.strip():
            raise GitLabApiError("ci lint returned no merged_yaml", what="ci lint")
        return merged

    def job_artifact(self, project: int | str, job_id: int, artifact_path: str) -> bytes:
        """One file of a job's artifacts archive."""
        path = f"{self._project_path(project)}/jobs/{int(job_id)}/artifacts/{quote(artifact_path)}"
        return self._call(f"artifact {artifact_path} of job {job_id}",
                          lambda: self.gl.http_get(path, raw=True, streamed=False).content, endpoint=path)

    # ---------------------------------------------------------------- GraphQL

    # ``CiJob.pipeline`` is a ``PipelineInterface`` on current GitLab (``source`` is only on
    # ``Pipeline``): the inline fragment is valid whether the field is the interface or the type.
    JOB_QUERY = """
    query($path: ID!, $id: JobID!) {
      project(fullPath: $path) {
        job(id: $id) { id status exitCode retried retryable playable manualJob
                       failureMessage pipeline { id ... on Pipeline { source } } }
      }
    }
    """
    #: The same without ``exitCode``, for GitLab before 16.10.
    JOB_QUERY_NO_EXIT_CODE = JOB_QUERY.replace(" exitCode", "")

    def job_details(self, project_path: str, job_id: int) -> dict[str, Any]:
        """GraphQL ``CiJob`` fields REST lacks: ``exitCode``, ``retried``, ``manualJob``..."""
        variables = {"path": project_path, "id": f"gid://gitlab/Ci::Build/{int(job_id)}"}
        query = self.JOB_QUERY if self.features().exit_code else self.JOB_QUERY_NO_EXIT_CODE
        res = self._gql(f"graphql job {job_id}", query, variables, write=False)
        job = ((res or {}).get("project") or {}).get("job")
        if job is None:
            raise NotFound(f"job {job_id} not found in {project_path}", what="graphql job")
        return job

    JOB_RETRY = """
    mutation($id: CiProcessableID!, $variables: [CiVariableInput!]) {
      jobRetry(input: {id: $id, variables: $variables}) { job { id status } errors }
    }
    """

    def job_retry_with_variables(self, job_id: int, variables: Mapping[str, str]) -> dict[str, Any]:
        """GraphQL ``jobRetry(variables:)`` on a manual job (the new job starts at once).

        Needs GitLab 16.4+ (:attr:`GitLabFeatures.job_retry`); callers check first.
        """
        gvars = {"id": f"gid://gitlab/Ci::Build/{int(job_id)}",
                 "variables": [{"key": k, "value": str(v)} for k, v in variables.items()]}
        res = self._gql(f"graphql jobRetry {job_id}", self.JOB_RETRY, gvars, write=True)
        payload = (res or {}).get("jobRetry") or {}
        errors = payload.get("errors") or []
        if errors:
            raise WriteRejected("; ".join(map(str, errors)), what=f"jobRetry {job_id}")
        job = payload.get("job") or {}
        gid = str(job.get("id", ""))
        try:
            new_id = int(gid.rsplit("/", 1)[-1])
        except ValueError as exc:
            raise AmbiguousWrite(f"jobRetry answered without a job id: {payload!r}", what="jobRetry") from exc
        return {"id": new_id, "status": job.get("status")}

    def _gql(self, what: str, query: str, variables: Mapping[str, Any], *, write: bool) -> Any:
        import gql.transport.exceptions as gqlexc

        def run() -> Any:
            try:
                with warnings.catch_warnings():
                    # python-gitlab passes variable_values the way gql 4 deprecates; harmless.
                    warnings.filterwarnings("ignore", category=DeprecationWarning, module="gql")
                    return self.gql.execute(query, variable_values=dict(variables))
            except gqlexc.TransportQueryError as exc:
                # GraphQL-level errors: the server answered and did not act (or refused).
                errs = getattr(exc, "errors", None) or [str(exc)]
                msgs = [e.get("message", str(e)) if isinstance(e, Mapping) else str(e) for e in errs]
                if _is_validation_error(exc):
                    raise GraphQLSchemaError(
                        "GitLab refused the query as invalid for its GraphQL schema (" + "; ".join(msgs)
                        + "): this GitLab version is not one the bot supports; run `retry-bot doctor`",
                        what=what) from exc
                if write:
                    raise WriteRejected("; ".join(msgs), what=what) from exc
                raise GitLabApiError("; ".join(msgs), what=what) from exc
            except gqlexc.TransportConnectionFailed as exc:
                cause = exc.__cause__ or exc.__context__
                never_sent = isinstance(cause, (httpx.ConnectError, httpx.ConnectTimeout))
                if not getattr(self._local, "got_response", False):
                    self._no_response("graphql", "POST", "/graphql")
                if write and not never_sent:
                    raise AmbiguousWrite(f"no answer ({exc}); the write may have happened", what=what) from exc
                raise _Transient(f"GraphQL connection failed: {exc}", status=None, hint=None) from exc
            except gqlexc.TransportProtocolError as exc:
                if write:
                    raise AmbiguousWrite(f"malformed GraphQL answer: {exc}", what=what) from exc
                raise _Transient(f"malformed GraphQL answer: {exc}", status=None, hint=None) from exc

        return self._call(what, run, write=write, api="graphql", endpoint="/graphql")

    # ---------------------------------------------------------------- writes

    def retry_job(self, project: int | str, job_id: int) -> dict[str, Any]:
        """``POST /projects/:id/jobs/:job_id/retry``: the **new** job."""
        path = f"{self._project_path(project)}/jobs/{int(job_id)}/retry"
        return self._call(f"retry job {job_id}", lambda: self.gl.http_post(path), write=True, endpoint=path)

    def play_job(self, project: int | str, job_id: int, variables: Mapping[str, str]) -> dict[str, Any]:
        """``POST .../jobs/:job_id/play`` with ``job_variables_attributes`` in a JSON body (mechanics §6.5)."""
        path = f"{self._project_path(project)}/jobs/{int(job_id)}/play"
        body = {"job_variables_attributes": [{"key": k, "value": str(v)} for k, v in variables.items()]}
        return self._call(f"play job {job_id}", lambda: self.gl.http_post(path, post_data=body),
                          write=True, endpoint=path)

    def create_pipeline(self, project: int | str, ref: str, variables: Mapping[str, str]) -> dict[str, Any]:
        """``POST /projects/:id/pipeline`` with pipeline variables."""
        path = f"{self._project_path(project)}/pipeline"
        body = {"ref": ref, "variables": [{"key": k, "value": str(v), "variable_type": "env_var"}
                                          for k, v in variables.items()]}
        return self._call(f"create pipeline on {ref}", lambda: self.gl.http_post(path, post_data=body),
                          write=True, endpoint=path)


def _is_validation_error(exc: Any) -> bool:
    """A static validation error: the document was refused before anything ran.

    GitLab (graphql-ruby) answers it with HTTP 200, ``errors`` and no ``data``; an
    execution error (a field that failed while resolving) comes with ``data`` and a
    ``path`` of response keys.  Static errors carry no path, or one that starts with the
    operation type (``["query", "project", ...]``).
    """
    if getattr(exc, "data", None) is not None:
        return False
    errs = getattr(exc, "errors", None) or []
    for e in errs:
        if not isinstance(e, Mapping):
            continue
        path = e.get("path")
        if not path or (isinstance(path, list) and path and path[0] in ("query", "mutation", "subscription")):
            return True
        code = str((e.get("extensions") or {}).get("code", ""))
        if code in ("undefinedField", "argumentLiteralsIncompatible", "variableMismatch", "undefinedType"):
            return True
    return False


def _is_refused(exc: BaseException) -> bool:
    """True when the connection was never established (so a POST never reached GitLab)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        name = type(cur).__name__
        if isinstance(cur, ConnectionRefusedError) or name in ("NewConnectionError", "ConnectTimeoutError"):
            return True
        args = getattr(cur, "args", ())
        nxt = next((a for a in args if isinstance(a, BaseException)), None)
        cur = getattr(cur, "reason", None) or nxt or cur.__cause__ or cur.__context__
    return False

