"""A bot that cannot do its work says so: a refused token, an unknown project or an unreachable GitLab
make the cycle an error (``once`` and ``run`` exit 1, the message names the problem, never the token),
``/healthz`` turns unhealthy after N failed cycles and recovers; a single instance reports itself
leader.  Against the stand-in over real HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from tests.bot_live.farm import (ENV, POLICY, ROOT, TOKEN, bot_config_text, make_bot, metric_sample,
                                 oom_project)

pytestmark = pytest.mark.slow  # end to end: outside the fast lane (pytest -m "not slow")


def _once(cfg, env):
    return subprocess.run([sys.executable, "-m", "retry_bot", "--log-format", "json", "once", "--config", str(cfg)],
                          env={**os.environ, **env, "PYTHONPATH": str(ROOT)}, capture_output=True, timeout=60,
                          cwd=str(ROOT))


def test_once_with_a_refused_token_exits_1_naming_the_token_problem_never_the_token(farm, tmp_path):
    oom_project(farm)
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
    oom_project(farm)
    bot = make_bot(farm, tmp_path, ["grp/d", "grp/does-not-exist"])
    try:
        report = bot.once()
        assert any("grp/does-not-exist" in e and "404" in e for e in report.errors), report.errors
        assert report.fatal is None and not report.failed        # grp/d was polled: not a failed cycle
        assert [o.action for o in report.decided] == ["resize"]
        assert metric_sample(bot, "retry_bot_poll_cycles_total", outcome="error") == 1
        assert metric_sample(bot, "retry_bot_poll_cycles_total", outcome="ok") == 0
    finally:
        bot.close()
    # as a command: exit 1 (the cycle had errors), as `once --help` says
    cfg = tmp_path / "bot.toml"
    p = _once(cfg, ENV)
    assert p.returncode == 1 and b"grp/does-not-exist" in p.stderr, p.stderr.decode()[-2000:]


def test_healthz_turns_unhealthy_after_n_failed_cycles_and_recovers(farm, tmp_path):
    oom_project(farm)
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
        assert metric_sample(bot, "retry_bot_poll_cycles_total", outcome="error") == 2
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
        assert metric_sample(bot, "retry_bot_poll_cycles_total", outcome="error") == 1
    finally:
        bot.close()


def test_run_exits_1_when_the_token_is_refused_everywhere(farm, tmp_path):
    oom_project(farm)
    (tmp_path / "policy.toml").write_text(POLICY)
    cfg = tmp_path / "bot.toml"
    cfg.write_text(bot_config_text(farm.url, tmp_path / "state.db", tmp_path / "policy.toml", ["grp/d"]))
    p = subprocess.run([sys.executable, "-m", "retry_bot", "run", "--config", str(cfg)],
                       env={**os.environ, **ENV, "FARM_TOKEN": "glpat-nope", "PYTHONPATH": str(ROOT)},
                       capture_output=True, timeout=60, cwd=str(ROOT))
    assert p.returncode == 1 and b"GitLab refused the bot's token" in p.stderr and b"glpat-nope" not in p.stderr


def test_single_instance_reports_itself_leader(farm, tmp_path):
    oom_project(farm)
    bot = make_bot(farm, tmp_path, ["grp/d"], leader=False)
    try:
        assert bot.config.leader_enabled is False
        assert metric_sample(bot, "retry_bot_is_leader") == 1
        assert bot._lead() and metric_sample(bot, "retry_bot_is_leader") == 1
    finally:
        bot.close()
