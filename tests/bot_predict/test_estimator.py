"""Estimator properties: limits above requests, OOM evidence never lowers a limit, clamps, determinism
(the same predictions in fresh interpreters with other hash seeds)."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace

from hypothesis import given, settings as hsettings, strategies as st

from retry_bot.predict import Clamp, JobKey, Observation, StaticSize, predict, predict_for_retry
from retry_bot.predict.estimator import new_index
from retry_bot.predict.settings import DEFAULT_SETTINGS
from tests.common.fresh_interpreter import as_json, in_fresh_interpreters

KEY = JobKey.of({"package": "hdf5", "version": "1.14", "variants": "+mpi", "compiler": "gcc@12", "arch": "x86"})
OTHER = JobKey.of({"package": "hdf5", "version": "1.12", "variants": "+mpi", "compiler": "gcc@12", "arch": "x86"})
HOUR = 3600.0

peaks = st.lists(st.floats(min_value=5e7, max_value=6e10), min_size=0, max_size=30)
kills = st.lists(st.floats(min_value=5e7, max_value=6e10), min_size=1, max_size=5)


def _index(values, key=KEY, start=0.0):
    idx = new_index(DEFAULT_SETTINGS)
    for i, p in enumerate(values):
        idx.add(Observation(key=key, at=start + i * HOUR, memory_peak_bytes=p, memory_mean_bytes=p * 0.4,
                            cpu_mean_cores=1.0 + (i % 3), cpu_max_cores=4.0, ref="develop"))
    return idx


@given(peaks, st.one_of(st.none(), st.floats(min_value=1e8, max_value=1e11)))
@hsettings(max_examples=60, deadline=None)
def test_limit_at_least_request_and_within_clamp(values, cap):
    idx = _index(values)
    clamp = Clamp(max_memory_bytes=cap, max_cpu_cores=8.0)
    a = predict(idx, KEY, 100 * HOUR, DEFAULT_SETTINGS, StaticSize(4e9, 2.0), clamp)
    assert a.memory_limit_bytes is None or a.memory_limit_bytes >= a.memory_request_bytes > 0
    if cap is not None:
        assert a.memory_request_bytes <= cap
        assert a.memory_limit_bytes is None or a.memory_limit_bytes <= cap
    assert 0 < a.cpu_request_cores <= 8.0
    assert a.cpu_limit_cores is None or a.cpu_limit_cores >= a.cpu_request_cores


@given(peaks, kills)
@hsettings(max_examples=60, deadline=None)
def test_more_oom_evidence_never_lowers_the_next_limit(values, killed_at):
    idx = _index(values)
    now = 100 * HOUR
    def limit():  # no limit (None) is the largest limit of all
        got = predict(idx, KEY, now).memory_limit_bytes
        return math.inf if got is None else got

    before = limit()
    for i, lim in enumerate(killed_at):
        idx.add(Observation(key=KEY, at=50 * HOUR + i, oom_limit_bytes=lim, ref="develop"))
        after = limit()
        assert after >= before
        # a kill says "need > L": the next limit is above it
        assert after > lim
        before = after


@given(peaks, kills)
@hsettings(max_examples=40, deadline=None)
def test_retry_view_grows_with_each_kill_and_exceeds_the_killed_limit(values, killed_at):
    idx = _index(values)
    prev = 0
    seq = sorted(killed_at)
    for k in range(1, len(seq) + 1):
        a = predict_for_retry(predict(idx, KEY, 100 * HOUR), seq[:k])
        assert a.memory_limit_bytes > seq[k - 1]
        assert a.memory_limit_bytes >= prev
        prev = a.memory_limit_bytes


def predictions_over_a_mixed_history() -> list[dict]:
    """Predictions after a seeded history of many keys: fallback levels, untrusted refs, OOM kills, static sizes."""
    rng = random.Random(20261124)
    idx = new_index(DEFAULT_SETTINGS)
    packages = ["hdf5", "zlib", "openmpi", "py-numpy", "llvm", "gcc"]
    keys = [JobKey.of({"package": p, "version": v, "variants": var, "compiler": c, "arch": "x86_64"})
            for p in packages for v in ("1.0", "2.1") for var in ("+mpi", "~mpi") for c in ("gcc@12", "clang@16")]
    for i in range(1500):
        key = rng.choice(keys)
        base = 2e8 * (1 + packages.index(key.get("package"))) * (1.5 if key.get("variants") == "+mpi" else 1.0)
        at = i * 600.0
        if rng.random() < 0.05:
            idx.add(Observation(key=key, at=at, oom_limit_bytes=base * rng.uniform(0.5, 1.0), ref="develop"))
            continue
        peak = base * rng.lognormvariate(0, 0.2)
        trusted = rng.random() < 0.9
        idx.add(Observation(key=key, at=at, memory_peak_bytes=peak, memory_mean_bytes=peak * rng.uniform(0.3, 0.7),
                            cpu_mean_cores=rng.uniform(0.5, 6), cpu_max_cores=8.0, duration_s=rng.uniform(60, 3600),
                            ref="develop" if trusted else f"pr-{rng.randrange(20)}",
                            static_memory_bytes=rng.choice([None, 4e9, 8e9])), trusted=trusted)
    now = 1500 * 600.0
    unseen = JobKey.of({"package": "hdf5", "version": "9.9", "variants": "+mpi", "compiler": "gcc@12", "arch": "x86_64"})
    out = [predict(idx, k, now, static=StaticSize(4e9, 2.0)).as_dict() for k in keys + [unseen]]
    out += [predict(idx, k, now, ref="pr-3", protected=False).as_dict() for k in keys]   # an untrusted ref
    out += [predict_for_retry(predict(idx, k, now), [3e9, 4e9]).as_dict() for k in keys[:8]]
    return out


def test_predictions_are_the_same_in_fresh_interpreters_with_other_hash_seeds():
    """Key levels, fallbacks, calibration and ref-scoped evidence must not depend on set/dict order
    (PYTHONHASHSEED) or on anything but the history."""
    here = as_json(predictions_over_a_mixed_history())
    assert len({json.dumps(a["memory_limit_bytes"]) for a in json.loads(here)}) > 10   # not all the same answer
    for other in in_fresh_interpreters(predictions_over_a_mixed_history):
        assert other == here


def test_no_history_falls_back_to_static_then_defaults():
    idx = new_index(DEFAULT_SETTINGS)
    a = predict(idx, KEY, 0.0, static=StaticSize(4e9, 2.0))
    assert (a.source, a.memory_request_bytes, a.cpu_request_cores) == ("static", 4_000_000_000, 2.0)
    assert a.memory_limit_bytes is None                      # cold_limit = "none": as without a predictor
    f = predict(idx, KEY, 0.0, replace(DEFAULT_SETTINGS, cold_limit="factor"), static=StaticSize(4e9, 2.0))
    assert f.memory_limit_bytes == int(4e9 * DEFAULT_SETTINGS.cold_limit_factor)
    d = predict(idx, KEY, 0.0)
    assert d.source == "default" and d.memory_request_bytes == DEFAULT_SETTINGS.default_memory_request_bytes


def test_request_is_typical_use_and_limit_covers_the_peaks():
    values = [2e9 * (1 + 0.05 * math.sin(i)) for i in range(20)]
    a = predict(_index(values), KEY, 30 * HOUR)
    assert a.level == 0 and a.samples == 20
    assert 0.7e9 < a.memory_request_bytes < 1.0e9            # ~0.4 x peak x 1.1
    assert max(values) < a.memory_limit_bytes < 1.6 * max(values)


def test_short_or_noisy_history_widens_the_margin():
    steady = [2e9] * 20
    noisy = [2e9 * f for f in (0.7, 1.3) * 10]
    a = predict(_index(steady), KEY, 30 * HOUR)
    b = predict(_index(steady[:DEFAULT_SETTINGS.limit_min_runs]), KEY, 30 * HOUR)
    c = predict(_index(noisy), KEY, 30 * HOUR)
    assert b.memory_limit_bytes > a.memory_limit_bytes
    # shorter still: too few runs to know the key's spread, no limit (as without history)
    assert predict(_index(steady[:DEFAULT_SETTINGS.limit_min_runs - 1]), KEY, 30 * HOUR).memory_limit_bytes is None
    assert c.memory_limit_bytes / 2.6e9 > a.memory_limit_bytes / 2e9


def test_recent_runs_weigh_more():
    old = [1e9] * 10
    idx = _index(old)
    for i in range(5):
        idx.add(Observation(key=KEY, at=2000 * HOUR + i * HOUR, memory_peak_bytes=3e9, memory_mean_bytes=1.2e9,
                            cpu_mean_cores=1.0, ref="develop"))
    a = predict(idx, KEY, 2010 * HOUR)
    assert a.memory_request_bytes > 1.0e9     # dominated by the recent 1.2 GB means


def test_fallback_to_a_less_specific_level():
    idx = _index([3e9] * 10, key=OTHER)
    a = predict(idx, KEY, 20 * HOUR)
    assert a.level is not None and a.level > 0 and "version" not in a.key


def test_untrusted_runs_never_change_a_trusted_allocation_but_raise_their_own_ref():
    idx = _index([2e9] * 10)
    before = predict(idx, KEY, 20 * HOUR, ref="develop")
    for i in range(5):
        idx.add(Observation(key=KEY, at=12 * HOUR + i, memory_peak_bytes=9e9, memory_mean_bytes=4e9,
                            ref="pr-7"), trusted=False)
        idx.add(Observation(key=KEY, at=12 * HOUR + i, memory_peak_bytes=1e8, memory_mean_bytes=1e7,
                            ref="pr-8"), trusted=False)
    assert predict(idx, KEY, 20 * HOUR, ref="develop") == before
    assert predict(idx, KEY, 20 * HOUR, ref="pr-7").memory_limit_bytes > 9e9       # its own evidence
    assert predict(idx, KEY, 20 * HOUR, ref="pr-8").memory_limit_bytes >= before.memory_limit_bytes * 0.99
