"""The hierarchical spread prior (issue 12, second pass), resolved kills, and the all-jobs peak/limit."""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import given, settings as hsettings, strategies as st

from retry_bot.predict import JobKey, Observation, predict
from retry_bot.predict.estimator import new_index, shrunk_spread, sibling_prior
from retry_bot.predict.settings import DEFAULT_SETTINGS
from retry_bot.simulate.metrics import peak_over_limit_all
from retry_bot.simulate.trace import AttemptAlloc

HOUR = 3600.0
GB = 1e9


def _key(version: str, package: str = "hdf5") -> JobKey:
    return JobKey.of({"package": package, "version": version, "variants": "+mpi", "compiler": "gcc@12",
                      "arch": "x86"})


def _add(idx, key, at, peak):
    idx.add(Observation(key=key, at=at, memory_peak_bytes=peak, memory_mean_bytes=peak * 0.4,
                        cpu_mean_cores=1.0, cpu_max_cores=2.0, ref="develop"))


spread = st.floats(min_value=0.0, max_value=2.0)
runs = st.floats(min_value=1.0, max_value=1e4)
weight = st.floats(min_value=0.1, max_value=100.0)


@given(spread, spread, weight)
@hsettings(max_examples=200, deadline=None)
def test_prior_shrinks_to_the_keys_own_spread_as_runs_grow(own, prior, w):
    gaps = [abs(shrunk_spread(own, n, prior, w) - own) for n in (1, 2, 5, 20, 100, 1000, 100_000)]
    assert all(b <= a + 1e-12 for a, b in zip(gaps, gaps[1:]))
    assert gaps[-1] <= abs(prior - own) * math.sqrt(w / (100_000 - 1 + w)) + 1e-9


@given(spread, runs, spread, weight)
@hsettings(max_examples=200, deadline=None)
def test_prior_never_below_the_keys_observed_spread(own, n, prior, w):
    assert shrunk_spread(own, n, prior, w) >= own


@given(spread, spread, runs, weight, st.floats(min_value=0.0, max_value=500.0), spread, weight)
@hsettings(max_examples=200, deadline=None)
def test_prior_monotone_in_the_sibling_spread(s1, s2, n, w, sib_w, farm, w_farm):
    lo, hi = sorted((s1, s2))
    p_lo = sibling_prior((lo * lo * sib_w, sib_w), farm * farm, w_farm)
    p_hi = sibling_prior((hi * hi * sib_w, sib_w), farm * farm, w_farm)
    assert p_lo <= p_hi + 1e-12
    assert shrunk_spread(0.05, n, p_lo, w) <= shrunk_spread(0.05, n, p_hi, w) + 1e-12


def test_a_key_with_few_runs_borrows_its_siblings_spread():
    """Two packages, one steady and one noisy: a new version of each, after 2 runs, gets a limit whose
    width follows its package's other versions (not one prior for the whole farm)."""
    cfg = replace(DEFAULT_SETTINGS, min_samples=2, limit_min_runs=1)  # the exact key, from its 2nd run

    def farm(noisy_sd: float):
        idx = new_index(cfg)
        t = 0.0
        import random

        rng = random.Random(7)
        for v in range(6):
            for _ in range(12):
                t += HOUR
                _add(idx, _key(f"1.{v}", "steady"), t, 4 * GB * math.exp(rng.gauss(0, 0.03)))
                _add(idx, _key(f"1.{v}", "noisy"), t, 4 * GB * math.exp(rng.gauss(0, noisy_sd)))
        for _ in range(2):
            t += HOUR
            _add(idx, _key("2.0", "steady"), t, 4 * GB)
            _add(idx, _key("2.0", "noisy"), t, 4 * GB)
        return idx, t

    idx, t = farm(0.3)
    steady = predict(idx, _key("2.0", "steady"), t + HOUR, cfg)
    noisy = predict(idx, _key("2.0", "noisy"), t + HOUR, cfg)
    assert steady.memory_limit_bytes is not None and noisy.memory_limit_bytes is not None
    assert steady.samples == noisy.samples == 2
    assert noisy.figures["spread_prior"] > 3 * steady.figures["spread_prior"]
    assert noisy.memory_limit_bytes > steady.memory_limit_bytes


def test_a_resolved_kill_stays_resolved_when_its_run_leaves_the_window():
    """A kill at L resolved by the retry's peak above L must not floor the limit again once that run
    is pushed out of the last max_samples runs (it did: 54 % of the limit volume on a tuning farm)."""
    idx = new_index(DEFAULT_SETTINGS)
    key = _key("1.14")
    for i in range(10):
        _add(idx, key, i * HOUR, 4 * GB)
    idx.add(Observation(key=key, at=10.5 * HOUR, oom_limit_bytes=5 * GB, ref="develop"))
    _add(idx, key, 11 * HOUR, 6 * GB)  # the retry: the need the kill bounded
    for i in range(DEFAULT_SETTINGS.max_samples + 6):
        _add(idx, key, (12 + i) * HOUR, 4 * GB)
    now = (12 + DEFAULT_SETTINGS.max_samples + 7) * HOUR  # within oom_memory_hours of the kill
    a = predict(idx, key, now)
    assert a.memory_limit_bytes is not None
    assert a.figures["oom_floor_bytes"] == 0
    assert a.memory_limit_bytes < 5 * GB


class _Job:
    def __init__(self, job_id, peak):
        self.job_id, self.memory_peak_bytes = job_id, peak

    def killed(self, limit):
        return limit is not None and self.memory_peak_bytes > limit


def test_peak_over_limit_all_counts_jobs_without_a_limit_at_the_default():
    jobs = [_Job(1, 2 * GB), _Job(2, 3 * GB), _Job(3, 4 * GB)]
    allocs = {1: [AttemptAlloc(1 * GB, 4 * GB, 1.0)],
              2: [AttemptAlloc(1 * GB, None, 1.0)],
              3: [AttemptAlloc(1 * GB, 3 * GB, 1.0), AttemptAlloc(1 * GB, 5 * GB, 1.0)]}  # killed, then ok
    got = peak_over_limit_all(jobs, allocs, lambda j: 48 * GB)
    assert got == (2 + 3 + 4) / (4 + 48 + 5)
    assert peak_over_limit_all(jobs[2:], allocs, lambda j: 48 * GB) == 4 / 5
