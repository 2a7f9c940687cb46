"""The real bot against the GitLab stand-in: end-to-end outcomes over real HTTP."""

from __future__ import annotations

import pytest

from runner_wrapper.quantity import parse_memory

from retry_bot.gitlab.recreate import ORIGIN_VARIABLE
from tests.bot_live.farm import compile_error, cycle_until, flaky_dns, make_bot, needs_memory

pytestmark = pytest.mark.slow  # end to end: outside the fast lane (pytest -m "not slow")

MiB = 2**20


def _jobs(farm, name):
    return [j for j in farm.standin.jobs() if j.name == name]


def test_oom_job_is_recreated_as_manual_job_played_with_more_memory_then_succeeds(farm, tmp_path):
    farm.behaviours["build"] = needs_memory(300)
    farm.add_project("grp/app", {"build": {"stage": "build", "tags": ["small"], "script": ["make"],
                                           "variables": {"KUBERNETES_MEMORY_LIMIT": "128Mi"}}})
    farm.standin.create_pipeline("grp/app")
    assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in _jobs(farm, "build")))
    origin = _jobs(farm, "build")[0]
    bot = make_bot(farm, tmp_path, ["grp/app"])
    try:
        assert cycle_until(bot, lambda: any(j.status == "success" for j in _jobs(farm, "build")))
        builds = _jobs(farm, "build")
        assert len(builds) == 2, [(j.id, j.status) for j in builds]
        copy = builds[1]
        # a when:manual copy in a child pipeline, played with job_variables_attributes
        assert copy.spec.when == "manual"
        played = {v["key"]: v["value"] for v in copy.job_variables}
        assert played["KUBERNETES_MEMORY_LIMIT"] == "384Mi"   # 128Mi + min_bump 256Mi
        child = farm.standin.get_pipeline(copy.pipeline_id)
        assert child.source == "parent_pipeline"
        parent_vars = farm.standin.pipeline_variables(farm.standin.get_pipeline(
            farm.standin.get_job(child.parent_bridge_id).pipeline_id).id)
        assert parent_vars[ORIGIN_VARIABLE] == str(origin.id)
        run_vars = [v for (jid, n, v) in farm.runs if jid == copy.id][0]
        assert run_vars["KUBERNETES_MEMORY_LIMIT"] == "384Mi" and run_vars[ORIGIN_VARIABLE] == str(origin.id)
        # the state store tells the story
        hist = bot.store.history(copy.id)
        kinds = [e["kind"] for e in hist]
        assert "decided" in kinds and "action_completed" in kinds and "lineage_member" in kinds
        cycle_until(bot, lambda: bot.metrics.oom_recoveries._value.get() == 1, timeout=5)
        assert bot.metrics.oom_recoveries._value.get() == 1
    finally:
        bot.close()


def test_compile_error_is_never_retried_and_dns_failure_gets_one_plain_retry(farm, tmp_path):
    farm.behaviours["compile"] = compile_error
    farm.behaviours["fetch"] = flaky_dns(fail_times=5)     # keeps failing: only ONE retry allowed
    farm.add_project("grp/lib", {"compile": {"stage": "build", "tags": ["small"], "script": ["make"]},
                                 "fetch": {"stage": "build", "tags": ["small"], "script": ["curl"]}})
    farm.standin.create_pipeline("grp/lib")
    assert farm.standin.wait_for(lambda: len([j for j in farm.standin.jobs("grp/lib") if j.status == "failed"]) == 2)
    bot = make_bot(farm, tmp_path, ["grp/lib"])
    try:
        assert cycle_until(bot, lambda: len(_jobs(farm, "fetch")) == 2
                           and all(j.status == "failed" for j in _jobs(farm, "fetch")))
        for _ in range(5):
            bot.once()
        assert len(_jobs(farm, "compile")) == 1                       # never retried
        assert len(_jobs(farm, "fetch")) == 2                          # exactly one plain retry
        assert farm.standin.calls_matching("POST", r"/play$") == []
        dec = bot.store.get_job(_jobs(farm, "compile")[0].id).decision
        assert dec["action"] == "none" and dec["family"] == "build_error"
        second = bot.store.get_job(_jobs(farm, "fetch")[1].id).decision
        assert second["action"] == "none" and "budget" in second["reason"]
    finally:
        bot.close()


def test_job_that_keeps_oom_climbs_the_runner_class_ladder_and_stops_at_its_budget(farm, tmp_path):
    farm.behaviours["huge"] = needs_memory(100_000)           # never fits
    farm.add_project("grp/huge", {"huge": {"stage": "build", "tags": ["small"], "script": ["make"],
                                           "variables": {"KUBERNETES_MEMORY_LIMIT": "256Mi"}}})
    farm.standin.create_pipeline("grp/huge")
    assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in _jobs(farm, "huge")))
    bot = make_bot(farm, tmp_path, ["grp/huge"])
    try:
        def settled():
            js = _jobs(farm, "huge")
            return len(js) == 4 and all(j.status == "failed" for j in js) and not bot.store.open_intents() \
                and all(bot.store.get_job(j.id) and bot.store.get_job(j.id).decided for j in js)
        assert cycle_until(bot, settled, timeout=40)
        for _ in range(4):
            bot.once()
        js = _jobs(farm, "huge")
        assert len(js) == 4                                     # origin + budget (3) re-creations, no more
        limits = []
        for j in js[1:]:
            run_vars = [v for (jid, n, v) in farm.runs if jid == j.id][-1]
            limits.append(parse_memory(run_vars["KUBERNETES_MEMORY_LIMIT"]))
        assert limits == sorted(limits) and len(set(limits)) == 3    # monotone growth
        tags = [tuple(j.spec.tags) for j in js]
        assert tags[0] == ("small",) and tags[-1] in (("medium",), ("large",))   # climbed the ladder
        last = bot.store.get_job(js[-1].id).decision
        assert last["action"] == "none" and "budget" in last["reason"]
        lineage = bot.store.lineage_for(js[-1].id)
        assert lineage.origin_job_id == js[0].id and len(lineage.attempts) == 4
    finally:
        bot.close()


def test_later_attempt_on_the_same_class_uses_graphql_jobretry_with_variables(farm, tmp_path):
    farm.behaviours["mid"] = needs_memory(700)
    farm.add_project("grp/mid", {"mid": {"stage": "build", "tags": ["medium"], "script": ["make"],
                                         "variables": {"KUBERNETES_MEMORY_LIMIT": "128Mi"}}})
    farm.standin.create_pipeline("grp/mid")
    assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in _jobs(farm, "mid")))
    bot = make_bot(farm, tmp_path, ["grp/mid"])
    try:
        assert cycle_until(bot, lambda: any(j.status == "success" for j in _jobs(farm, "mid")), timeout=30)
        js = _jobs(farm, "mid")
        gql = farm.standin.calls_matching("POST", r"graphql")
        assert farm.standin.calls_matching("POST", r"/pipeline$").__len__() == 1     # one re-creation ...
        ok = [j for j in js if j.status == "success"][0]
        assert ok.retry_of is not None and farm.standin.get_job(ok.retry_of).spec.when == "manual"  # ... then jobRetry
        assert {v["key"]: v["value"] for v in ok.job_variables}["KUBERNETES_MEMORY_LIMIT"] in ("768Mi", "896Mi",
                                                                                               "960Mi", "1Gi")
        assert gql and all(tuple(j.spec.tags) == ("medium",) for j in js)
    finally:
        bot.close()


def test_generated_child_pipeline_job_is_recreated_from_the_generator_artifact(farm, tmp_path):
    """Spack-style: a `generate` job writes the child configuration as an artifact; the
    failed job exists only there, not in the root configuration."""
    child = {"build-pkg": {"stage": "test", "tags": ["small"], "script": ["spack install pkg"],
                           "variables": {"KUBERNETES_MEMORY_LIMIT": "128Mi", "SPACK_JOB_SPEC_PKG_NAME": "pkg"}}}
    import json as _json
    farm.behaviours["generate"] = "bash"
    farm.behaviours["build-pkg"] = needs_memory(300)
    farm.add_project("spack/pkgs", {
        "generate": {"stage": "build", "script": ["mkdir -p jobs",
                                                  f"printf '%s' '{_json.dumps(child)}' > jobs/child.yml"],
                     "artifacts": {"paths": ["jobs/child.yml"]}},
        "build-jobs": {"stage": "test", "needs": [{"job": "generate", "artifacts": True}],
                       "trigger": {"include": [{"artifact": "jobs/child.yml", "job": "generate"}],
                                   "strategy": "depend"}}})
    farm.standin.create_pipeline("spack/pkgs")
    assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in _jobs(farm, "build-pkg")))
    bot = make_bot(farm, tmp_path, [], groups=("spack",),
                   extra='[[jobdef.generated]]\njob = "generate"\nartifact = "jobs/child.yml"\n')
    try:
        assert cycle_until(bot, lambda: any(j.status == "success" for j in _jobs(farm, "build-pkg")))
        copy = [j for j in _jobs(farm, "build-pkg") if j.status == "success"][0]
        assert copy.spec.when == "manual"
        run_vars = [v for (jid, n, v) in farm.runs if jid == copy.id][0]
        assert run_vars["SPACK_JOB_SPEC_PKG_NAME"] == "pkg" and run_vars["KUBERNETES_MEMORY_LIMIT"] == "384Mi"
        assert farm.standin.calls_matching("GET", r"/artifacts/jobs/child.yml$")
        # the project was found through its group; the normal jobs did not run in the bot's pipeline
        bot_pipes = [p for p in farm.standin.pipelines("spack/pkgs") if p.source == "api"]
        assert len(bot_pipes) == 1
        assert {farm.standin.get_job(j).name for j in bot_pipes[0].job_ids} == {"retry-bot:generate",
                                                                                 "retry-bot:child"}
    finally:
        bot.close()


def test_kubernetes_oomkilled_without_usage_record_sizes_from_the_yaml_limit(farm, tmp_path):
    """No runner wrapper: the limit in force comes from the job's YAML variables (merged config)."""
    def k8s(payload, v):
        limit = parse_memory(v.get("KUBERNETES_MEMORY_LIMIT", "0"))
        if limit < 1200 * MiB:
            return {"status": "failed", "failure_reason": "runner_system_failure", "exit_code": None,
                    "log": b"$ make -j8\nERROR: Job failed (system failure): Error in container build: "
                           b"exit code: 137, reason: 'OOMKilled'\n"}
        return {"status": "success", "log": b"ok\n"}
    farm.behaviours["k8s"] = k8s
    farm.add_project("grp/k8s", {"k8s": {"stage": "build", "tags": ["medium"], "script": ["make"],
                                         "variables": {"KUBERNETES_MEMORY_LIMIT": "1Gi"}}})
    farm.standin.create_pipeline("grp/k8s")
    assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in _jobs(farm, "k8s")))
    bot = make_bot(farm, tmp_path, ["grp/k8s"])
    try:
        assert cycle_until(bot, lambda: any(j.status == "success" for j in _jobs(farm, "k8s")))
        origin, copy = _jobs(farm, "k8s")[:2]
        dec = bot.store.get_job(origin.id).decision
        assert dec["family"] == "oom" and dec["action"] == "resize"
        played = parse_memory({v["key"]: v["value"] for v in copy.job_variables}["KUBERNETES_MEMORY_LIMIT"])
        assert played >= int(1.5 * 1024) * MiB and copy.spec.tags == ("large",)   # past medium's 1Gi: next class
    finally:
        bot.close()
