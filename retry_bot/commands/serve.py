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


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("serve", help="serve /v1/allocation, /v1/usage, /healthz and /metrics",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--listen", default="127.0.0.1:8088", metavar="HOST:PORT",
                   help="address of the allocation and usage endpoints (default 127.0.0.1:8088; the bot's own /metrics uses 9464)")
    p.add_argument("--state", default=None, metavar="URL", help="state URL (default: $RETRY_BOT_STATE_URL)")
    p.add_argument("--policy", default=None, metavar="FILE", help="policy (its [prediction] table and runner classes)")
    p.add_argument("--token-env", default="RIGHTSIZER_COLLECTOR_TOKEN", metavar="NAME",
                   help="environment variable with the bearer token(s) for POST /v1/usage")
    p.add_argument("--max-body", type=int, default=1 << 20, metavar="BYTES")
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

    log = get_logger("retry_bot.serve")
    host, _, port = args.listen.rpartition(":")
    if not host or not port.isdigit():
        print(f"retry-bot serve: --listen {args.listen!r}: expected HOST:PORT", file=sys.stderr)
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
    keys, problems = signing_keys_from_args(args)
    for p in problems:
        log.warning("serve.key_problem", detail=p)
    if not tokens:
        log.warning("serve.no_token", detail=f"${args.token_env} is empty: POST /v1/usage answers 401")
    try:
        server = AllocationServer(store=store, settings=settings, tokens=tokens, signing_keys=keys,
                                  registry=CollectorRegistry(), max_body=args.max_body,
                                  clamp=clamp_from_policy(policy), host=host.strip("[]"),
                                  port=int(port), refresh_seconds=args.refresh)
    except OSError as exc:
        print(f"retry-bot serve: cannot listen on {args.listen}: {exc.strerror or exc}", file=sys.stderr)
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
