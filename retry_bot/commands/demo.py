"""``retry-bot demo``: GitLab stand-in + local runner through runner-wrapper + the bot, end to end.

Runs on a fresh machine after ``pip install -e '.[test]'``, with or without root
(real cgroups where the host allows, the psutil fallback elsewhere).  Prints a
timeline; exits 0 only if the OOM-killed build was re-created with more memory
and succeeded, the compile error was left alone, and the transient network
failure was retried once.

With --serve (implies --keep) the stand-in and its runners stay up afterwards for a
fault drill: it prints the commands (the real retry-bot run, the stand-in CLI's
fail/hold/pipeline/check, SIGKILL, retry-bot state check and history) and serves
until Ctrl-C.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

__all__ = ["register", "handle"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("demo", help="run the whole system locally against a GitLab stand-in (< 1 min)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--timeout", type=float, default=90.0, help="give up after this many seconds (default 90)")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory (state, logs, spool)")
    p.add_argument("--backend", default="auto", choices=("auto", "v2", "v1", "psutil"),
                   help="runner-wrapper measurement backend (default: auto = real cgroups where possible)")
    p.add_argument("--verbose", action="store_true", help="also show the bot's structured logs on stderr")
    p.add_argument("--serve", action="store_true",
                   help="afterwards keep the stand-in and its runners up for a fault drill, with the control "
                        "endpoint of python -m standin.gitlab, until Ctrl-C (implies --keep; "
                        "docs/standin.md)")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from standin.demo import run_demo
    from runner_wrapper.logconfig import configure_logging

    if not args.verbose:
        configure_logging(args.log_format, "error")
    if threading.current_thread() is threading.main_thread():
        # Ctrl-C and SIGTERM both end the demo through its cleanup (even when started in the
        # background, where a shell makes SIGINT ignored).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        result = run_demo(timeout=args.timeout, keep=args.keep, backend=args.backend, serve=args.serve)
    except KeyboardInterrupt:
        # run_demo already stopped everything and removed its cgroups and files.
        print("demo interrupted", file=sys.stderr)
        return 130
    return 0 if result.ok else 1
