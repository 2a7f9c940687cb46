"""``include: local`` files and ``!reference`` tags, including the shipped retry-bot CI template."""

from __future__ import annotations

from pathlib import Path

import gitlab
import pytest
import yaml

from standin.gitlab import CiConfigError, StandIn
from standin.gitlab.ciconfig import load_config

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "packaging" / "gitlab-ci" / "retry-bot.yml"
EXAMPLE = REPO / "packaging" / "gitlab-ci" / "example.gitlab-ci.yml"

SHARED = """
.skip:
  rules:
    - if: $SKIP_ME
      when: never
.base:
  script: [echo base]
"""

ROOT = """
include:
  - local: ci/shared.yml
stages: [build]
job:
  extends: .base
  stage: build
  rules:
    - !reference [.skip, rules]
    - when: on_success
  after_script: !reference [.base, script]
"""


def test_local_include_and_reference_are_resolved() -> None:
    config = load_config(ROOT, {"ci/shared.yml": SHARED})
    assert config["job"]["rules"] == [{"if": "$SKIP_ME", "when": "never"}, {"when": "on_success"}]
    assert config["job"]["after_script"] == ["echo base"] and config["job"]["script"] == ["echo base"]
    assert "include" not in config


@pytest.mark.parametrize(("root", "files", "message"), [
    (ROOT, {}, "Local file `ci/shared.yml` does not exist"),
    ("include: {remote: 'https://x/y.yml'}\nj: {script: [x]}\n", {}, "only 'local' files"),
    ("j:\n  script: !reference [.nope, script]\n", {}, r"!reference \[.nope, script\] could not be found"),
    ("include: a.yml\nj: {script: [x]}\n", {"a.yml": "include: a.yml\n"}, "include loop"),
])
def test_include_and_reference_errors_are_named(root: str, files: dict[str, str], message: str) -> None:
    with pytest.raises(CiConfigError, match=message):
        load_config(root, files)


def test_lint_and_raw_files_see_the_included_configuration(gl: gitlab.Gitlab, standin: StandIn) -> None:
    standin.add_project("team/inc", ROOT, files={"ci/shared.yml": SHARED})
    project = gl.projects.get("team/inc", lazy=True)
    merged = yaml.safe_load(project.ci_lint.get().merged_yaml)
    assert merged["job"]["rules"][0] == {"if": "$SKIP_ME", "when": "never"} and ".skip" in merged
    assert project.files.raw("ci/shared.yml", ref="main") == SHARED.encode()
    pipe = standin.create_pipeline("team/inc", "main", variables={"SKIP_ME": ""})
    assert [j.name for j in standin.jobs(pipeline_id=pipe.id)] == ["job"]


@pytest.mark.skipif(not (TEMPLATE.exists() and EXAMPLE.exists()), reason="packaging/gitlab-ci template not present")
def test_shipped_template_and_example_run_in_the_stand_in(standin: StandIn, gl: gitlab.Gitlab) -> None:
    files = {"packaging/gitlab-ci/retry-bot.yml": TEMPLATE.read_text()}
    standin.add_project("team/real", EXAMPLE.read_text(), files=files)
    normal = standin.create_pipeline("team/real", "main")
    names = {j.name for j in standin.jobs(pipeline_id=normal.id)}
    assert names and not any(n.startswith("retry-bot") for n in names)
    child_var = next(line.split("$", 1)[1].split()[0] for line in TEMPLATE.read_text().splitlines()
                     if line.strip().startswith("- if: $"))
    child = "upgraded:\n  stage: build\n  script: [make]\n  when: manual\n"
    retry = gl.projects.get("team/real", lazy=True).pipelines.create(
        {"ref": "main", "variables": [{"key": child_var, "value": child}]})
    jobs = standin.jobs(pipeline_id=retry.id)
    assert {j.name for j in jobs} == {"retry-bot:generate", "retry-bot:child"}
    gen = next(j for j in jobs if j.name == "retry-bot:generate")
    standin.run_job(gen.id, "success", artifacts={gen.spec.artifact_paths[0]: child})
    bridge = next(j for j in jobs if j.name == "retry-bot:child")
    assert bridge.downstream_pipeline_id is not None
    (manual,) = standin.jobs(pipeline_id=bridge.downstream_pipeline_id)
    assert manual.name == "upgraded" and manual.status == "manual"
