"""Leader lease with fencing, on both backends, with an injected clock (no sleeping)."""

from __future__ import annotations

import pytest

from retry_bot.state import LeadershipLost


def test_one_leader_at_a_time_and_takeover_after_the_ttl(open_at, clock):
    a, b = open_at(), open_at()
    assert a.leader() is None and a.lease() is None
    assert a.try_acquire_leadership("a", 10) is True
    term_a = a.leadership_term
    assert b.try_acquire_leadership("b", 10) is False
    assert a.leader() == b.leader() == "a"
    clock.advance(6)
    assert a.renew_leadership("a") is True          # renewed: valid until now + 10
    clock.advance(6)
    assert b.try_acquire_leadership("b", 10) is False
    assert a.try_acquire_leadership("a", 10) is True and a.leadership_term == term_a  # staying leader keeps the term
    clock.advance(10.5)                              # a died (no renewal): its lease ran out
    assert a.leader() is None
    assert b.try_acquire_leadership("b", 10) is True
    assert b.leadership_term == term_a + 1 and b.leader() == "b"


def test_a_deposed_leader_is_fenced(open_at, clock):
    a, b = open_at(), open_at()
    assert a.try_acquire_leadership("a", 5)
    a.mark_job_seen(1, 1, {}, {})
    intent = a.begin_action("resize:1:1", 1, "resize", {})
    clock.advance(6)                                 # a paused longer than its lease
    assert b.try_acquire_leadership("b", 5)
    with pytest.raises(LeadershipLost, match=r"replica 'a' is not the leader .*held by 'b'"):
        a.complete_action(intent.intent_id, {"job_id": 2})
    with pytest.raises(LeadershipLost):
        a.begin_action("resize:2:1", 2, "resize", {})
    with pytest.raises(LeadershipLost):
        a.record_decision(1, {"action": "none"})
    with pytest.raises(LeadershipLost):
        a.set_watermark("project:1", {"job_id": 1})
    assert a.renew_leadership("a") is False and a.leadership_term is None
    # Nothing the deposed leader attempted was written; the new leader settles the open intent.
    assert b.get_job(1).decision is None
    [open_intent] = b.open_intents()
    done = b.complete_action(open_intent.intent_id, {"job_id": 2})
    assert done.term == b.leadership_term and done.holder == "b"
    # Usage ingest is never fenced (every replica serves the collector endpoint).
    from .records import make_record
    assert a.add_usage_record(make_record(1), "collector")


def test_a_follower_cannot_write_but_a_store_outside_elections_can(open_at):
    leader, follower, cli = open_at(), open_at(), open_at()
    assert leader.try_acquire_leadership("l", 30)
    assert not follower.try_acquire_leadership("f", 30)
    with pytest.raises(LeadershipLost, match="no term"):
        follower.mark_job_seen(1, 1, {}, {})
    assert cli.mark_job_seen(2, 1, {}, {}) is True   # single-bot use and admin tools: no election, no fence
    assert leader.mark_job_seen(3, 1, {}, {}) is True


def test_release_hands_over_at_once(open_at, clock):
    a, b = open_at(), open_at()
    assert a.try_acquire_leadership("a", 60)
    a.release_leadership("a")
    assert a.leader() is None
    assert b.try_acquire_leadership("b", 60)
    with pytest.raises(LeadershipLost):
        a.begin_action("k", 1, "retry", {})
    assert a.try_acquire_leadership("a", 60) is False
    b.close()                                        # a clean shutdown releases too
    assert a.try_acquire_leadership("a", 60) is True
    assert a.leadership_term == 3


def test_ensure_leader_renews_before_a_write_and_stops_a_deposed_leader(open_at, clock):
    a, b, cli = open_at(), open_at(), open_at()
    cli.ensure_leader()  # outside elections: nothing to check
    assert a.try_acquire_leadership("a", 10)
    clock.advance(8)
    a.ensure_leader()  # renewed: a full ttl ahead of the write
    assert a.lease()["expires_at"] == pytest.approx(clock.now + 10)
    clock.advance(9)
    assert not b.try_acquire_leadership("b", 10)
    clock.advance(2)
    assert b.try_acquire_leadership("b", 10)
    with pytest.raises(LeadershipLost, match="must not make this GitLab write"):
        a.ensure_leader()


def test_after_an_early_takeover_old_intents_are_observed_only_once_the_old_lease_ran_out(open_at, clock, backend):
    from retry_bot.state import resume_intent

    a, b = open_at(), open_at()
    assert a.try_acquire_leadership("a", 10)
    intent = a.begin_action("play:7", 7, "play", {})
    if backend == "postgresql":
        a._b.leader_lock_release()  # a's database session is cut off; a itself may still be alive
        assert b.try_acquire_leadership("b", 10)  # at once: the advisory lock is free
    else:
        assert not b.try_acquire_leadership("b", 10)
        clock.advance(10.5)  # SQLite has no session lock: only expiry hands over
        assert b.try_acquire_leadership("b", 10)
    [open_intent] = b.open_intents()
    expected_wait = 10.0 if backend == "postgresql" else 0.0
    assert b.reconcile_delay(open_intent) == pytest.approx(expected_wait)
    events: list[str] = []

    def fake_sleep(seconds: float) -> None:
        events.append(f"sleep {seconds:g}")
        clock.advance(seconds)

    def observe(i):
        events.append("observe")
        return {"played_by": "a"}  # a's write did land meanwhile

    done = resume_intent(b, open_intent, perform=lambda i: {"played_by": "b"}, observe=observe, sleep=fake_sleep)
    assert done.result == {"played_by": "a"}
    assert events == (["sleep 10", "observe"] if backend == "postgresql" else ["observe"])
    assert b.reconcile_delay(b.begin_action("play:8", 8, "play", {})) == 0.0  # new intents: no wait
    with pytest.raises(LeadershipLost):
        a.complete_action(intent.intent_id, {"played_by": "a"})


def test_a_released_lease_hands_the_failover_lock_over_too(open_at, clock):
    """After a clean release, the next leader holds the failover lock, so the old one cannot pre-empt it.

    Closing the lock's connection releases a PostgreSQL advisory lock only when the server's
    backend has finished, a moment after ``close()`` returns; the store unlocks explicitly
    first.  Repeated, because the window is short.
    """
    a, b = open_at(), open_at()
    for i in range(25):
        first, second = (a, b) if i % 2 == 0 else (b, a)
        assert first.try_acquire_leadership("first", 60)
        first.release_leadership("first")
        assert second.try_acquire_leadership("second", 60)
        assert first.try_acquire_leadership("first", 60) is False, f"round {i}: a live leader was pre-empted"
        second.release_leadership("second")
