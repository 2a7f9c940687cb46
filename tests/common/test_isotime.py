"""One ISO 8601 parser (retry_bot/isotime.py) for the bot, the predictor and the stand-in."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Iterator

import pytest
from hypothesis import given, strategies as st

from retry_bot.gitlab import client
from standin.gitlab import rest
from standin.gitlab.state import BadRequest
from retry_bot.isotime import parse_iso_time
from retry_bot.predict import history

MIDNIGHT_UTC = datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp()


@pytest.fixture
def tokyo_host(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The host's local time zone is UTC+9 (a runner or bot host outside UTC)."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_a_time_without_offset_is_utc_everywhere_not_the_hosts_local_time(tokyo_host: None) -> None:
    """GitLab reads ``updated_after=2026-01-01T00:00:00`` as UTC (Grape's DateTime coercion); so does
    the stand-in's query parser, which used to take the host's local time."""
    assert rest._parse_time("2026-01-01T00:00:00", "updated_after") == MIDNIGHT_UTC
    assert history.parse_time("2026-01-01T00:00:00") == MIDNIGHT_UTC
    assert client.parse_time("2026-01-01T00:00:00").timestamp() == MIDNIGHT_UTC  # type: ignore[union-attr]


def test_the_stand_in_rejects_a_bad_time_as_gitlab_does() -> None:
    with pytest.raises(BadRequest, match="updated_after is invalid"):
        rest._parse_time("not a time", "updated_after")
    with pytest.raises(BadRequest):
        rest._parse_time("", "updated_before")


@given(st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1),
                    timezones=st.one_of(st.none(), st.timezones())),
       st.sampled_from(["iso", "z"]))
def test_every_caller_reads_the_same_instant(dt: datetime, form: str) -> None:
    text = dt.isoformat()
    if form == "z" and dt.utcoffset() is not None and dt.utcoffset().total_seconds() == 0:  # type: ignore[union-attr]
        text = dt.replace(tzinfo=None).isoformat() + "Z"
    expected = (dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)).timestamp()
    assert parse_iso_time(text).timestamp() == expected  # type: ignore[union-attr]
    assert client.parse_time(text).timestamp() == expected  # type: ignore[union-attr]
    assert history.parse_time(text) == expected
    assert rest._parse_time(text, "t") == expected


@pytest.mark.parametrize("bad", [None, "", "yesterday", 12, b"2026-01-01"])
def test_unusable_values_are_none(bad: object) -> None:
    assert parse_iso_time(bad) is None
