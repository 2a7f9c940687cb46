"""Timeout resizes (the copy's `timeout:`), and what GitLab shows when a re-created copy fails."""

from __future__ import annotations

import json

import pytest

from retry_bot.gitlab.jobdef import JobDefinition
from retry_bot.gitlab.recreate import (ChildPipelineSpec, build_child_config, format_gitlab_duration,
                                       parse_gitlab_duration)
from tests.bot_live.farm import POLICY, Farm, cycle_until, make_bot

pytestmark = pytest.mark.slow  # end to end: outside the fast lane (pytest -m "not slow")

TIMEOUT_POLICY = POLICY + """
[families.timeout]
action = "resize"
budget = 3
backoff = { initial = "0s" }

[resize.time]
ratio = 2.0
min_bump = "10m"
max = "2h"
default = "1h"
"""


def _spec(**kw):
    base = dict(origin_job_id=1, origin_pipeline_id=2, failed_job_id=1, attempt=2, runner_class=None, tags=("small",))
    return ChildPipelineSpec(**{**base, **kw})


def test_the_decision_timeout_becomes_the_copy_timeout():
    defn = JobDefinition(name="slow", base_name="slow", body={"stage": "test", "script": ["make"], "timeout": "20m"})
    body = json.loads(build_child_config(defn, _spec(timeout_seconds=5400.0)))["slow"]
    assert body["timeout"] == "1h 30m"
    kept = json.loads(build_child_config(defn, _spec()))["slow"]
    assert kept["timeout"] == "20m"      # no timeout decision: the job's own timeout stays
    assert "timeout" not in json.loads(build_child_config(
        JobDefinition(name="j", base_name="j", body={"script": ["x"]}), _spec()))["j"]


@pytest.mark.parametrize("seconds,text", [(60, "1m"), (2400, "40m"), (4800, "1h 20m"), (3601, "1h 1s"),
                                          (7200, "2h"), (59.5, "1m")])
def test_gitlab_durations_round_trip(seconds, text):
    assert format_gitlab_duration(seconds) == text
    assert parse_gitlab_duration(text) == pytest.approx(-(-seconds // 1))


@pytest.mark.parametrize("text,seconds", [("90 minutes", 5400), ("3600", 3600), (1800, 1800), ("2 hours 5 min", 7500),
                                          ("1 day", 86400), ("abc", None), ("", None), ("10m junk", None),
                                          (None, None), (True, None), (0, None)])
def test_parse_gitlab_duration(text, seconds):
    assert parse_gitlab_duration(text) == seconds


def needs_time(minutes: int):
    """A build that needs ``minutes`` of job time: GitLab times it out (job_execution_timeout) below that."""
    def run(payload, v):
        timeout = payload["runner_info"]["timeout"]
        if timeout < minutes * 60:
            return {"status": "failed", "failure_reason": "job_execution_timeout", "exit_code": None,
                    "log": f"$ make check\nrunning 4000 tests\nERROR: Job failed: execution took longer than "
                           f"{timeout // 60}m0s seconds\n".encode()}
        return {"status": "success", "log": b"4000 tests passed\nJob succeeded\n"}
    return run


def test_a_job_that_keeps_timing_out_is_recreated_with_a_longer_timeout_each_time(tmp_path):
    """20m -> 40m (still too short: the copy's failure is seen and decided) -> 1h 20m, which succeeds.
    Each step re-creates the job (jobRetry cannot change `timeout:`), and the failed copy's
    child pipeline and bridge show the failure (the copy has allow_failure: false)."""
    farm = Farm({"check": needs_time(60)})
    bot = None
    try:
        farm.add_project("grp/t", {"check": {"stage": "test", "tags": ["small"], "script": ["make check"],
                                             "timeout": "20m"}})
        farm.standin.create_pipeline("grp/t")
        jobs = lambda: [j for j in farm.standin.jobs("grp/t") if j.name == "check"]  # noqa: E731
        assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in jobs()))
        bot = make_bot(farm, tmp_path, ["grp/t"], policy=TIMEOUT_POLICY)
        assert cycle_until(bot, lambda: any(j.status == "success" for j in jobs()), timeout=40), \
            [(j.id, j.status, j.spec.timeout) for j in jobs()]
        origin, *copies = jobs()
        assert [c.spec.timeout for c in copies] == ["40m", "1h 20m"]
        assert [c.spec.when for c in copies] == ["manual", "manual"]
        ran = [jid for jid, _name, _v in farm.runs]
        assert all(c.id in ran for c in copies)
        # what the runner was told: the job timeout GitLab enforces
        assert [farm.standin.job_payload(c.id)["runner_info"]["timeout"] for c in copies] == [2400, 4800]
        # the first copy failed: the poller saw it (scope=failed includes child pipelines) and decided it
        failed_copy = copies[0]
        assert failed_copy.status == "failed"
        rec = bot.store.get_job(failed_copy.id)
        assert rec is not None and rec.decided and rec.decision["action"] == "resize"
        assert rec.decision["timeout_seconds"] == 4800
        assert bot.store.origin_of(failed_copy.id) == origin.id
        # allow_failure: false -> the child pipeline and its strategy:depend bridge report the failure
        child = farm.standin.get_pipeline(failed_copy.pipeline_id)
        assert child.status == "failed"
        bridge = farm.standin.get_job(child.parent_bridge_id)
        assert bridge.status == "failed" and farm.standin.get_pipeline(bridge.pipeline_id).status == "failed"
        ok_child = farm.standin.get_pipeline(copies[1].pipeline_id)
        assert ok_child.status == "success"
    finally:
        if bot is not None:
            bot.close()
        farm.close()
