"""``runner-wrapper``: command line.

::

    runner-wrapper [--config PATH] [--log-format auto|console|json] [--log-level LEVEL] COMMAND

    executor config|prepare|run SCRIPT STAGE|cleanup   GitLab Runner custom executor driver
    measure [--memory-limit 2G] [--cpus 2] [--json] -- CMD ...
    doctor [--json]

The ``executor`` path is parsed by hand and imports little: it starts once per
build stage, so start-up time is build time.  ``executor run`` goes straight to
:func:`runner_wrapper.stagerun.fast_main` (no argparse, structlog, typing, TOML
parser or configuration classes) and falls back to the full path only when the
configuration or the job state is not there yet.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~5 ms of every stage's start-up
    from typing import Sequence

USAGE = """usage: runner-wrapper [--config PATH] [--log-format auto|console|json] [--log-level LEVEL] COMMAND

commands:
  executor config                 print the JSON GitLab Runner reads (config_exec)
  executor prepare                create the job's cgroup and apply its limits (prepare_exec)
  executor run SCRIPT STAGE       run one stage script in its own cgroup (run_exec)
  executor cleanup                kill leftovers, record usage, remove the cgroup (cleanup_exec)
  measure [--memory-limit Q] [--cpus Q] [--json] -- CMD ...
                                  run CMD in a fresh cgroup and report what it used
  doctor [--json]                 show what this host offers and what the wrapper will do
  spool send [--dry-run] [--json] re-send spooled usage records the collector has not acknowledged
                                  (exit 0: up to date, 1: records remain, 2: usage/config error)
"""


def _fail(msg: str, code: int = 2) -> int:
    sys.stderr.write(f"runner-wrapper: {msg}\n")
    return code


def main(argv: Sequence[str] | None = None) -> int:
    code = _main(argv)
    if argv is None and _FAST_EXIT:
        # ``executor run`` of a real process: skip the interpreter's teardown (module and GC
        # finalisation, ~5 ms of every stage); everything the stage wrote is flushed here.
        _flush_and_exit(code)
    return code


_FAST_EXIT: list[bool] = []


def _flush_and_exit(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _main(argv: Sequence[str] | None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    config_path: str | None = None
    log_format: str | None = None
    log_level: str | None = None
    while args and args[0].startswith("--"):
        opt = args.pop(0)
        name, eq, value = opt.partition("=")
        if name in ("--help",):
            sys.stdout.write(USAGE)
            return 0
        if name not in ("--config", "--log-format", "--log-level"):
            return _fail(f"unknown option {opt}\n{USAGE}")
        if not eq:
            if not args:
                return _fail(f"{name} needs a value")
            value = args.pop(0)
        if name == "--config":
            config_path = value
        elif name == "--log-format":
            log_format = value
        else:
            log_level = value
    if not args:
        sys.stderr.write(USAGE)
        return 2
    if log_format or log_level:
        from runner_wrapper.logconfig import configure_logging

        try:
            configure_logging(log_format or "auto", log_level or "info")
        except ValueError as exc:
            return _fail(str(exc))
    cmd, rest = args[0], args[1:]
    if cmd in ("-h", "help"):
        sys.stdout.write(USAGE)
        return 0
    if cmd == "executor":
        return _executor(rest, config_path)
    if cmd == "measure":
        return _measure(rest, config_path)
    if cmd == "doctor":
        return _doctor(rest, config_path)
    if cmd == "spool":
        return _spool(rest, config_path)
    return _fail(f"unknown command {cmd!r}\n{USAGE}")


def _load(config_path: str | None, use_cached: bool = False):
    from runner_wrapper.config import CONFIG_ENV, CONFIG_JSON_ENV, DEFAULT_CONFIG_PATH, load_config

    cached = os.environ.get(CONFIG_JSON_ENV) if use_cached else None
    if cached:
        from runner_wrapper.config import ConfigError, config_from_json

        try:
            cfg = config_from_json(cached)
            wanted = config_path or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG_PATH
            if cfg.source == wanted or (cfg.source is None and not os.path.exists(wanted)):
                return cfg
        except ConfigError:
            pass  # fall back to reading the file
    return load_config(config_path)


def _executor(rest: list[str], config_path: str | None) -> int:
    if len(rest) == 3 and rest[0] == "run":
        code = _fast_run(config_path, rest[1], rest[2])
        if code is not None:
            _FAST_EXIT.append(True)
            return code
    from runner_wrapper.executor import DriverEnv

    environ = os.environ
    env = DriverEnv.from_environ(environ)
    if not rest or rest[0] not in ("config", "prepare", "run", "cleanup"):
        sys.stderr.write("runner-wrapper: executor needs one of: config, prepare, run SCRIPT STAGE, cleanup\n")
        return env.system_failure
    stage = rest[0]
    if stage == "run" and len(rest) != 3:
        sys.stderr.write("runner-wrapper: usage: executor run SCRIPT STAGE (GitLab Runner passes both)\n")
        return env.system_failure
    from runner_wrapper.config import ConfigError

    try:
        cfg = _load(config_path, use_cached=stage != "config")
    except ConfigError as exc:
        # stderr: it reaches the job log for every stage, and never corrupts config's JSON on stdout.
        sys.stderr.write(f"runner-wrapper: ERROR: {exc}\n")
        return env.system_failure
    from runner_wrapper import executor as ex

    try:
        ex.register_secrets(cfg, environ)
        if stage == "config":
            return ex.cmd_config(cfg, environ)
        if stage == "prepare":
            return ex.cmd_prepare(cfg, environ)
        if stage == "run":
            return ex.cmd_run(cfg, environ, rest[1], rest[2])
        return ex.cmd_cleanup(cfg, environ)
    except Exception as exc:  # noqa: BLE001 - a wrapper bug must be a system failure, not a traceback
        sys.stderr.write(f"runner-wrapper: ERROR: internal error in executor {stage}: "
                         f"{type(exc).__name__}: {exc}\n")
        try:
            from runner_wrapper.logconfig import get_logger

            get_logger("runner_wrapper").error("internal error", stage=stage, exc_info=True)
        except Exception:  # noqa: BLE001
            pass
        return env.system_failure


def _fast_run(config_path: str | None, script: str, stage: str) -> int | None:
    """The lean ``executor run``; ``None`` when the full path must run the stage instead."""
    from runner_wrapper.stagerun import DriverEnv, fast_main

    try:
        return fast_main(config_path, script, stage)
    except Exception as exc:  # noqa: BLE001 - a wrapper bug must be a system failure, not a traceback
        sys.stderr.write(f"runner-wrapper: ERROR: internal error in executor run: {type(exc).__name__}: {exc}\n")
        return DriverEnv.from_environ(os.environ).system_failure


def _measure(rest: list[str], config_path: str | None) -> int:
    import argparse

    from runner_wrapper.config import ConfigError
    from runner_wrapper.quantity import QuantityError, parse_cpu, parse_memory

    if "--" in rest:
        i = rest.index("--")
        opts, cmd = rest[:i], rest[i + 1:]
    else:
        opts, cmd = [], rest
        while cmd and cmd[0].startswith("-"):
            opts.append(cmd.pop(0))
            if opts[-1] in ("--memory-limit", "--cpus") and cmd:
                opts.append(cmd.pop(0))
    p = argparse.ArgumentParser(prog="runner-wrapper measure")
    p.add_argument("--memory-limit", help="memory limit, Kubernetes quantity (2G, 512Mi)")
    p.add_argument("--cpus", help="CPU limit, Kubernetes quantity (2, 1500m)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stderr")
    ns = p.parse_args(opts)
    try:
        mem = parse_memory(ns.memory_limit) if ns.memory_limit else None
        cpus = parse_cpu(ns.cpus) if ns.cpus else None
    except QuantityError as exc:
        return _fail(f"measure: {exc}")
    try:
        cfg = _load(config_path)
    except ConfigError as exc:
        return _fail(str(exc))
    from runner_wrapper.executor import register_secrets
    from runner_wrapper.measure import run_measure

    register_secrets(cfg, os.environ)
    return run_measure(cfg, cmd, mem, cpus, ns.json)


def _doctor(rest: list[str], config_path: str | None) -> int:
    import argparse

    from runner_wrapper.config import ConfigError

    p = argparse.ArgumentParser(prog="runner-wrapper doctor")
    p.add_argument("--json", action="store_true")
    ns = p.parse_args(rest)
    try:
        cfg = _load(config_path)
    except ConfigError as exc:
        for problem in exc.problems:  # every problem of the file, not only the first
            print(f"PROBLEM: {problem}")
        return 1
    from runner_wrapper.doctor import run_doctor
    from runner_wrapper.executor import register_secrets

    register_secrets(cfg, os.environ)
    return run_doctor(cfg, os.environ, ns.json)


def _spool(rest: list[str], config_path: str | None) -> int:
    """``spool send``: re-deliver the spool's unacknowledged records (:mod:`runner_wrapper.spool`)."""
    import argparse

    class _Parser(argparse.ArgumentParser):
        def error(self, message: str) -> None:  # type: ignore[override]  # one line, exit 2
            raise SystemExit(_fail(f"spool: {message} (usage: runner-wrapper spool send [--dry-run] [--json])"))

    p = _Parser(prog="runner-wrapper spool")
    sub = p.add_subparsers(dest="action", metavar="send", required=True)
    send = sub.add_parser("send", help="re-send spooled usage records the collector has not acknowledged")
    send.add_argument("--config", dest="sub_config", metavar="FILE", help="wrapper.toml (default: the global one)")
    send.add_argument("--dry-run", action="store_true", help="only count what would be sent")
    send.add_argument("--json", action="store_true", help="print the outcome as JSON on stdout")
    send.add_argument("--wait", action="store_true", help="wait for another running sender instead of exiting")
    try:
        ns = p.parse_args(rest)
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, int) else 2
    from runner_wrapper.config import ConfigError

    try:
        cfg = _load(ns.sub_config or config_path)
    except ConfigError as exc:
        return _fail(f"spool send: {exc}")
    from runner_wrapper.spool import run_send

    return run_send(cfg, os.environ, dry_run=ns.dry_run, as_json=ns.json, wait=ns.wait)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
