"""decide() is the only decider: the context's gates (issue 14) and the lazy reads' protocol.

The poller gathers a :class:`~retry_bot.model.JobContext` (already retried, superseded,
the branch head, whether the job's definition can be re-created) and calls decide()
once; :func:`~retry_bot.decide.next_read` tells it which GitLab reads the decision
depends on.  Properties over every generated scenario and context:

* a superseded or already-retried job is never acted on;
* a definition error never yields a re-creation; a merge-request pipeline is never
  re-created; a branch that moved on is never rebuilt (with ``skip_superseded``);
* every ``none`` is a plain none (no variables, the failed job's own attempt);
* decide() and next_read() are total (never raise);
* the reads are lazy and sound: next_read() only asks for a read not made yet, while
  the decision would act, and whatever a read it did not ask for would have said,
  the action is the same; the protocol ends after at most three reads.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from retry_bot.decide import Action, decide, next_read, resize_in_place
from retry_bot.model import JobContext, Read

from tests.bot_policy.helpers import LADDER, attempt, facts, policy, verdict
from tests.bot_policy.strategies import SHA, scenarios

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: What each read could have said, at its most blocking.
BLOCKING = {Read.SUPERSEDED: {"superseded_by": 10**6}, Read.BRANCH_HEAD: {"branch_head": "f" * 40},
            Read.DEFINITION: {"definition_error": "the definition could not be read"}}


def _args(s):
    return (s["facts"], s["classification"], s["lineage"], s["policy"], s["class_usage"])


def _kw(s, context=None):
    return dict(record=s["record"], predicted_memory_bytes=s["predicted_memory_bytes"], now=s["now"],
                context=s["context"] if context is None else context)


def _recreates(s, d, ctx):
    return d.action == Action.RESIZE and not resize_in_place(d, s["facts"], s["lineage"], ctx)


def check_gates(s):
    ctx = s["context"]
    d = decide(*_args(s), **_kw(s))          # total: a raise fails the property
    pol, f = s["policy"], s["facts"]
    if d.action == Action.NONE:
        assert d.variables == {} and d.reason.strip() and d.rule.strip()
        assert d.memory_limit_bytes is d.memory_request_bytes is d.cpu_limit_cores is d.timeout_seconds is None
        return
    assert not ctx.retried
    assert not (pol.skip_superseded and ctx.superseded_by is not None)
    if d.action == Action.RESIZE:
        assert not (f.ref.startswith("refs/merge-requests/")
                    or f.pipeline_source in ("merge_request_event", "external_pull_request_event"))
        moved = Read.BRANCH_HEAD in ctx.read and ctx.branch_head and f.sha and ctx.branch_head != f.sha
        in_place_copy = s["lineage"] and s["lineage"][0].job_id != f.job_id and ctx.manual_job
        if pol.skip_superseded and f.ref and moved and not in_place_copy:
            pytest.fail(f"resized although branch {f.ref} moved on: {d.reason}")
    if _recreates(s, d, ctx):
        assert not (Read.DEFINITION in ctx.read and ctx.definition_error)


@SETTINGS
@given(scenarios())
def test_gated_jobs_are_never_acted_on(s):
    check_gates(s)


@SETTINGS
@given(scenarios(focus=True))
def test_gated_resizes_are_never_acted_on(s):
    check_gates(s)


def check_reads(s):
    ctx = s["context"]
    final = decide(*_args(s), **_kw(s))
    need = next_read(*_args(s), **_kw(s))
    if need is not None:
        # Only a read not made yet, only while the decision acts as far as the gates before it go;
        # decide() either agrees or a known gate after the read stops it.
        assert need.read not in ctx.read and need.would.action != Action.NONE
        assert final == need.would or final.action == Action.NONE
        if need.read == Read.DEFINITION:            # the last gate: nothing after it
            assert final == need.would
        return
    # Sound: every read not made could have said anything, the action stays the same (a none may
    # then name another of the gates that stop it: gate 2 comes before the budget, for one).
    f = s["facts"]
    for read in set(Read) - set(ctx.read):
        # what the poller's read could answer: no newer pipeline for a job without a ref or pipeline
        possible = [{}] if read == Read.SUPERSEDED and not (f.ref and f.pipeline_id) else [BLOCKING[read], {}]
        for values in possible:
            other = replace(ctx, read=ctx.read | {read}, **values)
            d = decide(*_args(s), **_kw(s, other))
            assert d.action == final.action, (read, values)
            if final.action != Action.NONE:
                assert d == final


@SETTINGS
@given(scenarios())
def test_reads_are_asked_for_only_when_the_decision_depends_on_them(s):
    check_reads(s)


@SETTINGS
@given(scenarios(focus=True))
def test_resize_reads_are_asked_for_only_when_the_decision_depends_on_them(s):
    check_reads(s)


@SETTINGS
@given(scenarios(focus=True), st.sampled_from([{}, BLOCKING]))
def test_the_read_protocol_ends_after_at_most_three_reads_with_decides_answer(s, answers):
    """The poller's loop: ask, read, ask again; then decide() once."""
    ctx = replace(s["context"], read=frozenset())
    reads = []
    while (need := next_read(*_args(s), **_kw(s, ctx))) is not None:
        reads.append(need.read)
        ctx = replace(ctx, read=ctx.read | {need.read}, **answers.get(need.read, {}))
        assert len(reads) <= 3
    assert len(set(reads)) == len(reads)
    assert next_read(*_args(s), **_kw(s, ctx)) is None
    decide(*_args(s), **_kw(s, ctx))


# ------------------------------------------------------------------ each gate, by example

OOM_1G = {"KUBERNETES_MEMORY_LIMIT": "1Gi"}


def _decide(f=None, lineage=(), pol=None, ctx=JobContext(), fam="oom"):
    from tests.bot_policy.test_decide import DEFAULT, NO_USAGE

    return decide(f or facts(variables=OOM_1G), verdict(fam), list(lineage), pol or DEFAULT, NO_USAGE,
                  context=ctx)


def test_already_retried_is_a_plain_none_with_its_own_reason():
    d = _decide(facts(variables=OOM_1G, pipeline_id=5), ctx=JobContext(retried=True))
    assert (d.action, d.rule) == (Action.NONE, "already_retried")
    assert d.reason == "job 100 was already retried in GitLab (retry: keyword or a person)"
    # a plain none: the failed job's own attempt, nothing to play (it carried the resize's before)
    assert d.attempt == 1 and d.variables == {} and d.memory_limit_bytes is None


def test_superseded_is_read_only_when_the_decision_would_act_and_then_decides():
    f = facts(variables=OOM_1G, pipeline_id=5, sha=SHA)
    need = next_read(f, verdict("oom"), [], policy("skip_superseded = true"), _noop(), context=JobContext())
    assert need is not None and need.read == Read.SUPERSEDED and need.would.action == Action.RESIZE
    # a compile error is left alone whatever the newer pipelines: no read
    assert next_read(f, verdict("build_error"), [], policy(""), _noop()) is None
    # retried: decided without reading
    assert next_read(f, verdict("oom"), [], policy(""), _noop(), context=JobContext(retried=True)) is None
    d = _decide(f, ctx=JobContext(superseded_by=9, read=frozenset({Read.SUPERSEDED})))
    assert d.action == Action.NONE and d.rule == "skip_superseded" and "superseded pipeline 5" in d.reason


def _noop():
    from tests.bot_policy.helpers import NO_USAGE

    return NO_USAGE


def test_merge_request_pipeline_resize_is_none_but_a_retry_is_not():
    mr = facts(variables=OOM_1G, ref="refs/merge-requests/7/head", pipeline_source="merge_request_event")
    d = _decide(mr)
    assert d.action == Action.NONE and d.rule == "merge_request_pipeline"
    assert "re-create with KUBERNETES_MEMORY_LIMIT=" in d.reason and "merge-request pipeline" in d.reason
    assert d.variables == {} and d.attempt == 1
    assert _decide(mr, fam="infrastructure").action == Action.RETRY


def test_branch_moved_on_stops_a_resize_unless_a_bot_copy_reruns_in_place():
    f = facts(job_id=101, variables=OOM_1G, pipeline_id=5, sha=SHA)
    read = frozenset({Read.SUPERSEDED, Read.BRANCH_HEAD, Read.DEFINITION})
    moved = JobContext(branch_head="b" * 40, read=read)
    d = _decide(f, ctx=moved)
    assert d.action == Action.NONE and d.rule == "skip_superseded"
    assert f"moved on from {SHA[:12]} to {'b' * 12}" in d.reason
    # the head is unknown (the read failed): re-created anyway, the copy carries RETRY_BOT_ORIGIN_SHA
    assert _decide(f, ctx=replace(moved, branch_head=None)).action == Action.RESIZE
    # without skip_superseded the branch head is never read
    assert next_read(f, verdict("oom"), [], policy("skip_superseded = false"), _noop()).read == Read.DEFINITION
    # a bot-made manual copy is re-run in place (jobRetry), at its own commit
    lineage = [attempt(100), attempt(101, "resize")]
    copy = replace(moved, manual_job=True, job_retry_supported=True)
    assert _decide(f, lineage=lineage, ctx=copy).action == Action.RESIZE


def test_definition_error_stops_a_recreation_but_not_a_rerun_in_place():
    f = facts(job_id=101, variables=OOM_1G)
    broken = JobContext(definition_error="job 'build' is not in the CI configuration (merged_yaml)",
                        read=frozenset(Read))
    d = _decide(f, ctx=broken)
    assert d.action == Action.NONE and d.rule == "job_definition"
    assert d.reason.endswith("; but the job cannot be re-created: job 'build' is not in the CI configuration "
                             "(merged_yaml)")
    lineage = [attempt(100), attempt(101, "resize")]
    in_place = replace(broken, manual_job=True, job_retry_supported=True)
    d = _decide(f, lineage=lineage, ctx=in_place)
    assert d.action == Action.RESIZE and resize_in_place(d, f, lineage, in_place)
    # a class change cannot be made in place: re-created, so the definition matters again
    ladder = policy(LADDER)
    big = facts(job_id=101, variables={"KUBERNETES_MEMORY_LIMIT": "8Gi"}, tags=("rs", "small"))
    d = _decide(big, lineage=[attempt(100, runner_class="small"), attempt(101, "resize", runner_class="small")],
                pol=ladder, ctx=in_place)
    assert d.action == Action.NONE and d.rule == "job_definition"
    # a retry never needs the definition
    assert _decide(f, ctx=broken, fam="infrastructure").action == Action.RETRY
