"""The policy's ``[storm]`` table: validated like every other key, shown by ``policy show``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from retry_bot.policy import default_policy, load_policy, parse_policy, policy_from_dict, policy_to_dict
from retry_bot.policy.model import StormRule
from retry_bot.problems import ConfigError

REPO = Path(__file__).resolve().parents[2]


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_policy(textwrap.dedent(text), source="p.toml")
    return [f"{p.path}: {p.message}" for p in info.value.problems]


def test_storm_table_is_read():
    p = parse_policy(textwrap.dedent("""
        version = 1
        [storm]
        families = ["infrastructure", "unknown"]
        window = "10m"
        trip_failures = 40
        probes = 3
        probe_interval = "90s"
        release_successes = 2
        release_per_minute = 50
        """))
    assert p.storm == StormRule(window=600.0, trip_failures=40, probes=3, probe_interval=90.0, release_successes=2,
                                release_per_minute=50, families=("infrastructure", "unknown"))


def test_no_table_or_enabled_false_means_no_brake():
    assert parse_policy("version = 1\n").storm is None
    assert parse_policy("version = 1\n[storm]\nenabled = false\ntrip_failures = 9\n").storm is None
    assert parse_policy("version = 1\n[storm]\n").storm == StormRule()


def test_the_shipped_policy_brakes_infrastructure_storms():
    p = load_policy(REPO / "config" / "policy.toml")
    assert p.storm is not None and p.storm.families == ("infrastructure",)
    assert p == default_policy()


def test_every_bad_storm_key_is_a_problem_with_its_path():
    found = problems("""
        version = 1
        [storm]
        enabeld = true
        families = ["infra"]
        window = "10s"
        trip_failures = 1
        probes = 0
        probe_interval = "soon"
        release_successes = 1.5
        release_per_minute = -1
        """)
    text = "\n".join(found)
    assert "storm.enabeld: unknown key; did you mean 'enabled'?" in text
    assert "storm.families: unknown family 'infra' (one of oom, timeout, infrastructure," in text
    assert "storm.window: '10s' is out of range" in text
    assert "storm.trip_failures: 1 is out of range" in text
    assert "storm.probes: 0 is out of range" in text
    assert any(line.startswith("storm.probe_interval:") for line in found)
    assert "storm.release_successes: must be an integer" in text
    assert "storm.release_per_minute: -1 is out of range" in text
    assert any(x.startswith("storm: must be a table") for x in problems("version = 1\nstorm = 3\n"))
    assert any(x.startswith("storm.families:") for x in problems("version = 1\n[storm]\nfamilies = []\n"))


def test_policy_show_round_trips_the_storm_table():
    p = parse_policy("version = 1\n[storm]\nwindow = \"7m\"\ntrip_failures = 12\n")
    d = policy_to_dict(p)
    assert d["storm"]["window"] == "7m" and d["storm"]["trip_failures"] == 12
    assert policy_from_dict(d) == p
    assert "storm" not in policy_to_dict(parse_policy("version = 1\n"))
