"""docs/taxonomy.md's "Every rule" table is the shipped taxonomy's (benchmarks/rule_table.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _module():
    spec = importlib.util.spec_from_file_location("rule_table", ROOT / "benchmarks" / "rule_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_rule_table_lists_the_shipped_taxonomy(taxonomy):
    mod = _module()
    text = (ROOT / "docs" / "taxonomy.md").read_text(encoding="utf-8")
    start, end = mod.doc_table(text)
    assert text[start:end] == mod.table(taxonomy), (
        "docs/taxonomy.md's 'Every rule' table is out of date: run python benchmarks/rule_table.py --write")


def test_the_table_has_one_row_per_rule_with_its_conditions(taxonomy):
    mod = _module()
    rows = mod.table(taxonomy).splitlines()[2:]
    assert len(rows) == len(taxonomy.rules)
    by_name = {r.split("|")[4].strip().strip("`"): r for r in rows}
    assert "usage record" in by_name["record-oom-kill"]
    assert all(r.count("|") == 8 for r in rows)
