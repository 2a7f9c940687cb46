"""Quantity and number messages, and the shipped policy's behaviour out of the box (issue 13)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retry_bot.cli import main
from retry_bot.policy import parse_policy
from retry_bot.problems import ConfigError

REPO = Path(__file__).resolve().parents[2]


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_policy(text, "p.toml")
    return [str(p) for p in info.value.problems]


@pytest.mark.parametrize("line", ["max_memory = 12", 'max_memory = "12"', "granularity = 256",
                                  "min_bump = 512"])
def test_bare_small_integer_memory_is_refused_as_a_missing_unit(line):
    (msg,) = problems(f"[resize]\n{line}\n")
    assert "has no unit" in msg and "bytes" in msg and "Gi" in msg


def test_memory_with_a_unit_or_as_whole_bytes_is_accepted():
    p = parse_policy('[resize]\nmax_memory = "12Gi"\ngranularity = 268435456\nmin_bump = 0\n')
    assert p.resize.max_memory == 12 * 2**30 and p.resize.granularity == 2**28 and p.resize.min_bump == 0
    (msg,) = problems('[[runner_classes]]\nname = "s"\ntags = ["s"]\nmax_memory = 8\nmax_cpus = "2"\n')
    assert "runner_classes[0].max_memory" in msg and "has no unit" in msg


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_non_finite_ratio_says_so(value):
    (msg,) = problems(f"[resize]\nratio = {value}\n")
    assert "not a number" not in msg  # the old message: "must be a number, not a number"
    assert f"must be a finite number, not {value.lstrip('-') if value != '-inf' else value}" in msg


def test_shipped_policy_resizes_a_cc1plus_oom_without_any_figures(tmp_path, capsys):
    log = tmp_path / "job.log"
    log.write_text("g++: fatal error: Killed signal terminated program cc1plus\ncompilation terminated.\n"
                   "make: *** [all] Error 2\nERROR: Job failed: exit code 2\n")
    rc = main(["--log-format", "json", "classify", "--trace", str(log), "--policy",
               str(REPO / "config" / "policy.toml"), "--format", "json"])
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["family"], d["action"]) == ("oom", "resize")
    assert d["decision"]["variables"] == {"KUBERNETES_MEMORY_LIMIT": "96Gi"}
