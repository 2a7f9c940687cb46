"""Run a computation again in new interpreters, each with its own ``PYTHONHASHSEED``.

A result that depends on the iteration order of a ``set`` or of a ``dict`` filled from one (of
strings: their hashes change with the seed), on ``id()``, on the clock or on a random source differs
between processes, while two calls in one process usually agree.  So "deterministic" is checked by
comparing the in-process result with the same function run in fresh interpreters.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

ROOT = Path(__file__).resolve().parents[2]
#: Two seeds that order a set of short strings differently from each other (and, almost surely,
#: from the test process's own random seed).
SEEDS = ("0", "4242")
_RUN = ("import importlib, json, sys; m, f = sys.argv[1].split(':'); "
        "print(json.dumps(getattr(importlib.import_module(m), f)(), sort_keys=True))")


def as_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def in_fresh_interpreters(fn: Callable[[], Any], seeds: Sequence[str] = SEEDS) -> list[str]:
    """``fn()`` (a module-level function returning JSON data) as JSON text, from one new interpreter
    per seed, run at the same time."""
    target = f"{fn.__module__}:{fn.__name__}"
    # the caller's import path: the fresh interpreters import the very modules the caller tested
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([p for p in sys.path if p] + [str(ROOT)])}
    procs = [subprocess.Popen([sys.executable, "-c", _RUN, target], cwd=str(ROOT), env={**env, "PYTHONHASHSEED": s},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for s in seeds]
    out = []
    for seed, p in zip(seeds, procs):
        stdout, stderr = p.communicate(timeout=120)
        assert p.returncode == 0, f"{target} with PYTHONHASHSEED={seed} failed:\n{stderr[-3000:]}"
        out.append(stdout.strip())
    return out
