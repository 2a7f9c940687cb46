"""The usage record: what a build really used, signed, in one versioned schema.

This is the contract between the runner wrapper (which writes records) and the
retry bot (which reads them from job logs, spool files and the collector
endpoint).  The JSON Schema is shipped as ``runner_wrapper/usage-record.schema.json``
and documented in ``docs/usage-record.md``.

A record is signed with HMAC-SHA256 over its canonical JSON form (sorted keys,
no whitespace, UTF-8, the ``signature`` member removed), so a build cannot
print a forged "I needed 1 TB" marker into its own log.

Typical use::

    rec = UsageRecord(job=JobIdentity(id=42, ...), host=HostInfo(...), ...)
    signed = sign_record(rec.to_dict(), key=b"secret", key_id="farm-1")
    line = encode_marker(signed, key=b"secret", key_id="farm-1")   # <= 4 KiB, one line
    ...
    found = find_markers(trace_bytes)               # -> list of dicts, last is newest
    verify_record(found[-1], keys={"farm-1": b"secret"})   # raises RecordError if forged
"""

from __future__ import annotations

import base64
import hmac
import json
import re
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, Iterable, Mapping

from runner_wrapper import marker as _marker

__all__ = [
    "SCHEMA",
    "MARKER_PREFIX",
    "MARKER_MAX_BYTES",
    "RecordError",
    "JobIdentity",
    "HostInfo",
    "AppliedLimits",
    "Usage",
    "StageUsage",
    "UsageRecord",
    "canonical_json",
    "sign_record",
    "verify_record",
    "encode_marker",
    "decode_marker",
    "find_markers",
]

#: Schema identifier; bump the number on an incompatible change.
SCHEMA = "gitlab-rightsizer/usage-record/v1"
#: The job-log marker line starts with this (after optional ANSI/CR noise).
MARKER_PREFIX = _marker.MARKER_PREFIX
#: A marker line, including its newline, never exceeds this.
MARKER_MAX_BYTES = _marker.MARKER_MAX_BYTES

_MARKER_RE = re.compile(rb"RIGHTSIZER-USAGE v1 ([A-Za-z0-9_\-]+={0,2})")


class RecordError(ValueError):
    """A usage record is malformed, forged, or signed with an unknown key."""


@dataclass(frozen=True)
class JobIdentity:
    """Who ran: taken from ``JOB_RESPONSE_FILE`` (trusted), never ``CUSTOM_ENV_*``."""

    id: int
    project_id: int | None = None
    project_path: str | None = None
    pipeline_id: int | None = None
    name: str | None = None
    stage: str | None = None
    ref: str | None = None
    protected: bool | None = None
    url: str | None = None
    #: Selected job variables (resource requests and spec keys), never secrets.
    variables: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HostInfo:
    hostname: str
    runner: str | None = None
    #: ``cgroup-v2``, ``cgroup-v1`` or ``psutil``.
    backend: str = "psutil"
    #: True when figures come from sampling rather than kernel counters.
    approximate: bool = False
    kernel: str | None = None
    wrapper_version: str | None = None


@dataclass(frozen=True)
class AppliedLimits:
    """What the wrapper applied, and where each value came from."""

    memory_limit_bytes: int | None = None
    memory_request_bytes: int | None = None
    cpu_limit_cores: float | None = None
    cpu_request_cores: float | None = None
    #: e.g. ``{"memory_limit": "job variable KUBERNETES_MEMORY_LIMIT=4Gi"}``.
    sources: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Usage:
    """Totals over the measured span. Kernel counters are the truth; means are sampled."""

    wall_seconds: float
    memory_peak_bytes: int | None = None
    memory_mean_bytes: int | None = None
    cpu_user_seconds: float | None = None
    cpu_system_seconds: float | None = None
    cpu_mean_cores: float | None = None
    cpu_max_cores: float | None = None
    oom_kills: int = 0
    #: cgroup v1 ``memory.failcnt`` (times the limit was hit), when known.
    memory_failcnt: int | None = None
    #: PSI ``some avg10``-style totals in microseconds, when the kernel offers them.
    memory_pressure_usec: int | None = None
    cpu_pressure_usec: int | None = None


@dataclass(frozen=True)
class StageUsage:
    """One ``run_exec`` call: a stage name and its attempt (stages can repeat)."""

    name: str
    attempt: int
    wall_seconds: float
    exit_code: int | None
    oom_kills: int = 0
    memory_peak_bytes: int | None = None
    memory_mean_bytes: int | None = None
    cpu_seconds: float | None = None
    cpu_max_cores: float | None = None


@dataclass(frozen=True)
class UsageRecord:
    job: JobIdentity
    host: HostInfo
    limits: AppliedLimits
    usage: Usage
    started_at: str
    finished_at: str
    exit_code: int | None = None
    stages: tuple[StageUsage, ...] = ()
    #: True when per-stage figures were dropped to fit a size bound.
    stages_truncated: bool = False
    schema: str = SCHEMA

    @property
    def oom_killed(self) -> bool:
        return self.usage.oom_kills > 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stages"] = [asdict(s) for s in self.stages]
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "UsageRecord":
        """Build a record from JSON data, with a clear :class:`RecordError` on bad input.

        Accepts exactly what ``usage-record.schema.json`` accepts (a property test
        holds the two together): unknown keys are ignored (forward compatibility
        within v1); a missing required key, a wrong type, a number below the
        schema's minimum, an unknown backend or a malformed ``signature`` member is
        an error naming the key.  An integer field also takes a number with a zero
        fraction (``3.0``), as JSON Schema's ``integer`` does.
        """
        if not isinstance(data, Mapping):
            raise RecordError(f"usage record must be a JSON object, not {type(data).__name__}")
        schema = data.get("schema")
        if schema != SCHEMA:
            raise RecordError(f"unsupported usage record schema {schema!r} (expected {SCHEMA!r})")
        for key in ("job", "host", "limits", "usage", "started_at", "finished_at"):
            if key not in data:
                raise RecordError(f"usage record: missing required field {key!r}")
        raw_stages = data.get("stages", [])
        if not isinstance(raw_stages, list):
            raise RecordError(f"stages: expected an array, got {_json_type(raw_stages)}")
        if "signature" in data:
            _check_signature_member(data["signature"])
        stages = tuple(_build(StageUsage, s, f"stages[{i}]") for i, s in enumerate(raw_stages))
        truncated = data.get("stages_truncated", False)
        if not isinstance(truncated, bool):
            raise RecordError(f"stages_truncated: expected a boolean, got {truncated!r}")
        return cls(
            job=_build(JobIdentity, data["job"], "job"),
            host=_build(HostInfo, data["host"], "host"),
            limits=_build(AppliedLimits, data["limits"], "limits"),
            usage=_build(Usage, data["usage"], "usage"),
            started_at=_typed(data, "started_at", str, "started_at"),
            finished_at=_typed(data, "finished_at", str, "finished_at"),
            exit_code=_field(data.get("exit_code"), (_INT, True, None), "exit_code"),
            stages=stages,
            stages_truncated=truncated,
        )


# The members of each part of the record as usage-record.schema.json types them:
# (JSON type, null allowed, minimum).  tests/wrapper/test_schema_agreement.py checks that
# from_dict and the schema accept and reject the same records.
_INT, _NUM, _STR, _BOOL, _STRMAP = "integer", "number", "string", "boolean", "object of strings"
_RULES: dict[type, dict[str, tuple[str, bool, int | None]]] = {
    JobIdentity: {"id": (_INT, False, 1), "project_id": (_INT, True, 0), "project_path": (_STR, True, None),
                  "pipeline_id": (_INT, True, 0), "name": (_STR, True, None), "stage": (_STR, True, None),
                  "ref": (_STR, True, None), "protected": (_BOOL, True, None), "url": (_STR, True, None),
                  "variables": (_STRMAP, False, None)},
    HostInfo: {"hostname": (_STR, False, None), "runner": (_STR, True, None), "backend": (_STR, False, None),
               "approximate": (_BOOL, False, None), "kernel": (_STR, True, None),
               "wrapper_version": (_STR, True, None)},
    AppliedLimits: {"memory_limit_bytes": (_INT, True, 0), "memory_request_bytes": (_INT, True, 0),
                    "cpu_limit_cores": (_NUM, True, 0), "cpu_request_cores": (_NUM, True, 0),
                    "sources": (_STRMAP, False, None)},
    Usage: {"wall_seconds": (_NUM, False, 0), "memory_peak_bytes": (_INT, True, 0),
            "memory_mean_bytes": (_INT, True, 0), "cpu_user_seconds": (_NUM, True, 0),
            "cpu_system_seconds": (_NUM, True, 0), "cpu_mean_cores": (_NUM, True, 0),
            "cpu_max_cores": (_NUM, True, 0), "oom_kills": (_INT, False, 0), "memory_failcnt": (_INT, True, 0),
            "memory_pressure_usec": (_INT, True, 0), "cpu_pressure_usec": (_INT, True, 0)},
    StageUsage: {"name": (_STR, False, None), "attempt": (_INT, False, 1), "wall_seconds": (_NUM, False, 0),
                 "exit_code": (_INT, True, None), "oom_kills": (_INT, False, 0), "memory_peak_bytes": (_INT, True, 0),
                 "memory_mean_bytes": (_INT, True, 0), "cpu_seconds": (_NUM, True, 0), "cpu_max_cores": (_NUM, True, 0)},
}
#: ``host.backend`` (the schema's enum).
BACKENDS = ("cgroup-v2", "cgroup-v1", "psutil")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")  # the schema's pattern, searched as JSON Schema does


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    return "an array" if isinstance(v, (list, tuple)) else "an object" if isinstance(v, Mapping) else type(v).__name__


def _field(v: Any, rule: tuple[str, bool, int | None], where: str) -> Any:
    """One member checked against its schema rule; returns the value as the dataclass holds it."""
    kind, nullable, minimum = rule
    if v is None:
        if nullable:
            return None
        raise RecordError(f"{where}: expected {kind}, got null")
    if kind in (_INT, _NUM):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise RecordError(f"{where}: expected {'an integer' if kind == _INT else 'a number'}, got {v!r}")
        if kind == _INT and isinstance(v, float):
            if not v.is_integer():
                raise RecordError(f"{where}: expected an integer, got {v!r}")
            v = int(v)  # JSON Schema: an integer is any number with a zero fractional part
        if minimum is not None and v < minimum:
            raise RecordError(f"{where}: must be at least {minimum}, got {v!r}")
        return v if kind == _INT else float(v)
    if kind == _STR:
        if not isinstance(v, str):
            raise RecordError(f"{where}: expected a string, got {v!r}")
        return v
    if kind == _BOOL:
        if not isinstance(v, bool):
            raise RecordError(f"{where}: expected a boolean, got {v!r}")
        return v
    if not isinstance(v, Mapping) or not all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()):
        raise RecordError(f"{where}: expected an object of strings")
    return dict(v)


def _build(cls: type, data: Any, path: str) -> Any:
    if not isinstance(data, Mapping):
        raise RecordError(f"{path}: expected an object, got {_json_type(data)}")
    rules = _RULES[cls]
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        if f.name in data:
            kwargs[f.name] = _field(data[f.name], rules[f.name], f"{path}.{f.name}")
    missing = [f.name for f in fields(cls) if f.name not in data
               and f.default is MISSING and f.default_factory is MISSING]
    if missing:
        raise RecordError(f"{path}: missing required field(s) {missing}")
    if cls is HostInfo and "backend" in kwargs and kwargs["backend"] not in BACKENDS:
        raise RecordError(f"{path}.backend: expected one of {list(BACKENDS)}, got {kwargs['backend']!r}")
    return cls(**kwargs)


def _check_signature_member(sig: Any) -> None:
    """The ``signature`` member's shape (whether it verifies is :func:`verify_record`'s business)."""
    if not isinstance(sig, Mapping):
        raise RecordError(f"signature: expected an object, got {_json_type(sig)}")
    extra = sorted(set(sig) - {"alg", "key_id", "value"})
    if extra:
        raise RecordError(f"signature: unknown member(s) {extra}")
    if sig.get("alg") != "hmac-sha256":
        raise RecordError(f"signature.alg: expected 'hmac-sha256', got {sig.get('alg')!r}")
    if not isinstance(sig.get("key_id"), str):
        raise RecordError(f"signature.key_id: expected a string, got {sig.get('key_id')!r}")
    value = sig.get("value")
    if not isinstance(value, str) or not _HEX64.search(value):
        raise RecordError(f"signature.value: expected 64 lowercase hex digits, got {value!r}")


def _typed(d: Mapping[str, Any], key: str, typ: type, where: str) -> Any:
    v = d.get(key)
    if not isinstance(v, typ):
        raise RecordError(f"{where}: expected {typ.__name__}, got {v!r}")
    return v


# --------------------------------------------------------------------------- signing


def canonical_json(data: Mapping[str, Any]) -> bytes:
    """The bytes that are signed: sorted keys, compact, UTF-8, without ``signature``."""
    return _marker.canonical_json({k: v for k, v in data.items() if k != "signature"})


def sign_record(data: Mapping[str, Any], key: bytes, key_id: str = "default") -> dict[str, Any]:
    """Return a copy of ``data`` with a ``signature`` member (HMAC-SHA256, hex)."""
    if not key:
        raise RecordError("empty signing key")
    mac = _marker.hmac_sha256_hex(key, canonical_json(data))
    out = dict(data)
    out["signature"] = {"alg": "hmac-sha256", "key_id": key_id, "value": mac}
    return out


def verify_record(data: Mapping[str, Any], keys: Mapping[str, bytes]) -> UsageRecord:
    """Check the signature against the key named by ``key_id`` and parse the record.

    Raises :class:`RecordError` when the record is unsigned, signed with an
    unknown key, forged or malformed.  Comparison is constant-time.
    """
    sig = data.get("signature") if isinstance(data, Mapping) else None
    if not isinstance(sig, Mapping) or sig.get("alg") != "hmac-sha256":
        raise RecordError("usage record is not signed (no hmac-sha256 signature)")
    key = keys.get(str(sig.get("key_id")))
    if key is None:
        raise RecordError(f"usage record signed with unknown key id {sig.get('key_id')!r}")
    try:
        expected = _marker.hmac_sha256_hex(key, canonical_json(data))
    except (TypeError, ValueError) as exc:
        raise RecordError(f"usage record cannot be canonicalised: {exc}") from exc
    if not hmac.compare_digest(expected, str(sig.get("value", ""))):
        raise RecordError("usage record signature does not verify (forged or altered)")
    return UsageRecord.from_dict(data)


# --------------------------------------------------------------------------- job-log marker


def encode_marker(data: Mapping[str, Any], key: bytes, key_id: str = "default") -> str:
    """One job-log line (no newline) carrying the signed record, at most 4 KiB.

    When the full record does not fit, per-stage figures are dropped
    (``stages_truncated: true``) and the record is re-signed; the totals are
    always kept.
    """
    if not key:
        raise RecordError("empty signing key")
    try:
        return _marker.marker_line(data, key, key_id)
    except (TypeError, ValueError) as exc:
        raise RecordError(str(exc)) from exc


def decode_marker(line: str | bytes) -> dict[str, Any]:
    """Decode one marker line (signature not checked: call :func:`verify_record`)."""
    raw = line.encode("utf-8", "replace") if isinstance(line, str) else line
    m = _MARKER_RE.search(raw)
    if not m:
        raise RecordError("no usage marker in line")
    try:
        payload = base64.urlsafe_b64decode(m.group(1))
        data = json.loads(payload)
    except (ValueError, json.JSONDecodeError) as exc:
        raise RecordError(f"usage marker is not valid base64 JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise RecordError("usage marker does not hold a JSON object")
    return data


def find_markers(trace: bytes | str) -> list[dict[str, Any]]:
    """All decodable markers in a (possibly binary, ANSI-coloured) trace, oldest first.

    Undecodable markers are skipped; signatures are not checked here.
    """
    raw = trace.encode("utf-8", "replace") if isinstance(trace, str) else trace
    out: list[dict[str, Any]] = []
    for m in _MARKER_RE.finditer(raw):
        if len(m.group(0)) > MARKER_MAX_BYTES:
            continue
        try:
            out.append(decode_marker(m.group(0)))
        except RecordError:
            continue
    return out


def iter_jsonl_records(lines: Iterable[str | bytes]) -> Iterable[tuple[int, dict[str, Any] | RecordError]]:
    """Parse spool-file lines: yields ``(line_number, dict)`` or ``(line_number, RecordError)``."""
    for n, line in enumerate(lines, 1):
        if isinstance(line, bytes):
            line = line.decode("utf-8", "replace")
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            yield n, RecordError(f"line {n}: not JSON: {exc.msg}")
            continue
        if not isinstance(data, dict):
            yield n, RecordError(f"line {n}: not a JSON object")
            continue
        yield n, data
