"""Self-calibrating limits: the policy's OOM budget is met by feedback, and the trace generator."""

from __future__ import annotations

import json
import random
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from retry_bot.predict.history import Calibration
from retry_bot.predict.settings import DEFAULT_SETTINGS, parse_prediction_settings
from retry_bot.simulate.allocators import PolicyReplay, make_allocator
from retry_bot.simulate.replay import simulate
from retry_bot.simulate.trace import load_trace

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import tracegen  # noqa: E402

FIELDS = {"job_id", "project", "ref", "job_name", "key", "created_at", "duration_s", "memory_peak_bytes",
          "memory_mean_bytes", "peak_at_fraction", "cpu_seconds", "cpu_mean_cores", "cpu_max_cores",
          "static_request"}


def test_feedback_raises_the_price_while_kills_exceed_the_budget_and_lowers_it_below():
    rng = random.Random(1)
    for rate, direction in ((0.05, 1), (0.0, -1)):
        cal = Calibration()
        for _ in range(2000):
            cal.note_outcome(rng.random() < rate, 0.01, 0.08)
        assert cal.price_log * direction > 0.5


def test_the_price_settles_where_kills_come_at_the_budgeted_rate():
    """A toy farm: P(kill) = 0.05 / price.  The feedback must find price ~ 5 (1 % kills)."""
    import math

    rng = random.Random(2)
    cal = Calibration()
    kills = 0
    for i in range(60_000):
        killed = rng.random() < 0.05 / math.exp(cal.price_log)
        cal.note_outcome(killed, 0.01, 0.08)
        kills += killed if i >= 30_000 else 0
    assert 0.007 < kills / 30_000 < 0.013


def test_budget_is_a_validated_policy_key():
    s, problems = parse_prediction_settings({"oom_budget_per_100": 0.5})
    assert not problems and s.oom_budget_per_100 == 0.5
    _, problems = parse_prediction_settings({"oom_budget_per_100": -1})
    assert problems and "oom_budget_per_100" in problems[0].path


def test_generated_traces_follow_the_trace_format(tmp_path):
    path = tmp_path / "t.jsonl"
    tracegen.write(str(path), tracegen.generate(5, tracegen.universe(5, "random", 1500)))
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(recs) == 1500 and all(set(r) == FIELDS for r in recs)
    assert [r["job_id"] for r in recs] == list(range(1, 1501))
    assert all(a["created_at"] <= b["created_at"] for a, b in zip(recs, recs[1:]))
    for r in recs:
        ratio = r["memory_mean_bytes"] / r["memory_peak_bytes"]
        assert 0 < r["peak_at_fraction"] <= 2 * min(ratio, 1 - ratio) + 1e-4
    assert len(load_trace(str(path))) == 1500
    names_a = {r["key"]["package"] for r in recs}
    tracegen.write(str(tmp_path / "o.jsonl"), tracegen.generate(6, tracegen.universe(6, "base", 1500)))
    names_b = {json.loads(x)["key"]["package"] for x in (tmp_path / "o.jsonl").read_text().splitlines()}
    assert len(names_a & names_b) < 0.1 * len(names_a)   # another universe


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11])
def test_a_tighter_budget_gives_fewer_kills_on_a_generated_farm(tmp_path, seed):
    path = tmp_path / "t.jsonl"
    tracegen.write(str(path), tracegen.generate(seed, tracegen.universe(seed, "noisy", 6000)))
    jobs = load_trace(str(path))
    kills = {}
    for budget in (0.3, 3.0):
        st = replace(DEFAULT_SETTINGS, oom_budget_per_100=budget)
        kills[budget] = simulate(jobs, make_allocator(None, st, PolicyReplay())).metrics["oom_kills_per_100_jobs"]
    assert kills[0.3] < kills[3.0]
    assert kills[3.0] > 1.0 and kills[0.3] < 1.0
