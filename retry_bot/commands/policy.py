"""``retry-bot policy check|show|init``: validate, display and create policy files.

* ``check FILE`` prints ``OK`` (exit 0) or every problem, one per line as
  ``FILE:LINE: key.path: message`` (exit 2);
* ``show FILE`` prints the effective policy, defaults filled in, as TOML
  (exit 2 with the problems when the file is invalid);
* ``init [--output FILE] [--force]`` writes the annotated default policy
  (to stdout with ``--output -``), refusing to overwrite a file without ``--force``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

EXIT_OK = 0
EXIT_PROBLEMS = 2


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "policy", help="check, show or create a retry policy (TOML)",
        description="Work with the admin-edited retry policy: what the bot retries, resizes or leaves alone.")
    sub = p.add_subparsers(dest="policy_command", metavar="SUBCOMMAND")
    c = sub.add_parser("check", help="validate a policy file; print every problem (exit 2) or OK")
    c.add_argument("file", type=Path, metavar="FILE")
    c.set_defaults(func=_check)
    s = sub.add_parser("show", help="print the effective policy with every default filled in (TOML)")
    s.add_argument("file", type=Path, metavar="FILE", nargs="?",
                   help="policy file (default: the built-in default policy)")
    s.set_defaults(func=_show)
    i = sub.add_parser("init", help="write the annotated default policy")
    i.add_argument("--output", "-o", default="policy.toml", metavar="FILE",
                   help="where to write it (default: ./policy.toml; '-' for stdout)")
    i.add_argument("--force", action="store_true", help="overwrite an existing file")
    i.set_defaults(func=_init)
    p.set_defaults(func=lambda args: _usage(p))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return EXIT_PROBLEMS


def _report(exc: Exception) -> int:
    from retry_bot.problems import ConfigError

    if isinstance(exc, ConfigError):
        for problem in exc.problems:
            print(str(problem), file=sys.stderr)
        n = len(exc.problems)
        print(f"{n} problem{'s' if n != 1 else ''} found", file=sys.stderr)
    else:  # pragma: no cover - load_policy only raises ConfigError
        print(str(exc), file=sys.stderr)
    return EXIT_PROBLEMS


def _check(args: argparse.Namespace) -> int:
    from retry_bot.policy import load_policy
    from retry_bot.problems import ConfigError

    try:
        policy = load_policy(args.file)
    except ConfigError as exc:
        return _report(exc)
    for warning in policy_warnings(policy):
        print(f"{args.file}: warning: {warning}", file=sys.stderr)
    print("OK")
    return EXIT_OK


def policy_warnings(policy: object) -> list[str]:
    """Valid but probably unintended settings: said, never fatal (exit 0)."""
    from retry_bot.policy import Action, UnknownLimit

    out: list[str] = []
    rule = policy.families.get("oom")  # type: ignore[attr-defined]
    resizes = rule is not None and rule.action == Action.RESIZE
    knows_default = policy.resize.default_memory is not None or any(  # type: ignore[attr-defined]
        rc.default_memory is not None for rc in policy.runner_classes)  # type: ignore[attr-defined]
    gives_up = policy.resize.unknown_limit == UnknownLimit.NONE  # type: ignore[attr-defined]
    if resizes and not knows_default and gives_up:
        out.append("resize.unknown_limit is \"none\" and neither resize.default_memory nor any runner class's "
                   "default_memory is set: an OOM-killed job with no usage record and no memory variable "
                   "(e.g. Kubernetes 'OOMKilled' under the runner's default limit) cannot be resized and is "
                   "left alone; set resize.default_memory to your runners' default memory limit")
    return out


def _show(args: argparse.Namespace) -> int:
    import tomli_w

    from retry_bot.policy import default_policy, load_policy, policy_to_dict
    from retry_bot.problems import ConfigError

    try:
        policy = load_policy(args.file) if args.file is not None else default_policy()
    except ConfigError as exc:
        return _report(exc)
    sys.stdout.write(tomli_w.dumps(policy_to_dict(policy)))
    return EXIT_OK


def _init(args: argparse.Namespace) -> int:
    from retry_bot.policy import default_policy_text

    text = default_policy_text()
    if args.output == "-":
        sys.stdout.write(text)
        return EXIT_OK
    out = Path(args.output)
    if out.is_dir():
        print(f"{out}: is a directory; give a file name with --output", file=sys.stderr)
        return EXIT_PROBLEMS
    try:
        if args.force:
            tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, out)
        else:
            # "x": create, failing if the file exists (no check-then-write race).
            with open(out, "x", encoding="utf-8") as fh:
                fh.write(text)
    except FileExistsError:
        print(f"{out}: already exists; not overwriting it (use --force)", file=sys.stderr)
        return EXIT_PROBLEMS
    except OSError as exc:
        print(f"{out}: cannot write: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_PROBLEMS
    print(f"wrote {out}; check it with: retry-bot policy check {out}", file=sys.stderr)
    return EXIT_OK
