"""``python -I -m runner_wrapper``: the recommended ``run_exec`` (packaging/runner/config.toml.example).

A broken installation (an import error) or a driver bug must not read as a build failure:
:mod:`runner_wrapper.launch` exits ``$SYSTEM_FAILURE_EXIT_CODE`` instead of Python's 1.
"""

import sys

from runner_wrapper.launch import main

sys.exit(main())
