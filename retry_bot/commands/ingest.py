"""``retry-bot ingest FILE...``: store the runner wrapper's spool files (JSON Lines of signed usage records).

Idempotent: a record already stored (same job run) is counted as a duplicate
and adds nothing.  Records whose signature does not verify are rejected and
counted in the state store once each (by source and record hash): ingesting
the same file again reports them again but does not count them again.  Exit status: 0 all stored or duplicates,
1 some records rejected, 2 cannot read a file / open the store / no key.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

__all__ = ["register", "run", "signing_keys_from_args", "add_key_arguments"]


def add_key_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--key", action="append", default=[], metavar="ID=ENVVAR",
                   help="a signing key id and the environment variable holding the key "
                        "(repeatable; default: default=RIGHTSIZER_SIGNING_KEY)")
    p.add_argument("--key-file", action="append", default=[], metavar="ID=PATH",
                   help="a signing key id and a file holding the key (repeatable)")


def signing_keys_from_args(args: argparse.Namespace) -> tuple[dict[str, bytes], list[str]]:
    """``({key_id: key}, problems)`` from ``--key`` / ``--key-file`` (keys are registered as secrets)."""
    from runner_wrapper.logconfig import register_secret

    keys: dict[str, bytes] = {}
    problems: list[str] = []
    specs = list(args.key) or (["default=RIGHTSIZER_SIGNING_KEY"] if not args.key_file else [])
    for spec in specs:
        kid, sep, env = spec.partition("=")
        if not sep or not kid or not env:
            problems.append(f"--key {spec!r}: expected ID=ENVVAR")
            continue
        val = os.environ.get(env)
        if not val:
            problems.append(f"--key {kid}: environment variable {env} is not set")
            continue
        keys[kid] = val.encode()
    for spec in args.key_file:
        kid, sep, path = spec.partition("=")
        if not sep or not kid or not path:
            problems.append(f"--key-file {spec!r}: expected ID=PATH")
            continue
        try:
            with open(path, "rb") as fh:
                keys[kid] = fh.read().strip()
        except OSError as exc:
            problems.append(f"--key-file {kid}: cannot read {path}: {exc.strerror or exc}")
    for k in keys.values():
        register_secret(k)
    return keys, problems


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("ingest", help="store usage records from spool files (idempotent)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", metavar="FILE", help="spool files (JSON Lines of signed records)")
    p.add_argument("--state", default=None, metavar="URL", help="state URL (default: $RETRY_BOT_STATE_URL)")
    add_key_arguments(p)
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from retry_bot.server import ingest_records
    from retry_bot.state import STATE_URL_ENV, StateError, open_store
    from runner_wrapper.record import iter_jsonl_records

    url = args.state or os.environ.get(STATE_URL_ENV)
    if not url:
        print(f"retry-bot ingest: no state URL: pass --state or set {STATE_URL_ENV}", file=sys.stderr)
        return 2
    keys, problems = signing_keys_from_args(args)
    if problems or not keys:
        for p in problems or ["no signing key configured"]:
            print(f"retry-bot ingest: {p}", file=sys.stderr)
        return 2
    try:
        store = open_store(url)
    except StateError as exc:
        print(f"retry-bot ingest: {exc}", file=sys.stderr)
        return 2
    totals: dict[str, dict] = {}
    code = 0
    try:
        for path in args.files:
            try:
                with open(path, "rb") as fh:
                    lines = fh.read().splitlines()
            except OSError as exc:
                print(f"retry-bot ingest: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
                code = 2
                continue
            items = [(f"{path}:{n}", d, lines[n - 1]) for n, d in iter_jsonl_records(lines)]
            res = ingest_records(items, store, keys, f"spool:{os.path.basename(path)}")
            totals[path] = res.as_dict()
            if res.rejected and code == 0:
                code = 1
            if args.format == "text":
                again = f" ({res.rejected_seen_before} already counted)" if res.rejected_seen_before else ""
                print(f"{path}: {res.stored} stored, {res.duplicates} already stored, {res.rejected} rejected{again}")
                for e in (res.reasons or [])[:20]:
                    print(f"  rejected {e}")
    finally:
        store.close()
    if args.format == "json":
        print(json.dumps({"files": totals}))
    return code
