"""``retry-bot history JOB_ID``: what the bot did with a job's lineage, and why.

Shows every event of the lineage the job belongs to (seen, classified,
decided, actions begun/completed/failed, jobs re-created and how they ended),
oldest first.  ``--format json`` prints the raw events.

Attempts are numbered as the decisions number them: the origin (the job that
first failed) is attempt 1, its first re-created job attempt 2, and so on.
Dry-run decisions are shown too, marked ``(dry run: nothing written)``: they
are provisional, a later live run decides the job again.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from retry_bot.state import Store

__all__ = ["register", "handle", "render"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("history", help="what happened to a job (and its re-created jobs) and why",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("job_id", type=int, help="GitLab job id (any job of the lineage)")
    p.add_argument("--config", default=None, help="bot configuration, for its state_url")
    p.add_argument("--state", "--url", dest="url", default=None, help="state URL (default: the config's, else $RETRY_BOT_STATE_URL)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=handle)


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _line(ev: dict[str, Any]) -> str:
    d = ev.get("data") or {}
    k = ev["kind"]
    job = f"job {ev['job_id']}"
    if k == "seen":
        extra = ", ".join(f"{x}={d[x]}" for x in ("name", "failure_reason", "exit_code", "ref") if d.get(x) is not None)
        return f"{job} seen failed ({extra})" if extra else f"{job} seen failed"
    if k == "classified":
        ev_txt = "; ".join(str(e) for e in (d.get("evidence") or [])[:2])
        return (f"{job} classified {d.get('family')}/{d.get('category')} by rule {d.get('rule')}"
                + (f" — {ev_txt}" if ev_txt else ""))
    if k == "decided":
        extra = ""
        if d.get("variables"):
            extra = " with " + " ".join(f"{a}={b}" for a, b in d["variables"].items())
        if d.get("runner_class"):
            extra += f" on class {d['runner_class']}"
        if d.get("action") not in (None, "none") and isinstance(d.get("attempt"), int):
            extra += f" as attempt {d['attempt']}"
        dry = " (dry run: nothing written, provisional)" if d.get("dry_run") else ""
        return f"{job} decision: {d.get('action')}{extra}{dry} — {d.get('reason')}"
    if k == "action_begun":
        return f"{job} action {d.get('kind')} begun (intent {d.get('key')}, try {d.get('attempt')})"
    if k == "action_completed":
        r = d.get("result") or {}
        what = ", ".join(f"{a}={b}" for a, b in r.items())
        return f"{job} action {d.get('kind')} done ({what})"
    if k == "action_failed":
        return f"{job} action {d.get('kind')} failed: {d.get('error')}"
    if k == "lineage_member":
        v = " ".join(f"{a}={b}" for a, b in (d.get("variables") or {}).items())
        return f"{job} created as attempt {_attempt(d.get('attempt'))} by {d.get('action')}" + (f" ({v})" if v else "")
    if k == "lineage_updated":
        return f"{job} now " + ", ".join(f"{a}={b}" for a, b in d.items())
    return f"{job} {k} {json.dumps(d, sort_keys=True)}"


def _attempt(stored: Any) -> Any:
    """The store numbers a lineage from 0 (the origin); decisions and this command from 1."""
    return stored + 1 if isinstance(stored, int) else stored


def dry_run_events(store: Store, events: list[dict[str, Any]], job_id: int) -> list[dict[str, Any]]:
    """The provisional (dry-run) decisions of the lineage's jobs, as ``decided`` events."""
    jobs = {int(e["job_id"]) for e in events} | {int(job_id)}
    return [{"event_id": None, "at": d.at, "job_id": d.job_id,
             "origin_job_id": events[0]["origin_job_id"] if events else d.job_id, "kind": "decided",
             "data": {**d.decision, "dry_run": True}} for d in store.dry_run_decisions(jobs)]


def render(events: list[dict[str, Any]]) -> str:
    """The human timeline of a lineage's events."""
    return "\n".join(f"{_when(ev['at'])}  {_line(ev)}" for ev in events)


def handle(args: argparse.Namespace) -> int:
    from retry_bot.state import STATE_URL_ENV, StateError, StateUnavailable, open_store

    url = args.url
    if not url and args.config:
        from retry_bot.live.config import load_config
        from retry_bot.problems import ConfigError

        try:
            url = load_config(args.config, require_secrets=False).state_url
        except ConfigError as exc:
            print(f"retry-bot history: invalid configuration:\n{exc}", file=sys.stderr)
            return 2
    url = url or os.environ.get(STATE_URL_ENV)
    if not url:
        print(f"retry-bot history: no state URL: pass --url or --config, or set {STATE_URL_ENV}", file=sys.stderr)
        return 2
    try:
        store = open_store(url, migrate=False)
    except (StateError, StateUnavailable) as exc:
        print(f"retry-bot history: {exc}", file=sys.stderr)
        return 2
    try:
        events = store.history(args.job_id)
        events = sorted(events + dry_run_events(store, events, args.job_id),
                        key=lambda e: (e["at"], e["event_id"] if e["event_id"] is not None else 1e18))
    finally:
        store.close()
    if args.format == "json":
        print(json.dumps(events, indent=2, sort_keys=True))
        return 0
    if not events:
        print(f"job {args.job_id}: the bot has no record of this job")
        return 1
    print(render(events))
    return 0
