"""Issue 11, thirty-second pass: held-out ZF's misses (scored blind once after the thirty-first pass, then read),
generalised by mechanism (precision first) and per message source (each rule's description in
config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
repositories, paths and numbers than ZF's excerpts. Each mechanism has a positive, a near miss next to it that
must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Thirty-second pass", lists the mechanisms and the documented misses.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. the runner's pre-2.283 retry line carrying the service's 422 (a reference that does not resolve)
    (b"Getting action download info\n"
     b"Failed to resolve action download info. Error: Unable to resolve action `octo-org/setup-toolchain@v4.2`, "
     b"unable to find version `v4.2`\n",
     "config_error", "gha-action-unresolvable-retry-line", Action.NONE, {}),
    (b"Failed to resolve action download info. Error: Unable to resolve action 'acme-labs/publish-docs@main', "
     b"repository not found\n"
     b"Retrying in 12.5 seconds\n",
     "config_error", "gha-action-unresolvable-retry-line", Action.NONE, {}),
    # --- B. the Erlang runtime's allocator refused memory (a plausible size)
    (b"==> Compiling 212 files (.ex)\n"
     b"binary_alloc: Cannot allocate 2147483712 bytes of memory (of type \"binary\").\n\n"
     b"Crash dump is being written to: erl_crash.dump...done\n",
     "oom", "erlang-erts-alloc-enomem", Action.RESIZE, {}),
    (b"===> Running eunit tests...\n"
     b"eheap_alloc: Cannot reallocate 805306368 bytes of memory (of type \"old_heap\").\n",
     "oom", "erlang-erts-alloc-enomem", Action.RESIZE, {}),
    # --- C. GitLab CI's refusal of a top level that is not a mapping
    (b"Found errors in your .gitlab-ci.yml:\n  YAML should be a hash\n",
     "config_error", "gitlab-ci-yaml-not-a-hash", Action.NONE, {}),
    (b"YAML should be a hash\n",
     "config_error", "gitlab-ci-yaml-not-a-hash", Action.NONE, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{p[2]}-{i}" for i, p in enumerate(POSITIVE)])
def test_thirty_second_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must not decide, family or None, extra facts)
NEAR_MISSES = [
    # A: the runner's retry line with a server error is a retried infrastructure fault, not the 422
    (b"Failed to resolve action download info. Error: Response status code does not indicate success: "
     b"503 (Service Unavailable).\n"
     b"Retrying in 21.3 seconds\n",
     "gha-action-unresolvable-retry-line", None, {}),
    # B: an absurd size (a corrupt term or a runtime bug, the same on every run) is not the job's memory
    (b"sys_alloc: Cannot allocate 18446744073709551600 bytes of memory (of type \"heap\").\n",
     "erlang-erts-alloc-enomem", None, {}),
    # C: another tool's lower-case message about its own YAML is not GitLab's refusal
    (b"panic: the plugin manifest yaml should be a hash of at least one key: 'plugins'\n",
     "gitlab-ci-yaml-not-a-hash", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{n[1]}-{i}" for i, n in enumerate(NEAR_MISSES)])
def test_thirty_second_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)
