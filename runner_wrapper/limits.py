"""Which memory and CPU limits a job gets, and why: a pure function.

Inputs are the job's variables (by default the Kubernetes executor's names, so
one pipeline works on both executors), optional values suggested by the
allocation endpoint, the host's caps and the configured defaults.  The output
is an :class:`~runner_wrapper.record.AppliedLimits` plus the lines the job log
shows, one per decision.

Rules, in order, for each of memory limit/request and CPU limit/request:

1. a job variable, if set and valid (an invalid one is a warning; it falls back);
2. else the allocation endpoint's suggestion, if any;
3. else the configured default (or nothing).

Then: a limit below its request is raised to the request (a build needs at
least what it asked for), and every value is clamped to the host cap.  Nothing
here raises: a bad value can never crash a build.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from runner_wrapper.config import LimitSettings, VariableNames
from runner_wrapper.quantity import QuantityError, format_cpu, human_bytes, parse_cpu, parse_memory
from runner_wrapper.record import AppliedLimits

__all__ = ["LimitDecision", "resolve_limits", "has_explicit_limits"]


@dataclass(frozen=True)
class LimitDecision:
    applied: AppliedLimits
    #: Job-log lines: what was applied and why (``WARNING:`` prefix for invalid input).
    messages: tuple[str, ...]
    warnings: int = 0


def has_explicit_limits(variables: Mapping[str, str], names: VariableNames) -> bool:
    """True when the job sets a memory or CPU *limit* itself (then the allocation endpoint is not asked).

    Requests alone (as Spack's pipelines set them) do not count: the endpoint may still suggest
    limits, and the job's own request values keep precedence over its suggestions.
    """
    return any(variables.get(n, "").strip() for n in (names.memory_limit, names.cpu_limit))


def resolve_limits(
    variables: Mapping[str, str],
    names: VariableNames,
    settings: LimitSettings,
    host_memory_bytes: int,
    host_cpu_cores: float,
    suggested: Mapping[str, str] | None = None,
    suggested_by: str = "allocation endpoint",
) -> LimitDecision:
    """Decide the limits; see the module docstring for the rules."""
    msgs: list[str] = []
    warnings = 0
    sources: dict[str, str] = {}
    suggested = suggested or {}

    def pick(kind: str, var: str, parse: Callable[[str], float | int], default: float | int | None,
             show: Callable[[float | int], str]) -> float | int | None:
        nonlocal warnings
        fallback = f"the default {show(default)}" if default is not None else "no value"
        # The job's own variable first, then the suggestion; a bad value is a warning and the next one counts.
        for raw, source, ignored, tail in (
                (variables.get(var, "").strip(), f"job variable {var}", f"job variable {var}", f"; using {fallback}"),
                (str(suggested.get(var, "")).strip(), f"{suggested_by} {var}", f"{suggested_by} value {var}", "")):
            if not raw:
                continue
            try:
                value = parse(raw)
            except QuantityError as exc:
                warnings += 1
                msgs.append(f"WARNING: ignoring {ignored}={raw!r}: {exc}{tail}")
                continue
            sources[kind] = f"{source}={raw}"
            return value
        if default is not None:
            sources[kind] = "default from wrapper.toml"
            return default
        return None

    mem_lim = pick("memory_limit", names.memory_limit, parse_memory, settings.default_memory_limit_bytes, human_bytes)
    mem_req = pick("memory_request", names.memory_request, parse_memory, settings.default_memory_request_bytes,
                   human_bytes)
    cpu_lim = pick("cpu_limit", names.cpu_limit, parse_cpu, settings.default_cpu_limit_cores, _cores)
    cpu_req = pick("cpu_request", names.cpu_request, parse_cpu, settings.default_cpu_request_cores, _cores)

    cap_mem = settings.cap_memory_bytes or host_memory_bytes
    cap_cpu = settings.cap_cpu_cores or host_cpu_cores
    cap_mem_src = "host cap from wrapper.toml" if settings.cap_memory_bytes else "host memory"
    cap_cpu_src = "host cap from wrapper.toml" if settings.cap_cpu_cores else "host CPU count"

    if mem_lim is not None and mem_req is not None and mem_lim < mem_req:
        msgs.append(f"memory limit {human_bytes(mem_lim)} is below the request {human_bytes(mem_req)}: "
                    f"raised to the request")
        mem_lim = mem_req
        sources["memory_limit"] += " (raised to the request)"
    if cpu_lim is not None and cpu_req is not None and cpu_lim < cpu_req:
        msgs.append(f"CPU limit {_cores(cpu_lim)} is below the request {_cores(cpu_req)}: raised to the request")
        cpu_lim = cpu_req
        sources["cpu_limit"] += " (raised to the request)"

    def clamp(kind: str, value: float | int | None, cap: float | int, cap_src: str,
              show: Callable[[float | int], str]) -> float | int | None:
        if value is not None and value > cap:
            msgs.append(f"{kind.replace('_', ' ')} {show(value)} is above the {cap_src} {show(cap)}: clamped")
            sources[kind] += f" (clamped to {cap_src} {show(cap)})"
            return cap
        return value

    mem_lim = clamp("memory_limit", mem_lim, cap_mem, cap_mem_src, human_bytes)
    mem_req = clamp("memory_request", mem_req, cap_mem, cap_mem_src, human_bytes)
    cpu_lim = clamp("cpu_limit", cpu_lim, cap_cpu, cap_cpu_src, _cores)
    cpu_req = clamp("cpu_request", cpu_req, cap_cpu, cap_cpu_src, _cores)

    summary = (f"memory limit {human_bytes(mem_lim) if mem_lim else 'none'}"
               f" ({sources.get('memory_limit', 'not set')}), "
               f"CPU limit {_cores(cpu_lim) if cpu_lim else 'none'} ({sources.get('cpu_limit', 'not set')})")
    msgs.append("applied: " + summary)
    applied = AppliedLimits(
        memory_limit_bytes=int(mem_lim) if mem_lim is not None else None,
        memory_request_bytes=int(mem_req) if mem_req is not None else None,
        cpu_limit_cores=float(cpu_lim) if cpu_lim is not None else None,
        cpu_request_cores=float(cpu_req) if cpu_req is not None else None,
        sources=sources,
    )
    return LimitDecision(applied=applied, messages=tuple(msgs), warnings=warnings)


def _cores(v: float | int | None) -> str:
    if v is None:
        return "none"
    return f"{format_cpu(float(v))} CPU"
