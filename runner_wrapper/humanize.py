"""Human-readable sizes for job-log lines.

Imports nothing, so the per-stage ``executor run`` path (:mod:`runner_wrapper.stagerun`)
can use it without paying for :mod:`decimal` or :mod:`re`; :mod:`runner_wrapper.quantity`
re-exports it.
"""

from __future__ import annotations

__all__ = ["human_bytes"]


def human_bytes(nbytes: int | float | None) -> str:
    """Human-readable binary size for logs: ``4.0 GiB``, ``512.0 MiB``, ``n/a``."""
    if nbytes is None:
        return "n/a"
    n = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} EiB"  # pragma: no cover
