"""``retry-bot serve``: run the allocation / usage-collection HTTP endpoints standalone.

Endpoints: ``GET /v1/allocation?spec=...`` (spack-gantry compatible),
``POST /v1/usage`` (bearer token), ``/healthz``, ``/metrics``.  Tokens come
from the environment variable named by ``--token-env`` (comma-separated for
several); signing keys from ``--key ID=ENVVAR`` / ``--key-file ID=PATH``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from retry_bot.commands.ingest import add_key_arguments, signing_keys_from_args

#: Largest --max-body accepted: a batch of usage records is a few KiB each.
MAX_BODY_LIMIT = 1 << 30


def _whole(text: str, lo: int, hi: int) -> int:
    """``text`` as an integer from ``lo`` to ``hi``, else ValueError naming the range."""
    try:
        n = int(str(text).strip())
    except ValueError:
        raise ValueError(f"must be a whole number from {lo} to {hi}") from None
    if not lo <= n <= hi:
        raise ValueError(f"{n} is out of range (must be from {lo} to {hi})")
    return n


def _limits(args: argparse.Namespace) -> tuple[dict, list[str]]:
    """The server's bounds from the command line, with one message per bad option."""
    out: dict = {}
    problems: list[str] = []
    for opt, attr, lo, hi in (("--max-body", "max_body", 1, MAX_BODY_LIMIT),
                              ("--max-connections", "max_connections", 1, 100_000),
                              ("--workers", "workers", 1, 1024)):
        try:
            out[attr] = _whole(getattr(args, attr), lo, hi)
        except ValueError as exc:
            problems.append(f"{opt} {getattr(args, attr)}: {exc}")
    try:
        t = float(args.read_timeout)
        if not 0.1 <= t <= 3600:  # also rejects nan
            raise ValueError
        out["read_timeout"] = t
    except ValueError:
        problems.append(f"--read-timeout {args.read_timeout}: must be a number of seconds from 0.1 to 3600")
    return out, problems


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("serve", help="serve /v1/allocation, /v1/usage, /healthz and /metrics",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--listen", default="127.0.0.1:8088", metavar="HOST:PORT",
                   help="address of the allocation and usage endpoints (default 127.0.0.1:8088; the bot's own /metrics uses 9464)")
    p.add_argument("--state", default=None, metavar="URL", help="state URL (default: $RETRY_BOT_STATE_URL)")
    p.add_argument("--policy", default=None, metavar="FILE", help="policy (its [prediction] table and runner classes)")
    p.add_argument("--token-env", default="RIGHTSIZER_COLLECTOR_TOKEN", metavar="NAME",
                   help="environment variable with the bearer token(s) for POST /v1/usage")
    p.add_argument("--max-body", default=str(1 << 20), metavar="BYTES",
                   help=f"largest POST /v1/usage body, in bytes (default {1 << 20}; at most {MAX_BODY_LIMIT})")
    p.add_argument("--read-timeout", default="10", metavar="SECONDS",
                   help="a client has this long to send its whole request, else 408 (default 10)")
    p.add_argument("--max-connections", default="256", metavar="N",
                   help="open connections at most; a new one evicts the longest-waiting incomplete one "
                        "(default 256)")
    p.add_argument("--workers", default="8", metavar="N", help="threads answering requests (default 8)")
    p.add_argument("--refresh", type=float, default=5.0, metavar="SECONDS",
                   help="apply new usage records from the store at least this often (incrementally; "
                        "at once after POST /v1/usage)")
    add_key_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from prometheus_client import CollectorRegistry

    from retry_bot.predict.sources import clamp_from_policy, load_policy_and_settings
    from retry_bot.problems import ConfigError
    from retry_bot.server import AllocationServer
    from retry_bot.state import STATE_URL_ENV, StateError, open_store
    from runner_wrapper.logconfig import get_logger

    from retry_bot.httpserver import ListenError, parse_listen

    log = get_logger("retry_bot.serve")
    try:
        host, port = parse_listen(args.listen)
    except ListenError as exc:
        print(f"retry-bot serve: --listen {args.listen}: {exc}", file=sys.stderr)
        return 2
    bounds, problems = _limits(args)
    if problems:
        for p in problems:
            print(f"retry-bot serve: {p}", file=sys.stderr)
        return 2
    try:
        policy, settings = load_policy_and_settings(args.policy)
    except ConfigError as exc:
        print(f"retry-bot serve: invalid policy:\n{exc}", file=sys.stderr)
        return 2
    url = args.state or os.environ.get(STATE_URL_ENV)
    store = None
    if url:
        try:
            store = open_store(url)
        except StateError as exc:
            print(f"retry-bot serve: {exc}", file=sys.stderr)
            return 2
    else:
        log.warning("serve.no_state", detail=f"no --state or ${STATE_URL_ENV}: no history, usage collection off")
    tokens = [t.strip() for t in os.environ.get(args.token_env, "").split(",") if t.strip()]
    keys, key_problems = signing_keys_from_args(args)
    for kp in key_problems:
        log.warning("serve.key_problem", detail=kp)
    if not tokens:
        log.warning("serve.no_token", detail=f"${args.token_env} is empty: POST /v1/usage answers 401")
    try:
        server = AllocationServer(store=store, settings=settings, tokens=tokens, signing_keys=keys,
                                  registry=CollectorRegistry(), clamp=clamp_from_policy(policy),
                                  host=host, port=port, refresh_seconds=args.refresh, **bounds)
    except (OSError, OverflowError) as exc:
        detail = getattr(exc, "strerror", None) or exc
        print(f"retry-bot serve: cannot listen on {args.listen}: {detail}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    from retry_bot.server import SWITCH_INTERVAL

    sys.setswitchinterval(SWITCH_INTERVAL)   # allocations stay fast while history streams in

    def on_hup(*_: object) -> None:  # reload the policy: [prediction] and the caps (keep the last good one)
        if not args.policy:
            return
        try:
            new_policy, new_settings = load_policy_and_settings(args.policy)
        except ConfigError as exc:
            log.error("serve.policy_reload_rejected", policy=args.policy, kept="the last good policy",
                      problems=[str(p) for p in exc.problems])
            return
        server.configure(new_settings, clamp_from_policy(new_policy))
        log.info("serve.policy_reloaded", policy=args.policy)

    signal.signal(signal.SIGHUP, on_hup)
    log.info("serve.listening", url=server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
        if store is not None:
            store.close()
    return 0
