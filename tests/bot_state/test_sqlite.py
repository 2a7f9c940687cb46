"""SQLite only: bad files are refused with a clear message and left untouched; WAL; busy files."""

from __future__ import annotations

import os
import sqlite3

import pytest

from retry_bot.state import StateError, StateUnavailable, open_store


def _sha(path: str) -> bytes:
    import hashlib
    return hashlib.sha256(open(path, "rb").read()).digest()


def test_garbage_file_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / "state.sqlite3"
    path.write_bytes(b"this is not a database, it is a text file\n" * 200)
    before = _sha(str(path))
    with pytest.raises(StateError, match=r"is corrupt or is not a SQLite file .*left untouched.*backup") as exc:
        open_store(f"sqlite:///{path}")
    assert str(path) in str(exc.value) and not exc.value.retryable
    assert _sha(str(path)) == before


def test_damaged_pages_are_detected_on_open(tmp_path):
    path = str(tmp_path / "state.sqlite3")
    with open_store(f"sqlite:///{path}") as s:
        for i in range(40):
            s.mark_job_seen(i, 1, {"name": "x" * 2000}, {"family": "oom"})
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    size = os.path.getsize(path)
    with open(path, "r+b") as f:  # scribble over the middle of the file (b-tree pages), keep the header
        f.seek(size // 2)
        f.write(os.urandom(8192))
    with pytest.raises(StateError, match="corrupt"):
        open_store(f"sqlite:///{path}")


def test_foreign_sqlite_database_is_refused(tmp_path):
    path = str(tmp_path / "other.db")
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (id INTEGER)")
    conn.commit()
    conn.close()
    before = _sha(path)
    with pytest.raises(StateError, match="not a retry-bot state file"):
        open_store(path)
    assert _sha(path) == before  # not even switched to WAL
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id = 12345")
    conn.close()
    with pytest.raises(StateError, match="another application"):
        open_store(path)


def test_urls_and_missing_directory(tmp_path):
    with pytest.raises(StateError, match="directory .*nope does not exist"):
        open_store(f"sqlite:///{tmp_path}/nope/state.sqlite3")
    with pytest.raises(StateError, match="unsupported state URL 'mysql://u:\\*\\*\\*@h/db'"):
        open_store("mysql://u:pw@h/db")
    with open_store(f"sqlite:////{tmp_path}/four-slashes.sqlite3") as s:
        assert s.location == f"{tmp_path}/four-slashes.sqlite3"
    with open_store("sqlite:///:memory:") as s:
        assert s.dialect == "sqlite" and s.mark_job_seen(1, 1, {}, {})


def test_wal_mode_and_a_file_locked_too_long_is_retryable(tmp_path):
    path = str(tmp_path / "state.sqlite3")
    s = open_store(path, busy_timeout=0.2)
    try:
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        conn.isolation_level = None
        conn.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        with pytest.raises(StateUnavailable, match="stayed locked by another process"):
            s.begin_action("k", 1, "retry", {})
        assert s.open_intents() == []  # readers are not blocked in WAL mode
        conn.execute("ROLLBACK")
        conn.close()
        assert s.begin_action("k", 1, "retry", {}).created
    finally:
        s.close()


def test_passwords_never_appear_in_locations():
    from retry_bot.state import redact_url

    assert redact_url("postgresql://u:s3cret@h:5432/db?sslmode=require&password=s3cret") == \
        "postgresql://u:***@h:5432/db?sslmode=require&password=***"
    assert redact_url("postgresql://u@h/db") == "postgresql://u@h/db"
