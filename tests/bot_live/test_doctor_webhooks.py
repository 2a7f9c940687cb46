"""``retry-bot doctor`` checks the project's webhook when ``[webhook]`` is on (against the stand-in).

The stand-in's ``GET /projects/:id/hooks`` follows G ``lib/api/project_hooks.rb`` (Maintainer
only) and ``entities/project_hook.rb`` (the secret token is never returned).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from retry_bot.cli import main
from retry_bot.commands.doctor import ProjectFacts, evaluate_webhook
from tests.bot_live.farm import ENV, POLICY, TOKEN, Farm, bot_config_text

pytestmark = pytest.mark.filterwarnings("ignore:Using variable_values:DeprecationWarning")

BUILD = {"build": {"stage": "build", "script": ["make"]}}
URL = "https://retry-bot.example.com/v1/gitlab/job-events"
HOOKS = f"""
[http]
listen = "127.0.0.1:0"
[webhook]
enabled = true
public_url = "{URL}"
"""


@pytest.fixture()
def farm():
    f = Farm({})
    yield f
    f.close()


def _doctor(farm, tmp_path, monkeypatch, capsys, *, token=TOKEN, extra=HOOKS, fmt="json"):
    pol = tmp_path / "policy.toml"
    pol.write_text(POLICY)
    (tmp_path / "bot.toml").write_text(bot_config_text(farm.url, tmp_path / "state.db", pol, ["w/app"]) + extra)
    for k, v in {**ENV, "FARM_TOKEN": token}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("RETRY_BOT_WEBHOOK_SECRET", raising=False)
    capsys.readouterr()
    rc = main(["doctor", "--config", str(tmp_path / "bot.toml"), "--format", fmt])
    out = capsys.readouterr().out
    return rc, (json.loads(out) if fmt == "json" else out)


def _hook_checks(report):
    return [c for c in report["checks"] if c["what"].startswith("webhook")]


def test_standin_lists_hooks_as_gitlab_does(farm):
    farm.add_project("w/app", BUILD)
    farm.standin.add_project_hook("w/app", URL, token="s3cret-token", job_events=True, push_events=False)
    req = urllib.request.Request(f"{farm.url}/api/v4/projects/w%2Fapp/hooks", headers={"PRIVATE-TOKEN": TOKEN})
    hooks = json.loads(urllib.request.urlopen(req, timeout=5).read())
    assert len(hooks) == 1
    h = hooks[0]
    for key in ("id", "url", "name", "description", "created_at", "push_events", "tag_push_events",
                "merge_requests_events", "repository_update_events", "enable_ssl_verification", "alert_status",
                "disabled_until", "project_id", "issues_events", "confidential_issues_events", "note_events",
                "confidential_note_events", "pipeline_events", "wiki_page_events", "deployment_events",
                "job_events", "releases_events"):
        assert key in h, key
    assert h["job_events"] is True and h["push_events"] is False and h["enable_ssl_verification"] is True
    assert "token" not in h and "s3cret-token" not in json.dumps(hooks)       # never returned
    # a Developer may not read them (read_web_hook needs admin_project)
    farm.standin.add_token("glpat-dev", "dev-bot", role="developer")
    req = urllib.request.Request(f"{farm.url}/api/v4/projects/w%2Fapp/hooks", headers={"PRIVATE-TOKEN": "glpat-dev"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=5)
    assert err.value.code == 403
    # POST /projects/:id/hooks (Maintainer): url required; push_events defaults to true, job_events to false
    req = urllib.request.Request(f"{farm.url}/api/v4/projects/w%2Fapp/hooks", method="POST",
                                 data=json.dumps({"url": URL + "2", "token": "t"}).encode(),
                                 headers={"PRIVATE-TOKEN": TOKEN, "Content-Type": "application/json"})
    created = json.loads(urllib.request.urlopen(req, timeout=5).read())
    assert created["push_events"] is True and created["job_events"] is False and "token" not in created


def test_a_well_set_up_hook_passes_and_says_the_token_cannot_be_checked(farm, tmp_path, monkeypatch, capsys):
    farm.add_project("w/app", BUILD)
    farm.standin.add_project_hook("w/app", URL, token="s3cret", job_events=True, push_events=False)
    rc, report = _doctor(farm, tmp_path, monkeypatch, capsys)
    checks = {c["what"]: c for c in _hook_checks(report)}
    assert rc == 0, report
    assert checks["webhook"]["status"] == "ok"
    assert checks["webhook token"]["status"] == "warn" and "never returns" in checks["webhook token"]["detail"]


@pytest.mark.parametrize("case, status, words", [
    ("none", "fail", "no webhook points at the bot"),
    ("other_url", "fail", "no webhook points at the bot"),
    ("no_job_events", "fail", "Job events off"),
    ("disabled", "fail", "GitLab disabled it"),
    ("ssl_off", "warn", "SSL verification off"),
    ("plain_http", "warn", "plain http"),
    ("developer", "warn", "needs the Maintainer role"),
])
def test_each_wrong_hook_is_reported_with_its_fix(farm, tmp_path, monkeypatch, capsys, case, status, words):
    farm.add_project("w/app", BUILD)
    token, extra = TOKEN, HOOKS
    if case == "other_url":
        farm.standin.add_project_hook("w/app", "https://ci-tools.example.com/hook", job_events=True)
    elif case == "no_job_events":
        farm.standin.add_project_hook("w/app", URL, token="s", job_events=False)
    elif case == "disabled":
        farm.standin.add_project_hook("w/app", URL, token="s", job_events=True, alert_status="disabled")
    elif case == "ssl_off":
        farm.standin.add_project_hook("w/app", URL, token="s", job_events=True, enable_ssl_verification=False)
    elif case == "plain_http":
        farm.standin.add_project_hook("w/app", URL.replace("https", "http"), token="s", job_events=True)
        extra = HOOKS.replace("https://", "http://")
    elif case == "developer":
        farm.standin.add_project_hook("w/app", URL, token="s", job_events=True)
        farm.standin.add_token(token := "glpat-dev", "dev-bot", role="developer")
    rc, report = _doctor(farm, tmp_path, monkeypatch, capsys, token=token, extra=extra)
    hook = [c for c in _hook_checks(report) if c["what"] == "webhook" and c["status"] == status]
    assert hook and any(words in c["detail"] for c in hook), _hook_checks(report)
    assert all(c["fix"] for c in hook)
    if status == "fail":
        assert rc == 1
    if case == "developer":
        assert rc == 1   # the Developer token also fails the protected-branch check; the hook is only a warning


def test_hooks_are_not_read_without_webhooks(farm, tmp_path, monkeypatch, capsys):
    farm.add_project("w/app", BUILD)
    farm.standin.reset_calls()
    rc, report = _doctor(farm, tmp_path, monkeypatch, capsys, extra="")
    assert rc == 0 and not _hook_checks(report)
    assert not [c for c in farm.standin.calls if c.path.endswith("/hooks")]


def test_text_output_and_matching_by_path():
    facts = ProjectFacts("g/p", hooks=({"id": 3, "url": "https://bot.example/v1/gitlab/job-events", "job_events": True,
                                        "enable_ssl_verification": True, "alert_status": "executable"},))
    checks = evaluate_webhook(facts, "/v1/gitlab/job-events")        # no public_url: matched by path
    assert [c.status for c in checks] == ["ok", "warn"]
    none = evaluate_webhook(ProjectFacts("g/p", hooks=()), "/v1/gitlab/job-events", groups=True)
    assert none[0].status == "warn" and "group webhook" in none[0].detail
