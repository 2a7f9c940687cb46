#!/usr/bin/env python3
"""Score the classifier and the shipped policy on the red-team probes (``benchmarks/redteam``).

Each probe is a job-log tail written from a tool's output format with the family its cause has.
As in ``score_classify.py`` the job failed with ``script_failure`` (or the probe's own failure
reason) and a 4Gi memory limit in force; the shipped default policy decides.  A probe is

* ``WASTE``: the bot would re-run (retry or resize) a failure that is neither OOM nor
  infrastructure;
* ``MISS``: it would leave an OOM kill or a transient infrastructure failure alone;
* ``OK`` otherwise (a wrong family with the right action counts as OK here: the action is what
  costs).

Usage::

    .venv/bin/python benchmarks/score_redteam.py [--set precision|recall|runner|actions] [--list]

Prints tried / wasted / missed per set (``--list``: every probe with its verdict and rule).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from retry_bot.classify import classify, load_taxonomy  # noqa: E402
from retry_bot.decide import Action, ClassUsage, decide  # noqa: E402
from retry_bot.model import JobFacts  # noqa: E402
from retry_bot.policy import default_policy  # noqa: E402

SETS = {"precision": [f"precision_{i}" for i in range(1, 9)], "recall": ["recall"], "runner": ["runner"],
        "actions": ["actions"]}
#: Probes the red team itself judged arguable and left out of its counts (kept for reading).
ARGUABLE = frozenset({"runner-shutdown-words-app-cmake"})
WANTED = {"oom": Action.RESIZE, "infrastructure": Action.RETRY}


@dataclass
class Tally:
    tried: int = 0
    wasted: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)


def arguable(mod) -> frozenset[str]:
    """The probes left out of the counts for a probe module: :data:`ARGUABLE` and the module's own
    ``ARGUABLE``, if it names any."""
    return ARGUABLE | getattr(mod, "ARGUABLE", frozenset())


def probes(name: str) -> list[tuple]:
    """The probes of set ``name`` (``SETS``), arguable ones left out."""
    out = []
    for module in SETS[name]:
        mod = importlib.import_module(f"benchmarks.redteam.{module}")
        skip = arguable(mod)
        out.extend(p for p in mod.P if p[0] not in skip)
    return out


def score(name: str, taxonomy=None, policy=None, listing: bool = False) -> Tally:
    taxonomy = taxonomy or load_taxonomy()
    policy = policy or default_policy()
    t = Tally()
    for i, (pid, want, text, *rest) in enumerate(probes(name), 1):
        code = rest[0] if rest else None
        reason = rest[1] if len(rest) > 1 else "script_failure"
        facts = JobFacts(job_id=i, name=pid, failure_reason=reason, exit_code=code, status="failed",
                         variables={"KUBERNETES_MEMORY_LIMIT": "4Gi"})
        v = classify(facts, text.encode(), taxonomy)
        got = decide(facts, v, [], policy, ClassUsage()).action
        wanted = WANTED.get(want, Action.NONE)
        t.tried += 1
        flag = "OK"
        if got != wanted:
            flag = "WASTE" if got != Action.NONE else "MISS"
            (t.wasted if flag == "WASTE" else t.missed).append(pid)
        if listing:
            print(f"{flag:5} {pid:36} want={want:14} got={v.family.value:14} {got.value:7} rule={v.rule}")
    return t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", action="append", choices=sorted(SETS), help="default: both")
    ap.add_argument("--list", action="store_true", help="every probe with its verdict")
    args = ap.parse_args(argv)
    tax, pol = load_taxonomy(), default_policy()
    for name in args.set or sorted(SETS):
        t = score(name, tax, pol, args.list)
        print(f"{name:10} tried {t.tried:4d}  wasted re-runs {len(t.wasted):3d}  missed {len(t.missed):3d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
