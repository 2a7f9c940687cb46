"""``retry-bot report --out report.html [--trace FILE | --state URL]``: a self-contained HTML picture.

Requested vs used memory per package over time, OOM kills and recoveries, and
the failure taxonomy by family.  From a trace, the jobs are replayed through
the predictor and the policy's resize rule first.  Exit status: 0 written,
2 bad input, 1 cannot write.
"""

from __future__ import annotations

import argparse
import os
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("report", help="write an HTML report (inline SVG) of usage, kills and failures",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, metavar="report.html")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--trace", metavar="FILE", help="replay this trace and report on it")
    src.add_argument("--state", metavar="URL", help="state URL (default: $RETRY_BOT_STATE_URL)")
    p.add_argument("--policy", metavar="FILE", help="policy for the replay (with --trace)")
    p.add_argument("--top", type=int, default=8, help="packages to draw (most reserved memory first)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from retry_bot.problems import ConfigError
    from retry_bot.report import collect_from_store, collect_from_trace, render_html
    from retry_bot.simulate import TraceError

    if args.trace:
        try:
            data = collect_from_trace(args.trace, args.policy, top=args.top)
        except (TraceError, ConfigError) as exc:
            print(f"retry-bot report: {exc}", file=sys.stderr)
            return 2
    else:
        from retry_bot.state import STATE_URL_ENV, StateError, open_store

        url = args.state or os.environ.get(STATE_URL_ENV)
        if not url:
            print(f"retry-bot report: pass --trace FILE or --state URL (or set {STATE_URL_ENV})", file=sys.stderr)
            return 2
        try:
            with open_store(url) as store:
                data = collect_from_store(store, top=args.top)
        except StateError as exc:
            print(f"retry-bot report: {exc}", file=sys.stderr)
            return 2
    try:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(render_html(data))
    except OSError as exc:
        print(f"retry-bot report: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}")
    return 0
