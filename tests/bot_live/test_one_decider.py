"""decide() is the only decider (issue 14), seen from the live bot against the stand-in over HTTP.

The cases where the poller's own copy of a rule was wrong before the gates moved into
decide():

1. a gate the poller applied after decide() (already retried, merge-request pipeline)
   turned the acting decision into ``none`` but kept its attempt, memory and runner
   class: the stored ``none`` said "attempt 2, 384Mi on class medium" for a job nothing
   was done to.  Now it is a plain none: the failed job's own attempt, no figures;
2. the poller put ``KUBERNETES_MEMORY_LIMIT`` into the lineage as the limit in force
   whatever ``[variables] memory_limit`` named, so a policy with its own variable
   resized from the wrong figure (here: 128Mi instead of the job's 384Mi, "raising"
   the limit to what it already was).  decide() reads the variable the policy names.
"""

from __future__ import annotations

import pytest

from runner_wrapper.quantity import parse_memory
from tests.bot_live.farm import POLICY, Farm, make_bot, needs_memory

MiB = 2**20


def killed_without_record(payload, v) -> dict:
    """An OOM kill on a runner without the wrapper (e.g. Kubernetes): exit 137, no usage record."""
    return {"status": "failed", "failure_reason": "script_failure", "exit_code": 137,
            "log": b"$ make\nKilled\nERROR: Job failed: exit code 137\n"}


@pytest.fixture()
def farm():
    f = Farm({"build": needs_memory(300), "k8s": killed_without_record})
    yield f
    f.close()


def _plain_none(dec: dict) -> None:
    assert dec["action"] == "none"
    assert dec["attempt"] == 1, dec               # the failed job's own attempt: nothing was created
    assert dec["variables"] == {} and dec["memory_limit_bytes"] is None and dec["memory_request_bytes"] is None
    assert dec["runner_class"] == "small", dec     # where the job ran, not where a copy would have gone


def test_an_already_retried_job_gets_a_plain_none(farm, tmp_path):
    farm.add_project("grp/r", {"build": {"stage": "build", "tags": ["small"], "script": ["make"],
                                         "variables": {"KUBERNETES_MEMORY_LIMIT": "128Mi"}}})
    farm.standin.create_pipeline("grp/r")
    assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in farm.standin.jobs("grp/r")))
    origin = farm.standin.jobs("grp/r")[0]
    farm.standin.retry_job(origin.id)              # a person pressed "retry"
    assert farm.standin.wait_for(lambda: sum(j.status == "failed" for j in farm.standin.jobs("grp/r")) == 2)
    bot = make_bot(farm, tmp_path, ["grp/r"])
    try:
        bot.once()
        dec = bot.store.get_job(origin.id).decision
        assert dec["rule"] == "already_retried", dec
        _plain_none(dec)
    finally:
        bot.close()


def test_a_merge_request_pipeline_gets_a_plain_none(farm, tmp_path):
    farm.add_project("grp/m", {"build": {"stage": "build", "tags": ["small"], "script": ["make"],
                                         "variables": {"KUBERNETES_MEMORY_LIMIT": "128Mi"}}})
    proj = farm.standin.state.project("grp/m")
    farm.standin.state.create_pipeline("grp/m", "refs/merge-requests/7/head", source="merge_request_event",
                                       sha=proj.refs["main"])
    assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in farm.standin.jobs("grp/m")))
    bot = make_bot(farm, tmp_path, ["grp/m"])
    try:
        [out] = bot.once().decided
        dec = bot.store.get_job(out.job_id).decision
        assert dec["rule"] == "merge_request_pipeline" and "re-create with" in dec["reason"], dec
        _plain_none(dec)
    finally:
        bot.close()


def test_the_limit_in_force_is_the_variable_the_policy_names(farm, tmp_path):
    policy = POLICY.replace('max_attempts = 6\n', 'max_attempts = 6\n\n[variables]\nmemory_limit = "BUILD_MEM"\n'
                            'memory_request = ""\n', 1)
    farm.add_project("grp/k", {"k8s": {"stage": "build", "tags": ["small"], "script": ["make"],
                                       "variables": {"KUBERNETES_MEMORY_LIMIT": "128Mi", "BUILD_MEM": "384Mi"}}})
    farm.standin.create_pipeline("grp/k")
    assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in farm.standin.jobs("grp/k")))
    bot = make_bot(farm, tmp_path, ["grp/k"], policy=policy, dry_run=True)
    try:
        [out] = bot.once().decided
        assert out.action == "resize", out.reason
        assert "384.0 MiB limit (job variable BUILD_MEM)" in out.reason, out.reason
        new = [v for k, v in _variables(bot, out.job_id).items() if k == "BUILD_MEM"]
        assert new and parse_memory(new[0]) > 384 * MiB, out.reason
    finally:
        bot.close()


def _variables(bot, job_id: int) -> dict:
    return bot.store.dry_run_decisions([job_id])[-1].decision["variables"]
