"""State files left in ``[executor] state_dir`` by a driver SIGKILLed between two writes are removed by a later
job's reaper (``executor.reap_orphan_states``); before, they stayed for good:

- ``cmd_cleanup`` removes the job cgroup, spools the record, then deletes the state last: killed in
  between (cleanup_exec_timeout, runner restart) the state stays, and the reaper
  (``executor.reap_stale``) only looks at state files of job *cgroups* that still exist;
- ``state.save_state`` writes ``job-<id>.state.<pid>.tmp`` then renames: killed in between, the
  temporary file stays and nothing ever looks for it.
"""

from __future__ import annotations

import os
import time

from runner_wrapper.state import JobState, process_start_ticks
from tests.wrapper.conftest import make_payload, write_config
from tests.wrapper.driver import job_dir


def test_orphaned_state_files_are_removed_by_a_later_job(tmp_path, cg_parent):
    cfg = write_config(tmp_path, cg_parent)
    sdir = tmp_path / "state"
    sdir.mkdir()
    old = time.time() - 7200
    # job 70: its cleanup removed the cgroup and spooled, then was killed before delete_state
    (sdir / "job-70.state").write_bytes(JobState(70, "cgroup-v1", "x", old, updated_epoch=old).to_bytes())
    # job 71: a driver killed between save_state's write and its rename
    (sdir / "job-71.state.12345.tmp").write_bytes(JobState(71, "cgroup-v1", "x", old).to_bytes())
    # kept: job 73 runs on the psutil fallback (it has no cgroup) and job 74's driver is alive (this process)
    (sdir / "job-73.state").write_bytes(JobState(73, "psutil", "x", old).to_bytes())
    me = {"pid": os.getpid(), "start": process_start_ticks(os.getpid()), "stage": "build_script", "attempt": 1}
    (sdir / "job-74.state").write_bytes(JobState(74, "cgroup-v1", "x", old, driver=me).to_bytes())
    for f in sdir.iterdir():
        os.utime(f, (old, old))
    jd = job_dir(tmp_path, cfg, make_payload(72))  # later jobs: config, prepare, run, cleanup
    assert jd.call("config").returncode == 0 and jd.call("prepare").returncode == 0
    assert jd.call("run", str(jd.script("o.sh", "echo ok")), "build_script").returncode == 0
    assert jd.call("cleanup").returncode == 0
    left = sorted(p.name for p in sdir.iterdir())
    assert left == ["job-73.state", "job-74.state"], f"state files left in state_dir: {left}"
