"""The ``runner-wrapper`` entry point: start the CLI, and fail as a *system* failure if it cannot.

GitLab Runner reads a driver's exit status 1 as ``BUILD_FAILURE_EXIT_CODE``: a ``BuildError``
(``script_failure``, not retried), with whatever code ``BUILD_EXIT_CODE_FILE`` holds
(gitlab-runner ``executors/custom/command/command.go`` ``waitForCommand``, ``parseBuildFailure``).
Python exits 1 on an uncaught exception, so a broken installation (an import error) or a bug in
the driver would be blamed on the build, and a failed ``config``/``prepare`` would not get the
runner's three preparation attempts (``common/build.go`` ``retryCreateExecutor``).  This module
imports nothing of the project at module level (only :mod:`os` and :mod:`sys`): it exits
``$SYSTEM_FAILURE_EXIT_CODE`` (2 when unset) with one line on stderr instead.

Used by the ``runner-wrapper`` console script (``pyproject.toml``) and ``python -m runner_wrapper``
(:mod:`runner_wrapper.__main__`).
"""

import os
import sys

__all__ = ["main", "system_failure_code"]


def system_failure_code() -> int:
    """``$SYSTEM_FAILURE_EXIT_CODE`` as the runner sets it (read, never assumed); 2 when unset or bad."""
    try:
        return int(os.environ.get("SYSTEM_FAILURE_EXIT_CODE", ""))
    except ValueError:
        return 2


def _where(exc: BaseException) -> str:
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return f" (at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno})" if tb is not None else ""


def main() -> int:
    """Run :func:`runner_wrapper.cli.main`; an import error or an uncaught exception exits
    ``$SYSTEM_FAILURE_EXIT_CODE`` (``SystemExit`` and ``KeyboardInterrupt`` pass through)."""
    try:
        from runner_wrapper.cli import main as cli_main
    except Exception as exc:  # noqa: BLE001 - anything at import time is an installation fault
        sys.stderr.write(f"runner-wrapper: cannot start: {type(exc).__name__}: {exc}\n")
        return system_failure_code()
    try:
        return cli_main()
    except Exception as exc:  # noqa: BLE001 - a driver bug is the runner host's failure, not the build's
        sys.stderr.write(f"runner-wrapper: internal error: {type(exc).__name__}: {exc}{_where(exc)}\n")
        return system_failure_code()
