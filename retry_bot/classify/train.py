"""Training the learned fallback (:mod:`retry_bot.classify.learned`): deterministic, dependency-free.

Reads labelled job-log excerpts (the ``[[case]]`` tables of ``tests/data/joblogs/*.toml``: ``excerpt``,
``family``, optional ``failure_reason`` and ``exit_code``; never the ``note`` or ``category``,
which name the answer) and writes the JSON artifact the classifier loads.  Only the splits that
were already read may train it (:data:`READ_SPLITS`); a split collected later (a sealed held-out
set, S and after) is refused, so its figures stay honest.

Regenerate the shipped artifact (a test checks it equals this output)::

    .venv/bin/python -m retry_bot.classify.train --out retry_bot/classify/learned_model.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from retry_bot.classify.engine import effective_exit_code
from retry_bot.classify.learned import LAST_BYTES, LAST_LINES, MODEL_FORMAT, features
from retry_bot.classify.structure import analyse, drop_post_failure_output
from retry_bot.classify.trace import TraceText
from retry_bot.model import JobFacts

__all__ = ["READ_SPLITS", "CLASSES", "DEFAULT_OPTIONS", "case_features", "load_split",
           "train", "to_json", "main"]

#: The labelled splits that were read while writing rules (in the order they were read), so
#: in-sample for the rules anyway.  F, G and H were scored blind once by the lead and then read by
#: the seventh pass, I scored blind once after the seventh pass and read by the eighth, J scored blind
#: once after the eighth and read by the ninth, K scored blind after the eighth to eleventh and read by
#: the twelfth, L scored blind once after the twelfth and read by the thirteenth, M scored blind once after
#: the thirteenth and read by the fourteenth, N scored blind once after the fourteenth and read by the
#: fifteenth, O and P read by the sixteenth, Q scored blind once after the sixteenth and read by the
#: seventeenth, R scored blind once after the seventeenth and read by the eighteenth, S scored blind once after
#: the eighteenth and the runner catalogue and read by the nineteenth, T scored blind once after the nineteenth and
#: the GitHub Actions catalogue and read by the twentieth, U scored blind once after the twentieth and read by the
#: twenty-first, V scored blind once after the twenty-first and read by the twenty-second, W scored blind once after the
#: twenty-second and read by the twenty-third, X scored blind once after the twenty-third and read by the twenty-fourth, Y scored blind once after the twenty-fourth and read by the
#: twenty-fifth, Z scored blind once after the twenty-fifth and read by the twenty-sixth, ZA scored blind once after
#: the twenty-sixth and read by the twenty-seventh, ZB scored blind once after the twenty-seventh and read by the
#: twenty-eighth, ZC scored blind once after the twenty-eighth and read by the twenty-ninth, so they train it too; any
#: split collected later (ZD...) is not listed and may not train it.
READ_SPLITS: tuple[str, ...] = ("cases", "tuning", "heldout-a", "heldout-b", "heldout-c", "heldout-d", "heldout-e",
                                "heldout-f", "heldout-g", "heldout-h", "heldout-i", "heldout-j", "heldout-k",
                                "heldout-l", "heldout-m", "heldout-n", "heldout-o", "heldout-p",
                                "heldout-q", "heldout-r", "heldout-s", "heldout-t", "heldout-u", "heldout-v",
                                "heldout-w", "heldout-x", "heldout-y", "heldout-z", "heldout-za",
                                "heldout-zb", "heldout-zc")
#: The families the model may name: not ``canceled`` (GitLab's status says it) nor ``unknown``.
CLASSES: tuple[str, ...] = ("oom", "timeout", "infrastructure", "build_error", "config_error")
#: Digits kept in the artifact's log-probabilities (a regenerated artifact is byte-identical).
_DIGITS = 4


#: Hyper-parameters (stored in the artifact): ``alpha`` (Laplace smoothing), ``min_df`` (a feature
#: must occur in this many training traces), ``max_df`` (a word in more than this share of them is
#: left out: ``error``, ``failed``, ``job``...), ``uniform_prior`` (equal class priors: the
#: model speaks on the traces the rules left, whose mix of families is not the training set's),
#: ``min_words`` (the model stays silent on a trace with fewer known words: see ``LearnedModel``).
#: Chosen on held-out D with a model trained on the splits read before it (cases, tuning, A, B, C):
#: see ``benchmarks/eval_learned.py`` and docs/taxonomy.md, "Sixth pass".
DEFAULT_OPTIONS: Mapping[str, Any] = {"alpha": 0.25, "min_df": 2, "max_df": 0.2,
                                      "uniform_prior": True, "min_words": 5}


def load_split(data_dir: Path, split: str) -> list[dict[str, Any]]:
    """The cases of one read split; a split not in :data:`READ_SPLITS` is refused."""
    if split not in READ_SPLITS:
        raise ValueError(f"split {split!r} may not train the learned model: only the splits already read "
                         f"({', '.join(READ_SPLITS)}) may; a held-out split stays unseen")
    return list(tomllib.loads((data_dir / f"{split}.toml").read_text("utf-8"))["case"])


def case_features(case: Mapping[str, Any]) -> set[str]:
    """The features of one labelled excerpt, computed exactly as the classifier computes them."""
    # as classify() reads a trace: without what after_script and the *_on_failure stages printed
    raw = drop_post_failure_output(str(case["excerpt"]).encode("utf-8"))
    facts = JobFacts(job_id=1, name="case", failure_reason=case.get("failure_reason"),
                     exit_code=case.get("exit_code"), status=case.get("status", "failed"))
    trace = TraceText(raw)
    code, _ = effective_exit_code(facts, trace, None)
    return features(trace, failure_reason=facts.failure_reason, exit_code=code, structure=analyse(raw))


def train(cases: Iterable[Mapping[str, Any]], options: Mapping[str, Any] = DEFAULT_OPTIONS,
          trained_on: Sequence[str] = ()) -> dict[str, Any]:
    """A naive Bayes artifact (JSON-ready) from labelled cases; deterministic for the same input."""
    alpha = float(options["alpha"])
    min_df = int(options["min_df"])
    docs: list[tuple[int, set[str]]] = []
    for c in cases:
        fam = c["family"]
        if fam not in CLASSES:
            continue
        docs.append((CLASSES.index(fam), case_features(c)))
    if not docs:
        raise ValueError("no labelled case of a learnable family")
    df: dict[str, int] = {}
    for _, feats in docs:
        for f in feats:
            df[f] = df.get(f, 0) + 1
    # Words in more than max_df of the traces (error, failed, job, exit...) say nothing about the
    # family and would only be counted again and again: left out.  Structural features stay.
    most = float(options.get("max_df", 1.0)) * len(docs)
    vocab = sorted(f for f, n in df.items() if n >= min_df and (n <= most or f.startswith(("s:", "#"))))
    index = {f: i for i, f in enumerate(vocab)}
    k = len(CLASSES)
    counts = [[0] * len(vocab) for _ in range(k)]
    n_docs = [0] * k
    for c, feats in docs:
        n_docs[c] += 1
        row = counts[c]
        for f in feats:
            i = index.get(f)
            if i is not None:
                row[i] += 1
    totals = [sum(row) for row in counts]
    v = len(vocab)
    loglik = {f: [round(math.log((counts[c][i] + alpha) / (totals[c] + alpha * v)), _DIGITS) for c in range(k)]
              for i, f in enumerate(vocab)}
    if options.get("uniform_prior"):
        prior = [round(-math.log(k), _DIGITS)] * k
    else:
        n = len(docs)
        prior = [round(math.log((n_docs[c] + 1) / (n + k)), _DIGITS) for c in range(k)]
    return {
        "format": MODEL_FORMAT,
        "kind": "binary multinomial naive Bayes",
        "version": f"1-{'+'.join(trained_on) or 'custom'}-{len(docs)}",
        "trained_on": list(trained_on),
        "cases": len(docs),
        "cases_per_class": dict(zip(CLASSES, n_docs)),
        "options": dict(options),
        "last_bytes": LAST_BYTES,
        "last_lines": LAST_LINES,
        "classes": list(CLASSES),
        "log_prior": prior,
        "log_likelihood": loglik,
    }


def to_json(model: Mapping[str, Any]) -> str:
    """The artifact's text: sorted keys, one feature per line (readable diffs), a final newline."""
    head = {k: v for k, v in model.items() if k != "log_likelihood"}
    lines = ["{"]
    for k in sorted(head):
        lines.append(f"  {json.dumps(k)}: {json.dumps(head[k], sort_keys=True)},")
    lines.append('  "log_likelihood": {')
    items = sorted(model["log_likelihood"].items())
    for j, (f, w) in enumerate(items):
        lines.append(f"    {json.dumps(f)}: {json.dumps(w)}{',' if j < len(items) - 1 else ''}")
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Train the learned fallback on the labelled splits already read.")
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "tests" / "data" / "joblogs",
                    help="directory of the split files (default: the repository's tests/data/joblogs)")
    ap.add_argument("--split", action="append", choices=READ_SPLITS,
                    help="train on this split (repeatable; default: every read split)")
    ap.add_argument("--out", type=Path, help="write the artifact here (default: stdout)")
    args = ap.parse_args(argv)
    splits = tuple(args.split or READ_SPLITS)
    cases = [c for s in splits for c in load_split(args.data, s)]
    text = to_json(train(cases, DEFAULT_OPTIONS, splits))
    if args.out:
        args.out.write_text(text, "utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
