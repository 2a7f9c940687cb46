"""local_runner's reading of driver exit codes (§1.5), with tiny bash drivers (no cgroups needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner_wrapper.local_runner import run_job

from .conftest import make_payload


def driver(tmp_path: Path, run_body: str, config_body: str = "echo '{}'") -> list[str]:
    p = tmp_path / "drv.sh"
    p.write_text(f"""#!/usr/bin/env bash
case "$1" in
  config) {config_body} ;;
  prepare) echo "prepared $CUSTOM_ENV_CI_JOB_ID $(basename "$JOB_RESPONSE_FILE")" ;;
  run) stage="$3"; {run_body} ;;
  cleanup) echo cleaned ;;
esac
""")
    p.chmod(0o755)
    return [str(p)]


@pytest.mark.parametrize("run_body,status,reason,code", [
    ('bash "$2"', "success", None, 0),
    ('if [ "$stage" = build_script ]; then echo 5 > "$BUILD_EXIT_CODE_FILE"; exit "$BUILD_FAILURE_EXIT_CODE"; fi',
     "failed", "script_failure", 5),
    ('if [ "$stage" = build_script ]; then exit "$BUILD_FAILURE_EXIT_CODE"; fi', "failed", "script_failure", 1),
    ('if [ "$stage" = build_script ]; then echo nope > "$BUILD_EXIT_CODE_FILE"; exit 1; fi',
     "failed", "runner_system_failure", None),
    ('if [ "$stage" = build_script ]; then exit "$SYSTEM_FAILURE_EXIT_CODE"; fi', "failed", "runner_system_failure",
     None),
    ('if [ "$stage" = build_script ]; then exit 5; fi', "failed", "runner_system_failure", None),
])
def test_exit_code_interpretation(tmp_path, run_body, status, reason, code):
    r = run_job(make_payload(1), driver_cmd=driver(tmp_path, run_body), workdir=tmp_path / "w")
    assert (r.status, r.failure_reason, r.exit_code) == (status, reason, code), r.log.decode()
    assert r.stages[-1].stage == "cleanup" and b"cleaned" in r.runner_log and b"cleaned" not in r.log
    assert b"prepared 1 response.json" in r.log
    if code == 5 and reason == "runner_system_failure":
        assert b"unknown Custom executor executable exit code 5" in r.log


def test_job_env_from_config_reaches_later_calls_but_not_over_custom_env(tmp_path):
    cfg = """echo '{"driver": {"name": "d", "version": "v9"}, "job_env": {"FROM_CONFIG": "yes", "CUSTOM_ENV_CI_JOB_ID": "999"}}'"""
    body = 'echo "env:$FROM_CONFIG:$CUSTOM_ENV_CI_JOB_ID"; bash "$2"'
    r = run_job(make_payload(77), driver_cmd=driver(tmp_path, body, cfg), workdir=tmp_path / "w")
    assert r.status == "success"
    assert b"Using Custom executor with driver d v9..." in r.log
    assert b"env:yes:77" in r.log


def test_invalid_config_json_is_retried_then_system_failure(tmp_path):
    r = run_job(make_payload(1), driver_cmd=driver(tmp_path, 'bash "$2"', "echo 'not json'"),
                workdir=tmp_path / "w", preparation_retry_interval=0)
    assert (r.status, r.failure_reason) == ("failed", "runner_system_failure")
    assert [c.stage for c in r.stages] == ["config", "cleanup"] * 3 + ["cleanup"]
    assert b"error while parsing JSON output" in r.log


def test_script_timeout_sends_sigterm(tmp_path):
    body = 'if [ "$stage" = build_script ]; then trap "echo got-term; exit 1" TERM; sleep 30 & wait; fi'
    r = run_job(make_payload(1), driver_cmd=driver(tmp_path, body), workdir=tmp_path / "w", script_timeout=0.5,
                graceful_kill_timeout=5)
    assert r.failure_reason == "job_execution_timeout" and b"got-term" in r.log
