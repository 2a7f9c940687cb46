"""Run a stand-in from the command line, for poking at it with curl or a bot by hand.

``python -m retry_bot.gitlab.standin --ci-config .gitlab-ci.yml --project team/app --port 8929``
prints the URL and token on stdout and serves until SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from retry_bot.gitlab.standin.ciconfig import CiConfigError
from retry_bot.gitlab.standin.server import DEFAULT_TOKEN, StandIn

_DEFAULT_CONFIG = {"build": {"script": ["make"]}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m retry_bot.gitlab.standin", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (default: ephemeral)")
    parser.add_argument("--token", default=DEFAULT_TOKEN, help="the Maintainer token to accept")
    parser.add_argument("--project", default="team/app", help="project path to create (default: team/app)")
    parser.add_argument("--ci-config", type=Path, help="YAML CI configuration for the project")
    args = parser.parse_args(argv)
    try:
        config = args.ci_config.read_text() if args.ci_config else _DEFAULT_CONFIG
    except OSError as exc:
        print(f"cannot read --ci-config: {exc}", file=sys.stderr)
        return 2
    standin = StandIn(port=args.port, token=args.token)
    try:
        standin.add_project(args.project, config)
    except (CiConfigError, ValueError) as exc:
        print(f"invalid CI configuration {args.ci_config}: {exc}", file=sys.stderr)
        return 2
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    with standin:
        print(f"url={standin.url} token={standin.token} project={args.project}", flush=True)
        done.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
