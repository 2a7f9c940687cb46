"""``python -I -m runner_wrapper``: the recommended ``run_exec`` (packaging/runner/config.toml.example).

A broken installation (an import error here) must not read as a build failure: Python's own exit
code for an uncaught exception is 1, which GitLab Runner reads as ``BUILD_FAILURE_EXIT_CODE`` and
pairs with whatever an earlier stage left in ``BUILD_EXIT_CODE_FILE`` (gitlab-runner
``executors/custom/command/command.go`` ``waitForCommand``).  Exit ``$SYSTEM_FAILURE_EXIT_CODE``
instead, so the job fails as ``runner_system_failure``.
"""

import sys

try:
    from runner_wrapper.cli import main
except BaseException as exc:  # noqa: BLE001 - anything at import time is an installation fault
    import os

    sys.stderr.write(f"runner-wrapper: cannot start: {type(exc).__name__}: {exc}\n")
    try:
        _code = int(os.environ.get("SYSTEM_FAILURE_EXIT_CODE", ""))
    except ValueError:
        _code = 2
    sys.exit(_code)

sys.exit(main())
