"""Issue 15: writes with bounded concurrency, without losing exactly-once.

* unit: the action runner serializes the steps of one lineage (two writes for one job
  lineage never overlap), runs different lineages at once (at most ``write_concurrency``),
  and never drives again an intent another thread settled meanwhile;
* end to end: a burst of failed jobs against the stand-in (real HTTP, a slow GitLab so
  writes do overlap) is decided and acted on exactly once.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

from retry_bot.live.actions import ActionRequest, ActionRunner, ActionSettings
from standin.gitlab.faults import Fault
from retry_bot.state import open_store
from tests.bot_live.farm import Farm, make_bot


class SlowGitLab:
    """A fake GitLab client whose writes take ``delay`` seconds and record what overlapped."""

    def __init__(self, origin_of: dict[int, int], delay: float = 0.05) -> None:
        self.origin_of = origin_of
        self.delay = delay
        self.lock = threading.Lock()
        self.in_flight: collections.Counter[int] = collections.Counter()
        self.max_per_lineage: collections.Counter[int] = collections.Counter()
        self.total = 0
        self.max_total = 0
        self.writes: list[int] = []
        self.next_id = 90_000

    def _write(self, job_id: int) -> dict[str, Any]:
        lineage = self.origin_of[job_id]
        with self.lock:
            self.in_flight[lineage] += 1
            self.total += 1
            self.max_per_lineage[lineage] = max(self.max_per_lineage[lineage], self.in_flight[lineage])
            self.max_total = max(self.max_total, self.total)
        time.sleep(self.delay)
        with self.lock:
            self.in_flight[lineage] -= 1
            self.total -= 1
            self.writes.append(job_id)
            self.next_id += 1
            return {"id": self.next_id}

    def retry_job(self, project_id: int, job_id: int) -> dict[str, Any]:
        return self._write(job_id)

    def job_retry_with_variables(self, job_id: int, variables: Any) -> dict[str, Any]:
        return self._write(job_id)

    def job_details(self, project_path: str, job_id: int) -> dict[str, Any]:
        return {"retried": job_id in self.writes}

    def pipeline_jobs(self, project_id: int, pipeline_id: int, include_retried: bool = False) -> list:
        return []


def _req(kind: str, job_id: int, origin: int) -> ActionRequest:
    return ActionRequest(kind=kind, project_id=1, project_path="g/p", job_id=job_id, job_name=f"j{job_id}",
                         pipeline_id=1, ref="main", origin_job_id=origin, attempt=2, family="infrastructure",
                         category="runner_system_failure")


def test_two_writes_of_one_lineage_never_overlap_and_lineages_run_at_once(tmp_path):
    # 6 lineages, 3 writes each (the origin's retry and two jobRetry of later attempts)
    reqs = [_req("retry" if k == 0 else "job_retry", 1000 * o + k, 1000 * o) for o in range(1, 7) for k in range(3)]
    client = SlowGitLab({r.job_id: r.origin_job_id for r in reqs})
    store = open_store(f"sqlite:///{tmp_path}/s.db")
    runner = ActionRunner(client, store, settings=ActionSettings(write_concurrency=4))  # type: ignore[arg-type]
    try:
        futures = [runner.submit(runner.start(r)) for r in reqs]
        outcomes = [f.result(timeout=30) for f in futures]
        assert [o.status for o in outcomes] == ["done"] * len(reqs)
        assert sorted(client.writes) == sorted(r.job_id for r in reqs)          # each written once
        assert max(client.max_per_lineage.values()) == 1                         # one lineage: one at a time
        assert 1 < client.max_total <= 4                                         # concurrent, and bounded
    finally:
        runner.close()
        store.close()


def test_an_intent_driven_from_two_threads_is_written_once(tmp_path):
    """The due-time scheduler and a cycle (or a webhook) may drive the same intent: one write."""
    req = _req("retry", 7, 7)
    client = SlowGitLab({7: 7}, delay=0.2)
    store = open_store(f"sqlite:///{tmp_path}/s.db")
    runner = ActionRunner(client, store, settings=ActionSettings(settle_seconds=60.0))  # type: ignore[arg-type]
    try:
        intent = runner.start(req)                   # one copy of the begun intent, driven twice
        out: list[Any] = []
        threads = [threading.Thread(target=lambda: out.append(runner.drive(intent))) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert client.writes == [7], client.writes
        assert client.max_per_lineage[7] == 1
        assert sorted(o.status for o in out) == ["done", "done"]
        assert len([m for m in store.lineage_for(7).attempts if m.action == "retry"]) == 1
    finally:
        runner.close()
        store.close()


SYSTEM_FAILURE = {"status": "failed", "failure_reason": "runner_system_failure", "exit_code": 1,
                  "log": b"ERROR: Job failed (system failure): prepare environment: connection refused\n"}
BURST_POLICY = """
version = 1
[families.infrastructure]
action = "retry"
budget = 1
backoff = { initial = "0s" }
"""


def test_a_concurrent_burst_is_decided_and_acted_on_exactly_once(tmp_path):
    n = 24
    farm = Farm({f"j{i}": (lambda p, v: SYSTEM_FAILURE) for i in range(n)})
    bot = None
    try:
        farm.add_project("load/w", {f"j{i}": {"stage": "build", "tags": ["small"], "script": ["x"]}
                                    for i in range(n)})
        farm.standin.create_pipeline("load/w")
        assert farm.standin.wait_for(lambda: sum(j.status == "failed" for j in farm.standin.jobs()) == n, timeout=30)
        origins = sorted(j.id for j in farm.standin.jobs())
        farm.runner.stop()   # the retried jobs stay pending: nothing else fails meanwhile
        bot = make_bot(farm, tmp_path, ["load/w"], policy=BURST_POLICY)
        assert bot.actions.settings.write_concurrency == 4
        farm.standin.faults.add(Fault(kind="slow", delay=0.05))     # a slow GitLab: writes overlap
        farm.standin.reset_calls()
        report = bot.once()
        assert sorted(o.job_id for o in report.decided) == origins
        assert {o.acted for o in report.decided} == {"done"}
        retries = [c for c in farm.standin.calls_matching("POST", r"/jobs/\d+/retry$") if c.status == 201]
        per_job = collections.Counter(int(c.path.rsplit("/", 2)[-2]) for c in retries)
        assert sorted(per_job) == origins and set(per_job.values()) == {1}   # every job retried, once
        spans = sorted((c.started, c.started + c.duration) for c in retries)
        overlap = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
        assert 1 < overlap <= 4, overlap                                      # concurrent, bounded
        for jid in origins:                                                   # decided once, one intent
            assert len([e for e in bot.store.history(jid) if e["kind"] == "decided"]) == 1
            assert [a.status for a in bot.store.actions_for(jid)] == ["completed"]
        assert bot.store.followed_count() == n
        # another cycle changes nothing
        bot.once()
        assert len([c for c in farm.standin.calls_matching("POST", r"/jobs/\d+/retry$") if c.status == 201]) == n
    finally:
        if bot is not None:
            bot.close()
        farm.close()


def test_created_jobs_count_towards_the_class_caps_of_the_failed_jobs_user(tmp_path):
    """The per-user cap of a runner class counts the jobs the bot created for that user (they
    were filed under no user, so ``max_concurrent_per_user`` never held), writes in flight too."""
    from concurrent.futures import Future

    from retry_bot.live.poller import _WriteBatch
    from tests.bot_live.farm import make_bot

    farm = Farm({})
    bot = None
    try:
        farm.add_project("g/p", {"x": {"stage": "build", "script": ["x"]}})
        bot = make_bot(farm, tmp_path, ["g/p"])
        req = ActionRequest(kind="resize", project_id=1, project_path="g/p", job_id=10, job_name="x",
                            pipeline_id=1, ref="main", origin_job_id=10, attempt=2, runner_class="large",
                            user="alice")
        bot.poller._watch_new_job(req, 11)
        usage = bot.poller._class_usage()
        assert usage.user_count("large", "alice") == 1 and usage.project_count("large", "g/p") == 1
        # a write in flight for alice counts before its job exists
        batch = bot.poller._batch = _WriteBatch()
        batch.add(ActionRequest(**{**req.to_payload(), "job_id": 20, "origin_job_id": 20}), Future())
        assert bot.poller._class_usage().user_count("large", "alice") == 2
        bot.poller._batch = None
        assert ActionRequest.from_payload(req.to_payload()).user == "alice"
    finally:
        if bot is not None:
            bot.close()
        farm.close()
