"""The replay's package layout (issue 14.4): ``simulate`` depends on the core, never the reverse.

``policy -> predict -> simulate -> policy`` was a cycle (``predict.sources`` read traces through
``retry_bot.simulate``).  Every import of the core packages, function-level ones included, is read
from the source: a lazy import would hide the cycle from an import-time check.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "retry_bot"
CORE = ("predict", "policy", "classify")


def _imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
    return out


@pytest.mark.parametrize("package", CORE)
def test_core_packages_never_import_the_replay(package):
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"retry_bot/{package} has no modules"
    bad = [f"{p.relative_to(ROOT.parent)}:{line} imports {mod}" for p in files for line, mod in _imports(p)
           if mod == "retry_bot.simulate" or mod.startswith("retry_bot.simulate.")]
    assert not bad, "\n".join(bad)


def test_decide_never_imports_the_replay():
    bad = [m for _, m in _imports(ROOT / "decide.py") if m.startswith("retry_bot.simulate")]
    assert not bad


def test_each_replay_module_imports_on_its_own():
    """No module of the package needs another to have been imported first (no hidden cycle)."""
    for mod in ("trace", "metrics", "baselines", "allocators", "replay"):
        r = subprocess.run([sys.executable, "-c", f"import retry_bot.simulate.{mod}"], capture_output=True,
                           text=True, cwd=ROOT.parent)
        assert r.returncode == 0, f"retry_bot.simulate.{mod}: {r.stderr[-800:]}"
