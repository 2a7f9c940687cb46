"""Driver behaviour that needs no cgroup (psutil backend): repeated stages, exit-code file, sinks at cleanup."""

from __future__ import annotations

import json

import pytest

from runner_wrapper.accounting import build_record, host_info, job_exit_code
from runner_wrapper.record import find_markers, verify_record
from runner_wrapper.state import JobState, StageFigures

from .conftest import make_payload, write_config
from .driver import job_dir

pytestmark = pytest.mark.slow  # end to end: outside the fast lane (pytest -m "not slow")

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
    assert p.returncode == 0 and jd.exit_code_file.read_text() == ""  # emptied, not removed (parseBuildFailure)
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


def _config_doc(tmp_path, replace: tuple[str, str] | None = None) -> dict:
    cfg = write_config(tmp_path, "unused", backend="psutil")
    if replace:
        cfg.write_text(cfg.read_text().replace(*replace))
    p = job_dir(tmp_path, cfg, make_payload(820)).call("config")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_config_output_shares_builds_dir_safely_and_leaves_out_empty_dirs(tmp_path):
    """Issue 10 points 1 and 7: with ``builds_dir_is_shared=false`` the runner gives every job of a
    project the same ``<builds_dir>/<group>/<project>`` (gitlab-runner common/build.go
    ProjectUniqueDir), so concurrent jobs would share one checkout; and an empty builds_dir/cache_dir
    is a configuration error on the runner: the keys must be left out."""
    doc = _config_doc(tmp_path)
    assert doc["builds_dir_is_shared"] is True
    assert doc["builds_dir"] == str(tmp_path / "builds") and doc["cache_dir"] == str(tmp_path / "cache")
    doc = _config_doc(tmp_path, (f'builds_dir = "{tmp_path / "builds"}"\ncache_dir = "{tmp_path / "cache"}"',
                                 'builds_dir = ""\ncache_dir = ""'))
    assert "builds_dir" not in doc and "cache_dir" not in doc and doc["builds_dir_is_shared"] is True


def test_limits_come_from_the_expanded_custom_env_values(tmp_path):
    """Issue 10 point 8: ``KUBERNETES_MEMORY_LIMIT: $SIZE`` is raw in JOB_RESPONSE_FILE; the runner
    exports the expanded value as CUSTOM_ENV_KUBERNETES_MEMORY_LIMIT, and that is what applies."""
    cfg = write_config(tmp_path, "unused", backend="psutil")
    jd = job_dir(tmp_path, cfg, make_payload(821, variables={"SIZE": "300Mi", "KUBERNETES_MEMORY_LIMIT": "$SIZE"}))
    jd.env["CUSTOM_ENV_KUBERNETES_MEMORY_LIMIT"] = "300Mi"  # what GitLab Runner exports after expansion
    p = jd.call("prepare")
    assert p.returncode == 0
    assert b"applied: memory limit 300.0 MiB (job variable KUBERNETES_MEMORY_LIMIT=300Mi)" in p.stdout, p.stdout
    assert b"ignoring job variable" not in p.stdout
    jd.call("cleanup")


def test_job_url_computed_as_the_runner_does_and_after_script_ignore_errors_false(tmp_path):
    """Issue 10 point 9: the payload has no job URL; the runner computes it from git_info.repo_url
    without credentials (gitlab-runner common/spec/spec.go JobURL).  AFTER_SCRIPT_IGNORE_ERRORS=false
    makes an after_script failure fail the job, so the record's exit code is that failure's."""
    cfg = write_config(tmp_path, "unused", backend="psutil")
    payload = make_payload(822, variables={"AFTER_SCRIPT_IGNORE_ERRORS": "false"})
    payload["git_info"]["repo_url"] = "https://gitlab-ci-token:job-token-xyz@gitlab.example.com:8443/group/p.git"
    jd = job_dir(tmp_path, cfg, payload)
    assert jd.call("prepare").returncode == 0
    p = jd.call("run", str(jd.script("b.sh", "echo build")), "build_script")
    rec = verify_record(find_markers(p.stdout)[-1], KEY)
    assert rec.job.url == "https://gitlab.example.com:8443/group/p/-/jobs/822"
    p = jd.call("run", str(jd.script("a.sh", "exit 4")), "after_script")
    assert p.returncode == 7 and jd.exit_code_file.read_text() == "4\n"
    assert verify_record(find_markers(p.stdout)[-1], KEY).exit_code == 4
    assert jd.call("cleanup").returncode == 0
    final = verify_record(json.loads((tmp_path / "spool" / "usage.jsonl").read_text().splitlines()[-1]), KEY)
    assert final.exit_code == 4 and final.job.url == "https://gitlab.example.com:8443/group/p/-/jobs/822"
