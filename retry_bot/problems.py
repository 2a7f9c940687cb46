"""Problems found in admin-edited files (policy, taxonomy, bot config).

Every validator returns or raises a list of :class:`Problem`, each naming the
key path (``resize.ratio``, ``runner_classes[2].tags``) and, where the TOML
source is known, the line, so ``retry-bot policy check`` can report them all
at once instead of stopping at the first.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from runner_wrapper.problems import ConfigError

__all__ = ["Problem", "ConfigError", "find_line", "kind", "number_problem"]


@dataclass(frozen=True)
class Problem:
    path: str
    message: str
    line: int | None = None
    source: str | None = None

    def __str__(self) -> str:
        where = self.source or ""
        if self.line is not None:
            where = f"{where}:{self.line}" if where else f"line {self.line}"
        prefix = f"{where}: " if where else ""
        return f"{prefix}{self.path}: {self.message}" if self.path else f"{prefix}{self.message}"


def kind(value: Any) -> str:
    """What a TOML value is, in an admin's words (``an integer``, ``a string``...)."""
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
            dict: "a table"}.get(type(value), type(value).__name__)


def number_problem(value: Any, *, integer: bool = False, low: float | None = None, high: float | None = None,
                   open_low: bool = False) -> str | None:
    """Why ``value`` is not an acceptable number, or ``None``: the one number check of the policy and ``bot.toml``.

    A boolean is never a number; a float must be finite (TOML has ``nan`` and ``inf``, which would
    reach ``time.sleep`` or a comparison); ``integer`` refuses floats.  ``low`` (exclusive with
    ``open_low``) and ``high`` bound it.

    >>> number_problem(float("nan"))
    'must be a finite number, not nan'
    >>> number_problem(0, integer=True, low=1, high=5)
    '0 is out of range (must be from 1 to 5)'
    >>> number_problem(0.05, low=0.1)
    '0.05 is out of range (must be at least 0.1)'
    """
    if not integer and isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, not {value!r}"
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        if integer and low is not None and high is not None:
            return f"must be an integer from {low} to {high}, not {kind(value)}"
        return ("must be an integer, not " if integer else "must be a number, not ") + kind(value)
    too_low = low is not None and (value <= low if open_low else value < low)
    if too_low or (high is not None and value > high):
        if integer and low is not None and high is not None:
            bounds = f"from {low} to {high}"
        else:
            bounds = " and ".join(
                ([f"above {low:g}" if open_low else f"at least {low:g}"] if low is not None else [])
                + ([f"at most {high:g}"] if high is not None else []))
        return f"{value if integer else format(value, 'g')} is out of range (must be {bounds})"
    return None


def find_line(text: str, dotted_path: str) -> int | None:
    """Best-effort line number of the last key of ``dotted_path`` in TOML ``text``.

    Looks for the table header of the path's prefix, then the key after it.
    Returns ``None`` when it cannot tell; never raises.
    """
    try:
        parts = [p for p in re.split(r"\.|\[\d+\]", dotted_path) if p]
        if not parts:
            return None
        key = parts[-1]
        lines = text.splitlines()
        start = 0
        if len(parts) > 1:
            table = parts[-2]
            hdr = re.compile(r"^\s*\[\[?\s*(?:[\w\-\"]+\.)*\"?" + re.escape(table) + r"\"?\s*\]\]?")
            for i, ln in enumerate(lines):
                if hdr.match(ln):
                    start = i
                    break
        keyre = re.compile(r"^\s*\"?" + re.escape(key) + r"\"?\s*=")
        for i in range(start, len(lines)):
            if keyre.match(lines[i]):
                return i + 1
        hdr2 = re.compile(r"^\s*\[\[?\s*(?:[\w\-\"]+\.)*\"?" + re.escape(key) + r"\"?\s*\]\]?")
        for i, ln in enumerate(lines):
            if hdr2.match(ln):
                return i + 1
    except re.error:  # pragma: no cover
        return None
    return None
