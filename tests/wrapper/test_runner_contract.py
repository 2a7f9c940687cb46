"""The runner's side of the custom-executor contract, checked against gitlab-runner's source (review of issue 10).

Each test pins one rule of GitLab Runner (R = gitlab-org/gitlab-runner at d79f3e7b) that
``standin.runner`` or the driver got wrong.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from standin.runner import _interpret, expand_variables, go_expand
from runner_wrapper.stagerun import DriverEnv, check_exit_code_file


def _env(tmp_path: Path) -> DriverEnv:
    return DriverEnv(build_failure=1, system_failure=2, exit_code_file=str(tmp_path / "build_exit_code"),
                     job_response_file=None, tmpdir=str(tmp_path))


def test_an_exit_1_that_wrote_no_code_is_a_system_failure_not_the_builds(tmp_path):
    """R ``executors/custom/command/command.go`` ``parseBuildFailure``: a file the runner cannot open
    is ``BuildError{ExitCode: 1}`` (script_failure); an empty first line fails ``strconv.Atoi`` and
    is an ``UnknownFailureError`` (runner_system_failure).  A driver that dies of an uncaught
    exception exits 1 without writing a code: that must not read as the build's failure, so the
    stale file is emptied, not removed."""
    code_file = tmp_path / "build_exit_code"
    code_file.write_text("137\n")  # an earlier stage was OOM-killed
    check_exit_code_file(_env(tmp_path))
    assert code_file.exists() and code_file.read_bytes() == b""
    call = _interpret("build_script", 1, code_file)  # the wrapper crashed: Python's exit status 1
    assert call.outcome == "system_failure" and call.exit_code is None
    # The runner's reading of a missing file, for contrast (pre-17.9 runners: no file at all).
    code_file.unlink()
    assert _interpret("build_script", 1, code_file).exit_code == 1
    code_file.mkdir()  # os.Open succeeds on a directory, the read fails: no integer, a system failure
    assert _interpret("build_script", 1, code_file).outcome == "system_failure"


def test_exit_code_file_never_follows_a_planted_link(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("keep\n")
    (tmp_path / "build_exit_code").symlink_to(target)
    import pytest

    from runner_wrapper.stagerun import SystemFailure

    with pytest.raises(SystemFailure, match="BUILD_EXIT_CODE_FILE"):
        check_exit_code_file(_env(tmp_path))
    assert target.read_text() == "keep\n"


def test_a_dollar_not_followed_by_a_name_is_kept():
    """Go ``os.Expand`` (``src/os/env.go``, the Go 1.26 the runner is built with): "Valid syntax, but $
    was not followed by a name. Leave the dollar character untouched." (``$(``, ``$.``, ``$ ``);
    invalid syntax (``${}``) is eaten.  The runner's own test pins it: R
    ``common/spec/variables_test.go`` ``TestSpecialVariablesExpansion`` expects ``$/dsa`` unchanged
    (gitlab-mechanics.md §11.1 says such a ``$`` is lost: it is not)."""
    get = lambda k: {"A": "x"}.get(k, "")  # noqa: E731
    special = [{"key": "key", "value": "$$"}, {"key": "key2", "value": "$/dsa"}, {"key": "key3", "value": "aa$@bb"},
               {"key": "key4", "value": "aa${@}bb"}]
    assert [v["value"] for v in expand_variables(special)] == ["$", "$/dsa", "aabb", "aabb"]
    assert go_expand("echo $(date) a$.b $ c $A ${}", get) == "echo $(date) a$.b $ c x "
    out = {v["key"]: v["value"] for v in expand_variables([{"key": "CMD", "value": "make -j$(nproc)"}])}
    assert out == {"CMD": "make -j$(nproc)"}


def test_a_file_variable_expands_to_its_path_and_exports_its_contents():
    """R ``common/spec/variables.go``: ``Get`` (what expansion uses) returns a file variable's path,
    ``path.Join(Value("RUNNER_TEMP_PROJECT_DIR"), key)`` (``tmpFile``; R ``variables_test.go``
    ``TestFileVariablesExpansion``); the variable itself keeps its (expanded) contents, which is what
    ``CUSTOM_ENV_<KEY>`` carries (``custom.go``)."""
    variables = [{"key": "KUBECONF", "value": "apiVersion: v1", "file": True},
                 {"key": "ARGS", "value": "--config=$KUBECONF"},
                 {"key": "RUNNER_TEMP_PROJECT_DIR", "value": "/builds/g/p.tmp"}]
    out = {v["key"]: v["value"] for v in expand_variables(variables)}
    assert out["ARGS"] == "--config=/builds/g/p.tmp/KUBECONF"
    assert out["KUBECONF"] == "apiVersion: v1"


def _env_driver(tmp_path: Path) -> list[str]:
    out = tmp_path / "env.txt"
    p = tmp_path / "envdrv.sh"
    p.write_text(f"""#!/usr/bin/env bash
case "$1" in
  config) echo '{{}}' ;;
  run) if [ "$3" = build_script ]; then env | grep '^CUSTOM_ENV_' | sort > {out}; fi
       bash "$2" || {{ echo $? > "$BUILD_EXIT_CODE_FILE"; exit "$BUILD_FAILURE_EXIT_CODE"; }} ;;
esac
""")
    p.chmod(0o755)
    return [str(p)]


def test_custom_env_order_predefined_after_job_variables_win(tmp_path):
    """R ``common/build.go`` ``GetAllVariables``: base variables before the job's
    (``GetDefaultVariables``: ``CI_JOB_STATUS=running``), the job's, then ``getBaseVariablesAfterJob``
    (``CI_SHARED_ENVIRONMENT``, always true for the custom executor, ``custom.go`` featuresUpdater;
    ``RUNNER_TEMP_PROJECT_DIR``), which win over a job variable of the same name; a file variable
    referenced by another expands to its path there."""
    from standin.runner import run_job

    from .conftest import make_payload

    payload = make_payload(61, variables={"RUNNER_TEMP_PROJECT_DIR": "/mine", "CI_SHARED_ENVIRONMENT": "no",
                                          "USES": "f=$CREDS"})
    payload["variables"].append({"key": "CREDS", "value": "secret-text", "public": False, "file": True})
    r = run_job(payload, driver_cmd=_env_driver(tmp_path), workdir=tmp_path / "w")
    assert r.status == "success", r.log.decode()
    env = dict(line.split("=", 1) for line in (tmp_path / "env.txt").read_text().splitlines())
    assert env["CUSTOM_ENV_CI_SHARED_ENVIRONMENT"] == "true"
    assert env["CUSTOM_ENV_RUNNER_TEMP_PROJECT_DIR"] == str(r.project_dir) + ".tmp"
    assert env["CUSTOM_ENV_CI_JOB_STATUS"] == "running"
    assert env["CUSTOM_ENV_USES"] == f"f={r.project_dir}.tmp/CREDS"
    assert env["CUSTOM_ENV_CREDS"] == "secret-text"
    assert env["CUSTOM_ENV_CI_JOB_TIMEOUT"] == "3600"
    # R Build.GetBuildTimeout: no (or a zero) runner_info.timeout is DefaultTimeout, 7200 s.
    payload["runner_info"] = {}
    assert run_job(payload, driver_cmd=_env_driver(tmp_path), workdir=tmp_path / "w").status == "success"
    env = dict(line.split("=", 1) for line in (tmp_path / "env.txt").read_text().splitlines())
    assert env["CUSTOM_ENV_CI_JOB_TIMEOUT"] == "7200"


def test_after_script_ignore_errors_is_read_as_the_runners_build_setting(tmp_path):
    """R ``common/build_settings.go`` ``validate``: ``strconv.ParseBool`` of the raw value, no
    lower-casing; an empty or invalid value keeps ``DefaultAfterScriptIgnoreErrors = true``."""
    from standin.runner import run_job

    from .conftest import make_payload

    drv = tmp_path / "d.sh"
    drv.write_text("""#!/usr/bin/env bash
case "$1" in
  config) echo '{}' ;;
  run) if [ "$3" = after_script ]; then echo 4 > "$BUILD_EXIT_CODE_FILE"; exit 1; fi; bash "$2" ;;
esac
""")
    drv.chmod(0o755)
    for value, status in (("2", "success"), ("no", "success"), ("fAlse", "success"), ("FALSE", "failed"),
                          ("0", "failed")):
        r = run_job(make_payload(62, after=["echo after"], variables={"AFTER_SCRIPT_IGNORE_ERRORS": value}),
                    driver_cmd=[str(drv)], workdir=tmp_path / "w")
        assert r.status == status, value


def _console_script_entry() -> tuple[str, str]:
    import tomllib

    doc = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    module, _, func = doc["project"]["scripts"]["runner-wrapper"].partition(":")
    return module, func


def _run_entry(tmp_path: Path, breakage: str, *args: str):
    """The ``runner-wrapper`` console script as pip generates it (``from M import f; sys.exit(f())``),
    over a copy of the package with ``breakage`` appended to ``cli.py``."""
    import shutil
    import subprocess
    import sys

    import runner_wrapper

    broken = tmp_path / "site"
    shutil.copytree(Path(runner_wrapper.__file__).parent, broken / "runner_wrapper",
                    ignore=shutil.ignore_patterns("__pycache__"))
    cli = broken / "runner_wrapper" / "cli.py"
    cli.write_text(cli.read_text() + breakage)
    module, func = _console_script_entry()
    boot = f"import sys; sys.path.insert(0, {str(broken)!r}); from {module} import {func}; sys.exit({func}())"
    env = {"PATH": "/usr/bin:/bin", "SYSTEM_FAILURE_EXIT_CODE": "9", "BUILD_FAILURE_EXIT_CODE": "7"}
    return subprocess.run([sys.executable, "-I", "-c", boot, *args], env=env, capture_output=True, timeout=60)


def test_the_console_script_exits_with_the_system_failure_code_on_an_import_error(tmp_path):
    """``runner-wrapper config``/``prepare``/``cleanup`` with a broken installation: Python's exit 1
    would be a BuildError (not retried, blamed on the build; R ``command.go`` ``waitForCommand``)."""
    p = _run_entry(tmp_path, "\nimport runner_wrapper_missing_dependency\n", "executor", "config")
    assert p.returncode == 9, p.stderr
    assert b"runner-wrapper: cannot start: ModuleNotFoundError" in p.stderr


def test_the_console_script_exits_with_the_system_failure_code_on_a_driver_bug(tmp_path):
    p = _run_entry(tmp_path, "\ndef main(argv=None):\n    raise KeyError('boom')\n", "executor", "prepare")
    assert p.returncode == 9, p.stderr
    assert b"runner-wrapper: internal error: KeyError: 'boom' (at " in p.stderr
    assert b"Traceback" not in p.stderr


@pytest.mark.slow
def test_prepare_names_the_real_reason_when_the_key_file_cannot_be_read(tmp_path):
    """``[signing] key_file`` set but unusable: ``prepare`` says why, not "no signing key configured"."""
    from .conftest import make_payload, write_config
    from .driver import job_dir

    for key_file, reason in ((tmp_path, f"[signing] key_file {tmp_path}: cannot read: Is a directory"),
                             (tmp_path / "empty.key", f"[signing] key_file {tmp_path / 'empty.key'} is empty")):
        (tmp_path / "empty.key").write_text("\n")
        cfg = write_config(tmp_path, "unused", backend="psutil", extra=f'[signing]\nkey_file = "{key_file}"\n')
        jd = job_dir(tmp_path, cfg, make_payload(63), key=None)
        p = jd.call("prepare")
        assert p.returncode == 0, p.stdout
        assert f"WARNING: {reason}: usage records are unsigned".encode() in p.stdout, p.stdout
        assert b"no signing key configured" not in p.stdout
        jd.call("cleanup")


def _config_driver(tmp_path: Path, config_stdout: str) -> list[str]:
    p = tmp_path / "cfgdrv.sh"
    p.write_text(f"""#!/usr/bin/env bash
echo "$1" >> {tmp_path / 'calls'}
case "$1" in
  config) printf '%s' {_sh_quote(config_stdout)} ;;
  run) bash "$2" ;;
esac
""")
    p.chmod(0o755)
    return [str(p)]


def _sh_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def test_config_output_is_unmarshalled_into_the_runners_struct(tmp_path):
    """R ``executors/custom/custom.go`` ``dynamicConfig``: only an *empty* stdout means "no overrides"
    (whitespace is invalid JSON); ``json.Unmarshal`` into ``api.ConfigExecOutput`` fails on a key of
    the wrong type; either is ``error while parsing JSON output``, retried (R ``retryCreateExecutor``)."""
    from standin.runner import run_job

    from .conftest import make_payload

    for out in ("\n", '{"builds_dir_is_shared": "true"}', '{"builds_dir": 5}', '{"job_env": {"A": 1}}',
                '{"driver": {"name": 3}}'):
        (tmp_path / "calls").unlink(missing_ok=True)
        r = run_job(make_payload(64), driver_cmd=_config_driver(tmp_path, out), workdir=tmp_path / "w",
                    preparation_retry_interval=0)
        assert (r.status, r.failure_reason) == ("failed", "runner_system_failure"), out
        assert b"error while parsing JSON output" in r.log, out
        assert (tmp_path / "calls").read_text().split() == ["config", "cleanup"] * 3, out
    r = run_job(make_payload(64), driver_cmd=_config_driver(tmp_path, '{"unknown": 1, "hostname": null}'),
                workdir=tmp_path / "w")
    assert r.status == "success", r.log.decode()


def test_an_empty_builds_dir_is_a_configuration_error_not_retried(tmp_path):
    """R ``common/build.go`` ``StartBuild``: ``the builds_dir is not configured`` (likewise cache_dir),
    a BuildError with ``runner_configuration_error``, mapped to ``script_failure`` unless the
    instance lists it (R ``common/failure_reason_mapper.go``)."""
    from standin.runner import run_job

    from .conftest import make_payload

    drv = _config_driver(tmp_path, '{"builds_dir": ""}')
    r = run_job(make_payload(65), driver_cmd=drv, workdir=tmp_path / "w", preparation_retry_interval=0)
    assert (r.status, r.failure_reason) == ("failed", "script_failure")
    assert b"the builds_dir is not configured" in r.log
    assert [c.stage for c in r.stages] == ["config", "cleanup"]
    payload = make_payload(66)
    payload["features"] = {"failure_reasons": ["script_failure", "runner_configuration_error"]}
    r = run_job(payload, driver_cmd=_config_driver(tmp_path, "{}"), workdir=tmp_path / "w", cache_dir="")
    assert (r.status, r.failure_reason) == ("failed", "runner_configuration_error")
    assert b"the cache_dir is not configured" in r.log
