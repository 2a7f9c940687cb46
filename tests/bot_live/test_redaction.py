"""URL userinfo never reaches a log line (issue 13: ``bot_ready`` logged ``user:token@`` verbatim)."""

from __future__ import annotations

import io
import json

import pytest

from runner_wrapper.logconfig import configure_logging, get_logger, redact_url
from tests.bot_live.farm import Farm, always_ok, make_bot

SECRET = "glpat-Zx9secretTOKEN"


@pytest.mark.parametrize("text, expected", [
    (f"https://oauth2:{SECRET}@gitlab.example.com/api/v4", "https://oauth2:***@gitlab.example.com/api/v4"),
    (f"https://{SECRET}@gitlab.example.com", "https://***@gitlab.example.com"),
    (f"GET https://u:{SECRET}@h/x failed; retry https://u:{SECRET}@h/y",
     "GET https://u:***@h/x failed; retry https://u:***@h/y"),
    ("postgresql://bot@db:5432/rs", "postgresql://bot@db:5432/rs"),
    (f"postgresql://bot:{SECRET}@db/rs?sslmode=require&password={SECRET}",
     "postgresql://bot:***@db/rs?sslmode=require&password=***"),
    ("mail me at admin@example.com", "mail me at admin@example.com"),
    ("https://gitlab.example.com/grp/p/-/jobs/1", "https://gitlab.example.com/grp/p/-/jobs/1"),
])
def test_redact_url(text, expected):
    assert redact_url(text) == expected


def test_every_log_event_masks_url_credentials():
    buf = io.StringIO()
    configure_logging("json", "debug", stream=buf)
    try:
        get_logger("t").info("anything", url=f"https://oauth2:{SECRET}@h", detail=f"see https://{SECRET}@h/x")
    finally:
        configure_logging("json", "info")
    assert SECRET not in buf.getvalue()
    assert "oauth2:***@h" in buf.getvalue()


@pytest.mark.slow
def test_bot_ready_does_not_log_the_token_in_the_gitlab_url(tmp_path):
    farm = Farm({"build": always_ok})
    buf = io.StringIO()
    configure_logging("json", "info", stream=buf)
    try:
        host = farm.url.split("://", 1)[1]
        bot = make_bot(farm, tmp_path, ["grp/x"], url=f"http://oauth2:{SECRET}@{host}")
        bot.close()
    finally:
        configure_logging("json", "info")
        farm.close()
    ready = [json.loads(line) for line in buf.getvalue().splitlines() if '"bot_ready"' in line]
    assert ready and ready[0]["gitlab"] == f"http://oauth2:***@{host}"
    assert SECRET not in buf.getvalue()
