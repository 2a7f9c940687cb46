"""One reading of GitLab's CI syntax (retry_bot/gitlab/cisyntax.py) for job re-creation and the stand-in.

The bot's ``jobdef`` and the stand-in's ``ciconfig`` had a copy each of the ``extends`` merge; the
copies disagreed with GitLab (G lib/gitlab/ci/config/extendable/entry.rb: at most 10 ancestors,
``ancestors.count > MAX_NESTING_LEVELS``) and the bot's could not read ``!reference`` tags.
"""

from __future__ import annotations

import pytest
import yaml

from retry_bot.gitlab.jobdef import JobDefinitionError, find_job
from standin.gitlab.ciconfig import CiConfigError, merged_yaml, plan_pipeline

PUSH = {"CI_PIPELINE_SOURCE": "push"}


def chain(ancestors: int, job: str = "build") -> str:
    """``build`` extends ``.t1``, which extends ``.t2``, ... ``.t<ancestors>``: that many ancestors."""
    doc: dict[str, dict[str, object]] = {f".t{i}": {"variables": {f"V{i}": str(i)}} for i in range(1, ancestors + 1)}
    for i in range(1, ancestors):
        doc[f".t{i}"]["extends"] = f".t{i + 1}"
    doc[job] = {"extends": ".t1", "script": ["make"]} if ancestors else {"script": ["make"]}
    return yaml.safe_dump(doc)


def test_ten_ancestors_are_allowed_by_both() -> None:
    text = chain(10)
    assert find_job(text, "build").variables["V10"] == "10"
    assert plan_pipeline(text, PUSH).jobs[0].name == "build"


def test_eleven_ancestors_are_refused_by_both_as_gitlab_does() -> None:
    """The stand-in accepted any depth; the bot's copy allowed 11 ancestors."""
    text = chain(11)
    with pytest.raises(CiConfigError, match="nesting too deep in `extends`"):
        plan_pipeline(text, PUSH)
    with pytest.raises(JobDefinitionError, match="nesting too deep in `extends`"):
        find_job(text, "build")


def test_the_depth_counts_from_each_job_even_when_its_ancestors_were_resolved_first() -> None:
    """``.t1`` alone has 9 ancestors (fine, and resolved first); through ``build`` it is 11 deep."""
    text = chain(11).replace("build:", "zz_build:")  # hidden templates come first in key order
    with pytest.raises(CiConfigError, match="zz_build: nesting too deep"):
        plan_pipeline(text, PUSH)


def test_a_cycle_is_named() -> None:
    text = "a:\n  extends: .b\n  script: [x]\n.b:\n  extends: a\n"
    with pytest.raises(CiConfigError, match="circular 'extends' through a -> .b -> a"):
        merged_yaml(text)
    with pytest.raises(JobDefinitionError, match="circular 'extends'"):
        find_job(text, "a")


GENERATED_CHILD = """
.spack_setup:
  before_script: [". share/spack/setup-env.sh"]
  variables: {SPACK_JOB_SPEC_PKG_NAME: zlib}
build-zlib:
  extends: .spack_setup
  before_script:
    - !reference [.spack_setup, before_script]
    - spack env activate .
  script: [spack ci rebuild]
"""


def test_a_generated_child_configuration_may_use_reference_tags() -> None:
    """A child pipeline's configuration is an artifact, not merged by GitLab: ``!reference`` is still
    in it.  The bot's copy read it with ``yaml.safe_load`` and gave up ("not valid YAML")."""
    job = find_job(GENERATED_CHILD, "build-zlib", source="artifact jobs.yml")
    assert job.body["before_script"] == [". share/spack/setup-env.sh", "spack env activate ."]
    assert job.variables["SPACK_JOB_SPEC_PKG_NAME"] == "zlib"
    stand_in = {j.name: j for j in plan_pipeline(GENERATED_CHILD, PUSH).jobs}["build-zlib"]
    assert list(stand_in.before_script) == job.body["before_script"]


def test_a_missing_reference_is_a_job_definition_error() -> None:
    with pytest.raises(JobDefinitionError, match=r"!reference \[.nope, script\] could not be found"):
        find_job("j:\n  script: [!reference [.nope, script]]\n", "j")
