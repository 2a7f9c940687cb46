"""``retry-bot run`` (poll until SIGTERM) and ``retry-bot once`` (one cycle, for cron and debugging).

Both read ``--config`` (default ``config/bot.toml``).  ``--dry-run`` decides and
logs but writes nothing to GitLab; its decisions are provisional (a later live
run decides the same jobs).

Exit codes: 0 done; 1 ``once``: the cycle had errors (a project GitLab refused or
could not serve, a job that could not be handled: listed on stderr), or ``run``/``once``:
GitLab refused the token for every watched project (fatal); 2 bad configuration or
state store.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register", "handle_run", "handle_once"]


def register(subparsers: Any) -> None:
    for name, func, helptext in (
        ("run", handle_run, "poll GitLab and act on failed jobs until SIGTERM (SIGHUP reloads the policy)"),
        ("once", handle_once, "one poll cycle, then exit (cron, debugging)"),
    ):
        p = subparsers.add_parser(name, help=helptext, description=__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("--config", default="config/bot.toml", help="bot configuration (default: %(default)s)")
        p.add_argument("--dry-run", action="store_true", default=None,
                       help="decide and log, write nothing to GitLab")
        p.set_defaults(func=func)


def _bot(args: argparse.Namespace) -> Any:
    from retry_bot.live.config import load_config
    from retry_bot.live.daemon import Bot
    from retry_bot.problems import ConfigError
    from retry_bot.state import StateError, StateUnavailable

    try:
        cfg = load_config(args.config)
        if not cfg.gitlab.token:
            print(f"retry-bot: no GitLab token: set {cfg.gitlab.token_source}", file=sys.stderr)
            return None
        return Bot(cfg, dry_run=args.dry_run)
    except ConfigError as exc:
        print(f"retry-bot: invalid configuration:\n{exc}", file=sys.stderr)
    except (StateError, StateUnavailable) as exc:
        print(f"retry-bot: state store: {exc}", file=sys.stderr)
    return None


def handle_run(args: argparse.Namespace) -> int:
    from retry_bot.live.daemon import serve

    bot = _bot(args)
    return 2 if bot is None else serve(bot)


def handle_once(args: argparse.Namespace) -> int:
    from retry_bot.live.daemon import serve

    bot = _bot(args)
    return 2 if bot is None else serve(bot, once=True)
