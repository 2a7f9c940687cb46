"""Issue 11, forty-second pass: held-out ZU's misses (scored blind once after the forty-first pass, then read),
generalised by mechanism (precision first) and per message source (each rule's description in
config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
repositories, paths and numbers than ZU's excerpts. Each mechanism has a positive, a near miss next
to it that must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Forty-second pass", lists the mechanisms and the documented misses.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. Maven Wagon: the repository refused the job's credentials (401/403): the same on every run
    (b"[INFO] Uploading to nexus-releases: https://nexus.example.net/repository/releases/org/acme/ledger-core/"
     b"3.2.1/ledger-core-3.2.1.pom\n"
     b"[ERROR] Failed to execute goal org.apache.maven.plugins:maven-deploy-plugin:3.1.1:deploy (default-deploy) "
     b"on project ledger-core: Failed to deploy artifacts: Could not transfer artifact "
     b"org.acme:ledger-core:pom:3.2.1 from/to nexus-releases (https://nexus.example.net/repository/releases/): "
     b"Transfer failed for https://nexus.example.net/repository/releases/org/acme/ledger-core/3.2.1/"
     b"ledger-core-3.2.1.pom 401 Unauthorized -> [Help 1]\n"
     b"[ERROR] Re-run Maven using the -X switch to enable full debug logging.\n",
     "config_error", "maven-wagon-transfer-credentials-rejected", Action.NONE, {}),
    (b"[ERROR] Failed to execute goal org.apache.maven.plugins:maven-deploy-plugin:2.8.2:deploy (default-deploy) "
     b"on project billing-api: Failed to deploy artifacts: Could not transfer artifact "
     b"com.contoso:billing-api:jar:1.14.0 from/to artifactory (https://artifacts.contoso.io/libs-release-local): "
     b"Transfer failed for https://artifacts.contoso.io/libs-release-local/com/contoso/billing-api/1.14.0/"
     b"billing-api-1.14.0.jar 403 Forbidden\n",
     "config_error", "maven-wagon-transfer-credentials-rejected", Action.NONE, {}),
    # --- B. NumPy: the array's byte size does not fit in npy_intp (a 32-bit address space or an absurd size)
    (b"tests/test_mosaic.py::test_stack_tiles FAILED\n"
     b"E   numpy.core._exceptions._ArrayMemoryError: Unable to allocate 2.31 GiB for an array with shape "
     b"(31744, 19520) and data type float32\n"
     b"E   ValueError: array is too big; `arr.size * arr.dtype.itemsize` is larger than the maximum possible "
     b"size.\n",
     "build_error", "numpy-array-size-unrepresentable", Action.NONE, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{p[2]}-{i}" for i, p in enumerate(POSITIVE)])
def test_forty_second_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must not decide, family or None, extra facts)
NEAR_MISSES = [
    # A: a 502 from the repository is the server's moment, not the credentials (network-error, retry)
    (b"[ERROR] Failed to execute goal org.apache.maven.plugins:maven-deploy-plugin:3.1.1:deploy (default-deploy) "
     b"on project ledger-core: Failed to deploy artifacts: Could not transfer artifact "
     b"org.acme:ledger-core:jar:3.2.1 from/to nexus-releases (https://nexus.example.net/repository/releases/): "
     b"Transfer failed for https://nexus.example.net/repository/releases/org/acme/ledger-core/3.2.1/"
     b"ledger-core-3.2.1.jar 502 Bad Gateway\n",
     "maven-wagon-transfer-credentials-rejected", "infrastructure", {}),
    # B: NumPy's allocation failure alone is a real memory limit in most jobs (runtime-heap-exhausted, resize)
    (b"E   numpy.core._exceptions._ArrayMemoryError: Unable to allocate 6.75 GiB for an array with shape "
     b"(905969664,) and data type float64\n",
     "numpy-array-size-unrepresentable", "oom", {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{n[1]}-{i}" for i, n in enumerate(NEAR_MISSES)])
def test_forty_second_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)
