"""Usage records for the tests, built with the shared record dataclasses."""

from __future__ import annotations

from typing import Any

from runner_wrapper.record import AppliedLimits, HostInfo, JobIdentity, Usage, UsageRecord, sign_record

KEY = b"test-signing-key"


def make_record(job_id: int, *, name: str = "build", protected: bool = True, exit_code: int = 0,
                peak: int = 300 << 20, limit: int = 512 << 20, oom_kills: int = 0,
                finished_at: str = "2026-01-01T00:10:00Z", variables: dict[str, str] | None = None,
                signed: bool = True) -> dict[str, Any]:
    rec = UsageRecord(
        job=JobIdentity(id=job_id, project_id=7, project_path="group/app", pipeline_id=99, name=name,
                        stage="build", ref="main" if protected else "feature", protected=protected,
                        variables=variables or {"SPACK_JOB_SPEC_PKG_NAME": "zlib"}),
        host=HostInfo(hostname="runner-1", backend="cgroup-v2"),
        limits=AppliedLimits(memory_limit_bytes=limit, memory_request_bytes=limit // 2, cpu_request_cores=1.0),
        usage=Usage(wall_seconds=60.0, memory_peak_bytes=peak, memory_mean_bytes=peak // 2,
                    cpu_user_seconds=50.0, cpu_system_seconds=5.0, cpu_mean_cores=0.9, oom_kills=oom_kills),
        started_at="2026-01-01T00:09:00Z", finished_at=finished_at, exit_code=exit_code)
    d = rec.to_dict()
    return sign_record(d, KEY, "k1") if signed else d
