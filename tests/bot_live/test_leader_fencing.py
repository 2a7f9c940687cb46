"""Leader fencing across GitLab writes (docs/state.md, "Several replicas").

The state store fences its own writes by term, but GitLab knows nothing of
terms.  So the ActionRunner must (1) renew the lease with ``ensure_leader()``
right before each GitLab write, and (2) after an early takeover, not observe
GitLab for an inherited open intent before the old lease would have expired.
Both are checked against the real stand-in over HTTP and real stores.
"""

from __future__ import annotations

import pytest

from retry_bot.live.actions import ActionRequest, ActionRunner, ActionSettings
from retry_bot.gitlab.client import GitLabClient, RetrySettings
from standin.gitlab import StandIn
from retry_bot.state import LeadershipLost, open_store

pytestmark = pytest.mark.slow  # end to end: outside the fast lane (pytest -m "not slow")


class Clock:
    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def gitlab():
    s = StandIn(token="fence-token")
    s.start()
    s.add_project("grp/f", {"fetch": {"script": ["curl"], "tags": ["small"]}})
    s.create_pipeline("grp/f")
    job = s.next_pending_job(["small"], start=True)
    s.finish_job(job.id, "failed", failure_reason="script_failure", exit_code=6,
                 trace=b"curl: (6) Could not resolve host: mirror.example.org\n")
    yield s, s.get_job(job.id)
    s.stop()


def _runner(standin, store, clock, settle=5.0):
    client = GitLabClient(standin.url, standin.token, retry=RetrySettings(
        max_attempts=2, max_total_seconds=5, max_wait_seconds=0.1, request_timeout_seconds=5))
    return ActionRunner(client, store, clock=clock, settings=ActionSettings(settle_seconds=settle))


def _retry_request(job) -> ActionRequest:
    return ActionRequest(kind="retry", project_id=job.project_id, project_path="grp/f", job_id=job.id,
                         job_name=job.name, pipeline_id=job.pipeline_id, ref="main", origin_job_id=job.id,
                         attempt=2, family="infrastructure", category="dns")


def _retries(standin) -> list[int]:
    return [j.id for j in standin.jobs("grp/f") if j.retry_of is not None]


def test_a_deposed_leader_makes_no_gitlab_write_after_its_intent(gitlab, tmp_path):
    """A leader that paused between its intent and the write, and lost the lease meanwhile."""
    standin, job = gitlab
    clock = Clock()
    url = f"sqlite:///{tmp_path / 'state.sqlite3'}"
    a, b = open_store(url, clock=clock), open_store(url, clock=clock)
    try:
        assert a.try_acquire_leadership("a", 10)
        runner_a = _runner(standin, a, clock)
        intent = runner_a.start(_retry_request(job))          # committed while a still led
        clock.advance(11)                                      # a pauses past its lease...
        assert b.try_acquire_leadership("b", 10)               # ...and b takes over by expiry
        with pytest.raises(LeadershipLost):
            runner_a.drive(intent)                             # a wakes up: ensure_leader() stops it
        assert _retries(standin) == [], "a deposed replica retried the job on GitLab"
        assert not standin.calls_matching(method="POST")
        # the new leader finds the intent open and carries it out, once
        runner_b = _runner(standin, b, clock)
        clock.advance(6)                                       # past settle: nothing on GitLab -> b writes
        [out] = runner_b.resume_all()
        assert out.status == "done", out
        assert len(_retries(standin)) == 1
    finally:
        a.close()
        b.close()


def test_the_write_renews_the_lease_right_before_it(gitlab, tmp_path):
    """ensure_leader() renews: the write starts with a full ttl ahead of it."""
    standin, job = gitlab
    clock = Clock()
    store = open_store(f"sqlite:///{tmp_path / 'state.sqlite3'}", clock=clock)
    try:
        assert store.try_acquire_leadership("a", 10)
        runner = _runner(standin, store, clock)
        intent = runner.start(_retry_request(job))
        clock.advance(9)                                       # 1 s of lease left before the write
        out = runner.drive(intent)
        assert out.status == "done"
        assert store.lease()["expires_at"] == pytest.approx(clock.now + 10, abs=0.01)
    finally:
        store.close()


def test_after_an_early_takeover_an_inherited_intent_is_observed_only_once_the_old_lease_ran_out(gitlab, pg_url):
    """The old leader renewed its lease, started its write, then lost its database session (the
    advisory lock): the new leader takes over at once, but must not look at GitLab (and redo the
    write) while the old write may still land."""
    standin, job = gitlab
    clock = Clock()
    url = pg_url
    a, b = open_store(url, clock=clock), open_store(url, clock=clock)
    try:
        assert a.try_acquire_leadership("a", 10)
        intent = _runner(standin, a, clock).start(_retry_request(job))
        clock.advance(30)                                      # long past settle_seconds
        a.ensure_leader()                                      # a is about to write...
        a._b.leader_lock_release()                             # ...and is cut off from the database
        assert b.try_acquire_leadership("b", 10)               # early takeover (term 2)
        runner_b = _runner(standin, b, clock)
        standin.reset_calls()
        [out] = runner_b.resume_all()
        assert out.status == "waiting" and "lease" in out.detail, out
        assert not standin.calls, "the new leader read or wrote GitLab before the old lease ran out"
        standin.retry_job(intent.job_id)                       # a's write lands late, as it may
        clock.advance(5)
        [out] = runner_b.resume_all()
        assert out.status == "waiting" and not standin.calls
        clock.advance(5.5)                                     # the old lease has run out
        [out] = runner_b.resume_all()
        assert out.status == "done" and "found already done" in out.detail, out
        assert len(_retries(standin)) == 1, "the job was retried twice"
        assert not standin.calls_matching(method="POST", path_regex=r"/retry$"), "the new leader retried again"
    finally:
        a.close()
        b.close()
