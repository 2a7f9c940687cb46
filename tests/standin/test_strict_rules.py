"""The stand-in enforces the GitLab rules of gitlab-mechanics §11 (each cites its source in the code)."""

from __future__ import annotations

import time

import gitlab
import pytest
import requests
import yaml

from retry_bot.gitlab.recreate import ChildPipelineSpec, build_child_config, pipeline_variables
from retry_bot.gitlab.jobdef import find_job
from standin.gitlab import StandIn
from standin.gitlab.expand import go_os_expand, runner_expand, runner_get
from standin.gitlab.state import BadRequest, Forbidden

pytestmark = pytest.mark.filterwarnings("ignore:Using variable_values:DeprecationWarning")

TEMPLATE = yaml.safe_load(open("packaging/gitlab-ci/retry-bot.yml").read())


@pytest.fixture
def s():
    with StandIn(seed=1) as server:
        yield server


def test_a_pipeline_of_only_pre_and_post_jobs_is_not_created(s):
    s.add_project("t/edges", {"a": {"stage": ".pre", "script": ["x"]}, "b": {"stage": ".post", "script": ["y"]}})
    with pytest.raises(BadRequest, match="Pipeline will not run for the selected trigger"):
        s.create_pipeline("t/edges")
    r = requests.post(f"{s.url}/api/v4/projects/t%2Fedges/pipeline", json={"ref": "main"},
                      headers={"PRIVATE-TOKEN": s.token}, timeout=5)
    assert r.status_code == 400 and "will not run" in r.json()["message"]["base"][0]


def test_default_and_inherit(s):
    s.add_project("t/def", {"default": {"before_script": ["setup"], "tags": ["gpu"], "interruptible": True},
                            "variables": {"G": "global"},
                            "a": {"script": ["x"]},
                            "b": {"script": ["y"], "inherit": {"default": False, "variables": False}},
                            "c": {"script": ["z"], "inherit": {"default": ["tags"], "variables": ["G"]}}})
    jobs = {j.name: j.spec for j in s.state.pipeline_jobs(s.create_pipeline("t/def").id)}
    assert jobs["a"].before_script == ("setup",) and jobs["a"].tags == ("gpu",) and jobs["a"].interruptible
    assert jobs["b"].before_script == () and jobs["b"].tags == () and not jobs["b"].interruptible
    assert ("G", "global") not in jobs["b"].variables
    assert jobs["c"].before_script == () and jobs["c"].tags == ("gpu",) and ("G", "global") in jobs["c"].variables


def test_workflow_rules_drop_api_pipelines(s):
    s.add_project("t/wf", {"workflow": {"rules": [{"if": '$CI_PIPELINE_SOURCE == "push"'}]}, "a": {"script": ["x"]}})
    s.create_pipeline("t/wf", source="push")
    with pytest.raises(BadRequest, match="filtered out by workflow rules"):
        s.create_pipeline("t/wf", source="api")


def test_trigger_forwards_yaml_variables_unless_told_not_to(s):
    child = 'c:\n  script: [x]\n  variables: {FLAVOR: special}\n'
    files = {"child.yml": child}
    for forward, expected in ((None, "plain"), ({"yaml_variables": False}, "special")):
        trig = {"include": "child.yml", "strategy": "depend", **({"forward": forward} if forward else {})}
        path = f"t/fwd{0 if forward is None else 1}"
        s.add_project(path, {"variables": {"FLAVOR": "plain"}, "bridge": {"stage": "test", "trigger": trig}},
                      files=files)
        pipe = s.create_pipeline(path)
        bridge = s.state.pipeline_jobs(pipe.id)[0]
        child_pipe = s.get_pipeline(bridge.downstream_pipeline_id)
        from standin.gitlab.payload import payload_variables
        cjob = s.state.pipeline_jobs(child_pipe.id)[0]
        env = {v["key"]: v["value"] for v in payload_variables(s.state, cjob.id)}
        assert env["FLAVOR"] == expected, forward


def test_jobs_are_processed_asynchronously_and_a_created_job_is_unplayable(s):
    s.state.processing_delay = 0.4
    s.add_project("t/async", {"m": {"script": ["x"], "when": "manual"}, "b": {"script": ["y"]}})
    pipe = s.create_pipeline("t/async")
    m = next(j for j in s.state.pipeline_jobs(pipe.id) if j.name == "m")
    assert m.status == "created"
    with pytest.raises(BadRequest, match="Unplayable Job"):
        s.state.play_job(m.id, user=s.user)
    time.sleep(0.5)
    s.state.tick()
    assert m.status == "manual"


def test_protected_refs_and_pipeline_variable_permissions(s):
    s.add_project("t/prot", {"a": {"script": ["x"]}})   # main protected for Maintainers (GitLab's default)
    dev = s.add_token("dev-t", "dev", role="developer")
    gl = gitlab.Gitlab(s.url, private_token="dev-t")
    with pytest.raises(gitlab.GitlabCreateError, match="sufficient permission to run a pipeline on 'main'"):
        gl.projects.get("t/prot", lazy=True).pipelines.create({"ref": "main"})
    pipe = s.create_pipeline("t/prot")
    job = s.state.pipeline_jobs(pipe.id)[0]
    s.start_job(job.id)
    s.finish_job(job.id, "failed")
    with pytest.raises(Forbidden):
        s.state.retry_job(job.id, user=dev)
    r = requests.post(f"{s.url}/api/graphql", headers={"Authorization": "Bearer dev-t"}, timeout=5, json={
        "query": "mutation($id: CiProcessableID!) { jobRetry(input: {id: $id}) { job { id } errors } }",
        "variables": {"id": f"gid://gitlab/Ci::Build/{job.id}"}})
    assert "permission" in r.json()["errors"][0]["message"]
    # another user's pipeline variables: Maintainer only; a triggerer reads its own
    s.state.protect_branch("t/prot", "main", push="developer", merge="developer")
    mine = s.state.create_pipeline("t/prot", "main", source="api", user=dev, variables={"A": "1"})
    theirs = s.state.create_pipeline("t/prot", "main", source="api", user=s.user, variables={"B": "2"})
    p = gl.projects.get("t/prot", lazy=True)
    assert [v.key for v in p.pipelines.get(mine.id, lazy=True).variables.list()] == ["A"]
    with pytest.raises(gitlab.GitlabListError) as err:
        p.pipelines.get(theirs.id, lazy=True).variables.list()
    assert err.value.response_code == 403
    # what a Developer sees of the project, and the protected branches
    proj = requests.get(f"{s.url}/api/v4/projects/t%2Fprot", headers={"PRIVATE-TOKEN": "dev-t"}, timeout=5).json()
    assert proj["permissions"]["project_access"]["access_level"] == 30
    assert "ci_pipeline_variables_minimum_override_role" not in proj
    pb = requests.get(f"{s.url}/api/v4/projects/t%2Fprot/protected_branches", headers={"PRIVATE-TOKEN": "dev-t"},
                      timeout=5).json()
    assert pb[0]["name"] == "main" and pb[0]["push_access_levels"][0]["access_level"] == 30


def test_auto_cancel_spares_a_hierarchy_whose_non_interruptible_job_started(s):
    """The resize pipeline (template + copy) survives a newer push; an interruptible one does not."""
    proj_cfg = {"stages": ["build", "test"], "default": {"interruptible": True}, **TEMPLATE,
                "build": {"stage": "build", "script": ["make"], "rules": [
                    {"if": "$RETRY_BOT_CHILD_CONFIG", "when": "never"}, {"when": "on_success"}]}}
    s.add_project("t/ac", proj_cfg)
    defn = find_job(yaml.safe_dump({"default": {"interruptible": True}, "build": {"script": ["make"]}}), "build")
    spec = ChildPipelineSpec(1, 1, 1, 2, None, ())
    bot_pipe = s.state.create_pipeline("t/ac", "main", source="api", user=s.user,
                                       variables=pipeline_variables(build_child_config(defn, spec), spec))
    gen = next(j for j in s.state.pipeline_jobs(bot_pipe.id) if j.name == "retry-bot:generate")
    s.start_job(gen.id)
    s.finish_job(gen.id, "success", artifacts={"retry-bot-child.yml": build_child_config(defn, spec)})
    copy = next(j for j in s.jobs() if j.name == "build" and j.pipeline_id != bot_pipe.id)
    s.state.play_job(copy.id, user=s.user)
    assert copy.status == "pending"
    s.set_ci_config("t/ac", proj_cfg)          # a new commit on main, and its pipeline
    s.create_pipeline("t/ac")
    assert copy.status == "pending", "the waiting copy was auto-canceled"
    # an interruptible pipeline that only ran interruptible jobs is canceled
    old = s.create_pipeline("t/ac")
    s.set_ci_config("t/ac", proj_cfg)
    s.create_pipeline("t/ac")
    assert all(j.status == "canceled" for j in s.state.pipeline_jobs(old.id))


def test_runner_expansion_is_go_os_expand_with_the_runners_get():
    get = runner_get([{"key": "A", "value": "x"}, {"key": "A", "value": "last"}])
    cases = {"$A": "last", "${A}": "last", "$$": "$", "$?": "", "$(cmd)": "$(cmd)", "a$": "a$", "${}b": "b",
             "$UNSET-": "-", "$1x": "x"}
    assert {k: go_os_expand(k, get) for k in cases} == cases
    env = runner_expand([{"key": "T", "value": "tok"}, {"key": "V", "value": "a $T $$", "raw": False},
                         {"key": "R", "value": "a $T", "raw": True}])
    assert env == {"T": "tok", "V": "a tok $", "R": "a $T"}


@pytest.mark.parametrize("version, profile", [("16.3.0", "16.0"), ("17.11.1-ee", "18.0"), ("18.0.2", "18.0"),
                                              ("18.6.0", "current")])
def test_version_picks_the_graphql_profile(version, profile):
    from standin.gitlab.graphql_api import profile_for_version

    assert profile_for_version(version) == profile
