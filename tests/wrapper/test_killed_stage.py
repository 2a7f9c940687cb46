"""The driver SIGKILLed in the middle of a stage (no handler runs), then the next stages and cleanup.

Real cgroup v1 on this host (as tests/wrapper/test_cgroup_v1.py).  GitLab Runner SIGKILLs the
driver's process group after ``graceful_kill_timeout`` (gitlab-runner ``helpers/process/killer_unix.go``
``Terminate`` / ``ForceKill``); the host's OOM killer or a build's ``kill -9 0`` (the build shell
shares the driver's process group) do the same.  The killed stage must still be in the job's record,
as a failure (``runner_wrapper.stagerun.record_lost_stage``): before, it was missing, the record read
``exit_code 0`` and the bot trusted it as a protected success.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from runner_wrapper.record import verify_record
from tests.wrapper.conftest import V1_ROOT, make_payload, write_config
from tests.wrapper.driver import job_dir

pytestmark = [pytest.mark.cgroup]
KEY = {"default": b"sig-key-for-tests"}


def _final_record(tmp_path):
    lines = (tmp_path / "spool" / "usage.jsonl").read_text().splitlines()
    return verify_record(json.loads(lines[-1]), KEY)


def test_a_sigkilled_main_stage_is_still_recorded_as_a_failure(tmp_path, cg_parent):
    cfg = write_config(tmp_path, cg_parent)
    jd = job_dir(tmp_path, cfg, make_payload(6061))
    assert jd.call("prepare").returncode == 0
    assert jd.call("run", str(jd.script("g.sh", "echo fetched")), "get_sources").returncode == 0
    started = tmp_path / "started"
    build = jd.script("b.sh", f"python3 -c 'b=bytearray(64*2**20); b[::4096]=b\"x\"*len(b[::4096]); "
                               f"open(\"{started}\",\"w\").write(\"1\"); import time; time.sleep(300)'")
    proc = jd.popen("run", str(build), "build_script")
    deadline = time.time() + 20
    while time.time() < deadline and not started.exists():
        time.sleep(0.05)
    assert started.exists()
    os.killpg(proc.pid, signal.SIGKILL)  # the runner's force kill: driver and build die, no handler runs
    proc.communicate(timeout=10)
    # cancel: after_script still runs (gitlab-mechanics.md §1.7), then cleanup
    assert jd.call("run", str(jd.script("a.sh", "echo after")), "after_script").returncode == 0
    c = jd.call("cleanup")
    assert c.returncode == 0, c.stderr
    assert not os.path.exists(os.path.join(V1_ROOT, "memory", cg_parent, "job-6061"))  # nothing left: fine
    rec = _final_record(tmp_path)
    names = [(s.name, s.exit_code) for s in rec.stages]
    assert rec.usage.memory_peak_bytes >= 64 * 2**20  # the job cgroup's own peak covers the killed stage: fine
    killed = [s for s in rec.stages if s.name == "build_script"]
    assert killed and killed[0].exit_code == 137 and rec.exit_code == 137, (
        f"record of a job whose build_script was SIGKILLed: exit_code={rec.exit_code}, stages={names}")


def test_a_job_whose_stage_was_sigkilled_is_not_trusted_as_a_success(tmp_path, cg_parent):
    """The record, as the bot's default trust rule (retry_bot/state/usage.py ``is_trusted``) reads it."""
    from retry_bot.state.usage import is_trusted

    cfg = write_config(tmp_path, cg_parent)
    jd = job_dir(tmp_path, cfg, make_payload(6062))
    assert jd.call("prepare").returncode == 0
    started = tmp_path / "started"
    proc = jd.popen("run", str(jd.script("b.sh", f"touch {started}; sleep 300")), "build_script")
    deadline = time.time() + 20
    while time.time() < deadline and not started.exists():
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)
    assert jd.call("run", str(jd.script("a.sh", "echo after")), "after_script").returncode == 0
    assert jd.call("cleanup").returncode == 0
    rec = _final_record(tmp_path)
    assert not is_trusted(rec), (f"a job whose build_script was SIGKILLed is trusted as a protected success: "
                                 f"exit_code={rec.exit_code}, stages={[s.name for s in rec.stages]}")
