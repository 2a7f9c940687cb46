"""``retry-bot doctor`` against the stand-in: a well set-up project passes, each wrong set-up fails."""

from __future__ import annotations

import json

import pytest
import yaml

from retry_bot.cli import main
from tests.bot_live.farm import ENV, POLICY, TEMPLATE, TOKEN, Farm, bot_config_text

pytestmark = [pytest.mark.filterwarnings("ignore:Using variable_values:DeprecationWarning"), pytest.mark.slow]

BUILD = {"build": {"stage": "build", "script": ["make"]}}


def _doctor(farm: Farm, tmp_path, projects, monkeypatch, capsys, token: str = TOKEN) -> tuple[int, dict]:
    pol = tmp_path / "policy.toml"
    pol.write_text(POLICY)
    (tmp_path / "bot.toml").write_text(bot_config_text(farm.url, tmp_path / "state.db", pol, projects))
    for k, v in {**ENV, "FARM_TOKEN": token}.items():
        monkeypatch.setenv(k, v)
    capsys.readouterr()
    rc = main(["doctor", "--config", str(tmp_path / "bot.toml"), "--format", "json"])
    return rc, json.loads(capsys.readouterr().out)


def _failures(report: dict) -> dict[str, str]:
    return {c["what"]: c["detail"] for c in report["checks"] if c["status"] == "fail"}


def test_a_well_set_up_project_passes(farm, tmp_path, monkeypatch, capsys):
    farm.add_project("ok/app", BUILD)
    rc, report = _doctor(farm, tmp_path, ["ok/app"], monkeypatch, capsys)
    assert rc == 0 and report["ok"], _failures(report)
    assert {c["what"] for c in report["checks"]} >= {"version", "token scopes", "role", "protected main",
                                                      "pipeline variables", "CI template", "bot pipeline"}


@pytest.mark.parametrize("case, expect", [
    ("no_template", "CI template"),
    ("old_template", "CI template"),
    ("workflow_drops_api", "bot pipeline"),
    ("variables_no_one", "pipeline variables"),
    ("protected_main_developer", "protected main"),
    ("read_api_token", "token scopes"),
    ("reporter", "role"),
])
def test_each_wrong_set_up_fails_with_its_fix(farm, tmp_path, monkeypatch, capsys, case, expect):
    token = TOKEN
    if case == "no_template":
        farm.standin.add_project("bad/app", {"stages": ["build", "test"], **BUILD})
    elif case == "old_template":
        old = yaml.safe_load(TEMPLATE.read_text())
        old["retry-bot:generate"]["script"] = ['printf "%s\\n" "$RETRY_BOT_CHILD_CONFIG" > retry-bot-child.yml']
        farm.standin.add_project("bad/app", {"stages": ["build", "test"], **old, **BUILD})
    elif case == "workflow_drops_api":
        farm.standin.add_project("bad/app", {"stages": ["build", "test"], **yaml.safe_load(TEMPLATE.read_text()),
                                             "workflow": {"rules": [{"if": '$CI_PIPELINE_SOURCE == "push"'}]},
                                             **BUILD})
    elif case == "variables_no_one":
        farm.add_project("bad/app", BUILD, pipeline_variables_min_role="no_one_allowed")
    elif case == "protected_main_developer":
        farm.add_project("bad/app", BUILD)
        farm.standin.add_token(token := "glpat-dev", "dev-bot", role="developer")
    elif case == "read_api_token":
        farm.add_project("bad/app", BUILD)
        farm.standin.add_token(token := "glpat-ro", "ro-bot", role="maintainer", scopes=["read_api"])
    elif case == "reporter":
        farm.add_project("bad/app", BUILD, protected_branches={})
        farm.standin.add_token(token := "glpat-rep", "rep-bot", role="reporter")
    rc, report = _doctor(farm, tmp_path, ["bad/app"], monkeypatch, capsys, token=token)
    assert rc == 1 and not report["ok"]
    assert expect in _failures(report), report
    assert all(c["fix"] for c in report["checks"] if c["status"] == "fail")


def test_an_old_gitlab_fails_and_a_pre_16_10_one_is_degraded(tmp_path, monkeypatch, capsys):
    for version, rc_expected, status in (("15.11.0", 1, "fail"), ("16.3.0", 0, "warn")):
        farm = Farm({}, gitlab_version=version)
        try:
            farm.add_project("old/app", BUILD)
            rc, report = _doctor(farm, tmp_path, ["old/app"], monkeypatch, capsys)
            ver = next(c for c in report["checks"] if c["what"] == "version")
            assert rc == rc_expected and ver["status"] == status, report
        finally:
            farm.close()


def test_text_output_names_the_fix(farm, tmp_path, monkeypatch, capsys):
    farm.add_project("bad/app", BUILD, pipeline_variables_min_role="no_one_allowed")
    pol = tmp_path / "policy.toml"
    pol.write_text(POLICY)
    (tmp_path / "bot.toml").write_text(bot_config_text(farm.url, tmp_path / "state.db", pol, ["bad/app"]))
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    capsys.readouterr()
    assert main(["doctor", "--config", str(tmp_path / "bot.toml")]) == 1
    out = capsys.readouterr().out
    assert "FAIL  bad/app: pipeline variables" in out and "fix: Settings > CI/CD > Variables" in out
    assert TOKEN not in out


def test_the_example_project_passes(farm, tmp_path, monkeypatch, capsys):
    from tests.bot_live.farm import ROOT

    example = (ROOT / "packaging" / "gitlab-ci" / "example.gitlab-ci.yml").read_text()
    farm.standin.add_project("ex/app", example, files={"packaging/gitlab-ci/retry-bot.yml": TEMPLATE.read_text()})
    rc, report = _doctor(farm, tmp_path, ["ex/app"], monkeypatch, capsys)
    assert rc == 0, _failures(report)
    assert not [c for c in report["checks"] if c["status"] != "ok"], report
