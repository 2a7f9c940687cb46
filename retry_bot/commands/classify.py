"""``retry-bot classify``: explain, offline, how the bot judges one failed job.

Reads the tail of a trace file (bounded memory: a 100 MB or binary log is
fine), optional GitLab job JSON, failure reason and exit code; prints the
category, family, rule, evidence and the action the policy would take::

    retry-bot classify --trace job.log --failure-reason script_failure --exit-code 137
    retry-bot classify --trace job.log --job-json job.json --policy policy.toml --format json

Without ``--job-json``, the job's identity (id, name, project, ref,
variables) comes from the trace's verified usage record when there is one,
so the decision uses the record's limit and peak; with neither, the job is
called "(offline trace)" and the reason reads "the job of this trace failed".

Exit codes: 0 the job was classified; 2 bad input (missing file, bad JSON,
invalid taxonomy or policy), with a message naming the problem.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from retry_bot.model import Classification, JobFacts
    from runner_wrapper.record import UsageRecord

EXIT_OK = 0
EXIT_BAD_INPUT = 2
DEFAULT_KEY_ENV = "RIGHTSIZER_SIGNING_KEY"
#: The job name used when neither job JSON nor a verified usage record tells who the job was.
OFFLINE_JOB_NAME = "(offline trace)"


def facts_from_record(record: UsageRecord) -> JobFacts:
    """:class:`~retry_bot.model.JobFacts` from a *verified* usage record (when no job JSON is given).

    The record is signed by the runner wrapper, which took the job's identity
    from the runner's job response, so its id, name, project, ref and
    variables can be trusted; the decision then uses the record's limits and
    peak (a record for job 4242 is no longer dropped as "another job's").
    """
    from retry_bot.model import JobFacts

    job = record.job
    return JobFacts(
        job_id=job.id, name=job.name or OFFLINE_JOB_NAME, project_id=job.project_id or 0,
        project_path=job.project_path or "", pipeline_id=job.pipeline_id or 0, stage=job.stage or "",
        ref=job.ref or "", protected=job.protected, web_url=job.url, runner=record.host.runner,
        variables=dict(job.variables or {}),
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "classify", help="classify one failed job offline and show why",
        description="Classify one failed GitLab job from its trace (and optionally its job JSON), "
        "print the category, family, deciding rule, evidence and the action the policy would take.")
    p.add_argument("--trace", required=True, metavar="FILE",
                   help="the job log ('-' for stdin); only the last 256 KiB are read")
    p.add_argument("--failure-reason", metavar="R", help="GitLab failure_reason (overrides the job JSON)")
    p.add_argument("--exit-code", type=int, metavar="N", help="the job's exit code (GraphQL exitCode)")
    p.add_argument("--job-json", type=Path, metavar="FILE",
                   help="GitLab REST job JSON (GET /projects/:id/jobs/:job_id)")
    p.add_argument("--status", metavar="S", help="job status (e.g. canceled); default from the JSON, else failed")
    p.add_argument("--policy", type=Path, metavar="FILE",
                   help="retry policy TOML (default: the built-in default policy)")
    p.add_argument("--taxonomy", type=Path, action="append", default=[], metavar="FILE",
                   help="taxonomy extension/override file, applied after the default (repeatable)")
    p.add_argument("--no-default-taxonomy", action="store_true",
                   help="use only the --taxonomy files, not the shipped default")
    p.add_argument("--signing-key-env", default=DEFAULT_KEY_ENV, metavar="VAR",
                   help=f"environment variable holding the usage-record signing key (default {DEFAULT_KEY_ENV})")
    p.add_argument("--signing-key-id", default="default", metavar="ID",
                   help="key id of that key (default: default, as the runner wrapper)")
    p.add_argument("--tail-bytes", type=int, default=None, metavar="N",
                   help="how much of the end of the trace to read (default 262144)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def _fail(message: str) -> int:
    print(f"retry-bot classify: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def run(args: argparse.Namespace) -> int:
    from retry_bot.classify import (
        DEFAULT_TAIL_BYTES,
        classify,
        extract_verified_record,
        facts_from_job_json,
        is_known_failure_reason,
        load_taxonomy,
        read_trace_tail,
    )
    from retry_bot.classify.jobjson import JobJsonError
    from retry_bot.model import JobFacts
    from retry_bot.problems import ConfigError
    from runner_wrapper.logconfig import get_logger, register_secret

    log = get_logger("retry_bot.classify")
    warnings: list[str] = []
    tail_bytes = args.tail_bytes if args.tail_bytes is not None else DEFAULT_TAIL_BYTES
    if tail_bytes <= 0:
        return _fail("--tail-bytes must be positive")

    # taxonomy
    try:
        taxonomy = load_taxonomy(args.taxonomy, include_default=not args.no_default_taxonomy)
    except ConfigError as exc:
        for problem in exc.problems:
            print(str(problem), file=sys.stderr)
        return _fail(f"invalid taxonomy ({len(exc.problems)} problem(s))")

    # trace tail (bounded)
    try:
        if args.trace == "-":
            tail = read_trace_tail(sys.stdin.buffer, tail_bytes)
        else:
            tail = read_trace_tail(Path(args.trace), tail_bytes)
    except FileNotFoundError:
        return _fail(f"{args.trace}: no such file")
    except IsADirectoryError:
        return _fail(f"{args.trace}: is a directory")
    except OSError as exc:
        return _fail(f"{args.trace}: cannot read: {exc.strerror or exc}")

    # usage record
    keys: dict[str, bytes] = {}
    key = os.environ.get(args.signing_key_env, "") if args.signing_key_env else ""
    if key:
        register_secret(key)
        keys[args.signing_key_id] = key.encode("utf-8")

    # job facts: the job JSON, else the verified (signed, so trustworthy) usage record
    facts: JobFacts | None = None
    if args.job_json is not None:
        try:
            data = json.loads(args.job_json.read_text("utf-8"))
            facts = facts_from_job_json(data)
        except FileNotFoundError:
            return _fail(f"{args.job_json}: no such file")
        except (OSError, UnicodeDecodeError) as exc:
            return _fail(f"{args.job_json}: cannot read: {exc}")
        except json.JSONDecodeError as exc:
            return _fail(f"{args.job_json}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")
        except JobJsonError as exc:
            return _fail(f"{args.job_json}: {exc}")
        facts_source = "job-json"
    # the record must be this job's: a replayed marker of another job is rejected (docs/usage-record.md)
    if facts is None:
        record, rejected = extract_verified_record(tail, keys)
    else:
        record, rejected = extract_verified_record(tail, keys, job_id=facts.job_id or None,
                                                   project_id=facts.project_id or None)
    if rejected:
        warnings.append(rejected)
        log.warning("usage_record_rejected", reason=rejected)
    if facts is None and record is not None:
        facts, facts_source = facts_from_record(record), "usage-record"
    elif facts is None:
        facts, facts_source = JobFacts(job_id=0, name=OFFLINE_JOB_NAME), "none"
    from dataclasses import replace

    if args.failure_reason is not None:
        facts = replace(facts, failure_reason=args.failure_reason.strip() or None)
    if args.exit_code is not None:
        facts = replace(facts, exit_code=args.exit_code)
    if args.status is not None:
        facts = replace(facts, status=args.status.strip().lower())
    if not is_known_failure_reason(facts.failure_reason):
        msg = f"unknown failure_reason {facts.failure_reason!r}: classified from the trace and exit code only"
        warnings.append(msg)
        log.warning("unknown_failure_reason", failure_reason=facts.failure_reason)

    verdict = classify(facts, tail, taxonomy, record)

    # action: the real decision when the policy/decide modules are there
    try:
        out_decision, action, reason, action_source = _decide(args, facts, verdict, record)
    except _PolicyProblem as exc:
        for line in exc.lines:
            print(line, file=sys.stderr)
        return _fail(exc.summary)
    if reason and facts_source == "none":
        # decide() names the job ("job 0 '(offline trace)' failed: ..."): say what we know instead
        reason = reason.replace(f"job 0 {OFFLINE_JOB_NAME!r} failed", "the job of this trace failed", 1)
        if out_decision is not None:
            out_decision["reason"] = reason
    if action is None:
        action = taxonomy.default_action(verdict.family)
        reason = (f"taxonomy default for family {verdict.family.value} "
                  "(the decision module is not available)")
        action_source = "taxonomy-default"

    result: dict[str, Any] = {
        "job_id": facts.job_id or None,
        "job_name": facts.name if facts.name and facts_source != "none" else None,
        "facts_source": facts_source,
        "failure_reason": facts.failure_reason,
        "exit_code": facts.exit_code,
        "category": verdict.category,
        "family": verdict.family.value,
        "rule": verdict.rule,
        "confidence": verdict.confidence,
        "probability": verdict.probability,
        "evidence": list(verdict.evidence),
        "action": action,
        "reason": reason,
        "action_source": action_source,
        "usage_record": _record_summary(record, rejected),
        "trace_bytes_read": len(tail),
        "warnings": warnings,
    }
    if out_decision is not None:
        result["decision"] = out_decision
    if args.format == "json":
        print(json.dumps(result, indent=2, sort_keys=False))
    else:
        _print_text(result)
    return EXIT_OK


class _PolicyProblem(Exception):
    def __init__(self, summary: str, lines: list[str]):
        super().__init__(summary)
        self.summary = summary
        self.lines = lines


def _decide(args: argparse.Namespace, facts: JobFacts, verdict: Classification, record: UsageRecord | None) -> tuple[dict[str, Any] | None, str | None, str | None, str | None]:
    """Run the real decision function with the given (or default) policy."""
    from retry_bot.decide import ClassUsage, decide
    from retry_bot.policy import default_policy, load_policy
    from retry_bot.problems import ConfigError

    try:
        policy = load_policy(args.policy) if args.policy is not None else default_policy()
    except ConfigError as exc:
        raise _PolicyProblem(f"invalid policy ({len(exc.problems)} problem(s))",
                             [str(p) for p in exc.problems]) from None
    decision = decide(facts, verdict, [], policy, ClassUsage(), record=record)
    d = decision.to_dict()
    source = f"policy {args.policy}" if args.policy is not None else "default policy"
    return d, d.get("action"), d.get("reason"), source


def _record_summary(record: UsageRecord | None, rejected: str | None) -> dict[str, Any] | None:
    if record is None and rejected is None:
        return None
    out: dict[str, Any] = {"verified": record is not None, "rejected": rejected}
    if record is not None:
        out.update(job_id=record.job.id, oom_kills=record.usage.oom_kills,
                   memory_peak_bytes=record.usage.memory_peak_bytes,
                   memory_limit_bytes=record.limits.memory_limit_bytes, backend=record.host.backend)
    return out


def _print_text(r: dict[str, Any]) -> None:
    who = f"job {r['job_id']}" if r["job_id"] else "job"
    if r["job_name"]:
        who += f" ({r['job_name']})"
    sure = f", p={r['probability']:.2f}" if r.get("probability") is not None else ""
    print(f"{who}: {r['family']} / {r['category']}  [rule {r['rule']}, {r['confidence']} evidence{sure}]")
    for ev in r["evidence"]:
        print(f"  evidence: {ev}")
    print(f"  action:   {r['action']}  ({r['action_source']}: {r['reason']})")
    rec = r["usage_record"]
    if rec:
        if rec["verified"]:
            print(f"  usage record: verified, oom_kills={rec['oom_kills']}")
        if rec["rejected"]:
            print(f"  usage record: {rec['rejected']}")
    for w in r["warnings"]:
        if not (rec and w == rec.get("rejected")):
            print(f"  warning: {w}")
