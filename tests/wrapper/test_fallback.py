"""The psutil fallback: approximate figures, optional enforcement by killing the tree."""

from __future__ import annotations

import os
import sys

import pytest

from runner_wrapper.cgroup.fallback import PsutilBackend
from runner_wrapper.executor import run_in_group
from runner_wrapper.record import find_markers

from .conftest import make_payload, write_config
from .driver import job_dir

pytestmark = pytest.mark.slow  # end to end: outside the fast lane (pytest -m "not slow")

MiB = 2**20
HOLD = ("import time, sys; b=bytearray(int(sys.argv[1])*2**20); b[::4096]=b'x'*len(b[::4096]); "
        "time.sleep(float(sys.argv[2]))")


def test_tree_is_sampled_approximately():
    g = PsutilBackend().group("x")
    ex, c, s, _l, _g = run_in_group(["bash", "-c", f"{sys.executable} -c \"{HOLD}\" 80 0.6"], g, dict(os.environ),
                                    0.05)
    assert ex.code == 0 and c.approximate
    assert 80 * MiB <= c.memory_peak_bytes <= 140 * MiB  # summed RSS of bash + python
    assert c.oom_kills == 0 and c.cpu_user_seconds is not None


def test_a_large_driver_does_not_inflate_the_peak():
    """The child's ``ru_maxrss`` includes the driver's image before ``exec``: a 300 MiB driver running a
    small build must not report a 300 MiB peak (seen in CI, where the driver is pytest)."""
    ballast = bytearray(300 * MiB)
    ballast[::4096] = b"x" * len(ballast[::4096])
    g = PsutilBackend().group("x")
    ex, c, s, _l, _g = run_in_group([sys.executable, "-c", HOLD, "20", "0.3"], g, dict(os.environ), 0.05)
    assert ex.code == 0 and c.approximate
    assert 20 * MiB <= c.memory_peak_bytes <= 100 * MiB, c.memory_peak_bytes
    del ballast


def test_memory_limit_enforced_by_killing_the_tree():
    g = PsutilBackend(enforce_memory=True).group("x")
    g.apply_limits(50 * MiB, None)
    ex, c, s, _l, _g = run_in_group([sys.executable, "-c", HOLD, "120", "5"], g, dict(os.environ), 0.05)
    assert c.oom_kills == 1 and ex.signal == 9


def test_not_enforced_when_disabled():
    g = PsutilBackend(enforce_memory=False).group("x")
    g.apply_limits(50 * MiB, None)
    ex, c, s, _l, _g = run_in_group([sys.executable, "-c", HOLD, "80", "0.3"], g, dict(os.environ), 0.05)
    assert ex.code == 0 and c.oom_kills == 0


def test_executor_run_with_psutil_reports_137_and_an_approximate_record(tmp_path):
    cfg = write_config(tmp_path, "unused", backend="psutil")
    jd = job_dir(tmp_path, cfg, make_payload(801, variables={"KUBERNETES_MEMORY_LIMIT": "60Mi"}), key=None)
    assert jd.call("prepare").returncode == 0
    script = jd.script("s.sh", f"{sys.executable} -c \"{HOLD}\" 150 5")
    p = jd.call("run", str(script), "build_script")
    out = p.stdout.decode()
    assert p.returncode == 7 and jd.exit_code_file.read_text().strip() == "137", out
    assert "(approximate: psutil sampling)" in out
    rec = find_markers(p.stdout)[-1]
    assert rec["host"]["backend"] == "psutil" and rec["host"]["approximate"] is True
    assert rec["usage"]["oom_kills"] == 1
    assert jd.call("cleanup").returncode == 0
