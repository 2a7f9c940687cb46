"""Shared helpers: small synthetic traces in the benchmark format, and signed usage records."""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

import pytest

PACKAGES = {  # name: (typical peak GB, static request GB)
    "alpha": (1.0, 4.0), "beta": (3.0, 16.0), "gamma": (0.3, 0.5), "delta": (8.0, 16.0), "eps": (0.8, 2.0),
}


def make_records(n: int = 300, seed: int = 1, start: float = 1_736_000_000.0) -> list[dict]:
    """A trace in TRACE_FORMAT.md's shape: jobs every ~10 minutes, ~30 % on PR refs."""
    rng = random.Random(seed)
    out = []
    t = start
    names = sorted(PACKAGES)
    for i in range(n):
        t += rng.uniform(60, 1200)
        pkg = rng.choice(names)
        base, static = PACKAGES[pkg]
        peak = base * 1e9 * rng.lognormvariate(0, 0.15) * (2.2 if rng.random() < 0.03 else 1.0)
        r = rng.uniform(0.3, 0.45)
        mean = peak * r
        frac = min(0.99, 2 * min(r, 1 - r) * rng.uniform(0.5, 1.0))
        dur = rng.uniform(100, 3000)
        cpu = rng.uniform(0.5, 4)
        ref = "develop" if rng.random() < 0.7 else f"pr-{rng.randint(1, 30)}"
        created = dt.datetime.fromtimestamp(int(t), tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        out.append({
            "job_id": i + 1, "project": "spack/spack-packages", "ref": ref,
            "job_name": f"{pkg}@1.0 /abcdefg %gcc@12.3.0 arch=linux-ubuntu22.04-x86_64_v3 E4S",
            "key": {"package": pkg, "version": "1.0", "variants": "+mpi", "compiler": "gcc@12.3.0",
                    "arch": "linux-ubuntu22.04-x86_64_v3", "stack": "e4s"},
            "created_at": created, "duration_s": round(dur, 1), "memory_peak_bytes": int(peak),
            "memory_mean_bytes": int(mean), "peak_at_fraction": round(frac, 4),
            "cpu_seconds": round(cpu * dur, 1), "cpu_mean_cores": round(cpu, 3), "cpu_max_cores": round(cpu * 1.5, 3),
            "static_request": {"memory_request_bytes": int(static * 1e9), "cpu_request_cores": 2.0, "tier": "medium"},
        })
    return out


def write_trace(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture
def trace_records() -> list[dict]:
    return make_records()


@pytest.fixture
def trace_file(tmp_path: Path, trace_records: list[dict]) -> Path:
    return write_trace(tmp_path / "trace.jsonl", trace_records)


SIGNING_KEY = b"test-signing-key-0123456789"


def signed_record(job_id: int, peak: int = 2_000_000_000, *, name: str = "alpha@1.0 /abcdefg %gcc@12.3.0",
                  ref: str = "develop", protected: bool = True, oom: bool = False, key: bytes = SIGNING_KEY,
                  finished: str = "2025-01-06T01:00:00Z", variables: dict | None = None) -> dict:
    from runner_wrapper.record import AppliedLimits, HostInfo, JobIdentity, Usage, UsageRecord, sign_record

    rec = UsageRecord(
        job=JobIdentity(id=job_id, project_id=2, project_path="spack/spack-packages", name=name, ref=ref,
                        protected=protected, variables=variables or {"SPACK_JOB_SPEC_PKG_NAME": name.split("@")[0]}),
        host=HostInfo(hostname="runner-1"),
        limits=AppliedLimits(memory_limit_bytes=peak * 2, memory_request_bytes=peak),
        usage=Usage(wall_seconds=300.0, memory_peak_bytes=peak, memory_mean_bytes=peak // 3,
                    cpu_mean_cores=1.5, cpu_max_cores=3.0, oom_kills=1 if oom else 0),
        started_at="2025-01-06T00:55:00Z", finished_at=finished, exit_code=137 if oom else 0,
    )
    return sign_record(rec.to_dict(), key, "default")
