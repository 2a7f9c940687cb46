"""Issue 15, part B: a write GitLab refused with 429 is kept, not failed; requests are paced under a budget.

Simulated-clock tests of :class:`RequestPacer`, the client's answer to a write that met
only 429s, and the real bot against the stand-in: 30% of all calls answered 429 (every
job decided, no action lost, nothing doubled) and a real sliding-window limit (the bot
stays under its budget, GitLab never has to answer 429).
"""

from __future__ import annotations

import collections

import pytest

from retry_bot.gitlab.client import GitLabClient, RetrySettings, WriteNotSent, WriteRejected
from retry_bot.gitlab.pacing import RequestPacer
from standin.gitlab import Fault
from tests.bot_live.farm import (Farm, compile_error, cycle_until, fail_five_jobs_in_two_projects, flaky_dns,
                                 make_bot, needs_memory)
from tests.bot_live.scripted_http import Scripted

pytestmark = pytest.mark.slow  # end to end: outside the fast lane (pytest -m "not slow")


class SimClock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def _peak(times: list[float], window: float) -> int:
    """The most requests in any window of ``window`` seconds."""
    best, lo = 0, 0
    for hi, t in enumerate(times):
        while times[lo] <= t - window:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


# ------------------------------------------------------------------------ the pacer, simulated clock


def test_pacer_keeps_every_minute_under_the_budget_and_uses_it():
    clock = SimClock()
    pacer = RequestPacer(2000, clock=clock, wall=clock)
    sent = []
    for _ in range(10_000):
        pacer.acquire("GET /projects/:id/jobs", sleep=clock.sleep)
        sent.append(clock())
    assert _peak(sent, 60.0) <= 2000
    minutes = (sent[-1] - sent[0]) / 60
    assert 10_000 / minutes > 0.9 * 2000, "the budget must be used, not just respected"
    # the first burst goes out at once (no wait for the first bucketful)
    assert sent[pacer.burst - 1] == sent[0]


def test_pacer_obeys_ratelimit_remaining_until_reset():
    clock = SimClock()
    pacer = RequestPacer(None, clock=clock, wall=clock)
    pacer.observe({"RateLimit-Limit": "600", "RateLimit-Remaining": "3", "RateLimit-Reset": str(int(clock()) + 30)})
    sent = []
    for _ in range(2000):
        pacer.acquire("GET /x", sleep=clock.sleep)
        sent.append(clock() - 1000.0)
    assert sent[:3] == [0.0, 0.0, 0.0]
    assert sent[3] >= 30.0, sent[:5]      # GitLab said 3 were left until the reset
    # RateLimit-Limit lowers the pace to GitLab's 600/min even without a budget of ours
    assert _peak(sent[3:], 60.0) <= 600


def test_a_429_holds_only_its_endpoint():
    clock = SimClock()
    pacer = RequestPacer(None, clock=clock, wall=clock)
    pacer.observe({"Retry-After": "20"}, key="GET /projects/:id/jobs", status=429, hint=20.0)
    assert pacer.reserve("GET /projects/:id/jobs/:id/trace") == 0.0      # other calls go on
    assert pacer.reserve("POST /projects/:id/jobs/:id/retry") == 0.0
    assert pacer.reserve("GET /projects/:id/jobs") == pytest.approx(20.0)
    pacer.observe({}, key="POST /projects/:id/jobs/:id/play", status=429, hint=20.0)
    assert pacer.acquire("POST /projects/:id/jobs/:id/play", sleep=clock.sleep, max_wait=5.0) < 0  # a write defers
    clock.sleep(20.0)
    assert pacer.reserve("GET /projects/:id/jobs") == 0.0


# ------------------------------------------------------------------------ the client


@pytest.fixture()
def srv():
    s = Scripted()
    yield s
    s.close()


def test_a_write_that_met_only_429s_is_not_sent_not_rejected(srv):
    srv.default = (429, {"Retry-After": "1"}, {"message": "429 Too Many Requests"})
    c = GitLabClient(srv.url, "glpat-x", retry=RetrySettings(max_attempts=3, backoff_base_seconds=0.01),
                     sleep=lambda s: None)
    with pytest.raises(WriteNotSent) as err:
        c.retry_job(1, 5)
    assert not isinstance(err.value, WriteRejected)
    assert err.value.retry_after == 1.0 and len(srv.requests) == 3


def test_a_definite_refusal_is_still_rejected(srv):
    srv.answers = [(403, {}, {"message": "403 Forbidden"})]
    c = GitLabClient(srv.url, "glpat-x", retry=RetrySettings(max_attempts=3), sleep=lambda s: None)
    with pytest.raises(WriteRejected, match="403"):
        c.retry_job(1, 5)


def test_a_408_write_is_ambiguous_not_refused(srv):
    """408: the request may have been processed; only other 4xx are definite refusals."""
    from retry_bot.gitlab.client import AmbiguousWrite

    srv.answers = [(408, {}, {"message": "408 Request Timeout"})]
    c = GitLabClient(srv.url, "glpat-x", retry=RetrySettings(max_attempts=3), sleep=lambda s: None)
    with pytest.raises(AmbiguousWrite):
        c.retry_job(1, 5)
    assert len(srv.requests) == 1


def test_a_write_held_long_by_a_429_is_deferred_without_being_sent(srv):
    srv.answers = [(429, {"Retry-After": "50"}, {}), (200, {}, {"id": 1})]
    c = GitLabClient(srv.url, "glpat-x", retry=RetrySettings(max_attempts=3, max_wait_seconds=60),
                     sleep=lambda s: None)
    with pytest.raises(WriteNotSent) as err:
        c.play_job(1, 5, {})   # not retried in line: 50 s would stall the whole bot
    assert err.value.retry_after == 50.0
    # the same endpoint is held: the next write is deferred without a request; reads go on
    with pytest.raises(WriteNotSent, match="wait"):
        c.play_job(1, 6, {})
    assert len(srv.requests) == 1
    assert c.get_job(1, 6) == {"id": 1} and len(srv.requests) == 2


# ------------------------------------------------------------------------ the bot against the stand-in


def _by_name(farm, project, name):
    return [j for j in farm.standin.jobs(project) if j.name == name]


def test_30_percent_429s_on_every_call_every_job_decided_no_action_lost(tmp_path):
    from retry_bot.live.actions import ActionSettings

    farm = Farm({"oom": needs_memory(300), "dns": flaky_dns(1), "compile": compile_error,
                 "oom2": needs_memory(700), "dns2": flaky_dns(1)})
    bot = None
    try:
        fail_five_jobs_in_two_projects(farm)
        f = farm.standin.faults
        f.reseed(15)
        # Every write's first attempts are refused, as often as the client tries (3): before the fix
        # each of these writes was "failed for good" though GitLab did nothing.  Two writes of each
        # kind (2 x 3 refusals), which may be in flight at once ([poll] write_concurrency).
        for path in (r"/jobs/\d+/retry$", r"/pipeline$", r"/jobs/\d+/play$"):
            f.add(Fault("rate_limit", method="POST", path=path, plan=[True] * 6, retry_after=0))
        f.add(Fault("rate_limit", probability=0.30, retry_after=0))
        bot = make_bot(farm, tmp_path, ["grp/a", "grp/b"], settle=3.0, timeout=2.0, attempts=3)
        bot.actions.settings = ActionSettings(settle_seconds=3.0, child_timeout_seconds=60,
                                              refused_backoff_seconds=0.2, refused_backoff_max_seconds=1.0)

        def done():
            return (all(any(j.status == "success" for j in _by_name(farm, p, n))
                        for p, n in (("grp/a", "oom"), ("grp/b", "oom2"), ("grp/a", "dns"), ("grp/b", "dns2")))
                    and not bot.store.open_intents()
                    and all(bot.store.get_job(j.id) is not None and bot.store.get_job(j.id).decided
                            for j in farm.standin.jobs() if j.status == "failed" and not j.spec.is_bridge))
        assert cycle_until(bot, done, timeout=120, pause=0.1), [(j.id, j.name, j.status) for j in farm.standin.jobs()]
        calls = farm.standin.calls
        limited = sum(1 for c in calls if c.status == 429)
        assert limited / len(calls) > 0.2, (limited, len(calls))
        assert bot.metrics.writes_deferred.labels("retry")._value.get() >= 1
        # no action lost: none failed, and nothing was done twice
        failed = [a for j in farm.standin.jobs() for a in bot.store.actions_for(j.id) if a.status == "failed"]
        assert failed == [], [(a.idempotency_key, a.error) for a in failed]
        retries = collections.Counter(j.retry_of for j in farm.standin.jobs() if j.retry_of is not None)
        assert all(n == 1 for n in retries.values()), retries
        created = collections.Counter(farm.standin.pipeline_variables(p.id).get("RETRY_BOT_FAILED_JOB_ID")
                                      for p in farm.standin.pipelines())
        created.pop(None, None)
        assert len(created) == 2 and all(n == 1 for n in created.values()), created
        for j in farm.standin.jobs():
            if j.status == "failed" and not j.spec.is_bridge:
                decided = [e for e in bot.store.history(j.id) if e["kind"] == "decided" and e["job_id"] == j.id]
                assert len(decided) == 1, (j.id, j.name, decided)
    finally:
        if bot is not None:
            bot.close()
        farm.close()


def test_against_a_real_limit_the_bot_stays_under_its_budget(tmp_path):
    """The stand-in enforces 15 requests per 6 s (a real sliding window); the bot's budget is
    12 per 6 s (the minute scaled down so the test is short).  Unpaced, the same load runs
    into the limit within the first seconds."""
    jobs = {f"c{i}": {"stage": "build", "tags": ["small"], "script": ["make"]} for i in range(6)}
    farm = Farm({f"c{i}": compile_error for i in range(6)})
    bot = None
    try:
        for p in ("grp/p1", "grp/p2", "grp/p3"):
            farm.add_project(p, jobs)
            farm.standin.create_pipeline(p)
        assert farm.standin.wait_for(lambda: sum(j.status == "failed" for j in farm.standin.jobs()) == 18,
                                     timeout=30)
        bot = make_bot(farm, tmp_path, ["grp/p1", "grp/p2", "grp/p3"], timeout=5.0, attempts=3)
        bot.client.pacer = RequestPacer(12, period=6.0)
        farm.standin.reset_calls()
        limit = farm.standin.faults.add_rate_limit(15, period=6.0)

        def all_decided():
            return all(bot.store.get_job(j.id) is not None and bot.store.get_job(j.id).decided
                       for j in farm.standin.jobs() if j.status == "failed")
        assert cycle_until(bot, all_decided, timeout=90, pause=0.05)
        times = sorted(c.started for c in farm.standin.calls)
        assert len(times) >= 3 * 12, "the load must be several windows' worth"
        assert _peak(times, 6.0) <= 12, _peak(times, 6.0)
        assert limit.limited == 0, f"GitLab had to refuse {limit.limited} requests"
    finally:
        if bot is not None:
            bot.close()
        farm.close()


# ------------------------------------------------------------------------ the action runner, simulated clock


class _RefusingClient:
    """retry_job answers WriteNotSent ``refusals`` times, then creates job 501; records the call order."""

    def __init__(self, refusals: int, retry_after: float | None = None):
        self.refusals = refusals
        self.retry_after = retry_after
        self.calls: list[str] = []

    def retry_job(self, project, job_id):
        self.calls.append("retry")
        if self.refusals > 0:
            self.refusals -= 1
            raise WriteNotSent("429 Too Many Requests", status=429, what="retry", retry_after=self.retry_after)
        return {"id": 501}

    def job_details(self, path, job_id):
        self.calls.append("read")
        return {"retried": False}

    def pipeline_jobs(self, *a, **k):
        self.calls.append("read")
        return []


def test_a_refused_write_keeps_its_intent_backs_off_and_reads_gitlab_before_the_repeat(tmp_path):
    from retry_bot.live.actions import ActionRequest, ActionRunner, ActionSettings
    from retry_bot.state import open_store

    clock = SimClock(5000.0)
    store = open_store(f"sqlite:///{tmp_path / 's.db'}", clock=clock)
    client = _RefusingClient(2, retry_after=40.0)
    runner = ActionRunner(client, store, clock=clock, settings=ActionSettings(
        settle_seconds=75.0, refused_backoff_seconds=15.0, refused_backoff_max_seconds=600.0))
    req = ActionRequest(kind="retry", project_id=1, project_path="g/p", job_id=500, job_name="build",
                        pipeline_id=9, ref="main", origin_job_id=500, attempt=2)
    intent = runner.start(req)
    out = runner.drive(intent)
    assert out.status == "waiting" and client.calls == ["retry"]
    assert store.get_action(req.key).status == "begun"           # kept, not failed
    clock.sleep(39.0)
    assert [o.status for o in runner.resume_all()] == ["waiting"] and client.calls == ["retry"]  # Retry-After: 40 s
    clock.sleep(2.0)
    runner.resume_all()
    assert client.calls == ["retry", "read", "retry"]           # GitLab's state read before the repeat
    clock.sleep(39.0)                                            # second refusal: 2 x 15 s = 30 s < Retry-After 40 s
    assert runner.resume_all()[0].status == "waiting" and client.calls.count("retry") == 2
    clock.sleep(2.0)
    outs = runner.resume_all()
    assert outs[0].status == "done" and outs[0].new_job_id == 501
    assert client.calls == ["retry", "read", "retry", "read", "retry"]
    assert store.get_action(req.key).status == "completed"
    store.close()
