"""``retry-bot report --out report.html|report.png [--trace FILE | --state URL]``: a picture of the fleet.

Requested vs used memory per package (Spack jobs) or job name over time,
OOM kills and recoveries, and the failure taxonomy by family.  From a trace, the jobs are replayed through
the predictor and the policy's resize rule first; from the state store, kills
and recoveries come from the usage records and the bot's lineage tables.

``--out *.html`` writes one self-contained page (inline SVG).  ``--out *.png``
renders that page with a headless Chromium (``/usr/bin/chromium`` or
``--chromium PATH``); without one the command stops with exit status 2.
Exit status: 0 written, 2 bad input / unsupported format / no browser, 1 cannot write.
"""

from __future__ import annotations

import argparse
import os
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("report", help="write an HTML (inline SVG) or PNG report of usage, kills and failures",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, metavar="report.html|report.png")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--trace", metavar="FILE", help="replay this trace and report on it")
    src.add_argument("--state", metavar="URL", help="state URL (default: $RETRY_BOT_STATE_URL)")
    p.add_argument("--policy", metavar="FILE", help="policy for the replay (with --trace)")
    p.add_argument("--top", type=int, default=8,
                   help="packages (Spack jobs) or job names to draw, most reserved memory first (default 8)")
    p.add_argument("--chromium", metavar="PATH", default=None,
                   help="headless browser for --out *.png (default: /usr/bin/chromium, then $PATH)")
    p.set_defaults(func=run)


def _fail(message: str, status: int = 2) -> int:
    print(f"retry-bot report: {message}", file=sys.stderr)
    return status


def run(args: argparse.Namespace) -> int:
    from retry_bot.problems import ConfigError
    from retry_bot.report import (
        ReportError, collect_from_store, collect_from_trace, find_chromium, output_format, render_html, render_png,
    )
    from retry_bot.simulate.trace import TraceError

    try:
        fmt = output_format(args.out)
    except ReportError as exc:
        return _fail(str(exc), exc.status)
    chromium = None
    if fmt == "png":  # check before any slow replay
        chromium = find_chromium(args.chromium)
        if chromium is None:
            where = args.chromium or "/usr/bin/chromium or $PATH"
            return _fail(f"PNG needs chromium; use --out report.html (no chromium at {where})")
    if args.trace:
        try:
            data = collect_from_trace(args.trace, args.policy, top=args.top)
        except (TraceError, ConfigError) as exc:
            return _fail(str(exc))
    else:
        from retry_bot.state import STATE_URL_ENV, StateError, open_store

        url = args.state or os.environ.get(STATE_URL_ENV)
        if not url:
            return _fail(f"pass --trace FILE or --state URL (or set {STATE_URL_ENV})")
        try:
            with open_store(url) as store:
                data = collect_from_store(store, top=args.top)
        except StateError as exc:
            return _fail(str(exc))
    if fmt == "png":
        assert chromium is not None
        try:
            render_png(data, args.out, chromium)
        except ReportError as exc:
            return _fail(str(exc), exc.status)
    else:
        try:
            with open(args.out, "w", encoding="utf-8") as fh:
                fh.write(render_html(data))
        except OSError as exc:
            return _fail(f"cannot write {args.out}: {exc.strerror or exc}", 1)
    print(f"wrote {args.out}")
    return 0
