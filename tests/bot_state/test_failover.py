"""Two replicas on one database: the leader dies or hangs mid-action, the other takes over.

Real processes.  On PostgreSQL the standby notices a SIGKILLed leader at once
(its advisory lock dies with its session); a hung leader is replaced when its
lease expires, and its late writes are fenced.  SQLite runs the same scenarios
(single host, lease only).
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from retry_bot.state import open_store

from .procs import Child
from .test_crash import ROOT, writes

pytestmark = pytest.mark.slow  # end to end: outside the fast lane (pytest -m "not slow")

TTL = 2.0


def _replica(store_url: str, gitlab: str, holder: str, env: dict[str, str], *extra: str) -> Child:
    return Child(["--url", store_url, "--gitlab", gitlab, "--holder", holder, "--elect", "--ttl", str(TTL),
                  "--actions", "6", *extra], env, ROOT)


def test_leader_sigkilled_mid_action_standby_takes_over_without_loss_or_duplicate(store_url, tmp_path,
                                                                                   child_env, backend):
    gitlab = str(tmp_path / "gitlab.log")
    a = _replica(store_url, gitlab, "a", child_env, "--stop-after-write", "act:3")
    a.wait_for("LEADER")
    b = _replica(store_url, gitlab, "b", child_env)
    a.wait_for("MID")
    time.sleep(0.3)  # b is polling as a standby
    assert b.proc.poll() is None and not [s for s in b.seen if s.startswith("LEADER")]
    killed_at = time.monotonic()
    a.kill()
    b.wait_for("LEADER", timeout=TTL + 10)
    takeover = time.monotonic() - killed_at
    assert b.wait_for("RECONCILE") == "RECONCILE act:3"
    assert b.finish() == 0 and b.seen[-1] == "DONE"
    # Bounded: within the lease ttl (plus polling and process scheduling on a loaded machine).
    assert takeover < TTL + 3.0, takeover
    assert writes(gitlab) == {f"act:{i}": 1 for i in range(6)}
    with open_store(store_url) as s:
        assert s.open_intents() == []
        assert s.get_action("act:3").result == {"written_by": "a"}  # found in GitLab, not redone
        assert s.get_action("act:4").result == {"written_by": "b"}
        assert s.lease()["term"] == 2
    print(f"{backend}: takeover {takeover:.2f} s after SIGKILL")


def test_hung_leader_is_replaced_after_its_lease_and_its_late_write_is_fenced(store_url, tmp_path, child_env):
    gitlab = str(tmp_path / "gitlab.log")
    a = _replica(store_url, gitlab, "a", child_env, "--stop-after-write", "act:1", "--pause-after-write", "3")
    a.wait_for("LEADER")
    b = _replica(store_url, gitlab, "b", child_env)
    a.wait_for("MID")
    os.kill(a.proc.pid, signal.SIGSTOP)  # a hangs (GC pause, stuck I/O) with its write made, not completed
    try:
        b.wait_for("LEADER", timeout=TTL + 10)
        assert b.wait_for("RECONCILE") == "RECONCILE act:1"
        assert b.finish() == 0
    finally:
        os.kill(a.proc.pid, signal.SIGCONT)
    assert a.finish() == 3 and a.seen[-1].startswith("FENCED")  # woke up deposed: wrote nothing more
    assert writes(gitlab) == {f"act:{i}": 1 for i in range(6)}
    with open_store(store_url) as s:
        assert s.open_intents() == []
        act1 = s.get_action("act:1")
        assert act1.result == {"written_by": "a"} and act1.holder == "b"
