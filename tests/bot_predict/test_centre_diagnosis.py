"""Issue 12, sixth pass: the centre-error split of benchmarks/loss_breakdown.py (``--centres``, ``--bounds``).

The split of a tracker's centre error into lag and sampling is exact only if the shadow recursions
weigh the runs exactly as :class:`retry_bot.predict.estimator.Tracker` does: a tracker fed
``centre + noise`` is then the shadow fed the centres plus the shadow fed the noise.
"""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from retry_bot.predict.estimator import Tracker
from retry_bot.predict.settings import DEFAULT_SETTINGS

HOUR = 3600.0
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))


@given(st.integers(min_value=1, max_value=60), st.integers(min_value=0, max_value=10_000))
@hsettings(max_examples=60, deadline=None)
def test_lag_plus_sampling_is_the_tracker_error(runs, seed):
    import loss_breakdown

    hls = DEFAULT_SETTINGS.tracker_half_lives_hours
    rng = random.Random(seed)
    tr, centres, noise = Tracker(len(hls)), loss_breakdown._Shadow(len(hls)), loss_breakdown._Shadow(len(hls))
    t, mu = 0.0, 21.0
    for _ in range(runs):
        t += rng.expovariate(1.0 / 30.0) * HOUR          # irregular gaps, as a CI key's runs come
        mu += rng.gauss(0.0, 0.05) + (0.4 if rng.random() < 0.05 else 0.0)   # drift and jumps
        e = rng.gauss(0.0, 0.2)
        tr.update(mu + e, t, DEFAULT_SETTINGS)
        centres.update(mu, t, hls)
        noise.update(e, t, hls)
    for i in range(len(hls)):
        assert tr.sw[i] == pytest.approx(centres.sw[i])
        assert tr.sx[i] / tr.sw[i] == pytest.approx(centres.sx[i] / centres.sw[i] + noise.sx[i] / noise.sw[i],
                                                    abs=1e-9)
        # the effective runs (Kish) of a decayed mean: between 1 and the runs it holds
        assert 1.0 - 1e-9 <= centres.sw[i] ** 2 / centres.sw2[i] <= runs + 1e-9


def test_package_types_follow_the_generator():
    import loss_breakdown
    import tracegen

    p = tracegen._Package(name="x", versions=["1"], configs=[], base=1e9, noise=0.1, mean_ratio=0.5, cpu=1.0,
                          duration=60.0, drift=0.0)
    assert loss_breakdown._package_type(p, 5.0, 10.0) == "static"
    p.regime = 0.3
    assert loss_breakdown._package_type(p, 5.0, 10.0) == "static"      # before its jump
    assert loss_breakdown._package_type(p, 10.0, 10.0) == "regime"
    p.regime, p.swing_amp = 0.0, 0.2
    assert loss_breakdown._package_type(p, 5.0, 10.0) == "swing"
    p.p_high = 0.2
    assert loss_breakdown._package_type(p, 5.0, 10.0) == "bimodal"


def test_the_bounds_replay_is_the_predictor_as_is_and_the_true_centre_narrows_limits(tmp_path):
    """``--bounds``: "as is" is the plain replay (the substitutions are undone after each run), and
    the true centres cannot leave the farm with wider limits at the same kill budget."""
    import loss_breakdown
    import tracegen

    from retry_bot.predict.sources import load_policy_and_settings
    from retry_bot.simulate.allocators import PredictorAllocator, replay_from_policy
    from retry_bot.simulate.replay import simulate
    from retry_bot.simulate.trace import load_trace

    policy, settings = load_policy_and_settings(str(ROOT / "config" / "policy.toml"))
    mix = tracegen.universe(7, "noisy", 3000)
    truth: dict = {}
    path = tmp_path / "t.jsonl"
    tracegen.write(str(path), tracegen.generate(7, mix, truth=truth))
    trace = load_trace(str(path), settings.keys)
    plain = simulate(trace, PredictorAllocator(settings, replay_from_policy(policy))).metrics
    as_is = loss_breakdown._bounded_replay(trace, policy, settings, truth, "as is", {}, math.inf)
    assert as_is == plain
    true_centre = loss_breakdown._bounded_replay(trace, policy, settings, truth, "centre", {}, math.inf)
    assert true_centre["mem_peak_over_limit"] > plain["mem_peak_over_limit"]
    again = simulate(trace, PredictorAllocator(settings, replay_from_policy(policy))).metrics
    assert again == plain
