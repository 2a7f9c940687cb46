"""The job-log usage marker, and the canonical JSON and HMAC it is built from.

The single implementation behind :func:`runner_wrapper.record.sign_record` and
:func:`runner_wrapper.record.encode_marker` (the contract), and behind the marker the
per-stage ``executor run`` path prints.  It imports nothing at module level and only C
accelerators (``_json``, ``_sha256``, ``binascii``) when called: :mod:`json`, :mod:`hmac`,
:mod:`hashlib` and :mod:`base64` pull in ``re``, ``enum`` and OpenSSL, tens of milliseconds
on a path that runs after every main build stage.  Tests check the output against
:func:`json.dumps` and :mod:`hmac` for arbitrary inputs.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping

__all__ = ["MARKER_PREFIX", "MARKER_MAX_BYTES", "canonical_json", "hmac_sha256_hex", "marker_line"]

#: The job-log marker line starts with this (after optional ANSI/CR noise).
MARKER_PREFIX = "RIGHTSIZER-USAGE v1 "
#: A marker line, including its newline, never exceeds this.
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
    except ImportError:  # pragma: no cover - a CPython C accelerator, absent elsewhere: guarded on purpose
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
    except ImportError:  # pragma: no cover - CPython's built-in module, named by version: guarded on purpose
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

    When the full record does not fit, per-stage figures are dropped (``stages_truncated:
    true``) and the record is re-signed; the totals are always kept.  ``binascii.b2a_base64``
    plus the ``+/`` -> ``-_`` translation is exactly what ``base64.urlsafe_b64encode`` does.
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
