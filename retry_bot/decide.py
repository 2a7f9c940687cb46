"""The decision: from what is known about a failed job to what the bot does with it.

:func:`decide` is the only place that decides.  It is a pure, deterministic
function of its arguments: the job's facts, the classifier's verdict, the job's
lineage, the policy, how many jobs currently run in each expensive runner
class, and the job's context (:class:`~retry_bot.model.JobContext`: already
retried, superseded, the branch head, whether its definition can be re-created).
It never reads the clock (pass ``now``), GitLab or the state store; the poller
does that and acts on the :class:`Decision`.

The gates, in order (the first that applies decides ``none``):

1. the job was already re-created (a later attempt exists in its lineage);
2. ``skip_superseded`` and a newer pipeline on the same ref superseded it
   (``context.superseded_by``);
3. ``skip_allow_failure`` and the job may fail;
4. it finished longer ago than ``max_job_age``;
5. the rule in force (family, then category, then overrides) says ``none``, or
   the verdict carries a probability (the learned fallback's) below the rule's
   ``min_probability`` (a rule's verdict carries none and is never held to it);
6. the family's budget for this lineage is used up (after the pipeline
   source's factor), or the lineage reached ``max_attempts``;
7. for a resize: nothing is known to size from, or the ceiling is reached, or
   the need passes the top of the ladder and ``beyond_top = "stop"``;
8. the runner class the job would run on has reached a concurrency cap for the
   job's user or project.  The decision is then ``none`` (not deferred: the bot
   decides each job exactly once, and a cap is never exceeded).

A decision that would act then passes the context's gates, in this order:

9. the job was already retried in GitLab (``context.retried``: the ``retry:``
   keyword or a person);
10. (the superseded check of gate 2, when the poller has not read it yet);
11. for a resize: the job ran in a merge-request pipeline, whose ref
    ``POST /projects/:id/pipeline`` cannot target;
12. for a resize with ``skip_superseded``: the branch moved on from the job's
    commit (``context.branch_head``), unless the job is a bot-made manual copy
    re-run in place;
13. for a resize that re-creates the job: its definition cannot be read or
    copied (``context.definition_error``).

Gates 10, 12 and 13 need GitLab reads (:class:`~retry_bot.model.Read`).  The
poller makes them lazily, exactly when the outcome depends on them:
:func:`next_read` names the next read the decision waits for (the same rules,
run with what is known so far), the poller makes it and asks again, then calls
:func:`decide` once.  An input not read (or whose read failed) does not block.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable, ParamSpec, TypeVar

from retry_bot.isotime import aware, parse_iso_time
from retry_bot.model import (LINEAGE_ACTIONS, ORIGIN, Classification, Family, JobContext, JobFacts, LineageAttempt,
                             Read)
from retry_bot.policy.model import (
    Action,
    BeyondTop,
    LastAttempt,
    Policy,
    ResolvedRule,
    RunnerClass,
    SCALE_REQUEST,
    UnknownLimit,
)
from retry_bot.policy.resize import (
    format_memory_within,
    memory_need,
    memory_used,
    resize_cpu,
    resize_timeout,
)
from runner_wrapper.quantity import QuantityError, format_cpu, human_bytes, parse_cpu, parse_memory
from runner_wrapper.record import UsageRecord

__all__ = ["Action", "LineageAttempt", "ClassUsage", "Decision", "decide", "next_read", "NextRead",
           "resize_in_place", "JobContext", "Read", "LINEAGE_ACTIONS", "MR_SOURCES"]

#: The taxonomy's category for a Kubernetes helper container killed by SIGKILL (see its
#: helper-killed-fetching rule): its resize sets the policy's helper variables.
HELPER_OOM = "helper_oom"
#: Pipeline sources of merge-request pipelines (their ref cannot be given to POST /pipeline).
MR_SOURCES = ("merge_request_event", "external_pull_request_event")


@dataclass(frozen=True)
class ClassUsage:
    """Running and pending jobs per runner class and user, and per runner class and project.

    Keys are ``(runner_class, user)`` and ``(runner_class, project_path)``
    (``str(project_id)`` for a job whose facts carry no path).  Jobs whose user
    is unknown are counted under ``""``.  The failed job itself is not running
    and is not counted: a cap of N allows an action while fewer than N run.
    """

    by_user: Mapping[tuple[str, str], int] = field(default_factory=dict)
    by_project: Mapping[tuple[str, str], int] = field(default_factory=dict)

    def user_count(self, runner_class: str, user: str | None) -> int:
        return int(self.by_user.get((runner_class, user or ""), 0))

    def project_count(self, runner_class: str, project: str | None) -> int:
        return int(self.by_project.get((runner_class, project or ""), 0))

    @classmethod
    def from_jobs(cls, jobs: Iterable[tuple[str, str | None, str | None]]) -> "ClassUsage":
        """Count ``(runner_class, user, project_path)`` triples of running/pending jobs."""
        users: dict[tuple[str, str], int] = {}
        projects: dict[tuple[str, str], int] = {}
        for rc, user, project in jobs:
            users[(rc, user or "")] = users.get((rc, user or ""), 0) + 1
            projects[(rc, project or "")] = projects.get((rc, project or ""), 0) + 1
        return cls(by_user=users, by_project=projects)


@dataclass(frozen=True)
class Decision:
    """What to do with one failed job, and why.

    For ``retry``, ``variables`` is empty and ``tags`` are the job's own
    (GitLab's retry keeps both).  For ``resize``, ``variables`` are the job
    variables to play the re-created job with and ``tags`` route it to
    ``runner_class``.  For ``none``, ``attempt`` is the failed job's own
    attempt number; otherwise it is the number of the job the action creates
    (the origin is 1).
    """

    action: Action
    reason: str
    rule: str
    attempt: int
    budget: int
    dry_run: bool = False
    variables: dict[str, str] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    runner_class: str | None = None
    memory_limit_bytes: int | None = None
    memory_request_bytes: int | None = None
    cpu_limit_cores: float | None = None
    cpu_request_cores: float | None = None
    #: Job timeout for the re-created job (``timeout:``), from ``[resize.time]``.
    timeout_seconds: float | None = None
    #: Seconds to wait before acting (the backoff still left at ``now``).
    delay_seconds: float = 0.0
    family: str = ""
    category: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (for logs, ``classify --format json`` and the state store)."""
        d = asdict(self)
        d["action"] = self.action.value
        d["tags"] = list(self.tags)
        d["variables"] = dict(self.variables)
        return d


# --------------------------------------------------------------------------- the function


def decide(
    facts: JobFacts,
    classification: Classification,
    lineage: Sequence[LineageAttempt],
    policy: Policy,
    class_usage: ClassUsage,
    *,
    record: UsageRecord | None = None,
    predicted_memory_bytes: int | None = None,
    context: JobContext = JobContext(),
    now: datetime | None = None,
) -> Decision:
    """Decide what to do with the failed job ``facts``.

    ``lineage`` lists the jobs of the job's lineage, origin first; the failed
    job is normally its last entry (it is appended when absent).  ``record`` is
    the job's *verified* usage record, ignored when it belongs to another job
    (a dict from a file or the store is converted at the edge with
    ``UsageRecord.from_dict``).  ``predicted_memory_bytes`` is the predictor's
    figure for the job: a resize takes the larger of it and the bump rule, then
    the caps.  ``context`` holds the gates' inputs (see the module docstring).
    ``now`` enables ``max_job_age`` and subtracts the time already waited from
    the backoff.
    """
    return _Decider(facts, classification, lineage, policy, class_usage, record,
                    predicted_memory_bytes, context, now).run()[0]


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _same_arguments_as(fn: Callable[_P, Any]) -> Callable[[Callable[..., _R]], Callable[_P, _R]]:
    """Give the decorated function ``fn``'s parameters, for type checkers (one signature, not two copies)."""
    return lambda impl: impl  # type: ignore[return-value]


#: decide()'s parameters, in _Decider's order: next_read() binds its arguments with them.
_DECIDE_PARAMETERS = inspect.signature(decide)


@dataclass(frozen=True)
class NextRead:
    """The next GitLab read the decision waits for (:func:`next_read`)."""

    read: Read
    #: The decision as far as the gates before this read go: it acts.  For
    #: :attr:`Read.DEFINITION` (the last gate) it is what :func:`decide` says unless the
    #: definition stops it: the copy to build is this decision's.
    would: Decision


@_same_arguments_as(decide)
def next_read(*args: Any, **kwargs: Any) -> NextRead | None:
    """The first read not in ``context.read`` that :func:`decide`'s outcome may depend on, or ``None``.

    Same arguments as :func:`decide`.  A read is asked for only when the decision
    acts as far as the gates before it go, and only by a gate that applies (a
    superseded check needs ``skip_superseded`` and a ref; the branch head and the
    definition only matter for a resize; the definition only when the job is
    re-created, not re-run in place).  ``None``: no read can change the action.
    """
    bound = _DECIDE_PARAMETERS.bind(*args, **kwargs)
    bound.apply_defaults()
    decision, needs = _Decider(*bound.arguments.values()).run(stop_at_unread=True)
    return None if needs is None else NextRead(needs, decision)


def resize_in_place(decision: Decision, facts: JobFacts, lineage: Sequence[LineageAttempt],
                    context: JobContext) -> bool:
    """A resize GitLab can carry out on the failed job itself: GraphQL ``jobRetry(variables:)``.

    A manual job that already ran -- a bot-created copy, or a job that is itself
    ``when: manual`` -- is retried in place with new variables: they apply to manual
    (``action?``) jobs, a failed one included, and the new job starts at once
    (G CloneJobService#add_job_variables_attributes!; mechanics §11.2).  No child
    pipeline, so no definition.  Tags cannot change this way, nor ``timeout:``: a
    class change (to other tags) or a timeout resize re-creates the job instead.
    """
    if decision.action != Action.RESIZE or not (context.manual_job and context.job_retry_supported):
        return False
    prev = next((a for a in lineage if a.job_id == facts.job_id), None)
    same_class = (prev is None or decision.runner_class in (None, prev.runner_class)
                  or sorted(decision.tags) == sorted(str(t) for t in facts.tags))
    return decision.timeout_seconds is None and same_class


class _Decider:
    """One decision's working state; every method is pure over it."""

    def __init__(self, facts: JobFacts, classification: Classification, lineage: Sequence[LineageAttempt],
                 policy: Policy, usage: ClassUsage, record: UsageRecord | None, predicted: int | None,
                 context: JobContext, now: datetime | None):
        self.facts = facts
        self.policy = policy
        self.usage = usage
        self.record = record if record is not None and _record_job_id(record) in (facts.job_id, None) else None
        self.predicted = predicted_memory_bytes_ok(predicted)
        self.context = context
        self.now = now
        self.family = str(getattr(classification.family, "value", classification.family))
        self.category = classification.category or self.family
        self.probability = classification.probability
        self.resolved: ResolvedRule = policy.resolve(
            self.family, self.category, project_path=facts.project_path, job_name=facts.name,
            ref=facts.ref, pipeline_source=facts.pipeline_source)
        self.rule = self.resolved.rule
        # Position of the failed job in its lineage.
        self.lineage = list(lineage)
        entries = list(lineage)
        pos = next((i for i, e in enumerate(entries) if e.job_id == facts.job_id), None)
        self.later = entries[pos + 1:] if pos is not None else []
        if pos is None:
            entries.append(LineageAttempt(job_id=facts.job_id, action=ORIGIN if not entries else Action.RETRY.value))
            pos = len(entries) - 1
        self.entries = entries[: pos + 1]
        self.entry = self.entries[-1]
        self.attempt = len(self.entries)
        self.current_class, self.current_index = self._current_class()
        self.placement = policy.placement_for(facts.project_path, facts.name)

    # ---------------------------------------------------------------- results

    def _decision(self, action: Action, reason: str, rule: str, **kw: Any) -> Decision:
        return Decision(
            action=action, reason=reason, rule=rule,
            attempt=kw.pop("attempt", self.attempt), budget=self.rule.budget,
            dry_run=self.resolved.dry_run, family=self.family, category=self.category,
            runner_class=kw.pop("runner_class", self.current_class.name if self.current_class else None),
            **kw)

    def none(self, reason: str, rule: str) -> Decision:
        return self._decision(Action.NONE, reason, rule)

    # ---------------------------------------------------------------- main flow

    def run(self, *, stop_at_unread: bool = False) -> tuple[Decision, Read | None]:
        """The decision, and (``stop_at_unread``) the read it waits for.

        A gate whose input is not read yet does not block: :func:`decide` goes on with the
        next gates.  With ``stop_at_unread`` (:func:`next_read`), the first such gate
        reached while the decision still acts stops the walk: its read is returned with
        the decision so far, so the reads are made in the gates' order, each only when
        no gate before it stopped the action.
        """
        decision = self._core()
        if decision.action == Action.NONE:
            return decision, None
        gates: tuple[Callable[[Decision], Decision | Read | None], ...] = (
            self._gate_retried, self._gate_superseded, self._gate_merge_request, self._gate_branch_moved,
            self._gate_definition)
        for gate in gates:
            out = gate(decision)
            if isinstance(out, Read):
                if stop_at_unread:
                    return decision, out
                continue
            if out is not None:
                return out, None
        return decision, None

    def _core(self) -> Decision:
        """Gates 1-8 and the action itself."""
        f, p = self.facts, self.policy
        what = self._what()
        if self.later:
            return self.none(f"{what}: already re-created as job {self.later[0].job_id} "
                             f"({self.later[0].action}); nothing more to do for job {f.job_id}", "lineage")
        if self.context.superseded_by is not None and p.skip_superseded:
            return self.none(f"{what}: a newer pipeline on {f.ref or 'the same ref'} superseded pipeline "
                             f"{f.pipeline_id}; not re-running outdated work", "skip_superseded")
        if f.allow_failure and p.skip_allow_failure:
            return self.none(f"{what}: the job is allowed to fail", "skip_allow_failure")
        age = self._age()
        if age is not None and p.max_job_age and age > p.max_job_age:
            return self.none(f"{what}: finished {_dur(age)} ago, longer than max_job_age {_dur(p.max_job_age)}",
                             "max_job_age")
        if self.rule.action == Action.NONE:
            return self.none(f"{what}: the policy leaves {self.family} failures alone ({self.resolved.source})",
                             self.resolved.source)
        below = self._below_floor()
        if below is not None:
            return self.none(f"{what}: {below}", f"{self.resolved.min_probability_source}.min_probability")
        used = self._reruns_for_family()
        budget = self.rule.budget
        if used >= budget:
            spent = f"{used} of {budget}" if budget else "a budget of 0"
            return self.none(f"{what}: re-run budget for {self.family} failures used up ({spent}, "
                             f"{self.resolved.budget_source})", self.resolved.budget_source)
        if self.attempt + 1 > p.max_attempts:
            return self.none(f"{what}: the lineage already has {self.attempt} jobs (max_attempts "
                             f"{p.max_attempts})", "max_attempts")
        self.rerun = used + 1
        self.last_rerun = self.rerun == budget or self.attempt + 1 == p.max_attempts
        self.delay = self._delay(self.rerun)
        if self.rule.action == Action.RETRY:
            return self._retry(what)
        if self.family == Family.TIMEOUT.value:
            return self._resize_timeout(what)
        return self._resize_memory(what)

    def _below_floor(self) -> str | None:
        """Why the verdict is too unsure to act on (gate 5), or ``None``.

        Only a verdict that carries a probability (the learned fallback's) is held to the rule's
        ``min_probability``; a rule's verdict carries none.  A probability that is not a number
        (bad stored data) cannot show the floor is met, so it does not act either.
        """
        floor, p = self.rule.min_probability, self.probability
        if not floor > 0 or p is None:
            return None
        number = isinstance(p, (int, float)) and not isinstance(p, bool) and math.isfinite(p)
        if number and p >= floor:
            return None
        src = self.resolved.min_probability_source
        shown = _probability(p, floor) if number else repr(p)
        return (f"the classifier gives {self.family} a probability of {shown}, below min_probability "
                f"{_floor(floor)} ({src}): too unsure a verdict to act on")

    # ---------------------------------------------------------------- the context's gates (9-13)

    def _unread(self, read: Read) -> bool:
        return read not in self.context.read

    def _gate_retried(self, d: Decision) -> Decision | None:
        if not self.context.retried:
            return None
        return self.none(f"job {self.facts.job_id} was already retried in GitLab (retry: keyword or a person)",
                         "already_retried")

    def _gate_superseded(self, d: Decision) -> Read | None:
        """Gate 2's input, read only now that the decision would act (a read per ref and cycle)."""
        f = self.facts
        if self.policy.skip_superseded and f.ref and f.pipeline_id and self._unread(Read.SUPERSEDED):
            return Read.SUPERSEDED
        return None  # read: gate 2 already applied it

    def _gate_merge_request(self, d: Decision) -> Decision | None:
        f = self.facts
        ref = f.ref or ""
        source = f.pipeline_source
        if d.action != Action.RESIZE or not (ref.startswith("refs/merge-requests/") or source in MR_SOURCES):
            return None
        return self.none(f"{d.reason}; but job {f.job_id} ran in a merge-request pipeline (ref {ref or '?'}, "
                         f"source {source}), and GitLab cannot create a pipeline on a merge request's ref "
                         "through POST /projects/:id/pipeline: re-run it from the merge request (or push) with "
                         "the larger limits", "merge_request_pipeline")

    def _gate_branch_moved(self, d: Decision) -> Decision | Read | None:
        """A resize creates a pipeline on the job's ref: it must still build the failed commit.

        When the branch head is no longer the job's commit (a ``[skip ci]`` push, a
        pipeline not created yet: not caught by the newer-pipeline check), the copy would
        build another commit: with ``skip_superseded``, ``none``; without it, the resize
        goes on and the copy carries ``RETRY_BOT_ORIGIN_SHA`` (a project can check it out).
        A bot-made copy is retried in place (jobRetry), at its own commit.
        """
        f = self.facts
        if d.action != Action.RESIZE or not f.sha or not f.ref or not self.policy.skip_superseded:
            return None
        if self.entries[0].job_id != f.job_id and self.context.manual_job:
            return None
        if self._unread(Read.BRANCH_HEAD):
            return Read.BRANCH_HEAD
        head = self.context.branch_head
        if not head or head == f.sha:
            return None
        return self.none(f"{d.reason}; but branch {f.ref} moved on from {f.sha[:12]} to {head[:12]} since the "
                         f"job ran, and a re-created job would build {head[:12]}, not the failed commit "
                         "(skip_superseded)", "skip_superseded")

    def _gate_definition(self, d: Decision) -> Decision | Read | None:
        if d.action != Action.RESIZE or resize_in_place(d, self.facts, self.lineage, self.context):
            return None
        if self._unread(Read.DEFINITION):
            return Read.DEFINITION
        if self.context.definition_error is None:
            return None
        return self.none(f"{d.reason}; but the job cannot be re-created: {self.context.definition_error}",
                         "job_definition")

    # ---------------------------------------------------------------- actions

    def _retry(self, what: str) -> Decision:
        rc = self.current_class
        if rc is not None:
            capped = self._concurrency_cap(rc)
            if capped:
                return self.none(f"{what}: {capped[0]}", capped[1])
        where = f" on runner class {rc.name!r}" if rc else ""
        return self._decision(
            Action.RETRY,
            f"{what}: retry{where} (attempt {self.attempt + 1}; re-run {self.rerun} of {self.rule.budget} "
            f"for {self.family} failures{self._wait_note()}; {self.resolved.source})",
            self.resolved.source, attempt=self.attempt + 1, tags=tuple(self.facts.tags),
            delay_seconds=self.delay)

    def _resize_memory(self, what: str) -> Decision:
        p, r, names = self.policy, self.policy.resize, self.policy.variables
        # helper_oom: the Kubernetes helper container was killed; size its own variables from the
        # job's helper limit (the record, lineage and peak describe the build container).
        helper = self.category == HELPER_OOM and bool(names.helper_memory_limit)
        if helper:
            names = replace(names, memory_limit=names.helper_memory_limit,
                            memory_request=names.helper_memory_request)
            limit, limit_src = self._helper_limit_in_force(names.memory_limit)
            request = _parse_var(self.facts.variables, names.memory_request, parse_memory) or None
            peak = None
        else:
            limit, limit_src = self._memory_limit_in_force()
            request = self._memory_request_in_force()
            peak = self._observed_peak()
        used = memory_used(limit, peak, request)
        if used is None and helper and (r.helper_max_memory is None or r.unknown_limit == UnknownLimit.NONE):
            return self.none(f"{what}: cannot size the helper container's resize: the job does not set "
                             f"{names.memory_limit} (the helper limit comes from the runner's config.toml) "
                             "and resize.helper_default_memory is unset"
                             + (" (nor resize.helper_max_memory, to go to the runners' ceiling)"
                                if r.helper_max_memory is None else ""), "resize.helper_default_memory")
        unknown = used is None
        if unknown and r.unknown_limit == UnknownLimit.NONE:
            return self.none(f"{what}: cannot size a resize: neither the memory limit in force nor an "
                             "observed peak is known (set resize.default_memory, a runner class "
                             "default_memory, or resize.unknown_limit = \"max\")", "resize.unknown_limit")
        global_cap = r.max_memory if self.resolved.max_memory is None else min(r.max_memory, self.resolved.max_memory)
        cap_src = "resize.max_memory" if global_cap == r.max_memory else self.resolved.max_memory_source
        if helper and r.helper_max_memory is not None and r.helper_max_memory < global_cap:
            # the runner refuses a helper overwrite above its helper_memory_limit_overwrite_max_allowed
            # (executors/kubernetes/overwrites.go): the job would fail before it started
            global_cap, cap_src = r.helper_max_memory, "resize.helper_max_memory"
        # Nothing known (resize.unknown_limit = "max"): one step to the largest limit allowed.
        need = global_cap if unknown else memory_need(used, r, self.predicted)
        target, _ = self._climb(need_memory=need, need_cpu=None, global_cap=global_cap,
                                requests_only=not names.memory_limit)
        if p.runner_classes and target is None:
            return self.none(f"{what}: no runner class is open to this job (placement_only or expensive "
                             "classes not allowed for it)", "runner_classes")
        rc = p.runner_classes[target] if target is not None else None
        cap = global_cap if rc is None else min(global_cap, rc.max_memory)
        if rc is not None and rc.max_memory <= global_cap:
            cap_src = f"runner_classes[{target}].max_memory"
        if rc is not None and not names.memory_limit and rc.request_cap < cap:
            # Requests only: the new memory goes into the request, so its ceiling applies.
            cap, cap_src = rc.request_cap, f"runner_classes[{target}].max_memory_request"
        if need > cap and r.beyond_top == BeyondTop.STOP and not unknown:
            return self.none(f"{what}: needs {human_bytes(need)}, more than the largest allowed "
                             f"{human_bytes(cap)} ({cap_src}; beyond_top = \"stop\")", "resize.beyond_top")
        new = min(need, cap)
        worst_case = self.last_rerun and r.last_attempt == LastAttempt.MAX and cap > new
        if worst_case:
            new = cap
        text, new_bytes = format_memory_within(new, cap, names.memory_format.value)
        if used is not None and new_bytes <= used:
            return self.none(f"{what}: already at the ceiling: {human_bytes(used)} in use when killed, "
                             f"the most allowed is {human_bytes(cap)} ({cap_src})", cap_src)
        if rc is not None:
            capped = self._concurrency_cap(rc)
            if capped:
                return self.none(f"{what}: {capped[0]}", capped[1])
        variables: dict[str, str] = {}
        limit_out: int | None = None
        request_out: int | None = None
        request_cap = rc.request_cap if rc is not None else cap
        if names.memory_limit:
            variables[names.memory_limit] = text
            limit_out = new_bytes
        if unknown and names.memory_limit:
            pass  # the request stays as it was: nothing known to reserve for
        elif names.memory_request and (names.raise_request or not names.memory_limit
                                       or (request is not None and request > new_bytes)):
            wanted = new_bytes
            if names.raise_request == SCALE_REQUEST and names.memory_limit and request and limit:
                # "scale": the request grows by the limit's own factor, so the re-run reserves what
                # its first attempt was expected to use, times how much bigger the job turned out.
                wanted = min(new_bytes, max(request, int(request * new_bytes / limit)))
            rtext, request_out = format_memory_within(min(wanted, request_cap), min(wanted, request_cap),
                                                      names.memory_format.value)
            variables[names.memory_request] = rtext
        notes = []
        base = f"{human_bytes(limit)} limit ({limit_src})" if limit else "no known limit"
        if peak:
            base += f", peak {human_bytes(peak)}"
        if unknown:
            default_key = "resize.helper_default_memory" if helper else "resize.default_memory"
            notes.append("nothing says the limit in force, so the largest allowed, as resize.unknown_limit = "
                         f"\"max\" says; {default_key} would size from the runners' default instead")
        elif self.predicted and need > memory_need(used, r):
            notes.append(f"raised to the prediction {human_bytes(self.predicted)}")
        if need > cap and not unknown:
            notes.append(f"capped by {cap_src}")
        if worst_case:
            notes.append("last re-run: the class maximum (last_attempt = \"max\")")
        if rc is not None and rc is not self.current_class:
            was = f" (was {self.current_class.name!r})" if self.current_class else ""
            notes.append(f"moves to runner class {rc.name!r}{was}")
        elif rc is not None:
            notes.append(f"stays on runner class {rc.name!r}")
        note = "; ".join(notes)
        reason = (f"{what} with {base}: re-create with {names.memory_limit or names.memory_request}={text}"
                  f"{' (' + note + ')' if note else ''}; attempt {self.attempt + 1}, re-run {self.rerun} of "
                  f"{self.rule.budget} for {self.family} failures{self._wait_note()} ({self.resolved.source})")
        return self._decision(
            Action.RESIZE, reason, self.resolved.source, attempt=self.attempt + 1,
            variables=variables, tags=rc.tags if rc is not None else tuple(self.facts.tags),
            runner_class=rc.name if rc is not None else None,
            memory_limit_bytes=None if helper else limit_out,
            memory_request_bytes=None if helper else request_out, delay_seconds=self.delay)

    def _resize_timeout(self, what: str) -> Decision:
        p, r, names = self.policy, self.policy.resize, self.policy.variables
        if r.cpu is None and r.time is None:
            return self.none(f"{what}: resize on a timeout needs [resize.cpu] or [resize.time]", "resize")
        cpu_in = new_cpu = None
        if r.cpu is not None:
            cpu_in = self._cpu_in_force() or r.cpu.default
            new_cpu = resize_cpu(cpu_in, r.cpu)  # the need, before the class's cap
        t_in = new_t = None
        if r.time is not None:
            t_in = _positive(self.entry.timeout_seconds) or r.time.default
            new_t = resize_timeout(t_in, r.time)
        limit, _ = self._memory_limit_in_force()
        target, _ = self._climb(need_memory=limit, need_cpu=new_cpu, global_cap=r.max_memory)
        if p.runner_classes and target is None:
            return self.none(f"{what}: no runner class is open to this job", "runner_classes")
        rc = p.runner_classes[target] if target is not None else None
        if r.cpu is not None and cpu_in is not None:
            new_cpu = resize_cpu(cpu_in, r.cpu, cap=rc.max_cpus if rc is not None else None)
        cpu_up = new_cpu is not None and cpu_in is not None and new_cpu > cpu_in
        time_up = new_t is not None and t_in is not None and new_t > t_in
        if not cpu_up and not time_up:
            return self.none(f"{what}: already at the ceiling for CPU and time", "resize")
        if rc is not None:
            capped = self._concurrency_cap(rc)
            if capped:
                return self.none(f"{what}: {capped[0]}", capped[1])
        variables: dict[str, str] = {}
        cpu_limit = cpu_request = None
        parts = []
        if cpu_up and new_cpu is not None:
            ctext = format_cpu(new_cpu)
            if names.cpu_limit:
                variables[names.cpu_limit] = ctext
                cpu_limit = new_cpu
            if names.cpu_request and (names.raise_request or not names.cpu_limit):
                variables[names.cpu_request] = ctext
                cpu_request = new_cpu
            parts.append(f"CPU {format_cpu(cpu_in or new_cpu)} -> {ctext}")
        if time_up and new_t is not None and t_in is not None:
            parts.append(f"timeout {_dur(t_in)} -> {_dur(new_t)}")
        moved = ""
        if rc is not None and rc is not self.current_class:
            moved = f", on runner class {rc.name!r}"
        reason = (f"{what}: re-create with {', '.join(parts)}{moved}; attempt {self.attempt + 1}, re-run "
                  f"{self.rerun} of {self.rule.budget} for {self.family} failures{self._wait_note()} "
                  f"({self.resolved.source})")
        return self._decision(
            Action.RESIZE, reason, self.resolved.source, attempt=self.attempt + 1, variables=variables,
            tags=rc.tags if rc is not None else tuple(self.facts.tags),
            runner_class=rc.name if rc is not None else None,
            cpu_limit_cores=cpu_limit, cpu_request_cores=cpu_request,
            timeout_seconds=new_t if time_up else None, delay_seconds=self.delay)

    # ---------------------------------------------------------------- facts about the job

    def _what(self) -> str:
        cat = f"/{self.category}" if self.category and self.category != self.family else ""
        return f"job {self.facts.job_id} {self.facts.name!r} failed: {self.family}{cat}"

    def _current_class(self) -> tuple[RunnerClass | None, int | None]:
        p = self.policy
        if not p.runner_classes:
            return None, None
        name = self.entry.runner_class
        if name is not None and p.class_index(name) is not None:
            return p.runner_class(name), p.class_index(name)
        by_tags = p.class_for_tags(tuple(self.facts.tags))
        if by_tags is not None:
            return by_tags, p.class_index(by_tags.name)
        placed = p.placement_for(self.facts.project_path, self.facts.name)
        if placed is not None and p.class_index(placed.runner_class) is not None:
            return p.runner_class(placed.runner_class), p.class_index(placed.runner_class)
        return None, None

    def _reruns_for_family(self) -> int:
        """Jobs of the lineage created because an earlier job failed with this family."""
        fams = [e.family for e in self.entries]
        fams[-1] = self.family
        count = 0
        for j in range(1, len(self.entries)):
            if self.entries[j].action == ORIGIN:
                continue
            prev = fams[j - 1]
            if prev is None or prev == self.family:
                count += 1
        return count

    def _memory_limit_in_force(self) -> tuple[int | None, str]:
        rec = self.record
        v = _get(rec, "limits", "memory_limit_bytes")
        if v:
            return int(v), "usage record"
        if _positive(self.entry.memory_limit_bytes):
            return int(self.entry.memory_limit_bytes), "lineage"
        name = self.policy.variables.memory_limit
        parsed = _parse_var(self.facts.variables, name, parse_memory)
        if parsed:
            return int(parsed), f"job variable {name}"
        if self.current_class is not None and self.current_class.default_memory:
            return self.current_class.default_memory, f"runner class {self.current_class.name!r} default"
        if self.policy.resize.default_memory:
            return self.policy.resize.default_memory, "resize.default_memory"
        return None, ""

    def _helper_limit_in_force(self, name: str) -> tuple[int | None, str]:
        parsed = _parse_var(self.facts.variables, name, parse_memory)
        if parsed:
            return int(parsed), f"job variable {name}"
        if self.policy.resize.helper_default_memory:
            return self.policy.resize.helper_default_memory, "resize.helper_default_memory"
        return None, ""

    def _memory_request_in_force(self) -> int | None:
        v = _get(self.record, "limits", "memory_request_bytes")
        if v:
            return int(v)
        if _positive(self.entry.memory_request_bytes):
            return int(self.entry.memory_request_bytes)
        parsed = _parse_var(self.facts.variables, self.policy.variables.memory_request, parse_memory)
        return int(parsed) if parsed else None

    def _observed_peak(self) -> int | None:
        peaks = [int(v) for v in (_get(self.record, "usage", "memory_peak_bytes"),
                                  _positive(self.entry.memory_peak_bytes)) if v]
        return max(peaks) if peaks else None

    def _cpu_in_force(self) -> float | None:
        v = _get(self.record, "limits", "cpu_limit_cores")
        if v:
            return float(v)
        if _positive(self.entry.cpu_limit_cores):
            return float(self.entry.cpu_limit_cores)
        names = self.policy.variables
        for name in (names.cpu_limit, names.cpu_request):
            parsed = _parse_var(self.facts.variables, name, parse_cpu)
            if parsed:
                return float(parsed)
        v = _get(self.record, "limits", "cpu_request_cores")
        return float(v) if v else None

    def _finished_at(self) -> datetime | None:
        return parse_iso_time(self.facts.finished_at) or parse_iso_time(self.entry.finished_at)

    def _age(self) -> float | None:
        if self.now is None:
            return None
        done = self._finished_at()
        if done is None:
            return None
        return max(0.0, (aware(self.now) - done).total_seconds())

    def _delay(self, rerun: int) -> float:
        delay = self.rule.backoff.delay(rerun)
        age = self._age()
        if age is not None:
            delay = max(0.0, delay - age)
        return float(delay)

    def _wait_note(self) -> str:
        return f", after {_dur(self.delay)}" if self.delay > 0 else ""

    # ---------------------------------------------------------------- ladder and caps

    def _open(self, i: int) -> bool:
        """May this job run on class ``i``?"""
        rc = self.policy.runner_classes[i]
        if i == self.current_index:
            return True
        if rc.placement_only and (self.placement is None or self.placement.runner_class != rc.name):
            return False
        if rc.expensive and not self.resolved.allow_expensive:
            return False
        return True

    def _climb(self, need_memory: int | None, need_cpu: float | None, global_cap: int,
               requests_only: bool = False) -> tuple[int | None, bool]:
        """The lowest open class at or above the current one that fits; else the highest open one.

        ``requests_only``: memory goes into the request, so ``max_memory_request`` is what must fit.

        Returns ``(index, fits)``; ``(None, False)`` when no class is open or there are no classes.
        """
        classes = self.policy.runner_classes
        if not classes:
            return None, False
        start = self.current_index if self.current_index is not None else 0
        open_ = [i for i in range(start, len(classes)) if self._open(i)]
        if not open_:
            return None, False
        for i in open_:
            rc = classes[i]
            room = rc.request_cap if requests_only else rc.max_memory
            mem_ok = need_memory is None or min(room, global_cap) >= need_memory
            cpu_ok = need_cpu is None or rc.max_cpus >= need_cpu
            if mem_ok and cpu_ok:
                return i, True
        return open_[-1], False

    def _concurrency_cap(self, rc: RunnerClass) -> tuple[str, str] | None:
        """``(reason, rule)`` when one more job of this user/project in ``rc`` would pass a cap."""
        i = self.policy.class_index(rc.name)
        f = self.facts
        if rc.max_concurrent_per_user is not None:
            n = self.usage.user_count(rc.name, f.user)
            if n >= rc.max_concurrent_per_user:
                return (f"runner class {rc.name!r} already runs {n} job(s) of user {f.user or '(unknown)'!r} "
                        f"(max_concurrent_per_user {rc.max_concurrent_per_user}); not starting another",
                        f"runner_classes[{i}].max_concurrent_per_user")
        if rc.max_concurrent_per_project is not None:
            project = f.project_path or str(f.project_id)
            n = self.usage.project_count(rc.name, project)
            if n >= rc.max_concurrent_per_project:
                return (f"runner class {rc.name!r} already runs {n} job(s) of project {project!r} "
                        f"(max_concurrent_per_project {rc.max_concurrent_per_project}); not starting another",
                        f"runner_classes[{i}].max_concurrent_per_project")
        return None


# --------------------------------------------------------------------------- helpers


def predicted_memory_bytes_ok(value: int | None) -> int | None:
    """A usable prediction (a positive integer) or ``None``."""
    if value is None or isinstance(value, bool):
        return None
    try:
        v = int(value)
    except (TypeError, ValueError):
        return None
    return v if v > 0 else None


def _positive(value: Any) -> Any:
    """``value`` when it is a positive number, else ``None`` (bad data is unknown, not zero)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        return None
    return value


def _record_job_id(record: UsageRecord) -> int | None:
    return record.job.id


def _get(record: UsageRecord | None, part: str, name: str) -> Any:
    """``record.part.name`` when it is a positive number, else ``None``."""
    if record is None:
        return None
    v = getattr(getattr(record, part), name)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
        return None
    return v


def _parse_var(variables: Mapping[str, str], name: str, parse: Any) -> float | int | None:
    if not name or not variables:
        return None
    raw = variables.get(name)
    if raw is None:
        return None
    try:
        return parse(raw)
    except QuantityError:
        return None




def _floor(floor: float) -> str:
    """A ``min_probability`` as written, with two decimals at least (0.9 -> ``0.90``, 0.955 -> ``0.955``)."""
    text = f"{floor:.2f}"
    return text if float(text) == floor else f"{floor:g}"


def _probability(p: float, floor: float) -> str:
    """``p`` with two decimals, or as many more as it takes to read as below ``floor`` (0.8996 < 0.90)."""
    for digits in range(2, 7):
        text = f"{p:.{digits}f}"
        if float(text) < floor:
            return text
    return repr(p)


def _dur(seconds: float) -> str:
    s = float(seconds)
    if s < 120:
        return f"{s:.0f}s"
    if s < 7200:
        return f"{s / 60:.0f}m"
    if s < 172800:
        return f"{s / 3600:.1f}h"
    return f"{s / 86400:.1f}d"
