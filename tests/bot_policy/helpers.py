"""Shared builders for the policy and decision tests."""

from __future__ import annotations

import textwrap



from retry_bot.decide import ClassUsage
from retry_bot.model import LineageAttempt
from retry_bot.model import Classification, Family, JobFacts
from retry_bot.policy import parse_policy

GiB = 2**30
MiB = 2**20

LADDER = """
[resize]
max_memory = "256Gi"

[[runner_classes]]
name = "small"
tags = ["rs", "small"]
max_memory = "8Gi"
max_cpus = "4"
default_memory = "2Gi"

[[runner_classes]]
name = "large"
tags = ["rs", "large"]
max_memory = "64Gi"
max_cpus = "16"
max_memory_request = "48Gi"

[[runner_classes]]
name = "huge"
tags = ["rs", "huge"]
max_memory = "256Gi"
max_cpus = "64"
expensive = true
max_concurrent_per_user = 2
max_concurrent_per_project = 3
"""


def policy(text: str = "", **_: object):
    """A policy from a TOML snippet (dedented)."""
    return parse_policy(textwrap.dedent(text), source="test.toml")


def facts(job_id: int = 100, name: str = "build", **kw: object) -> JobFacts:
    kw.setdefault("project_path", "group/project")
    kw.setdefault("ref", "main")
    kw.setdefault("pipeline_source", "push")
    kw.setdefault("user", "alice")
    return JobFacts(job_id=job_id, name=name, **kw)  # type: ignore[arg-type]


def verdict(family: str, category: str | None = None) -> Classification:
    return Classification(category=category or family, family=Family(family), rule="test")


def attempt(job_id: int, action: str = "origin", family: str | None = "oom", **kw: object) -> LineageAttempt:
    return LineageAttempt(job_id=job_id, action=action, family=family, **kw)  # type: ignore[arg-type]


NO_USAGE = ClassUsage()


def usage_record(job_id: int, *, limit: int | None = None, peak: int | None = None, request: int | None = None,
                 cpu_limit: float | None = None, oom_kills: int = 1):
    """A (verified) usage record of the runner wrapper for one job."""
    from runner_wrapper.record import AppliedLimits, HostInfo, JobIdentity, Usage, UsageRecord

    return UsageRecord(
        job=JobIdentity(id=job_id),
        host=HostInfo(hostname="runner-1", backend="cgroup-v2"),
        limits=AppliedLimits(memory_limit_bytes=limit, memory_request_bytes=request, cpu_limit_cores=cpu_limit),
        usage=Usage(wall_seconds=60.0, memory_peak_bytes=peak, oom_kills=oom_kills),
        started_at="2026-01-01T00:00:00Z",
        finished_at="2026-01-01T00:01:00Z",
        exit_code=137,
    )
