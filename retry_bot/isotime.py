"""The one parser of ISO 8601 timestamps, for GitLab's JSON, usage records, traces and query parameters.

GitLab writes ``2026-11-21T23:19:16.123Z``; usage records and traces may carry an offset
(``+02:00``) or none.  A timestamp without an offset is read as UTC, as GitLab reads one
(``lib/api/ci/pipelines.rb`` declares ``updated_after``/``updated_before`` ``type: DateTime``;
Grape coerces them with Ruby's ``DateTime.parse``, which gives a string without a zone offset
``+00:00``), never as the host's local time.  Pure: core modules (``decide``, ``predict``) and
edges (the GitLab client, the stand-in) all use it.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

__all__ = ["parse_iso_time", "aware"]


def aware(t: datetime) -> datetime:
    """``t`` with UTC attached when it has no time zone."""
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)


def parse_iso_time(value: Any) -> datetime | None:
    """An ISO 8601 string (``Z``, an offset or none: UTC) as an aware datetime; ``None`` when unusable.

    >>> parse_iso_time("2026-11-21T23:19:16.123Z").isoformat()
    '2026-11-21T23:19:16.123000+00:00'
    >>> parse_iso_time("2026-11-21T23:19:16") == parse_iso_time("2026-11-21T23:19:16+00:00")
    True
    >>> parse_iso_time("yesterday") is None and parse_iso_time(None) is None
    True
    """
    if not isinstance(value, str) or not value:
        return None
    try:
        return aware(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError:
        return None
