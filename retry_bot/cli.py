"""``retry-bot`` command line: dispatches to :mod:`retry_bot.commands`."""

from __future__ import annotations

import argparse
import importlib
import sys

#: Sub-command modules under retry_bot.commands, in help order.
COMMAND_MODULES = (
    "classify", "policy", "run", "history", "demo", "ingest", "predict", "simulate",
    "report", "serve", "state", "doctor",
)


def build_parser() -> argparse.ArgumentParser:
    from retry_bot import __version__

    p = argparse.ArgumentParser(
        prog="retry-bot",
        description="Classify failed GitLab CI jobs, retry what is worth retrying, "
        "re-run OOM-killed jobs with more memory, and predict right-sized requests.",
    )
    p.add_argument("--version", action="version", version=f"retry-bot {__version__}")
    p.add_argument("--log-format", choices=("auto", "console", "json"), default="auto",
                   help="console on a terminal, JSON lines otherwise (default: auto)")
    p.add_argument("--log-level", default="info", help="debug, info, warning or error")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(f"retry_bot.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"retry_bot.commands.{name}":
                continue
            raise
        mod.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    from runner_wrapper.logconfig import configure_logging

    configure_logging(args.log_format, args.log_level)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
