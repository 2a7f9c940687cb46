"""A dry run is provisional: it does not use the failed jobs up (a live bot on the same state acts on
them later), and ``retry-bot history`` shows its decisions apart, numbering attempts from the origin
as decisions do.  Against the stand-in over real HTTP."""

from __future__ import annotations

import sys

import pytest

from retry_bot.commands.history import render
from tests.bot_live.farm import cycle_until, make_bot, oom_project, pipeline_creates

pytestmark = pytest.mark.slow  # end to end: outside the fast lane (pytest -m "not slow")


def test_a_dry_run_does_not_use_up_the_failed_jobs(farm, tmp_path):
    from retry_bot.commands.history import dry_run_events

    oom_project(farm)
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
    assert pipeline_creates(farm) == []
    live = make_bot(farm, tmp_path, ["grp/d"])         # same state store
    try:
        assert cycle_until(live, lambda: any(j.status == "success" for j in farm.standin.jobs("grp/d")
                                             if j.name == "build"))
        assert len(pipeline_creates(farm)) == 1
        dec = live.store.get_job(origin.id).decision
        assert dec["action"] == "resize" and dec["dry_run"] is False
    finally:
        live.close()


def test_history_command_shows_dry_run_decisions_and_numbers_attempts_from_the_origin(farm, tmp_path, capsys):
    from retry_bot.cli import main
    from runner_wrapper.logconfig import configure_logging

    oom_project(farm)
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
