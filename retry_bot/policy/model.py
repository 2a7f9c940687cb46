"""The policy as plain data: a tree of frozen dataclasses.

A :class:`Policy` is what an admin wrote in ``policy.toml`` with every default
filled in and every value already parsed (quantities to bytes and cores,
durations to seconds, regexes compiled).  Loading and validation live in
:mod:`retry_bot.policy.load`; this module only describes the shape and offers
small, pure look-ups (which rule applies to a job, which runner class a job
starts on).

Vocabulary:

* a **lineage** is a job that failed in GitLab (the *origin*) plus every job
  the bot re-created from it; its jobs are *attempts* numbered from 1;
* a **budget** is how many re-runs (retries or resizes) the bot may create in
  one lineage because of failures of one family; the origin is not counted,
  as in GitLab's ``retry:max``;
* a **runner class** is one rung of the ladder of runners the bot may send a
  job to, identified by the tags that route a job there.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Mapping

from retry_bot.model import FAMILIES, Family

__all__ = [
    "Action",
    "MemoryFormat",
    "BeyondTop",
    "LastAttempt",
    "UnknownLimit",
    "Backoff",
    "Rule",
    "StormRule",
    "RuleUpdate",
    "VariableNames",
    "CpuRule",
    "TimeRule",
    "ResizeRule",
    "RunnerClass",
    "Placement",
    "SourceRule",
    "Override",
    "Policy",
    "PIPELINE_SOURCES",
    "MAX_BUDGET",
    "SCALE_REQUEST",
    "ResolvedRule",
]

#: Largest budget a policy may give one family (Buildkite's per-rule maximum is 10,
#: GitLab's ``retry:max`` is 2: 20 is generous and still bounded).
MAX_BUDGET = 20

#: GitLab's ``pipeline.source`` values (``Enums::Ci::Pipeline.sources``), accepted as
#: keys of ``[pipeline_sources]``.  ``auto_devops_source`` and friends are config
#: sources, not pipeline sources, and are deliberately absent.
PIPELINE_SOURCES: tuple[str, ...] = (
    "unknown", "push", "web", "trigger", "schedule", "api", "external", "pipeline", "chat",
    "webide", "merge_request_event", "external_pull_request_event", "parent_pipeline",
    "ondemand_dast_scan", "ondemand_dast_validation", "security_orchestration_policy",
    "container_registry_push", "duo_workflow", "pipeline_execution_policy_schedule",
)


class Action(StrEnum):
    """What the bot does with a failed job."""

    #: GitLab's plain retry: the same job definition, variables and tags.
    RETRY = "retry"
    #: Re-create the job (as a manual job played with new variables) with more resources.
    RESIZE = "resize"
    #: Leave the job alone.
    NONE = "none"


class MemoryFormat(StrEnum):
    """How memory amounts are written into job variables (see ``format_memory``)."""

    BINARY = "binary"
    DECIMAL = "decimal"
    BYTES = "bytes"


class BeyondTop(StrEnum):
    """What a resize does when the need passes the top of the ladder (or ``resize.max_memory``)."""

    #: Use the largest allowed amount, if that is still more than what was in force.
    CAP = "cap"
    #: Leave the job alone: the need is more than the farm offers.
    STOP = "stop"


class UnknownLimit(StrEnum):
    """What a memory resize does when nothing says the limit in force and no peak was observed.

    (No usage record, no lineage, no memory variable, no runner-class or
    ``resize.default_memory`` default: e.g. a Kubernetes ``OOMKilled`` job under
    the runner's own default limit.)
    """

    #: Re-create with the largest limit allowed for the job (``max_memory`` and its
    #: runner class): one step to the top, never below the unknown limit, since a
    #: runner's default cannot usefully exceed what it lets jobs ask for.  The
    #: memory request is left as it was (nothing known to reserve for).
    MAX = "max"
    #: Leave the job alone and say why.
    NONE = "none"


class LastAttempt(StrEnum):
    """How the last resize a budget allows is sized."""

    #: Like every other resize: the bump rule (and the prediction).
    BUMP = "bump"
    #: The largest amount the chosen runner class allows: HTCondor's "single
    #: worst-case retry value" for the attempt after which there is no other.
    MAX = "max"


@dataclass(frozen=True)
class Backoff:
    """Delay before the k-th re-run of a lineage for one family: ``initial * factor**(k-1)``, at most ``max``.

    Named like tenacity's ``wait_exponential_jitter(initial, max, exp_base)``,
    without jitter: decisions are deterministic.
    """

    initial: float = 0.0
    factor: float = 2.0
    max: float = 3600.0

    def delay(self, rerun: int) -> float:
        """Seconds to wait before re-run number ``rerun`` (1 = the first re-run)."""
        if self.initial <= 0 or rerun < 1:
            return 0.0
        exponent = min(rerun - 1, 64)
        try:
            value = self.initial * math.pow(self.factor, exponent)
        except OverflowError:  # pragma: no cover - factor bounded by validation
            value = math.inf
        return float(min(value, self.max))


@dataclass(frozen=True)
class Rule:
    """The complete rule of one family: action, budget, backoff and the classifier's floor."""

    action: Action
    budget: int
    backoff: Backoff = field(default_factory=Backoff)
    #: Act on a verdict only when the classifier is at least this sure of it (``0.0``: any verdict).
    #: Only verdicts that carry a probability (the learned fallback's,
    #: :attr:`retry_bot.model.Classification.probability`) are held to it; a rule's verdict carries none.
    min_probability: float = 0.0


@dataclass(frozen=True)
class RuleUpdate:
    """A partial rule (categories, overrides): ``None`` means "keep what the family says"."""

    action: Action | None = None
    budget: int | None = None
    backoff: Backoff | None = None
    min_probability: float | None = None

    def apply(self, rule: Rule) -> Rule:
        return Rule(
            action=self.action if self.action is not None else rule.action,
            budget=self.budget if self.budget is not None else rule.budget,
            backoff=self.backoff if self.backoff is not None else rule.backoff,
            min_probability=self.min_probability if self.min_probability is not None else rule.min_probability,
        )

    @property
    def empty(self) -> bool:
        return (self.action is None and self.budget is None and self.backoff is None
                and self.min_probability is None)


#: ``[variables] raise_request = "scale"``: a resize scales the request by the limit's factor.
SCALE_REQUEST = "scale"


@dataclass(frozen=True)
class VariableNames:
    """The job variables a decision sets, and how their values are written.

    An empty name means "never set this variable" (Spack, for example, sets
    requests only and lets the runner's default limit apply).
    """

    memory_limit: str = "KUBERNETES_MEMORY_LIMIT"
    memory_request: str = "KUBERNETES_MEMORY_REQUEST"
    cpu_limit: str = "KUBERNETES_CPU_LIMIT"
    cpu_request: str = "KUBERNETES_CPU_REQUEST"
    #: The Kubernetes executor's helper container (sources, caches, artifacts) has its own limit,
    #: overwritable per job (gitlab-runner common/config.go KubernetesConfig.HelperMemoryLimit,
    #: env KUBERNETES_HELPER_MEMORY_LIMIT, capped by helper_memory_limit_overwrite_max_allowed):
    #: a ``helper_oom`` resize sets these instead.  "" = resize the build variables instead.
    helper_memory_limit: str = "KUBERNETES_HELPER_MEMORY_LIMIT"
    helper_memory_request: str = "KUBERNETES_HELPER_MEMORY_REQUEST"
    memory_format: MemoryFormat = MemoryFormat.BINARY
    #: What a memory resize does to the request: ``"scale"`` (the default) multiplies it by the
    #: limit's own factor, so the re-run reserves what its first attempt was expected to use times
    #: how much bigger the job turned out; ``True``: request = the new limit (guaranteed, but a
    #: re-run's average use is then a quarter of its reservation on Spack-like farms); ``False``:
    #: the request stays as it was.  A CPU resize raises the CPU request with the limit unless False.
    raise_request: bool | str = SCALE_REQUEST


@dataclass(frozen=True)
class CpuRule:
    """Optional CPU bump for ``resize`` on timeouts: ``max(cpu * ratio, cpu + min_bump)``, capped."""

    ratio: float = 2.0
    min_bump: float = 1.0
    max_cpus: float = 16.0
    #: CPU assumed in force when neither the record nor the variables say.
    default: float = 1.0


@dataclass(frozen=True)
class TimeRule:
    """Optional timeout bump for ``resize`` on timeouts: ``max(t * ratio, t + min_bump)``, capped."""

    ratio: float = 2.0
    min_bump: float = 1800.0
    max: float = 6 * 3600.0
    #: Timeout assumed in force when the lineage does not say (GitLab's default: 1 h).
    default: float = 3600.0


@dataclass(frozen=True)
class ResizeRule:
    """How ``resize`` sizes memory (VPA's OOM rule, with a cap)."""

    ratio: float = 1.5
    min_bump: int = 512 * 2**20
    granularity: int = 256 * 2**20
    max_memory: int = 96 * 2**30
    #: Memory assumed in force when neither the record, the lineage, the job
    #: variables nor the runner class say (``None``: then a resize needs a peak).
    default_memory: int | None = None
    #: When even that is unknown (and no peak was observed): see :class:`UnknownLimit`.
    unknown_limit: UnknownLimit = UnknownLimit.MAX
    #: The Kubernetes helper container's limit in force when the job does not set
    #: ``variables.helper_memory_limit``: the runners' ``helper_memory_limit``
    #: (``[runners.kubernetes]``).  ``None``: unknown (the build's ``default_memory`` says
    #: nothing about the helper).
    helper_default_memory: int | None = None
    #: The most a ``helper_oom`` resize may ask for: the runners'
    #: ``helper_memory_limit_overwrite_max_allowed`` (a value above it fails the job:
    #: ``the resource "memory" requested ... is higher than limit allowed``).  ``None``:
    #: unknown, then only ``max_memory`` caps it and an unknown helper limit cannot be sized.
    helper_max_memory: int | None = None
    beyond_top: BeyondTop = BeyondTop.CAP
    last_attempt: LastAttempt = LastAttempt.BUMP
    cpu: CpuRule | None = None
    time: TimeRule | None = None


@dataclass(frozen=True)
class RunnerClass:
    """One rung of the runner-class ladder.

    ``max_memory`` / ``max_cpus`` are the runners' Kubernetes
    ``memory_limit_overwrite_max_allowed`` / ``cpu_limit_overwrite_max_allowed``
    (or the custom-executor host caps): a value above them fails the job.
    """

    name: str
    tags: tuple[str, ...]
    max_memory: int
    max_cpus: float
    #: ``memory_request_overwrite_max_allowed`` when lower than ``max_memory`` (Spack: 64G vs 96G).
    max_memory_request: int | None = None
    #: The runner's default memory limit (what a job without variables gets).
    default_memory: int | None = None
    expensive: bool = False
    #: Reachable only by jobs a ``[[placement]]`` entry sends to it (Copr grants
    #: its powerful builders per regex, on request).
    placement_only: bool = False
    max_concurrent_per_user: int | None = None
    max_concurrent_per_project: int | None = None

    @property
    def request_cap(self) -> int:
        return self.max_memory_request if self.max_memory_request is not None else self.max_memory


@dataclass(frozen=True)
class Placement:
    """An allow-list entry: jobs matching both patterns start on ``runner_class``.

    Patterns are Python regexes matched against the *whole* project path and
    job name (``re.fullmatch``); an absent pattern matches everything.
    """

    runner_class: str
    project: re.Pattern[str] | None = None
    job: re.Pattern[str] | None = None

    def matches(self, project_path: str, job_name: str) -> bool:
        return _full(self.project, project_path) and _full(self.job, job_name)


@dataclass(frozen=True)
class SourceRule:
    """Priority of one pipeline source (OSBS throttles auto-rebuilds the same way)."""

    #: Budgets are multiplied by this and rounded down (0.5 turns 3 into 1).
    budget_factor: float = 1.0
    #: And then capped at this (``None``: no cap).
    max_budget: int | None = None
    #: May a job from such a pipeline be sent to an ``expensive`` runner class?
    allow_expensive: bool = True


@dataclass(frozen=True)
class Override:
    """Per-project / per-job changes; every matching override applies, in file order."""

    project: re.Pattern[str] | None = None
    job: re.Pattern[str] | None = None
    ref: re.Pattern[str] | None = None
    #: Only for failures of this family / category (``None``: any).
    family: Family | None = None
    category: str | None = None
    update: RuleUpdate = field(default_factory=RuleUpdate)
    #: A lower memory cap for the matching jobs (never raises the ladder's).
    max_memory: int | None = None
    dry_run: bool | None = None

    def matches(self, project_path: str, job_name: str, ref: str, family: str, category: str) -> bool:
        if self.family is not None and self.family != family:
            return False
        if self.category is not None and self.category != category:
            return False
        return _full(self.project, project_path) and _full(self.job, job_name) and _full(self.ref, ref)


@dataclass(frozen=True)
class ResolvedRule:
    """The rule in force for one failure after categories, overrides and the pipeline source."""

    rule: Rule
    #: Key path of the most specific policy entry that applied (for ``Decision.rule``):
    #: ``families.oom``, ``categories.dns_error`` or ``overrides[2]``.
    source: str
    #: Key path of the entry that set the budget.
    budget_source: str
    max_memory: int | None = None
    #: Key path of the override that set ``max_memory``.
    max_memory_source: str = ""
    dry_run: bool = False
    allow_expensive: bool = True
    #: Key path of the entry that set ``rule.min_probability`` (``families.oom``,
    #: ``categories.learned_oom``, ``overrides[2]``); ``""`` when no entry set one.
    min_probability_source: str = ""


@dataclass(frozen=True)
class StormRule:
    """The storm brake (``[storm]``): hold a category's re-runs while it fails at an abnormal rate.

    A category of one of ``families`` *trips* the brake when ``trip_failures`` new
    failed jobs of it are seen within ``window`` seconds.  While braked, its
    re-runs are held (decided, recorded, not sent, no budget spent), except
    ``probes`` re-runs let through every ``probe_interval``; once
    ``release_successes`` re-run jobs of the category succeed, the brake releases
    and the held jobs are sent, ``release_per_minute`` a minute (0: all at once).
    """

    window: float = 300.0
    trip_failures: int = 30
    probes: int = 2
    probe_interval: float = 120.0
    release_successes: int = 2
    release_per_minute: int = 0
    families: tuple[str, ...] = (Family.INFRASTRUCTURE.value,)


def _default_families() -> Mapping[str, Rule]:
    return dict({
        Family.OOM.value: Rule(Action.RESIZE, 3),
        Family.TIMEOUT.value: Rule(Action.NONE, 1),
        Family.INFRASTRUCTURE.value: Rule(Action.RETRY, 2, Backoff(initial=60.0, factor=2.0, max=900.0)),
        Family.BUILD_ERROR.value: Rule(Action.NONE, 0),
        Family.CONFIG_ERROR.value: Rule(Action.NONE, 0),
        Family.CANCELED.value: Rule(Action.NONE, 0),
        Family.UNKNOWN.value: Rule(Action.NONE, 0),
    })


@dataclass(frozen=True)
class Policy:
    """An effective policy: what ``retry-bot policy show`` prints.

    Mappings are plain dicts so a policy pickles (for worker processes); treat
    them as read-only.
    """

    dry_run: bool = False
    skip_superseded: bool = True
    skip_allow_failure: bool = False
    #: Jobs that finished longer ago than this (seconds) are left alone; ``None``: no limit.
    max_job_age: float | None = 24 * 3600.0
    #: Hard cap on the jobs of one lineage (origin included), whatever the family budgets say.
    max_attempts: int = 6
    variables: VariableNames = field(default_factory=VariableNames)
    families: Mapping[str, Rule] = field(default_factory=_default_families)
    categories: Mapping[str, RuleUpdate] = field(default_factory=dict)
    resize: ResizeRule = field(default_factory=ResizeRule)
    runner_classes: tuple[RunnerClass, ...] = ()
    placement: tuple[Placement, ...] = ()
    pipeline_sources: Mapping[str, SourceRule] = field(default_factory=dict)
    overrides: tuple[Override, ...] = ()
    #: The ``[prediction]`` table as written; the predictor (``retry_bot.predict``)
    #: owns and validates it.
    prediction: Mapping[str, Any] = field(default_factory=dict)
    #: The storm brake; ``None``: off (no ``[storm]`` table, or ``enabled = false``).
    storm: StormRule | None = None

    # ------------------------------------------------------------------ look-ups

    def runner_class(self, name: str | None) -> RunnerClass | None:
        """The class called ``name``, or ``None``."""
        if name is None:
            return None
        for rc in self.runner_classes:
            if rc.name == name:
                return rc
        return None

    def class_index(self, name: str | None) -> int | None:
        for i, rc in enumerate(self.runner_classes):
            if rc.name == name:
                return i
        return None

    def placement_for(self, project_path: str, job_name: str) -> Placement | None:
        """The first ``[[placement]]`` entry matching the job, or ``None``."""
        for p in self.placement:
            if p.matches(project_path, job_name):
                return p
        return None

    def class_for_tags(self, tags: tuple[str, ...] | list[str]) -> RunnerClass | None:
        """The highest class whose tags are all among ``tags`` (a job's ``tag_list``)."""
        have = set(tags)
        found = None
        for rc in self.runner_classes:
            if rc.tags and set(rc.tags) <= have:
                found = rc
        return found

    def memory_cap(self) -> int:
        """The most memory any resize may ask for: ``resize.max_memory`` and the top of the ladder."""
        cap = self.resize.max_memory
        if self.runner_classes:
            cap = min(cap, max(rc.max_memory for rc in self.runner_classes))
        return cap

    def resolve(
        self,
        family: str,
        category: str,
        *,
        project_path: str = "",
        job_name: str = "",
        ref: str = "",
        pipeline_source: str | None = None,
    ) -> ResolvedRule:
        """The rule in force for a failure: family, then category, then matching overrides, then source."""
        fam = family if family in self.families else Family.UNKNOWN.value
        rule = self.families[fam]
        source = budget_source = f"families.{fam}"
        floor_source = source if rule.min_probability > 0 else ""
        cat = self.categories.get(category)
        if cat is not None:
            rule = cat.apply(rule)
            source = f"categories.{category}"
            if cat.budget is not None:
                budget_source = f"categories.{category}"
            if cat.min_probability is not None:
                floor_source = f"categories.{category}"
        max_memory: int | None = None
        max_memory_source = ""
        dry_run = self.dry_run
        for i, ov in enumerate(self.overrides):
            if not ov.matches(project_path, job_name, ref, fam, category):
                continue
            rule = ov.update.apply(rule)
            if not ov.update.empty or ov.max_memory is not None:
                source = f"overrides[{i}]"
            if ov.update.budget is not None:
                budget_source = f"overrides[{i}]"
            if ov.update.min_probability is not None:
                floor_source = f"overrides[{i}]"
            if ov.max_memory is not None and (max_memory is None or ov.max_memory < max_memory):
                max_memory, max_memory_source = ov.max_memory, f"overrides[{i}].max_memory"
            if ov.dry_run is not None:
                dry_run = ov.dry_run or self.dry_run
        allow_expensive = True
        src = self.pipeline_sources.get(pipeline_source or "")
        if src is not None:
            budget = int(math.floor(rule.budget * src.budget_factor + 1e-9))
            if src.max_budget is not None:
                budget = min(budget, src.max_budget)
            if budget != rule.budget:
                rule = replace(rule, budget=budget)
                budget_source = f"pipeline_sources.{pipeline_source}"
            allow_expensive = src.allow_expensive
        return ResolvedRule(rule=rule, source=source, budget_source=budget_source,
                            max_memory=max_memory, max_memory_source=max_memory_source, dry_run=dry_run,
                            allow_expensive=allow_expensive,
                            min_probability_source=floor_source if rule.min_probability > 0 else "")


def _full(pattern: re.Pattern[str] | None, text: str) -> bool:
    return pattern is None or pattern.fullmatch(text or "") is not None


assert set(_default_families()) == set(FAMILIES)
