"""Property tests (hypothesis) of the decision function and the resize arithmetic.

Over generated policies, facts, verdicts, lineages, usage records and class
usage: budgets, memory/CPU caps and concurrency caps are never exceeded;
resizing is monotone; the action is always the one the policy's rule names (so
build and config errors are never retried unless a policy says so); the same
input gives the same decision; the reason is never empty.
"""

from __future__ import annotations

import copy

import tomli_w
from hypothesis import HealthCheck, given, settings, strategies as st

from retry_bot.decide import Action, decide
from retry_bot.model import Family
from retry_bot.policy import (
    ResizeRule, parse_policy, policy_to_dict, resize_memory, round_up, format_memory_within,
)
from runner_wrapper.quantity import parse_cpu, parse_memory

from retry_bot.policy import default_policy
from tests.bot_policy.helpers import GiB, MiB, verdict
from tests.bot_policy.strategies import policies, scenarios

DEFAULT = default_policy()
SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _entries(s):
    """The failed job's lineage prefix, as the spec defines it (appended when absent)."""
    lineage = list(s["lineage"])
    ids = [e.job_id for e in lineage]
    job_id = s["facts"].job_id
    if job_id in ids:
        return lineage[: ids.index(job_id) + 1], ids.index(job_id) < len(ids) - 1
    return lineage + [None], False


def _in_force(s):
    """(memory limit in force, observed peak) by the documented precedence."""
    f, rec = s["facts"], s["record"]
    entries, _ = _entries(s)
    entry = entries[-1]
    rec = rec if rec is not None and rec.job.id == f.job_id else None
    pol = s["policy"]
    limit = None
    if rec is not None and rec.limits.memory_limit_bytes:
        limit = rec.limits.memory_limit_bytes
    elif entry is not None and entry.memory_limit_bytes and entry.memory_limit_bytes > 0:
        limit = entry.memory_limit_bytes
    elif pol.variables.memory_limit and pol.variables.memory_limit in f.variables:
        limit = parse_memory(f.variables[pol.variables.memory_limit])
    peaks = [p for p in ((rec.usage.memory_peak_bytes if rec else None),
                         (entry.memory_peak_bytes if entry else None)) if p and p > 0]
    return limit, (max(peaks) if peaks else None)


def _current_class(s):
    """The class the failed job ran on: lineage, else its tags, else placement."""
    pol, f = s["policy"], s["facts"]
    entry = _entries(s)[0][-1]
    if entry is not None and pol.runner_class(entry.runner_class) is not None:
        return pol.runner_class(entry.runner_class)
    by_tags = pol.class_for_tags(f.tags)
    if by_tags is not None:
        return by_tags
    placed = pol.placement_for(f.project_path, f.name)
    return pol.runner_class(placed.runner_class) if placed else None


def _decide(s):
    return decide(s["facts"], s["classification"], s["lineage"], s["policy"], s["class_usage"],
                  record=s["record"], predicted_memory_bytes=s["predicted_memory_bytes"],
                  context=s["context"], now=s["now"])


@SETTINGS
@given(scenarios())
def test_decisions_respect_every_bound(s):
    check_bounds(s)


@SETTINGS
@given(scenarios(focus=True))
def test_resizes_respect_every_bound(s):
    """The same properties, on OOMs and timeouts that mostly get past the early gates."""
    check_bounds(s)


def check_bounds(s):
    d = _decide(s)
    pol, f = s["policy"], s["facts"]
    fam = s["classification"].family.value
    resolved = pol.resolve(fam, s["classification"].category, project_path=f.project_path, job_name=f.name,
                           ref=f.ref, pipeline_source=f.pipeline_source)

    # Never an empty explanation; the rule names a policy entry.
    assert d.reason.strip() and d.rule.strip()
    # Deterministic: same input (even deep-copied) gives the same decision.
    assert _decide(copy.deepcopy(s)) == d
    # Dry run from the policy is never lost.
    if pol.dry_run:
        assert d.dry_run
    if d.action == Action.NONE:
        assert d.variables == {}
        if d.rule.endswith(".min_probability"):
            assert s["classification"].probability is not None
            assert s["classification"].probability < resolved.rule.min_probability
            assert d.rule == f"{resolved.min_probability_source}.min_probability"
        return

    # The action is the one the rule in force names: build/config errors are
    # never retried unless the policy says so.
    assert d.action == resolved.rule.action
    # A verdict that carries a probability acts only at or above the rule's floor (a rule's carries none).
    probability = s["classification"].probability
    assert probability is None or probability >= resolved.rule.min_probability
    if fam in (Family.BUILD_ERROR, Family.CONFIG_ERROR):
        assert resolved.rule.action != Action.NONE
    ctx = s["context"]
    assert not (ctx.superseded_by is not None and pol.skip_superseded)
    assert not ctx.retried
    assert not (f.allow_failure and pol.skip_allow_failure)

    # Budgets: this family's re-runs in the lineage (unknown families count) stay within budget.
    entries, later = _entries(s)
    assert not later
    fams = [e.family if e is not None else None for e in entries]
    fams[-1] = fam
    used = sum(1 for j in range(1, len(entries))
               if (entries[j] is None or entries[j].action != "origin") and fams[j - 1] in (None, fam))
    assert used + 1 <= resolved.rule.budget == d.budget
    assert d.attempt == len(entries) + 1 <= pol.max_attempts

    # Runner class: a real one, open to this job, within its concurrency caps.
    rc = pol.runner_class(d.runner_class)
    if pol.runner_classes and d.action == Action.RESIZE:
        assert rc is not None and d.tags == rc.tags
    if rc is not None:
        if rc.max_concurrent_per_user is not None:
            assert s["class_usage"].user_count(rc.name, f.user) < rc.max_concurrent_per_user
        if rc.max_concurrent_per_project is not None:
            assert s["class_usage"].project_count(rc.name, f.project_path) < rc.max_concurrent_per_project

    if d.action == Action.RETRY:
        assert d.variables == {} and d.tags == tuple(f.tags)
        return

    # Resize: caps never exceeded, variables say exactly the numbers, monotone.
    cap = pol.resize.max_memory
    if resolved.max_memory is not None:
        cap = min(cap, resolved.max_memory)
    if rc is not None:
        cap = min(cap, rc.max_memory)
        cur = _current_class(s)
        if rc is not cur:
            # Moving: only up the ladder, and only to a class open to this job.
            if cur is not None:
                assert pol.class_index(rc.name) > pol.class_index(cur.name)
            if rc.expensive:
                assert resolved.allow_expensive
            if rc.placement_only:
                placed = pol.placement_for(f.project_path, f.name)
                assert placed is not None and placed.runner_class == rc.name
    names = pol.variables
    if d.memory_limit_bytes is not None:
        assert d.memory_limit_bytes <= cap
        assert parse_memory(d.variables[names.memory_limit]) == d.memory_limit_bytes
    if d.memory_request_bytes is not None:
        assert d.memory_request_bytes <= cap
        if rc is not None:
            assert d.memory_request_bytes <= rc.request_cap
        if d.memory_limit_bytes is not None:
            assert d.memory_request_bytes <= d.memory_limit_bytes
        assert parse_memory(d.variables[names.memory_request]) == d.memory_request_bytes
    if d.cpu_limit_cores is not None:
        assert parse_cpu(d.variables[names.cpu_limit]) == d.cpu_limit_cores
        if rc is not None:
            assert d.cpu_limit_cores <= rc.max_cpus
        assert d.cpu_limit_cores <= pol.resize.cpu.max_cpus
    if fam != Family.TIMEOUT.value:
        new = d.memory_limit_bytes if d.memory_limit_bytes is not None else d.memory_request_bytes
        assert new is not None
        limit, peak = _in_force(s)
        if limit is not None:
            assert new > limit
        if peak is not None:
            assert new > peak
    else:
        assert d.timeout_seconds is not None or d.cpu_limit_cores is not None or d.cpu_request_cores is not None
        if d.timeout_seconds is not None:
            assert d.timeout_seconds <= pol.resize.time.max


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_default_policy_never_reruns_build_config_or_canceled_failures(s):
    for family in ("build_error", "config_error", "canceled", "unknown"):
        d = decide(s["facts"], verdict(family, "compile_error"), s["lineage"], DEFAULT, s["class_usage"],
                   record=s["record"], predicted_memory_bytes=s["predicted_memory_bytes"], now=s["now"])
        assert d.action == Action.NONE and d.variables == {} and d.reason


@settings(max_examples=150, deadline=None)
@given(policies)
def test_show_round_trips(policy):
    """``policy show`` output reads back to exactly the same policy."""
    text = tomli_w.dumps(policy_to_dict(policy))
    assert parse_policy(text, source="<show>") == policy


ratios = st.sampled_from([1.05, 1.2, 1.5, 2.0, 4.0])
granularities = st.sampled_from([1, 1000, MiB, 64 * MiB, 256 * MiB, GiB])


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 2**44), ratios, st.integers(0, 2 * GiB), granularities,
       st.integers(GiB, 2**45), st.none() | st.integers(1, 2**45))
def test_resize_memory_is_monotone_bounded_and_rounded(used, ratio, bump, gran, cap, predicted):
    rule = ResizeRule(ratio=ratio, min_bump=bump, granularity=gran, max_memory=cap)
    new = resize_memory(used, rule, predicted_bytes=predicted)
    assert new <= cap
    if new < cap:
        assert new > used and new >= used * ratio and new >= used + bump and new % gran == 0
        if predicted:
            assert new >= predicted
    # Monotone in "used": more in use never gives less.
    assert resize_memory(used + 1, rule, predicted_bytes=predicted) >= new
    assert round_up(used, gran) >= used


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 2**44), st.integers(1, 2**44), st.sampled_from(["binary", "decimal", "bytes"]))
def test_format_memory_within_never_passes_the_cap(nbytes, cap, style):
    text, value = format_memory_within(min(nbytes, cap), cap, style)
    assert parse_memory(text) == value <= cap
    assert value > 0
