"""The bot against a stand-in as strict as real GitLab (issue 9, gitlab-mechanics §11).

Each test is one production break or edge case the looser stand-in hid; each
failed on the code before the fix (see the docstrings).
"""

from __future__ import annotations

import json
import time

import pytest
import yaml

from retry_bot.live.actions import ActionRequest, ActionRunner, ActionSettings
from retry_bot.gitlab.client import GitLabClient, GraphQLSchemaError
from retry_bot.gitlab.recreate import CONFIG_VARIABLE, decode_config
from tests.bot_live.farm import TOKEN, Farm, cycle_until, make_bot, needs_memory

pytestmark = [pytest.mark.filterwarnings("ignore:Using variable_values:DeprecationWarning"), pytest.mark.slow]

#: A script that needs the runner's *job-time* expansion of its own text, never the pipeline variable's.
DOLLAR_SCRIPT = [
    'echo "$BUILD_DIR" "${BUILD_DIR}/out"',
    "echo $$ $? $(uname -s)",
    'curl -H "PRIVATE-TOKEN: $DEPLOY_TOKEN" --header "JOB-TOKEN: $CI_JOB_TOKEN" "$CI_API_V4_URL/x"',
    "make",
]
SECRET = "s3cr3t-deploy-token-value"


def _jobs(farm: Farm, name: str, project: str | None = None):
    return [j for j in farm.standin.jobs(project) if j.name == name]


def _failed_oom(farm: Farm, path: str, job: dict, **kw) -> None:
    farm.add_project(path, {"build": job}, **kw)
    farm.standin.create_pipeline(path)
    assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in _jobs(farm, "build", path)))


BUILD = {"stage": "build", "tags": ["small"], "script": ["make"], "variables": {"KUBERNETES_MEMORY_LIMIT": "128Mi"}}


@pytest.mark.parametrize("version", ["16.0.0", "18.0.0", "18.6.0"])
def test_a_failed_job_is_decided_and_resized_on_every_supported_gitlab(tmp_path, version):
    """Before: ``pipeline { id source }`` is invalid on current GitLab (PipelineInterface), and
    ``exitCode`` on 16.0: every failed job was "tried again next cycle" forever."""
    farm = Farm({"build": needs_memory(300)}, gitlab_version=version)
    try:
        _failed_oom(farm, "grp/v", BUILD)
        bot = make_bot(farm, tmp_path, ["grp/v"])
        try:
            assert cycle_until(bot, lambda: any(j.status == "success" for j in _jobs(farm, "build")), timeout=30)
            assert bot.store.get_job(_jobs(farm, "build")[0].id).decided
            feats = bot.client.features()
            assert feats.exit_code is (version != "16.0.0") and feats.job_retry is (version != "16.0.0")
        finally:
            bot.close()
    finally:
        farm.close()


def test_a_graphql_validation_error_is_not_transient_and_the_job_is_still_decided(tmp_path, monkeypatch):
    """Before: a validation error was a GitLabApiError the poller re-tried every cycle, forever."""
    farm = Farm({"build": needs_memory(300)})
    try:
        _failed_oom(farm, "grp/g", BUILD)
        # the document the bot sent before the fix: `source` on the PipelineInterface
        monkeypatch.setattr(GitLabClient, "JOB_QUERY", GitLabClient.JOB_QUERY.replace(
            "pipeline { id ... on Pipeline { source } }", "pipeline { id source }"))
        client = GitLabClient(farm.url, TOKEN)
        farm.standin.reset_calls()
        with pytest.raises(GraphQLSchemaError, match="PipelineInterface"):
            client.job_details("grp/g", _jobs(farm, "build")[0].id)
        assert len(farm.standin.calls_matching("POST", "graphql")) == 1        # never retried
        client.close()
        bot = make_bot(farm, tmp_path, ["grp/g"])
        try:
            report = bot.once()
            assert [o.action for o in report.decided] == ["resize"]            # decided from REST + the record
        finally:
            bot.close()
    finally:
        farm.close()


def test_the_copy_survives_runner_expansion_byte_for_byte_and_no_secret_lands_in_an_artifact(tmp_path):
    """Before: the runner expanded RETRY_BOT_CHILD_CONFIG: ``$BUILD_DIR`` became empty, ``$$`` ``$``,
    and the generator's CI_JOB_TOKEN and the masked DEPLOY_TOKEN were written into the artifact."""
    farm = Farm({"build": needs_memory(300)})
    try:
        job = dict(BUILD, script=DOLLAR_SCRIPT, variables={"KUBERNETES_MEMORY_LIMIT": "128Mi", "BUILD_DIR": "/b"})
        farm.add_project("grp/x", {"build": job})
        farm.standin.state.projects[farm.standin.state.project("grp/x").id].ci_variables.append(
            {"key": "DEPLOY_TOKEN", "value": SECRET, "masked": True})
        farm.standin.create_pipeline("grp/x")
        assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in _jobs(farm, "build")))
        bot = make_bot(farm, tmp_path, ["grp/x"])
        try:
            assert cycle_until(bot, lambda: any(j.status == "success" for j in _jobs(farm, "build")), timeout=30)
        finally:
            bot.close()
        gen = _jobs(farm, "retry-bot:generate")[0]
        sent = decode_config(farm.standin.pipeline_variables(gen.pipeline_id)[CONFIG_VARIABLE])
        artifact = gen.artifacts["retry-bot-child.yml"]
        assert artifact == sent.encode("utf-8")                                   # byte for byte
        assert yaml.safe_load(artifact)["build"]["script"] == DOLLAR_SCRIPT
        for job_ in farm.standin.jobs():
            assert job_.token.encode() not in artifact
        assert SECRET.encode() not in artifact
        copy = _jobs(farm, "build")[-1]
        assert list(copy.spec.script) == DOLLAR_SCRIPT                            # the copy runs the same text
    finally:
        farm.close()


def test_the_resize_pipeline_survives_the_projects_default_variables_and_workflow_rules(tmp_path):
    """Before: `default: before_script` failed the generator, global YAML variables (forwarded by
    the trigger) overrode the copy's own job variables, and the old template's all-.pre/.post
    pipeline was refused."""
    farm = Farm({"build": needs_memory(300)})
    try:
        job = dict(BUILD, variables={"KUBERNETES_MEMORY_LIMIT": "128Mi", "FLAVOR": "special"})
        farm.add_project("grp/d", {"build": job})
        proj = farm.standin.state.project("grp/d")
        cfg = farm.standin.state.projects[proj.id].configs[proj.refs["main"]]
        cfg = dict(cfg, default={"before_script": ["exit 3"], "interruptible": True},
                   variables={"FLAVOR": "plain"},
                   workflow={"rules": [{"if": "$RETRY_BOT_CHILD_CONFIG"},
                                       {"if": '$CI_PIPELINE_SOURCE == "push"'}]})
        cfg["build"] = dict(cfg["build"], before_script=[])
        farm.standin.set_ci_config("grp/d", cfg)
        farm.standin.create_pipeline("grp/d")
        assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in _jobs(farm, "build")))
        bot = make_bot(farm, tmp_path, ["grp/d"])
        try:
            assert cycle_until(bot, lambda: any(j.status == "success" for j in _jobs(farm, "build")), timeout=30)
        finally:
            bot.close()
        copy = _jobs(farm, "build")[-1]
        ran = [v for (jid, _, v) in farm.runs if jid == copy.id][0]
        assert ran["FLAVOR"] == "special"
        assert all(j.status == "success" for j in _jobs(farm, "retry-bot:generate"))
    finally:
        farm.close()


def test_a_copy_processed_late_is_played_once_it_is_manual(tmp_path):
    """Before: the bot played the copy while it was still ``created`` and got 400 "Unplayable Job",
    which failed the resize for good."""
    farm = Farm({"build": needs_memory(300)}, processing_delay=1.0)
    try:
        _failed_oom(farm, "grp/late", BUILD)
        bot = make_bot(farm, tmp_path, ["grp/late"])
        try:
            assert cycle_until(bot, lambda: any(j.status == "success" for j in _jobs(farm, "build")), timeout=40)
            assert not farm.standin.calls_matching("POST", r"/play$") or all(
                c.status == 200 for c in farm.standin.calls_matching("POST", r"/play$"))
        finally:
            bot.close()
    finally:
        farm.close()


def test_recovery_does_not_take_a_created_copy_for_played(tmp_path):
    """Before: after a crash with the play intent open, a copy still ``created`` was taken for
    "already played" and the resize completed without ever playing it."""
    farm = Farm({"build": needs_memory(300)}, processing_delay=0.0)
    try:
        _failed_oom(farm, "grp/rec", BUILD)

        def delay_child(job) -> None:   # the child pipeline (made when the generator is done) stays unprocessed
            if job.name == "retry-bot:generate" and job.status == "running":
                farm.standin.state.processing_delay = 600.0
        farm.standin.on_job_change(delay_child)
        bot = make_bot(farm, tmp_path, ["grp/rec"])
        try:
            assert cycle_until(bot, lambda: any(j.spec.when == "manual" for j in _jobs(farm, "build")), timeout=30)
            copy = [j for j in _jobs(farm, "build") if j.spec.when == "manual"][0]
            assert copy.status == "created"
            intent = next(i for i in bot.store.open_intents() if i.idempotency_key == f"resize:{_jobs(farm, 'build')[0].id}")
            # a crashed earlier run had begun the play
            bot.store.begin_action(f"{intent.idempotency_key}:play", intent.job_id, "play",
                                   {"project_id": copy.project_id, "job_id": copy.id, "variables": {}})
            fresh = ActionRunner(bot.client, bot.store, settings=ActionSettings(settle_seconds=0.0))
            out = fresh.drive(bot.store.get_action(intent.idempotency_key))
            assert out.status == "waiting", out
            assert bot.store.get_action(intent.idempotency_key).status == "begun"
        finally:
            bot.close()
    finally:
        farm.close()


def test_own_pipeline_is_found_without_reading_pipeline_variables(tmp_path):
    """Before: recovery read the variables of every recent pipeline on the ref; another user's
    api pipeline answers 403 to a Developer, so the intent waited forever."""
    farm = Farm({"build": needs_memory(300)})
    try:
        farm.add_project("grp/own", {"build": BUILD}, protected_branches={})
        dev = farm.standin.add_token("glpat-dev-bot", "dev-bot", role="developer")
        other = farm.standin.add_token("glpat-other", "ci-tool", role="maintainer")
        farm.standin.create_pipeline("grp/own")
        assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in _jobs(farm, "build")))
        origin = _jobs(farm, "build")[0]
        bot = make_bot(farm, tmp_path, ["grp/own"], env={"FARM_TOKEN": "glpat-dev-bot"})
        try:
            # the crash: the bot's pipeline exists, but its id never reached the state store
            req = ActionRequest(kind="resize", project_id=origin.project_id, project_path="grp/own", job_id=origin.id,
                                job_name="build", pipeline_id=origin.pipeline_id, ref="main",
                                origin_job_id=origin.id, attempt=2, variables={"KUBERNETES_MEMORY_LIMIT": "384Mi"})
            intent = bot.store.begin_action(req.key, req.job_id, "resize", req.to_payload())
            sub = bot.store.begin_action(f"{req.key}:pipeline", req.job_id, "create_pipeline", {})
            from retry_bot.gitlab.recreate import ChildPipelineSpec, build_child_config, pipeline_variables
            from retry_bot.gitlab.jobdef import find_job
            spec = ChildPipelineSpec(origin.id, origin.pipeline_id, origin.id, 2, "small", ("small",))
            text = build_child_config(find_job(yaml.safe_dump({"build": BUILD}), "build"), spec)
            ours = farm.standin.state.create_pipeline("grp/own", "main", source="api", user=dev,
                                                      variables=pipeline_variables(text, spec))
            farm.standin.state.create_pipeline("grp/own", "main", source="api", user=other,
                                               variables={"DEPLOY": "1"})
            runner = ActionRunner(bot.client, bot.store, settings=ActionSettings(settle_seconds=0.0))
            # it is told from other bot pipelines on the ref by its child pipeline's job: the intent
            # waits (writes nothing) until GitLab has made the child
            deadline = time.monotonic() + 15
            while True:
                runner.drive(bot.store.get_action(intent.idempotency_key))
                done = bot.store.get_action(sub.idempotency_key)
                if done.status != "begun" or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert done.status == "completed" and done.result["pipeline_id"] == ours.id
            assert len(farm.standin.calls_matching("POST", r"/pipeline$")) == 0   # never made a second one
            assert not farm.standin.calls_matching("GET", r"/variables$")
        finally:
            bot.close()
    finally:
        farm.close()


def test_a_failed_manual_job_is_retried_directly_with_jobretry_variables(tmp_path):
    """Before: a failed ``when: manual`` job was re-created through a child pipeline."""
    farm = Farm({"build": needs_memory(300)})
    try:
        farm.add_project("grp/m", {"build": dict(BUILD, rules=[{"when": "manual"}])})
        farm.standin.create_pipeline("grp/m")
        assert farm.standin.wait_for(lambda: any(j.status == "manual" for j in _jobs(farm, "build")))
        farm.standin.state.play_job(_jobs(farm, "build")[0].id, user=farm.standin.user)
        assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in _jobs(farm, "build")))
        bot = make_bot(farm, tmp_path, ["grp/m"])
        try:
            assert cycle_until(bot, lambda: any(j.status == "success" for j in _jobs(farm, "build")), timeout=30)
        finally:
            bot.close()
        assert not farm.standin.calls_matching("POST", r"/pipeline$")            # no child pipeline
        ok = [j for j in _jobs(farm, "build") if j.status == "success"][0]
        assert ok.retry_of == _jobs(farm, "build")[0].id
        assert {v["key"]: v["value"] for v in ok.job_variables}["KUBERNETES_MEMORY_LIMIT"] == "384Mi"
    finally:
        farm.close()


def test_protected_main_needs_push_or_merge_rights_and_the_hint_names_them(tmp_path):
    """Before: the 400 hint blamed the template or the variables role."""
    farm = Farm({"build": needs_memory(300)})
    try:
        _failed_oom(farm, "grp/p", BUILD)   # main protected: Maintainers push and merge (GitLab's default)
        farm.standin.add_token("glpat-dev-bot", "dev-bot", role="developer")
        bot = make_bot(farm, tmp_path, ["grp/p"], env={"FARM_TOKEN": "glpat-dev-bot"})
        try:
            assert cycle_until(bot, lambda: any(i.status == "failed" for i in [
                bot.store.get_action(f"resize:{_jobs(farm, 'build')[0].id}")] if i is not None), timeout=20)
            err = bot.store.get_action(f"resize:{_jobs(farm, 'build')[0].id}").error
            assert "protected" in err.lower() and "push or merge" in err
        finally:
            bot.close()
        # allowed to push to main by name: the same Developer token works
        farm.standin.state.protect_branch("grp/p", "main", users=["dev-bot"])
        farm.standin.create_pipeline("grp/p")
        assert farm.standin.wait_for(lambda: sum(j.status == "failed" for j in _jobs(farm, "build")) == 2)
        (tmp_path / "b").mkdir()
        bot = make_bot(farm, tmp_path / "b", ["grp/p"], env={"FARM_TOKEN": "glpat-dev-bot"})
        try:
            assert cycle_until(bot, lambda: any(j.status == "success" for j in _jobs(farm, "build")), timeout=30)
        finally:
            bot.close()
    finally:
        farm.close()


def test_documents_the_bot_sends_validate_against_every_profile():
    """Every GraphQL document of the client, against each version profile it is sent to."""
    from graphql import parse, validate

    from retry_bot.gitlab.client import GitLabFeatures
    from standin.gitlab.graphql_api import PROFILE_VERSIONS, schema_for

    for profile, version in PROFILE_VERSIONS.items():
        feats = GitLabFeatures.from_version(version)
        schema = schema_for(profile)
        sent = [GitLabClient.JOB_QUERY if feats.exit_code else GitLabClient.JOB_QUERY_NO_EXIT_CODE]
        if feats.job_retry:
            sent.append(GitLabClient.JOB_RETRY)
        for doc in sent:
            assert validate(schema, parse(doc)) == [], (profile, doc)
    # and the old document really is refused by current GitLab
    old = GitLabClient.JOB_QUERY.replace("pipeline { id ... on Pipeline { source } }", "pipeline { id source }")
    assert validate(schema_for("current"), parse(old))
    assert json.dumps(PROFILE_VERSIONS)


def test_the_copy_keeps_the_rules_variables_that_applied_to_the_job(tmp_path):
    """Before: the copy dropped `rules:` and with them the `rules:variables` / `workflow:rules:variables`
    that applied to the original job."""
    farm = Farm({"build": needs_memory(300)})
    try:
        job = dict(BUILD, rules=[{"if": '$CI_PIPELINE_SOURCE == "web"', "variables": {"MODE": "web"}},
                                 {"if": '$CI_COMMIT_BRANCH == "main"', "variables": {"MODE": "release"}}])
        farm.add_project("grp/r", {"build": job})
        proj = farm.standin.state.project("grp/r")
        cfg = dict(farm.standin.state.projects[proj.id].configs[proj.refs["main"]])
        cfg["workflow"] = {"rules": [{"if": "$RETRY_BOT_CHILD_CONFIG"},
                                     {"if": '$CI_COMMIT_BRANCH == "main"', "variables": {"CHANNEL": "stable"}}]}
        farm.standin.set_ci_config("grp/r", cfg)
        farm.standin.create_pipeline("grp/r")
        assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in _jobs(farm, "build")))
        origin_env = [v for (jid, _, v) in farm.runs if jid == _jobs(farm, "build")[0].id][0]
        assert origin_env["MODE"] == "release" and origin_env["CHANNEL"] == "stable"
        bot = make_bot(farm, tmp_path, ["grp/r"])
        try:
            assert cycle_until(bot, lambda: any(j.status == "success" for j in _jobs(farm, "build")), timeout=30)
        finally:
            bot.close()
        copy_env = [v for (jid, _, v) in farm.runs if jid == _jobs(farm, "build")[-1].id][0]
        assert copy_env["MODE"] == "release" and copy_env["CHANNEL"] == "stable"
    finally:
        farm.close()


def test_the_lint_call_has_no_include_merged_yaml(tmp_path):
    """Before: the bot sent `include_merged_yaml`, a parameter GET /ci/lint does not have."""
    farm = Farm({"build": needs_memory(300)})
    try:
        _failed_oom(farm, "grp/l", BUILD)
        bot = make_bot(farm, tmp_path, ["grp/l"])
        try:
            assert cycle_until(bot, lambda: bool(farm.standin.calls_matching("GET", r"/ci/lint")), timeout=20)
        finally:
            bot.close()
        assert all("include_merged_yaml" not in c.query for c in farm.standin.calls_matching("GET", r"/ci/lint"))
    finally:
        farm.close()


def test_before_16_4_a_failed_manual_job_is_recreated_through_rest_only(tmp_path):
    """GitLab 16.0-16.3 has no jobRetry(id: CiProcessableID): the bot degrades to REST (a child
    pipeline and play) instead of sending a mutation GitLab refuses."""
    farm = Farm({"build": needs_memory(300)}, gitlab_version="16.3.0")
    try:
        farm.add_project("grp/m16", {"build": dict(BUILD, rules=[{"when": "manual"}])})
        farm.standin.create_pipeline("grp/m16")
        assert farm.standin.wait_for(lambda: any(j.status == "manual" for j in _jobs(farm, "build")))
        farm.standin.state.play_job(_jobs(farm, "build")[0].id, user=farm.standin.user)
        assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in _jobs(farm, "build")))
        bot = make_bot(farm, tmp_path, ["grp/m16"])
        try:
            assert cycle_until(bot, lambda: any(j.status == "success" for j in _jobs(farm, "build")), timeout=30)
        finally:
            bot.close()
        assert farm.standin.calls_matching("POST", r"/pipeline$")
        ok = [j for j in _jobs(farm, "build") if j.status == "success"][0]
        assert ok.retry_of is None and farm.standin.get_pipeline(ok.pipeline_id).source == "parent_pipeline"
    finally:
        farm.close()
