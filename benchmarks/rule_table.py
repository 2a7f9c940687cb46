#!/usr/bin/env python3
"""The "Every rule" table of ``docs/taxonomy.md``, generated from the shipped taxonomy.

One row per rule in the order the engine tries them (stage by stage, each stage's rules in
file order): the stage, how it resolves (``first`` or ``last`` line), the window it reads, the
rule, its category (``(weak)`` for weak confidence), its family, and the conditions it needs
besides its patterns.

Usage::

    .venv/bin/python benchmarks/rule_table.py            # print the table
    .venv/bin/python benchmarks/rule_table.py --write    # replace the table in docs/taxonomy.md

``tests/bot_classify/test_rule_table.py`` checks the table in the docs is this one, so a pass that
adds a rule updates it with ``--write``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from retry_bot.classify import Taxonomy, load_taxonomy  # noqa: E402
from retry_bot.classify.taxonomy import Rule, Stage  # noqa: E402
from retry_bot.classify.trace import DEFAULT_TAIL_BYTES  # noqa: E402

DOC = ROOT / "docs" / "taxonomy.md"
HEADING = "## Every rule\n"
HEADER = ("| stage | resolve | window | rule | category | family | conditions |\n"
          "|---|---|---|---|---|---|---|\n")


def conditions(rule: Rule) -> str:
    """What the rule needs, in words (its patterns counted, not quoted)."""
    c = []
    if rule.record:
        c.append("usage record")
    if rule.statuses:
        c.append("status")
    if rule.failure_reasons:
        c.append(f"{len(rule.failure_reasons)} failure reason(s)")
    if rule.exit_codes:
        c.append("exit " + ", ".join(str(x) for x in sorted(rule.exit_codes)))
    if rule.sections is not None:
        c.append("section " + "/".join(sorted(rule.sections)))
    if rule.job_name is not None:
        c.append("job name")
    if rule.job_stage is not None:
        c.append("job stage")
    if rule.last_command is not None:
        c.append("last command")
    if rule.patterns:
        c.append(f"{len(rule.patterns)} pattern(s)")
    if rule.corroborated_by:
        c.append(f"corroborated by {len(rule.corroborated_by)}")
    if rule.outside_cgroup:
        c.append("outside the wrapper's cgroup")
    return ", ".join(c)


def row(stage: Stage, rule: Rule) -> str:
    window = f"{(stage.scan_bytes or DEFAULT_TAIL_BYTES) // 1024} KiB"
    category = rule.category + (" (weak)" if rule.confidence == "weak" else "")
    return (f"| {stage.name} | {stage.resolve} | {window} | `{rule.name}` | {category} | {rule.family.value} "
            f"| {conditions(rule)} |\n")


def table(taxonomy: Taxonomy) -> str:
    """The table's header and rows, as the docs hold them."""
    return HEADER + "".join(row(stage, rule) for stage in taxonomy.stages
                            for rule in taxonomy.rules_by_stage[stage.name])


def doc_table(text: str) -> tuple[int, int]:
    """Where the table after ``## Every rule`` starts and ends in ``text``."""
    head = text.index(HEADING)
    start = text.index("| stage |", head)
    end = start
    while end < len(text) and text.startswith("|", end):
        end = text.find("\n", end) + 1 or len(text)
    return start, end


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="replace the table in docs/taxonomy.md")
    args = ap.parse_args()
    new = table(load_taxonomy())
    if not args.write:
        sys.stdout.write(new)
        return 0
    text = DOC.read_text(encoding="utf-8")
    start, end = doc_table(text)
    DOC.write_text(text[:start] + new + text[end:], encoding="utf-8")
    print(f"{DOC}: {new.count(chr(10)) - 2} rules")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
