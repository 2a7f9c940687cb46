"""Driver behaviour that needs no cgroup (psutil backend): repeated stages, exit-code file, sinks at cleanup."""

from __future__ import annotations

import json

from runner_wrapper.accounting import build_record, host_info, job_exit_code
from runner_wrapper.record import find_markers, verify_record
from runner_wrapper.state import JobState, StageFigures

from .conftest import make_payload, write_config
from .driver import job_dir

KEY = {"default": b"sig-key-for-tests"}


def test_repeated_stage_attempts_exit_file_and_collector_down(tmp_path):
    extra = '[sinks]\ncollector_url = "http://127.0.0.1:9/v1/usage"\ncollector_attempts = 1\ncollector_timeout = 0.5'
    cfg = write_config(tmp_path, "unused", backend="psutil")
    cfg.write_text(cfg.read_text().replace("[sinks]\n", extra + "\n", 1))
    jd = job_dir(tmp_path, cfg, make_payload(811))
    assert jd.call("prepare").returncode == 0
    fail = jd.script("f.sh", "echo flaky fetch; exit 5")
    ok = jd.script("o.sh", "echo fetched")
    p = jd.call("run", str(fail), "get_sources")
    assert p.returncode == 7 and jd.exit_code_file.read_text() == "5\n"
    rec = verify_record(find_markers(p.stdout)[-1], KEY)  # a failing stage prints the marker too
    assert rec.stages[-1].name == "get_sources" and rec.exit_code == 5
    jd.exit_code_file.unlink()
    assert jd.call("run", str(ok), "clear_worktree").returncode == 0  # unknown/new stage names are fine
    p = jd.call("run", str(ok), "get_sources")
    assert p.returncode == 0 and not jd.exit_code_file.exists()
    assert find_markers(p.stdout) == []  # a passing non-main stage stays quiet
    p = jd.call("run", str(jd.script("b.sh", "echo build")), "step_script")  # step_script = main stage too
    assert p.returncode == 0 and b"build" in p.stdout and find_markers(p.stdout)
    c = jd.call("cleanup")
    assert c.returncode == 0
    assert b"usage record kept in the spool only" in c.stderr
    lines = (tmp_path / "spool" / "usage.jsonl").read_text().splitlines()
    final = verify_record(json.loads(lines[-1]), KEY)
    assert [(s.name, s.attempt, s.exit_code) for s in final.stages] == [
        ("get_sources", 1, 5), ("clear_worktree", 1, 0), ("get_sources", 2, 0), ("step_script", 1, 0)]
    assert final.exit_code == 0  # get_sources succeeded on its second attempt, as GET_SOURCES_ATTEMPTS allows
    assert not list((tmp_path / "state").glob("job-811*"))  # cleanup deleted the job's state


def test_without_exit_code_file_variable_the_stage_runs_and_fails_with_the_build_failure_code(tmp_path):
    cfg = write_config(tmp_path, "unused", backend="psutil")
    jd = job_dir(tmp_path, cfg, make_payload(812))
    del jd.env["BUILD_EXIT_CODE_FILE"]
    p = jd.call("run", str(jd.script("f.sh", "echo ran; exit 3")), "build_script")
    assert p.returncode == 7 and b"ran" in p.stdout
    assert b"GitLab records exit code 1 for this failure instead of 3" in p.stdout


def test_accounting_totals():
    st = JobState(1, "cgroup-v1", "2026-01-01T00:00:00Z", 1000.0, identity={"id": 1, "name": "b"})
    st.stages = [
        StageFigures("build_script", 1, 2.0, 0, memory_peak_bytes=300, memory_mean_bytes=100,
                     cpu_user_seconds=1.0, cpu_system_seconds=0.5, cpu_max_cores=1.5),
        StageFigures("after_script", 1, 1.0, 2, memory_peak_bytes=50, memory_mean_bytes=40,
                     cpu_user_seconds=0.1, cpu_system_seconds=0.0, cpu_max_cores=0.3, oom_kills=0),
    ]
    rec = build_record(st, host_info("cgroup-v1", False, "h"), 1004.0, "2026-01-01T00:00:04Z")
    u = rec.usage
    assert (u.wall_seconds, u.memory_peak_bytes, u.memory_mean_bytes) == (4.0, 300, 80)
    assert (u.cpu_user_seconds, u.cpu_system_seconds, u.cpu_mean_cores, u.cpu_max_cores) == (1.1, 0.5, 0.5333, 1.5)
    assert rec.exit_code == 0  # an after_script failure does not fail a GitLab job
    assert job_exit_code([]) is None


def test_an_import_error_under_python_m_is_a_system_failure(tmp_path):
    """Issue 10 point 6: ``python -I -m runner_wrapper`` with a broken installation must exit with the
    system-failure code, not Python's 1 (which the runner reads as a build failure, with whatever
    code an earlier stage left in BUILD_EXIT_CODE_FILE)."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    import runner_wrapper

    broken = tmp_path / "site"
    shutil.copytree(Path(runner_wrapper.__file__).parent, broken / "runner_wrapper")
    cli = broken / "runner_wrapper" / "cli.py"
    cli.write_text(cli.read_text() + "\nimport runner_wrapper_missing_dependency\n")
    code_file = tmp_path / "build_exit_code"
    code_file.write_text("3\n")  # left by an earlier failing stage
    # What ``-m`` does (runpy), with only the broken copy importable; -I as in the runner snippet.
    boot = (f"import sys; sys.path.insert(0, {str(broken)!r}); import runpy; "
            "runpy.run_module('runner_wrapper', run_name='__main__', alter_sys=True)")
    env = {"PATH": "/usr/bin:/bin", "SYSTEM_FAILURE_EXIT_CODE": "9", "BUILD_FAILURE_EXIT_CODE": "7",
           "BUILD_EXIT_CODE_FILE": str(code_file)}
    p = subprocess.run([sys.executable, "-I", "-c", boot, "executor", "run", "s.sh", "build_script"], env=env,
                       capture_output=True, timeout=60)
    assert p.returncode == 9, p.stderr
    assert b"runner-wrapper: cannot start: ModuleNotFoundError: No module named 'runner_wrapper_missing_dependency'" \
        in p.stderr
