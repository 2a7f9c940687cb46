"""Issue 12, third pass: package-relative centres (a build follows its package's drift) and the loss
accounting's oracle (benchmarks/loss_breakdown.py)."""

from __future__ import annotations

import math
import random
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from retry_bot.predict import JobKey, Observation, predict
from retry_bot.predict.estimator import new_index
from retry_bot.predict.settings import DEFAULT_SETTINGS, parse_prediction_settings

HOUR = 3600.0
ROOT = Path(__file__).resolve().parents[2]


def _key(version: str, variants: str) -> JobKey:
    return JobKey.of({"package": "hdf5", "version": version, "variants": variants, "compiler": "gcc@12",
                      "arch": "x86"})


BIG, SMALL = _key("1.14", "+mpi+fortran"), _key("1.12", "~mpi")


def _drifting_farm(settings, seed: int, per_day: float, hours: int = 24 * 30):
    """One package drifting by ``per_day`` in log: ``BIG`` (2x, built every 2 h) and ``SMALL`` (every
    day or so).  Returns the index and the true centre of ``SMALL`` at the end."""
    rng = random.Random(seed)
    idx = new_index(settings)
    level = math.log(2e9)
    for h in range(0, hours, 2):
        level += per_day / 12
        x = level + math.log(2.0) + rng.gauss(0, 0.05)
        idx.add(Observation(key=BIG, at=h * HOUR, memory_peak_bytes=math.exp(x), memory_mean_bytes=0.4 * math.exp(x),
                            cpu_mean_cores=1.0, ref="develop"))
        if h % 26 == 0:
            y = level + rng.gauss(0, 0.05)
            idx.add(Observation(key=SMALL, at=h * HOUR + 1, memory_peak_bytes=math.exp(y),
                                memory_mean_bytes=0.4 * math.exp(y), cpu_mean_cores=1.0, ref="develop"))
    return idx, level, hours * HOUR


@pytest.mark.parametrize("seed", range(4))
def test_a_rarely_built_variant_follows_its_package_drift(seed):
    """``SMALL`` is built once a day while its package grows 8 % a day: its own trackers lag by days,
    its package-relative centre (the package's base, learned from every build, + its offset) does not."""
    on, truth, now = _drifting_farm(DEFAULT_SETTINGS, seed, 0.08)
    off, _, _ = _drifting_farm(replace(DEFAULT_SETTINGS, package_trackers=False), seed, 0.08)
    a_on, a_off = predict(on, SMALL, now), predict(off, SMALL, now)
    err_on = abs(math.log(a_on.figures["centre_bytes"]) - truth)
    err_off = abs(math.log(a_off.figures["centre_bytes"]) - truth)
    assert a_on.figures["package_relative"] == 1.0
    assert err_on < 0.5 * err_off
    assert a_on.figures["predictive_spread"] < a_off.figures["predictive_spread"]


@given(st.floats(min_value=18.0, max_value=24.0), st.floats(min_value=-1.5, max_value=1.5),
       st.integers(min_value=6, max_value=40))
@hsettings(max_examples=40, deadline=None)
def test_constant_builds_have_exact_package_relative_centres(level, offset, runs):
    """Two builds of a package at a constant offset, no noise: the relative candidate predicts exactly."""
    idx = new_index(DEFAULT_SETTINGS)
    for i in range(runs):
        for k, x in ((BIG, level + offset), (SMALL, level)):
            idx.add(Observation(key=k, at=i * HOUR + (k is SMALL), memory_peak_bytes=math.exp(x),
                                memory_mean_bytes=0.4 * math.exp(x), cpu_mean_cores=1.0, ref="develop"))
    for k, x in ((BIG, level + offset), (SMALL, level)):
        a = predict(idx, k, runs * HOUR)
        assert abs(math.log(a.figures["centre_bytes"]) - x) < 1e-6


def test_package_trackers_can_be_turned_off_and_are_validated():
    s, problems = parse_prediction_settings({"package_trackers": False})
    assert not problems and s.package_trackers is False
    _, problems = parse_prediction_settings({"package_trackers": "yes"})
    assert problems and "package_trackers" in problems[0].path


# ------------------------------------------------------------------ the loss accounting's oracle
sys.path.insert(0, str(ROOT / "benchmarks"))


def test_the_oracle_spends_the_kills_it_is_given_and_prices_bytes():
    import loss_breakdown

    truth = {1: (math.log(1e9), 0.2, 0.0, 0.0), 2: (math.log(10e9), 0.2, 0.0, 0.0),
             3: (math.log(4e9), 0.1, 0.3, math.log(2.0))}
    for kills in (0.01, 0.05, 0.2):
        lims, _ = loss_breakdown.oracle_limits(truth, [1, 2], kills)
        expected = sum(loss_breakdown._oracle_p(truth[j], lims[j]) for j in (1, 2))
        assert expected == pytest.approx(kills, rel=1e-3)
        # one byte price: the big job gets the thinner margin (in its own spreads)
        assert lims[2] - truth[2][0] < lims[1] - truth[1][0]
    # the bimodal job's limit covers its upper mode when kills are dear
    lims, _ = loss_breakdown.oracle_limits(truth, [1, 2, 3], 0.05)
    assert lims[3] > truth[3][0] + truth[3][3]
    assert sum(loss_breakdown._oracle_p(truth[j], lims[j]) for j in truth) <= 0.05 + 1e-6


# ------------------------------------------------------------------ the tracker's spread prior
@given(st.floats(min_value=0.0, max_value=1.0), st.floats(min_value=0.01, max_value=1.0),
       st.floats(min_value=0.01, max_value=1.0), st.integers(min_value=6, max_value=60))
@hsettings(max_examples=80, deadline=None)
def test_the_tracker_spread_leans_on_the_package_noise(jitter, noise_lo, noise_hi, runs):
    """The tracker's measured error is shrunk toward what its package's pooled noise predicts for a
    mean of its runs: monotone in that noise, between the two, and the measured error with no prior."""
    from retry_bot.predict.estimator import Tracker

    tr = Tracker(len(DEFAULT_SETTINGS.tracker_half_lives_hours))
    rng = random.Random(runs)
    for i in range(runs):
        tr.update(21.0 + jitter * rng.gauss(0, 1), i * 6 * HOUR, DEFAULT_SETTINGS)
    lo, hi = sorted((noise_lo, noise_hi))
    a = tr.centre_scale(0.1, DEFAULT_SETTINGS, None, lo)
    b = tr.centre_scale(0.1, DEFAULT_SETTINGS, None, hi)
    assert a is not None and b is not None and a[2] == b[2]
    assert a[1] <= b[1] + 1e-12
    i = a[2]
    measured = math.sqrt(tr.err[i] / tr.n)
    expected_hi = hi * math.sqrt(1.0 + 1.0 / tr.sw[i])
    # a weighted mean of the two variances (unless the floor min_spread holds it up)
    assert min(measured, expected_hi) - 1e-9 <= b[1] <= max(measured, expected_hi, DEFAULT_SETTINGS.min_spread) + 1e-9


def test_tracegen_truth_leaves_the_records_unchanged():
    import tracegen

    mix = tracegen.universe(3, "drifting", 800)
    truth: dict = {}
    assert list(tracegen.generate(3, mix)) == list(tracegen.generate(3, mix, truth=truth))
    assert sorted(truth) == list(range(1, 801))
    assert all(t[1] > 0 for t in truth.values())


def test_a_drifting_package_does_not_inflate_its_pooled_spread():
    """A package growing 15 % a day with 2 % noise: its pooled one-step errors are taken against its keys'
    best trackers (which follow the drift), not against their slowest means (which lag it by far:
    a prior of 1.27 in log before)."""
    rng = random.Random(1)
    idx = new_index(DEFAULT_SETTINGS)
    x = math.log(2e9)
    for i in range(120):
        x += 0.15 / 4
        p = math.exp(x + rng.gauss(0, 0.02))
        idx.add(Observation(key=BIG, at=i * 6 * HOUR, memory_peak_bytes=p, memory_mean_bytes=0.4 * p,
                            cpu_mean_cores=1.0, ref="develop"))
    a = predict(idx, BIG, 121 * 6 * HOUR)
    assert a.figures["spread_prior"] < 0.3
