"""``retry-bot state migrate|check|backup`` through the real CLI entry point."""

from __future__ import annotations

import json
import sqlite3

import pytest

from retry_bot.cli import main
from retry_bot.state import LATEST_VERSION, open_store
from runner_wrapper.logconfig import configure_logging


@pytest.fixture(autouse=True)
def _logging_back_to_stderr():
    """cli.main() binds structlog to the (captured) stderr of the moment; rebind it afterwards."""
    yield
    import sys
    configure_logging("json", "info", stream=sys.__stderr__)


def test_migrate_check_and_backup_a_sqlite_store(tmp_path, capsys):
    url = f"sqlite:///{tmp_path}/state.sqlite3"
    assert main(["state", "migrate", "--url", url]) == 0
    assert f"migrated schema version 0 -> {LATEST_VERSION}" in capsys.readouterr().out
    assert main(["state", "migrate", "--url", url]) == 0
    assert "up to date" in capsys.readouterr().out
    with open_store(url) as s:
        s.mark_job_seen(1, 1, {}, {})
        s.begin_action("resize:1:1", 1, "resize", {})
    assert main(["state", "check", "--url", url, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["counts"]["jobs"] == 1
    assert report["open_intents"][0]["key"] == "resize:1:1"
    assert main(["state", "check", "--url", url]) == 0
    assert "open intent" in capsys.readouterr().out
    out = tmp_path / "backup.sqlite3"
    assert main(["state", "backup", "--url", url, "--out", str(out)]) == 0
    with open_store(f"sqlite:///{out}") as b:
        assert b.get_job(1) is not None
    assert main(["state", "backup", "--url", url, "--out", str(out)]) == 2  # never overwrites
    assert "exists" in capsys.readouterr().err


def test_check_reports_newer_schema_and_corruption_with_exit_2(tmp_path, capsys):
    path = tmp_path / "state.sqlite3"
    with open_store(str(path)):
        pass
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    assert main(["state", "check", "--url", str(path)]) == 2
    assert "newer than this retry-bot" in capsys.readouterr().err
    bad = tmp_path / "bad.sqlite3"
    bad.write_bytes(b"\x00garbage" * 1000)
    assert main(["state", "migrate", "--url", str(bad)]) == 2
    assert "corrupt" in capsys.readouterr().err


def test_missing_url_is_explained(monkeypatch, capsys):
    monkeypatch.delenv("RETRY_BOT_STATE_URL", raising=False)
    assert main(["state", "check"]) == 2
    assert "pass --url or set RETRY_BOT_STATE_URL" in capsys.readouterr().err


@pytest.mark.postgres
def test_check_and_backup_a_postgresql_store(pg_server, tmp_path, capsys):
    url = pg_server.url(schema=pg_server.new_schema())
    assert main(["state", "migrate", "--url", url]) == 0
    assert main(["state", "check", "--url", url, "--format", "json"]) == 0
    capsys.readouterr()
    out = tmp_path / "state.dump"
    assert main(["state", "backup", "--url", url, "--out", str(out)]) == 0
    assert out.stat().st_size > 0


def test_check_shows_followed_jobs_and_the_storm_brake(tmp_path, capsys):
    from retry_bot.state import FollowedJob

    url = f"sqlite:///{tmp_path}/state.sqlite3"
    with open_store(url) as s:
        for i in range(3):
            s.follow(FollowedJob(job_id=10 + i, project_id=1, origin_job_id=1, kind="retry", since=100.0 + i))
        s.save_storm_categories({"runner_system_failure": {"braked_since": 90.0, "family": "infrastructure"}})
        s.hold("retry:7", "runner_system_failure", 7, {"job_id": 7})
        s.hold("retry:8", "runner_system_failure", 8, {"job_id": 8})
    assert main(["state", "check", "--url", url, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["counts"]["followed_jobs"] == 3 and report["counts"]["held_actions"] == 2
    assert report["followed"] == {"jobs": 3, "oldest_since": 100.0}
    assert report["storm"] == {"runner_system_failure": {"braked": True, "braked_since": 90.0, "held": 2}}
    assert main(["state", "check", "--url", url]) == 0
    out = capsys.readouterr().out
    assert "followed_jobs: 3" in out and "storm brake runner_system_failure: braked, 2 re-run(s) held" in out
