"""The benchmark's metrics: the definitions (and order of summation) of ``evaluate.py``."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from retry_bot.simulate.trace import AttemptAlloc, TraceJob

__all__ = ["METRIC_ORDER", "compute_metrics", "format_metrics", "peak_over_limit_all"]

GB = 1e9
HOUR = 3600.0

METRIC_ORDER = (
    "jobs", "attempts", "oom_kills", "oom_kills_per_100_jobs", "jobs_oom_killed",
    "failed_permanently", "mem_avg_over_request", "mem_peak_over_limit",
    "mem_peak_over_request", "peak_over_request_frac", "reserved_mem_gb_hours",
    "wasted_gb_hours_on_killed_attempts", "retry_delay_hours", "cpu_avg_over_request",
    "reserved_cpu_core_hours", "static_reserved_mem_gb_hours", "cost_index",
)


def compute_metrics(jobs: Sequence[TraceJob], allocs: Mapping[int, Sequence[AttemptAlloc]],
                    warmup_frac: float = 0.0) -> dict:
    """The benchmark's metrics (same definitions and order of summation as ``evaluate.py``)."""
    skip = int(len(jobs) * warmup_frac)
    n_jobs = attempts = kills = jobs_killed = failed = 0
    mem_use = mem_res = cpu_use = cpu_res = 0.0
    wasted = delay = 0.0
    peak_sum = limit_sum = 0.0
    peak_t = req_t_ok = 0.0
    ok = over = 0
    static_res = 0.0
    for job in jobs[skip:]:
        n_jobs += 1
        static_res += (job.static.memory_request_bytes or 0.0) * job.duration_s
        killed_any = False
        last_killed = True
        for a in allocs[job.job_id]:
            lim = None if a.memory_limit_bytes is None else float(a.memory_limit_bytes)
            if job.killed(lim):
                assert lim is not None
                rt = job.kill_time(lim)
                mb, killed = 0.5 * lim * rt, True
            else:
                rt, mb, killed = job.duration_s, job.memory_mean_bytes * job.duration_s, False
            attempts += 1
            res = float(a.memory_request_bytes) * rt
            mem_res += res
            mem_use += mb
            cpu_res += float(a.cpu_request_cores) * rt
            cpu_use += job.cpu_mean_cores * rt
            last_killed = killed
            if killed:
                kills += 1
                killed_any = True
                wasted += res
                delay += rt
                continue
            ok += 1
            peak = job.memory_peak_bytes
            peak_t += peak * rt
            req_t_ok += res
            over += peak > a.memory_request_bytes
            if lim is not None:
                peak_sum += peak
                limit_sum += lim
        jobs_killed += killed_any
        failed += last_killed

    def ratio(a: float, b: float) -> float | None:
        return a / b if b > 0 else None

    reserved = mem_res / GB / HOUR
    static_gbh = static_res / GB / HOUR
    return {
        "jobs": n_jobs,
        "attempts": attempts,
        "oom_kills": kills,
        "oom_kills_per_100_jobs": 100.0 * kills / n_jobs if n_jobs else None,
        "jobs_oom_killed": jobs_killed,
        "failed_permanently": failed,
        "mem_avg_over_request": ratio(mem_use, mem_res),
        "mem_peak_over_limit": ratio(peak_sum, limit_sum),
        "mem_peak_over_request": ratio(peak_t, req_t_ok),
        "peak_over_request_frac": ratio(over, ok),
        "reserved_mem_gb_hours": reserved,
        "wasted_gb_hours_on_killed_attempts": wasted / GB / HOUR,
        "retry_delay_hours": delay / HOUR,
        "cpu_avg_over_request": ratio(cpu_use, cpu_res),
        "reserved_cpu_core_hours": cpu_res / HOUR,
        "static_reserved_mem_gb_hours": static_gbh,
        "cost_index": ratio(reserved, static_gbh),
    }


def peak_over_limit_all(jobs: Sequence[TraceJob], allocs: Mapping[int, Sequence[AttemptAlloc]],
                        default_limit: Callable[[TraceJob], float], warmup_frac: float = 0.0) -> float | None:
    """``sum(peak) / sum(limit)`` over *every* successful attempt, an attempt without a limit at ``default_limit(job)``.

    ``evaluate.py``'s ``mem_peak_over_limit`` sums only attempts that had a limit, so a predictor
    that withholds limits from uncertain jobs looks tighter than the farm is: in production those
    jobs run under the runner's default limit.  This figure counts them at that default (same
    kill model as :func:`compute_metrics`: an attempt is killed iff its peak exceeds its limit;
    the default limit is not applied to kills, as the replay did not impose it).
    """
    peak_sum = limit_sum = 0.0
    for job in jobs[int(len(jobs) * warmup_frac):]:
        for a in allocs[job.job_id]:
            lim = None if a.memory_limit_bytes is None else float(a.memory_limit_bytes)
            if job.killed(lim):
                continue
            peak_sum += job.memory_peak_bytes
            limit_sum += lim if lim is not None else float(default_limit(job))
    return peak_sum / limit_sum if limit_sum > 0 else None


def format_metrics(metrics: Mapping[str, Any], title: str = "") -> str:
    """A two-column table in ``evaluate.py``'s layout."""
    rows = []
    for k in METRIC_ORDER:
        v = metrics.get(k)
        if v is None:
            s = "n/a"
        elif isinstance(v, int):
            s = f"{v:,}"
        elif abs(v) >= 100:
            s = f"{v:,.0f}"
        else:
            s = f"{v:.4f}"
        rows.append((k, s))
    w = max(len(k) for k, _ in rows)
    head = [title, "-" * len(title)] if title else []
    return "\n".join(head + [f"{k:<{w}}  {s:>14}" for k, s in rows])

