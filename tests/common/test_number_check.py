"""One number check (retry_bot/problems.py ``number_problem``) for the policy and ``bot.toml``.

``bot.toml`` had its own copy, which took TOML's ``nan`` and ``inf`` as numbers: ``interval_seconds =
nan`` passed ``minimum`` (every comparison with nan is false) and reached ``time.sleep``.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, strategies as st

from retry_bot.live.config import parse_config
from retry_bot.policy import parse_policy
from retry_bot.problems import ConfigError, number_problem

BOT = '[gitlab]\nurl = "http://gitlab.example"\ntoken_env = "T"\n[poll]\nprojects = ["a/b"]\n'


def bot_problems(extra: str) -> list[str]:
    try:
        parse_config(BOT + extra, env={"T": "t"})
    except ConfigError as exc:
        return [str(p) for p in exc.problems]
    return []


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "+nan"])
@pytest.mark.parametrize("key", ["interval_seconds", "lookback_hours", "follow_max_age_hours"])
def test_bot_toml_refuses_non_finite_numbers(key: str, value: str) -> None:
    found = bot_problems(f"{key} = {value}\n")
    assert any(f"poll.{key}: must be a finite number" in p for p in found), found


def test_bot_toml_reports_type_and_range_like_the_policy() -> None:
    found = bot_problems("per_page = true\ninterval_seconds = 0.01\nmax_jobs_per_cycle = 2.5\n")
    assert any("poll.per_page: must be an integer, not a boolean" in p for p in found), found
    assert any("poll.interval_seconds: 0.01 is out of range (must be at least 0.05)" in p for p in found), found
    assert any("poll.max_jobs_per_cycle: must be an integer, not a number" in p for p in found), found
    assert bot_problems("interval_seconds = 5\nper_page = 50\n") == []


def test_the_policy_keeps_its_messages() -> None:
    with pytest.raises(ConfigError) as err:
        parse_policy("version = 1\n[resize]\nratio = nan\n")
    assert "resize.ratio: must be a finite number, not nan" in str(err.value)


@given(st.one_of(st.integers(-10**6, 10**6), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                 st.text(max_size=3)),
       st.booleans())
def test_accepted_exactly_when_a_finite_number_in_range(value: object, integer: bool) -> None:
    ok = (not isinstance(value, bool) and isinstance(value, int if integer else (int, float))
          and math.isfinite(value) and -5 <= value <= 5)  # type: ignore[arg-type]
    assert (number_problem(value, integer=integer, low=-5, high=5) is None) == ok


def test_bot_toml_gitlab_section_gives_the_clients_retry_bounds() -> None:
    """``[gitlab]``'s retry keys reach :class:`RetrySettings` in one place, with one set of defaults."""
    from retry_bot.gitlab.client import RetrySettings

    cfg = parse_config(BOT, env={"T": "t"})
    assert cfg.gitlab.retry_settings() == RetrySettings()  # the defaults agree
    cfg = parse_config(BOT.replace('token_env = "T"', 'token_env = "T"\nmax_attempts = 2\nmax_wait_seconds = 3\n'
                                   'max_total_seconds = 9\nrequest_timeout_seconds = 4'), env={"T": "t"})
    assert cfg.gitlab.retry_settings() == RetrySettings(max_attempts=2, max_wait_seconds=3.0, max_total_seconds=9.0,
                                                        request_timeout_seconds=4.0)


@pytest.mark.parametrize(("text", "message"), [
    ('[storm]\nwindow = "30s"\n', "'30s' is out of range (from 60 to 86400 seconds)"),
    ('[families.oom]\nbackoff = { initial = "2d" }\n', "'2d' is too long (at most 86400 seconds)"),
    ('[resize.time]\nmax = "30s"\n', "'30s' is too short (at least 60 seconds)"),
])
def test_durations_keep_their_messages(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_policy("version = 1\n" + text)
    assert message in str(err.value)
