"""The bot's working state in real tables (schema 4), on SQLite and PostgreSQL.

Followed jobs, the storm brake and its held re-runs, dry-run decisions, the bot's own
pipelines and rejected-record fingerprints lived in JSON documents of ``watermarks``
before schema 4; the migration moves them, so an upgraded bot loses nothing.
"""

from __future__ import annotations

import json
import threading

import pytest

from retry_bot.state import FollowedJob, LeadershipLost, StateError, open_store
from retry_bot.state.backends import open_backend
from retry_bot.state.schema import MIGRATIONS


def _followed(job_id: int, since: float, **kw) -> FollowedJob:
    kw.setdefault("project_id", 7)
    kw.setdefault("origin_job_id", job_id + 100_000)
    kw.setdefault("kind", "retry")
    return FollowedJob(job_id=job_id, since=since, **kw)


def test_followed_jobs_are_paged_bounded_by_age_and_never_capped(store, clock):
    now = clock()
    for i in range(1200):   # more than the old silent cap of 500
        assert store.follow(_followed(5000 + i, now - i, project_path="g/p", runner_class="big" if i % 2 else None))
    assert not store.follow(_followed(5000, now))            # idempotent
    assert store.followed_count() == 1200
    seen, after = [], None
    while True:
        page = store.followed(limit=500, after=after)
        if not page:
            break
        seen += [f.job_id for f in page]
        after = (page[-1].since, page[-1].job_id)
    assert len(seen) == 1200 and len(set(seen)) == 1200
    assert seen[0] == 5000 + 1199                            # oldest first
    assert len(store.followed(max_age=99.5)) == 100
    assert store.followed_class_usage() == {("big", None, "g/p"): 600}
    expired = store.expire_followed(1000.0)
    assert sorted(f.job_id for f in expired) == list(range(5000 + 1001, 5000 + 1200))
    assert store.followed_count() == 1001


def test_unfollow_records_the_end_once_and_on_the_lineage(store, clock):
    store.add_lineage_member(1, 2, "retry", {})
    store.follow(_followed(2, clock(), origin_job_id=1, family="oom", category="oom_killed", kind="resize"))
    first = store.unfollow(2, status="success")
    assert first is not None and first.family == "oom" and first.kind == "resize"
    assert store.unfollow(2, status="success") is None        # a second path finds it gone: no double count
    assert store.lineage_for(2).latest.status == "success"
    assert store.followed_job(2) is None


def test_concurrent_unfollow_has_exactly_one_winner(open_at, clock):
    a, b = open_at(), open_at()
    for i in range(50):
        a.follow(_followed(100 + i, clock()))
    wins: list[int] = []
    lock = threading.Lock()

    def take(s):
        for i in range(50):
            if s.unfollow(100 + i, status="failed") is not None:
                with lock:
                    wins.append(100 + i)

    ts = [threading.Thread(target=take, args=(s,)) for s in (a, b)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert sorted(wins) == list(range(100, 150))


def test_storm_state_and_held_reruns(store):
    store.save_storm_categories({"runner_system_failure": {"braked_since": 5.0, "failures": [1.0, 2.0]},
                                 "image_pull": {"braked_since": None}})
    assert store.storm_categories()["runner_system_failure"]["failures"] == [1.0, 2.0]
    store.save_storm_categories({"runner_system_failure": {"braked_since": None}})
    assert set(store.storm_categories()) == {"runner_system_failure"}
    assert store.hold("retry:9", "runner_system_failure", 9, {"job_id": 9, "kind": "retry"})
    assert store.hold("retry:3", "runner_system_failure", 3, {"job_id": 3, "kind": "retry"})
    assert not store.hold("retry:3", "runner_system_failure", 3, {"job_id": 3})
    assert store.hold("retry:4", "image_pull", 4, {"job_id": 4})
    assert [h.job_id for h in store.held("runner_system_failure")] == [3, 9]
    assert store.held_counts() == {"image_pull": 1, "runner_system_failure": 2}
    assert store.release_held(["retry:3", "retry:404"]) == 1
    assert [h.idempotency_key for h in store.held()] == ["retry:4", "retry:9"]


def test_dry_run_decisions_keep_the_newest(store, clock):
    for n in range(7):
        clock.advance(1)
        store.record_dry_run(42, {"action": "retry", "n": n}, keep=5)
    store.record_dry_run(43, {"action": "none"})
    got = store.dry_run_decisions([42])
    assert [d.decision["n"] for d in got] == [2, 3, 4, 5, 6]
    assert store.get_job(42) is None                        # provisional: nothing decided
    assert len(store.dry_run_decisions([42, 43, 44])) == 6


def test_own_pipelines_first_claim_wins(store):
    assert store.own_pipeline(700, "resize:1:pipeline") == "resize:1:pipeline"
    assert store.own_pipeline(700, "resize:2:pipeline") == "resize:1:pipeline"
    store.own_pipeline(650, "resize:1:pipeline")
    assert store.pipelines_of("resize:1:pipeline") == [650, 700]
    assert store.pipeline_owner(700) == "resize:1:pipeline" and store.pipeline_owner(1) is None


def test_old_claims_of_settled_intents_are_forgotten_and_begun_ones_kept(store, clock):
    done = store.begin_action("resize:1:pipeline", 1, "create_pipeline", {})
    store.own_pipeline(700, "resize:1:pipeline")
    store.complete_action(done.intent_id, {"pipeline_id": 700})
    failed = store.begin_action("resize:2:pipeline", 2, "create_pipeline", {})
    store.own_pipeline(701, "resize:2:pipeline")
    store.fail_action(failed.intent_id, "refused", False)
    store.begin_action("resize:3:pipeline", 3, "create_pipeline", {})      # still begun: a crash to reconcile
    store.own_pipeline(702, "resize:3:pipeline")
    clock.advance(8 * 86400)
    store.own_pipeline(703, "resize:4:pipeline")                          # recent: kept whatever its intent
    assert store.forget_pipelines(7 * 86400) == 2
    assert [store.pipeline_owner(p) for p in (700, 701, 702, 703)] == [
        None, None, "resize:3:pipeline", "resize:4:pipeline"]
    assert store.forget_pipelines(7 * 86400) == 0
    assert store.stats()["bot_pipelines"] == 2
    with pytest.raises(StateError, match="max_age"):
        store.forget_pipelines(0)


def test_rejected_records_count_once_per_fingerprint(store):
    assert store.count_rejected_once("collector", "bad_signature", "ab" * 32)
    assert not store.count_rejected_once("collector", "bad_signature", "ab" * 32)
    assert store.count_rejected_once("spool", "bad_signature", "ab" * 32)
    assert store.rejected_counts() == {("collector", "bad_signature"): 1, ("spool", "bad_signature"): 1}


def test_bot_state_writes_are_fenced(open_at, clock):
    leader, other = open_at(), open_at()
    assert leader.try_acquire_leadership("a", 30)
    assert not other.try_acquire_leadership("b", 30)
    for write in (lambda: other.follow(_followed(1, clock())), lambda: other.unfollow(1),
                  lambda: other.hold("retry:1", "c", 1, {}), lambda: other.record_dry_run(1, {}),
                  lambda: other.own_pipeline(1, "k"), lambda: other.save_storm_categories({}),
                  lambda: other.forget_pipelines(60)):
        with pytest.raises(LeadershipLost):
            write()
    assert other.count_rejected_once("collector", "malformed", "f" * 64)   # ingest is never fenced


# ------------------------------------------------------------------ the migration from schema 3


def _schema3_with_documents(url: str) -> None:
    """A database as the retry-bot of schema 3 left it: its working state in watermark documents."""
    backend = open_backend(url)
    try:
        def step(tx):
            for m in MIGRATIONS[:3]:
                for statement in m.statements:
                    tx.execute(statement)
                backend.write_version(tx, m)
            docs = {
                "retry-bot:watch": {"jobs": [
                    {"job_id": 501, "project_id": 7, "project": "g/p", "origin_job_id": 500, "family": "oom",
                     "category": "oom_killed", "kind": "resize", "runner_class": "large", "since": 1000.0},
                    {"job_id": 601, "project_id": 7, "project": "g/p", "origin_job_id": 600,
                     "family": "infrastructure", "category": "runner_system_failure", "kind": "retry",
                     "runner_class": None, "since": 1001.0},
                    {"job_id": "not a number"}]},
                "retry-bot:storm": {"categories": {"runner_system_failure": {
                    "failures": [990.0, 995.0], "braked_since": 996.0, "probe_started": 996.0, "probes_sent": 1,
                    "successes": 0, "trips": 1, "family": "infrastructure"}}},
                "retry-bot:storm:held": {"held": {"runner_system_failure": {
                    "retry:700": {"kind": "retry", "job_id": 700, "project_id": 7},
                    "retry:701": {"kind": "retry", "job_id": 701, "project_id": 7}}}},
                "retry-bot:pipelines": {"pipelines": {"88": "resize:500:pipeline"}},
                "retry-bot:dry-run:900": {"job_id": 900, "decisions": [
                    {"at": 1100.0, "action": "retry", "reason": "transient"},
                    {"at": 1200.0, "action": "none", "reason": "budget"}]},
                "rejected-record:spool:/var/spool/x.jsonl:" + "c" * 64: {"reason": "bad_signature"},
                "project:7": {"max_job_id": 950, "polled_at": 1300.0},
            }
            for scope, value in docs.items():
                tx.execute("INSERT INTO watermarks (scope, value, updated_at) VALUES (?, ?, ?)",
                           (scope, json.dumps(value), 1234.0))

        backend.run(step, write=True)
    finally:
        backend.close()


def test_migration_from_schema_3_moves_every_document_into_its_table(store_url, clock):
    _schema3_with_documents(store_url)
    old = open_store(store_url, migrate=False, clock=clock)
    assert old.schema_version == 3 and old.needs_migration
    old.close()
    with open_store(store_url, clock=clock) as store:
        assert store.migrated_from == 3 and store.schema_version == MIGRATIONS[-1].version
        followed = store.followed()
        assert [(f.job_id, f.origin_job_id, f.kind, f.family, f.runner_class, f.project_path, f.since)
                for f in followed] == [(501, 500, "resize", "oom", "large", "g/p", 1000.0),
                                      (601, 600, "retry", "infrastructure", None, "g/p", 1001.0)]
        storm = store.storm_categories()["runner_system_failure"]
        assert storm["braked_since"] == 996.0 and storm["failures"] == [990.0, 995.0]
        assert [h.idempotency_key for h in store.held("runner_system_failure")] == ["retry:700", "retry:701"]
        assert store.held("runner_system_failure")[0].payload["project_id"] == 7
        assert store.pipelines_of("resize:500:pipeline") == [88]
        assert [(d.at, d.decision["action"]) for d in store.dry_run_decisions([900])] == [
            (1100.0, "retry"), (1200.0, "none")]
        assert not store.count_rejected_once("spool:/var/spool/x.jsonl", "bad_signature", "c" * 64)
        # the moved documents are gone; the poll watermarks stay
        assert store.get_watermark("retry-bot:watch") is None
        assert store.get_watermark("retry-bot:dry-run:900") is None
        assert store.get_watermark("project:7") == {"max_job_id": 950, "polled_at": 1300.0}
        assert store.stats()["watermarks"] == 1


def test_the_migrated_state_drives_the_poller(store_url, clock):
    """The storm brake and the followed jobs an upgraded bot finds are the ones the old bot left."""
    from retry_bot.storm import StormState

    _schema3_with_documents(store_url)
    with open_store(store_url, clock=clock) as store:
        storm = StormState.from_dict({"categories": store.storm_categories()})
        assert storm.braked() == ["runner_system_failure"]
        assert storm.categories["runner_system_failure"].probes_sent == 1
        assert store.followed_class_usage() == {("large", None, "g/p"): 1}
