"""``retry-bot predict``: the allocation the predictor would give a job, and why.

History comes from the state store (``--state`` or ``$RETRY_BOT_STATE_URL``) or
from a benchmark trace (``--trace``).  The job is named by ``--job-name`` and
``--var K=V`` (e.g. the ``SPACK_JOB_SPEC_*`` variables) or a Spack ``--spec``.
Exit status: 0 printed, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("predict", help="print the predicted requests/limits for a job, and why",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--job-name", default=None, metavar="NAME")
    p.add_argument("--var", action="append", default=[], metavar="K=V", help="a job variable (repeatable)")
    p.add_argument("--spec", default=None, help="a Spack spec, as /v1/allocation?spec= takes")
    p.add_argument("--project", default=None, help="GitLab project path")
    p.add_argument("--ref", default=None, help="the job's ref (untrusted refs also see their own history)")
    p.add_argument("--state", default=None, metavar="URL", help="state URL (default: $RETRY_BOT_STATE_URL)")
    p.add_argument("--trace", default=None, metavar="FILE", help="use a trace's jobs as history instead")
    p.add_argument("--policy", default=None, metavar="FILE")
    p.add_argument("--at", default=None, metavar="TIME",
                   help="predict as of this ISO-8601 time (default: now, or the end of --trace)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from retry_bot.predict import extract_key, parse_spack_spec, predict, SpecError, gantry_variables
    from retry_bot.predict.estimator import new_index
    from retry_bot.predict.history import parse_time
    from retry_bot.predict.sources import clamp_from_policy, index_from_store, load_policy_and_settings
    from retry_bot.problems import ConfigError
    from retry_bot.simulate.trace import TraceError, index_from_trace
    from runner_wrapper.quantity import format_cpu, human_bytes

    if not args.job_name and not args.spec and not args.var:
        print("retry-bot predict: name the job with --job-name, --spec or --var", file=sys.stderr)
        return 2
    variables = {}
    for kv in args.var:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            print(f"retry-bot predict: --var {kv!r}: expected K=V", file=sys.stderr)
            return 2
        variables[k] = v
    try:
        policy, settings = load_policy_and_settings(args.policy)
    except ConfigError as exc:
        print(f"retry-bot predict: invalid policy:\n{exc}", file=sys.stderr)
        return 2
    explicit = {}
    if args.spec:
        try:
            explicit = parse_spack_spec(args.spec)
        except SpecError as exc:
            print(f"retry-bot predict: {exc}", file=sys.stderr)
            return 2
    key = extract_key(settings.keys, job_name=args.job_name, variables=variables, explicit=explicit,
                      project=args.project)
    now = time.time()
    if args.at:
        t = parse_time(args.at)
        if t is None:
            print(f"retry-bot predict: --at {args.at!r} is not an ISO-8601 time", file=sys.stderr)
            return 2
        now = t
    if args.trace:
        try:
            index = index_from_trace(args.trace, settings, until=now if args.at else None)
        except TraceError as exc:
            print(f"retry-bot predict: {exc}", file=sys.stderr)
            return 2
        if not args.at:
            from retry_bot.simulate.trace import load_trace

            jobs = load_trace(args.trace, settings.keys)
            now = max((j.t + j.duration_s for j in jobs), default=now) + 1.0
    else:
        from retry_bot.state import STATE_URL_ENV, StateError, open_store

        url = args.state or os.environ.get(STATE_URL_ENV)
        if url:
            try:
                with open_store(url) as store:
                    index = index_from_store(store, settings)
            except StateError as exc:
                print(f"retry-bot predict: {exc}", file=sys.stderr)
                return 2
        else:
            index = new_index(settings)
    alloc = predict(index, key, now, settings, None, clamp_from_policy(policy), args.ref)
    if args.format == "json":
        print(json.dumps({"job_key": key.as_dict(), "variables": gantry_variables(alloc), **alloc.as_dict()}))
        return 0
    lim = alloc.memory_limit_bytes
    print(f"job key        {key}")
    print(f"history        {alloc.source}" + (f", level {alloc.level} ({alloc.key}), {alloc.samples} runs"
                                               if alloc.level is not None else " (no trusted run matches)"))
    print(f"memory request {human_bytes(alloc.memory_request_bytes)} ({alloc.memory_request_bytes} bytes)")
    print(f"memory limit   {human_bytes(lim) if lim else 'none'}" + (f" ({lim} bytes)" if lim else ""))
    print(f"cpu request    {format_cpu(alloc.cpu_request_cores)}")
    print(f"cpu limit      {format_cpu(alloc.cpu_limit_cores) if alloc.cpu_limit_cores else 'none'}")
    print("why:")
    for k, v in alloc.figures.items():
        shown = human_bytes(v) if k.endswith("_bytes") else (f"{v:g}" if isinstance(v, float) else str(v))
        print(f"  {k:<30} {shown}")
    print("variables:")
    for k, v in gantry_variables(alloc).items():
        print(f"  {k}={v}")
    return 0
