#!/usr/bin/env python3
"""Dump the classifier's full verdict for every input it is scored or benchmarked on: an
equivalence harness for changes that must not change any verdict (speed work on the engine).

One line per input, ``<set>\\t<id>\\t<verdict>``, where the verdict is the family, category, rule,
confidence, every evidence line and, when the learned fallback computed a posterior, its exact
probability and posterior (``repr`` of the floats).  Inputs:

* every case of the labelled splits of ``tests/data/joblogs`` that existed at b8b150b (with the
  job facts ``score_classify.py`` uses), as is and again without any job facts at the end of
  ~256 KiB of synthetic build output (so that the trace's own exit code and every text stage
  decide);
* every red-team probe of ``benchmarks/redteam`` (as ``score_redteam.py`` loads them, plus the
  arguable ones it leaves out);
* lines the rules look for put 6 to 70 KiB back behind the same build output (``far``);
* the traces of ``bench_classify.py``'s four workloads as at b8b150b (same seed, built here);
* the traces of its two real-output workloads (``real-no-match``, and every labelled excerpt of
  :data:`REAL_SPLITS` behind the real build output).

Splits added after b8b150b are read only behind the real build output (:data:`REAL_SPLITS`, every read
split); a sealed blind set is never opened: only the files named in
:data:`SPLITS` and :data:`REAL_SPLITS` are read.  Usage::

    .venv/bin/python benchmarks/verdict_dump.py > /tmp/before.txt   # then compare with diff
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import bench_classify, score_classify, score_redteam  # noqa: E402
from retry_bot.classify import classify, learned, load_taxonomy  # noqa: E402
from retry_bot.classify.train import READ_SPLITS  # noqa: E402
from retry_bot.model import JobFacts  # noqa: E402

DATA = ROOT / "tests" / "data" / "joblogs"
#: The splits on main at b8b150b; any other file there (a sealed blind split) is never read.
SPLITS = ("cases", "tuning", "heldout-a", "heldout-b", "heldout-c", "heldout-d", "heldout-e", "heldout-f",
          "heldout-g", "heldout-h", "heldout-i", "heldout-j", "heldout-k")

#: Lines the rules look for, put far back behind build output (the ``far`` inputs).
FAR_LINES = (b"g++: fatal error: Killed signal terminated program cc1plus",
             b"java.lang.OutOfMemoryError: Java heap space", b"x509: certificate signed by unknown authority",
             b"Killed", b"make: *** [Makefile:12: all] Error 137", b"curl: (6) Could not resolve host: gitlab.com",
             b"FAILED tests/test_a.py::test_x - AssertionError", b"No space left on device")

#: The splits ``bench_classify.py``'s realistic workload read at b8b150b.
BENCH_SPLITS = SPLITS[:-1]
#: The splits behind ``bench_classify.py``'s ``real-realistic`` workload: every read split, in the order they were
#: read (``READ_SPLITS``, the list the learned fallback trains on and each pass extends); a sealed blind split is
#: not among them and is never opened.
REAL_SPLITS = READ_SPLITS
_posteriors: list[str] = []
_predict = learned.LearnedModel.predict


def _recording_predict(self, feats, exclude=()):
    out = _predict(self, feats, exclude)
    _posteriors.append(f"{out.family} p={out.probability!r} words={out.known_words} "
                       f"top={list(out.top_features)} post={sorted((k, repr(v)) for k, v in out.posterior.items())}")
    return out


def verdict_line(facts: JobFacts, trace: bytes, taxonomy) -> str:
    _posteriors.clear()
    v = classify(facts, trace, taxonomy)
    return json.dumps([v.family.value, v.category, v.rule, v.confidence, list(v.evidence), list(_posteriors)],
                      ensure_ascii=True)


def inputs(taxonomy) -> list[tuple[str, str, JobFacts, bytes]]:
    out: list[tuple[str, str, JobFacts, bytes]] = []
    base = bench_classify.build_output(random.Random(20261121), bench_classify.TAIL + 4096)
    for split in SPLITS:
        cases = tomllib.loads((DATA / f"{split}.toml").read_text("utf-8"))["case"]
        for i, c in enumerate(cases, 1):
            ex = c["excerpt"].encode("utf-8")
            out.append((split, c["id"], score_classify.case_facts(i, c), ex))
            out.append((split + "+bare", c["id"], JobFacts(job_id=i, name="j"),
                        (base + ex)[-bench_classify.TAIL:]))
    for name in sorted(score_redteam.SETS):
        for i, (pid, _want, text, *rest) in enumerate(score_redteam.probes(name), 1):
            code = rest[0] if rest else None
            reason = rest[1] if len(rest) > 1 else "script_failure"
            facts = JobFacts(job_id=i, name=pid, failure_reason=reason, exit_code=code, status="failed",
                             variables={"KUBERNETES_MEMORY_LIMIT": "4Gi"})
            out.append((f"redteam-{name}", pid, facts, text.encode()))
    for module in (m for ms in score_redteam.SETS.values() for m in ms):
        mod = importlib.import_module(f"benchmarks.redteam.{module}")
        skip = score_redteam.arguable(mod)
        for pid, _want, text, *rest in mod.P:
            if pid in skip:
                out.append(("redteam-arguable", pid, JobFacts(job_id=1, name=pid, failure_reason="script_failure",
                                                              exit_code=rest[0] if rest else None), text.encode()))
    # trigger lines far back behind build output: the growing windows and the older region's pre-filter
    for k, line in enumerate(FAR_LINES):
        for back in (6, 20, 40, 63, 70):
            raw = line + b"\n" + base[-back * 1024:] + b"ERROR: Job failed: exit code 1\n"
            out.append(("far", f"{k}@{back}KiB", JobFacts(job_id=1, name="j"), raw))
            out.append(("far+code", f"{k}@{back}KiB", JobFacts(job_id=1, name="j", exit_code=137), raw))
    for wname, items in bench_workloads().items():
        for k, (facts, trace) in enumerate(items):
            out.append((f"bench-{wname}", f"{k}:{facts.name}", facts, trace))
    for wname, items in real_workloads().items():
        for k, (facts, trace) in enumerate(items):
            out.append((f"bench-{wname}", f"{k}:{facts.name}", facts, trace))
    return out


def real_workloads() -> dict[str, list[tuple[JobFacts, bytes]]]:
    """``bench_classify``'s ``real-no-match`` and ``real-realistic`` traces: the last 256 KiB of the real
    build output (``benchmarks/data/real-build-output.log``) with the runner's last line, and with each
    labelled excerpt of :data:`REAL_SPLITS` behind it (only those files are read)."""
    tail = bench_classify.TAIL
    real = (ROOT / "benchmarks" / "data" / "real-build-output.log").read_bytes()[-(tail + 4096):]
    realistic = []
    for split in REAL_SPLITS:
        for c in tomllib.loads((DATA / f"{split}.toml").read_text("utf-8"))["case"]:
            realistic.append((JobFacts(job_id=1, name=c["id"], failure_reason=c.get("failure_reason"),
                                       exit_code=c.get("exit_code"), status=c.get("status", "failed")),
                              (real + c["excerpt"].encode())[-tail:]))
    return {
        "real-no-match": [(JobFacts(job_id=1, name="r", failure_reason="script_failure", exit_code=1),
                           (real + b"\nERROR: Job failed: exit code 1\n")[-tail:])],
        "real-realistic": realistic,
    }


def bench_workloads() -> dict[str, list[tuple[JobFacts, bytes]]]:
    """``bench_classify.workloads(random.Random(20261121))`` as at b8b150b, built here from
    :data:`BENCH_SPLITS` only (``bench_classify`` may read splits added since, never opened here)."""
    rng = random.Random(20261121)
    tail = bench_classify.TAIL
    base = bench_classify.build_output(rng, tail + 4096)
    realistic = []
    for split in BENCH_SPLITS:
        for c in tomllib.loads((DATA / f"{split}.toml").read_text("utf-8"))["case"]:
            realistic.append((JobFacts(job_id=1, name=c["id"], failure_reason=c.get("failure_reason"),
                                       exit_code=c.get("exit_code"), status=c.get("status", "failed")),
                              (base + c["excerpt"].encode())[-tail:]))
    no_match = (base + b"\nERROR: Job failed: exit code 1\n")[-tail:]
    words = [b"error", b"Killed", b"failed", b"timeout", b"FAIL", b"memory", b"denied", b"refused", b"x509"]
    storm = b" ".join(rng.choice(words) + b"-" + str(i).encode() for i in range(60000))
    return {
        "realistic": realistic,
        "no-match": [(JobFacts(job_id=1, name="n", failure_reason="script_failure", exit_code=1), no_match)],
        "binary": [(JobFacts(job_id=1, name="b"), rng.randbytes(tail))],
        "needle-storm": [(JobFacts(job_id=1, name="s"), (storm + b"\n")[-tail:])],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.parse_args(argv)
    taxonomy = load_taxonomy()
    learned.LearnedModel.predict = _recording_predict
    try:
        for kind, ident, facts, trace in inputs(taxonomy):
            print(f"{kind}\t{ident}\t{verdict_line(facts, trace, taxonomy)}")
    finally:
        learned.LearnedModel.predict = _predict
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
