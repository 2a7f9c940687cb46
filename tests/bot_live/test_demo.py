"""`retry-bot demo` end to end: stand-in + local runner through runner-wrapper + the bot."""

from __future__ import annotations

import io

from retry_bot.demo import run_demo


def test_demo_reaches_all_three_outcomes():
    out = io.StringIO()
    result = run_demo(out=out, timeout=100, live=False)
    text = out.getvalue()
    assert result.ok, text + "\n" + "\n".join(result.timeline)
    assert result.outcomes == {"oom_recovered": True, "compile_left_alone": True, "transient_retried_once": True}
    timeline = "\n".join(result.timeline)
    assert "exit code 137" in timeline and "played with KUBERNETES_MEMORY_LIMIT=" in timeline
    assert "demo passed" in text
