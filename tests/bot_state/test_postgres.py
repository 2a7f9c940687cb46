"""PostgreSQL only: the database restarted (or down) under a running store."""

from __future__ import annotations

import threading
import time

import pytest

from retry_bot.state import StateUnavailable, open_store

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_restart_and_outage_under_a_running_store(pg_server, pg_url):
    s = open_store(pg_url)
    try:
        assert s.try_acquire_leadership("a", 60)
        s.mark_job_seen(1, 1, {"name": "build"}, {"family": "oom"})
        first = s.begin_action("k1", 1, "resize", {})
        pg_server.stop("fast")
        pg_server.start()
        # The idle connection died with the server; the next call reconnects by itself.
        assert s.get_job(1).facts == {"name": "build"}
        assert s.renew_leadership("a") is True
        s.complete_action(first.intent_id, {"job_id": 2})
        pg_server.stop("immediate")  # a crash of the database server
        with pytest.raises(StateUnavailable, match="retry later") as exc:
            s.begin_action("k2", 1, "retry", {})
        assert exc.value.retryable
        with pytest.raises(StateUnavailable):
            s.open_intents()
        pg_server.start()
        second = s.begin_action("k2", 1, "retry", {})
        assert second.created
        assert s.get_action("k1").status == "completed"  # nothing committed was lost
        assert [i.idempotency_key for i in s.open_intents()] == ["k2"]
        assert s.leader() == "a" and s.renew_leadership("a")
    finally:
        s.close()


def test_bot_loop_through_a_database_restart_loses_and_duplicates_nothing(pg_server, pg_url):
    s = open_store(pg_url)
    errors: list[StateUnavailable] = []
    done = threading.Event()
    keys: list[int] = []

    def loop() -> None:
        i = 0
        while not done.is_set():
            while True:  # what the bot does: back off and repeat the (idempotent) operation
                try:
                    intent = s.begin_action(f"k{i}", i, "retry", {})
                    if intent.status == "begun":
                        s.complete_action(intent.intent_id, {"i": i})
                    break
                except StateUnavailable as exc:
                    errors.append(exc)
                    time.sleep(0.05)
            keys.append(i)
            i += 1

    t = threading.Thread(target=loop)
    try:
        t.start()
        time.sleep(0.2)
        pg_server.stop("fast")
        time.sleep(0.3)
        pg_server.start()
        time.sleep(0.2)
        done.set()
        t.join(timeout=60)
        assert not t.is_alive()
        assert errors, "the loop never saw the outage"
        assert all(e.retryable for e in errors)
        stats = s.stats()
        assert stats["actions"] == len(keys) and stats["open_intents"] == 0
        assert all(s.get_action(f"k{i}").result == {"i": i} for i in keys)
    finally:
        s.close()


def test_unreachable_server_is_a_clear_retryable_error(pg_server):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(StateUnavailable, match=rf"cannot connect to the PostgreSQL state database "
                                               rf"postgresql://u:\*\*\*@127.0.0.1:{port}/db"):
        open_store(f"postgresql://u:secretpw@127.0.0.1:{port}/db", connect_timeout=2)
