"""Example tests for :func:`retry_bot.decide.decide`: one or more per policy rule."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from retry_bot.decide import Action, ClassUsage, Decision, decide
from retry_bot.model import JobContext
from retry_bot.policy import default_policy
from runner_wrapper.quantity import parse_memory

from tests.bot_policy.helpers import GiB, LADDER, MiB, NO_USAGE, attempt, facts, policy, usage_record, verdict

DEFAULT = default_policy()


def run(f=None, v=None, lineage=(), pol=None, usage=NO_USAGE, **kw) -> Decision:
    return decide(f or facts(), v or verdict("oom"), list(lineage), pol or DEFAULT, usage, **kw)


# ------------------------------------------------------------------ families


def test_oom_resizes_from_the_limit_in_force_with_ratio():
    d = run(facts(variables={"KUBERNETES_MEMORY_LIMIT": "4Gi"}))
    assert d.action == Action.RESIZE
    assert d.variables == {"KUBERNETES_MEMORY_LIMIT": "6Gi", "KUBERNETES_MEMORY_REQUEST": "6Gi"}
    assert d.memory_limit_bytes == 6 * GiB and d.memory_request_bytes == 6 * GiB
    assert d.attempt == 2 and d.budget == 3 and d.rule == "families.oom"
    assert "6Gi" in d.reason and "4.0 GiB" in d.reason


def test_small_jobs_get_the_minimum_bump_rounded_to_granularity():
    d = run(facts(variables={"KUBERNETES_MEMORY_LIMIT": "128Mi"}))
    # max(128Mi * 1.5, 128Mi + 512Mi) = 640Mi, rounded up to 256Mi -> 768Mi
    assert d.memory_limit_bytes == 768 * MiB
    assert d.variables["KUBERNETES_MEMORY_LIMIT"] == "768Mi"


def test_build_and_config_errors_are_left_alone_by_default():
    for fam in ("build_error", "config_error", "canceled", "unknown"):
        d = run(v=verdict(fam))
        assert d.action == Action.NONE, fam
        assert d.rule == f"families.{fam}"
        assert d.variables == {} and d.reason


def test_infrastructure_is_retried_with_backoff_and_keeps_tags():
    f = facts(tags=("docker", "linux"))
    d1 = run(f, verdict("infrastructure", "dns_error"))
    assert d1.action == Action.RETRY and d1.variables == {} and d1.tags == ("docker", "linux")
    assert d1.delay_seconds == 60.0
    lineage = [attempt(100, family="infrastructure"), attempt(101, "retry", family="infrastructure")]
    d2 = run(facts(job_id=101, tags=("docker",)), verdict("infrastructure", "dns_error"), lineage)
    assert d2.action == Action.RETRY and d2.attempt == 3 and d2.delay_seconds == 120.0
    lineage.append(attempt(102, "retry", family="infrastructure"))
    d3 = run(facts(job_id=102), verdict("infrastructure", "dns_error"), lineage)
    assert d3.action == Action.NONE and "used up" in d3.reason and d3.rule == "families.infrastructure"


def test_backoff_subtracts_time_already_waited_and_respects_max_job_age():
    now = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
    f = facts(finished_at=(now - timedelta(seconds=45)).isoformat().replace("+00:00", "Z"))
    d = run(f, verdict("infrastructure"), now=now)
    assert d.action == Action.RETRY and d.delay_seconds == pytest.approx(15.0)
    old = facts(finished_at=(now - timedelta(days=2)).isoformat())
    d = run(old, verdict("infrastructure"), now=now)
    assert d.action == Action.NONE and d.rule == "max_job_age"


def test_timeout_none_by_default_and_resize_with_cpu_and_time_rules():
    assert run(v=verdict("timeout")).action == Action.NONE
    pol = policy("""
        [families.timeout]
        action = "resize"
        [resize.cpu]
        ratio = 2.0
        min_bump = "500m"
        max_cpus = "8"
        [resize.time]
        ratio = 2.0
        min_bump = "30m"
        max = "3h"
        default = "1h"
    """)
    d = run(facts(variables={"KUBERNETES_CPU_LIMIT": "2"}), verdict("timeout", "execution_timeout"), pol=pol)
    assert d.action == Action.RESIZE
    assert d.variables == {"KUBERNETES_CPU_LIMIT": "4", "KUBERNETES_CPU_REQUEST": "4"}
    assert d.cpu_limit_cores == 4.0 and d.timeout_seconds == 7200.0
    assert d.memory_limit_bytes is None
    # At the ceiling of both rules: nothing more to gain.
    lin = [attempt(100, family="timeout", cpu_limit_cores=8.0, timeout_seconds=3 * 3600.0)]
    d = run(facts(), verdict("timeout"), lin, pol=pol)
    assert d.action == Action.NONE and "ceiling" in d.reason


def test_timeout_resize_without_rules_is_a_policy_error():
    from retry_bot.problems import ConfigError

    with pytest.raises(ConfigError, match=r"families\.timeout\.action.*resize\.cpu"):
        policy('[families.timeout]\naction = "resize"\n')


# ------------------------------------------------------------------ categories and overrides


def test_category_rule_overrides_family():
    pol = policy("""
        [categories.compile_error]
        action = "retry"
        budget = 1
    """)
    d = run(v=verdict("build_error", "compile_error"), pol=pol)
    assert d.action == Action.RETRY and d.rule == "categories.compile_error"
    assert run(v=verdict("build_error", "test_failure"), pol=pol).action == Action.NONE


def test_overrides_match_project_job_ref_and_family_in_file_order():
    pol = policy("""
        [[overrides]]
        project = "group/.*"
        family = "oom"
        budget = 1

        [[overrides]]
        project = "group/project"
        job = "deploy-.*"
        action = "none"

        [[overrides]]
        project = "other/.*"
        dry_run = true
    """)
    d = run(facts(name="build", variables={"KUBERNETES_MEMORY_LIMIT": "1Gi"}), pol=pol)
    assert d.action == Action.RESIZE and d.budget == 1 and d.rule == "overrides[0]"
    d = run(facts(name="deploy-prod"), pol=pol)
    assert d.action == Action.NONE and d.rule == "overrides[1]"
    d = run(facts(project_path="other/x", variables={"KUBERNETES_MEMORY_LIMIT": "1Gi"}), pol=pol)
    assert d.action == Action.RESIZE and d.dry_run
    # Patterns match the whole path: "group/project-fork" is not "group/project".
    d = run(facts(project_path="xgroup/project"), pol=pol)
    assert d.budget == 3


def test_override_max_memory_caps_lower():
    pol = policy("""
        [[overrides]]
        job = "build"
        max_memory = "5Gi"
    """)
    d = run(facts(variables={"KUBERNETES_MEMORY_LIMIT": "4Gi"}), pol=pol)
    assert d.memory_limit_bytes == 5 * GiB and "capped by overrides[0].max_memory" in d.reason


def test_global_dry_run_cannot_be_switched_off_by_an_override():
    pol = policy("dry_run = true\n[[overrides]]\njob = '.*'\ndry_run = false\n")
    assert run(facts(variables={"KUBERNETES_MEMORY_LIMIT": "1Gi"}), pol=pol).dry_run


# ------------------------------------------------------------------ min_probability: how sure the classifier must be

FLOOR = policy("""
    [categories.learned_oom]
    action = "resize"
    budget = 1
    min_probability = 0.9
    [categories.oom]
    min_probability = 0.9
""")
LIMIT_4GI = {"KUBERNETES_MEMORY_LIMIT": "4Gi"}


def learned(family: str, probability: float | None):
    return replace(verdict(family, f"learned_{family}"), rule=f"learned:{family}", confidence="weak",
                   probability=probability)


def test_a_learned_verdict_at_or_above_the_floor_acts():
    for p in (0.95, 0.9, 1.0):
        d = run(facts(variables=LIMIT_4GI), learned("oom", p), pol=FLOOR)
        assert d.action == Action.RESIZE and d.budget == 1 and d.rule == "categories.learned_oom", (p, d.reason)
        assert d.variables["KUBERNETES_MEMORY_LIMIT"] == "6Gi"


def test_a_learned_verdict_below_the_floor_does_nothing_and_says_why():
    d = run(facts(variables=LIMIT_4GI), learned("oom", 0.75), pol=FLOOR)
    assert d.action == Action.NONE and d.variables == {}
    assert d.rule == "categories.learned_oom.min_probability"
    assert "0.75" in d.reason and "0.90" in d.reason and "categories.learned_oom" in d.reason, d.reason
    assert d.reason == ("job 100 'build' failed: oom/learned_oom: the classifier gives oom a probability of 0.75, "
                        "below min_probability 0.90 (categories.learned_oom): too unsure a verdict to act on")
    # just below: never shown as if it were the floor itself
    d = run(facts(variables=LIMIT_4GI), learned("oom", 0.8996), pol=FLOOR)
    assert d.action == Action.NONE and "probability of 0.8996, below min_probability 0.90" in d.reason


def test_a_rule_s_verdict_carries_no_probability_and_is_never_held_back():
    for v in (verdict("oom"), verdict("oom", "learned_oom")):
        assert v.probability is None
        d = run(facts(variables=LIMIT_4GI), v, pol=FLOOR)
        assert d.action == Action.RESIZE, d.reason
    # even under a floor of 1 on the family itself
    pol = policy("[families.oom]\nmin_probability = 1\n")
    assert run(facts(variables=LIMIT_4GI), verdict("oom"), pol=pol).action == Action.RESIZE
    assert run(facts(variables=LIMIT_4GI), learned("oom", 0.99), pol=pol).rule == "families.oom.min_probability"


def test_an_override_s_min_probability_wins_over_the_category_s():
    pol = policy("""
        [categories.learned_oom]
        action = "resize"
        budget = 1
        min_probability = 0.9
        [[overrides]]
        project = "group/.*"
        category = "learned_oom"
        min_probability = 0.7
        [[overrides]]
        job = "nightly"
        min_probability = 0.99
    """)
    d = run(facts(variables=LIMIT_4GI), learned("oom", 0.75), pol=pol)
    assert d.action == Action.RESIZE and d.rule == "overrides[0]", d.reason
    d = run(facts(project_path="other/x", variables=LIMIT_4GI), learned("oom", 0.75), pol=pol)
    assert d.action == Action.NONE and d.rule == "categories.learned_oom.min_probability"
    d = run(facts(name="nightly", variables=LIMIT_4GI), learned("oom", 0.95), pol=pol)
    assert d.action == Action.NONE and d.rule == "overrides[1].min_probability"
    assert "below min_probability 0.99 (overrides[1])" in d.reason, d.reason


def test_the_floor_does_not_outlive_the_pipeline_source_s_budget_factor():
    pol = policy("""
        [categories.learned_oom]
        action = "resize"
        budget = 2
        min_probability = 0.9
        [pipeline_sources.schedule]
        budget_factor = 0.5
    """)
    d = run(facts(pipeline_source="schedule", variables=LIMIT_4GI), learned("oom", 0.8), pol=pol)
    assert d.action == Action.NONE and d.rule == "categories.learned_oom.min_probability"
    d = run(facts(pipeline_source="schedule", variables=LIMIT_4GI), learned("oom", 0.95), pol=pol)
    assert d.action == Action.RESIZE and d.budget == 1


def test_a_probability_that_is_no_number_does_not_act_and_decide_does_not_raise():
    for bad in (float("nan"), "high"):
        d = run(facts(variables=LIMIT_4GI), learned("oom", bad), pol=FLOOR)  # type: ignore[arg-type]
        assert d.action == Action.NONE and d.rule == "categories.learned_oom.min_probability", d.reason
    # without a floor, the probability is not looked at
    pol = policy("[categories.learned_oom]\naction = 'resize'\nbudget = 1\n")
    assert run(facts(variables=LIMIT_4GI), learned("oom", 0.3), pol=pol).action == Action.RESIZE


# ------------------------------------------------------------------ "used" semantics (VPA)


def test_used_is_the_applied_limit_not_what_was_asked():
    # The bot asked for 12Gi, but the runner applied 8Gi (its ceiling): bump from 8Gi.
    lineage = [attempt(100, memory_limit_bytes=4 * GiB), attempt(101, "resize", memory_limit_bytes=12 * GiB)]
    rec = usage_record(101, limit=8 * GiB, peak=8 * GiB)
    d = run(facts(job_id=101), lineage=lineage, record=rec)
    assert d.memory_limit_bytes == 12 * GiB


def test_observed_peak_above_the_limit_counts():
    rec = usage_record(100, limit=2 * GiB, peak=3 * GiB)  # e.g. limit applied late
    d = run(facts(), record=rec)
    assert d.memory_limit_bytes == round(4.5 * GiB)


def test_prediction_raises_but_never_becomes_the_base():
    d = run(facts(variables={"KUBERNETES_MEMORY_LIMIT": "2Gi"}), predicted_memory_bytes=10 * GiB)
    assert d.memory_limit_bytes == 10 * GiB and "prediction" in d.reason
    # A prediction below the bump changes nothing.
    d = run(facts(variables={"KUBERNETES_MEMORY_LIMIT": "2Gi"}), predicted_memory_bytes=1 * GiB)
    assert d.memory_limit_bytes == 3 * GiB


def test_record_of_another_job_is_ignored():
    rec = usage_record(999, limit=30 * GiB, peak=30 * GiB)
    d = run(facts(variables={"KUBERNETES_MEMORY_LIMIT": "2Gi"}), record=rec)
    assert d.memory_limit_bytes == 3 * GiB


def test_unknown_memory_goes_to_the_largest_limit_allowed_by_default():
    # Issue 13: the shipped policy used to answer "cannot size a resize" (action none).
    d = run(facts())
    assert d.action == Action.RESIZE and d.rule == "families.oom"
    assert d.variables == {"KUBERNETES_MEMORY_LIMIT": "96Gi"} and d.memory_request_bytes is None
    assert "resize.unknown_limit" in d.reason
    # With a ladder: the top open class, at its maximum.
    d = run(facts(tags=["small"]), pol=policy(LADDER))
    assert d.action == Action.RESIZE and d.memory_limit_bytes == max(
        rc.max_memory for rc in policy(LADDER).runner_classes)
    # A second OOM at that limit is left alone (the lineage now knows the limit).
    pol = policy('[resize]\nmax_memory = "16Gi"\n')
    first = run(facts(), pol=pol)
    assert first.memory_limit_bytes == 16 * GiB
    again = run(facts(job_id=2), lineage=[attempt(1), attempt(2, "resize", memory_limit_bytes=16 * GiB)], pol=pol)
    assert again.action == Action.NONE and "already at the ceiling" in again.reason


def test_unknown_memory_with_a_default_or_left_alone():
    pol = policy('[resize]\ndefault_memory = "4Gi"\n')
    assert run(facts(), pol=pol).memory_limit_bytes == 6 * GiB
    d = run(facts(), pol=policy('[resize]\nunknown_limit = "none"\n'))
    assert d.action == Action.NONE and d.rule == "resize.unknown_limit"
    assert "cannot size a resize" in d.reason


def test_ceiling_reached_gives_none():
    d = run(facts(variables={"KUBERNETES_MEMORY_LIMIT": "96Gi"}))
    assert d.action == Action.NONE and "ceiling" in d.reason and d.rule == "resize.max_memory"


def test_cap_that_is_not_a_whole_mebibyte_is_never_passed():
    pol = policy('[resize]\nmax_memory = "96G"\n')
    d = run(facts(variables={"KUBERNETES_MEMORY_LIMIT": "80G"}), pol=pol)
    assert d.memory_limit_bytes <= 96 * 10**9
    assert parse_memory(d.variables["KUBERNETES_MEMORY_LIMIT"]) == d.memory_limit_bytes


def test_decimal_format_and_requests_only_variables():
    pol = policy("""
        [variables]
        memory_limit = ""
        memory_format = "decimal"
        [resize]
        ratio = 1.2
        min_bump = "100Mi"
        granularity = "1Mi"
    """)
    d = run(facts(variables={"KUBERNETES_MEMORY_REQUEST": "2G"}), pol=pol, record=usage_record(100, peak=2 * 10**9))
    assert list(d.variables) == ["KUBERNETES_MEMORY_REQUEST"]
    assert d.variables["KUBERNETES_MEMORY_REQUEST"].endswith("M")
    assert d.memory_request_bytes >= 2.4e9 and d.memory_limit_bytes is None


def test_raise_request_false_keeps_request():
    pol = policy("[variables]\nraise_request = false\n")
    d = run(facts(variables={"KUBERNETES_MEMORY_LIMIT": "4Gi", "KUBERNETES_MEMORY_REQUEST": "1Gi"}), pol=pol)
    assert d.variables == {"KUBERNETES_MEMORY_LIMIT": "6Gi"} and d.memory_request_bytes is None


def test_raise_request_scale_grows_the_request_by_the_limit_s_factor():
    job = facts(variables={"KUBERNETES_MEMORY_LIMIT": "4Gi", "KUBERNETES_MEMORY_REQUEST": "1Gi"})
    d = run(job)                                                     # the shipped default is "scale"
    assert DEFAULT.variables.raise_request == "scale"
    assert d.variables == {"KUBERNETES_MEMORY_LIMIT": "6Gi", "KUBERNETES_MEMORY_REQUEST": "1536Mi"}
    assert d.memory_limit_bytes == 6 * GiB and d.memory_request_bytes == 1536 * MiB
    d = run(job, pol=policy("[variables]\nraise_request = true\n"))
    assert d.variables["KUBERNETES_MEMORY_REQUEST"] == "6Gi" and d.memory_request_bytes == 6 * GiB
    # a request at or above the new limit is brought down to it, whatever the mode
    d = run(facts(variables={"KUBERNETES_MEMORY_LIMIT": "4Gi", "KUBERNETES_MEMORY_REQUEST": "8Gi"}))
    assert d.memory_request_bytes == 6 * GiB


def test_raise_request_scale_without_a_request_in_force_reserves_the_new_limit():
    d = run(facts(variables={"KUBERNETES_MEMORY_LIMIT": "4Gi"}))
    assert d.memory_request_bytes == 6 * GiB


@pytest.mark.parametrize("value, message", [('"max"', "must be true, false or \"scale\", not 'max'"),
                                            ("1", 'must be true, false or "scale", not an integer')])
def test_raise_request_takes_only_true_false_or_scale(value, message):
    from retry_bot.problems import ConfigError
    with pytest.raises(ConfigError) as exc:
        policy(f"[variables]\nraise_request = {value}\n")
    assert "variables.raise_request" in str(exc.value) and message in str(exc.value)


def test_budget_counts_reruns_for_the_same_family_only():
    lineage = [
        attempt(1, family="infrastructure", memory_limit_bytes=GiB),
        attempt(2, "retry", family="infrastructure", memory_limit_bytes=GiB),
        attempt(3, "retry", family="oom", memory_limit_bytes=GiB),
    ]
    d = run(facts(job_id=3), lineage=lineage)
    assert d.action == Action.RESIZE and d.attempt == 4 and "re-run 1 of 3" in d.reason


def test_unknown_family_in_the_lineage_counts_against_the_budget():
    lineage = [attempt(1, family=None), attempt(2, "retry", family=None), attempt(3, "retry", family=None)]
    d = run(facts(job_id=3, variables={"KUBERNETES_MEMORY_LIMIT": "1Gi"}), lineage=lineage)
    assert d.action == Action.RESIZE and "re-run 3 of 3" in d.reason
    lineage.append(attempt(4, "resize", family=None))
    assert run(facts(job_id=4), lineage=lineage).action == Action.NONE


def test_max_attempts_caps_the_whole_lineage():
    pol = policy("max_attempts = 2\n")
    lineage = [attempt(1, family="infrastructure"), attempt(2, "retry", family="oom", memory_limit_bytes=GiB)]
    d = run(facts(job_id=2), lineage=lineage, pol=pol)
    assert d.action == Action.NONE and d.rule == "max_attempts"


def test_already_recreated_job_is_never_acted_on_twice():
    lineage = [attempt(1, memory_limit_bytes=GiB), attempt(2, "resize")]
    d = run(facts(job_id=1), lineage=lineage)
    assert d.action == Action.NONE and "already re-created as job 2" in d.reason


def test_superseded_and_allow_failure():
    newer = JobContext(superseded_by=200)
    assert run(facts(variables={"KUBERNETES_MEMORY_LIMIT": "1Gi"}), context=newer).rule == "skip_superseded"
    pol = policy("skip_superseded = false\nskip_allow_failure = true\n")
    f = facts(variables={"KUBERNETES_MEMORY_LIMIT": "1Gi"})
    assert run(f, context=newer, pol=pol).action == Action.RESIZE
    assert run(facts(allow_failure=True), pol=pol).rule == "skip_allow_failure"


# ------------------------------------------------------------------ ladder, placement, caps, sources


def test_resize_climbs_the_ladder_when_passing_the_class_max(ladder_policy):
    f = facts(tags=("rs", "small"))
    d = run(f, lineage=[attempt(100, memory_limit_bytes=6 * GiB, runner_class="small")], pol=ladder_policy)
    assert d.action == Action.RESIZE and d.runner_class == "large" and d.tags == ("rs", "large")
    assert d.memory_limit_bytes == 9 * GiB and "moves to runner class 'large'" in d.reason


def test_resize_stays_on_the_class_when_it_fits(ladder_policy):
    d = run(facts(tags=("rs", "small")), lineage=[attempt(100, memory_limit_bytes=2 * GiB)], pol=ladder_policy)
    assert d.runner_class == "small" and d.memory_limit_bytes == 3 * GiB


def test_class_default_memory_is_the_limit_in_force(ladder_policy):
    d = run(facts(tags=("rs", "small")), pol=ladder_policy)
    assert d.memory_limit_bytes == 3 * GiB and "default" in d.reason


def test_request_capped_by_max_memory_request(ladder_policy):
    d = run(facts(tags=("rs", "large")), lineage=[attempt(100, memory_limit_bytes=40 * GiB)], pol=ladder_policy)
    assert d.runner_class == "large" and d.memory_limit_bytes == 60 * GiB
    assert d.memory_request_bytes == 48 * GiB


def test_expensive_class_concurrency_caps(ladder_policy):
    lin = [attempt(100, memory_limit_bytes=60 * GiB, runner_class="large")]
    usage = ClassUsage(by_user={("huge", "alice"): 2})
    d = run(facts(tags=("rs", "large")), lineage=lin, pol=ladder_policy, usage=usage)
    assert d.action == Action.NONE and d.rule == "runner_classes[2].max_concurrent_per_user"
    usage = ClassUsage.from_jobs([("huge", "bob", "group/project")] * 3)
    d = run(facts(tags=("rs", "large")), lineage=lin, pol=ladder_policy, usage=usage)
    assert d.action == Action.NONE and d.rule == "runner_classes[2].max_concurrent_per_project"
    usage = ClassUsage.from_jobs([("huge", "alice", "group/project")])
    d = run(facts(tags=("rs", "large")), lineage=lin, pol=ladder_policy, usage=usage)
    assert d.action == Action.RESIZE and d.runner_class == "huge"


def test_scheduled_pipelines_get_fewer_reruns_and_no_expensive_class(ladder_policy):
    text = LADDER + "\n[pipeline_sources.schedule]\nbudget_factor = 0.5\nallow_expensive = false\n"
    pol = policy(text)
    lin = [attempt(100, memory_limit_bytes=60 * GiB, runner_class="large")]
    d = run(facts(tags=("rs", "large"), pipeline_source="schedule"), lineage=lin, pol=pol)
    assert d.budget == 1
    # Cannot climb to "huge": capped at the large class's 64Gi.
    assert d.action == Action.RESIZE and d.runner_class == "large" and d.memory_limit_bytes == 64 * GiB
    assert "capped" in d.reason
    lin2 = lin + [attempt(101, "resize", memory_limit_bytes=64 * GiB, runner_class="large")]
    d = run(facts(job_id=101, tags=("rs", "large"), pipeline_source="schedule"), lineage=lin2, pol=pol)
    assert d.action == Action.NONE and d.rule == "pipeline_sources.schedule"


def test_beyond_top_stop_and_cap(ladder_policy):
    lin = [attempt(100, memory_limit_bytes=200 * GiB, runner_class="huge")]
    d = run(facts(tags=("rs", "huge")), lineage=lin, pol=ladder_policy)
    assert d.action == Action.RESIZE and d.memory_limit_bytes == 256 * GiB
    stop = policy(LADDER.replace('max_memory = "256Gi"\n', 'max_memory = "256Gi"\nbeyond_top = "stop"\n', 1))
    d = run(facts(tags=("rs", "huge")), lineage=lin, pol=stop)
    assert d.action == Action.NONE and d.rule == "resize.beyond_top"


def test_last_attempt_max_uses_the_class_maximum(ladder_policy):
    pol = policy(LADDER.replace('max_memory = "256Gi"\n', 'max_memory = "256Gi"\nlast_attempt = "max"\n', 1))
    lin = [attempt(1, memory_limit_bytes=2 * GiB, runner_class="small"),
           attempt(2, "resize", memory_limit_bytes=3 * GiB, runner_class="small"),
           attempt(3, "resize", memory_limit_bytes=4608 * MiB, runner_class="small")]
    d = run(facts(job_id=3, tags=("rs", "small")), lineage=lin, pol=pol)
    assert "re-run 3 of 3" in d.reason and d.memory_limit_bytes == 8 * GiB and "class maximum" in d.reason
    d = run(facts(job_id=2, tags=("rs", "small")), lineage=lin[:2], pol=pol)
    assert d.memory_limit_bytes == 4608 * MiB


def test_placement_starts_a_job_on_a_class_and_grants_placement_only_classes():
    text = LADDER.replace("expensive = true", "expensive = true\nplacement_only = true") + """
[[placement]]
project = "hpc/.*"
job = "chromium.*"
runner_class = "huge"
"""
    pol = policy(text)
    lin = [attempt(100, memory_limit_bytes=60 * GiB)]
    # Not granted: stays capped on "large".
    d = run(facts(tags=("rs", "large")), lineage=lin, pol=pol)
    assert d.runner_class == "large" and d.memory_limit_bytes == 64 * GiB
    # Granted by placement: may climb to "huge".
    d = run(facts(project_path="hpc/browser", name="chromium-build", tags=("rs", "large")), lineage=lin, pol=pol)
    assert d.runner_class == "huge" and d.memory_limit_bytes == 90 * GiB
    # A job with no class tags starts where placement says.
    d = run(facts(project_path="hpc/browser", name="chromium-build", tags=()),
            lineage=[attempt(100, memory_limit_bytes=100 * GiB)], pol=pol)
    assert d.runner_class == "huge" and "stays on runner class 'huge'" in d.reason


def test_retry_respects_concurrency_caps_of_its_class(ladder_policy):
    usage = ClassUsage(by_project={("huge", "group/project"): 3})
    d = run(facts(tags=("rs", "huge")), verdict("infrastructure"), pol=ladder_policy, usage=usage)
    assert d.action == Action.NONE and "max_concurrent_per_project" in d.rule
    d = run(facts(tags=("rs", "huge")), verdict("infrastructure"), pol=ladder_policy)
    assert d.action == Action.RETRY and d.runner_class == "huge"


def test_decision_to_dict_is_json():
    d = run(facts(variables={"KUBERNETES_MEMORY_LIMIT": "4Gi"}))
    data = json.loads(json.dumps(d.to_dict()))
    assert data["action"] == "resize" and data["variables"]["KUBERNETES_MEMORY_LIMIT"] == "6Gi"
    assert data["tags"] == [] and data["attempt"] == 2


def test_a_record_dict_is_converted_at_the_edge_and_another_jobs_record_is_ignored():
    from runner_wrapper.record import UsageRecord

    rec = UsageRecord.from_dict(usage_record(100, limit=4 * GiB, peak=4 * GiB).to_dict())
    d = decide(facts(), verdict("oom"), [], DEFAULT, NO_USAGE, record=rec)
    assert d.memory_limit_bytes == 6 * GiB and "usage record" in d.reason
    other = usage_record(7, limit=4 * GiB, peak=4 * GiB)
    d = decide(facts(), verdict("oom"), [], DEFAULT, NO_USAGE, record=other)  # ignored: nothing known
    assert d.memory_limit_bytes == 96 * GiB and "usage record" not in d.reason
