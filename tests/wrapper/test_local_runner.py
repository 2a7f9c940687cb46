"""standin.runner's reading of driver exit codes (§1.5), with tiny bash drivers (no cgroups needed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from standin.runner import run_job

from .conftest import make_payload

pytestmark = pytest.mark.slow  # end to end: outside the fast lane (pytest -m "not slow")


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
    cfg = cfg.replace('"FROM_CONFIG": "yes"', '"FROM_CONFIG": "yes", "RUNNER_OWN": "from-job-env"')
    body = 'echo "env:$FROM_CONFIG:$CUSTOM_ENV_CI_JOB_ID:$RUNNER_OWN"; bash "$2"'
    r = run_job(make_payload(77), driver_cmd=driver(tmp_path, body, cfg), workdir=tmp_path / "w",
                extra_env={"RUNNER_OWN": "from-runner"})
    assert r.status == "success"
    assert b"Using Custom executor with driver d v9..." in r.log
    # job_env comes after the runner's own environment (it wins) and before CUSTOM_ENV_* (it loses):
    # R executors/custom/custom.go prepareCommand; Go's os/exec keeps the last value of a key.
    assert b"env:yes:77:from-job-env" in r.log


def test_invalid_config_json_is_retried_then_system_failure(tmp_path):
    r = run_job(make_payload(1), driver_cmd=driver(tmp_path, 'bash "$2"', "echo 'not json'"),
                workdir=tmp_path / "w", preparation_retry_interval=0)
    assert (r.status, r.failure_reason) == ("failed", "runner_system_failure")
    # R common/build.go retryCreateExecutor: cleanup after each failed attempt, and no extra one.
    assert [c.stage for c in r.stages] == ["config", "cleanup"] * 3
    assert b"error while parsing JSON output" in r.log


def test_script_timeout_sends_sigterm(tmp_path):
    body = 'if [ "$stage" = build_script ]; then trap "echo got-term; exit 1" TERM; sleep 30 & wait; fi'
    r = run_job(make_payload(1), driver_cmd=driver(tmp_path, body), workdir=tmp_path / "w", script_timeout=0.5,
                graceful_kill_timeout=5)
    assert r.failure_reason == "job_execution_timeout" and b"got-term" in r.log


# --------------------------------------------------------------------------- issue 10 point 10


RUN_AS_DRIVER = 'bash "$2" || { rc=$?; echo $rc > "$BUILD_EXIT_CODE_FILE"; exit "$BUILD_FAILURE_EXIT_CODE"; }'


def recording_driver(tmp_path: Path, run_body: str = RUN_AS_DRIVER, config_json: str = "{}",
                     config_body: str | None = None) -> tuple[list[str], Path]:
    """A driver that appends one line per call to ``calls.log``: the call, the stage and TMPDIR."""
    log = tmp_path / "calls.log"
    p = tmp_path / "rec.sh"
    cfg = config_body if config_body is not None else f"echo '{config_json}'"
    p.write_text(f"""#!/usr/bin/env bash
echo "$1 ${{3:-}} $TMPDIR" >> {log}
case "$1" in
  config) {cfg} ;;
  prepare) true ;;
  run) stage="$3"; {run_body} ;;
  cleanup) true ;;
esac
""")
    p.chmod(0o755)
    return [str(p)], log


def stages_of(log: Path) -> list[str]:
    return [ln.split()[1] if ln.split()[0] == "run" else ln.split()[0] for ln in log.read_text().splitlines()]


def test_go_expand_is_the_runners_variable_expansion():
    """R common/variables.go JobVariables.Get/Expand over Go's os.Expand."""
    from standin.runner import expand_variables, go_expand

    env = {"A": "x", "A_B": "y", "EMPTY": ""}
    get = lambda k: {"$": "$", "?": ""}.get(k, env.get(k, ""))  # noqa: E731
    cases = {"$A": "x", "${A}": "x", "$A_B-c": "y-c", "pre${A}post": "prexpost", "$$": "$", "$$A": "$A",
             "$?": "", "$(ls)": "$(ls)", "a$.b": "a$.b", "cost $": "cost $", "${}": "", "${A": "A",
             "$UNSET": "", "100%": "100%", "$1$2": ""}
    for raw, want in cases.items():
        assert go_expand(raw, get) == want, raw
    variables = [{"key": "A", "value": "first"}, {"key": "A", "value": "$B"}, {"key": "B", "value": "b"},
                 {"key": "C", "value": "$A/$B"}, {"key": "R", "value": "$B", "raw": True},
                 {"key": "P", "value": "$?$*$#$@$!$0$9$$"}]
    out = {v["key"]: v["value"] for v in expand_variables(variables)}
    # The last A wins, and values are expanded against the *unexpanded* list (no recursion).
    assert out == {"A": "b", "B": "b", "C": "$B/b", "R": "$B", "P": "$"}


def test_custom_env_holds_every_expanded_variable_and_the_payload_stays_raw(tmp_path):
    body = ('if [ "$stage" = build_script ]; then echo "mem=$CUSTOM_ENV_KUBERNETES_MEMORY_LIMIT '
            'raw=$CUSTOM_ENV_RAWV dir=$CUSTOM_ENV_CI_PROJECT_DIR server=$CUSTOM_ENV_CI_SERVER"; '
            'grep -o "\\$SIZE" "$JOB_RESPONSE_FILE" | head -1; fi; bash "$2"')
    payload = make_payload(31, variables={"SIZE": "300Mi", "KUBERNETES_MEMORY_LIMIT": "$SIZE"})
    payload["variables"].append({"key": "RAWV", "value": "$SIZE", "public": True, "masked": False, "raw": True})
    r = run_job(payload, driver_cmd=driver(tmp_path, body, "echo '{\"builds_dir\": \"/b\"}'"),
                workdir=tmp_path / "w")
    assert r.status == "success", r.log.decode()
    assert b"mem=300Mi raw=$SIZE dir=/b/group/p server=yes" in r.log
    assert b"$SIZE\n" in r.log  # JOB_RESPONSE_FILE is the raw payload


@pytest.mark.parametrize("content,reason,code", [
    ("42", "script_failure", 42), ("42\n", "script_failure", 42), ("42\r\nmore\n", "script_failure", 42),
    ("+7\n", "script_failure", 7), (" 42\n", "runner_system_failure", None), ("42 \n", "runner_system_failure", None),
    ("", "runner_system_failure", None), ("1_000\n", "runner_system_failure", None),
    ("99999999999999999999\n", "runner_system_failure", None),
])
def test_exit_code_file_is_read_with_strconv_atoi(tmp_path, content, reason, code):
    fmt = content.encode("unicode_escape").decode()
    body = (f'if [ "$stage" = build_script ]; then printf \'{fmt}\' > "$BUILD_EXIT_CODE_FILE"; '
            'exit "$BUILD_FAILURE_EXIT_CODE"; fi; bash "$2"')
    r = run_job(make_payload(32), driver_cmd=driver(tmp_path, body), workdir=tmp_path / "w")
    assert (r.failure_reason, r.exit_code) == (reason, code), r.log.decode()


def test_exit_code_file_is_kept_between_stages(tmp_path):
    """R: the file is never deleted between stages, so a driver that exits 1 without writing it gets
    an earlier stage's code (here get_sources' 5, retried through GET_SOURCES_ATTEMPTS)."""
    body = ('if [ "$stage" = get_sources ] && [ ! -e "$TMPDIR/once" ]; then touch "$TMPDIR/once"; '
            'echo 5 > "$BUILD_EXIT_CODE_FILE"; exit 1; fi; '
            'if [ "$stage" = build_script ]; then exit 1; fi; bash "$2"')
    drv, log = recording_driver(tmp_path, body)
    r = run_job(make_payload(33, variables={"GET_SOURCES_ATTEMPTS": "2"}), driver_cmd=drv, workdir=tmp_path / "w")
    assert stages_of(log)[:7] == ["config", "prepare", "prepare_script", "get_sources", "clear_worktree",
                                  "get_sources", "build_script"]
    assert (r.failure_reason, r.exit_code) == ("script_failure", 5)


def test_three_prepare_attempts_each_with_a_fresh_tmpdir_and_a_cleanup(tmp_path):
    drv, log = recording_driver(tmp_path, config_body="exit 2")
    r = run_job(make_payload(34), driver_cmd=drv, workdir=tmp_path / "w", preparation_retry_interval=0)
    assert (r.status, r.failure_reason) == ("failed", "runner_system_failure")
    lines = [ln.split() for ln in log.read_text().splitlines()]
    assert [ln[0] for ln in lines] == ["config", "cleanup"] * 3
    tmpdirs = [ln[-1] for ln in lines]
    assert len(set(tmpdirs)) == 3 and tmpdirs[0] == tmpdirs[1]  # one TMPDIR per attempt, cleanup in it
    assert not any(os.path.exists(t) for t in tmpdirs)  # removed after each cleanup
    # A build error in prepare is not retried.
    (tmp_path / "b").mkdir()
    drv, log = recording_driver(tmp_path / "b", config_body="exit 1")
    r = run_job(make_payload(35), driver_cmd=drv, workdir=tmp_path / "w2", preparation_retry_interval=0)
    assert (r.failure_reason, r.exit_code) == ("script_failure", 1)
    assert stages_of(log) == ["config", "cleanup"]


def _full_payload(job_id: int, script: list[str], **extra) -> dict:
    p = make_payload(job_id, script=script, extra_steps=[{"name": "release", "script": ["echo rel"],
                                                          "when": "on_success"}],
                     after=['echo "after:$CI_JOB_STATUS"'], **extra)
    p["cache"] = [{"key": "k", "paths": ["c/"], "policy": "pull-push", "when": "always"}]
    p["dependencies"] = [{"id": 1, "name": "gen", "artifacts_file": {"filename": "a.zip", "size": 10}}]
    p["artifacts"] = [{"name": "x", "paths": ["out/"], "when": "always"}]
    return p


def test_stage_order_and_skipping(tmp_path):
    drv, log = recording_driver(tmp_path)
    r = run_job(_full_payload(36, ["echo hi"]), driver_cmd=drv, workdir=tmp_path / "w")
    assert r.status == "success", r.log.decode()
    assert stages_of(log) == ["config", "prepare", "prepare_script", "get_sources", "restore_cache",
                              "download_artifacts", "build_script", "step_release", "after_script", "archive_cache",
                              "upload_artifacts_on_success", "cleanup_file_variables", "cleanup"]
    log.unlink()
    # Nothing to do (no cache, dependencies, artifacts, empty steps): the driver is not called.
    p = make_payload(37, extra_steps=[{"name": "release", "script": [], "when": "on_success"}])
    assert run_job(p, driver_cmd=drv, workdir=tmp_path / "w").status == "success"
    assert stages_of(log) == ["config", "prepare", "prepare_script", "get_sources", "build_script",
                              "cleanup_file_variables", "cleanup"]


def test_failure_paths(tmp_path):
    drv, log = recording_driver(tmp_path)
    r = run_job(_full_payload(38, ["exit 3"]), driver_cmd=drv, workdir=tmp_path / "w")
    assert (r.failure_reason, r.exit_code) == ("script_failure", 3) and b"after:failed" in r.log
    assert stages_of(log)[6:] == ["build_script", "after_script", "archive_cache_on_failure",
                                  "upload_artifacts_on_failure", "cleanup_file_variables", "cleanup"]
    # get_sources fails: no user script and no after_script, but the on_failure stages still run.
    log.unlink()
    drv, log = recording_driver(tmp_path, 'if [ "$stage" = get_sources ]; then exit 1; fi; bash "$2"')
    r = run_job(_full_payload(39, ["echo hi"]), driver_cmd=drv, workdir=tmp_path / "w")
    assert (r.failure_reason, r.exit_code) == ("script_failure", 1)
    assert stages_of(log) == ["config", "prepare", "prepare_script", "get_sources", "archive_cache_on_failure",
                              "upload_artifacts_on_failure", "cleanup_file_variables", "cleanup"]
    # prepare_script fails: nothing else runs.
    log.unlink()
    drv, log = recording_driver(tmp_path, 'if [ "$stage" = prepare_script ]; then exit 1; fi; bash "$2"')
    r = run_job(_full_payload(40, ["echo hi"]), driver_cmd=drv, workdir=tmp_path / "w")
    assert r.failure_reason == "script_failure"
    assert stages_of(log) == ["config", "prepare", "prepare_script", "cleanup"]


def test_after_script_ignore_errors_false_fails_the_job(tmp_path):
    drv, _log = recording_driver(tmp_path, 'if [ "$stage" = after_script ]; then echo 4 > "$BUILD_EXIT_CODE_FILE"; '
                                           'exit 1; fi; bash "$2"')
    r = run_job(_full_payload(41, ["echo hi"]), driver_cmd=drv, workdir=tmp_path / "w")
    assert r.status == "success" and b"after_script failed, but job will continue unaffected" in r.log
    r = run_job(_full_payload(42, ["echo hi"], variables={"AFTER_SCRIPT_IGNORE_ERRORS": "false"}),
                driver_cmd=drv, workdir=tmp_path / "w")
    assert (r.status, r.failure_reason, r.exit_code) == ("failed", "script_failure", 4)


def test_cancel_runs_after_script_and_on_failure_stages(tmp_path):
    body = ('if [ "$stage" = build_script ]; then trap "echo got-term; exit 1" TERM; sleep 30 & wait; fi; '
            'bash "$2"')
    drv, log = recording_driver(tmp_path, body)
    r = run_job(_full_payload(43, ["sleep 30"]), driver_cmd=drv, workdir=tmp_path / "w", cancel_after=0.5,
                graceful_kill_timeout=5)
    assert (r.status, r.failure_reason, r.exit_code) == ("canceled", None, None), r.log.decode()
    assert b"got-term" in r.log and b"after:canceled" in r.log
    assert stages_of(log)[6:] == ["build_script", "after_script", "archive_cache_on_failure",
                                  "upload_artifacts_on_failure", "cleanup_file_variables", "cleanup"]


def test_job_timeout_runs_no_further_stage(tmp_path):
    body = ('if [ "$stage" = build_script ]; then trap "echo got-term; exit 1" TERM; sleep 30 & wait; fi; '
            'bash "$2"')
    drv, log = recording_driver(tmp_path, body)
    r = run_job(_full_payload(44, ["sleep 30"]), driver_cmd=drv, workdir=tmp_path / "w", script_timeout=0.5,
                graceful_kill_timeout=5)
    assert (r.status, r.failure_reason, r.exit_code) == ("failed", "job_execution_timeout", None)
    assert b"got-term" in r.log and b"after:" not in r.log
    assert stages_of(log)[6:] == ["build_script", "cleanup"]


def test_builds_dir_is_shared_is_honoured(tmp_path):
    import threading

    body = 'if [ "$stage" = build_script ]; then echo "dir=$CUSTOM_ENV_CI_PROJECT_DIR"; sleep 0.5; fi; bash "$2"'
    drv = driver(tmp_path, body, "echo '{\"builds_dir\": \"/b\", \"builds_dir_is_shared\": false}'")
    r = run_job(make_payload(45), driver_cmd=drv, workdir=tmp_path / "w")
    assert b"dir=/b/group/p\n" in r.log
    shared = tmp_path / "s"
    shared.mkdir()
    drv = driver(shared, body, "echo '{\"builds_dir\": \"/b\", \"builds_dir_is_shared\": true}'")
    results = []
    threads = [threading.Thread(target=lambda i=i: results.append(run_job(make_payload(46 + i), driver_cmd=drv,
                                                                           workdir=tmp_path / "w")))
               for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dirs = sorted(str(r.project_dir) for r in results)
    assert dirs == ["/b/local000/0/group/p", "/b/local000/1/group/p"]  # concurrent jobs never share one
    assert all(f"dir={r.project_dir}\n".encode() in r.log for r in results)
