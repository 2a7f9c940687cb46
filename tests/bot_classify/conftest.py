"""Shared helpers for the classifier tests."""

from __future__ import annotations

import pytest

from retry_bot.classify import load_taxonomy
from retry_bot.model import JobFacts
from runner_wrapper.record import AppliedLimits, HostInfo, JobIdentity, Usage, UsageRecord

KEY = b"s" * 32


@pytest.fixture(scope="session")
def taxonomy():
    return load_taxonomy()


def facts(**kw) -> JobFacts:
    kw.setdefault("job_id", 42)
    kw.setdefault("name", "build")
    return JobFacts(**kw)


def usage_record(job_id: int = 42, oom_kills: int = 0, exit_code: int | None = None,
                 peak: int = 900 * 2**20, limit: int = 1024 * 2**20) -> UsageRecord:
    return UsageRecord(
        job=JobIdentity(id=job_id, name="build"),
        host=HostInfo(hostname="h1", backend="cgroup-v2"),
        limits=AppliedLimits(memory_limit_bytes=limit),
        usage=Usage(wall_seconds=10.0, memory_peak_bytes=peak, oom_kills=oom_kills),
        started_at="2026-01-01T00:00:00Z", finished_at="2026-01-01T00:00:10Z",
        exit_code=exit_code,
    )


def decided(trace: bytes, taxonomy, record=None, **kw):
    """Classify ``trace`` for a failed job (``script_failure``, exit 1 unless given) with a 4Gi limit in
    force, and decide it with the shipped default policy: ``(verdict, action)``."""
    import dataclasses

    from retry_bot.classify import classify
    from retry_bot.decide import ClassUsage, decide
    from retry_bot.policy import default_policy

    kw.setdefault("failure_reason", "script_failure")
    kw.setdefault("exit_code", 1)
    f = dataclasses.replace(facts(**kw), variables={"KUBERNETES_MEMORY_LIMIT": "4Gi"})
    verdict = classify(f, trace, taxonomy, record)
    return verdict, decide(f, verdict, [], default_policy(), ClassUsage()).action


def check_rule(taxonomy, trace: bytes, family: str, rule: str | None, action, extra: dict) -> None:
    """A catalogue positive: ``trace`` (with ``extra`` job facts) gets ``family``, ``rule`` unless
    None, and the shipped policy's ``action``."""
    v, act = decided(trace, taxonomy, **extra)
    assert v.family.value == family, (v.rule, v.evidence)
    if rule is not None:
        assert v.rule == rule, (v.rule, v.evidence)
    assert act == action, (v.rule, v.evidence)


def check_near_miss(taxonomy, trace: bytes, rule: str, family: str | None, extra: dict) -> None:
    """A catalogue near miss: ``rule`` does not decide ``trace``; its family is ``family`` unless None."""
    v, _ = decided(trace, taxonomy, **extra)
    assert v.rule != rule, v.evidence
    if family is not None:
        assert v.family.value == family, (v.rule, v.evidence)


def check_trap(taxonomy, trace: bytes, extra: dict) -> None:
    """A trap (a test named after OOM, a deliberate SIGKILL, a remote server's own OOM): never an OOM,
    never resized."""
    from retry_bot.decide import Action

    v, action = decided(trace, taxonomy, **extra)
    assert action != Action.RESIZE, (v.rule, v.evidence)
    assert v.family.value != "oom", (v.rule, v.evidence)
