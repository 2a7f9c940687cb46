"""The runner's side of the custom-executor contract, checked against gitlab-runner's source (review of issue 10).

Each test pins one rule of GitLab Runner (R = gitlab-org/gitlab-runner at d79f3e7b) that
``runner_wrapper.local_runner`` or the driver got wrong.
"""

from __future__ import annotations

from pathlib import Path

from runner_wrapper.local_runner import _interpret, expand_variables, go_expand
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


def test_exit_code_file_never_follows_a_planted_link(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("keep\n")
    (tmp_path / "build_exit_code").symlink_to(target)
    import pytest

    from runner_wrapper.stagerun import SystemFailure

    with pytest.raises(SystemFailure, match="BUILD_EXIT_CODE_FILE"):
        check_exit_code_file(_env(tmp_path))
    assert target.read_text() == "keep\n"
