"""Plain data shared by the classifier, the policy, the decision function and the poller.

Nothing here does I/O.  The poller (an edge) fills :class:`JobFacts` from
GitLab's REST and GraphQL answers; everything downstream is pure.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any, Mapping

__all__ = ["Family", "JobFacts", "Classification", "FAMILIES", "LineageAttempt", "JobContext", "Read",
           "LINEAGE_ACTIONS", "ORIGIN"]


class Family(StrEnum):
    """The coarse failure families every fine category belongs to."""

    OOM = "oom"
    TIMEOUT = "timeout"
    INFRASTRUCTURE = "infrastructure"
    BUILD_ERROR = "build_error"
    CONFIG_ERROR = "config_error"
    CANCELED = "canceled"
    UNKNOWN = "unknown"


FAMILIES: tuple[str, ...] = tuple(f.value for f in Family)


@dataclass(frozen=True)
class JobFacts:
    """What is known about one failed job before any judgment.

    Field names follow GitLab's job JSON (``failure_reason``, ``ref``,
    ``tag_list`` as ``tags``); ``exit_code`` comes from GraphQL ``CiJob.exitCode``
    and is ``None`` when GitLab does not know it.
    """

    job_id: int
    name: str
    project_id: int = 0
    project_path: str = ""
    pipeline_id: int = 0
    stage: str = ""
    ref: str = ""
    sha: str | None = None
    status: str = "failed"
    failure_reason: str | None = None
    exit_code: int | None = None
    tags: tuple[str, ...] = ()
    runner: str | None = None
    pipeline_source: str | None = None
    protected: bool | None = None
    user: str | None = None
    allow_failure: bool = False
    created_at: str | None = None
    finished_at: str | None = None
    web_url: str | None = None
    #: Variables known to be in force for the job (resource variables, spec keys).
    variables: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the state store's ``jobs.facts`` column); :meth:`from_dict` reads it back."""
        d = asdict(self)
        d["tags"] = list(self.tags)
        d["variables"] = dict(self.variables)
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "JobFacts":
        """The facts :meth:`to_dict` wrote (unknown keys ignored, so older rows still load)."""
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in data.items() if k in names}
        kw["tags"] = tuple(str(t) for t in kw.get("tags") or ())
        kw["variables"] = {str(k): str(v) for k, v in (kw.get("variables") or {}).items()}
        kw.setdefault("job_id", 0)
        kw.setdefault("name", "")
        return cls(**kw)


@dataclass(frozen=True)
class Classification:
    """The classifier's verdict: a fine category, its family, the rule and the evidence."""

    category: str
    family: Family
    rule: str
    #: Human-readable evidence: matching trace line(s), or the usage record's figures.
    evidence: tuple[str, ...] = ()
    #: ``strong`` (kernel counters, explicit failure reason) or ``weak`` (text, bare 137).
    confidence: str = "strong"
    #: How sure the classifier is of ``family`` (0 to 1), when it says: the learned fallback's posterior
    #: of the family it names.  ``None`` for a rule's verdict (a rule matches or not).  A policy's
    #: ``min_probability`` holds only verdicts that carry one.
    probability: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the state store's ``jobs.classification`` column; at most 10 evidence lines).

        ``probability`` is written only when there is one, so a rule's verdict is stored as before."""
        out: dict[str, Any] = {"family": self.family.value, "category": self.category, "rule": self.rule,
                               "evidence": list(self.evidence)[:10], "confidence": self.confidence}
        if self.probability is not None:
            out["probability"] = self.probability
        return out


#: The lineage action of the job every other job of its lineage was re-created from.
ORIGIN = "origin"
#: How a job of a lineage came to be: the origin, a plain GitLab retry, or a re-creation with new variables
#: (``resize``; a re-run in place with GraphQL ``jobRetry(variables:)`` counts as one too).  The last two
#: are the values of :class:`retry_bot.policy.model.Action`'s ``RETRY`` and ``RESIZE``.
LINEAGE_ACTIONS: tuple[str, ...] = (ORIGIN, "retry", "resize")


@dataclass(frozen=True)
class LineageAttempt:
    """One job of a lineage (an origin job and every job the bot re-created from it), oldest first.

    The one lineage type: the state store returns it (:meth:`Store.lineage_for`) and
    :func:`retry_bot.decide.decide` reads it.  ``attempt`` 0 is the origin (action
    ``origin``).  ``family`` / ``category`` are the classification of *this* job's
    failure (``None`` while unknown; an unknown family counts against every family's
    budget, to stay on the safe side).  Memory and CPU are what was in force for it;
    ``memory_peak_bytes`` is the peak observed by the runner wrapper (from a verified
    usage record), never an estimate.
    """

    job_id: int
    #: ``origin``, ``retry`` (plain GitLab retry) or ``resize`` (re-created with new variables).
    action: str = ORIGIN
    family: str | None = None
    category: str | None = None
    memory_limit_bytes: int | None = None
    memory_request_bytes: int | None = None
    memory_peak_bytes: int | None = None
    cpu_limit_cores: float | None = None
    runner_class: str | None = None
    #: ISO-8601 time the job finished (GitLab's ``finished_at``).
    finished_at: str | None = None
    #: Job timeout in force (seconds), when the bot set or knows it.
    timeout_seconds: float | None = None
    #: The lineage's origin job (``job_id`` itself for the origin; 0 when not stored).
    origin_job_id: int = 0
    #: Position in the lineage: 0 is the origin.
    attempt: int = 0
    #: The job variables the attempt was played with (e.g. ``KUBERNETES_MEMORY_LIMIT``).
    variables: Mapping[str, str] = field(default_factory=dict)
    #: GitLab job status once known (``created``, ``manual``, ``running``, ``success``, ``failed``...).
    status: str | None = None
    created_at: float | None = None
    updated_at: float | None = None


class Read(StrEnum):
    """An input of :func:`retry_bot.decide.decide` that costs the poller a GitLab read, made only when needed."""

    #: Newer pipelines on the job's ref (``GET /projects/:id/pipelines?ref=``), for ``superseded_by``.
    SUPERSEDED = "superseded"
    #: The branch's head commit (``GET /projects/:id/repository/branches/:ref``), for ``branch_head``.
    BRANCH_HEAD = "branch_head"
    #: The job's definition and the copy built from it, for ``definition_error``.
    DEFINITION = "definition"


@dataclass(frozen=True)
class JobContext:
    """What the poller learned about a failed job's surroundings: the inputs of decide()'s gates.

    The defaults say "nothing blocks" (what the offline callers, ``classify`` and
    ``simulate``, know).  The reads in :class:`Read` cost GitLab calls, so the poller
    makes each only when :func:`retry_bot.decide.next_read` says the decision depends
    on it, and names it in ``read``; a read that failed leaves its field ``None``
    (unknown: the gate does not block, as before the read).
    """

    #: GraphQL ``CiJob.retried``: the job was already retried in GitLab (``retry:`` keyword or a person).
    retried: bool = False
    #: GraphQL ``manualJob``: a manual job (a copy the bot made, or a ``when: manual`` job).
    manual_job: bool = False
    #: GitLab has GraphQL ``jobRetry(variables:)`` (16.4+, the client's ``features().job_retry``): a manual
    #: job is then re-run in place with new variables instead of re-created.
    job_retry_supported: bool = False
    #: A newer pipeline on the same ref, at another commit, not a child pipeline.
    superseded_by: int | None = None
    #: The head commit of the job's branch now.
    branch_head: str | None = None
    #: Why the job cannot be re-created from its definition (``None``: it can, or it was not needed).
    definition_error: str | None = None
    #: The reads made (or tried).
    read: frozenset[Read] = frozenset()
