"""Run a stand-in from the command line, for poking at it with curl or a bot by hand.

``python -m standin.gitlab --ci-config .gitlab-ci.yml --project team/app --port 8929``
prints the URL and token on stdout and serves until SIGINT/SIGTERM (same as the ``serve``
sub-command, which also runs runner loops and a control endpoint: see
:mod:`standin.gitlab.cli` for ``pipeline``, ``fail``, ``hold``, ``jobs`` and ``check``).
"""

from __future__ import annotations

import sys

from standin.gitlab.cli import main

if __name__ == "__main__":
    sys.exit(main())
