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
import operator
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
           "fit_logistic", "train", "to_json", "main"]

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
#: twenty-eighth, ZC scored blind once after the twenty-eighth and read by the twenty-ninth, ZD scored blind once after
#: the twenty-ninth and read by the thirtieth, ZE scored blind once after the thirtieth and read by the thirty-first, ZF
#: scored blind once after the thirty-first and read by the thirty-second, ZG scored blind once after the thirty-second
#: and read by the thirty-third, ZH and ZI scored blind once after the thirty-third and read by the thirty-fourth, ZJ
#: and ZK scored blind once after the thirty-fourth and read by the thirty-fifth, ZL scored blind once after the
#: thirty-fifth and read by the thirty-sixth, ZM scored blind once after the thirty-sixth and read by the
#: thirty-seventh, ZN and ZO scored blind once after the thirty-seventh and read by the thirty-eighth, ZP and ZQ
#: scored blind once after the thirty-eighth and read by the thirty-ninth, ZR scored blind once after the
#: thirty-ninth and read by the fortieth, ZS and ZT scored blind once after the fortieth and read by the
#: forty-first, ZU scored blind once after the forty-first and read by the forty-second, ZV, ZW and ZX scored blind
#: once after the forty-second and read by the forty-third, ZY and ZZ scored blind once after the forty-third and
#: read by the forty-fourth, ZZA and ZZB scored blind once after the forty-fourth and read by the forty-fifth, ZZC and
#: ZZD scored blind once after the forty-fifth and read by the forty-sixth, ZZE and ZZF scored blind once after the
#: forty-sixth and read by the forty-seventh, ZZG and ZZH scored blind once after the forty-seventh and read by the
#: forty-eighth, ZZI and ZZJ scored blind once after the forty-eighth and read by the forty-ninth, so they train it
#: too; any split collected later (ZZK...) is not listed and may not train it.
READ_SPLITS: tuple[str, ...] = ("cases", "tuning", "heldout-a", "heldout-b", "heldout-c", "heldout-d", "heldout-e",
                                "heldout-f", "heldout-g", "heldout-h", "heldout-i", "heldout-j", "heldout-k",
                                "heldout-l", "heldout-m", "heldout-n", "heldout-o", "heldout-p",
                                "heldout-q", "heldout-r", "heldout-s", "heldout-t", "heldout-u", "heldout-v",
                                "heldout-w", "heldout-x", "heldout-y", "heldout-z", "heldout-za",
                                "heldout-zb", "heldout-zc", "heldout-zd", "heldout-ze",
                                "heldout-zf", "heldout-zg", "heldout-zh", "heldout-zi",
                                "heldout-zj", "heldout-zk", "heldout-zl", "heldout-zm",
                                "heldout-zn", "heldout-zo", "heldout-zp", "heldout-zq", "heldout-zr",
                                "heldout-zs", "heldout-zt", "heldout-zu", "heldout-zv",
                                "heldout-zw", "heldout-zx", "heldout-zy", "heldout-zz",
                                "heldout-zza", "heldout-zzb", "heldout-zzc", "heldout-zzd",
                                "heldout-zze", "heldout-zzf", "heldout-zzg", "heldout-zzh",
                                "heldout-zzi", "heldout-zzj")
#: The families the model may name: not ``canceled`` (GitLab's status says it) nor ``unknown``.
CLASSES: tuple[str, ...] = ("oom", "timeout", "infrastructure", "build_error", "config_error")
#: Digits kept in the artifact's weights (a regenerated artifact is byte-identical).
_DIGITS = 4


#: Hyper-parameters (stored in the artifact): ``C`` (the inverse of the L2 penalty on the weights, as
#: scikit-learn's ``C``: the objective is ``sum of the cases' log-losses + ||w||^2 / (2 C)``; the class
#: biases are not penalised), ``iterations`` (L-BFGS iterations, fixed so that the artifact is
#: deterministic; the objective has settled to within 0.1 % by 60), ``min_df`` (a feature must occur in
#: this many training traces), ``max_df`` (a word in more than this share of them is left out:
#: ``error``, ``failed``, ``job``...), ``min_words`` (the model stays silent on a trace with fewer
#: known words: see ``LearnedModel``).  ``min_df``, ``max_df`` and ``min_words`` are the naive Bayes
#: model's (chosen on held-out D, "Sixth pass"); ``C = 1`` is the textbook default, not tuned: see
#: ``benchmarks/eval_learned.py`` and docs/taxonomy.md, "The learned fallback's precision".
DEFAULT_OPTIONS: Mapping[str, Any] = {"C": 1.0, "iterations": 100, "min_df": 2, "max_df": 0.2, "min_words": 5}
#: The L-BFGS memory (pairs of steps kept).
_MEMORY = 8


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


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return math.fsum(map(operator.mul, a, b))


def fit_logistic(docs: Sequence[Sequence[int]], labels: Sequence[int], n_features: int, n_classes: int,
                 c: float, iterations: int) -> tuple[list[list[float]], list[float]]:
    """Multinomial logistic regression on binary features: the weights (one list per class) and the
    class biases minimising ``sum_d -log softmax(b + W x_d)[y_d] + ||W||^2 / (2 c)``.

    ``docs``: each document's feature indices (sorted, distinct).  L-BFGS (memory :data:`_MEMORY`)
    preconditioned by the diagonal bound of the Hessian (``df_j / 4 + 1 / c``), with Armijo
    backtracking, for exactly ``iterations`` iterations (fewer only if no step decreases the
    objective any more): every operation is in a fixed order, so the result is deterministic.
    """
    k, v, n = n_classes, n_features, len(docs)
    lam = 1.0 / c
    # the documents holding each feature: the gradient of a weight is a sum over them
    holders: list[list[int]] = [[] for _ in range(v)]
    for d, feats in enumerate(docs):
        for j in feats:
            holders[j].append(d)
    size = k * v + k  # the weights class by class, then the biases

    def objective(theta: list[float]) -> tuple[float, list[float]]:
        w = [theta[i * v:(i + 1) * v] for i in range(k)]
        b = theta[k * v:]
        resid = [[0.0] * n for _ in range(k)]  # p(class | doc) - [class is the label]
        loss = 0.0
        for d, feats in enumerate(docs):
            s = [b[i] + sum(map(w[i].__getitem__, feats)) for i in range(k)]
            top = max(s)
            e = [math.exp(x - top) for x in s]
            t = sum(e)
            loss += top + math.log(t) - s[labels[d]]
            for i in range(k):
                resid[i][d] = e[i] / t - (labels[d] == i)
        grad: list[float] = []
        for i in range(k):
            r, wi = resid[i], w[i]
            grad.extend(sum(map(r.__getitem__, holders[j])) + lam * wi[j] for j in range(v))
        grad.extend(sum(resid[i]) for i in range(k))
        return loss + 0.5 * lam * math.fsum(x * x for x in theta[:k * v]), grad

    diag = [0.25 * len(holders[j]) + lam for j in range(v)] * k + [0.25 * n] * k
    theta = [0.0] * size
    f, g = objective(theta)
    steps: list[tuple[list[float], list[float]]] = []
    for _ in range(iterations):
        # the two-loop recursion: direction = -H g, H the L-BFGS inverse Hessian on the diagonal bound
        q = g[:]
        kept = []
        for s_, y_ in reversed(steps):
            rho = 1.0 / _dot(y_, s_)
            a = rho * _dot(s_, q)
            kept.append((a, rho, s_, y_))
            q = [qi - a * yi for qi, yi in zip(q, y_)]
        gamma = 1.0
        if steps:
            s_, y_ = steps[-1]
            gamma = _dot(s_, y_) / _dot(y_, [yi / hi for yi, hi in zip(y_, diag)])
        r = [gamma * qi / hi for qi, hi in zip(q, diag)]
        for a, rho, s_, y_ in reversed(kept):
            beta = rho * _dot(y_, r)
            r = [ri + (a - beta) * si for ri, si in zip(r, s_)]
        direction = [-ri for ri in r]
        slope = _dot(g, direction)
        if slope >= 0:  # not a descent direction (rounding): restart from the preconditioned gradient
            steps = []
            direction = [-gi / hi for gi, hi in zip(g, diag)]
            slope = _dot(g, direction)
        t = 1.0
        for _ in range(30):
            new = [x + t * dx for x, dx in zip(theta, direction)]
            nf, ng = objective(new)
            if nf <= f + 1e-4 * t * slope:
                break
            t *= 0.5
        else:
            break  # converged as far as floating point goes
        s_ = [a - b for a, b in zip(new, theta)]
        y_ = [a - b for a, b in zip(ng, g)]
        if _dot(s_, y_) > 1e-10:
            steps.append((s_, y_))
            del steps[:-_MEMORY]
        theta, f, g = new, nf, ng
    return [theta[i * v:(i + 1) * v] for i in range(k)], theta[k * v:]


def train(cases: Iterable[Mapping[str, Any]], options: Mapping[str, Any] = DEFAULT_OPTIONS,
          trained_on: Sequence[str] = ()) -> dict[str, Any]:
    """A logistic-regression artifact (JSON-ready) from labelled cases; deterministic for the same input."""
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
    n_docs = [0] * k
    for c, _ in docs:
        n_docs[c] += 1
    weights, bias = fit_logistic([sorted(index[f] for f in feats if f in index) for _, feats in docs],
                                 [c for c, _ in docs], len(vocab), k, float(options["C"]),
                                 int(options["iterations"]))
    # rounded (a regenerated artifact is byte-identical); + 0.0 turns a -0.0 into 0.0
    table = {f: [round(weights[c][i], _DIGITS) + 0.0 for c in range(k)] for i, f in enumerate(vocab)}
    return {
        "format": MODEL_FORMAT,
        "kind": "multinomial logistic regression (L2) on binary features",
        "version": f"2-{'+'.join(trained_on) or 'custom'}-{len(docs)}",
        "trained_on": list(trained_on),
        "cases": len(docs),
        "cases_per_class": dict(zip(CLASSES, n_docs)),
        "options": dict(options),
        "last_bytes": LAST_BYTES,
        "last_lines": LAST_LINES,
        "classes": list(CLASSES),
        "bias": [round(b, _DIGITS) + 0.0 for b in bias],
        "weights": table,
    }


def to_json(model: Mapping[str, Any]) -> str:
    """The artifact's text: sorted keys, one feature per line (readable diffs), a final newline."""
    head = {k: v for k, v in model.items() if k != "weights"}
    lines = ["{"]
    for k in sorted(head):
        lines.append(f"  {json.dumps(k)}: {json.dumps(head[k], sort_keys=True)},")
    lines.append('  "weights": {')
    items = sorted(model["weights"].items())
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
