"""The README's "Where things live" map names only paths that exist, and every package of the tree."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _map_entries() -> list[Path]:
    text = (ROOT / "README.md").read_text("utf-8")
    block = text.split("## Where things live", 1)[1].split("```", 2)[1]
    entries: list[Path] = []
    parent = ROOT
    for line in block.splitlines():
        if not line.strip() or line.startswith(" " * 6):
            continue  # a description's continuation line
        indent = len(line) - len(line.lstrip(" "))
        head = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        names = [n.strip() for n in head.split(",") if n.strip()]
        base = ROOT if indent == 0 else parent
        for name in names:
            entries.append(base / name)
        if indent == 0 and names and names[0].endswith("/"):
            parent = ROOT / names[0]
    return entries


def test_every_path_in_the_readme_map_exists() -> None:
    entries = _map_entries()
    assert len(entries) > 30, entries
    missing = [str(p.relative_to(ROOT)) for p in entries if not p.exists()]
    assert not missing, f"README module map names paths that do not exist: {missing}"


def test_every_package_is_in_the_readme_map() -> None:
    named = {p.resolve() for p in _map_entries()}
    packages = [d for top in ("runner_wrapper", "retry_bot", "standin")
                for d in [ROOT / top, *sorted((ROOT / top).iterdir())] if (d / "__init__.py").is_file()]
    absent = [str(d.relative_to(ROOT)) for d in packages if d.resolve() not in named]
    assert not absent, f"packages missing from the README module map: {absent}"
