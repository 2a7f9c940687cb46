"""The full GitLab Runner call sequence through ``standin.runner`` against the real driver.

config -> prepare -> prepare_script, get_sources, build_script, step_*, after_script,
cleanup_file_variables -> cleanup, with the runner's environment (§1.3) and its
reading of exit codes (§1.5).
"""

from __future__ import annotations

import json
import os

import pytest

from standin.runner import run_job
from runner_wrapper.record import find_markers, verify_record

from .conftest import V1_ROOT, make_payload, write_config
from .httpserver import serve

pytestmark = pytest.mark.slow  # end to end: outside the fast lane (pytest -m "not slow")

KEY = "seq-signing-key-42"
KEYS = {"default": KEY.encode()}
ENV = {"RIGHTSIZER_SIGNING_KEY": KEY}


def spool_records(tmp_path):
    p = tmp_path / "spool" / "usage.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []


@pytest.mark.cgroup
def test_success_with_unknown_stage_invalid_variable_and_all_sinks(tmp_path, cg_parent, driver_cmd_for):
    cfg = write_config(tmp_path, cg_parent, extra='[defaults]\nmemory_limit = "256Mi"')
    payload = make_payload(
        601, script=["echo building", 'test -z "${RIGHTSIZER_SIGNING_KEY:-}" || { echo key leaked; exit 42; }',
                     "cat /proc/self/cgroup | grep memory",
                     'test -z "${RUNNER_WRAPPER_CONFIG_JSON:-}" || { echo config leaked; exit 43; }'],
        variables={"KUBERNETES_MEMORY_LIMIT": "lots", "KUBERNETES_CPU_LIMIT": "1500m"},
        extra_steps=[{"name": "release", "script": ["echo releasing"], "when": "on_success"}],
        after=["echo after:$CI_JOB_STATUS"])
    r = run_job(payload, driver_cmd=driver_cmd_for(cfg), workdir=tmp_path / "w", extra_env=ENV)
    log = r.log.decode()
    assert (r.status, r.failure_reason, r.exit_code) == ("success", None, 0), log
    assert [c.stage for c in r.stages] == ["config", "prepare", "prepare_script", "get_sources", "build_script",
                                           "step_release", "after_script", "cleanup_file_variables", "cleanup"]
    assert "WARNING: ignoring job variable KUBERNETES_MEMORY_LIMIT='lots'" in log
    assert "using the default 256.0 MiB" in log
    assert f"memory:/{cg_parent}/job-601/build_script-1" in log  # the build ran in its stage cgroup
    assert "releasing" in log and "after:success" in log
    assert r.config["driver"]["name"] == "gitlab-rightsizer"
    assert "RUNNER_WRAPPER_CONFIG_JSON" in r.config["job_env"]  # later calls skip the TOML parser
    rec = verify_record(find_markers(r.log)[-1], KEYS)
    assert rec.job.id == 601 and rec.job.project_path == "group/p" and rec.exit_code == 0
    assert rec.limits.memory_limit_bytes == 256 * 2**20 and rec.limits.cpu_limit_cores == 1.5
    assert rec.host.backend == "cgroup-v1" and not rec.host.approximate
    # The final record (cleanup) has every stage, and reaches the spool and the textfile.
    final = verify_record(spool_records(tmp_path)[-1], KEYS)
    names = [(s.name, s.attempt) for s in final.stages]
    assert names == [("prepare_script", 1), ("get_sources", 1), ("build_script", 1), ("step_release", 1),
                     ("after_script", 1), ("cleanup_file_variables", 1)]
    assert final.usage.memory_peak_bytes > 0 and final.usage.cpu_user_seconds is not None
    assert 'rightsizer_last_job_id{job_name="build",project="group/p"} 601.0' in \
        (tmp_path / "textfile" / "rightsizer.prom").read_text()
    assert not os.path.exists(os.path.join(V1_ROOT, "memory", cg_parent, "job-601"))
    assert not list((tmp_path / "state").iterdir())  # cleanup deleted the job's state


@pytest.mark.cgroup
def test_failing_stage_exit_3_reaches_gitlab_as_3(tmp_path, cg_parent, driver_cmd_for):
    cfg = write_config(tmp_path, cg_parent)
    payload = make_payload(602, script=["echo going to fail", "exit 3", "echo unreachable"],
                           after=["echo after:$CI_JOB_STATUS"])
    r = run_job(payload, driver_cmd=driver_cmd_for(cfg), workdir=tmp_path / "w", extra_env=ENV)
    log = r.log.decode()
    assert (r.status, r.failure_reason, r.exit_code) == ("failed", "script_failure", 3), log
    build = next(c for c in r.stages if c.stage == "build_script")
    assert build.driver_exit == 1 and build.exit_code == 3  # BUILD_FAILURE_EXIT_CODE + file
    assert "unreachable" not in log and "after:failed" in log
    assert log.rstrip().endswith("ERROR: Job failed: exit status 3")
    rec = verify_record(find_markers(r.log)[-1], KEYS)
    assert rec.exit_code == 3 and rec.stages[-1].name == "build_script"


@pytest.mark.cgroup
def test_oom_through_the_runner_is_script_failure_137(tmp_path, cg_parent, driver_cmd_for):
    import sys

    cfg = write_config(tmp_path, cg_parent)
    payload = make_payload(603, script=[f"{sys.executable} -c 'b = bytearray(300 * 2**20)'"],
                           variables={"KUBERNETES_MEMORY_LIMIT": "100Mi"})
    r = run_job(payload, driver_cmd=driver_cmd_for(cfg), workdir=tmp_path / "w", extra_env=ENV)
    assert (r.status, r.failure_reason, r.exit_code) == ("failed", "script_failure", 137)
    assert b"runner-wrapper: OOM: the build was killed at its memory limit of 100.0 MiB" in r.log
    assert r.log.rstrip().endswith(b"ERROR: Job failed: exit status 137")
    rec = verify_record(find_markers(r.log)[-1], KEYS)
    assert rec.oom_killed and rec.exit_code == 137


def test_allocation_endpoint_used_when_job_sets_nothing(tmp_path, driver_cmd_for):
    srv, reqs, base = serve(lambda h, b: (200, {"variables": {"KUBERNETES_MEMORY_LIMIT": "3Gi",
                                                               "KUBERNETES_CPU_REQUEST": "750m"}}))
    extra = f'[allocation]\nurl = "{base}/v1/allocation"\ntimeout = 2.0'
    cfg = write_config(tmp_path, "unused", backend="psutil", extra=extra)
    payload = make_payload(604, variables={"SPACK_JOB_SPEC_PKG_NAME": "zlib", "SPACK_JOB_SPEC_PKG_VERSION": "1.3"})
    try:
        r = run_job(payload, driver_cmd=driver_cmd_for(cfg), workdir=tmp_path / "w",
                    extra_env={**ENV, "RIGHTSIZER_ALLOCATION_TOKEN": "alloc-tok"})
    finally:
        srv.shutdown()
    log = r.log.decode()
    assert r.status == "success", log
    assert "using the allocation endpoint's suggestion for 'zlib@1.3'" in log
    assert reqs.requests[0]["headers"]["Authorization"] == "Bearer alloc-tok"
    rec = verify_record(find_markers(r.log)[-1], KEYS)
    assert rec.limits.memory_limit_bytes == 3 * 2**30 and rec.limits.cpu_request_cores == 0.75
    assert rec.limits.sources["memory_limit"].startswith("allocation endpoint")
    assert rec.host.backend == "psutil" and rec.host.approximate


def test_allocation_down_falls_back_to_defaults_and_no_key_gives_unsigned_marker(tmp_path, driver_cmd_for):
    extra = '[allocation]\nurl = "http://127.0.0.1:9/v1/allocation"\ntimeout = 0.5\n[defaults]\nmemory_limit = "1Gi"'
    cfg = write_config(tmp_path, "unused", backend="psutil", extra=extra)
    r = run_job(make_payload(605), driver_cmd=driver_cmd_for(cfg), workdir=tmp_path / "w",
                extra_env={"RIGHTSIZER_SIGNING_KEY": ""})
    log = r.log.decode()
    assert r.status == "success", log
    assert "allocation endpoint unreachable" in log and "using the defaults from wrapper.toml" in log
    assert "WARNING: no signing key configured" in log
    marker = find_markers(r.log)[-1]
    assert "signature" not in marker and marker["job"]["id"] == 605
    assert marker["limits"]["memory_limit_bytes"] == 2**30


def test_config_error_is_a_system_failure_retried_three_times(tmp_path, driver_cmd_for):
    bad = tmp_path / "bad.toml"
    bad.write_text("[cgroup]\nbackend = 'v9'\n")
    r = run_job(make_payload(607), driver_cmd=driver_cmd_for(bad), workdir=tmp_path / "w",
                preparation_retry_interval=0)
    assert (r.status, r.failure_reason, r.exit_code) == ("failed", "runner_system_failure", None)
    assert [c.stage for c in r.stages].count("config") == 3
    assert b"backend = 'v9'" in r.log
