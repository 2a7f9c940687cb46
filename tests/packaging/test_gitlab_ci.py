"""The CI template and the example root ``.gitlab-ci.yml`` against GitLab's
published CI JSON schema (the copy check-jsonschema vendors), and the template's
contract: in a pipeline the bot creates (``RETRY_BOT_CHILD_CONFIG`` set) only
the two template jobs run; in a normal pipeline only the project's own jobs do.
The child configuration the bot generates is schema-checked too.
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from ._paths import PACKAGING, ROOT, script, subprocess_env

CI_DIR = PACKAGING / "gitlab-ci"
TEMPLATE = CI_DIR / "retry-bot.yml"
EXAMPLE = CI_DIR / "example.gitlab-ci.yml"


class _Reference(list):
    """A ``!reference [job, key, ...]`` tag, kept as its path until resolved."""


class _GitLabLoader(yaml.SafeLoader):
    """PyYAML's safe loader plus GitLab's ``!reference`` tag."""


_GitLabLoader.add_constructor(
    "!reference", lambda loader, node: _Reference(loader.construct_sequence(node, deep=True)))


def load_ci(path: Path) -> dict[str, Any]:
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=_GitLabLoader)  # noqa: S506 - safe loader subclass
    assert isinstance(data, dict), f"{path} is not a mapping"
    return data


def _schema_view(node: Any) -> Any:
    """What GitLab's schema sees: a ``!reference`` is a sequence of strings."""
    if isinstance(node, _Reference):
        return [str(x) for x in node]
    if isinstance(node, dict):
        return {k: _schema_view(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_schema_view(v) for v in node]
    return node


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    from check_jsonschema.builtin_schemas import get_builtin_schema

    schema = get_builtin_schema("vendor.gitlab-ci")
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def schema_errors(validator: Any, doc: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
            for e in validator.iter_errors(_schema_view(doc))]


# --------------------------------------------------------------------------- schema


@pytest.mark.parametrize("path", [TEMPLATE, EXAMPLE], ids=lambda p: p.name)
def test_ci_file_is_valid_against_gitlab_schema(validator: Any, path: Path) -> None:
    errors = schema_errors(validator, load_ci(path))
    assert not errors, f"{path.name}:\n" + "\n".join(errors)


def test_schema_check_catches_a_broken_job(validator: Any) -> None:
    """Control: the same check rejects a job GitLab would reject."""
    doc = copy.deepcopy(load_ci(TEMPLATE))
    doc["retry-bot:generate"]["when"] = "sometimes"
    doc["retry-bot:child"]["trigger"]["strategy"] = "wait-for-it"
    errors = schema_errors(validator, doc)
    assert any("retry-bot:generate" in e for e in errors), errors
    assert any("retry-bot:child" in e for e in errors), errors


def test_check_jsonschema_cli_accepts_both_files() -> None:
    """The same check with the tool an admin would run in their own CI."""
    exe = script("check-jsonschema")
    if not exe.exists():
        pytest.skip("check-jsonschema is not installed next to this interpreter")
    proc = subprocess.run([str(exe), "--builtin-schema", "vendor.gitlab-ci", "--data-transform", "gitlab-ci",
                           str(TEMPLATE), str(EXAMPLE)],
                          capture_output=True, text=True, timeout=120, env=subprocess_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- the template's contract


def _resolve_references(node: Any, doc: dict[str, Any]) -> Any:
    """GitLab's ``!reference``: a reference inside a sequence is spliced in when it points to one."""
    if isinstance(node, _Reference):
        target: Any = doc
        for key in node:
            target = target[key]
        return _resolve_references(copy.deepcopy(target), doc)
    if isinstance(node, dict):
        return {k: _resolve_references(v, doc) for k, v in node.items()}
    if isinstance(node, list):
        out: list[Any] = []
        for item in node:
            if isinstance(item, _Reference):
                value = _resolve_references(item, doc)
                out.extend(value if isinstance(value, list) else [value])
            else:
                out.append(_resolve_references(item, doc))
        return out
    return node


def merged_example() -> dict[str, Any]:
    """The example with its ``include: local`` of the template and its references resolved,
    as GitLab's merged YAML would show it."""
    doc = load_ci(EXAMPLE)
    merged: dict[str, Any] = {}
    includes = doc.pop("include", [])
    includes = includes if isinstance(includes, list) else [includes]
    for inc in includes:
        local = inc.get("local") if isinstance(inc, dict) else inc
        assert local, f"the example should include the template with local: (got {inc!r})"
        path = ROOT / str(local).lstrip("/")
        assert path.resolve() == TEMPLATE.resolve(), f"the example includes {local}, not the template"
        merged.update(load_ci(path))
    merged.update(doc)
    return _resolve_references(merged, merged)


def _plan(config: dict[str, Any], variables: dict[str, str]):
    from standin.gitlab.ciconfig import plan_pipeline

    return plan_pipeline(yaml.safe_dump(config, sort_keys=False), variables)


def _template_jobs() -> set[str]:
    return {k for k in load_ci(TEMPLATE) if not k.startswith(".")}


def test_merged_example_is_valid_against_gitlab_schema(validator: Any) -> None:
    errors = schema_errors(validator, merged_example())
    assert not errors, "\n".join(errors)


def test_bot_pipeline_runs_only_the_template_jobs() -> None:
    from retry_bot.gitlab.recreate import CONFIG_VARIABLE

    merged = merged_example()
    plan = _plan(merged, {"CI_PIPELINE_SOURCE": "api", CONFIG_VARIABLE: '{"stages":["build"]}',
                          "RETRY_BOT_ORIGIN_JOB_ID": "41"})
    names = {j.name for j in plan.jobs}
    assert names == _template_jobs(), names
    bridges = [j for j in plan.jobs if j.is_bridge]
    assert bridges, "the template must trigger the child pipeline (trigger: include: artifact)"
    include = bridges[0].trigger["include"]
    include = include if isinstance(include, list) else [include]
    generators = {j.name for j in plan.jobs if not j.is_bridge}
    assert any(isinstance(i, dict) and i.get("artifact") and i.get("job") in generators for i in include), include


@pytest.mark.parametrize("source", ["push", "web"])
def test_normal_pipeline_runs_only_the_project_jobs(source: str) -> None:
    merged = merged_example()
    plan = _plan(merged, {"CI_PIPELINE_SOURCE": source})
    names = {j.name for j in plan.jobs}
    assert names, "the example's own jobs should run in a normal pipeline"
    assert not names & _template_jobs(), names


def test_every_example_job_starts_with_the_skip_rule() -> None:
    """The documented contract: the template's skip rule is the first rule of every job."""
    doc = load_ci(EXAMPLE)
    template = load_ci(TEMPLATE)
    skip = [k for k in template if k.startswith(".") and "rules" in template[k]]
    assert skip, "the template should offer a hidden job with the skip rule"
    jobs = {k: v for k, v in doc.items() if isinstance(v, dict) and not k.startswith(".")
            and k not in ("include", "variables", "default", "workflow", "stages")}
    assert jobs
    for name, job in jobs.items():
        rules = job.get("rules")
        assert isinstance(rules, list) and rules, f"job {name} has no rules: it would run in the bot's pipelines"
        assert isinstance(rules[0], _Reference) and list(rules[0])[0] in skip, \
            f"job {name}: first rule should be !reference [{skip[0]}, rules]"


# --------------------------------------------------------------------------- the generated child pipeline


def _child_config(job_name: str, tags: tuple[str, ...] = ("large",)) -> str:
    from retry_bot.gitlab.jobdef import find_job
    from retry_bot.gitlab.recreate import ChildPipelineSpec, build_child_config

    merged_text = yaml.safe_dump(merged_example(), sort_keys=False)
    defn = find_job(merged_text, job_name)
    spec = ChildPipelineSpec(origin_job_id=41, origin_pipeline_id=7, failed_job_id=43, attempt=2,
                             runner_class="large", tags=tags)
    return build_child_config(defn, spec)


@pytest.mark.parametrize("job_name", ["build", "test"])
def test_generated_child_pipeline_is_valid_and_manual(validator: Any, job_name: str) -> None:
    text = _child_config(job_name)
    child = yaml.safe_load(text)
    errors = schema_errors(validator, child)
    assert not errors, f"child config of {job_name}:\n" + "\n".join(errors)
    plan = _plan(child, {"CI_PIPELINE_SOURCE": "parent_pipeline"})
    assert [j.name for j in plan.jobs] == [job_name]
    job = plan.jobs[0]
    assert job.when == "manual" and job.allow_failure is False
    assert job.tags == ("large",)
    assert dict(job.variables)["RETRY_BOT_ORIGIN_JOB_ID"] == "41"


def test_generated_child_of_a_spack_like_job_is_valid(validator: Any) -> None:
    """extends, needs, parallel: matrix and a rules-based job, as generated pipelines use."""
    from retry_bot.gitlab.jobdef import find_job
    from retry_bot.gitlab.recreate import ChildPipelineSpec, build_child_config

    config = {
        "stages": ["generate", "build"],
        "variables": {"SPACK_BUILD_JOBS": "8"},
        ".base": {"image": "ghcr.io/spack/ubuntu-jammy:v1", "tags": ["spack", "small"],
                  "variables": {"KUBERNETES_MEMORY_REQUEST": "2G"}, "retry": {"max": 1, "when": ["runner_system_failure"]},
                  "artifacts": {"paths": ["jobs_scratch_dir"], "when": "always"}, "timeout": "2h"},
        "py-torch build": {"extends": ".base", "stage": "build", "needs": [{"job": "gen", "artifacts": True}],
                           "parallel": {"matrix": [{"ARCH": ["x86_64", "aarch64"]}]},
                           "rules": [{"if": "$CI_PIPELINE_SOURCE == 'push'"}],
                           "script": ["spack ci rebuild"]},
        "gen": {"stage": "generate", "script": ["spack ci generate"]},
    }
    defn = find_job(yaml.safe_dump(config, sort_keys=False), "py-torch build: [aarch64]")
    text = build_child_config(defn, ChildPipelineSpec(9, 8, 10, 2, "huge", ("spack", "huge")))
    child = json.loads(text)
    errors = schema_errors(validator, child)
    assert not errors, "\n".join(errors)
    job = child["py-torch build: [aarch64]"] if "py-torch build: [aarch64]" in child else \
        next(v for k, v in child.items() if k != "stages")
    assert job["when"] == "manual" and job["tags"] == ["spack", "huge"]
    assert "parallel" not in job and "rules" not in job and "extends" not in job
