"""The REST subset, driven by python-gitlab exactly as the bot uses it."""

from __future__ import annotations

import gitlab
import pytest
import requests
import yaml

from standin.gitlab import StandIn

from .conftest import CHILD_YAML, run_first_pending


def _failed_jobs(standin: StandIn, count: int) -> list[int]:
    ids = []
    for _ in range(count):
        standin.create_pipeline("team/app", "main")
        ids.append(run_first_pending(standin, "failed", failure_reason="script_failure", exit_code=1))
    return ids


def test_auth_is_required(standin: StandIn) -> None:
    with pytest.raises(gitlab.GitlabAuthenticationError):
        gitlab.Gitlab(standin.url, private_token="wrong").projects.get(1)
    answer = requests.get(f"{standin.url}/api/v4/projects/1", timeout=5)
    assert answer.status_code == 401 and answer.json() == {"message": "401 Unauthorized"}
    bearer = requests.get(f"{standin.url}/api/v4/projects/1", headers={"Authorization": f"Bearer {standin.token}"},
                          timeout=5)
    assert bearer.status_code == 200


def test_project_by_id_or_path_and_group_listing(standin: StandIn, gl: gitlab.Gitlab) -> None:
    standin.add_project("team/sub/lib", {"j": {"script": ["x"]}})
    standin.add_project("other/tool", {"j": {"script": ["x"]}})
    assert gl.projects.get("team/app").id == gl.projects.get(1).id == 1
    with pytest.raises(gitlab.GitlabGetError) as err:
        gl.projects.get("team/nope")
    assert err.value.response_code == 404
    group = gl.groups.get("team", lazy=True)
    direct = [p.path_with_namespace for p in group.projects.list(get_all=True)]
    nested = [p.path_with_namespace for p in group.projects.list(include_subgroups=True, get_all=True)]
    assert direct == ["team/app"] and nested == ["team/app", "team/sub/lib"]


def test_jobs_keyset_pagination_follows_link_next(standin: StandIn, gl: gitlab.Gitlab) -> None:
    failed = _failed_jobs(standin, 5)
    project = gl.projects.get(1, lazy=True)
    seen = [j.id for j in project.jobs.list(scope=["failed"], pagination="keyset", order_by="id", sort="desc",
                                            per_page=2, iterator=True)]
    assert seen == sorted(failed, reverse=True)
    pages = standin.calls_matching("GET", r"/projects/1/jobs$")
    assert len(pages) == 3 and "cursor=" in pages[1].query and "scope%5B%5D=failed" in pages[1].query
    first = requests.get(f"{standin.url}/api/v4/projects/1/jobs",
                         params={"pagination": "keyset", "order_by": "id", "sort": "desc", "per_page": 2},
                         headers={"PRIVATE-TOKEN": standin.token}, timeout=5)
    assert 'rel="next"' in first.headers["Link"] and "X-Total" not in first.headers


def test_ascending_keyset_is_405(standin: StandIn, gl: gitlab.Gitlab) -> None:
    with pytest.raises(gitlab.GitlabListError) as err:
        gl.projects.get(1, lazy=True).jobs.list(pagination="keyset", order_by="id", sort="asc", get_all=True)
    assert err.value.response_code == 405


def test_jobs_offset_pagination_headers_have_no_total(standin: StandIn, gl: gitlab.Gitlab) -> None:
    _failed_jobs(standin, 3)
    listing = gl.projects.get(1, lazy=True).jobs.list(per_page=2, iterator=True)
    assert listing.current_page == 1 and listing.next_page == 2 and listing.per_page == 2
    assert listing.total is None and listing.total_pages is None
    assert len(list(listing)) == 3 * 3           # 3 pipelines x (compile, unit, deploy)
    with pytest.raises(gitlab.GitlabListError) as err:
        gl.projects.get(1, lazy=True).jobs.list(scope=["bogus"], get_all=True)
    assert err.value.response_code == 400


def test_job_fields_trace_and_failure_reason(standin: StandIn, gl: gitlab.Gitlab) -> None:
    standin.create_pipeline("team/app", "main")
    job_id = run_first_pending(standin, "failed", failure_reason="runner_system_failure", exit_code=137,
                               trace=b"line 1\nKilled\n")
    job = gl.projects.get(1, lazy=True).jobs.get(job_id)
    assert job.failure_reason == "runner_system_failure" and job.tag_list == ["small"]
    assert job.pipeline["source"] == "push" and job.pipeline["ref"] == "main"
    assert job.runner["description"] and job.web_url.endswith(f"/team/app/-/jobs/{job_id}")
    assert not hasattr(job, "exit_code")                    # REST has no exit code
    assert job.trace() == b"line 1\nKilled\n"
    unit = next(j for j in standin.jobs("team/app") if j.name == "unit")
    assert "failure_reason" not in gl.projects.get(1, lazy=True).jobs.get(unit.id).attributes


def test_retry_returns_a_new_job_and_refuses_unfinished_ones(standin: StandIn, gl: gitlab.Gitlab) -> None:
    standin.create_pipeline("team/app", "main")
    project = gl.projects.get(1, lazy=True)
    pending = standin.next_pending_job(["small"])
    assert pending is not None
    with pytest.raises(gitlab.GitlabJobRetryError) as err:
        project.jobs.get(pending.id, lazy=True).retry()
    assert err.value.response_code == 403 and "Job is not retryable" in str(err.value)
    run_first_pending(standin, "failed", failure_reason="script_failure")
    new = project.jobs.get(pending.id, lazy=True).retry()
    assert new["id"] != pending.id and new["status"] == "pending" and new["name"] == "compile"
    retried = project.pipelines.get(new["pipeline"]["id"]).jobs.list(get_all=True)
    assert pending.id not in [j.id for j in retried]                    # include_retried defaults to false
    with_retried = project.pipelines.get(new["pipeline"]["id"]).jobs.list(include_retried=True, get_all=True)
    assert pending.id in [j.id for j in with_retried]


def test_play_non_manual_is_unplayable(standin: StandIn, gl: gitlab.Gitlab) -> None:
    standin.create_pipeline("team/app", "main")
    job_id = run_first_pending(standin, "failed", failure_reason="script_failure")
    with pytest.raises(gitlab.GitlabJobPlayError) as err:
        gl.projects.get(1, lazy=True).jobs.get(job_id, lazy=True).play()
    assert err.value.response_code == 400 and "Unplayable Job" in str(err.value)


def _child_manual_job(standin: StandIn, gl: gitlab.Gitlab) -> tuple[int, int]:
    project = gl.projects.get("team/app")
    pipe = project.pipelines.create({"ref": "main", "variables": [
        {"key": "RETRY_BOT_CHILD_YAML", "value": CHILD_YAML, "variable_type": "env_var"}]})
    assert pipe.source == "api"
    gen = standin.next_pending_job(start=True)
    assert gen is not None
    standin.finish_job(gen.id, "success", artifacts={"retry-bot-child.yml": CHILD_YAML})
    (bridge,) = pipe.bridges.list(get_all=True)
    child_id = bridge.downstream_pipeline["id"]
    (manual,) = project.pipelines.get(child_id).jobs.list(get_all=True)
    assert manual.status == "manual"
    return pipe.id, manual.id


def test_play_manual_keeps_id_and_sets_variables(standin: StandIn, gl: gitlab.Gitlab) -> None:
    _, manual_id = _child_manual_job(standin, gl)
    job = gl.projects.get(1, lazy=True).jobs.get(manual_id, lazy=True)
    job.play(post_data={"job_variables_attributes": [{"key": "KUBERNETES_MEMORY_LIMIT", "value": "512Mi"}]})
    assert job.id == manual_id and job.status == "pending"
    stored = standin.get_job(manual_id)
    assert stored.job_variables == [{"key": "KUBERNETES_MEMORY_LIMIT", "value": "512Mi", "variable_type": "env_var"}]
    payload_vars = [(v["key"], v["value"]) for v in standin.job_payload(manual_id)["variables"]]
    # the played value comes after the YAML one, so it wins in the runner
    assert payload_vars.index(("KUBERNETES_MEMORY_LIMIT", "512Mi")) > payload_vars.index(("KUBERNETES_MEMORY_LIMIT", "128Mi"))


def test_play_already_run_manual_job_returns_old_job_and_drops_variables(standin: StandIn, gl: gitlab.Gitlab) -> None:
    _, manual_id = _child_manual_job(standin, gl)
    job = gl.projects.get(1, lazy=True).jobs.get(manual_id, lazy=True)
    job.play()
    run_first_pending(standin, "failed", failure_reason="script_failure", exit_code=137)
    again = gl.projects.get(1, lazy=True).jobs.get(manual_id, lazy=True)
    again.play(post_data={"job_variables_attributes": [{"key": "KUBERNETES_MEMORY_LIMIT", "value": "1Gi"}]})
    assert again.id == manual_id and again.status == "failed"             # the OLD job is presented
    newest = standin.jobs(pipeline_id=standin.get_job(manual_id).pipeline_id)[-1]
    assert newest.id != manual_id and newest.status == "pending" and newest.job_variables == []


def test_pipelines_listing_and_filters(standin: StandIn, gl: gitlab.Gitlab) -> None:
    standin.set_ci_config("team/app", {"j": {"script": ["x"]}}, ref="feature")
    first = standin.create_pipeline("team/app", "main")
    second = standin.create_pipeline("team/app", "feature")
    project = gl.projects.get(1, lazy=True)
    assert [p.id for p in project.pipelines.list(get_all=True)] == [second.id, first.id]
    assert [p.id for p in project.pipelines.list(ref="feature", get_all=True)] == [second.id]
    assert [p.id for p in project.pipelines.list(order_by="id", sort="asc", get_all=True)] == [first.id, second.id]
    later = project.pipelines.list(updated_after="2999-01-01T00:00:00Z", get_all=True)
    assert later == []
    listing = project.pipelines.list(per_page=1, iterator=True)
    assert listing.total == 2 and listing.total_pages == 2
    detail = project.pipelines.get(first.id)
    assert detail.status == "pending" and detail.sha == first.sha and detail.user["username"] == "retry-bot"


def test_create_pipeline_variables_and_errors(standin: StandIn, gl: gitlab.Gitlab) -> None:
    project = gl.projects.get(1, lazy=True)
    pipe = project.pipelines.create({"ref": "main", "variables": [{"key": "A", "value": "1"}]})
    assert [(v.key, v.value) for v in pipe.variables.list(get_all=True)] == [("A", "1")]
    with pytest.raises(gitlab.GitlabCreateError) as err:
        project.pipelines.create({"ref": "nope"})
    assert err.value.response_code == 400 and "Reference not found" in str(err.value)
    standin.add_project("team/locked", {"j": {"script": ["x"]}}, pipeline_variables_min_role="maintainer")
    dev = standin.add_token("dev-token", "dev", role="developer")
    assert dev.role == "developer"
    locked = gitlab.Gitlab(standin.url, private_token="dev-token").projects.get("team/locked", lazy=True)
    with pytest.raises(gitlab.GitlabCreateError, match="Insufficient permissions"):
        locked.pipelines.create({"ref": "main", "variables": [{"key": "A", "value": "1"}]})
    reporter = standin.add_token("rep-token", "rep", role="reporter")
    assert reporter.role == "reporter"
    with pytest.raises(gitlab.GitlabCreateError) as err:
        gitlab.Gitlab(standin.url, private_token="rep-token").projects.get(1, lazy=True).pipelines.create({"ref": "main"})
    assert err.value.response_code == 403


def test_ci_lint_returns_merged_yaml_at_a_sha(standin: StandIn, gl: gitlab.Gitlab) -> None:
    old = standin.create_pipeline("team/app", "main")
    standin.set_ci_config("team/app", {"only-now": {"script": ["x"]}})
    project = gl.projects.get(1, lazy=True)
    lint = project.ci_lint.get(content_ref=old.sha)
    assert lint.valid and "compile" in yaml.safe_load(lint.merged_yaml)
    assert "only-now" in yaml.safe_load(project.ci_lint.get().merged_yaml)
    posted = project.ci_lint.create({"content": "a:\n  script: [x]\nb:\n  extends: a\n"})
    assert posted.valid and yaml.safe_load(posted.merged_yaml)["b"]["script"] == ["x"]
    bad = project.ci_lint.create({"content": "a:\n  stage: nope\n  script: [x]\n"})
    assert not bad.valid and "does not exist" in bad.errors[0]


def test_artifact_download_and_cancel(standin: StandIn, gl: gitlab.Gitlab) -> None:
    parent_id, _ = _child_manual_job(standin, gl)
    gen = next(j for j in standin.jobs(pipeline_id=parent_id) if j.name == "retry-bot-generate")
    project = gl.projects.get(1, lazy=True)
    assert project.jobs.get(gen.id, lazy=True).artifact("retry-bot-child.yml") == CHILD_YAML.encode()
    with pytest.raises(gitlab.GitlabGetError):
        project.jobs.get(gen.id, lazy=True).artifact("nope.yml")
    standin.create_pipeline("team/app", "main")
    pending = standin.next_pending_job(["small"])
    assert pending is not None
    assert project.jobs.get(pending.id, lazy=True).cancel()["status"] == "canceled"


def test_malformed_requests_get_clear_answers(standin: StandIn) -> None:
    headers = {"PRIVATE-TOKEN": standin.token, "Content-Type": "application/json"}
    bad_json = requests.post(f"{standin.url}/api/v4/projects/1/pipeline", data=b"{nope", headers=headers, timeout=5)
    assert bad_json.status_code == 400 and "not valid JSON" in bad_json.json()["message"]
    missing_ref = requests.post(f"{standin.url}/api/v4/projects/1/pipeline", json={}, headers=headers, timeout=5)
    assert missing_ref.status_code == 400 and missing_ref.json()["message"] == "ref is missing"
    wrong_method = requests.delete(f"{standin.url}/api/v4/projects/1/jobs", headers=headers, timeout=5)
    assert wrong_method.status_code == 405
    unknown = requests.get(f"{standin.url}/api/v4/nothing/here", headers=headers, timeout=5)
    assert unknown.status_code == 404
    form = requests.post(f"{standin.url}/api/v4/projects/1/pipeline", data={"ref": "main"},
                         headers={"PRIVATE-TOKEN": standin.token}, timeout=5)
    assert form.status_code == 201 and form.json()["ref"] == "main"
