"""``retry-bot`` command line: dispatches to :mod:`retry_bot.commands`."""

from __future__ import annotations

import argparse
import importlib
import re
import sys

#: Sub-command modules under retry_bot.commands, in help order.
COMMAND_MODULES = (
    "classify", "policy", "run", "history", "demo", "ingest", "predict", "simulate",
    "report", "serve", "state", "doctor",
)


_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")
_LITERAL = re.compile(r"``(.+?)``", re.S)


def plain_text(text: str | None) -> str | None:
    """reST as a terminal shows it: ``literal`` -> literal, :func:`x` -> x, a trailing ``::`` -> ``:``.

    The sub-commands' descriptions are their module docstrings (reST, for the API docs).

    >>> plain_text("Reads ``--config`` (see :func:`retry_bot.live.daemon.serve`)::")
    'Reads --config (see retry_bot.live.daemon.serve):'
    """
    if not text:
        return text
    text = _ROLE.sub(r"\1", text)
    text = _LITERAL.sub(r"\1", text)
    return re.sub(r"(?<=\S)::$", ":", text, flags=re.M)


def _plain_help(parser: argparse.ArgumentParser) -> None:
    """Render every description, epilog and option help of ``parser`` (and its sub-commands) as plain text."""
    parser.description = plain_text(parser.description)
    parser.epilog = plain_text(parser.epilog)
    for action in parser._actions:
        if action.help not in (None, argparse.SUPPRESS):
            action.help = plain_text(action.help)
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                choice.help = plain_text(choice.help)
            for sub in set(action.choices.values()):
                _plain_help(sub)


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
        # Every sub-command is part of the product: a missing or broken module fails loudly.
        importlib.import_module(f"retry_bot.commands.{name}").register(sub)
    _plain_help(p)
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
