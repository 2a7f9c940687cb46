"""``retry-bot ... --help`` shows plain text, not reST markup (issue 13)."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from retry_bot.cli import COMMAND_MODULES, build_parser, main, plain_text

MARKUP = re.compile(r"``|:(?:func|class|mod|meth|attr):`")


def _help(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main([*argv, "--help"])
    return out.getvalue()


def _all_commands() -> list[list[str]]:
    import argparse

    found: list[list[str]] = [[]]

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found.append([*prefix, name])
                    walk(sub, [*prefix, name])

    walk(build_parser(), [])
    return found


def test_every_help_text_is_plain():
    commands = _all_commands()
    assert len(commands) > len(COMMAND_MODULES)  # sub-sub-commands (policy check, state backup...) too
    for argv in commands:
        text = _help(argv)
        assert not MARKUP.search(text), f"retry-bot {' '.join(argv)} --help:\n{text}"


def test_run_help_keeps_the_words():
    text = _help(["run"])
    assert "Both read --config (default config/bot.toml)." in text


def test_plain_text():
    assert plain_text("``a`` and :class:`~retry_bot.x.Y` then::") == "a and retry_bot.x.Y then:"
    assert plain_text("a :: b") == "a :: b"
