"""Durations and exact quantity spellings for policy files.

Memory and CPU amounts are parsed by :mod:`runner_wrapper.quantity` (the
shared Kubernetes grammar); this module adds what a policy file needs on top:
durations (``"90s"``, ``"10m"``, ``"1h30m"``, or a number of seconds) and
spellings that read back to exactly the same number, for ``policy show``.
"""

from __future__ import annotations

import math
import re

from runner_wrapper.quantity import format_cpu

__all__ = ["DurationError", "parse_duration", "format_duration", "exact_memory", "exact_cpu"]

_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|d|h|m|s)")
_WHOLE = re.compile(r"^(?:\d+(?:\.\d+)?(?:ms|d|h|m|s))+$")
#: Largest duration accepted: a year.  Anything longer is a typo.
MAX_DURATION = 366 * 86400.0


class DurationError(ValueError):
    """A value is not a duration."""


def parse_duration(value: object) -> float:
    """Seconds from ``"90s"``, ``"10m"``, ``"1h30m"``, ``"2d"``, ``"250ms"`` or a number of seconds.

    >>> parse_duration("1h30m"), parse_duration(45), parse_duration("0")
    (5400.0, 45.0, 0.0)
    """
    if isinstance(value, bool):
        raise DurationError(f"{value!r} is not a duration")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        s = value.strip().replace(" ", "")
        if re.fullmatch(r"\d+(?:\.\d+)?", s):
            seconds = float(s)
        elif _WHOLE.match(s):
            seconds = sum(float(n) * _UNITS[u] for n, u in _PART.findall(s))
        else:
            raise DurationError(
                f"{value!r} is not a duration (examples: \"90s\", \"10m\", \"1h30m\", \"2d\", or seconds)")
    else:
        raise DurationError(f"{value!r} is not a duration (a string such as \"10m\" or a number of seconds)")
    if not math.isfinite(seconds) or seconds < 0:
        raise DurationError(f"{value!r}: a duration must be a non-negative finite number of seconds")
    if seconds > MAX_DURATION:
        raise DurationError(f"{value!r}: more than a year is not plausible")
    return seconds


def format_duration(seconds: float) -> str | float:
    """The shortest spelling that :func:`parse_duration` reads back exactly.

    >>> format_duration(5400), format_duration(0), format_duration(1.5)
    ('1h30m', '0s', 1.5)
    """
    if seconds != int(seconds):
        return float(seconds)
    rest = int(seconds)
    if rest == 0:
        return "0s"
    out = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        n, rest = divmod(rest, size)
        if n:
            out.append(f"{n}{unit}")
    return "".join(out)


def exact_memory(nbytes: int) -> str | int:
    """A quantity string equal to ``nbytes`` exactly (``"4Gi"``, ``"96G"``, ``"1536Mi"``, ``"1k"``), else the int."""
    if nbytes <= 0:
        return int(nbytes)
    for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20)):
        if nbytes % size == 0:
            return f"{nbytes // size}{suffix}"
    for suffix, size in (("T", 10**12), ("G", 10**9), ("M", 10**6)):
        if nbytes % size == 0:
            return f"{nbytes // size}{suffix}"
    if nbytes % 2**10 == 0:
        return f"{nbytes // 2**10}Ki"
    if nbytes % 1000 == 0:
        return f"{nbytes // 1000}k"
    return int(nbytes)  # whole bytes: read back as such from 1 MiB up (a smaller bare number needs a unit)


def exact_cpu(cores: float) -> str | float:
    """``"750m"`` / ``"16"`` when that is exact, else the float."""
    milli = cores * 1000
    if cores > 0 and abs(milli - round(milli)) < 1e-9:
        return format_cpu(round(milli) / 1000)
    return float(cores)
