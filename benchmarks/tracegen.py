#!/usr/bin/env python3
"""Generate Spack-CI-like job traces (``TRACE_FORMAT.md``) with their own package universe and dynamics.

    .venv/bin/python benchmarks/tracegen.py --seed 7 --out trace.jsonl.gz [--mix noisy] [--jobs 20000]
    .venv/bin/python benchmarks/tracegen.py --list-mixes

A *universe* is a seed (package names, sizes, stacks, variants, hand-made static sizes) and a
*mix* of dynamics (:class:`Mix`): noise levels, drift speed, the share of bimodal packages (a
build sometimes needs far more: tests, LTO, a parallel link), of swinging packages (periodic
changes: dependency churn), a regime change (a share of packages jump by a factor at one time:
a new compiler or version), the share of packages that appear only later (cold starts), and the
history length (jobs and days).  Every record has exactly the fields of ``TRACE_FORMAT.md`` §1 and
the memory profile of §2 (``peak_at_fraction <= 2 * min(r, 1 - r)``, ``r = mean / peak``).

Nothing here is fitted to the public trace: the sizes follow the fleet ratios TRACE_FORMAT.md
quotes (static mapping generous on average, sometimes too small).
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import math
import random
import string
import sys
from dataclasses import asdict, dataclass, replace
from typing import Iterator

GB = 1e9


@dataclass(frozen=True)
class Mix:
    """The dynamics of one universe (all shares are fractions of packages)."""

    jobs: int = 20_000
    days: float = 45.0
    packages: int = 300
    #: Per-build noise: sd of log(peak) is drawn log-uniformly in [noise_lo, noise_hi].
    noise_lo: float = 0.02
    noise_hi: float = 0.25
    #: Random walk of a package's log-peak: sd per day (drifting packages only).
    drift_per_day: float = 0.03
    drift_share: float = 0.4
    #: Bimodal packages: with probability p_high a build needs high_factor times more.
    bimodal_share: float = 0.08
    #: Swinging packages: log-peak swings by an amplitude with a period of days.
    swing_share: float = 0.08
    #: Regime change at this fraction of the trace: regime_share of packages jump.
    regime_at: float = 0.5
    regime_share: float = 0.15
    regime_sd: float = 0.35
    #: Packages that first appear somewhere in the trace (not from the start).
    cold_share: float = 0.2
    pr_share: float = 0.3


MIXES: dict[str, Mix] = {
    "base": Mix(),
    "quiet": Mix(noise_hi=0.10, drift_per_day=0.01, bimodal_share=0.03, swing_share=0.02, regime_share=0.05),
    "noisy": Mix(noise_lo=0.05, noise_hi=0.40, bimodal_share=0.12),
    "drifting": Mix(drift_per_day=0.07, drift_share=0.7, swing_share=0.15),
    "bimodal": Mix(bimodal_share=0.25, swing_share=0.05),
    "regime": Mix(regime_share=0.4, regime_sd=0.5, regime_at=0.4),
    "coldstart": Mix(cold_share=0.5, packages=450),
    "short": Mix(jobs=8_000, days=15.0, packages=200),
    "long": Mix(jobs=40_000, days=90.0, packages=350),
}

_STACKS = ("e4s", "e4s-cuda", "e4s-rocm-external", "e4s-oneapi", "e4s-neoverse_v1", "ml-linux-x86_64-cuda",
           "radiuss", "data-vis-sdk", "build_systems", "developer-tools")
_ARCH = {"e4s-neoverse_v1": "linux-ubuntu22.04-neoverse_v1"}
_COMPILERS = ("gcc@11.4.0", "gcc@12.3.0", "gcc@13.2.0", "oneapi@2024.2.1", "clang@17.0.6")
_FLAGS = ("cuda", "mpi", "rocm", "openmp", "python", "shared", "fortran", "hdf5", "tests", "ipo")
_TIERS = (("small", 0.5e9, 0.5), ("medium", 1e9, 2), ("medium", 2e9, 2), ("medium", 3e9, 4), ("medium", 4e9, 2),
          ("medium", 5e9, 8), ("medium", 6e9, 8), ("large", 7e9, 8), ("large", 8e9, 8), ("large", 9e9, 8),
          ("large", 12e9, 8), ("large", 15e9, 8), ("default", 16e9, 4), ("huge", 18e9, 12), ("huge", 24e9, 12),
          ("huge", 32e9, 12), ("huge", 48e9, 12))


@dataclass
class _Package:
    name: str
    versions: list[str]
    configs: list[tuple[str, str, str, float]]   # (variants, compiler, stack, size factor)
    base: float                                   # median peak, bytes
    noise: float
    mean_ratio: float
    cpu: float
    duration: float
    drift: float
    walk: float = 0.0
    p_high: float = 0.0
    high: float = 1.0
    swing_amp: float = 0.0
    swing_period: float = 1.0
    swing_phase: float = 0.0
    regime: float = 0.0
    start: float = 0.0
    weight: float = 1.0
    static: tuple[str, float, float] = ("default", 16e9, 4)


def _name(rng: random.Random, used: set[str]) -> str:
    while True:
        stem = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 8)))
        name = rng.choice(("", "", "", "py-", "r-", "lib")) + stem
        if name not in used:
            used.add(name)
            return name


def _static(rng: random.Random, base: float) -> tuple[str, float, float]:
    """A hand-made size: usually generous, sometimes too small, often the 16G default."""
    if base < 8e9 and rng.random() < 0.12:
        return ("default", 16e9, 4.0)
    want = base * math.exp(rng.gauss(0.3, 0.6))
    best = min(_TIERS, key=lambda t: abs(math.log(t[1] / want)))
    return best


def _universe(rng: random.Random, mix: Mix) -> list[_Package]:
    used: set[str] = set()
    out = []
    for _ in range(mix.packages):
        name = _name(rng, used)
        nver = rng.choice((1, 1, 2, 3))
        versions = [f"{rng.randint(0, 12)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}" for _ in range(nver)]
        configs = []
        for _ in range(rng.choice((1, 1, 2, 3))):
            flags = sorted(rng.sample(_FLAGS, rng.randint(0, 3)))
            variants = "".join(("+" if rng.random() < 0.6 else "~") + f for f in flags)
            variants = (variants + " build_system=" + rng.choice(("cmake", "autotools", "python_pip"))).strip()
            stack = rng.choice(_STACKS)
            configs.append((variants, rng.choice(_COMPILERS), stack, math.exp(rng.gauss(0, 0.3))))
        base = math.exp(rng.gauss(math.log(0.6e9), 1.3))
        base = min(max(base, 30e6), 70e9)
        lo, hi = math.log(mix.noise_lo), math.log(mix.noise_hi)
        p = _Package(
            name=name, versions=versions, configs=configs, base=base, noise=math.exp(rng.uniform(lo, hi)),
            mean_ratio=rng.uniform(0.2, 0.6), cpu=math.exp(rng.gauss(math.log(2.0), 0.7)),
            duration=math.exp(rng.gauss(math.log(150), 1.1)),
            drift=mix.drift_per_day if rng.random() < mix.drift_share else 0.0,
            weight=rng.paretovariate(1.2),
        )
        if rng.random() < mix.bimodal_share:
            p.p_high, p.high = rng.uniform(0.08, 0.35), rng.uniform(1.4, 2.5)
        if rng.random() < mix.swing_share:
            p.swing_amp, p.swing_period = rng.uniform(0.15, 0.5), rng.uniform(2.0, 20.0)
            p.swing_phase = rng.uniform(0, 2 * math.pi)
        if rng.random() < mix.regime_share:
            p.regime = rng.gauss(0.0, mix.regime_sd)
        if rng.random() < mix.cold_share:
            p.start = rng.uniform(0.05, 0.9)
        p.static = _static(rng, base)
        out.append(p)
    return out


def generate(seed: int, mix: Mix = Mix(), start: str = "2025-01-06T00:00:00Z",
             truth: dict[int, tuple[float, float, float, float]] | None = None) -> Iterator[dict]:
    """The trace's records, in order (``job_id`` 1..``mix.jobs``).

    ``truth``, if given, receives each job's true distribution of log(peak), what an oracle would
    know: ``job_id -> (centre, noise sd, p_high, log(high factor))`` (the centre without the upper
    mode; ``benchmarks/loss_breakdown.py``).  Filling it draws nothing from the generator: the
    records are the same with or without it.
    """
    rng = random.Random(seed)
    pkgs = _universe(rng, mix)
    t0 = dt.datetime.fromisoformat(start.replace("Z", "+00:00")).timestamp()
    span = mix.days * 86400.0
    gaps = [rng.expovariate(1.0) for _ in range(mix.jobs)]
    scale = span / sum(gaps)
    t = t0
    last_day = [0.0] * len(pkgs)
    for i in range(mix.jobs):
        t += gaps[i] * scale
        frac = (t - t0) / span
        live = [k for k, p in enumerate(pkgs) if p.start <= frac]
        k = rng.choices(live, weights=[pkgs[j].weight for j in live])[0]
        p = pkgs[k]
        day = (t - t0) / 86400.0
        if p.drift:
            p.walk += rng.gauss(0.0, p.drift * math.sqrt(max(day - last_day[k], 0.0)))
        last_day[k] = day
        # newer versions appear over time (a version is a new key: a partial cold start)
        nv = 1 + int(frac * len(p.versions) * 1.2)
        vi = min(len(p.versions) - 1, rng.randrange(min(nv, len(p.versions))))
        variants, compiler, stack, cfac = rng.choice(p.configs)
        centre = math.log(p.base * cfac) + p.walk
        log_peak = centre + rng.gauss(0.0, p.noise)   # the same sum, in the same order, as before
        if p.swing_amp:
            swing = p.swing_amp * math.sin(2 * math.pi * day / p.swing_period + p.swing_phase)
            log_peak += swing
            centre += swing
        if p.regime and frac >= mix.regime_at:
            log_peak += p.regime
            centre += p.regime
        if truth is not None:
            truth[i + 1] = (centre, p.noise, p.p_high, math.log(p.high) if p.p_high else 0.0)
        if p.p_high and rng.random() < p.p_high:
            log_peak += math.log(p.high)
        peak = int(min(max(math.exp(log_peak), 20e6), 90e9))   # every build fits the largest runner (96Gi)
        r = min(0.95, max(0.05, p.mean_ratio * math.exp(rng.gauss(0, 0.1))))
        mean = int(peak * r)
        frac_peak = round(max(0.01, min(2 * min(r, 1 - r), 1.0) * rng.uniform(0.3, 0.99)), 4)
        dur = round(p.duration * math.exp(rng.gauss(0, 0.3)) * math.exp(0.3 * (log_peak - math.log(p.base))), 1)
        cpu = round(p.cpu * math.exp(rng.gauss(0, 0.2)), 3)
        ref = "develop" if rng.random() >= mix.pr_share else f"pr-{rng.randint(1000, 60000)}"
        arch = _ARCH.get(stack, "linux-ubuntu22.04-x86_64_v3")
        h = "".join(rng.choice(string.ascii_lowercase) for _ in range(7))
        created = dt.datetime.fromtimestamp(int(t), tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        tier, sreq, scpu = p.static
        yield {
            "job_id": i + 1,
            "project": "spack/spack-packages" if rng.random() < 0.97 else "spack/spack",
            "ref": ref,
            "job_name": f"{p.name}@{p.versions[vi]} /{h} %{compiler} arch={arch} {stack.upper()}",
            "key": {"package": p.name, "version": p.versions[vi], "variants": variants, "compiler": compiler,
                    "arch": arch, "stack": stack},
            "created_at": created,
            "duration_s": max(dur, 5.0),
            "memory_peak_bytes": peak,
            "memory_mean_bytes": mean,
            "peak_at_fraction": frac_peak,
            "cpu_seconds": round(cpu * max(dur, 5.0), 1),
            "cpu_mean_cores": cpu,
            "cpu_max_cores": round(cpu * rng.uniform(1.2, 3.0), 3),
            "static_request": {"memory_request_bytes": int(sreq), "cpu_request_cores": float(scpu), "tier": tier},
        }


def write(path: str, records: Iterator[dict]) -> int:
    n = 0
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as fh:  # type: ignore[operator]
        for r in records:
            fh.write(json.dumps(r, separators=(",", ":")) + "\n")
            n += 1
    return n


def random_mix(seed: int) -> Mix:
    """A mix whose every parameter is drawn from its plausible range (seeded)."""
    rng = random.Random(f"mix:{seed}")
    return Mix(
        jobs=rng.randint(8_000, 40_000), days=rng.uniform(15.0, 90.0), packages=rng.randint(150, 450),
        noise_lo=rng.uniform(0.01, 0.05), noise_hi=rng.uniform(0.08, 0.35),
        drift_per_day=rng.uniform(0.0, 0.08), drift_share=rng.uniform(0.1, 0.8),
        bimodal_share=rng.uniform(0.0, 0.25), swing_share=rng.uniform(0.0, 0.15),
        regime_at=rng.uniform(0.2, 0.8), regime_share=rng.uniform(0.0, 0.4), regime_sd=rng.uniform(0.1, 0.5),
        cold_share=rng.uniform(0.05, 0.5), pr_share=rng.uniform(0.1, 0.4),
    )


def universe(seed: int, mix_name: str, jobs: int | None = None) -> Mix:
    """The mix ``mix_name`` (``random``: :func:`random_mix` of ``seed``), optionally with another
    job count (days scaled alike)."""
    mix = random_mix(seed) if mix_name == "random" else MIXES[mix_name]
    if jobs:
        mix = replace(mix, jobs=jobs, days=mix.days * jobs / mix.jobs)
    return mix


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mix", default="base", choices=sorted(MIXES) + ["random"])
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--list-mixes", action="store_true")
    args = ap.parse_args(argv)
    if args.list_mixes:
        for name, mix in MIXES.items():
            print(name, json.dumps(asdict(mix)))
        return 0
    if not args.out:
        ap.error("--out is required")
    n = write(args.out, generate(args.seed, universe(args.seed, args.mix, args.jobs)))
    print(f"wrote {n:,} jobs to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
