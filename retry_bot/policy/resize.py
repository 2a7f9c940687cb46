"""The resize arithmetic: VPA's OOM bump, with a granularity and caps.

Kubernetes VPA (``RecordOOM``) sizes memory after an OOM kill as::

    used   = max(request, observed peak)      # the OOM-inflated estimate is left out
    needed = max(used * ratio, used + min_bump)

Here ``used`` is the larger of the limit **in force when the job was killed**
and the **observed** peak (from a verified usage record).  What the bot (or the
predictor) merely *wanted* earlier never counts: if the runner applied less
than was asked, the applied value is the truth, and a prediction is only a
floor for the new value, never the base of the next bump.  That is how
repeated OOMs are kept from ratcheting on stale estimates.

Everything here is pure arithmetic on integers (bytes), floats (cores,
seconds) and the frozen rules of :mod:`retry_bot.policy.model`.
"""

from __future__ import annotations

import math
from fractions import Fraction

from retry_bot.policy.model import CpuRule, ResizeRule, TimeRule
from runner_wrapper.quantity import format_memory, parse_memory

__all__ = [
    "memory_used",
    "memory_need",
    "resize_memory",
    "resize_cpu",
    "resize_timeout",
    "round_up",
    "format_memory_within",
]


def memory_used(limit_in_force: int | None, observed_peak: int | None,
                request_in_force: int | None = None) -> int | None:
    """The base of a resize: ``max(limit in force, observed peak)``.

    ``request_in_force`` only counts when no limit is known (VPA's rule uses the
    request; a known limit is always at least the request).  ``None`` when
    nothing is known.
    """
    known = [v for v in (limit_in_force, observed_peak) if v]
    if not limit_in_force and request_in_force:
        known.append(request_in_force)
    return max(known) if known else None


def round_up(value: int, granularity: int) -> int:
    """``value`` rounded up to a multiple of ``granularity`` (bytes)."""
    if granularity <= 1:
        return int(value)
    return -(-int(value) // granularity) * granularity


def memory_need(used_bytes: int, rule: ResizeRule, predicted_bytes: int | None = None) -> int:
    """The uncapped new memory: ``max(used * ratio, used + min_bump, predicted)``, rounded up to the granularity."""
    if used_bytes <= 0:
        raise ValueError(f"used memory must be positive, not {used_bytes}")
    scaled = math.ceil(Fraction(used_bytes) * Fraction(rule.ratio))
    new = max(scaled, used_bytes + rule.min_bump)
    if predicted_bytes:
        new = max(new, int(predicted_bytes))
    return round_up(new, rule.granularity)


def resize_memory(used_bytes: int, rule: ResizeRule, *, cap: int | None = None,
                  predicted_bytes: int | None = None) -> int:
    """New memory for a job that was OOM-killed having used ``used_bytes``.

    ``max(used * ratio, used + min_bump)``, raised to ``predicted_bytes`` when
    the predictor knows better, rounded up to ``rule.granularity``, then capped
    at ``min(cap, rule.max_memory)``.  The result can be at or below
    ``used_bytes`` only when the cap is; callers must check that.

    >>> r = ResizeRule(ratio=1.5, min_bump=512 * 2**20, granularity=256 * 2**20, max_memory=2**40)
    >>> resize_memory(4 * 2**30, r) // 2**20        # 4 GiB * 1.5
    6144
    >>> resize_memory(256 * 2**20, r) // 2**20      # + 512 MiB beats * 1.5
    768
    """
    new = memory_need(used_bytes, rule, predicted_bytes)
    limit = rule.max_memory if cap is None else min(cap, rule.max_memory)
    return min(new, limit)


def resize_cpu(cores: float, rule: CpuRule, *, cap: float | None = None) -> float:
    """New CPU for a timed-out job that had ``cores``: ``max(cores * ratio, cores + min_bump)``, capped."""
    new = max(cores * rule.ratio, cores + rule.min_bump)
    new = math.ceil(round(new * 1000, 6)) / 1000  # whole millicores
    limit = rule.max_cpus if cap is None else min(cap, rule.max_cpus)
    return min(new, limit)


def resize_timeout(seconds: float, rule: TimeRule) -> float:
    """New job timeout after a timeout at ``seconds``: ``max(t * ratio, t + min_bump)``, at most ``rule.max``.

    Rounded up to whole minutes, as GitLab's ``timeout:`` keyword is usually written.
    """
    new = max(seconds * rule.ratio, seconds + rule.min_bump)
    new = math.ceil(new / 60.0) * 60.0
    return float(min(new, rule.max))


def format_memory_within(nbytes: int, cap: int, style: str) -> tuple[str, int]:
    """Format ``nbytes`` for a job variable without ever exceeding ``cap``.

    ``format_memory`` rounds up (to Mi or M); at a cap that is not a multiple
    of that unit, rounding up would pass the runner's ``*_overwrite_max_allowed``
    and fail the job, so the value is rounded *down* instead.  Returns the
    string and the number of bytes it means.
    """
    text = format_memory(nbytes, style)
    value = parse_memory(text)
    if value <= cap:
        return text, value
    unit = {"binary": 2**20, "decimal": 10**6}.get(style, 1)
    down = (min(nbytes, cap) // unit) * unit
    if down <= 0:
        down = min(nbytes, cap)
        text = format_memory(down, "bytes")
        return text, down
    text = format_memory(down, style)
    return text, parse_memory(text)
