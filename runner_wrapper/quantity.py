"""Kubernetes resource quantities: parse and format memory and CPU amounts.

The runner wrapper and the retry bot speak the resource language of GitLab's
Kubernetes executor (``KUBERNETES_MEMORY_LIMIT=4Gi``, ``KUBERNETES_CPU_REQUEST=750m``)
so one pipeline works on both executors.  This module is the single place that
turns those strings into numbers and back.

Grammar (a subset of ``k8s.io/apimachinery/pkg/api/resource``)::

    quantity ::= number [suffix]
    number   ::= digits ["." digits] | "." digits        (sign: "+" only)
    suffix   ::= "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei"  (binary, 1024^n)
               | "n" | "u" | "m" | "" | "k" | "M" | "G" | "T" | "P" | "E"  (decimal)
               | ("e" | "E") [sign] digits                 (decimal exponent)

Every parse error is a :class:`QuantityError` whose message names the value and
what was wrong with it, so callers can show it to a user as is.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation, ROUND_CEILING

from runner_wrapper.humanize import human_bytes

__all__ = [
    "QuantityError",
    "parse_quantity",
    "parse_memory",
    "parse_cpu",
    "format_memory",
    "format_cpu",
    "human_bytes",
    "MAX_MEMORY_BYTES",
    "MAX_CPU_CORES",
]

#: Largest memory amount accepted (1 EiB): anything above is a typo, not a build.
MAX_MEMORY_BYTES = 2**60
#: Largest CPU amount accepted: no host has a million cores.
MAX_CPU_CORES = 1_000_000.0

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_RE = re.compile(
    r"^\+?(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<exp>[eE][+-]?[0-9]{1,4})|(?P<suf>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)
# Common spellings that Kubernetes rejects, with the quantity the user meant.
_HINTS = {
    "kb": "k", "mb": "M", "gb": "G", "tb": "T",
    "kib": "Ki", "mib": "Mi", "gib": "Gi", "tib": "Ti",
    "b": "",
}


class QuantityError(ValueError):
    """A string is not a valid quantity, or is out of range for its use."""


def parse_quantity(text: str | int | float) -> Decimal:
    """Parse a Kubernetes quantity to an exact :class:`~decimal.Decimal`.

    >>> parse_quantity("1.5Gi")
    Decimal('1610612736.0')
    >>> parse_quantity("750m")
    Decimal('0.750')
    """
    if isinstance(text, bool):
        raise QuantityError(f"{text!r} is not a quantity")
    if isinstance(text, int):
        return Decimal(text)
    if isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(f"{text!r} is not a finite number")
        return Decimal(repr(text))
    if not isinstance(text, str):
        raise QuantityError(f"{text!r} is not a quantity (expected a string such as '2Gi')")
    s = text.strip()
    if not s:
        raise QuantityError("empty quantity")
    if len(s) > 64:
        raise QuantityError(f"quantity too long ({len(s)} characters)")
    m = _RE.match(s)
    if not m:
        if s.startswith("-"):
            raise QuantityError(f"{text!r} is negative")
        hint = _hint(s)
        raise QuantityError(
            f"{text!r} is not a Kubernetes quantity" + (f"; did you mean {hint!r}?" if hint else
                                                         " (examples: 500M, 2Gi, 1.5G, 750m, 2)")
        )
    try:
        num = Decimal(m.group("num"))
        if m.group("exp"):
            value = num.scaleb(int(m.group("exp")[1:]))
        else:
            suf = m.group("suf") or ""
            value = num * (_BINARY[suf] if suf in _BINARY else _DECIMAL[suf])
    except (InvalidOperation, OverflowError) as exc:  # pragma: no cover - regex bounds it
        raise QuantityError(f"{text!r} is out of range") from exc
    return value


def _hint(s: str) -> str | None:
    m = re.match(r"^\+?([0-9]*\.?[0-9]+)\s*([A-Za-z]+)$", s)
    if not m:
        return None
    suf = _HINTS.get(m.group(2).lower())
    return None if suf is None else m.group(1) + suf


def parse_memory(text: str | int | float) -> int:
    """Parse a memory quantity to whole bytes (rounded up).

    Raises :class:`QuantityError` for zero, negative, fractional-below-one-byte,
    or absurd (> 1 EiB) amounts.

    >>> parse_memory("500M"), parse_memory("2Gi"), parse_memory("1.5G")
    (500000000, 2147483648, 1500000000)
    """
    value = parse_quantity(text)
    if value <= 0:
        raise QuantityError(f"{text!r}: memory must be positive")
    if value < 1:
        raise QuantityError(f"{text!r} is less than one byte (millicores are CPU syntax)")
    if value > MAX_MEMORY_BYTES:
        raise QuantityError(f"{text!r}: memory above 1 EiB is not plausible")
    return int(value.to_integral_value(rounding=ROUND_CEILING))


def parse_cpu(text: str | int | float) -> float:
    """Parse a CPU quantity to cores.

    >>> parse_cpu("750m"), parse_cpu("2"), parse_cpu(0.5)
    (0.75, 2.0, 0.5)
    """
    value = parse_quantity(text)
    if value <= 0:
        raise QuantityError(f"{text!r}: CPU must be positive")
    if value < Decimal("0.001"):
        raise QuantityError(f"{text!r}: CPU below 1m (one millicore) cannot be applied")
    if value > Decimal(MAX_CPU_CORES):
        raise QuantityError(f"{text!r}: more than {MAX_CPU_CORES:.0f} cores is not plausible")
    return float(value)


def format_memory(nbytes: int, style: str = "binary") -> str:
    """Format bytes as a quantity string that :func:`parse_memory` reads back.

    ``style``: ``"binary"`` (``Mi`` granularity, rounded up: ``"4096Mi"``,
    ``"4Gi"`` when exact), ``"decimal"`` (``M`` granularity, rounded up, as
    spack-gantry writes: ``"9577M"``) or ``"bytes"`` (``"4294967296"``).
    Rounding is always up, so a formatted limit is never below the number.
    """
    if nbytes <= 0:
        raise QuantityError(f"cannot format non-positive memory {nbytes}")
    if style == "bytes":
        return str(int(nbytes))
    if style == "decimal":
        mb = -(-int(nbytes) // 10**6)
        return f"{mb // 1000}G" if mb % 1000 == 0 else f"{mb}M"
    if style == "binary":
        mib = -(-int(nbytes) // 2**20)
        return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"
    raise QuantityError(f"unknown memory format {style!r} (binary, decimal or bytes)")


def format_cpu(cores: float) -> str:
    """Format cores as millicores (``"750m"``), or whole cores when exact (``"2"``)."""
    if not math.isfinite(cores) or cores <= 0:
        raise QuantityError(f"cannot format CPU {cores!r}")
    milli = math.ceil(round(cores * 1000, 6))
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"
