"""``retry-bot state migrate|check|backup``: look after the bot's state database.

``--url`` names the store (``sqlite:///PATH``, ``postgresql://USER@HOST:PORT/DB``);
without it ``$RETRY_BOT_STATE_URL`` is used.  Exit codes: 0 healthy / done,
1 problems found (``check``), 2 cannot open or use the database.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
from typing import Any

__all__ = ["register", "handle_migrate", "handle_check", "handle_backup"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("state", help="migrate, check or back up the state database",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="state_command", metavar="ACTION")
    sub.required = True

    def url_arg(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--state", "--url", dest="url", default=None,
                        help="state URL (default: $RETRY_BOT_STATE_URL)")

    m = sub.add_parser("migrate", help="create or upgrade the schema (SQLite keeps PATH.vN.bak first)")
    url_arg(m)
    m.set_defaults(func=handle_migrate)

    c = sub.add_parser("check", help="schema version, integrity, counts (followed jobs, held re-runs...), "
                                     "open intents, storm brake, leader")
    url_arg(c)
    c.add_argument("--format", choices=("text", "json"), default="text")
    c.set_defaults(func=handle_check)

    b = sub.add_parser("backup", help="consistent online copy (SQLite backup API, or pg_dump)")
    url_arg(b)
    b.add_argument("--out", required=True, help="file to write (SQLite file, or pg_dump custom format)")
    b.set_defaults(func=handle_backup)


def _url(args: argparse.Namespace) -> str | None:
    from retry_bot.state import STATE_URL_ENV

    url = args.url or os.environ.get(STATE_URL_ENV)
    if not url:
        print(f"retry-bot state: no state URL: pass --url or set {STATE_URL_ENV}", file=sys.stderr)
    return url


def _fail(exc: Exception) -> int:
    print(f"retry-bot state: {exc}", file=sys.stderr)
    return 2


def handle_migrate(args: argparse.Namespace) -> int:
    from retry_bot.state import StateError, open_store

    url = _url(args)
    if not url:
        return 2
    try:
        with open_store(url) as store:
            if store.migrated_from == store.schema_version:
                print(f"{store.location}: schema version {store.schema_version}, up to date")
            else:
                print(f"{store.location}: migrated schema version {store.migrated_from} -> {store.schema_version}")
    except StateError as exc:
        return _fail(exc)
    return 0


def handle_check(args: argparse.Namespace) -> int:
    from retry_bot.state import LATEST_VERSION, StateError, open_store

    url = _url(args)
    if not url:
        return 2
    report: dict[str, Any] = {}
    problems: list[str] = []
    try:
        with open_store(url, migrate=False) as store:
            report.update(location=store.location, backend=store.dialect, schema_version=store.schema_version,
                          latest_schema_version=LATEST_VERSION)
            problems += [f"integrity: {p}" for p in store.integrity_problems()]
            if store.needs_migration:
                problems.append(f"schema version {store.schema_version} is older than {LATEST_VERSION}: "
                                "run 'retry-bot state migrate'")
            else:
                report["counts"] = store.stats()
                report["open_intents"] = [
                    {"intent_id": i.intent_id, "key": i.idempotency_key, "job_id": i.job_id, "kind": i.kind,
                     "holder": i.holder, "term": i.term} for i in store.open_intents()]
                report["lease"] = store.lease()
                report["leader"] = store.leader()
                report["rejected_records"] = {f"{s}/{r}": n for (s, r), n in store.rejected_counts().items()}
                held = store.held_counts()
                storm = store.storm_categories()
                report["storm"] = {c: {"braked": (storm.get(c) or {}).get("braked_since") is not None,
                                       "braked_since": (storm.get(c) or {}).get("braked_since"),
                                       "held": held.get(c, 0)} for c in sorted(set(storm) | set(held))}
                oldest = store.followed(limit=1)
                report["followed"] = {"jobs": report["counts"]["followed_jobs"],
                                      "oldest_since": oldest[0].since if oldest else None}
    except StateError as exc:
        if args.format == "json":
            print(json.dumps({"ok": False, "error": str(exc)}))
        return _fail(exc)
    report["ok"] = not problems
    report["problems"] = problems
    if args.format == "json":
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print(f"state database: {report['location']} ({report['backend']})")
        print(f"schema version: {report['schema_version']} (this retry-bot: {LATEST_VERSION})")
        for k, v in (report.get("counts") or {}).items():
            print(f"  {k}: {v}")
        for i in report.get("open_intents") or []:
            print(f"open intent {i['intent_id']}: {i['kind']} on job {i['job_id']} ({i['key']}); the leader "
                  "reconciles it with GitLab at start")
        for cat, st in (report.get("storm") or {}).items():
            if st["braked"] or st["held"]:
                print(f"storm brake {cat}: {'braked' if st['braked'] else 'released'}, {st['held']} re-run(s) held")
        if "leader" in report:
            print(f"leader: {report['leader'] or '(none)'}")
        for p in problems:
            print(f"PROBLEM: {p}")
        print("ok" if not problems else f"{len(problems)} problem(s)")
    return 0 if not problems else 1


def _pg_dump() -> str | None:
    found = shutil.which("pg_dump")
    if found:
        return found
    cands = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_dump"))
    return cands[-1] if cands else None


def handle_backup(args: argparse.Namespace) -> int:
    from retry_bot.state import StateError, open_store, redact_url
    from retry_bot.state.backends import SQLiteBackend

    url = _url(args)
    if not url:
        return 2
    out = os.path.abspath(args.out)
    if os.path.exists(out):
        print(f"retry-bot state: {out} exists; choose a new file (backups are never overwritten)", file=sys.stderr)
        return 2
    try:
        with open_store(url, migrate=False) as store:
            backend = store._b  # noqa: SLF001 - the command is part of the state package
            if isinstance(backend, SQLiteBackend):
                backend.backup_to(out)
                print(f"backed up {store.location} (schema version {store.schema_version}) to {out}")
                return 0
    except StateError as exc:
        return _fail(exc)
    pg_dump = _pg_dump()
    if pg_dump is None:
        print("retry-bot state: pg_dump not found: install the PostgreSQL client (Debian: postgresql-client)",
              file=sys.stderr)
        return 2
    r = subprocess.run([pg_dump, "--format=custom", "--file", out, "--dbname", url],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"retry-bot state: pg_dump of {redact_url(url)} failed: {r.stderr.strip()}", file=sys.stderr)
        return 2
    print(f"backed up {redact_url(url)} to {out} (pg_dump custom format; restore with pg_restore)")
    return 0
