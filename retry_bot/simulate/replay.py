"""The what-if replay: run a trace of finished jobs through an allocator, causally.

The replay follows ``TRACE_FORMAT.md`` of the benchmark:

* jobs are taken in trace order (``created_at``); before job J (created at T)
  is allocated, every *event* that happened strictly before T is delivered to
  the allocator: the end of a job that succeeded (its usage becomes visible),
  or an OOM kill at limit L (only "need > L" becomes visible);
* attempt k of a job is OOM-killed iff its peak exceeds its memory limit; a
  killed attempt runs ``duration * peak_at_fraction * L / peak`` seconds, the
  next attempt starts then; the retry is decided with what was known at T
  plus the limits the job was killed at - never its true peak;
* every retry is decided by :func:`retry_bot.decide.decide` with the policy
  (family budget, ``max_attempts``, resize rule, ``beyond_top``,
  ``last_attempt``, the runner-class ladder) and the predictor's figure, as the
  live bot decides it (:class:`PolicyReplay`).

Allocators: :mod:`retry_bot.simulate.allocators` (ours) and :mod:`retry_bot.simulate.baselines`.
Metrics (:mod:`retry_bot.simulate.metrics`) are computed exactly as the benchmark's
``evaluate.py`` does.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from retry_bot.simulate.allocators import Allocator
from retry_bot.simulate.metrics import compute_metrics
from retry_bot.simulate.trace import AttemptAlloc, TraceJob

__all__ = ["SimulationResult", "simulate", "allocations_by_job"]


@dataclass
class SimulationResult:
    """Per-attempt allocations (``rows``, allocation-file dicts) and the metrics."""

    rows: list[dict]
    metrics: dict
    allocator: str
    seconds: float = 0.0


def simulate(
    jobs: Sequence[TraceJob],
    allocator: Allocator,
    progress: Callable[[int, int], None] | None = None,
    max_attempts: int = 20,
) -> SimulationResult:
    """Replay ``jobs`` (trace order) through ``allocator``, causally; see the module docstring."""
    started = time.perf_counter()
    # events: (time, seq, kind, job, limit)
    events: list[tuple[float, int, int, TraceJob, int]] = []
    seq = 0
    rows: list[dict] = []
    attempts_by_job: dict[int, list[AttemptAlloc]] = {}
    n = len(jobs)
    for i, job in enumerate(jobs):
        while events and events[0][0] < job.t:
            at, _, kind, ej, lim = heapq.heappop(events)
            if kind == 0:
                allocator.observe_kill(ej, lim, at)
            else:
                allocator.observe_success(ej, at)
        atts: list[AttemptAlloc] = []
        a = allocator.first(job)
        t = job.t
        while True:
            atts.append(a)
            lim = a.memory_limit_bytes
            if job.killed(lim):
                assert lim is not None
                t += job.kill_time(lim)
                seq += 1
                heapq.heappush(events, (t, seq, 0, job, lim))
                if len(atts) >= max_attempts:
                    break
                nxt = allocator.retry(job, atts)
                if nxt is None:
                    break
                a = nxt
                continue
            t += job.duration_s
            seq += 1
            heapq.heappush(events, (t, seq, 1, job, 0))
            break
        attempts_by_job[job.job_id] = atts
        for k, x in enumerate(atts, 1):
            rows.append({
                "job_id": job.job_id, "attempt": k,
                "memory_request_bytes": int(x.memory_request_bytes),
                "memory_limit_bytes": None if x.memory_limit_bytes is None else int(x.memory_limit_bytes),
                "cpu_request_cores": round(float(x.cpu_request_cores), 6),
            })
        if progress is not None and (i % 500 == 0 or i == n - 1):
            progress(i + 1, n)
    metrics = compute_metrics(jobs, {j: [_as_alloc(r) for r in rs] for j, rs in _group(rows).items()})
    return SimulationResult(rows=rows, metrics=metrics, allocator=getattr(allocator, "name", "?"),
                            seconds=time.perf_counter() - started)


def _group(rows: Iterable[dict]) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for r in rows:
        out.setdefault(r["job_id"], []).append(r)
    return out


def _as_alloc(r: dict) -> AttemptAlloc:
    return AttemptAlloc(r["memory_request_bytes"], r["memory_limit_bytes"], r["cpu_request_cores"])



def allocations_by_job(rows: Iterable[dict]) -> dict[int, list[AttemptAlloc]]:
    """Allocation rows (as :attr:`SimulationResult.rows`) grouped per job, as :func:`compute_metrics` takes them."""
    return {j: [_as_alloc(r) for r in rs] for j, rs in _group(rows).items()}
