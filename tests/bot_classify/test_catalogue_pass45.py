"""Issue 11, forty-fifth pass: held-out ZZA's and ZZB's misses (scored blind once after the forty-fourth pass,
then read), generalised by mechanism (precision first) and per message source (each rule's description in
config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
repositories, paths and numbers than ZZA's and ZZB's excerpts. Each mechanism has a positive, a near miss
next to it that must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Forty-fifth pass", lists the mechanisms and the documented misses.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. GHC's RTS under a deliberately tiny -M cap: a memory-usage test failing, not the runner's memory
    (b"Running 1 test suites...\n"
     b"Test suite alloc-bounds: RUNNING...\n"
     b"alloc-bounds: Heap exhausted;\n"
     b"alloc-bounds: Current maximum heap size is 16777216 bytes (16 MB).\n"
     b"alloc-bounds: Use `+RTS -M<size>' to increase it.\n"
     b"Test suite alloc-bounds: FAIL\n",
     "build_error", "ghc-rts-tiny-heap-cap-exhausted", Action.NONE, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{p[2]}-{i}" for i, p in enumerate(POSITIVE)])
def test_forty_fifth_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must not decide, family or None, extra facts)
NEAR_MISSES = [
    # A: a real working cap (a compiler under -M3G) exhausted is the job's memory: runtime-heap-exhausted, oom
    (b"[212 of 640] Compiling Data.Ledger.Schema ( src/Data/Ledger/Schema.hs, dist/build/Data/Ledger/Schema.o )\n"
     b"ghc: Heap exhausted;\n"
     b"ghc: Current maximum heap size is 3221225472 bytes (3072 MB).\n"
     b"ghc: Use `+RTS -M<size>' to increase it.\n",
     "ghc-rts-tiny-heap-cap-exhausted", "oom", {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{n[1]}-{i}" for i, n in enumerate(NEAR_MISSES)])
def test_forty_fifth_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)
