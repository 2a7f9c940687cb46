"""Where a usage record goes.

- the **job log**: one marker line (``RIGHTSIZER-USAGE v1 <base64 JSON>``, <= 4 KiB)
  printed by ``run`` (``cleanup`` output never reaches the job log);
- an append-only **spool** file (JSON Lines, ``fsync``-ed): every record, always,
  so nothing is lost when the collector is down;
- an HTTP **collector** (``POST`` JSON, bearer token from an environment variable,
  tenacity retries with exponential back-off);
- a Prometheus **node_exporter textfile** (written to a temporary file, then renamed).

Records are signed (HMAC-SHA256, :mod:`runner_wrapper.record`) when a key is
configured; otherwise they are emitted unsigned and the retry bot ignores them.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing and json stay out of the per-stage start-up path
    from typing import Any, Mapping

__all__ = ["say", "marker_line", "hmac_sha256_hex", "canonical_json", "signed_dict", "append_spool", "post_collector", "write_textfile",
           "CollectorError"]

PREFIX = "runner-wrapper: "


def say(message: str, stream: Any = None) -> None:
    """One line for the job log (``run``/``prepare`` stdout is the job log)."""
    out = stream or sys.stdout
    out.write(PREFIX + message + "\n")
    out.flush()


def signed_dict(data: Mapping[str, Any], key: bytes | None, key_id: str) -> dict[str, Any]:
    from runner_wrapper.record import sign_record

    return sign_record(data, key, key_id) if key else dict(data)


#: Same values as :data:`runner_wrapper.record.MARKER_PREFIX` / ``MARKER_MAX_BYTES`` (a test checks).
MARKER_PREFIX = "RIGHTSIZER-USAGE v1 "
MARKER_MAX_BYTES = 4096
_URLSAFE = bytes.maketrans(b"+/", b"-_")


def canonical_json(data: object) -> bytes:
    """``json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)``
    as UTF-8 bytes, for dicts (string keys), lists, tuples, strings, ints, floats, bools and ``None``.

    Strings go through the C escaper json itself uses (``_json.encode_basestring``), finite floats
    through ``float.__repr__`` as in json; a test checks equality with :func:`json.dumps` for arbitrary
    values.  Why not :mod:`json`: its package imports its decoder, which imports ``re`` and ``enum``
    (10-18 ms), on a path that runs after every main stage.  Raises ``ValueError`` for NaN/infinity
    and ``TypeError`` for other types, as json does.
    """
    try:
        from _json import encode_basestring
    except ImportError:  # pragma: no cover - interpreters without the C accelerator
        import json

        return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False).encode("utf-8")
    out: list[str] = []
    append = out.append

    def enc(v: object) -> None:
        if isinstance(v, str):
            append(encode_basestring(v))
        elif v is None:
            append("null")
        elif v is True:
            append("true")
        elif v is False:
            append("false")
        elif isinstance(v, int):
            append(int.__repr__(v))
        elif isinstance(v, float):
            if v != v or v in (float("inf"), float("-inf")):
                raise ValueError(f"Out of range float values are not JSON compliant: {v!r}")
            append(float.__repr__(v))
        elif isinstance(v, dict):
            append("{")
            first = True
            for k in sorted(v):
                if not isinstance(k, str):
                    raise TypeError(f"keys must be str, not {type(k).__name__}")
                if not first:
                    append(",")
                first = False
                append(encode_basestring(k))
                append(":")
                enc(v[k])
            append("}")
        elif isinstance(v, (list, tuple)):
            append("[")
            for i, item in enumerate(v):
                if i:
                    append(",")
                enc(item)
            append("]")
        else:
            raise TypeError(f"Object of type {type(v).__name__} is not JSON serializable")

    enc(data)
    return "".join(out).encode("utf-8")


def hmac_sha256_hex(key: bytes, message: bytes) -> str:
    """HMAC-SHA256 (RFC 2104) of ``message``, hex; equal to ``hmac.new(key, message, hashlib.sha256).hexdigest()``
    (a test checks it for arbitrary keys and messages).

    Built on CPython's own built-in SHA-256 module exactly as :mod:`hmac`'s pure-Python path builds
    it: ``import hmac`` pulls in :mod:`hashlib`, whose OpenSSL binding takes 5-8 ms to load, on a path
    that runs after every main stage.  Falls back to :mod:`hmac` where the built-in module is absent.
    """
    try:
        from _sha256 import sha256  # CPython 3.11
    except ImportError:  # pragma: no cover - other interpreters / versions
        try:
            from _sha2 import sha256  # CPython 3.12+
        except ImportError:
            import hashlib
            import hmac

            return hmac.new(key, message, hashlib.sha256).hexdigest()
    block = 64
    if len(key) > block:
        key = sha256(key).digest()
    key = key.ljust(block, b"\0")
    inner = sha256(key.translate(_TRANS_36) + message).digest()
    return sha256(key.translate(_TRANS_5C) + inner).hexdigest()


_TRANS_5C = bytes(x ^ 0x5C for x in range(256))
_TRANS_36 = bytes(x ^ 0x36 for x in range(256))


def marker_line(data: Mapping[str, Any], key: bytes | None, key_id: str) -> str:
    """The job-log marker; unsigned (same framing, no ``signature``) when there is no key.

    Byte for byte what :func:`runner_wrapper.record.encode_marker` prints (a test checks), built
    with :func:`hmac_sha256_hex`, :func:`canonical_json` and ``binascii`` only: ``runner_wrapper.record`` imports
    ``dataclasses``, and :mod:`base64` imports ``re`` (which imports ``enum``), together tens of
    milliseconds on a path that runs after every main stage.  ``binascii.b2a_base64`` plus the
    ``+/`` -> ``-_`` translation is exactly what ``base64.urlsafe_b64encode`` does.
    Raises ``ValueError`` when even the record without its stages exceeds 4 KiB.
    """
    from binascii import b2a_base64

    candidates = [dict(data)]
    if data.get("stages"):
        candidates.append({**data, "stages": [], "stages_truncated": True})
    for candidate in candidates:
        candidate.pop("signature", None)
        body = canonical_json(candidate)
        if key:
            candidate["signature"] = {"alg": "hmac-sha256", "key_id": key_id, "value": hmac_sha256_hex(key, body)}
            body = canonical_json(candidate)
        line = MARKER_PREFIX + b2a_base64(body, newline=False).translate(_URLSAFE).decode("ascii")
        if len(line) + 1 <= MARKER_MAX_BYTES:
            return line
    raise ValueError("usage record does not fit in a 4 KiB marker even without stages")


def append_spool(path: str, data: Mapping[str, Any]) -> None:
    """Append one JSON line and ``fsync`` it (and the directory when the file is new)."""
    import json

    line = (json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n").encode()
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    new = not os.path.exists(path)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)
    if new:
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


class CollectorError(RuntimeError):
    """The collector did not accept the record (after all retries)."""


def post_collector(url: str, data: Mapping[str, Any], token: str | None, timeout: float, attempts: int,
                   wait_initial: float = 0.5, wait_max: float = 4.0) -> int:
    """POST the record as JSON; retries connection errors and 5xx/429.  Returns the HTTP status.

    Raises :class:`CollectorError` after the last attempt (the record is already in the spool).
    """
    import json
    import urllib.error
    import urllib.request

    from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

    body = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "runner-wrapper"}
    if token:
        headers["Authorization"] = f"Bearer {token}"

    class _Retryable(Exception):
        pass

    @retry(stop=stop_after_attempt(max(1, attempts)), wait=wait_exponential(multiplier=wait_initial, max=wait_max),
           retry=retry_if_exception_type(_Retryable), reraise=True)
    def _send() -> int:
        req = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status
        except urllib.error.HTTPError as exc:
            if exc.code >= 500 or exc.code == 429:
                raise _Retryable(f"HTTP {exc.code}") from None
            raise CollectorError(f"collector refused the record: HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise _Retryable(str(getattr(exc, "reason", exc))) from None

    try:
        return _send()
    except _Retryable as exc:
        raise CollectorError(f"collector unreachable after {attempts} attempt(s): {exc}") from None


def write_textfile(path: str, record: Mapping[str, Any]) -> None:
    """node_exporter textfile with the last job's figures (atomic: temp file + rename)."""
    from prometheus_client import CollectorRegistry, Gauge, write_to_textfile

    reg = CollectorRegistry()
    job = record.get("job") or {}
    usage = record.get("usage") or {}
    limits = record.get("limits") or {}
    labels = {"project": str(job.get("project_path") or ""), "job_name": str(job.get("name") or "")}
    names = list(labels)

    def g(name: str, doc: str, value: Any) -> None:
        if value is None:
            return
        Gauge(name, doc, names, registry=reg).labels(**labels).set(float(value))

    g("rightsizer_last_job_id", "GitLab job id of the last finished job", job.get("id"))
    g("rightsizer_last_job_memory_peak_bytes", "Memory high-water mark of the last job", usage.get("memory_peak_bytes"))
    g("rightsizer_last_job_memory_mean_bytes", "Mean memory of the last job", usage.get("memory_mean_bytes"))
    g("rightsizer_last_job_memory_limit_bytes", "Memory limit applied to the last job",
      limits.get("memory_limit_bytes"))
    g("rightsizer_last_job_cpu_seconds", "CPU seconds (user+system) of the last job",
      (usage.get("cpu_user_seconds") or 0) + (usage.get("cpu_system_seconds") or 0))
    g("rightsizer_last_job_cpu_max_cores", "Busiest sampled interval of the last job, in cores",
      usage.get("cpu_max_cores"))
    g("rightsizer_last_job_wall_seconds", "Wall time of the last job", usage.get("wall_seconds"))
    g("rightsizer_last_job_oom_kills", "OOM kills in the last job", usage.get("oom_kills"))
    g("rightsizer_last_job_exit_code", "Exit code of the last job", record.get("exit_code"))
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    write_to_textfile(path, reg)
