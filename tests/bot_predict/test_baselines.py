"""The reference allocators follow their sources: spack-gantry (peers.md §2.3-2.5) and VPA's recommender (§6)."""

from __future__ import annotations

import math

import pytest

from retry_bot.predict.estimator import StaticSize
from retry_bot.predict.keys import JobKey
from retry_bot.simulate.allocators import PolicyReplay
from retry_bot.simulate.baselines import (
    GANTRY_STEPS, DecayingHistogram, GantryAllocator, GantryMatch, VpaAllocator, gantry_variants,
)
from retry_bot.simulate.trace import AttemptAlloc, TraceJob

GB = 1_000_000_000
MIB = 1024 * 1024
T0 = 1_736_000_000.0


def _cap(nbytes: int) -> PolicyReplay:
    """A replay whose memory ceiling is ``nbytes`` (``resize.max_memory``)."""
    from retry_bot.policy import parse_policy

    return PolicyReplay(parse_policy(f'version = 1\n[resize]\nmax_memory = "{nbytes}"\n'))


def job(jid: int, *, pkg: str = "hdf5", version: str = "1.14", variants: str = "+mpi~cuda build_system=cmake",
        compiler: str = "gcc@12.3.0", ref: str = "develop", peak: float = 4 * GB, mean: float = 2 * GB,
        cpu: float = 2.0, t: float | None = None, duration: float = 600.0, static: float | None = 8 * GB) -> TraceJob:
    key = JobKey.of({"package": pkg, "version": version, "variants": variants, "compiler": compiler,
                     "arch": "linux-ubuntu22.04-x86_64_v3"})
    return TraceJob(job_id=jid, t=T0 + jid * 3600 if t is None else t, project="spack/spack-packages", ref=ref,
                    job_name=f"{pkg}@{version} /abcdefg %{compiler}", key=key,
                    static=StaticSize(memory_request_bytes=static, cpu_request_cores=4.0),
                    duration_s=duration, memory_peak_bytes=peak, memory_mean_bytes=mean, peak_at_fraction=0.5,
                    cpu_mean_cores=cpu, cpu_max_cores=cpu * 1.5)


# ------------------------------------------------------------------ gantry
def test_gantry_variant_parsing_and_expensive_filter():
    assert gantry_variants("+cuda+mpi~python build_system=cmake cuda_arch=80,90") == {
        "cuda": True, "mpi": True, "python": False, "build_system": "cmake", "cuda_arch": ("80", "90")}
    q = GantryMatch.of(job(1, variants="+mpi~cuda build_system=cmake"))
    same_expensive = GantryMatch.of(job(2, variants="+mpi~cuda build_system=autotools +shared"))
    other = GantryMatch.of(job(3, variants="+mpi+cuda build_system=cmake"))
    string_hdf5 = GantryMatch.of(job(4, variants="+mpi~cuda hdf5=none"))
    filtered = 1  # step 2: same fields, expensive-variants filter
    assert not GANTRY_STEPS[filtered][1]
    assert q.step_key(filtered, True) == same_expensive.step_key(filtered, False)
    assert q.step_key(filtered, True) != other.step_key(filtered, False)
    # a string value counts as "not set" in a query, and such a sample is never NULL: no match either way
    assert string_hdf5.step_key(filtered, True) == q.step_key(filtered, True)
    assert string_hdf5.step_key(filtered, False) != q.step_key(filtered, True)
    assert q.step_key(0, True) != same_expensive.step_key(0, False)  # step 1: exact variants


def test_gantry_sample_is_the_last_five_develop_runs_accepted_with_four():
    g = GantryAllocator()
    q = job(100)
    assert g.first(q) == AttemptAlloc(2 * GB, 5 * GB, 1.0)          # no history: gantry's defaults
    for i in range(3):
        g.observe_success(job(i + 1, peak=(i + 1) * GB, mean=GB), T0)
    g.observe_success(job(10, ref="pr-7", peak=50 * GB), T0)        # PR builds never train
    assert g.first(q) == AttemptAlloc(2 * GB, 5 * GB, 1.0)          # three runs: not a sample
    for i in range(3, 7):
        g.observe_success(job(i + 1, peak=(i + 1) * GB, mean=(i + 1) * GB, cpu=float(i + 1)), T0)
    step, sample = g.sample(q)
    assert step == 0 and [j.job_id for j in sample] == [3, 4, 5, 6, 7]   # the last five
    a = g.first(q)
    assert a.memory_request_bytes == (1 + 4 + 5 + 6 + 7) * GB // 5        # mean of the means, no multiplier
    assert a.memory_limit_bytes == int(1.2 * 7 * GB)                        # max peak x 1.2
    assert a.cpu_request_cores == pytest.approx((2 + 4 + 5 + 6 + 7) / 5)    # mean of the CPU means


def test_gantry_fallback_chain_order():
    g = GantryAllocator()
    # four runs with other cheap variants but the same expensive ones: step 2 (filter), not step 3
    for i in range(4):
        g.observe_success(job(i + 1, variants="+mpi~cuda build_system=autotools", peak=3 * GB), T0)
    # four runs of another version with the exact variants: step 3 would match, but step 2 comes first
    for i in range(4):
        g.observe_success(job(i + 10, version="1.12", peak=9 * GB), T0)
    step, sample = g.sample(job(100))
    assert GANTRY_STEPS[step] == (("package", "version", "compiler_name", "compiler_version"), False)
    assert {j.memory_peak_bytes for j in sample} == {3 * GB}
    # another compiler version: steps 5.. (compiler name only) find the runs
    step, _ = g.sample(job(101, compiler="gcc@13.1.0"))
    assert GANTRY_STEPS[step][0] == ("package", "version", "compiler_name")


def test_gantry_oom_rule_three_bumps_of_1_2():
    g = GantryAllocator(_cap(100 * GB))
    j = job(1, peak=50 * GB)
    atts = [g.first(j)]
    while (nxt := g.retry(j, atts)) is not None:
        atts.append(nxt)
    assert [a.memory_limit_bytes for a in atts] == [5 * GB, 6 * GB, 7_200_000_000, 8_640_000_000]
    assert atts[1].memory_request_bytes == 5 * GB // 2     # the killed attempt's mean use (linear ramp to L)


# ------------------------------------------------------------------ VPA
def test_decaying_histogram_buckets_percentile_and_half_life():
    h = DecayingHistogram(1e7, 1e12, half_life=24 * 3600)
    assert h.start(0) == 0 and h.start(1) == pytest.approx(1e7) and h.start(2) == pytest.approx(1e7 + 1.05e7)
    h.add(1 * GB, 1.0, T0)
    h.add(4 * GB, 1.0, T0 + 24 * 3600)            # a day newer: weighs twice as much
    b = h.bucket(4 * GB)
    assert h.start(b) <= 4 * GB < h.start(b + 1)
    # weights 1 (1 GB) and 2 (4 GB): the cumulative weight reaches 0.3 x 3 in the first bucket,
    # 0.34 x 3 only in the second; a percentile is the *end* of that bucket
    assert h.percentile(0.3) == pytest.approx(h.start(h.bucket(1 * GB) + 1))
    assert h.percentile(0.34) == pytest.approx(h.start(b + 1))
    assert h.weights[b] == pytest.approx(2 * h.weights[h.bucket(1 * GB)])


def test_vpa_target_upper_bound_confidence_and_cold_start():
    v = VpaAllocator(_cap(1000 * GB))
    q = job(1000, t=T0 + 10 * 86400)
    cold = v.first(q)
    assert cold == AttemptAlloc(8 * GB, None, 4.0)                        # no history: static size, no limit
    for i in range(5):                                                  # 5 runs x 600 s on one day
        v.observe_success(job(i + 1, peak=4 * GB, duration=600.0, t=T0 + i * 3600), T0 + i * 3600 + 600)
    a = v.first(q)
    agg = v.aggregate(q)
    p90 = agg.memory.percentile(0.9)
    assert agg.memory.start(agg.memory.bucket(4 * GB)) <= 4 * GB < p90
    assert a.memory_request_bytes == math.ceil(p90 * 1.15)
    confidence = min(10.0, 5 * 10 / 1440)                              # samples: one per running minute
    assert a.memory_limit_bytes == math.ceil(agg.memory.percentile(0.95) * 1.15 * (1 + 1 / confidence))
    assert a.cpu_request_cores == pytest.approx(agg.cpu.percentile(0.9) * 1.15)


def test_vpa_record_oom_bumps_the_next_attempt():
    v = VpaAllocator(_cap(1000 * GB))
    for i in range(4):
        v.observe_success(job(i + 1, peak=1 * GB, duration=86400.0, t=T0 + i * 60), T0 + i * 60 + 86400)
    j = job(50, peak=30 * GB, t=T0 + 5 * 86400)
    first = v.first(j)
    assert first.memory_limit_bytes is not None and first.memory_limit_bytes < 30 * GB
    second = v.retry(j, [first])
    bump = max(first.memory_limit_bytes * 1.2, first.memory_limit_bytes + 100 * MIB)
    assert second.memory_limit_bytes > first.memory_limit_bytes and second.memory_request_bytes >= 1.15 * bump * 0.95
    assert VpaAllocator.oom_sample(100 * MIB) == 200 * MIB and VpaAllocator.oom_sample(10 * GB) == 12 * GB
    atts = [first, second]
    while (nxt := v.retry(j, atts)) is not None:
        atts.append(nxt)
    assert len(atts) == 4                                               # three retries
    # a kill observed later is remembered by the aggregate (RecordOOM sample)
    v.observe_kill(j, first.memory_limit_bytes, j.t + 100)
    assert v.first(job(60, t=j.t + 200)).memory_limit_bytes >= second.memory_limit_bytes * 0.95
