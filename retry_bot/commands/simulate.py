"""``retry-bot simulate``: what-if replay of a trace through the predictor and the policy's resize rule.

Writes one allocation row per attempt (``--allocations``) and prints the
benchmark metrics (``evaluate.py``'s definitions) against the trace's static
sizes.  ``--baseline gantry|vpa|static`` replays a reference allocator instead.
Exit status: 0 done, 2 bad input (trace, policy), 1 could not write the output.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


#: One line per summary label: the definitions of shared/bench/evaluate.py (sums over all
#: attempts unless stated; "t" is an attempt's duration; GB = 1e9 bytes).
METRIC_LEGEND = {
    "jobs": "jobs replayed",
    "attempts": "runs of those jobs, re-runs after an OOM kill included",
    "oom_kills": "attempts killed because their peak passed their memory limit",
    "oom_kills_per_100_jobs": "oom_kills per 100 jobs",
    "jobs_oom_killed": "jobs with at least one killed attempt",
    "failed_permanently": "jobs whose last attempt was still killed (budget or cap reached)",
    "mem_avg_over_request": "sum(mean memory x t) / sum(request x t): how much of the reserved memory was used",
    "mem_peak_over_limit": "sum(peak) / sum(limit) over successful attempts with a limit: headroom left",
    "mem_peak_over_request": "sum(peak x t) / sum(request x t) over successful attempts",
    "peak_over_request_frac": "share of successful attempts whose peak passed their request "
                              "(they lean on node slack: eviction candidates)",
    "reserved_mem_gb_hours": "sum(request x t) in GB-hours, killed attempts included",
    "wasted_gb_hours_on_killed_attempts": "the part of reserved_mem_gb_hours spent in killed attempts",
    "retry_delay_hours": "wall time lost in killed attempts",
    "cpu_avg_over_request": "sum(CPU mean x t) / sum(CPU request x t)",
    "reserved_cpu_core_hours": "sum(CPU request x t) in core-hours",
    "static_reserved_mem_gb_hours": "what the trace's own (static) requests reserved, in GB-hours",
    "cost_index": "reserved_mem_gb_hours / static_reserved_mem_gb_hours: below 1 reserves less than today",
    "replay_seconds": "time this replay took",
}


def format_legend() -> str:
    """The legend printed under the text summary."""
    width = max(len(k) for k in METRIC_LEGEND)
    return "\n".join(["legend (definitions of shared/bench/evaluate.py; t = attempt duration):"]
                     + [f"  {k:<{width}}  {v}" for k, v in METRIC_LEGEND.items()])


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "simulate", help="replay a job trace through the predictor and resize policy (what-if)",
        description="Replay a trace of finished jobs in time order, causally, through the same "
        "prediction and resize code the live bot uses; write per-attempt allocations and print "
        "utilisation, OOM kills and reserved memory against the trace's static sizes.")
    p.add_argument("--trace", required=True, metavar="TRACE.jsonl[.gz]")
    p.add_argument("--policy", metavar="POLICY.toml",
                   help="policy file (its [prediction] table, resize rule and OOM budget); default: built-in")
    p.add_argument("--allocations", metavar="OUT.jsonl", help="write one line per attempt here")
    p.add_argument("--baseline", choices=("gantry", "vpa", "static"),
                   help="replay a reference allocator instead of the predictor")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--no-progress", action="store_true", help="no progress bar even on a terminal")
    p.add_argument("--no-legend", action="store_true", help="text format: leave out the legend of the labels")
    p.set_defaults(func=run)


def _progress_bar(stream):
    start = time.monotonic()

    def show(done: int, total: int) -> None:
        width = 30
        frac = done / total if total else 1.0
        fill = int(width * frac)
        rate = done / max(time.monotonic() - start, 1e-6)
        stream.write(f"\rreplaying [{'#' * fill}{'.' * (width - fill)}] {done:,}/{total:,} jobs "
                     f"({rate:,.0f}/s)")
        if done >= total:
            stream.write("\n")
        stream.flush()

    return show


def run(args: argparse.Namespace) -> int:
    from retry_bot.predict.sources import load_policy_and_settings
    from retry_bot.problems import ConfigError
    from retry_bot.simulate.allocators import make_allocator, replay_from_policy
    from retry_bot.simulate.metrics import format_metrics
    from retry_bot.simulate.replay import simulate
    from retry_bot.simulate.trace import TraceError, load_trace, write_allocations
    from runner_wrapper.logconfig import get_logger

    log = get_logger("retry_bot.simulate")
    try:
        policy, settings = load_policy_and_settings(args.policy)
    except ConfigError as exc:
        print(f"retry-bot simulate: invalid policy:\n{exc}", file=sys.stderr)
        return 2
    try:
        jobs = load_trace(args.trace, settings.keys)
    except TraceError as exc:
        print(f"retry-bot simulate: {exc}", file=sys.stderr)
        return 2
    view = replay_from_policy(policy)
    allocator = make_allocator(args.baseline, settings, view)
    progress = None
    if not args.no_progress and sys.stderr.isatty():
        progress = _progress_bar(sys.stderr)
    result = simulate(jobs, allocator, progress=progress)
    if args.allocations:
        try:
            write_allocations(args.allocations, result.rows)
        except OSError as exc:
            print(f"retry-bot simulate: cannot write {args.allocations}: {exc.strerror or exc}", file=sys.stderr)
            return 1
    log.info("simulate.done", allocator=result.allocator, jobs=len(jobs), attempts=len(result.rows),
             seconds=round(result.seconds, 2))
    if args.format == "json":
        print(json.dumps({"allocator": result.allocator, "trace": args.trace,
                          "replay_seconds": round(result.seconds, 3), **result.metrics}))
    else:
        print(format_metrics(result.metrics, f"{result.allocator} on {args.trace}"))
        print(f"{'replay_seconds':<36}  {result.seconds:>14.2f}")
        if not args.no_legend:
            print()
            print(format_legend())
    return 0
