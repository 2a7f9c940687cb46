"""The bot's HTTP endpoints: allocations (spack-gantry compatible), usage collection, health, metrics.

* ``GET /v1/allocation?spec=...`` answers like spack-gantry:
  ``{"variables": {"KUBERNETES_MEMORY_REQUEST": "2100M", "KUBERNETES_MEMORY_LIMIT": "3000M",
  "KUBERNETES_CPU_REQUEST": "1500m", "KUBERNETES_CPU_LIMIT": "1800m"}}``; 400 when the spec is
  missing or invalid.  The runner wrapper may send ``job_name`` (instead of, or besides,
  ``spec``), ``project`` and ``ref``.  The answer holds only GitLab job keywords (Spack merges
  every top-level key into the job); ``GET /v1/allocation/explain`` (same query) adds an
  ``explanation`` object (key used, samples, figures).
* ``POST /v1/usage``: one signed usage record (JSON object) or JSON Lines of them, with
  ``Authorization: Bearer TOKEN``.  401 without a valid token, 413 above the body limit,
  400 on bad JSON; every record is verified with
  :func:`runner_wrapper.record.verify_record`; rejected ones are counted (state store and
  ``/metrics``) and reported in the answer.  Ingest is idempotent.
* ``GET /healthz``: ``{"status": "ok"}``.  ``GET /metrics``: the Prometheus registry given.

Construct :class:`AllocationServer` with explicit collaborators (store, settings, tokens,
keys, registry) and call :meth:`serve_forever` / :meth:`start` (background thread).
History follows the store incrementally (:class:`retry_bot.predict.live.LiveHistory`): a
background thread applies new records every ``refresh_seconds`` (at once after an ingest);
requests never do I/O and never wait for a reload (:meth:`AllocationServer.sync` waits until
the model has everything stored so far).
"""

from __future__ import annotations

import hmac
import json
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping
from urllib.parse import parse_qs, urlsplit

from retry_bot.httpserver import (
    DEFAULT_MAX_CONNECTIONS, DEFAULT_READ_TIMEOUT, DEFAULT_WORKERS, BoundedHTTPServer, RequestHandler,
)
from retry_bot.predict.estimator import Clamp, gantry_variables, new_index, predict
from retry_bot.predict.history import HistoryIndex
from retry_bot.predict.live import LiveHistory
from retry_bot.predict.keys import SpecError, extract_key, parse_spack_spec
from retry_bot.predict.settings import DEFAULT_SETTINGS, PredictionSettings

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from retry_bot.state import Store

__all__ = ["AllocationServer", "IngestResult", "ingest_records", "make_metrics", "record_fingerprint",
           "count_rejected_once"]

DEFAULT_MAX_BODY = 1 << 20  # 1 MiB
#: Interpreter switch interval for a process that serves allocations while its history thread
#: applies records (CPython's default 5 ms makes a request queue behind several slices).
SWITCH_INTERVAL = 0.001
MAX_QUERY = 8190            # as spack-gantry (aiohttp's default line limit)


@dataclass
class IngestResult:
    """Outcome of ingesting a batch: stored, duplicates, rejected (with reasons).

    ``rejected`` counts every record of the batch that was rejected;
    ``rejected_seen_before`` those of them already counted in the store by an
    earlier ingest (the store's counters count each bad record once).
    """

    stored: int = 0
    duplicates: int = 0
    rejected: int = 0
    reasons: list[str] | None = None
    rejected_seen_before: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"stored": self.stored, "duplicates": self.duplicates, "rejected": self.rejected,
                "rejected_seen_before": self.rejected_seen_before, "errors": list(self.reasons or [])[:20]}


def record_fingerprint(data: Any, raw: bytes | str | None = None, where: str = "") -> str:
    """A stable hash of one submitted record: its raw bytes when known, else its canonical JSON.

    A line that is not even JSON and comes without its bytes is identified by
    where it was and the error (best effort).
    """
    import hashlib

    if raw is not None:
        blob = (raw.encode("utf-8", "replace") if isinstance(raw, str) else bytes(raw)).strip()
    elif isinstance(data, Mapping):
        blob = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str).encode()
    else:
        blob = f"{where}\n{data}".encode("utf-8", "replace")
    return hashlib.sha256(blob).hexdigest()


def count_rejected_once(store: Store, source: str, reason: str, fingerprint: str) -> bool:
    """Count a rejected record in ``store`` unless the same record (``fingerprint``) was counted for ``source``.

    Returns ``True`` when it was counted now.  One transaction of the store
    (:meth:`~retry_bot.state.Store.count_rejected_once`: the fingerprint and the
    counter together, never fenced), so two ingests of the same bad record count it once.
    """
    return bool(store.count_rejected_once(source, reason, fingerprint))


class _Metrics:
    """The endpoint's Prometheus metrics (registered on the given registry)."""

    def __init__(self, registry: CollectorRegistry):
        from prometheus_client import Counter, Histogram

        self.requests = Counter("rightsizer_http_requests_total", "HTTP requests by endpoint and status",
                                ["endpoint", "status"], registry=registry)
        self.records = Counter("rightsizer_usage_records_total", "Usage records by outcome",
                               ["source", "outcome"], registry=registry)
        self.latency = Histogram("rightsizer_allocation_seconds", "Time to answer an allocation request",
                                 registry=registry)
        # Requested vs used, integrated over each run (byte-seconds, core-seconds), by project:
        # rate(used) / rate(requested) is the fleet's avg/request ratio over any window.
        self.memory_requested = Counter(
            "rightsizer_memory_requested_byte_seconds", "Memory request (else limit) x wall time of ingested runs",
            ["project"], registry=registry)
        self.memory_used = Counter(
            "rightsizer_memory_used_byte_seconds", "Mean memory x wall time of ingested runs",
            ["project"], registry=registry)
        self.memory_peak = Counter(
            "rightsizer_memory_peak_byte_seconds", "Peak memory x wall time of ingested runs",
            ["project"], registry=registry)
        self.cpu_requested = Counter(
            "rightsizer_cpu_requested_core_seconds", "CPU request (else limit) x wall time of ingested runs",
            ["project"], registry=registry)
        self.cpu_used = Counter(
            "rightsizer_cpu_used_core_seconds", "CPU time (user + system) of ingested runs",
            ["project"], registry=registry)
        self.oom_kills = Counter(
            "rightsizer_oom_kills", "OOM kills reported by ingested usage records", ["project"], registry=registry)

    def observe_record(self, data: Mapping[str, Any]) -> None:
        """Account one newly stored, verified record (missing figures are skipped, never guessed)."""
        job = data.get("job") or {}
        limits = data.get("limits") or {}
        usage = data.get("usage") or {}
        project = str(job.get("project_path") or job.get("project_id") or "unknown")
        wall = usage.get("wall_seconds")
        if not isinstance(wall, (int, float)) or wall <= 0:
            return
        mem_req = limits.get("memory_request_bytes") or limits.get("memory_limit_bytes")
        if isinstance(mem_req, (int, float)) and usage.get("memory_mean_bytes") is not None:
            self.memory_requested.labels(project).inc(float(mem_req) * wall)
            self.memory_used.labels(project).inc(float(usage["memory_mean_bytes"]) * wall)
        if isinstance(mem_req, (int, float)) and usage.get("memory_peak_bytes") is not None:
            self.memory_peak.labels(project).inc(float(usage["memory_peak_bytes"]) * wall)
        cpu_req = limits.get("cpu_request_cores") or limits.get("cpu_limit_cores")
        cpu_s = (usage.get("cpu_user_seconds") or 0.0) + (usage.get("cpu_system_seconds") or 0.0)
        if isinstance(cpu_req, (int, float)) and cpu_s > 0:
            self.cpu_requested.labels(project).inc(float(cpu_req) * wall)
            self.cpu_used.labels(project).inc(float(cpu_s))
        if usage.get("oom_kills"):
            self.oom_kills.labels(project).inc(int(usage["oom_kills"]))


def _json_kind(value: Any) -> str:
    """How JSON calls ``value``'s type, with the value when short (``a number (1)``)."""
    kind = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array",
            type(None): "null"}.get(type(value), type(value).__name__)
    shown = json.dumps(value, default=str)
    return f"{kind} ({shown})" if value is not None and len(shown) <= 40 else kind


def make_metrics(registry: CollectorRegistry) -> _Metrics:
    return _Metrics(registry)


def ingest_records(
    records: Iterable[tuple[str, Any] | tuple[str, Any, bytes | str | None]],
    store: Store,
    keys: Mapping[str, bytes],
    source: str,
    metrics: _Metrics | None = None,
) -> IngestResult:
    """Verify and store records; ``records`` yields ``(where, dict-or-error[, raw bytes])``.

    A record whose signature does not verify (or that is malformed) is rejected
    and counted once in the store, by source kind (``spool``, ``collector``) and
    record hash (:func:`count_rejected_once`): ingesting the same file twice
    reports its bad records again but does not count them again.  A record
    already stored counts as a duplicate (ingest is idempotent).
    """
    from runner_wrapper.record import RecordError, verify_record

    kind = source.split(":")[0]
    out = IngestResult(reasons=[])
    for item in records:
        where, data = item[0], item[1]
        raw = item[2] if len(item) > 2 else None  # type: ignore[misc]
        reason = None
        if isinstance(data, Exception):
            reason, detail = "malformed", str(data)
        elif not isinstance(data, Mapping):
            reason, detail = "malformed", f"expected a usage record (a JSON object), got {_json_kind(data)}"
        else:
            try:
                verify_record(data, keys)
            except RecordError as exc:
                detail = str(exc)
                reason = "bad_signature" if ("signature" in detail or "signed" in detail or "key id" in detail) \
                    else "malformed"
        if reason is None:
            try:
                added = store.add_usage_record(data, source)
            except RecordError as exc:
                reason, detail = "malformed", str(exc)
            else:
                if added:
                    out.stored += 1
                else:
                    out.duplicates += 1
                if metrics:
                    metrics.records.labels(kind, "stored" if added else "duplicate").inc()
                    if added:
                        metrics.observe_record(data)
                continue
        out.rejected += 1
        out.reasons.append(f"{where}: {detail}")  # type: ignore[union-attr]
        first = True
        try:
            first = count_rejected_once(store, kind, reason, record_fingerprint(data, raw, where))
        except Exception:  # noqa: BLE001 - counting must never lose the answer
            pass
        if not first:
            out.rejected_seen_before += 1
        if metrics:
            metrics.records.labels(kind, f"rejected_{reason}" if first else "rejected_again").inc()
    return out


class AllocationServer:
    """The bot-side HTTP endpoints, served by :class:`retry_bot.httpserver.BoundedHTTPServer`.

    Args:
        store: a :class:`retry_bot.state.Store` (``usage_records``, ``add_usage_record``,
            ``count_rejected``), or ``None`` to serve a fixed ``index``.
        settings: prediction settings (the policy's ``[prediction]`` table).
        tokens: bearer tokens accepted by ``POST /v1/usage`` (empty: the endpoint answers 401).
        signing_keys: ``{key_id: key}`` for :func:`verify_record`.
        registry: a ``prometheus_client.CollectorRegistry`` served at ``/metrics``.
        max_body: largest accepted request body in bytes (413 above).
        clamp: runner-class bounds for predictions.
        index: a prebuilt history (used when ``store`` is ``None``).
        clock: epoch seconds (injected in tests).
        host, port: where to listen (port 0: any free port; see :attr:`port`).
        health: ``() -> (healthy, details)`` for ``/healthz`` (503 when unhealthy); default: always ok.
        read_timeout, max_connections, workers: the server's bounds (see :mod:`retry_bot.httpserver`).
    """

    def __init__(
        self,
        store: Store | None = None,
        settings: PredictionSettings = DEFAULT_SETTINGS,
        tokens: Iterable[str] = (),
        signing_keys: Mapping[str, bytes] | None = None,
        registry: CollectorRegistry | None = None,
        max_body: int = DEFAULT_MAX_BODY,
        clamp: Clamp = Clamp(),
        index: HistoryIndex | None = None,
        clock: Callable[[], float] = time.time,
        host: str = "127.0.0.1",
        port: int = 0,
        refresh_seconds: float = 60.0,
        health: Callable[[], tuple[bool, dict[str, Any]]] | None = None,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        workers: int = DEFAULT_WORKERS,
        post_routes: Mapping[str, Callable[[Any, Callable[[int], bytes]], tuple[int, dict]]] | None = None,
    ):
        from prometheus_client import CollectorRegistry

        #: Extra ``POST`` endpoints: path -> ``(headers, read_body) -> (status, JSON)`` (e.g. the webhook).
        self.post_routes = dict(post_routes or {})
        self.store = store
        self.settings = settings
        self.tokens = tuple(t for t in tokens if t)
        self.signing_keys = dict(signing_keys or {})
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = _Metrics(self.registry)
        self.max_body = int(max_body)
        self.clamp = clamp
        self.clock = clock
        self.refresh_seconds = refresh_seconds
        self.health = health
        self._index = index if index is not None else new_index(settings)
        self._live = LiveHistory(store, settings) if store is not None else None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._refresher: threading.Thread | None = None
        from runner_wrapper.logconfig import get_logger, register_secret

        for t in self.tokens:
            register_secret(t)
        self.log = get_logger("retry_bot.server")
        self.httpd = BoundedHTTPServer((host, port), self._handler_class(), read_timeout=read_timeout,
                                       max_connections=max_connections, workers=workers, max_body=self.max_body)

    # ------------------------------------------------------------------ lifecycle
    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def url(self) -> str:
        host = self.httpd.server_address[0]
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    def start(self) -> "AllocationServer":
        """Serve in a background daemon thread."""
        self._start_refresher()
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="allocation-server", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._start_refresher()
        self.httpd.serve_forever()

    def _start_refresher(self) -> None:
        if self._live is None or self._refresher is not None:
            return
        self._refresher = threading.Thread(target=self._refresh_loop, name="history-refresh", daemon=True)
        self._refresher.start()

    def _refresh_loop(self) -> None:
        """Apply new usage records as they arrive (never holding the model lock across I/O)."""
        while not self._stopping.is_set():
            live = self._live
            try:
                if live is not None:
                    n = live.catch_up()
                    if n:
                        self.log.debug("history.updated", records=n, total=live.applied)
            except Exception as exc:  # noqa: BLE001 - the store may be briefly unavailable
                self.log.error("history.refresh_failed", error=str(exc))
            self._wake.wait(max(self.refresh_seconds, 0.2))
            self._wake.clear()

    def close(self) -> None:
        self._stopping.set()
        self._wake.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._refresher is not None:
            self._refresher.join(timeout=10)

    # ------------------------------------------------------------------ history
    def index(self) -> HistoryIndex:
        """The current history (followed incrementally when there is a store)."""
        live = self._live
        return live.index if live is not None else self._index

    def _predict(self, key: Any, ref: str | None) -> Any:
        """The allocation from the model as it stands: no I/O on the request path."""
        live = self._live
        if live is None:
            with self._lock:
                return predict(self._index, key, self.clock(), self.settings, None, self.clamp, ref)
        if self._refresher is None:   # not started (a caller drives it): apply what is new first
            live.catch_up(live.inline_pages, wait=False)
        return live.predict(key, self.clock(), self.clamp, ref)

    def sync(self, timeout: float = 30.0) -> bool:
        """Wait until every record stored so far is in the model (tests, tools); ``False`` on timeout."""
        live = self._live
        if live is None:
            return True
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if live.catch_up(wait=False) == 0 and not live.store.usage_records_after(live.cursor, 1):
                return True
            time.sleep(0.01)
        return False

    def configure(self, settings: PredictionSettings, clamp: Clamp) -> None:
        """Take a reloaded policy's ``[prediction]`` settings and caps (SIGHUP).

        Requests already running finish with the old ones; history is re-read when the
        settings changed (keys or trust rules may differ).
        """
        changed = settings != self.settings
        self.clamp = clamp
        if not changed:
            return
        if self.store is None:
            with self._lock:
                self.settings = settings
            return
        # new keys or trust rules: build the new model beside the old one, then swap
        fresh = LiveHistory(self.store, settings)

        def build() -> None:
            try:
                fresh.catch_up()
            finally:
                self.settings = settings
                self._live = fresh
                self._wake.set()

        threading.Thread(target=build, name="history-rebuild", daemon=True).start()

    def invalidate(self) -> None:
        """New records were stored: apply them soon."""
        self._wake.set()

    # ------------------------------------------------------------------ endpoints
    def allocation(self, query: Mapping[str, list[str]]) -> tuple[int, dict]:
        spec = (query.get("spec") or [""])[0]
        job_name = (query.get("job_name") or [""])[0]
        project = (query.get("project") or [""])[0] or None
        ref = (query.get("ref") or [""])[0] or None
        explicit: dict[str, str] = {}
        if "spec" in query or not job_name:
            try:
                explicit = parse_spack_spec(spec)
            except SpecError as exc:
                return 400, {"error": "invalid spec" if spec else "missing spec", "detail": str(exc)}
        key = extract_key(self.settings.keys, job_name=job_name or None, explicit=explicit, project=project)
        alloc = self._predict(key, ref)
        return 200, {"variables": gantry_variables(alloc), "_alloc": alloc}

    def usage(self, body: bytes) -> tuple[int, dict]:
        text = body.decode("utf-8", "replace").strip()
        if not text:
            return 400, {"error": "empty body", "detail": "send one usage record or JSON Lines of them"}
        items: list[tuple[Any, ...]] = []
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            from runner_wrapper.record import iter_jsonl_records

            lines = text.splitlines()
            items = [(f"line {n}", d, lines[n - 1]) for n, d in iter_jsonl_records(lines)]
            if items and all(isinstance(it[1], Exception) for it in items):
                return 400, {"error": "invalid JSON", "detail": str(items[0][1])}
        else:
            if isinstance(data, list):
                items = [(f"item {i}", d) for i, d in enumerate(data)]
            elif isinstance(data, dict):
                items = [("record", data)]
            else:
                return 400, {"error": "invalid body", "detail": "expected a JSON object, an array or JSON Lines"}
        if self.store is None:
            return 503, {"error": "no state store configured"}
        res = ingest_records(items, self.store, self.signing_keys, "collector", self.metrics)
        if res.stored:
            self.invalidate()
        status = 200 if res.rejected == 0 else (400 if res.stored + res.duplicates == 0 else 207)
        return status, res.as_dict()

    def authorized(self, header: str | None) -> bool:
        if not header or not self.tokens:
            return False
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return False
        tok = token.strip().encode()
        ok = False
        for t in self.tokens:
            ok |= hmac.compare_digest(tok, t.encode())
        return ok

    def _handler_class(self) -> type[RequestHandler]:
        server = self

        class Handler(RequestHandler):
            def _send(self, status: int, payload: Any, endpoint: str, ctype: str = "application/json") -> None:
                body = payload if isinstance(payload, bytes) else (json.dumps(payload) + "\n").encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                server.metrics.requests.labels(endpoint, str(status)).inc()
                server.log.debug("http.request", method=self.command, endpoint=endpoint, status=status)

            def do_GET(self) -> None:  # noqa: N802 - stdlib API
                if len(self.path) > MAX_QUERY:
                    self._send(414, {"error": "request line too long"}, "other")
                    return
                parts = urlsplit(self.path)
                if parts.path == "/healthz":
                    ok, details = server.health() if server.health is not None else (True, {"status": "ok"})
                    self._send(200 if ok else 503, details, "healthz")
                elif parts.path == "/metrics":
                    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

                    self._send(200, generate_latest(server.registry), "metrics", CONTENT_TYPE_LATEST)
                elif parts.path in ("/v1/allocation", "/v1/allocation/explain"):
                    started = time.perf_counter()
                    try:
                        status, payload = server.allocation(parse_qs(parts.query, keep_blank_values=True))
                    except Exception as exc:  # noqa: BLE001 - answer, log, keep serving
                        server.log.error("allocation.failed", error=str(exc))
                        status, payload = 500, {"error": "internal error"}
                    # Spack deep-merges every top-level key into the job (gitlab-mechanics.md §11.6):
                    # /v1/allocation answers only ``variables``; the reasoning has its own endpoint.
                    alloc = payload.pop("_alloc", None)
                    if alloc is not None and parts.path.endswith("/explain"):
                        payload = {"variables": payload["variables"], "explanation": alloc.as_dict()}
                    server.metrics.latency.observe(time.perf_counter() - started)
                    self._send(status, payload, "allocation")
                else:
                    self._send(404, {"error": "not found"}, "other")

            def do_POST(self) -> None:  # noqa: N802 - stdlib API
                parts = urlsplit(self.path)
                route = server.post_routes.get(parts.path)
                if route is not None:
                    try:
                        status, payload = route(self.headers, self.rfile.read)
                    except Exception as exc:  # noqa: BLE001 - answer, log, keep serving
                        server.log.error("post_route.failed", endpoint=parts.path, error=str(exc))
                        status, payload = 500, {"error": "internal error"}
                    self.close_connection = True
                    self._send(status, payload, "webhook")
                    return
                if parts.path != "/v1/usage":
                    self._send(404, {"error": "not found"}, "other")
                    return
                if not server.authorized(self.headers.get("Authorization")):
                    self.close_connection = True
                    self._send(401, {"error": "unauthorized", "detail": "send Authorization: Bearer <token>"},
                               "usage")
                    return
                try:
                    length = int(self.headers.get("Content-Length") or "")
                except ValueError:
                    self.close_connection = True
                    self._send(411, {"error": "Content-Length required"}, "usage")
                    return
                if length < 0 or length > server.max_body:
                    self.close_connection = True
                    self._send(413, {"error": "body too large", "max_bytes": server.max_body}, "usage")
                    return
                body = self.rfile.read(length)
                try:
                    status, payload = server.usage(body)
                except Exception as exc:  # noqa: BLE001
                    server.log.error("usage.failed", error=str(exc))
                    status, payload = 500, {"error": "internal error"}
                self._send(status, payload, "usage")

        return Handler
