"""The effective policy as a TOML-ready dict, for ``retry-bot policy show``.

Every default is written out, quantities and durations are spelled so they
read back to exactly the same values, and absent optional values are left
out (TOML has no null).  ``parse_policy(tomli_w.dumps(policy_to_dict(p)))``
gives back ``p``.
"""

from __future__ import annotations

from typing import Any

from retry_bot.policy.load import SCHEMA_VERSION
from retry_bot.policy.model import Backoff, Override, Policy, Rule, RuleUpdate
from retry_bot.policy.units import exact_cpu, exact_memory, format_duration

__all__ = ["policy_to_dict"]


def _backoff(b: Backoff) -> dict[str, Any]:
    return {"initial": format_duration(b.initial), "factor": b.factor, "max": format_duration(b.max)}


def _rule(r: Rule) -> dict[str, Any]:
    out: dict[str, Any] = {"action": r.action.value, "budget": r.budget, "backoff": _backoff(r.backoff)}
    if r.min_probability > 0:  # 0.0, the default, is "any verdict": not written (0 is not a valid value)
        out["min_probability"] = r.min_probability
    return out


def _update(u: RuleUpdate) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if u.action is not None:
        out["action"] = u.action.value
    if u.budget is not None:
        out["budget"] = u.budget
    if u.backoff is not None:
        out["backoff"] = _backoff(u.backoff)
    if u.min_probability is not None:
        out["min_probability"] = u.min_probability
    return out


def _override(o: Override) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("project", "job", "ref"):
        pat = getattr(o, key)
        if pat is not None:
            out[key] = pat.pattern
    if o.family is not None:
        out["family"] = o.family.value
    if o.category is not None:
        out["category"] = o.category
    out.update(_update(o.update))
    if o.max_memory is not None:
        out["max_memory"] = exact_memory(o.max_memory)
    if o.dry_run is not None:
        out["dry_run"] = o.dry_run
    return out


def policy_to_dict(policy: Policy) -> dict[str, Any]:
    """The effective policy, defaults filled in, in the shape of ``policy.toml``."""
    p = policy
    v = p.variables
    r = p.resize
    resize: dict[str, Any] = {
        "ratio": r.ratio,
        "min_bump": exact_memory(r.min_bump),
        "granularity": exact_memory(r.granularity),
        "max_memory": exact_memory(r.max_memory),
        "unknown_limit": r.unknown_limit.value,
        "beyond_top": r.beyond_top.value,
        "last_attempt": r.last_attempt.value,
    }
    if r.default_memory is not None:
        resize["default_memory"] = exact_memory(r.default_memory)
    for key in ("helper_default_memory", "helper_max_memory"):
        if getattr(r, key) is not None:
            resize[key] = exact_memory(getattr(r, key))
    if r.cpu is not None:
        resize["cpu"] = {"ratio": r.cpu.ratio, "min_bump": exact_cpu(r.cpu.min_bump) if r.cpu.min_bump else 0,
                         "max_cpus": exact_cpu(r.cpu.max_cpus), "default": exact_cpu(r.cpu.default)}
    if r.time is not None:
        resize["time"] = {"ratio": r.time.ratio, "min_bump": format_duration(r.time.min_bump),
                          "max": format_duration(r.time.max), "default": format_duration(r.time.default)}
    classes = []
    for rc in p.runner_classes:
        c: dict[str, Any] = {"name": rc.name, "tags": list(rc.tags), "max_memory": exact_memory(rc.max_memory),
                             "max_cpus": exact_cpu(rc.max_cpus)}
        if rc.max_memory_request is not None:
            c["max_memory_request"] = exact_memory(rc.max_memory_request)
        if rc.default_memory is not None:
            c["default_memory"] = exact_memory(rc.default_memory)
        c["expensive"] = rc.expensive
        c["placement_only"] = rc.placement_only
        if rc.max_concurrent_per_user is not None:
            c["max_concurrent_per_user"] = rc.max_concurrent_per_user
        if rc.max_concurrent_per_project is not None:
            c["max_concurrent_per_project"] = rc.max_concurrent_per_project
        classes.append(c)
    placement = []
    for pl in p.placement:
        e: dict[str, Any] = {}
        if pl.project is not None:
            e["project"] = pl.project.pattern
        if pl.job is not None:
            e["job"] = pl.job.pattern
        e["runner_class"] = pl.runner_class
        placement.append(e)
    sources = {}
    for name, s in p.pipeline_sources.items():
        e = {"budget_factor": s.budget_factor, "allow_expensive": s.allow_expensive}
        if s.max_budget is not None:
            e["max_budget"] = s.max_budget
        sources[name] = e
    out = {
        "version": SCHEMA_VERSION,
        "dry_run": p.dry_run,
        "skip_superseded": p.skip_superseded,
        "skip_allow_failure": p.skip_allow_failure,
        "max_job_age": format_duration(p.max_job_age) if p.max_job_age else "0s",
        "max_attempts": p.max_attempts,
        "variables": {
            "memory_limit": v.memory_limit, "memory_request": v.memory_request,
            "cpu_limit": v.cpu_limit, "cpu_request": v.cpu_request,
            "helper_memory_limit": v.helper_memory_limit, "helper_memory_request": v.helper_memory_request,
            "memory_format": v.memory_format.value, "raise_request": v.raise_request,
        },
        "families": {fam: _rule(rule) for fam, rule in p.families.items()},
        "categories": {cat: _update(u) for cat, u in p.categories.items()},
        "resize": resize,
        "runner_classes": classes,
        "placement": placement,
        "pipeline_sources": sources,
        "overrides": [_override(o) for o in p.overrides],
    }
    if p.prediction:
        out["prediction"] = dict(p.prediction)
    if p.storm is not None:
        st = p.storm
        out["storm"] = {"enabled": True, "families": list(st.families), "window": format_duration(st.window),
                        "trip_failures": st.trip_failures, "probes": st.probes,
                        "probe_interval": format_duration(st.probe_interval),
                        "release_successes": st.release_successes, "release_per_minute": st.release_per_minute}
    return out
