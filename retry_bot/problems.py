"""Problems found in admin-edited files (policy, taxonomy, bot config).

Every validator returns or raises a list of :class:`Problem`, each naming the
key path (``resize.ratio``, ``runner_classes[2].tags``) and, where the TOML
source is known, the line, so ``retry-bot policy check`` can report them all
at once instead of stopping at the first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runner_wrapper.problems import ConfigError

__all__ = ["Problem", "ConfigError", "find_line"]


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
