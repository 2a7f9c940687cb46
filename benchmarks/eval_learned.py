#!/usr/bin/env python3
"""The learned fallback measured honestly: temporally, on blind sets the rules had not seen.

The rules of today have read every labelled split, so in-sample figures prove nothing.  The history
is used instead: for held-out D, the rules as they were when D was scored blind (``5c6641f``, never
saw D) plus a model trained only on the splits read before D (cases, tuning, A, B, C); for held-out
E, the rules at ``187f4f0`` (never saw E) plus a model trained on those and D.  The old rules'
verdicts come from the old classifier itself (``git archive`` of that commit into a cache directory,
run in a subprocess that prints one JSON line per case); the fallback (today's
:mod:`retry_bot.classify.learned`, trained as said) then replaces an eligible ``unknown``, and
today's ``decide()`` with the shipped default policy, its learned categories acting on nothing, decides, as ``benchmarks/score_classify.py``
does (memory limit in force known, ``KUBERNETES_MEMORY_LIMIT=4Gi``).

Since the eighth pass the same is done for held-out I (the rules at ``715f118``, where the lead scored
it blind, with their own learned fallback switched off by a site file; a model trained on the splits
read before I: cases to H) and, as supporting evidence, for F, G and H (the rules at ``563269b``, a
model trained on cases to E).  For each blind set that policy (the shipped one until session 24) is compared with the learned
verdicts acting once (``oom`` only, ``infrastructure`` only, both), and the decisions that change are
counted per labelled family: fixed (wrong with the rules alone, right acting) and spoiled (right
with the rules alone, wrong acting; a spoiled build_error, config_error or timeout is a
deterministic failure re-run).

Usage::

    .venv/bin/python benchmarks/eval_learned.py            # D, E, I, J (+ F, G, H): rules alone vs rules + model; LOSO CV
    .venv/bin/python benchmarks/eval_learned.py --only-later --no-loso   # O to Z only
    .venv/bin/python benchmarks/eval_learned.py --tune     # the naive Bayes era's grid on D (now over min_words and C)

Since the ninth pass also held-out J (the rules at ``691d7d5``, main after the eighth pass, where the
lead scored it blind, their learned fallback switched off; a model trained on cases to I); the bar for
letting learned verdicts act is judged on D, E, I and J together.

Since session 24 (the learned fallback's precision) also blind sets O to Z (:data:`LATER`), each at the commit it
was scored blind at, the commit's own learned fallback switched off, with a model trained on the splits read
before it: the pooled O..Z trade is the measure the model itself was changed by (naive Bayes -> L2 logistic
regression, ``C = 1``; docs/taxonomy.md, "The learned fallback's precision").  ``--only-later`` replays
only O to Z, ``--no-later`` leaves them out.  The models are trained by today's
:func:`retry_bot.classify.train.train` (about 10-20 s each), so a full run with the leave-one-split-out
cross-validation takes several minutes; ``--no-loso`` skips the latter.

Only the splits already read (``READ_SPLITS``) can be loaded: a blind set not yet read (ZZK and later) is
refused, so no option lets this script read it (K was read by the twelfth pass, L by the thirteenth, M by
the fourteenth, N by the fifteenth, O and P by the sixteenth, Q by the seventeenth, R by the eighteenth, S by the nineteenth, T by the twentieth, U by the twenty-first, V by the twenty-second, W by the twenty-third, X by the twenty-fourth, Y by the twenty-fifth, Z by the twenty-sixth, ZA by the twenty-seventh, ZB by the twenty-eighth, ZC by the twenty-ninth, ZD by the thirtieth, ZE by the thirty-first, ZF by the thirty-second, ZG by the thirty-third, ZH and ZI by the thirty-fourth, ZJ and ZK by the thirty-fifth, ZL by the thirty-sixth, ZM by the thirty-seventh, ZN and ZO by the thirty-eighth, ZP and ZQ by the thirty-ninth, ZR by the fortieth, ZS and ZT by the forty-first, ZU by the forty-second, ZV, ZW and ZX by the forty-third, ZY and ZZ by the forty-fourth, ZZA and ZZB by the forty-fifth, ZZC and ZZD by the forty-sixth, ZZE and ZZF by the forty-seventh, ZZG and ZZH by the forty-eighth).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from retry_bot.classify.engine import effective_exit_code  # noqa: E402
from retry_bot.classify.learned import ELIGIBLE_STAGES, LearnedModel, consult  # noqa: E402
from retry_bot.classify.structure import analyse  # noqa: E402
from retry_bot.classify.taxonomy import load_taxonomy  # noqa: E402
from retry_bot.classify.trace import TraceText  # noqa: E402
from retry_bot.classify.train import DEFAULT_OPTIONS, READ_SPLITS, case_features, train  # noqa: E402
from retry_bot.decide import Action, ClassUsage, decide  # noqa: E402
from retry_bot.model import Classification, Family, JobFacts  # noqa: E402
from retry_bot.policy import default_policy  # noqa: E402

from benchmarks.score_classify import LIMIT, WANTED, case_facts, count  # noqa: E402  (one tally, one set of job facts)

DATA = ROOT / "tests" / "data" / "joblogs"
_BEFORE_F = ("cases", "tuning", "heldout-a", "heldout-b", "heldout-c", "heldout-d", "heldout-e")
#: Blind set -> (the commit it was scored blind at, the splits read before it was collected).
TEMPORAL: dict[str, tuple[str, tuple[str, ...]]] = {
    "heldout-d": ("5c6641f", ("cases", "tuning", "heldout-a", "heldout-b", "heldout-c")),
    "heldout-e": ("187f4f0", ("cases", "tuning", "heldout-a", "heldout-b", "heldout-c", "heldout-d")),
    "heldout-i": ("715f118", _BEFORE_F + ("heldout-f", "heldout-g", "heldout-h")),
    # ninth pass: J as the lead scored it blind (main 691d7d5, after the eighth pass), a model trained on cases..I
    "heldout-j": ("691d7d5", _BEFORE_F + ("heldout-f", "heldout-g", "heldout-h", "heldout-i")),
}


def _before(last: str) -> tuple[str, ...]:
    """The read splits up to and including ``last`` (in the order they were read)."""
    return READ_SPLITS[:READ_SPLITS.index(last) + 1]


#: The learned fallback's precision (session 24): blind sets O to Z, each re-classified at the commit
#: it was scored blind at (the lead verified that each reproduces the set's recorded blind figure exactly), with
#: a model trained on the splits read before it.
LATER: dict[str, tuple[str, tuple[str, ...]]] = {
    "heldout-o": ("e1ce4f1", _before("heldout-n")),
    "heldout-p": ("e1ce4f1", _before("heldout-n")),
    "heldout-q": ("a0d3bc8", _before("heldout-p")),
    "heldout-r": ("ea0bf15", _before("heldout-q")),
    "heldout-s": ("e11cc6b", _before("heldout-r")),
    "heldout-t": ("bd26181", _before("heldout-s")),
    "heldout-u": ("b1bc837", _before("heldout-t")),
    "heldout-v": ("76b4ecb", _before("heldout-u")),
    "heldout-w": ("583564a", _before("heldout-v")),
    "heldout-x": ("0602632", _before("heldout-w")),
    "heldout-y": ("7c2973c", _before("heldout-x")),
    "heldout-z": ("a7e563c", _before("heldout-y")),
}
#: The blind sets the logistic regression's choice on O to Z never saw (its design never read them; ZA was scored
#: before it was chosen, the others after): each
#: at the commit it was scored blind at, with a model trained on the splits read before it.  ZA, ZB and ZC were
#: scored with the naive Bayes of their day, ZD to ZU with the logistic regression acting (each switched off
#: here).
NEWER: dict[str, tuple[str, tuple[str, ...]]] = {
    "heldout-za": ("f7a095a", _before("heldout-z")),
    "heldout-zb": ("f78f128", _before("heldout-za")),
    "heldout-zc": ("d0b2471", _before("heldout-zb")),
    "heldout-zd": ("b3720ec", _before("heldout-zc")),
    "heldout-ze": ("6283c0b", _before("heldout-zd")),
    # ZF was scored blind at b02e8a9 (the merge of its audit; the code of c8c019f, after the thirty-first pass)
    "heldout-zf": ("b02e8a9", _before("heldout-ze")),
    # ZG was scored blind at cfd9096 (its registration; the code of ca9a9d1, after the thirty-second pass)
    "heldout-zg": ("cfd9096", _before("heldout-zf")),
    # ZH and ZI were scored blind at 6f66ed9 (after the thirty-third pass, with the learned OOM resize at p >= 0.9)
    "heldout-zh": ("6f66ed9", _before("heldout-zg")),
    "heldout-zi": ("6f66ed9", _before("heldout-zg")),
    # ZJ and ZK were scored blind at 6a45aab (their registration; the code of 6a8af52, after the thirty-fourth pass)
    "heldout-zj": ("6a45aab", _before("heldout-zi")),
    "heldout-zk": ("6a45aab", _before("heldout-zi")),
    # ZL was scored blind at 49577af (the merge of the thirty-fifth pass)
    "heldout-zl": ("49577af", _before("heldout-zk")),
    # ZM was scored blind at bd280f7 (after the thirty-sixth pass)
    "heldout-zm": ("bd280f7", _before("heldout-zl")),
    # ZN and ZO were scored blind at cb56520 (ZO's registration; after the thirty-seventh pass)
    "heldout-zn": ("cb56520", _before("heldout-zm")),
    "heldout-zo": ("cb56520", _before("heldout-zm")),
    # ZP and ZQ were scored blind at cda2a95 and 2eac1c0 (their registrations; the code after the thirty-eighth pass)
    "heldout-zp": ("cda2a95", _before("heldout-zo")),
    "heldout-zq": ("2eac1c0", _before("heldout-zo")),
    # ZR was scored blind at ad1f479 (its registration; the code after the thirty-ninth pass)
    "heldout-zr": ("ad1f479", _before("heldout-zq")),
    # ZS and ZT were scored blind at 3fb9a6b (their registration; the code after the fortieth pass)
    "heldout-zs": ("3fb9a6b", _before("heldout-zr")),
    "heldout-zt": ("3fb9a6b", _before("heldout-zr")),
    # ZU was scored blind at bf92aa8 (its registration; the code after the forty-first pass)
    "heldout-zu": ("bf92aa8", _before("heldout-zt")),
    # ZV, ZW and ZX were scored blind at b59b5b4, c69c751 and 4d95faf (their registrations; the code after the
    # forty-second pass)
    "heldout-zv": ("b59b5b4", _before("heldout-zu")),
    "heldout-zw": ("c69c751", _before("heldout-zu")),
    "heldout-zx": ("4d95faf", _before("heldout-zu")),
    # ZY and ZZ were scored blind at eb77e62 (their registration; the code after the forty-third pass, with the learned
    # infrastructure retry from p >= 0.8)
    "heldout-zy": ("eb77e62", _before("heldout-zx")),
    "heldout-zz": ("eb77e62", _before("heldout-zx")),
    # ZZB and ZZA were scored blind at a3e1745 and 6ff7bdb (their registrations; the code after the forty-fourth pass)
    "heldout-zza": ("6ff7bdb", _before("heldout-zz")),
    "heldout-zzb": ("a3e1745", _before("heldout-zz")),
    # ZZC and ZZD were scored blind at 641d78d (ZZD's registration; the code after the forty-fifth pass)
    "heldout-zzc": ("641d78d", _before("heldout-zzb")),
    "heldout-zzd": ("641d78d", _before("heldout-zzb")),
    # ZZE and ZZF were scored blind at ef2628d (ZZF's registration; the code after the forty-sixth pass)
    "heldout-zze": ("ef2628d", _before("heldout-zzd")),
    "heldout-zzf": ("ef2628d", _before("heldout-zzd")),
    # ZZG and ZZH were scored blind at 848e6c1 (ZZH's registration; the code after the forty-seventh pass)
    "heldout-zzg": ("848e6c1", _before("heldout-zzf")),
    "heldout-zzh": ("848e6c1", _before("heldout-zzf")),
    # ZZI and ZZJ were scored blind at 486b4e3 (ZZJ's registration; the code after the forty-eighth pass)
    "heldout-zzi": ("486b4e3", _before("heldout-zzh")),
    "heldout-zzj": ("486b4e3", _before("heldout-zzh")),
}
#: Supporting evidence: the sets scored blind once by the lead after the sixth pass (``563269b``).
SUPPORTING: dict[str, tuple[str, tuple[str, ...]]] = {
    "heldout-f": ("563269b", _BEFORE_F),
    "heldout-g": ("563269b", _BEFORE_F),
    "heldout-h": ("563269b", _BEFORE_F),
}
#: Commits whose classifier already had a learned fallback: it is switched off there (a site file),
#: so that the old rules' ``unknown`` reaches the model trained here, as for D and E.
_TREE_HAS_LEARNED = ({"563269b", "715f118", "691d7d5"} | {commit for commit, _ in LATER.values()}
                     | {commit for commit, _ in NEWER.values()})
_LEARNED_OFF = "[learned]\nenabled = false\n"

_OLD_CLASSIFIER = r"""
import json, sys, tomllib
from pathlib import Path
from retry_bot.classify import classify, load_taxonomy
from retry_bot.model import JobFacts
tax = load_taxonomy([Path(p) for p in sys.argv[3:]])
stage_of = {r.name: r.stage for r in tax.rules}
for i, c in enumerate(tomllib.loads(open(sys.argv[1], encoding="utf-8").read())["case"], 1):
    facts = JobFacts(job_id=i, name=c["id"], failure_reason=c.get("failure_reason"), exit_code=c.get("exit_code"),
                     status=c.get("status", "failed"), variables={"KUBERNETES_MEMORY_LIMIT": sys.argv[2]})
    v = classify(facts, c["excerpt"].encode("utf-8"), tax)
    print(json.dumps({"id": c["id"], "family": v.family.value, "category": v.category, "rule": v.rule,
                      "confidence": v.confidence, "stage": stage_of.get(v.rule, "fallback"),
                      "evidence": list(v.evidence)[:4]}))
"""


def load(split: str) -> list[dict[str, Any]]:
    if split not in READ_SPLITS:
        raise SystemExit(f"refused: {split} is not a read split (held-out ZZK and later sets are not read)")
    return list(tomllib.loads((DATA / f"{split}.toml").read_text("utf-8"))["case"])


def old_tree(commit: str) -> Path:
    """The classifier as it was at ``commit`` (``git archive`` into a cache directory, once)."""
    dest = Path(tempfile.gettempdir()) / f"rightsizer-eval-learned-{commit}"
    if not (dest / "retry_bot" / "classify" / "engine.py").exists():
        dest.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile() as tar:
            subprocess.run(["git", "-C", str(ROOT), "archive", commit, "retry_bot", "runner_wrapper"],
                           stdout=tar, check=True)
            tar.seek(0)
            with tarfile.open(fileobj=tar) as tf:
                tf.extractall(dest, filter="data")
    return dest


def old_verdicts(commit: str, split: str) -> dict[str, dict[str, Any]]:
    load(split)  # refuses sealed splits before anything runs
    tree = old_tree(commit)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    site: list[str] = []
    if commit in _TREE_HAS_LEARNED:
        off = tree / "learned-off.toml"
        off.write_text(_LEARNED_OFF, "utf-8")
        site = [str(off)]
    out = subprocess.run([sys.executable, "-c", _OLD_CLASSIFIER, str(DATA / f"{split}.toml"), LIMIT, *site],
                         capture_output=True, text=True, env=env, check=True, cwd=tempfile.gettempdir())
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    return {r["id"]: r for r in rows}


@dataclass
class Score:
    n: int = 0
    right: int = 0
    family: int = 0
    oom: int = 0
    oom_resized: int = 0
    infra: int = 0
    infra_retried: int = 0
    wasted: int = 0
    unknown: int = 0
    spoke: int = 0
    spoke_right: int = 0
    changed: list[str] = field(default_factory=list)
    #: case id -> (label, decision right?) for comparing two policies case by case
    decisions: dict[str, tuple[str, bool]] = field(default_factory=dict)

    def row(self, label: str) -> str:
        pct = lambda a, b: f"{100 * a / b:5.1f}%" if b else "  n/a"  # noqa: E731
        extra = f"  model spoke {self.spoke:2d} ({self.spoke_right} right family)" if self.spoke else ""
        return (f"{label:28} right {pct(self.right, self.n)}  family {pct(self.family, self.n)}  "
                f"OOM resized {self.oom_resized:2d}/{self.oom:<2d}  infra retried {self.infra_retried:2d}/{self.infra:<2d}  "
                f"det. re-runs/100 {100 * self.wasted / self.n:4.1f}  unknown {pct(self.unknown, self.n)}{extra}")


def with_model(model: LearnedModel | None, old: Mapping[str, Any], c: Mapping[str, Any], facts: JobFacts,
               threshold: float) -> Classification:
    """The old rules' verdict, through today's fallback when it is eligible."""
    verdict = Classification(category=old["category"], family=Family(old["family"]), rule=old["rule"],
                             evidence=tuple(old["evidence"]), confidence=old["confidence"])
    if model is None or verdict.family != Family.UNKNOWN or old["stage"] not in ELIGIBLE_STAGES:
        return verdict
    raw = c["excerpt"].encode("utf-8")
    trace = TraceText(raw)
    code, _ = effective_exit_code(facts, trace, None)
    return consult(model, verdict, trace, failure_reason=facts.failure_reason, exit_code=code,
                   structure=analyse(raw), min_probability=threshold)


def score(cases: list[dict[str, Any]], olds: Mapping[str, Mapping[str, Any]], model: LearnedModel | None,
          threshold: float, policy) -> Score:
    s = Score()
    for i, c in enumerate(cases, 1):
        facts = case_facts(i, c)
        old = olds[c["id"]]
        verdict = with_model(model, old, c, facts, threshold)
        got = decide(facts, verdict, [], policy, ClassUsage()).action
        fam = verdict.family.value
        s.n += 1
        count(s, c["family"], fam, got)
        s.decisions[c["id"]] = (c["family"], got == WANTED.get(c["family"], Action.NONE))
        if verdict.rule.startswith("learned:"):
            s.spoke += 1
            s.spoke_right += fam == c["family"]
            s.changed.append(f"{c['id']}: label {c['family']}, learned {fam} -> {got.value}")
    return s


def acting_policy(oom: bool = True, infrastructure: bool = True, oom_min_probability: float | None = None,
                  infrastructure_min_probability: float | None = None):
    """The shipped policy, with learned oom / infrastructure verdicts acting as the issue's cautious
    treatment would have them (one resize, one retry) or not at all (``False``); ``oom_min_probability`` and
    ``infrastructure_min_probability``: act only when the model is at least that sure (the policy's
    ``min_probability``; ``None``: at any probability the fallback speaks at).  ``acting_policy(False, False)``
    is the baseline every trade is counted against: the rules alone decide (the shipped policy until session
    24).  The shipped policy is now ``acting_policy(True, True, 0.9, 0.8)``: learned infrastructure verdicts
    retried once (since session 24; from p >= 0.8 since session 28, the 3:1 bar applied per band of
    probability) and learned oom verdicts resized once when their probability is at least 0.9 (the
    pre-registered bar met on O to ZF: 9 fixed, 2 spoiled replayed here, 3 with the probability read to two
    decimals from the evidence, as the decision was first measured)."""
    from retry_bot.policy.model import Action as PAction, RuleUpdate

    p = default_policy()
    cats = dict(p.categories)
    cats["learned_oom"] = (RuleUpdate(action=PAction.RESIZE, budget=1, min_probability=oom_min_probability)
                           if oom else RuleUpdate(action=PAction.NONE))
    cats["learned_infrastructure"] = (RuleUpdate(action=PAction.RETRY, budget=1,
                                                 min_probability=infrastructure_min_probability)
                                      if infrastructure else RuleUpdate(action=PAction.NONE))
    return replace(p, categories=cats)


@dataclass
class Trade:
    """Decisions a policy change fixed and spoiled, per labelled family."""
    fixed: dict[str, int] = field(default_factory=dict)
    spoiled: dict[str, int] = field(default_factory=dict)

    def add(self, base: Score, variant: Score) -> None:
        for cid, (label, right) in base.decisions.items():
            now = variant.decisions[cid][1]
            if now and not right:
                self.fixed[label] = self.fixed.get(label, 0) + 1
            elif right and not now:
                self.spoiled[label] = self.spoiled.get(label, 0) + 1

    @property
    def spoiled_deterministic(self) -> int:
        return sum(v for k, v in self.spoiled.items() if k not in WANTED)

    def row(self, label: str) -> str:
        fmt = lambda d: ", ".join(f"{k} {v}" for k, v in sorted(d.items())) or "none"  # noqa: E731
        return (f"{label:28} fixed {sum(self.fixed.values()):2d} ({fmt(self.fixed)}); spoiled "
                f"{sum(self.spoiled.values()):2d} ({fmt(self.spoiled)}); deterministic re-runs added "
                f"{self.spoiled_deterministic}")


#: The learned verdicts a policy may let act, compared with the rules alone deciding (learned verdicts acting on
#: none; the shipped policy acts on the infrastructure ones since session 24, from p >= 0.8 since session 28, and
#: on the oom ones at p >= 0.9 since session 25: "shipped").
VARIANTS = {"oom only": (True, False), "infrastructure only": (False, True), "oom and infrastructure": (True, True),
            "oom p >= 0.9 only": (True, False, 0.9), "infrastructure p >= 0.8 only": (False, True, None, 0.8),
            "oom p >= 0.9, infra (any p)": (True, True, 0.9), "oom p >= 0.9, infra p >= 0.7": (True, True, 0.9, 0.7),
            "shipped (oom p >= 0.9, infra p >= 0.8)": (True, True, 0.9, 0.8),
            "oom p >= 0.9, infra p >= 0.9": (True, True, 0.9, 0.9)}


def model_for(splits: tuple[str, ...], options: Mapping[str, Any]) -> LearnedModel:
    return LearnedModel(train([c for sp in splits for c in load(sp)], options, splits))


def loso(options: Mapping[str, Any], threshold: float) -> None:
    """Leave-one-split-out cross-validation of the model alone (no rules) on the read splits."""
    print(f"\nleave-one-split-out, model alone (options {dict(options)}, threshold {threshold}; 'speaks': "
          f"at or above the threshold with at least min_words known words):")
    tot = [0, 0, 0, 0]
    for held in READ_SPLITS:
        model = model_for(tuple(s for s in READ_SPLITS if s != held), options)
        n = right = spoke = spoke_right = 0
        for c in load(held):
            if c["family"] not in model.classes:
                continue
            out = model.predict(case_features(c))
            n += 1
            right += out.family == c["family"]
            if out.probability >= threshold and out.known_words >= model.min_words:
                spoke += 1
                spoke_right += out.family == c["family"]
        for k, v in enumerate((n, right, spoke, spoke_right)):
            tot[k] += v
        print(f"  {held:10} n={n:3d}  argmax family right {100 * right / n:5.1f}%  speaks "
              f"{spoke:3d} ({100 * spoke / n:5.1f}%), of which right {100 * spoke_right / max(spoke, 1):5.1f}%")
    n, right, spoke, spoke_right = tot
    print(f"  {'all':10} n={n:3d}  argmax family right {100 * right / n:5.1f}%  speaks "
          f"{spoke:3d} ({100 * spoke / n:5.1f}%), of which right {100 * spoke_right / max(spoke, 1):5.1f}%")


def tune() -> None:
    """A grid on D only (model trained on cases, tuning, A, B, C; rules at 5c6641f; learned verdicts
    acting, budget 1).  The sixth pass chose the naive Bayes's options on such a grid (smoothing, priors,
    min_df, min_words); the logistic regression kept min_df, max_df and min_words and took the textbook
    ``C = 1`` without a grid: this one only shows the neighbourhood."""
    commit, before = TEMPORAL["heldout-d"]
    cases = load("heldout-d")
    olds = old_verdicts(commit, "heldout-d")
    policy = acting_policy()  # so that the grid shows what acting on the model would do
    print(score(cases, olds, None, 1.0, policy).row("D rules alone"))
    for min_words in (0, 5, 12):
        opts = {**DEFAULT_OPTIONS, "min_words": min_words}
        model = model_for(before, opts)
        for th in (0.6, 0.8, 0.9):
            print(score(cases, olds, model, th, policy).row(f"{dict(opts)} t={th}"))
    for c in (0.3, 1.0, 3.0):
        for min_df in (1, 2, 3):
            opts = {**DEFAULT_OPTIONS, "C": c, "min_df": min_df}
            model = model_for(before, opts)
            for th in (0.6, 0.8, 0.9):
                print(score(cases, olds, model, th, policy).row(f"C={c} df={min_df} t={th}"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tune", action="store_true", help="print the grid on held-out D the options were chosen from")
    ap.add_argument("--changes", action="store_true", help="list the cases where the model spoke")
    ap.add_argument("--no-loso", action="store_true", help="skip the leave-one-split-out cross-validation")
    ap.add_argument("--no-supporting", action="store_true", help="not F, G and H")
    ap.add_argument("--no-later", action="store_true", help="not O to Z, ZA and ZB")
    ap.add_argument("--only-later", action="store_true", help="only O to Z, ZA and ZB")
    args = ap.parse_args(argv)
    if args.tune:
        tune()
        return 0
    threshold = load_taxonomy().learned_min_probability
    policy = acting_policy(False, False)  # the baseline: learned verdicts acting on nothing
    variants = {name: acting_policy(*flags) for name, flags in VARIANTS.items()}
    print(f"options {dict(DEFAULT_OPTIONS)}, min_probability {threshold} (the shipped [learned] table)")
    totals = {"blind sets D, E, I, J": {name: Trade() for name in VARIANTS},
              "supporting F, G, H": {name: Trade() for name in VARIANTS},
              "blind sets O to Z": {name: Trade() for name in VARIANTS},
              "blind sets the model's choice never saw (ZA on, NEWER)": {name: Trade() for name in VARIANTS}}
    sets = [] if args.only_later else [(s, v, "blind sets D, E, I, J") for s, v in TEMPORAL.items()]
    if not args.no_supporting and not args.only_later:
        sets += [(s, v, "supporting F, G, H") for s, v in SUPPORTING.items()]
    if not args.no_later:
        sets += [(s, v, "blind sets O to Z") for s, v in LATER.items()]
        sets += [(s, v, "blind sets the model's choice never saw (ZA on, NEWER)") for s, v in NEWER.items()]
    for split, (commit, before), group in sets:
        cases = load(split)
        olds = old_verdicts(commit, split)
        model = model_for(before, DEFAULT_OPTIONS)
        print(f"\n{split}: rules at {commit}; model trained on {', '.join(before)} ({model.data['cases']} cases)")
        print(score(cases, olds, None, threshold, policy).row("  rules alone"))
        s = score(cases, olds, model, threshold, policy)
        print(s.row("  + learned, acting on nothing"))
        for name, p in variants.items():
            v = score(cases, olds, model, threshold, p)
            print(v.row(f"  + learned, {name}"))
            trade = Trade()
            trade.add(s, v)
            totals[group][name].add(s, v)
            print(trade.row("      vs acting on nothing"))
        if args.changes:
            for line in s.changed:
                print(f"      {line}")
    groups = {group for _, _, group in sets}
    for group, trades in totals.items():
        if group not in groups:
            continue
        print(f"\n{group}, acting once vs acting on nothing (the issue's bar for a change: fixed >= 3 x "
              f"deterministic re-runs added):")
        for name, trade in trades.items():
            fixed = sum(trade.fixed.values())
            verdict = "meets" if fixed >= 3 * trade.spoiled_deterministic else "does not meet"
            print(trade.row(f"  {name}") + f"  -> {verdict} the bar")
    if not args.no_loso:
        loso(DEFAULT_OPTIONS, threshold)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
