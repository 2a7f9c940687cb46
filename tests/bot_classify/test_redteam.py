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
#: These floors hold the *rules* to account: they are measured with the learned fallback's verdicts acting on
#: nothing, as the shipped policy had it until session 24.
FLOORS = [("precision", 17, 1), ("recall", 0, 5), ("runner", 0, 3), ("actions", 0, 0)]
#: The shipped policy since session 24 retries a learned ``infrastructure`` verdict once (config/policy.toml;
#: docs/taxonomy.md, "The learned fallback's precision"): on these probes, written to trap rules, the model names
#: infrastructure for 13 of the actions set's configuration failures (a setup action's missing version, an
#: artifact not found, a registry login without a password...) and 2 of the precision set's build failures, each
#: re-run once.  Its figures, so that they cannot quietly grow.  Since session 28 it retries them only at p >= 0.8
#: (the 3:1 bar applied per band of probability): the later retrains and that floor leave 1 of the precision set's
#: and 2 of the actions set's re-run.  The forty-fifth pass's retrain (ZZA and ZZB joined READ_SPLITS) moved one more
#: precision probe over the 0.8 bar (app-log-agent-lost, a test's expected 'agent lost' text: a learned
#: infrastructure verdict, not a rule's; the rules-only FLOORS are unchanged), documented in docs/taxonomy.md,
#: "Forty-fifth pass": 2 of the precision set's re-run now (19).  The forty-ninth pass's retrain (ZZI and ZZJ joined
#: READ_SPLITS) moved one actions probe over the 0.8 bar (gha-artifact-quota, GitHub's artifact storage quota: a
#: learned infrastructure verdict, not a rule's; the rules-only FLOORS are unchanged; the message comes from GitHub's
#: artifact service, whose code is not public, so no sourced precision rule could be written), documented in
#: docs/taxonomy.md, "Forty-ninth pass": 3 of the actions set's re-run now.  None may be added.
SHIPPED_FLOORS = [("precision", 19, 1), ("recall", 0, 5), ("runner", 0, 3), ("actions", 3, 0)]


def _rules_only_policy():
    """The shipped policy with the learned verdicts acting on nothing (benchmarks/eval_learned.py's baseline)."""
    from benchmarks.eval_learned import acting_policy

    return acting_policy(oom=False, infrastructure=False)


@pytest.mark.parametrize("name,max_wasted,max_missed", FLOORS)
def test_redteam_floor(taxonomy, name, max_wasted, max_missed):
    t = score_redteam.score(name, taxonomy, _rules_only_policy())
    assert t.tried >= {"precision": 147, "recall": 188, "runner": 115, "actions": 105}[name]
    assert len(t.wasted) <= max_wasted, t.wasted
    assert len(t.missed) <= max_missed, t.missed


@pytest.mark.parametrize("name,max_wasted,max_missed", SHIPPED_FLOORS)
def test_redteam_floor_with_the_shipped_policy(taxonomy, name, max_wasted, max_missed):
    t = score_redteam.score(name, taxonomy)
    assert len(t.wasted) <= max_wasted, t.wasted
    assert len(t.missed) <= max_missed, t.missed
    # whatever the learned fallback adds is its own verdicts' doing, never a rule's
    rules_only = score_redteam.score(name, taxonomy, _rules_only_policy())
    assert set(rules_only.wasted) <= set(t.wasted)


def test_probe_ids_are_unique_and_families_known():
    from retry_bot.model import Family

    families = {f.value for f in Family}
    for name in score_redteam.SETS:
        ids = [p[0] for p in score_redteam.probes(name)]
        assert len(ids) == len(set(ids)), name
        assert {p[1] for p in score_redteam.probes(name)} <= families
