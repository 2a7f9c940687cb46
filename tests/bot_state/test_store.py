"""The store contract, run against SQLite and a real PostgreSQL server (same tests for both)."""

from __future__ import annotations

import pytest

from retry_bot.model import Classification, Family, JobFacts
from retry_bot.state import (ActionFailed, LATEST_VERSION, StateError, perform_once,
                             resume_intent)
from retry_bot.state import store as store_module
from runner_wrapper.record import RecordError

from .records import make_record


def test_fresh_database_is_at_latest_schema_and_reopens_unchanged(open_at):
    s = open_at()
    assert (s.schema_version, s.migrated_from) == (LATEST_VERSION, 0)
    s.close()
    again = open_at()
    assert (again.schema_version, again.migrated_from) == (LATEST_VERSION, LATEST_VERSION)


def test_job_is_decided_exactly_once_and_survives_a_crash_before_the_decision(store):
    facts = JobFacts(job_id=10, name="compile", project_id=3, failure_reason="script_failure", exit_code=137,
                     tags=("docker",))
    cls = Classification(category="oom", family=Family.OOM, rule="usage-record", evidence=("peak 2Gi",))
    assert store.mark_job_seen(10, 3, facts, cls) is True
    # Seen but undecided (the bot died here): the job must be decided on the next pass.
    assert store.mark_job_seen(10, 3, facts, cls) is True
    assert store.record_decision(10, {"action": "resize", "reason": "oom"}) is True
    assert store.mark_job_seen(10, 3, facts, cls) is False
    assert store.record_decision(10, {"action": "none"}) is False
    job = store.get_job(10)
    assert job is not None and job.decided
    assert job.decision == {"action": "resize", "reason": "oom"}
    assert job.facts["tags"] == ["docker"] and job.facts["failure_reason"] == "script_failure"
    assert job.classification["family"] == "oom" and job.classification["evidence"] == ["peak 2Gi"]
    assert store.get_job(11) is None
    with pytest.raises(StateError, match="never marked seen"):
        store.record_decision(11, {"action": "none"})


def test_a_classification_with_or_without_a_probability_is_kept_and_read_back(store):
    rule = Classification(category="oom", family=Family.OOM, rule="usage-record")
    learned = Classification(category="learned_oom", family=Family.OOM, rule="learned:oom", confidence="weak",
                             probability=0.93)
    assert store.mark_job_seen(20, 3, {"job_id": 20}, rule) is True
    assert store.mark_job_seen(21, 3, {"job_id": 21}, learned) is True
    assert store.get_job(20).classification == rule.to_dict() and "probability" not in rule.to_dict()
    assert store.get_job(21).classification == learned.to_dict()
    assert store.get_job(21).classification["probability"] == 0.93
    store.add_lineage_member(20, 21, "resize", {}, None)
    assert [(m.family, m.category) for m in store.lineage_for(21).attempts] == [("oom", "oom"), ("oom", "learned_oom")]
    assert store.family_counts() == {"oom": 2}


def test_jobs_are_listed_in_pages(store, clock, monkeypatch):
    monkeypatch.setattr(store_module, "_PAGE", 2)
    for jid in (5, 3, 9, 7, 1):
        store.mark_job_seen(jid, 1, {"name": f"j{jid}"}, {"family": "oom"})
        clock.advance(1)
    store.record_decision(9, {"action": "none"})
    assert [j.job_id for j in store.jobs()] == [1, 3, 5, 7, 9]
    assert [j.classification["family"] for j in store.jobs()] == ["oom"] * 5
    assert [j.job_id for j in store.jobs(since=clock.now - 2)] == [1, 7]
    assert [j.decided for j in store.jobs()] == [False, False, False, False, True]


def test_lineage_orders_attempts_and_attaches_members_to_the_origin(store):
    store.mark_job_seen(100, 1, {"name": "build"}, {"family": "oom"})
    store.update_lineage_member(100, memory_limit_bytes=1 << 30, memory_peak_bytes=1 << 30, status="failed")
    m1 = store.add_lineage_member(100, 101, "resize", {"KUBERNETES_MEMORY_LIMIT": "2Gi"}, "medium",
                                  memory_limit_bytes=2 << 30)
    # The next attempt is created from the latest job; it still joins the origin's lineage.
    m2 = store.add_lineage_member(101, 102, "resize", {"KUBERNETES_MEMORY_LIMIT": "4Gi"}, "large",
                                  memory_limit_bytes=4 << 30)
    assert (m1.attempt, m2.attempt) == (1, 2) and m2.origin_job_id == 100
    assert store.add_lineage_member(100, 102, "resize", {}) == m2  # idempotent
    store.update_lineage_member(102, status="success", memory_peak_bytes=3 << 30)
    lin = store.lineage_for(102)
    assert lin.origin_job_id == 100 and lin.job_ids == (100, 101, 102)
    assert [m.action for m in lin.attempts] == ["origin", "resize", "resize"]
    assert lin.attempts[0].memory_peak_bytes == 1 << 30 and lin.attempts[0].status == "failed"
    assert lin.latest.variables == {"KUBERNETES_MEMORY_LIMIT": "4Gi"} and lin.latest.runner_class == "large"
    assert lin.latest.status == "success" and lin.latest.memory_peak_bytes == 3 << 30
    assert lin.recreations == 2 and lin.count("resize") == 2
    assert store.origin_of(102) == store.origin_of(100) == 100 and store.origin_of(555) == 555
    alone = store.lineage_for(555)
    assert alone.job_ids == (555,) and alone.recreations == 0
    store.add_lineage_member(200, 201, "retry", {})
    with pytest.raises(StateError, match="already belongs to the lineage of job 100"):
        store.add_lineage_member(200, 102, "retry", {})


def test_intent_is_created_once_per_key_and_settles_once(store):
    a = store.begin_action("resize:1:1", 1, "resize", {"memory": "2Gi"})
    assert a.created and a.status == "begun" and a.attempts == 1
    b = store.begin_action("resize:1:1", 1, "resize", {"memory": "2Gi"})
    assert not b.created and b.intent_id == a.intent_id and b.status == "begun"
    assert [i.intent_id for i in store.open_intents()] == [a.intent_id]
    with pytest.raises(StateError, match="keys must be unique"):
        store.begin_action("resize:1:1", 2, "retry", {})
    done = store.complete_action(a.intent_id, {"pipeline_id": 77})
    assert done.status == "completed" and done.result == {"pipeline_id": 77}
    assert store.complete_action(a.intent_id, {"pipeline_id": 77}).status == "completed"  # idempotent
    with pytest.raises(StateError, match="already completed"):
        store.fail_action(a.intent_id, "late failure", retryable=False)
    settled = store.begin_action("resize:1:1", 1, "resize", {})
    assert not settled.created and settled.status == "completed"
    assert store.open_intents() == []
    with pytest.raises(StateError, match="no action intent 999"):
        store.complete_action(999, {})
    assert store.get_action("resize:1:1").result == {"pipeline_id": 77}
    assert store.get_action("nope") is None


def test_retryable_failure_is_reopened_and_final_failure_is_not(store):
    a = store.begin_action("retry:5", 5, "retry", {})
    f = store.fail_action(a.intent_id, "HTTP 409 pipeline is being created", retryable=True)
    assert f.status == "failed" and f.retryable
    again = store.begin_action("retry:5", 5, "retry", {"second": True})
    assert again.created and again.status == "begun" and again.attempts == 2
    assert again.intent_id == a.intent_id and again.payload == {"second": True}
    store.fail_action(again.intent_id, "403 forbidden", retryable=False)
    final = store.begin_action("retry:5", 5, "retry", {})
    assert not final.created and final.status == "failed" and final.error == "403 forbidden"
    with pytest.raises(StateError, match="already failed"):
        store.complete_action(a.intent_id, {})
    assert [x.intent_id for x in store.actions_for(5)] == [a.intent_id]


def test_perform_once_observes_gitlab_before_redoing_an_open_intent(store):
    gitlab: list[str] = []
    calls = {"perform": 0, "observe": 0}

    def perform(intent):
        calls["perform"] += 1
        gitlab.append(intent.idempotency_key)
        return {"job": len(gitlab)}

    def observe(intent):
        calls["observe"] += 1
        return {"job": gitlab.index(intent.idempotency_key) + 1} if intent.idempotency_key in gitlab else None

    r = perform_once(store, "k1", 1, "retry", {}, perform=perform, observe=observe)
    assert r.status == "completed" and calls == {"perform": 1, "observe": 0}
    assert perform_once(store, "k1", 1, "retry", {}, perform=perform, observe=observe).status == "completed"
    assert calls == {"perform": 1, "observe": 0}
    # Crash after the GitLab write, before completion: observing finds it, nothing is redone.
    open_ = store.begin_action("k2", 2, "retry", {})
    gitlab.append("k2")
    r2 = resume_intent(store, store.open_intents()[0], perform, observe)
    assert r2.intent_id == open_.intent_id and r2.result == {"job": 2} and calls["perform"] == 1
    # Crash before the write: observing finds nothing, so it is done now, once.
    store.begin_action("k3", 3, "retry", {})
    r3 = resume_intent(store, store.open_intents()[0], perform, observe)
    assert r3.status == "completed" and gitlab == ["k1", "k2", "k3"]

    def refuse(intent):
        raise ActionFailed("Unplayable Job", retryable=False)

    r4 = perform_once(store, "k4", 4, "play", {}, perform=refuse, observe=observe)
    assert r4.status == "failed" and r4.error == "Unplayable Job" and not r4.retryable

    def boom(intent):
        raise TimeoutError("read timed out")

    with pytest.raises(TimeoutError):
        perform_once(store, "k5", 5, "play", {}, perform=boom, observe=observe)
    assert [i.idempotency_key for i in store.open_intents()] == ["k5"]  # unknown outcome stays open


def test_usage_records_are_ingested_once_and_filtered(store, monkeypatch):
    r1 = make_record(1, finished_at="2026-01-01T00:00:00Z")
    assert store.add_usage_record(r1, "spool:a.jsonl") is True
    assert store.add_usage_record(r1, "spool:a.jsonl") is False
    # Same run from a trace marker that dropped per-stage figures: another signature, same run.
    marker = make_record(1, finished_at="2026-01-01T00:00:00Z", signed=False)
    marker["stages_truncated"] = True
    assert store.add_usage_record(marker, "trace") is False
    store.add_usage_record(make_record(2, protected=False, finished_at="2026-01-02T00:00:00Z"), "collector")
    store.add_usage_record(make_record(3, oom_kills=1, exit_code=137, peak=512 << 20,
                                       finished_at="2026-01-03T00:00:00Z"), "collector")
    store.add_usage_record(make_record(4, exit_code=1, finished_at="2026-01-03T00:00:00Z"), "collector")
    rows = list(store.usage_records())
    assert [r["job_id"] for r in rows] == [1, 2, 3, 4]
    first = rows[0]
    assert first["job_name"] == "build" and first["project_id"] == 7 and first["ref"] == "main"
    assert first["protected"] is True and first["trusted"] is True and first["oom_killed"] is False
    assert first["memory_peak_bytes"] == 300 << 20 and first["memory_limit_bytes"] == 512 << 20
    assert first["cpu_seconds"] == pytest.approx(55.0) and first["wall_seconds"] == pytest.approx(60.0)
    assert first["key_fields"] == {"SPACK_JOB_SPEC_PKG_NAME": "zlib"}
    assert first["record"] == r1 and first["source"] == "spool:a.jsonl"
    # Trusted: protected and (successful or OOM-killed); a PR build or a failed build is not.
    assert [r["job_id"] for r in store.usage_records(trusted_only=True)] == [1, 3]
    assert rows[2]["oom_killed"] is True
    assert [r["job_id"] for r in store.usage_records(since="2026-01-02T00:00:00Z")] == [2, 3, 4]
    assert [r["job_id"] for r in store.usage_records(job_name="nope")] == []
    assert store.add_usage_record(make_record(2, protected=False, finished_at="2026-01-02T00:00:00Z"), "x",
                                  trusted=True) is False
    monkeypatch.setattr(store_module, "_PAGE", 1)  # keyset paging over equal finished_at values
    assert [r["job_id"] for r in store.usage_records()] == [1, 2, 3, 4]
    with pytest.raises(RecordError):
        store.add_usage_record({"schema": "nope"}, "collector")


def test_a_spool_file_is_ingested_in_batches_once(store, monkeypatch):
    monkeypatch.setattr(store_module, "_PAGE", 4)
    # job ids from 1: GitLab's start there, and the schema (and so from_dict) refuses id 0
    spool = [make_record(i, finished_at=f"2026-01-01T00:00:{i:02d}Z") for i in range(1, 11)]
    assert store.add_usage_records(spool, "spool:a.jsonl") == 10
    assert store.add_usage_records(spool + [make_record(99)], "spool:b.jsonl") == 1
    with pytest.raises(RecordError, match="record 1: "):
        store.add_usage_records([make_record(100), {"schema": "x"}], "spool:c.jsonl")
    assert store.stats()["usage_records"] == 11  # nothing of the bad file was stored


def test_rejected_records_are_counted_by_source_and_reason(store):
    store.count_rejected("collector", "bad signature")
    store.count_rejected("collector", "bad signature")
    store.count_rejected("spool:x", "malformed")
    assert store.rejected_counts() == {("collector", "bad signature"): 2, ("spool:x", "malformed"): 1}
    assert store.stats()["rejected_records"] == 3


def test_watermarks_round_trip(store):
    assert store.get_watermark("project:1") is None
    store.set_watermark("project:1", {"updated_after": "2026-01-01T00:00:00Z", "job_id": 5})
    store.set_watermark("project:1", {"updated_after": "2026-01-02T00:00:00Z", "job_id": 9})
    store.set_watermark("project:2", {"job_id": 1})
    assert store.get_watermark("project:1") == {"updated_after": "2026-01-02T00:00:00Z", "job_id": 9}


def test_history_tells_the_whole_lineage_in_order(store, clock):
    store.mark_job_seen(1, 9, {"name": "build", "failure_reason": "script_failure"}, {"family": "oom"})
    clock.advance(1)
    store.record_decision(1, {"action": "resize"})
    i = store.begin_action("resize:1:1", 1, "resize", {"memory": "2Gi"})
    store.add_lineage_member(1, 2, "resize", {"KUBERNETES_MEMORY_LIMIT": "2Gi"}, "medium")
    store.complete_action(i.intent_id, {"job_id": 2})
    clock.advance(1)
    store.mark_job_seen(2, 9, {"name": "build"}, {"family": "oom"})
    store.record_decision(2, {"action": "none", "reason": "budget"})
    store.mark_job_seen(50, 9, {"name": "other"}, {"family": "unknown"})
    expected = ["seen", "classified", "decided", "action_begun", "lineage_member", "action_completed",
                "seen", "classified", "decided"]
    for jid in (1, 2):
        h = store.history(jid)
        assert [e["kind"] for e in h] == expected
        assert [e["at"] for e in h] == sorted(e["at"] for e in h)
    h = store.history(2)
    assert h[0]["data"]["failure_reason"] == "script_failure" and h[-1]["data"]["reason"] == "budget"
    assert [e["kind"] for e in store.history(50)] == ["seen", "classified"]
    assert store.history(12345) == []


def test_data_survives_reopening(open_at):
    s = open_at()
    s.mark_job_seen(1, 1, {}, {})
    s.begin_action("k", 1, "retry", {})
    s.close()
    s2 = open_at()
    assert s2.get_job(1) is not None and [i.idempotency_key for i in s2.open_intents()] == ["k"]


def test_schema_newer_than_the_code_is_refused(open_at, store_url, backend):
    s = open_at()
    s.mark_job_seen(1, 1, {}, {})
    s.close()
    if backend == "sqlite":
        import sqlite3
        conn = sqlite3.connect(store_url[len("sqlite://"):])
        conn.execute(f"PRAGMA user_version = {LATEST_VERSION + 5}")
        conn.close()
    else:
        import psycopg
        with psycopg.connect(store_url, autocommit=True) as conn:
            conn.execute("INSERT INTO schema_version (version, description) VALUES (%s, 'from the future')",
                         (LATEST_VERSION + 5,))
    with pytest.raises(StateError, match=f"schema version {LATEST_VERSION + 5}, newer than this retry-bot") as e:
        open_at()
    assert "never downgrades" in str(e.value) and not e.value.retryable


def test_an_older_schema_is_migrated_in_place_keeping_its_data(open_at, monkeypatch, backend, store_url):
    monkeypatch.setattr(store_module, "MIGRATIONS", store_module.MIGRATIONS[:1])
    monkeypatch.setattr(store_module, "LATEST_VERSION", 1)
    old = open_at()
    assert old.schema_version == 1
    old.mark_job_seen(1, 1, {"name": "old"}, {"family": "oom"})
    old.begin_action("k", 1, "retry", {})
    old.close()
    monkeypatch.undo()
    check = open_at(migrate=False)
    assert check.schema_version == 1 and check.needs_migration
    with pytest.raises(StateError, match="run 'retry-bot state migrate"):
        check.get_job(1)
    check.close()
    new = open_at()
    assert (new.migrated_from, new.schema_version) == (1, LATEST_VERSION)
    assert new.get_job(1).facts == {"name": "old"} and new.open_intents()[0].idempotency_key == "k"
    assert new.add_usage_record(make_record(1), "collector")  # tables of later steps exist
    if backend == "sqlite":
        import os
        assert os.path.exists(store_url[len("sqlite://"):] + ".v1.bak")


def test_bad_arguments_get_clear_errors(store):
    with pytest.raises(ValueError, match="job_id must be a non-negative integer"):
        store.mark_job_seen("12", 1, {}, {})
    with pytest.raises(ValueError, match="idempotency_key must be a non-empty string"):
        store.begin_action("", 1, "retry", {})
    with pytest.raises(ValueError, match="payload must be plain JSON"):
        store.begin_action("k", 1, "retry", {"x": object()})
    with pytest.raises(ValueError, match="ttl_seconds must be a positive number"):
        store.try_acquire_leadership("a", 0)


def test_threads_sharing_one_store_create_each_intent_once(store):
    import threading

    created: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        for i in range(20):
            intent = store.begin_action(f"t:{i}", i, "retry", {})
            if intent.created:
                with lock:
                    created.append(intent.idempotency_key)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(created) == sorted(f"t:{i}" for i in range(20))


def test_family_counts_summarises_classifications(store):
    store.mark_job_seen(1, 7, {"job_id": 1}, {"family": "oom", "category": "oom"})
    store.mark_job_seen(2, 7, {"job_id": 2}, {"family": "oom", "category": "killed"})
    store.mark_job_seen(3, 7, {"job_id": 3}, {"family": "build_error", "category": "compile_error"})
    assert store.family_counts() == {"oom": 2, "build_error": 1}


def test_lineage_for_carries_what_decide_needs_in_one_statement(store):
    """Issue 14: classification, finished_at and the timeout in force come with the lineage, no lookups per job."""
    from retry_bot.model import JobFacts

    store.mark_job_seen(300, 1, JobFacts(job_id=300, name="build", finished_at="2026-01-01T00:00:00Z").to_dict(),
                        {"family": "timeout", "category": "execution_timeout"})
    store.record_decision(300, {"action": "resize", "timeout_seconds": 7200.0})
    store.add_lineage_member(300, 301, "resize", {}, "large")
    store.mark_job_seen(301, 1, {"job_id": 301, "name": "build", "finished_at": "2026-01-01T03:00:00Z"},
                        {"family": "oom", "category": "oom"})
    store.record_decision(301, {"action": "resize"})          # sets no timeout: 7200 stays in force
    store.add_lineage_member(300, 302, "resize", {}, "large")  # not seen failing yet
    statements = []
    real_run = store._b.run

    def counting_run(fn, write):
        def counted(tx):
            real_execute = tx.execute

            def execute(sql, params=()):
                statements.append(sql)
                return real_execute(sql, params)
            tx.execute = execute
            return fn(tx)
        return real_run(counted, write=write)

    store._b.run = counting_run
    try:
        lin = store.lineage_for(302)
    finally:
        store._b.run = real_run
    assert len(statements) == 2, statements   # the origin, then the lineage with its jobs: not one per job
    assert [(a.job_id, a.family, a.category) for a in lin.attempts] == [
        (300, "timeout", "execution_timeout"), (301, "oom", "oom"), (302, None, None)]
    assert [a.finished_at for a in lin.attempts] == ["2026-01-01T00:00:00Z", "2026-01-01T03:00:00Z", None]
    assert [a.timeout_seconds for a in lin.attempts] == [None, 7200.0, 7200.0]
    assert [a.attempt for a in lin.attempts] == [0, 1, 2] and lin.attempts[1].runner_class == "large"
