"""The demo's timeline wraps long entries at word boundaries (issue 13: it cut lines at 150 chars mid-word)."""

from __future__ import annotations

import io

from standin import demo
from standin.demo import TIMELINE_WIDTH, timeline_lines

REASON = ("  why: job 1000 'build' failed: oom/oom_killed with 128Mi limit (usage record), peak 127Mi: re-create "
          "with KUBERNETES_MEMORY_LIMIT=768Mi (moves to runner class 'medium' (was 'small')); attempt 2, re-run 1 "
          "of 3 for oom failures (families.oom)")


def test_long_entries_wrap_at_word_boundaries_and_keep_every_word():
    lines = timeline_lines(12.3, "bot", REASON)
    assert len(lines) > 1
    assert all(len(line) <= TIMELINE_WIDTH for line in lines)
    assert lines[0].startswith("  12.3s  bot       why: job 1000")
    prefix = len("  12.3s  bot     ")
    # Continuation lines sit under the entry's text (its own indent kept), and no word is cut.
    assert all(line.startswith(" " * (prefix + 2)) and line[prefix + 2] != " " for line in lines[1:])
    assert " ".join(" ".join(line[prefix:].split()) for line in lines) == " ".join(REASON.split())


def test_a_word_longer_than_a_line_is_kept_whole():
    url = "https://gitlab.example.com/" + "a" * 200
    lines = timeline_lines(1.0, "gitlab", f"see {url} now")
    assert any(url in line for line in lines)


def test_the_live_timeline_prints_the_wrapped_lines():
    out = io.StringIO()
    tl = demo._Timeline(out, live=True)
    tl.add("runner", "  runner-wrapper: OOM kill: " + "memory.peak reached the limit " * 8)
    printed = out.getvalue().splitlines()
    assert printed == tl.lines and len(printed) > 1
    assert all(len(line) <= TIMELINE_WIDTH for line in printed)
    assert all(not line.endswith(("memor", "limi", "reache")) for line in printed)
