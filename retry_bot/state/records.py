"""Plain, frozen values returned by the state store (no I/O here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from retry_bot.model import JobFacts, LineageAttempt

__all__ = ["JobRecord", "Lineage", "ActionIntent", "INTENT_STATUSES", "FollowedJob", "HeldAction",
           "DryRunDecision"]

#: ``begun``: written before the GitLab write, outcome not yet known;
#: ``completed``: the GitLab write is known to have happened (``result`` says what);
#: ``failed``: known not to have happened (``retryable`` says whether it may be begun again).
INTENT_STATUSES = ("begun", "completed", "failed")


@dataclass(frozen=True)
class JobRecord:
    """A job the bot has seen, with its classification and (once made) its decision."""

    job_id: int
    project_id: int
    origin_job_id: int
    facts: Mapping[str, Any]
    classification: Mapping[str, Any]
    decision: Mapping[str, Any] | None
    seen_at: float
    decided_at: float | None

    @property
    def decided(self) -> bool:
        return self.decision is not None

    @property
    def job_facts(self) -> JobFacts:
        """The stored facts as :class:`~retry_bot.model.JobFacts` (the column holds ``JobFacts.to_dict()``)."""
        return JobFacts.from_dict(self.facts if isinstance(self.facts, Mapping) else {"job_id": self.job_id})


@dataclass(frozen=True)
class Lineage:
    """An origin job and every job re-created from it, in attempt order (origin first).

    Each attempt carries what :func:`retry_bot.decide.decide` needs (its classification,
    when it finished, the timeout the bot set for it), read in the same query.
    """

    origin_job_id: int
    attempts: tuple[LineageAttempt, ...]

    @property
    def job_ids(self) -> tuple[int, ...]:
        return tuple(m.job_id for m in self.attempts)

    @property
    def latest(self) -> LineageAttempt:
        return self.attempts[-1]

    def count(self, action: str) -> int:
        """How many attempts were made with ``action`` (``retry`` or ``resize``)."""
        return sum(1 for m in self.attempts if m.action == action)

    @property
    def recreations(self) -> int:
        """Attempts after the origin (what attempt budgets count)."""
        return sum(1 for m in self.attempts if m.attempt > 0)


@dataclass(frozen=True)
class ActionIntent:
    """A GitLab write the bot means to make (or made), keyed by an idempotency key.

    ``created`` is true when *this* :meth:`Store.begin_action` call wrote the intent
    (or re-opened a retryable failure): the caller goes on to make the GitLab
    write.  When it is false the intent existed already: if ``status`` is
    ``begun`` an earlier run may or may not have made the write, so the caller
    must first read GitLab's state, then complete or redo (see docs/state.md).
    """

    intent_id: int
    idempotency_key: str
    job_id: int
    kind: str
    payload: Mapping[str, Any]
    status: str
    result: Mapping[str, Any] | None = None
    error: str | None = None
    retryable: bool = False
    #: How many times the intent was begun (1, plus one per re-opened retryable failure).
    attempts: int = 1
    #: Leadership term of the replica that last wrote it (``None`` without leader election).
    term: int | None = None
    holder: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    created: bool = False

    @property
    def is_open(self) -> bool:
        return self.status == "begun"


@dataclass(frozen=True)
class FollowedJob:
    """A job the bot created (by a retry, a play or ``jobRetry``) and follows until it ends."""

    job_id: int
    project_id: int
    origin_job_id: int
    #: The action that created it: ``retry``, ``job_retry`` or ``resize``.
    kind: str
    project_path: str | None = None
    family: str | None = None
    category: str | None = None
    runner_class: str | None = None
    #: The GitLab user the job runs for, when known (per-user class caps).
    user: str | None = None
    #: When the bot created it (epoch seconds): it is followed for ``follow_max_age`` from then.
    since: float = 0.0


@dataclass(frozen=True)
class HeldAction:
    """A re-run the storm brake holds: the action request (payload) kept, no intent, no budget spent."""

    idempotency_key: str
    category: str
    job_id: int
    payload: Mapping[str, Any]
    held_at: float


@dataclass(frozen=True)
class DryRunDecision:
    """A provisional decision made in dry-run mode (the job stays undecided in ``jobs``)."""

    job_id: int
    at: float
    decision: Mapping[str, Any]
