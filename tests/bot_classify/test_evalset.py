"""Family accuracy over the labeled set of real job-log excerpts (tests/data/joblogs)."""

from __future__ import annotations

import collections

import pytest
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


# Issue 11: new excerpts in three splits.  The tuning split was read while writing rules; held-out A
# was scored once by the first pass and then read (so it is tuning data now); held-out B was
# collected and labelled before any second-pass rule and is only scored (benchmarks/
# score_classify.py), never asserted case by case, so that no rule is written to pass it.
DATA = Path(__file__).resolve().parents[1] / "data" / "joblogs"
TUNING = tomllib.loads((DATA / "tuning.toml").read_text("utf-8"))["case"]
HELDOUT_A = tomllib.loads((DATA / "heldout-a.toml").read_text("utf-8"))["case"]
HELDOUT = tomllib.loads((DATA / "heldout-b.toml").read_text("utf-8"))["case"]
HELDOUT_C = tomllib.loads((DATA / "heldout-c.toml").read_text("utf-8"))["case"]


def test_new_splits_are_sourced_disjoint_and_large_enough():
    ids = [c["id"] for c in CASES + TUNING + HELDOUT_A + HELDOUT + HELDOUT_C]
    assert len(ids) == len(set(ids))
    assert len(HELDOUT_A) >= 60 and len(HELDOUT) >= 60 and len(HELDOUT_C) >= 40
    for c in TUNING + HELDOUT_A + HELDOUT + HELDOUT_C:
        assert c["source"].startswith("https://") and c["excerpt"].strip(), c["id"]
        assert c["family"] in FAMILIES, c["id"]
    # held-out B reuses no excerpt of the other splits
    seen = {" ".join(c["excerpt"].split()) for c in CASES + TUNING + HELDOUT_A}
    assert not [c["id"] for c in HELDOUT if " ".join(c["excerpt"].split()) in seen]
    seen |= {" ".join(c["excerpt"].split()) for c in HELDOUT}
    assert not [c["id"] for c in HELDOUT_C if " ".join(c["excerpt"].split()) in seen]
    assert not {c["source"] for c in HELDOUT_A + HELDOUT} & {c["source"] for c in CASES}
    assert not {c["source"] for c in HELDOUT} & {c["source"] for c in TUNING + HELDOUT_A}
    assert not {c["source"] for c in HELDOUT_C} & {c["source"] for c in CASES + TUNING + HELDOUT_A + HELDOUT}


def test_tuning_split_family_accuracy(taxonomy):
    wrong = []
    for c in TUNING:
        f = JobFacts(job_id=1, name=c["id"], failure_reason=c.get("failure_reason"),
                     exit_code=c.get("exit_code"), status=c.get("status", "failed"))
        r = classify(f, c["excerpt"].encode("utf-8"), taxonomy)
        if r.family.value != c["family"]:
            wrong.append((c["id"], c["family"], r.family.value, r.rule))
    assert 1 - len(wrong) / len(TUNING) >= 0.90, wrong


def test_score_script_runs_on_every_split(capsys):
    import runpy
    import sys
    argv = sys.argv
    try:
        sys.argv = ["score_classify.py"]
        with pytest.raises(SystemExit) as exc:
            runpy.run_path(str(Path(__file__).resolve().parents[2] / "benchmarks" / "score_classify.py"),
                           run_name="__main__")
    finally:
        sys.argv = argv
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for split in ("cases", "tuning", "heldout-a", "heldout-b", "heldout-c"):
        assert out.count(split) >= 1 and "right" in out
