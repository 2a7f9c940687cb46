#!/usr/bin/env python3
"""GitLab API calls per hour with and without job webhooks (issue 15), measured against the stand-in.

Measured at a small scale (``--projects``, default 40) over real HTTP, then extrapolated:

* **idle full poll**: API calls of one poll cycle over N idle projects (one jobs-list request
  per project: the cost that grows with the number of projects);
* **per failed job, polling**: extra calls a poll cycle makes to decide one new failure
  (GraphQL details, trace, ...), measured over ``--failures`` left-alone failures (compile errors);
* **per failed job, webhooks**: the calls :meth:`Bot.handle_events` makes for one job event
  (one ``GET /jobs/:id`` to read GitLab's state, then the same decision), the events sent by
  the stand-in's :class:`HookSender` in GitLab's job-event shape;
* **hook deliveries per job**: GitLab sends a job event on every status change (created,
  pending, running, failed): these are requests *to* the bot, not API calls against the budget.

Extrapolation (printed with the formula): at ``--scale`` projects (default 1,000), a poll every
``--interval`` s without webhooks, and a reconciliation poll every ``--reconcile`` s with them,
with ``--failures-per-hour`` failed jobs an hour.  Polling-only cost is
``3600/interval x scale x idle_per_project + failures x per_job_polling``; with webhooks it is
``3600/reconcile x scale x idle_per_project + failures x per_job_webhook``.

Usage: .venv/bin/python benchmarks/bench_webhooks.py [--projects 40] [--failures 20]
       [--scale 1000] [--interval 60] [--reconcile 900] [--failures-per-hour 500]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runner_wrapper.logconfig import configure_logging  # noqa: E402

SECRET = "bench-webhook-secret-0123456789"
WEBHOOK = """
[http]
listen = "127.0.0.1:0"
[webhook]
enabled = true
secret_env = "BENCH_HOOK_SECRET"
reconcile_interval_seconds = 900
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--projects", type=int, default=40)
    ap.add_argument("--failures", type=int, default=20, help="failed jobs measured in each mode")
    ap.add_argument("--scale", type=int, default=1000, help="projects to extrapolate to")
    ap.add_argument("--interval", type=float, default=60.0, help="poll interval without webhooks (s)")
    ap.add_argument("--reconcile", type=float, default=900.0, help="reconciliation poll with webhooks (s)")
    ap.add_argument("--failures-per-hour", type=int, default=500)
    args = ap.parse_args()
    configure_logging("json", "error")

    from standin.gitlab.hooks import HookSender
    from tests.bot_live.farm import Farm, compile_error, make_bot

    names = [f"bench/p{i:03d}" for i in range(args.projects)]
    jobs = {"compile": {"stage": "build", "script": ["make"]}}

    def fail_jobs(farm, k: int) -> None:
        before = sum(j.status == "failed" for j in farm.standin.jobs())
        for i in range(k):
            farm.standin.create_pipeline(names[i % len(names)])
        farm.standin.wait_for(lambda: sum(j.status == "failed" for j in farm.standin.jobs()) == before + k, timeout=60)

    # ------------------------------------------------------------ polling only
    farm = Farm({"compile": compile_error})
    for n in names:
        farm.add_project(n, jobs)
    bot = make_bot(farm, Path(tempfile.mkdtemp(prefix="bench-wh-")), names, interval=1.0)
    bot.once()                                     # resolve the projects
    farm.standin.reset_calls()
    bot.once()
    idle = len(farm.standin.calls)
    fail_jobs(farm, args.failures)
    farm.standin.reset_calls()
    bot.once()
    per_job_poll = (len(farm.standin.calls) - idle) / args.failures
    bot.close()
    farm.close()

    # ------------------------------------------------------------ webhooks
    farm = Farm({"compile": compile_error})
    for n in names:
        farm.add_project(n, jobs)
    bot = make_bot(farm, Path(tempfile.mkdtemp(prefix="bench-wh-")), names, interval=1.0, extra=WEBHOOK,
                   env={"BENCH_HOOK_SECRET": SECRET})
    url = bot.start_http()
    bot.once()                                     # the reconciliation poll at start
    sender = HookSender(farm.standin.state, url + bot.config.webhook.path, secret=SECRET)
    farm.standin.on_job_change(sender)
    farm.standin.reset_calls()
    fail_jobs(farm, args.failures)
    sender.flush(30)
    handled = bot.handle_events()
    per_job_hook = len(farm.standin.calls) / max(1, handled)
    deliveries = len(sender.deliveries) / (args.failures * len(jobs))
    ok = sum(d.status == 200 for d in sender.deliveries)
    decided = sum(1 for j in farm.standin.jobs() if j.status == "failed" and bot.store.get_job(j.id)
                  and bot.store.get_job(j.id).decided)
    sender.close()
    bot.close()
    farm.close()

    idle_pp = idle / args.projects
    polls_h = 3600 / args.interval
    recon_h = 3600 / args.reconcile
    f_h = args.failures_per_hour
    without = polls_h * args.scale * idle_pp + f_h * per_job_poll
    with_hooks = recon_h * args.scale * idle_pp + f_h * per_job_hook
    print(f"measured at {args.projects} projects, {args.failures} failures per mode (stand-in, real HTTP):")
    print(f"  idle full poll: {idle} API calls = {idle_pp:.2f} per project")
    print(f"  per failed job: {per_job_poll:.1f} calls when found by polling, "
          f"{per_job_hook:.1f} when announced by a job event ({handled} events handled, {decided} jobs decided)")
    print(f"  job events received per job: {deliveries:.1f} ({ok}/{len(sender.deliveries)} answered 200; "
          "requests to the bot, not API calls)")
    print(f"extrapolated to {args.scale} projects and {f_h} failed jobs an hour:")
    print(f"  polling every {args.interval:g}s:           {polls_h:.0f} x {args.scale} x {idle_pp:.2f} + "
          f"{f_h} x {per_job_poll:.1f} = {without:,.0f} API calls/hour ({without / 60:,.0f}/min)")
    print(f"  webhooks + reconcile every {args.reconcile:g}s: {recon_h:.0f} x {args.scale} x {idle_pp:.2f} + "
          f"{f_h} x {per_job_hook:.1f} = {with_hooks:,.0f} API calls/hour ({with_hooks / 60:,.0f}/min)")
    print(f"  ratio: {without / with_hooks:.1f}x fewer calls with webhooks; jobs-list requests "
          f"{polls_h * args.scale / 60:,.0f}/min vs {recon_h * args.scale / 60:,.0f}/min "
          "(GitLab's jobs-list limit is 600/min)")
    return 0 if decided == args.failures else 1


if __name__ == "__main__":
    sys.exit(main())
