"""The CI-configuration subset: rules expressions, extends, workflow, needs (pure functions)."""

from __future__ import annotations

import pytest
import yaml

from standin.gitlab.ciconfig import CiConfigError, PipelineFiltered, merged_yaml, plan_pipeline
from retry_bot.gitlab.expressions import ExpressionError, evaluate

from .conftest import APP_CONFIG


@pytest.mark.parametrize(
    ("expr", "variables", "expected"),
    [
        ("$A", {"A": "1"}, True),
        ("$A", {"A": ""}, False),
        ("$A", {}, False),
        ('$A == "x"', {"A": "x"}, True),
        ("$A == 'x'", {"A": "y"}, False),
        ('$A != "x"', {}, True),
        ("$A == null", {}, True),
        ('$A == $B', {"A": "v", "B": "v"}, True),
        ("$REF =~ /^release-/", {"REF": "release-1"}, True),
        ("$REF =~ /^RELEASE/i", {"REF": "release-1"}, True),
        ("$REF !~ /^release-/", {"REF": "main"}, True),
        ('$A && $B || $C', {"C": "1"}, True),
        ('$A && ($B || $C)', {"C": "1"}, False),
        ('${CI_PIPELINE_SOURCE} == "parent_pipeline"', {"CI_PIPELINE_SOURCE": "parent_pipeline"}, True),
    ],
)
def test_rules_expressions(expr: str, variables: dict[str, str], expected: bool) -> None:
    assert evaluate(expr, variables) is expected


@pytest.mark.parametrize("expr", ["$A ==", "($A", "$A = 'x'", "/re/"])
def test_bad_expressions_are_named(expr: str) -> None:
    with pytest.raises(ExpressionError, match="rules:if|regex|end"):
        evaluate(expr, {})


def test_normal_pipeline_skips_template_jobs() -> None:
    plan = plan_pipeline(APP_CONFIG, {"CI_PIPELINE_SOURCE": "push"})
    by_name = {j.name: j for j in plan.jobs}
    assert set(by_name) == {"compile", "unit", "deploy"}
    assert plan.stages == ("build", "test")
    assert by_name["compile"].tags == ("small",)
    assert dict(by_name["compile"].variables) == {"GLOBAL_VAR": "g", "KUBERNETES_MEMORY_LIMIT": "128Mi"}
    assert by_name["deploy"].when == "manual" and by_name["deploy"].allow_failure is True


def test_retry_pipeline_has_only_generator_and_bridge() -> None:
    plan = plan_pipeline(APP_CONFIG, {"RETRY_BOT_CHILD_YAML": "x: 1"})
    names = [j.name for j in plan.jobs]
    assert names == ["retry-bot-generate", "retry-bot-child"]
    bridge = plan.jobs[1]
    assert bridge.is_bridge and bridge.needs == (("retry-bot-generate", False),)


def test_manual_inside_rules_blocks_by_default() -> None:
    plan = plan_pipeline({"j": {"script": ["x"], "rules": [{"when": "manual"}]}}, {})
    assert plan.jobs[0].when == "manual" and plan.jobs[0].allow_failure is False


def test_workflow_rules_filter_the_pipeline() -> None:
    config = {"workflow": {"rules": [{"if": '$CI_PIPELINE_SOURCE == "schedule"', "when": "never"},
                                     {"when": "always", "variables": {"W": "1"}}]},
              "j": {"script": ["x"]}}
    with pytest.raises(PipelineFiltered, match="workflow rules"):
        plan_pipeline(config, {"CI_PIPELINE_SOURCE": "schedule"})
    plan = plan_pipeline(config, {"CI_PIPELINE_SOURCE": "push"})
    assert ("W", "1") in plan.jobs[0].variables


def test_no_job_left_is_a_filtered_pipeline() -> None:
    with pytest.raises(PipelineFiltered, match="prevented any jobs"):
        plan_pipeline({"j": {"script": ["x"], "rules": [{"if": "$NOPE"}]}}, {})


def test_merged_yaml_expands_extends_and_keeps_hidden_jobs() -> None:
    merged = yaml.safe_load(merged_yaml(APP_CONFIG))
    assert merged["compile"]["rules"][0]["when"] == "never"
    assert "extends" not in merged["compile"]
    assert ".normal" in merged


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"j": {"script": ["x"], "stage": "nope"}}, "stage 'nope' does not exist"),
        ({"j": {"script": ["x"], "only": ["main"]}}, "'only' is not supported"),
        ({"j": {"script": ["x"], "needs": ["ghost"]}}, "'ghost'"),
        ({"j": {"extends": ".missing", "script": ["x"]}}, "unknown job '.missing'"),
        ({"j": {"image": "x"}}, "needs a 'script' or a 'trigger'"),
        ("[1, 2", "not valid YAML"),
    ],
)
def test_invalid_configs_are_named(config: object, message: str) -> None:
    with pytest.raises(CiConfigError, match=message):
        plan_pipeline(config, {})  # type: ignore[arg-type]
