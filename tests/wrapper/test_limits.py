"""Limits from job variables: pure decisions with the job-log lines that explain them."""

import pytest

from runner_wrapper.config import LimitSettings, VariableNames
from runner_wrapper.limits import has_explicit_limits, resolve_limits

GiB = 2**30
NAMES = VariableNames()
HOST_MEM, HOST_CPU = 16 * GiB, 8.0


def decide(variables, settings=LimitSettings(), **kw):
    return resolve_limits(variables, NAMES, settings, HOST_MEM, HOST_CPU, **kw)


def test_kubernetes_quantities_are_applied_with_their_source():
    d = decide({"KUBERNETES_MEMORY_LIMIT": "2Gi", "KUBERNETES_CPU_LIMIT": "1500m",
                "KUBERNETES_MEMORY_REQUEST": "1.5G"})
    a = d.applied
    assert a.memory_limit_bytes == 2 * GiB and a.cpu_limit_cores == 1.5 and a.memory_request_bytes == 1_500_000_000
    assert a.sources["memory_limit"] == "job variable KUBERNETES_MEMORY_LIMIT=2Gi"
    assert d.warnings == 0
    assert d.messages[-1].startswith("applied: memory limit 2.0 GiB (job variable KUBERNETES_MEMORY_LIMIT=2Gi)")


@pytest.mark.parametrize("bad", ["lots", "-1", "1e400", "4 GB", ""])
def test_invalid_value_warns_and_uses_default(bad):
    d = decide({"KUBERNETES_MEMORY_LIMIT": bad}, LimitSettings(default_memory_limit_bytes=GiB))
    assert d.applied.memory_limit_bytes == GiB
    assert d.applied.sources["memory_limit"] == "default from wrapper.toml"
    if bad:
        assert d.warnings == 1
        assert d.messages[0].startswith(f"WARNING: ignoring job variable KUBERNETES_MEMORY_LIMIT={bad!r}")
        assert "using the default 1.0 GiB" in d.messages[0]
    else:
        assert d.warnings == 0


def test_invalid_cpu_without_default_means_no_limit():
    d = decide({"KUBERNETES_CPU_LIMIT": "lots"})
    assert d.applied.cpu_limit_cores is None and d.warnings == 1 and "using no value" in d.messages[0]


def test_clamped_to_host_cap_and_says_so():
    d = decide({"KUBERNETES_MEMORY_LIMIT": "64Gi", "KUBERNETES_CPU_LIMIT": "32"},
               LimitSettings(cap_memory_bytes=8 * GiB))
    assert d.applied.memory_limit_bytes == 8 * GiB
    assert d.applied.cpu_limit_cores == HOST_CPU
    text = "\n".join(d.messages)
    assert "above the host cap from wrapper.toml 8.0 GiB: clamped" in text
    assert "above the host CPU count 8 CPU: clamped" in text


def test_limit_below_request_is_raised():
    d = decide({"KUBERNETES_MEMORY_LIMIT": "1Gi", "KUBERNETES_MEMORY_REQUEST": "2Gi"})
    assert d.applied.memory_limit_bytes == 2 * GiB
    assert "raised to the request" in d.messages[0]


def test_suggestion_used_only_when_job_sets_nothing():
    sugg = {"KUBERNETES_MEMORY_LIMIT": "3Gi", "KUBERNETES_CPU_LIMIT": "bogus"}
    d = decide({}, LimitSettings(default_memory_limit_bytes=GiB), suggested=sugg)
    assert d.applied.memory_limit_bytes == 3 * GiB
    assert d.applied.sources["memory_limit"].startswith("allocation endpoint")
    assert d.warnings == 1  # the bogus suggestion
    d2 = decide({"KUBERNETES_MEMORY_LIMIT": "512Mi"}, suggested=sugg)
    assert d2.applied.memory_limit_bytes == 512 * 2**20


def test_configurable_names_and_explicit_detection():
    names = VariableNames(memory_limit="MEM")
    assert has_explicit_limits({"MEM": "1G"}, names)
    assert not has_explicit_limits({"KUBERNETES_MEMORY_LIMIT": "1G"}, names)
    assert not has_explicit_limits({"KUBERNETES_MEMORY_REQUEST": "1G"}, VariableNames())  # requests only
    d = resolve_limits({"MEM": "1G"}, names, LimitSettings(), HOST_MEM, HOST_CPU)
    assert d.applied.memory_limit_bytes == 10**9
