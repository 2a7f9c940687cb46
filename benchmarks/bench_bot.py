#!/usr/bin/env python3
"""Benchmark of the live retry bot against the GitLab stand-in (real HTTP on 127.0.0.1).

Prints:
  * API calls per idle poll cycle for 100 projects (each already holding decided failures);
  * API calls per failed job, by outcome (left alone / plain retry / resize: re-create + play);
  * failure-to-action latency: from the moment GitLab records the failure to the bot's
    GitLab write, with the bot polling every --interval seconds in the background.

Usage: .venv/bin/python benchmarks/bench_bot.py [--projects 100] [--jobs 20] [--interval 1.0]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runner_wrapper.logconfig import configure_logging  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--projects", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=20, help="failed jobs per outcome for the per-job numbers")
    ap.add_argument("--interval", type=float, default=1.0, help="poll interval for the latency run")
    args = ap.parse_args()
    configure_logging("json", "error")

    from tests.bot_live.farm import Farm, compile_error, flaky_dns, make_bot, needs_memory

    # ------------------------------------------------------------ idle cycle, N projects
    farm = Farm({"compile": compile_error})
    tmp = Path(tempfile.mkdtemp(prefix="bench-bot-"))
    names = [f"bench/p{i:03d}" for i in range(args.projects)]
    for n in names:
        farm.add_project(n, {"compile": {"stage": "build", "script": ["make"]}})
        farm.standin.create_pipeline(n)
    farm.standin.wait_for(lambda: sum(j.status == "failed" for j in farm.standin.jobs()) == args.projects, timeout=60)
    bot = make_bot(farm, tmp, names, interval=1.0)
    t0 = time.monotonic()
    bot.once()                                   # first cycle: resolve projects, decide every failure
    first = len(farm.standin.calls)
    first_s = time.monotonic() - t0
    idle = []
    for _ in range(3):
        farm.standin.reset_calls()
        t0 = time.monotonic()
        bot.once()
        idle.append((len(farm.standin.calls), time.monotonic() - t0))
    bot.close()
    farm.close()
    calls = [c for c, _ in idle]
    print(f"idle cycle, {args.projects} projects (1 decided failure each): "
          f"{statistics.mean(calls):.1f} API calls per cycle = {statistics.mean(calls) / args.projects:.2f} per project;"
          f" {statistics.mean(s for _, s in idle) * 1000:.0f} ms per cycle")
    print(f"first cycle (resolve {args.projects} projects + decide {args.projects} failures): {first} calls, "
          f"{first_s:.1f} s")

    # ------------------------------------------------------------ per failed job
    n = args.jobs
    for label, behaviour, extra_vars in (
        ("left alone (compile error)", compile_error, {}),
        ("plain retry (DNS failure)", flaky_dns(10**9), {}),
        ("resize (OOM: re-create + play)", needs_memory(300), {"KUBERNETES_MEMORY_LIMIT": "128Mi"}),
    ):
        farm = Farm({"job": behaviour})
        tmp = Path(tempfile.mkdtemp(prefix="bench-bot-"))
        farm.add_project("bench/one", {"job": {"stage": "build", "tags": ["small"], "script": ["x"],
                                               "variables": extra_vars}})
        bot = make_bot(farm, tmp, ["bench/one"])
        bot.once()                                 # project resolved, nothing failed yet
        farm.standin.reset_calls()
        base = 0
        for _ in range(n):
            farm.standin.create_pipeline("bench/one")
        farm.standin.wait_for(lambda: sum(j.status == "failed" and j.name == "job" for j in farm.standin.jobs()) >= n,
                              timeout=60)
        # cycle until every origin job is decided and every action settled
        deadline = time.monotonic() + 120
        origin_ids = [j.id for j in farm.standin.jobs() if j.name == "job"][:n]
        while time.monotonic() < deadline:
            bot.once()
            if all(bot.store.get_job(i) and bot.store.get_job(i).decided for i in origin_ids) \
                    and not bot.store.open_intents():
                break
            time.sleep(0.05)
        # idle cycles are not the failed jobs' cost: subtract one listing call per cycle
        cycles = sum(1 for c in farm.standin.calls if c.method == "GET" and c.path.endswith("/projects/1/jobs"))
        total = len(farm.standin.calls) - cycles + base
        by = {}
        for c in farm.standin.calls:
            key = f"{c.method} {_shape(c.path)}"
            by[key] = by.get(key, 0) + 1
        bot.close()
        farm.close()
        print(f"per failed job, {label}: {total / n:.2f} API calls "
              f"({', '.join(f'{k}: {v / n:.2f}' for k, v in sorted(by.items()) if not k.endswith('/projects/:id/jobs'))})")

    # ------------------------------------------------------------ failure-to-action latency
    farm = Farm({"job": flaky_dns(10**9)})
    tmp = Path(tempfile.mkdtemp(prefix="bench-bot-"))
    farm.add_project("bench/lat", {"job": {"stage": "build", "tags": ["small"], "script": ["x"]}})
    bot = make_bot(farm, tmp, ["bench/lat"], interval=args.interval)
    failed_at: dict[int, float] = {}
    acted_at: dict[int, float] = {}

    def on_job(job):
        if job.name == "job" and job.status == "failed" and job.retry_of is None:
            failed_at.setdefault(job.id, time.monotonic())
        if job.retry_of is not None:
            acted_at.setdefault(job.retry_of, time.monotonic())
    farm.standin.state.job_listeners.append(on_job)
    th = threading.Thread(target=bot.run_forever, daemon=True)
    bot.once()
    th.start()
    for _ in range(n):
        farm.standin.create_pipeline("bench/lat")
        time.sleep(args.interval * 0.37)
    farm.standin.wait_for(lambda: len(acted_at) >= n, timeout=60 + 3 * args.interval)
    bot.stop()
    th.join(10)
    bot.close()
    farm.close()
    lat = sorted(acted_at[j] - failed_at[j] for j in acted_at if j in failed_at)
    if lat:
        p95 = lat[min(len(lat) - 1, int(round(0.95 * (len(lat) - 1))))]
        print(f"failure-to-action latency (poll interval {args.interval:g} s, {len(lat)} jobs): "
              f"median {statistics.median(lat) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, max {lat[-1] * 1000:.0f} ms")
    return 0


def _shape(path: str) -> str:
    import re

    p = path.replace("/api/v4", "")
    p = re.sub(r"/projects/[^/]+", "/projects/:id", p)
    return re.sub(r"/\d+", "/:id", p)


if __name__ == "__main__":
    sys.exit(main())
