"""Defects found by review, each against the stand-in over real HTTP.

1. a bot that cannot reach GitLab (wrong token, unknown project) reports errors, exits 1,
   and turns unhealthy; 2. a resize never rebuilds another commit than the failed one, and
   merge-request pipelines are not re-created; 3. a dry run does not use the failed jobs up;
4. a single instance reports itself leader; 5. history numbers attempts as decisions do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from retry_bot.commands.history import render
from tests.bot_live.farm import (ENV, POLICY, ROOT, TOKEN, Farm, bot_config_text, compile_error, cycle_until,
                                 make_bot, needs_memory)


@pytest.fixture()
def farm():
    f = Farm({"build": needs_memory(300), "compile": compile_error})
    yield f
    f.close()


def _oom_project(farm: Farm, path: str = "grp/d", *, pipeline: bool = True):
    farm.add_project(path, {"build": {"stage": "build", "tags": ["small"], "script": ["make"],
                                      "variables": {"KUBERNETES_MEMORY_LIMIT": "128Mi"}}})
    if pipeline:
        farm.standin.create_pipeline(path)
        assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in farm.standin.jobs(path)))


ORIGIN_SHA_VARIABLE = "RETRY_BOT_ORIGIN_SHA"   # documented in docs/live-bot.md


def _creates(farm: Farm) -> list:
    return farm.standin.calls_matching("POST", r"/pipeline$")


def _sample(bot, name: str, **labels: str) -> float:
    v = bot.metrics.registry.get_sample_value(name, labels)
    return 0.0 if v is None else v


# --------------------------------------------------------------------------- 1. errors are errors

def _once(cfg, env):
    return subprocess.run([sys.executable, "-m", "retry_bot", "--log-format", "json", "once", "--config", str(cfg)],
                          env={**os.environ, **env, "PYTHONPATH": str(ROOT)}, capture_output=True, timeout=60,
                          cwd=str(ROOT))


def test_once_with_a_refused_token_exits_1_naming_the_token_problem_never_the_token(farm, tmp_path):
    _oom_project(farm)
    (tmp_path / "policy.toml").write_text(POLICY)
    cfg = tmp_path / "bot.toml"
    cfg.write_text(bot_config_text(farm.url, tmp_path / "state.db", tmp_path / "policy.toml", ["grp/d"]))
    wrong = "glpat-WRONG-token-987654"
    p = _once(cfg, {**ENV, "FARM_TOKEN": wrong})
    err = p.stderr.decode()
    assert p.returncode == 1, err[-2000:]
    assert "GitLab refused the bot's token" in err and "token_env" in err and "401" in err
    assert wrong not in err and wrong not in p.stdout.decode() and TOKEN not in err
    assert '"event": "gitlab_token_rejected"' in err
    done = [json.loads(line) for line in err.splitlines() if '"poll_cycle_done"' in line]
    assert done and done[-1]["errors"] >= 1 and done[-1]["failed"] is True
    assert "Traceback" not in err
    # the right token: the same command succeeds (exit 0, the job decided)
    ok = _once(cfg, ENV)
    assert ok.returncode == 0, ok.stderr.decode()[-2000:]


def test_unknown_project_is_an_error_of_the_cycle_while_the_others_are_still_polled(farm, tmp_path):
    _oom_project(farm)
    bot = make_bot(farm, tmp_path, ["grp/d", "grp/does-not-exist"])
    try:
        report = bot.once()
        assert any("grp/does-not-exist" in e and "404" in e for e in report.errors), report.errors
        assert report.fatal is None and not report.failed        # grp/d was polled: not a failed cycle
        assert [o.action for o in report.decided] == ["resize"]
        assert _sample(bot, "retry_bot_poll_cycles_total", outcome="error") == 1
        assert _sample(bot, "retry_bot_poll_cycles_total", outcome="ok") == 0
    finally:
        bot.close()
    # as a command: exit 1 (the cycle had errors), as `once --help` says
    cfg = tmp_path / "bot.toml"
    p = _once(cfg, ENV)
    assert p.returncode == 1 and b"grp/does-not-exist" in p.stderr, p.stderr.decode()[-2000:]


def test_healthz_turns_unhealthy_after_n_failed_cycles_and_recovers(farm, tmp_path):
    _oom_project(farm)
    bot = make_bot(farm, tmp_path, ["grp/d"],
                   extra='[http]\nlisten = "127.0.0.1:0"\nunhealthy_after_failed_cycles = 2\n')
    revoked = farm.standin.faults.add(kind="status", status=401, path=r"^/api/v4/")   # the token stops working
    try:
        base = bot.start_http()

        def health() -> tuple[int, dict]:
            try:
                r = urllib.request.urlopen(base + "/healthz", timeout=5)
                return r.status, json.loads(r.read())
            except urllib.error.HTTPError as exc:
                return exc.code, json.loads(exc.read())

        assert health()[0] == 200
        r1 = bot.once()
        assert r1.fatal and r1.failed and health()[0] == 200             # one failed cycle: still healthy
        bot.once()
        code, body = health()
        assert code == 503 and body["status"] == "unhealthy" and body["consecutive_failed_cycles"] == 2
        assert "token" in body["problem"] and TOKEN not in json.dumps(body)
        assert _sample(bot, "retry_bot_poll_cycles_total", outcome="error") == 2
        # the token works again: healthy after one good cycle
        farm.standin.faults.remove(revoked)
        assert not bot.once().errors
        assert health() == (200, {"status": "ok", "consecutive_failed_cycles": 0, "unhealthy_after": 2})
    finally:
        bot.close()


def test_gitlab_unreachable_is_a_failed_cycle_not_a_token_problem(farm, tmp_path):
    import socket

    with socket.socket() as sock:            # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    bot = make_bot(farm, tmp_path, ["grp/d"], url=f"http://127.0.0.1:{port}", attempts=1)
    try:
        report = bot.once()
        assert report.errors and report.failed and report.fatal is None
        assert bot.failed_cycles == 1
        assert _sample(bot, "retry_bot_poll_cycles_total", outcome="error") == 1
    finally:
        bot.close()


def test_run_exits_1_when_the_token_is_refused_everywhere(farm, tmp_path):
    _oom_project(farm)
    (tmp_path / "policy.toml").write_text(POLICY)
    cfg = tmp_path / "bot.toml"
    cfg.write_text(bot_config_text(farm.url, tmp_path / "state.db", tmp_path / "policy.toml", ["grp/d"]))
    p = subprocess.run([sys.executable, "-m", "retry_bot", "run", "--config", str(cfg)],
                       env={**os.environ, **ENV, "FARM_TOKEN": "glpat-nope", "PYTHONPATH": str(ROOT)},
                       capture_output=True, timeout=60, cwd=str(ROOT))
    assert p.returncode == 1 and b"GitLab refused the bot's token" in p.stderr and b"glpat-nope" not in p.stderr


# --------------------------------------------------------------------------- 2. the failed commit, not the head

def test_resize_is_skipped_when_the_branch_moved_on_without_a_pipeline(farm, tmp_path):
    _oom_project(farm)
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
        assert _creates(farm) == []
    finally:
        bot.close()


def test_resize_on_an_unmoved_branch_carries_the_origin_sha_to_the_copy(farm, tmp_path):
    _oom_project(farm)
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
    _oom_project(farm, pipeline=False)
    proj = farm.standin.state.project("grp/d")
    farm.standin.state.create_pipeline("grp/d", "refs/merge-requests/7/head", source="merge_request_event",
                                       sha=proj.refs["main"])
    assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in farm.standin.jobs("grp/d")))
    bot = make_bot(farm, tmp_path, ["grp/d"])
    try:
        [out] = bot.once().decided
        assert out.action == "none" and "merge-request pipeline" in out.reason, out.reason
        assert bot.store.get_job(out.job_id).decision["rule"] == "merge_request_pipeline"
        assert _creates(farm) == [] and not bot.store.open_intents()
    finally:
        bot.close()


# --------------------------------------------------------------------------- 3. dry run is provisional

def test_a_dry_run_does_not_use_up_the_failed_jobs(farm, tmp_path):
    from retry_bot.commands.history import dry_run_events

    _oom_project(farm)
    origin = farm.standin.jobs("grp/d")[0]
    dry = make_bot(farm, tmp_path, ["grp/d"], dry_run=True)
    try:
        [out] = dry.once().decided
        assert out.action == "resize" and out.acted == "dry_run"
        calls = len(farm.standin.calls)
        assert dry.once().decided == []                 # not re-judged every cycle by the same process
        assert len(farm.standin.calls) - calls <= 3     # listing only
        assert dry.store.get_job(origin.id).decided is False
        events = dry.store.history(origin.id)
        text = render(sorted(events + dry_run_events(dry.store, events, origin.id), key=lambda e: e["at"]))
        assert "KUBERNETES_MEMORY_LIMIT=384Mi KUBERNETES_MEMORY_REQUEST=384Mi on class small as attempt 2 " \
               "(dry run: nothing written, provisional)" in text, text
    finally:
        dry.close()
    assert _creates(farm) == []
    live = make_bot(farm, tmp_path, ["grp/d"])         # same state store
    try:
        assert cycle_until(live, lambda: any(j.status == "success" for j in farm.standin.jobs("grp/d")
                                             if j.name == "build"))
        assert len(_creates(farm)) == 1
        dec = live.store.get_job(origin.id).decision
        assert dec["action"] == "resize" and dec["dry_run"] is False
    finally:
        live.close()


def test_history_command_shows_dry_run_decisions_and_numbers_attempts_from_the_origin(farm, tmp_path, capsys):
    from retry_bot.cli import main
    from runner_wrapper.logconfig import configure_logging

    _oom_project(farm)
    origin = farm.standin.jobs("grp/d")[0]
    dry = make_bot(farm, tmp_path, ["grp/d"], dry_run=True)
    dry.once()
    dry.close()
    live = make_bot(farm, tmp_path, ["grp/d"])
    try:
        assert cycle_until(live, lambda: any(j.status == "success" for j in farm.standin.jobs("grp/d")
                                             if j.name == "build"))
    finally:
        live.close()
    capsys.readouterr()
    try:
        assert main(["history", str(origin.id), "--url", f"sqlite:///{tmp_path / 'state.db'}"]) == 0
    finally:
        configure_logging("json", "info", stream=sys.__stderr__)
    out = capsys.readouterr().out
    lines = out.splitlines()
    dry_line = next(i for i, ln in enumerate(lines) if "provisional" in ln)
    live_line = next(i for i, ln in enumerate(lines) if "decision: resize" in ln and "provisional" not in ln)
    assert dry_line < live_line
    assert "as attempt 2" in lines[live_line] and "created as attempt 2 by resize" in out, out
    assert "attempt 1 by" not in out


# --------------------------------------------------------------------------- 4. single instance is the leader

def test_single_instance_reports_itself_leader(farm, tmp_path):
    _oom_project(farm)
    bot = make_bot(farm, tmp_path, ["grp/d"], leader=False)
    try:
        assert bot.config.leader_enabled is False
        assert _sample(bot, "retry_bot_is_leader") == 1
        assert bot._lead() and _sample(bot, "retry_bot_is_leader") == 1
    finally:
        bot.close()
