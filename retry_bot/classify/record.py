"""Finding the runner wrapper's signed usage record in a trace."""

from __future__ import annotations

from typing import Mapping

from runner_wrapper.record import RecordError, UsageRecord, find_markers, verify_record

__all__ = ["extract_verified_record"]


def extract_verified_record(trace: bytes, keys: Mapping[str, bytes]) -> tuple[UsageRecord | None, str | None]:
    """Return the newest usage marker whose signature verifies, and why others were rejected.

    ``(record, None)``: a record verified and no marker was rejected;
    ``(record, reason)``: a record verified but some other marker was rejected;
    ``(None, reason)``: markers were present but none verified (forged, unknown key, malformed);
    ``(None, None)``: no marker at all.
    Without ``keys`` every marker is rejected (nothing can be trusted).
    """
    try:
        markers = find_markers(trace)
    except Exception as exc:  # pragma: no cover - find_markers is defensive already
        return None, f"cannot scan for usage markers: {exc}"
    if not markers:
        return None, None
    rejected: list[str] = []
    found: UsageRecord | None = None
    for data in reversed(markers):
        if found is not None:
            # older markers after the newest good one are not looked at
            break
        if not keys:
            rejected.append("no signing key configured")
            continue
        try:
            found = verify_record(data, keys)
        except RecordError as exc:
            rejected.append(str(exc))
    if not rejected:
        return found, None
    uniq = list(dict.fromkeys(rejected))
    reason = f"{len(rejected)} usage marker(s) rejected: " + "; ".join(uniq)
    return found, reason
