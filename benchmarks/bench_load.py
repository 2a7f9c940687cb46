#!/usr/bin/env python3
"""The retry bot under load, against the GitLab stand-in (real HTTP on 127.0.0.1).  Issue 15.

Prints:
  * time to decide and act on a burst of failed jobs in one pipeline, GitLab answering in 0 ms and in
    --latency-ms (every request delayed by the stand-in's ``slow`` fault);
  * a runner fleet outage of --outage-minutes simulated minutes (--outage-rate new
    ``runner_system_failure`` jobs a minute, every retry fails while it lasts), with the storm brake of
    config/policy.toml and without it: the retries sent per simulated minute, and how many of the jobs
    that failed in it recover after it;
  * actions lost when 30% of the calls are answered 429;
  * the peak calls per minute of the 0 ms burst against a configured budget (--budget).

The outage runs on a simulated clock (bot and stand-in share it; one poll cycle per simulated minute,
the due-time scheduler in between); the bursts run in real time.  Defaults keep the run to a few
minutes; the scale is printed.  Exactly-once is checked in every run (no job retried twice by the bot).

Usage: .venv/bin/python benchmarks/bench_load.py [--burst 2000] [--slow-burst 100] [--latency-ms 300]
       [--outage-minutes 10] [--outage-rate 100] [--recovery-minutes 10] [--budget 2000] [--r429 100]
       [--write-concurrency 4]    (1: one write at a time, as before writes went out concurrently)
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runner_wrapper.logconfig import configure_logging  # noqa: E402

SYSTEM_FAILURE = (b"Preparing the executor\nERROR: Job failed (system failure): prepare environment: "
                  b"dial tcp 10.0.0.7:2376: connect: connection refused\n")
BURST_POLICY = """
version = 1
[families.infrastructure]
action = "retry"
budget = 2
backoff = { initial = "0s" }
"""


class SimClock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def _standin(clock=None):
    from standin.gitlab import StandIn
    from tests.bot_live.farm import TOKEN

    s = StandIn(token=TOKEN, **({"clock": clock} if clock is not None else {}))
    s.start()
    return s


def _fail_pipeline(standin, project: str, jobs: int) -> list[int]:
    """One pipeline of ``jobs`` jobs, every one failed with a runner system failure."""
    standin.create_pipeline(project)
    ids = []
    while True:
        job = standin.next_pending_job()
        if job is None:
            break
        standin.run_job(job.id, "failed", "runner_system_failure", trace=SYSTEM_FAILURE)
        ids.append(job.id)
    return ids


def _run_pending(standin, ok: bool) -> int:
    n = 0
    while True:
        job = standin.next_pending_job()
        if job is None:
            return n
        standin.run_job(job.id, "success" if ok else "failed", None if ok else "runner_system_failure",
                        trace=b"ok\nJob succeeded\n" if ok else SYSTEM_FAILURE)
        n += 1


def _project(standin, path: str, jobs: int) -> None:
    cfg = {"stages": ["build"]}
    cfg.update({f"j{i}": {"stage": "build", "script": ["x"]} for i in range(jobs)})
    standin.add_project(path, cfg)


#: ``[poll] write_concurrency`` of the bots (``--write-concurrency``).
WRITE_CONCURRENCY = 4


def _bot(url: str, tmp: Path, projects: list[str], policy: str, clock=None, extra: str = "", budget: int = 0):
    from tests.bot_live.farm import make_bot

    bot = make_bot(None, tmp, projects, policy=policy, url=url, extra=extra, leader=False, attempts=5,
                   gitlab_extra=f"max_requests_per_minute = {budget}" if budget else "")
    bot.actions.settings = dataclasses.replace(bot.actions.settings, write_concurrency=WRITE_CONCURRENCY)
    if clock is not None:
        bot.poller.clock = bot.actions.clock = clock
    return bot


def _retries_by_bot(standin) -> collections.Counter:
    """How often the bot retried each job (exactly-once: every count must be 1)."""
    c = collections.Counter()
    for call in standin.calls_matching("POST", r"/jobs/\d+/retry$"):
        if call.status is not None and call.status < 300:
            c[int(call.path.rsplit("/", 2)[-2])] += 1
    return c


def burst(n: int, latency_ms: float, budget: int = 0) -> tuple[float, int, int, list]:
    """Seconds until every one of ``n`` failed jobs is decided and retried; (seconds, decided, retried, calls)."""
    from standin.gitlab.faults import Fault

    standin = _standin()
    try:
        _project(standin, "load/big", n)
        _fail_pipeline(standin, "load/big", n)
        tmp = Path(tempfile.mkdtemp(prefix="bench-load-"))
        bot = _bot(standin.url, tmp, ["load/big"], BURST_POLICY, budget=budget)
        if latency_ms:
            standin.faults.add(Fault(kind="slow", delay=latency_ms / 1000.0))
        standin.reset_calls()
        t0 = time.monotonic()
        decided = 0
        for _ in range(10 * n):
            rep = bot.once()
            decided += len(rep.decided)
            if not rep.decided and len(_retries_by_bot(standin)) >= n:
                break
        seconds = time.monotonic() - t0
        calls = list(standin.calls)
        retried = _retries_by_bot(standin)
        assert max(retried.values(), default=1) == 1, "a job was retried twice"
        bot.close()
        return seconds, decided, len(retried), calls
    finally:
        standin.stop()


def outage(minutes: int, rate: int, recovery: int, brake: bool) -> dict:
    from retry_bot.policy import default_policy_text

    clock = SimClock()
    standin = _standin(clock)
    policy = default_policy_text()
    if not brake:
        policy = policy.replace("[storm]\nenabled = true", "[storm]\nenabled = false")
        assert "enabled = false" in policy
    try:
        _project(standin, "load/farm", rate)
        tmp = Path(tempfile.mkdtemp(prefix="bench-load-"))
        bot = _bot(standin.url, tmp, ["load/farm"], policy, clock=clock)
        bot.once()
        origins: list[int] = []
        per_minute = []
        for minute in range(minutes + recovery):
            broken = minute < minutes
            before = sum(_retries_by_bot(standin).values())
            if broken:
                origins += _fail_pipeline(standin, "load/farm", rate)
            # the scheduler sends due actions within the minute; one poll cycle a minute
            for _ in range(6):
                _run_pending(standin, ok=not broken)
                bot.poller.run_due()
                clock.now += 10.0
            bot.once()
            _run_pending(standin, ok=not broken)
            per_minute.append(sum(_retries_by_bot(standin).values()) - before)
        bot.once()
        _run_pending(standin, ok=True)
        retried = _retries_by_bot(standin)
        assert max(retried.values(), default=1) == 1, "a job was retried twice"
        recovered = 0
        by_name = collections.defaultdict(list)
        for j in standin.jobs("load/farm"):
            by_name[(j.pipeline_id, j.name)].append(j)
        for jid in origins:
            j = standin.get_job(jid)
            if any(x.status == "success" for x in by_name[(j.pipeline_id, j.name)]):
                recovered += 1
        out = {"per_minute": per_minute, "outage_retries": sum(per_minute[:minutes]), "origins": len(origins),
               "recovered": recovered, "total_retries": sum(retried.values())}
        bot.close()
        return out
    finally:
        standin.stop()


def lost_under_429(n: int, share: float) -> tuple[int, int, int, float]:
    """(actions decided, actions done, actions lost, seconds) with ``share`` of calls answered 429."""
    from standin.gitlab.faults import Fault

    standin = _standin()
    try:
        _project(standin, "load/r429", n)
        _fail_pipeline(standin, "load/r429", n)
        tmp = Path(tempfile.mkdtemp(prefix="bench-load-"))
        bot = _bot(standin.url, tmp, ["load/r429"], BURST_POLICY)
        standin.faults.add(Fault(kind="rate_limit", probability=share, retry_after=1))
        t0 = time.monotonic()
        while time.monotonic() - t0 < 300:  # a deferred write waits 15 s, 30 s, ... before it is sent again
            bot.once()
            decided = [r for r in bot.store.jobs() if r.decided and (r.decision or {}).get("action") == "retry"]
            open_ = [i for i in bot.store.open_intents()]
            if len(decided) >= n and not open_:
                break
            time.sleep(0.2)
        seconds = time.monotonic() - t0
        standin.faults.clear()
        retried = _retries_by_bot(standin)
        assert max(retried.values(), default=1) == 1, "a job was retried twice"
        decided = [r for r in bot.store.jobs() if r.decided and (r.decision or {}).get("action") == "retry"]
        done = sum(1 for r in decided if r.job_id in retried)
        bot.close()
        return len(decided), done, len(decided) - done, seconds
    finally:
        standin.stop()


def peak_per_minute(calls: list) -> int:
    if not calls:
        return 0
    starts = sorted(c.started for c in calls)
    best, j = 0, 0
    for i, t in enumerate(starts):
        while starts[j] < t - 60.0:
            j += 1
        best = max(best, i - j + 1)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burst", type=int, default=2000, help="failed jobs in the 0 ms burst")
    ap.add_argument("--slow-burst", type=int, default=100, help="failed jobs in the slow burst")
    ap.add_argument("--latency-ms", type=float, default=300.0)
    ap.add_argument("--outage-minutes", type=int, default=10)
    ap.add_argument("--outage-rate", type=int, default=100, help="new failed jobs per simulated minute")
    ap.add_argument("--recovery-minutes", type=int, default=10)
    ap.add_argument("--r429", type=int, default=100, help="failed jobs in the 30%% 429 run")
    ap.add_argument("--budget", type=int, default=2000, help="configured API budget (requests/min)")
    ap.add_argument("--only", default="burst,slow,outage,429", help="comma-separated sections to run")
    ap.add_argument("--write-concurrency", type=int, default=4, help="[poll] write_concurrency (1: sequential)")
    args = ap.parse_args()
    global WRITE_CONCURRENCY
    WRITE_CONCURRENCY = max(1, args.write_concurrency)
    only = set(args.only.split(","))
    configure_logging("json", "critical")

    print(f"scale: burst {args.burst} jobs at 0 ms, {args.slow_burst} at {args.latency_ms:g} ms; outage "
          f"{args.outage_minutes} min x {args.outage_rate} jobs/min + {args.recovery_minutes} min recovery; "
          f"429 run {args.r429} jobs; write_concurrency {WRITE_CONCURRENCY}")
    if "burst" in only:
        _burst(args)
    if "slow" in only:
        _slow(args)
    if "outage" in only:
        _outage(args)
    if "429" in only:
        _r429(args)
    return 0


def _burst(args) -> None:
    s, decided, retried, calls = burst(args.burst, 0.0, args.budget)
    print(f"burst, 0 ms: {args.burst} failed jobs in one pipeline decided and retried in {s:.1f} s "
          f"({retried} retries, {len(calls)} API calls, {60 * args.burst / s:.0f} decisions/min)")
    peak = peak_per_minute(calls)
    print(f"peak calls per minute (0 ms burst): {peak} against a configured budget of {args.budget}/min "
          f"({'within' if peak <= args.budget else 'OVER'} it; the bot paces itself with "
          f"[gitlab] max_requests_per_minute = {args.budget})")


def _slow(args) -> None:
    s2, _, retried2, calls2 = burst(args.slow_burst, args.latency_ms)
    per_job = s2 / max(1, args.slow_burst)
    print(f"burst, {args.latency_ms:g} ms: {args.slow_burst} failed jobs in {s2:.1f} s ({per_job:.2f} s per job, "
          f"{len(calls2) / max(1, args.slow_burst):.1f} calls per job) -> {args.burst} jobs would take "
          f"~{per_job * args.burst / 60:.0f} min (reads 8 in flight, writes {WRITE_CONCURRENCY} in flight)")


def _outage(args) -> None:
    for brake in (True, False):
        o = outage(args.outage_minutes, args.outage_rate, args.recovery_minutes, brake)
        print(f"outage, storm brake {'on ' if brake else 'off'}: retries per minute during the outage "
              f"{o['per_minute'][:args.outage_minutes]} = {o['outage_retries']}; after it "
              f"{o['per_minute'][args.outage_minutes:]}; {o['recovered']} of {o['origins']} jobs that failed in "
              f"it recovered")


def _r429(args) -> None:
    d, done, lost, s3 = lost_under_429(args.r429, 0.3)
    print(f"30% of calls answered 429: {d} retries decided, {done} done, {lost} lost, in {s3:.1f} s "
          f"(a write refused with 429 keeps its intent and is sent again later)")


if __name__ == "__main__":
    raise SystemExit(main())
