"""SIGKILL between intent and completion: the next start neither repeats nor forgets the action.

Real child processes, real SIGKILL, on both backends.  The "GitLab" is a file
of written keys that only grows (each line is one non-idempotent write).
"""

from __future__ import annotations

import collections
import os

import pytest

from retry_bot.state import open_store

from .procs import Child

pytestmark = pytest.mark.slow  # end to end: outside the fast lane (pytest -m "not slow")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def writes(path: str) -> collections.Counter[str]:
    if not os.path.exists(path):
        return collections.Counter()
    with open(path) as f:
        return collections.Counter(line.split()[0] for line in f if line.strip())


@pytest.mark.parametrize("where", ["before_write", "after_write"])
def test_sigkill_mid_action_then_restart_does_every_action_exactly_once(store_url, tmp_path, child_env, where):
    gitlab = str(tmp_path / "gitlab.log")
    base = ["--url", store_url, "--gitlab", gitlab, "--actions", "5"]
    flag = "--stop-before-write" if where == "before_write" else "--stop-after-write"
    first = Child(base + ["--holder", "first", flag, "act:2"], child_env, ROOT)
    first.wait_for("PAUSED" if where == "before_write" else "MID")
    first.kill()  # SIGKILL: no cleanup, no completion

    with open_store(store_url) as s:
        [intent] = s.open_intents()
        assert intent.idempotency_key == "act:2" and intent.status == "begun"
        assert [s.get_action(f"act:{i}").status for i in range(2)] == ["completed", "completed"]
    assert writes(gitlab)["act:2"] == (0 if where == "before_write" else 1)

    second = Child(base + ["--holder", "second"], child_env, ROOT)
    second.wait_for("RECONCILE")
    assert second.finish() == 0 and second.seen[-1] == "DONE"
    assert writes(gitlab) == {f"act:{i}": 1 for i in range(5)}  # none lost, none repeated
    with open_store(store_url) as s:
        assert s.open_intents() == []
        settled = s.get_action("act:2")
        assert settled.status == "completed"
        # Written after the crash by the second run, or found already written by the first.
        assert settled.result == {"written_by": "second" if where == "before_write" else "first"}
        assert [e["kind"] for e in s.history(1002)] == ["action_begun", "action_completed"]

    third = Child(base + ["--holder", "third"], child_env, ROOT)  # a further restart changes nothing
    assert third.finish() == 0
    assert writes(gitlab) == {f"act:{i}": 1 for i in range(5)}


def test_concurrent_processes_create_each_intent_once(store_url, child_env):
    kids = [Child(["--url", store_url, "--gitlab", "/dev/null", "--race", "25"], child_env, ROOT) for _ in range(3)]
    created: list[str] = []
    for k in kids:
        assert k.finish(timeout=60) == 0, k.proc.stderr.read() if k.proc.stderr else ""
        created += [line.split()[1] for line in k.seen if line.startswith("CREATED")]
    assert sorted(created) == sorted(f"race:{i}" for i in range(25))
