"""Family accuracy over the labeled set of real job-log excerpts (tests/data/joblogs)."""

from __future__ import annotations

import collections
import tomllib
from pathlib import Path

from retry_bot.classify import classify
from retry_bot.model import FAMILIES, JobFacts

CASES = tomllib.loads((Path(__file__).resolve().parents[1] / "data" / "joblogs" / "cases.toml")
                      .read_text("utf-8"))["case"]


def evaluate(taxonomy):
    results = []
    for c in CASES:
        f = JobFacts(job_id=1, name=c["id"], failure_reason=c.get("failure_reason"),
                     exit_code=c.get("exit_code"), status=c.get("status", "failed"))
        results.append((c, classify(f, c["excerpt"].encode("utf-8"), taxonomy)))
    return results


def test_the_set_is_large_diverse_and_sourced():
    assert len(CASES) >= 50
    assert {c["family"] for c in CASES} == set(FAMILIES)
    assert all(c["source"].startswith("https://") and c["excerpt"].strip() for c in CASES)
    assert len({c["id"] for c in CASES}) == len(CASES)


def test_family_accuracy_at_least_95_percent(taxonomy):
    results = evaluate(taxonomy)
    wrong = [(c["id"], c["family"], r.family.value, r.rule) for c, r in results if r.family.value != c["family"]]
    accuracy = 1 - len(wrong) / len(results)
    confusion = collections.Counter((c["family"], r.family.value) for c, r in results)
    print(f"\nfamily accuracy {accuracy:.1%} over {len(results)} cases; confusions: {wrong}")
    print("confusion matrix (expected, got): count", dict(confusion))
    assert accuracy >= 0.95, wrong
