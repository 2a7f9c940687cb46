"""Plain data shared by the classifier, the policy, the decision function and the poller.

Nothing here does I/O.  The poller (an edge) fills :class:`JobFacts` from
GitLab's REST and GraphQL answers; everything downstream is pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Mapping

__all__ = ["Family", "JobFacts", "Classification", "FAMILIES"]


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
