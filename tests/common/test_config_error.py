"""One ``ConfigError`` for ``wrapper.toml`` and the bot's files (issue 14: there were two classes)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import runner_wrapper.config as wrapper_config
from retry_bot.problems import ConfigError, Problem


def test_the_bot_and_the_wrapper_raise_the_same_class() -> None:
    assert wrapper_config.ConfigError is ConfigError


def test_a_wrapper_toml_problem_is_caught_where_the_bot_catches_config_errors() -> None:
    with pytest.raises(ConfigError) as err:
        wrapper_config.config_from_mapping({"cgroup": {"backend": "v3"}, "sampler": "fast"}, "wrapper.toml")
    assert len(err.value.problems) == 2 and all(isinstance(p, str) for p in err.value.problems)
    assert str(err.value) == "\n".join(err.value.problems)


def test_every_problem_is_listed_one_a_line() -> None:
    exc = ConfigError([Problem("resize.ratio", "must be > 1", 4, "policy.toml"), Problem("", "not valid TOML")])
    assert str(exc) == "policy.toml:4: resize.ratio: must be > 1\nnot valid TOML"
    assert exc.problems[0].line == 4
    assert ConfigError("wrapper.toml: configuration file not found").problems == [
        "wrapper.toml: configuration file not found"]
    assert str(ConfigError([])) == "invalid configuration"


def test_the_shared_error_costs_the_wrapper_no_import() -> None:
    """``runner_wrapper.problems`` imports nothing (not even :mod:`typing`)."""
    code = ("import sys; before = set(sys.modules); import runner_wrapper.problems; "
            "print(sorted(set(sys.modules) - before - {'runner_wrapper', 'runner_wrapper.problems'}))")
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
