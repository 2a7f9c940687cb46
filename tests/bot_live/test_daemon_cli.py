"""Dry run, SIGHUP-style policy reload, /metrics and /healthz, `retry-bot history` and `once`."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request

import pytest

from retry_bot.cli import main
from runner_wrapper.logconfig import configure_logging
from tests.bot_live.farm import ENV, ROOT, Farm, compile_error, cycle_until, make_bot, needs_memory

pytestmark = pytest.mark.slow  # end to end: outside the fast lane (pytest -m "not slow")


@pytest.fixture()
def farm(farm: Farm) -> Farm:
    """conftest's farm with project grp/d whose pipeline failed two jobs: an OOM kill and a compile error."""
    farm.behaviours.update({"build": needs_memory(300), "compile": compile_error})
    farm.add_project("grp/d", {"build": {"stage": "build", "tags": ["small"], "script": ["make"],
                                         "variables": {"KUBERNETES_MEMORY_LIMIT": "128Mi"}},
                               "compile": {"stage": "build", "tags": ["small"], "script": ["make"]}})
    farm.standin.create_pipeline("grp/d")
    assert farm.standin.wait_for(lambda: sum(j.status == "failed" for j in farm.standin.jobs()) == 2)
    return farm


def test_dry_run_decides_and_writes_nothing_to_gitlab(farm, tmp_path):
    bot = make_bot(farm, tmp_path, ["grp/d"], dry_run=True)
    try:
        report = bot.once()
        bot.once()
        assert {o.action for o in report.decided} == {"resize", "none"}
        assert [o.acted for o in report.decided if o.action == "resize"] == ["dry_run"]
        assert [c for c in farm.standin.calls if c.method == "POST" and "graphql" not in c.path] == []
        assert not bot.store.open_intents()
        assert len(farm.standin.jobs("grp/d")) == 2
    finally:
        bot.close()


def test_policy_reload_keeps_the_last_good_policy(farm, tmp_path):
    bot = make_bot(farm, tmp_path, ["grp/d"])
    try:
        good = bot.policy
        (tmp_path / "policy.toml").write_text("version = 1\n[families.oom]\naction = 'explode'\n")
        assert bot.reload_policy() is False and bot.policy is good
        (tmp_path / "policy.toml").write_text("version = 1\n[families.oom]\naction = 'none'\nbudget = 0\n")
        assert bot.reload_policy() is True and bot.policy is not good
        report = bot.once()
        assert {o.action for o in report.decided} == {"none"}
    finally:
        bot.close()


def test_metrics_and_healthz_and_history(farm, tmp_path, capsys):
    bot = make_bot(farm, tmp_path, ["grp/d"], extra='[http]\nlisten = "127.0.0.1:0"\n')
    try:
        base = bot.start_http()
        # the copy succeeding (the template's generate job succeeds earlier, while the copy is still created)
        assert cycle_until(bot, lambda: any(j.status == "success" and j.name == "build"
                                            for j in farm.standin.jobs("grp/d")))
        bot.once()
        metrics = urllib.request.urlopen(base + "/metrics", timeout=5).read().decode()
        assert 'retry_bot_jobs_classified_total{category="oom",family="oom"} 1.0' in metrics
        assert 'retry_bot_actions_total{kind="resize",outcome="done"} 1.0' in metrics
        assert "retry_bot_gitlab_api_calls_total" in metrics and "retry_bot_poll_duration_seconds_bucket" in metrics
        health = urllib.request.urlopen(base + "/healthz", timeout=5)
        assert health.status == 200 and b"ok" in health.read()
        origin = [j for j in farm.standin.jobs("grp/d") if j.name == "build"][0].id
    finally:
        bot.close()
    try:
        assert main(["history", str(origin), "--url", f"sqlite:///{tmp_path / 'state.db'}"]) == 0
        out = capsys.readouterr().out
        assert main(["history", "999999", "--url", f"sqlite:///{tmp_path / 'state.db'}"]) == 1
    finally:
        configure_logging("json", "info", stream=sys.__stderr__)   # main() bound logs to capsys' stream
    assert "classified oom/oom" in out and "decision: resize with KUBERNETES_MEMORY_LIMIT=384Mi" in out
    assert "action create_pipeline done" in out and "action play done" in out
    assert "action resize done" in out and "created as attempt 2 by resize" in out


def test_once_command_runs_one_cycle_and_never_prints_the_token(farm, tmp_path):
    from tests.bot_live.farm import POLICY, TOKEN, bot_config_text

    (tmp_path / "policy.toml").write_text(POLICY)
    cfg = tmp_path / "bot.toml"
    cfg.write_text(bot_config_text(farm.url, tmp_path / "state.db", tmp_path / "policy.toml", ["grp/d"]))
    p = subprocess.run([sys.executable, "-m", "retry_bot", "--log-format", "json", "once", "--config", str(cfg),
                        "--dry-run"], env={**os.environ, **ENV, "PYTHONPATH": str(ROOT)}, capture_output=True,
                       timeout=60, cwd=str(ROOT))
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    err = p.stderr.decode()
    assert '"event": "job_decided"' in err and '"job_url": "http://127.0.0.1' in err
    assert TOKEN not in err and TOKEN not in p.stdout.decode()
    bad = subprocess.run([sys.executable, "-m", "retry_bot", "once", "--config", str(tmp_path / "nope.toml")],
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, timeout=60, cwd=str(ROOT))
    assert bad.returncode == 2 and b"cannot read" in bad.stderr and b"Traceback" not in bad.stderr
