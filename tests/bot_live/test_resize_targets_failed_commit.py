"""A resize rebuilds the failed commit, never the branch head: it is skipped when the branch moved on
(even by a push that made no pipeline), carries the origin SHA to the copy, and merge-request
pipelines are not re-created.  Against the stand-in over real HTTP."""

from __future__ import annotations

import pytest

from tests.bot_live.farm import cycle_until, make_bot, oom_project, pipeline_creates

pytestmark = pytest.mark.slow  # end to end: outside the fast lane (pytest -m "not slow")

ORIGIN_SHA_VARIABLE = "RETRY_BOT_ORIGIN_SHA"   # documented in docs/live-bot.md


def test_resize_is_skipped_when_the_branch_moved_on_without_a_pipeline(farm, tmp_path):
    oom_project(farm)
    origin = farm.standin.jobs("grp/d")[0]
    old_sha = farm.standin.get_pipeline(origin.pipeline_id).sha
    # a push that created no pipeline ([skip ci]): the newer-pipeline check cannot see it
    new_sha = farm.standin.set_ci_config("grp/d", farm.standin.state.project("grp/d").configs[old_sha])
    assert new_sha != old_sha and len(farm.standin.pipelines("grp/d")) == 1
    farm.standin.reset_calls()
    bot = make_bot(farm, tmp_path, ["grp/d"])
    try:
        report = bot.once()
        [out] = report.decided
        assert out.action == "none" and "moved on" in out.reason and new_sha[:12] in out.reason, out.reason
        assert bot.store.get_job(origin.id).decision["rule"] == "skip_superseded"
        assert len(farm.standin.calls_matching("GET", r"/repository/branches/main$")) == 1
        assert pipeline_creates(farm) == []
    finally:
        bot.close()


def test_resize_on_an_unmoved_branch_carries_the_origin_sha_to_the_copy(farm, tmp_path):
    oom_project(farm)
    origin = farm.standin.jobs("grp/d")[0]
    sha = farm.standin.get_pipeline(origin.pipeline_id).sha
    bot = make_bot(farm, tmp_path, ["grp/d"])
    try:
        assert cycle_until(bot, lambda: any(j.status == "success" for j in farm.standin.jobs("grp/d")
                                            if j.name == "build"))
        copy = [j for j in farm.standin.jobs("grp/d") if j.name == "build"][-1]
        run_vars = [v for (jid, n, v) in farm.runs if jid == copy.id][-1]
        assert run_vars[ORIGIN_SHA_VARIABLE] == sha
        parent = farm.standin.get_pipeline(farm.standin.get_job(
            farm.standin.get_pipeline(copy.pipeline_id).parent_bridge_id).pipeline_id)
        assert farm.standin.pipeline_variables(parent.id)[ORIGIN_SHA_VARIABLE] == sha
        assert farm.standin.calls_matching("GET", r"/repository/branches/main$")
    finally:
        bot.close()


def test_merge_request_pipeline_is_not_recreated(farm, tmp_path):
    oom_project(farm, pipeline=False)
    proj = farm.standin.state.project("grp/d")
    farm.standin.state.create_pipeline("grp/d", "refs/merge-requests/7/head", source="merge_request_event",
                                       sha=proj.refs["main"])
    assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in farm.standin.jobs("grp/d")))
    bot = make_bot(farm, tmp_path, ["grp/d"])
    try:
        [out] = bot.once().decided
        assert out.action == "none" and "merge-request pipeline" in out.reason, out.reason
        assert bot.store.get_job(out.job_id).decision["rule"] == "merge_request_pipeline"
        assert pipeline_creates(farm) == [] and not bot.store.open_intents()
    finally:
        bot.close()
