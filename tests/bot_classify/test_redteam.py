"""Floors on the red-team probes (benchmarks/redteam, docs/taxonomy.md "Tenth pass", "Eleventh pass",
"GitLab Runner's job-log catalogue" and "GitHub Actions' job-log catalogue").

The probes are job-log tails written from the tools' formats; the tenth pass brought the precision set's
wasted re-runs from 65 to 17 and the eleventh the recall set's misses from 33 to 5.  A later rule may not
quietly give that back."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import score_redteam  # noqa: E402

#: (set, at most wasted re-runs, at most missed), as reached by the eleventh pass; the runner set (GitLab
#: Runner's own job-log messages, docs/taxonomy.md "GitLab Runner's job-log catalogue") as its pass left it:
#: its 3 misses are the helper container's 137, which the shipped policy cannot size without a helper limit; the
#: actions set (GitHub Actions' own job-log messages, "GitHub Actions' job-log catalogue") as its pass left it
FLOORS = [("precision", 17, 1), ("recall", 0, 5), ("runner", 0, 3), ("actions", 0, 0)]


@pytest.mark.parametrize("name,max_wasted,max_missed", FLOORS)
def test_redteam_floor(taxonomy, name, max_wasted, max_missed):
    t = score_redteam.score(name, taxonomy)
    assert t.tried >= {"precision": 147, "recall": 188, "runner": 115, "actions": 105}[name]
    assert len(t.wasted) <= max_wasted, t.wasted
    assert len(t.missed) <= max_missed, t.missed


def test_probe_ids_are_unique_and_families_known():
    from retry_bot.model import Family

    families = {f.value for f in Family}
    for name in score_redteam.SETS:
        ids = [p[0] for p in score_redteam.probes(name)]
        assert len(ids) == len(set(ids)), name
        assert {p[1] for p in score_redteam.probes(name)} <= families
