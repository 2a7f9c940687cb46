"""Job definitions from merged CI configuration, and the compact child-pipeline copy."""

from __future__ import annotations

import json

import pytest
import yaml

from retry_bot.gitlab.jobdef import JobDefinitionError, find_job
from retry_bot.gitlab.recreate import (CONFIG_VARIABLE, decode_config, ORIGIN_VARIABLE, ChildPipelineSpec, build_child_config,
                                       pipeline_variables)

MERGED = """
stages: [build, test]
variables:
  GLOBAL: g
  KUBERNETES_MEMORY_LIMIT: 1Gi
default:
  image: gcc:13
  before_script: [echo hi]
  tags: [small]
.tmpl:
  variables: {FROM_TMPL: t}
build:
  extends: .tmpl
  stage: build
  script: [make]
  rules: [{if: $CI_PIPELINE_SOURCE == "push"}]
  needs: [prep, {job: gen, artifacts: true}]
  variables: {KUBERNETES_MEMORY_LIMIT: 2Gi}
shard:
  stage: test
  parallel: 3
  script: [pytest]
  inherit: {default: false, variables: [GLOBAL]}
mat:
  stage: test
  script: [run]
  parallel:
    matrix:
      - ARCH: [amd64, arm64]
        OS: linux
bridge:
  trigger: {include: child.yml}
"""

SPEC = ChildPipelineSpec(origin_job_id=11, origin_pipeline_id=3, failed_job_id=12, attempt=2,
                         runner_class="large", tags=("large", "x86"))


def test_find_job_resolves_extends_defaults_and_globals():
    d = find_job(MERGED, "build")
    assert d.body["image"] == "gcc:13" and d.body["tags"] == ["small"]
    assert d.variables == {"GLOBAL": "g", "KUBERNETES_MEMORY_LIMIT": "2Gi", "FROM_TMPL": "t"}


def test_parallel_and_matrix_instances():
    d = find_job(MERGED, "shard 2/3")
    assert d.base_name == "shard" and d.instance_variables == {"CI_NODE_INDEX": "2", "CI_NODE_TOTAL": "3"}
    assert "image" not in d.body and d.variables == {"GLOBAL": "g"}   # inherit respected
    m = find_job(MERGED, "mat: [arm64, linux]")
    assert m.instance_variables == {"ARCH": "arm64", "OS": "linux"}


@pytest.mark.parametrize("name", ["nope", "bridge", ".tmpl", "variables", "mat: [ppc, linux]"])
def test_unusable_jobs_are_clear_errors(name):
    with pytest.raises(JobDefinitionError):
        find_job(MERGED, name)


def test_child_config_is_a_manual_copy_without_dependencies():
    text = build_child_config(find_job(MERGED, "build"), SPEC)
    cfg = yaml.safe_load(text)          # JSON is YAML: the template writes it to a file as is
    job = cfg["build"]
    assert cfg["stages"] == ["build"]
    assert job["when"] == "manual" and job["allow_failure"] is False and job["needs"] == []
    assert "rules" not in job and "extends" not in job and "dependencies" not in job
    assert job["tags"] == ["large", "x86"]
    v = job["variables"]
    assert v[ORIGIN_VARIABLE] == "11" and v["RETRY_BOT_ATTEMPT"] == "2" and v["RETRY_BOT_RUNNER_CLASS"] == "large"
    assert v["RETRY_BOT_REMOVED_NEEDS"] == "gen,prep"
    assert v["KUBERNETES_MEMORY_LIMIT"] == "2Gi"   # upgraded values come with play, not YAML
    assert text == build_child_config(find_job(MERGED, "build"), SPEC)   # deterministic


def test_parallel_copy_pins_its_instance():
    cfg = json.loads(build_child_config(find_job(MERGED, "shard 2/3"), SPEC))
    assert cfg["shard 2/3"]["variables"]["CI_NODE_INDEX"] == "2" and "parallel" not in cfg["shard 2/3"]


def test_pipeline_variables_carry_the_origin():
    pv = pipeline_variables("{}", SPEC)
    assert decode_config(pv[CONFIG_VARIABLE]) == "{}" and pv[ORIGIN_VARIABLE] == "11" and pv["RETRY_BOT_FAILED_JOB_ID"] == "12"
