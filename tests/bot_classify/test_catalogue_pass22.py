"""Issue 11, twenty-second pass: held-out V's misses (scored blind once after the twenty-first pass, then read),
generalised by mechanism (precision first) and per message source (each rule's description in
config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
repositories, paths and numbers than V's excerpts. Each mechanism has a positive, a near miss next to it that
must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Twenty-second pass", lists the mechanisms and the documented misses.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule, decided

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. GHC's HeapOverflow exception shown by a handler that catches everything
    (b"[212 of 240] Compiling Pandoc.Readers.Docx.Parse ( src/Text/Pandoc/Readers/Docx/Parse.hs, "
     b"dist/build/Pandoc/Readers/Docx/Parse.o )\n"
     b"ghc: panic! (the 'impossible' happened)\n"
     b"  (GHC version 9.2.8 for x86_64-unknown-linux):\n"
     b"\theap overflow\n"
     b"\n"
     b"Please report this as a GHC bug:  https://www.haskell.org/ghc/reportabug\n",
     "oom", "ghc-heap-overflow-exception", Action.RESIZE, {}),
    (b"$ cabal run bench-index -- --corpus data/wiki\n"
     b"bench-index: heap overflow\n",
     "oom", "ghc-heap-overflow-exception", Action.RESIZE, {}),
    # --- B. apt's 'Failed to fetch' with a transient reason from its methods' catalogue, whatever the URL's form
    (b"Err:7 http://deb.debian.org/debian bookworm/main amd64 libssl-dev amd64 3.0.11-1~deb12u2\n"
     b"  Connection failed [IP: 151.101.2.132 80]\n"
     b"E: Failed to fetch http://deb.debian.org/debian/pool/main/o/openssl/libssl-dev_3.0.11-1~deb12u2_amd64.deb  "
     b"Connection failed [IP: 151.101.2.132 80]\n"
     b"E: Unable to fetch some archives, maybe run apt-get update or try with --fix-missing?\n",
     "infrastructure", "apt-fetch-transient-reason", Action.RETRY, {"exit_code": 100}),
    (b"E: Failed to fetch mirror+file:/etc/apt/mirrors/debian.list/pool/main/c/cmake/cmake_3.25.1-1_arm64.deb  "
     b"Could not connect to debian.mirror.example.net:80 (203.0.113.9), connection timed out\n",
     "infrastructure", "apt-fetch-transient-reason", Action.RETRY, {"exit_code": 100}),
    (b"E: Failed to fetch .../pool/universe/g/gcc-13/gcc-13_13.2.0-4ubuntu3_amd64.deb  503  Service Unavailable "
     b"[IP: 91.189.91.82 80]\n",
     "infrastructure", "apt-fetch-transient-reason", Action.RETRY, {"exit_code": 100}),
    (b"E: Failed to fetch https://packages.example.org/dists/jammy/InRelease  Temporary failure resolving "
     b"'packages.example.org'\n",
     "infrastructure", "apt-fetch-transient-reason", Action.RETRY, {"exit_code": 100}),
    # --- C. rustc could not spawn the linker: the image lacks it
    (b"   Compiling serde_derive v1.0.193\n"
     b"error: linker `aarch64-linux-gnu-gcc` not found\n"
     b"  |\n"
     b"  = note: No such file or directory (os error 2)\n"
     b"\n"
     b"error: could not compile `serde_derive` (lib) due to 1 previous error\n",
     "config_error", "rustc-linker-not-found", Action.NONE, {"exit_code": 101}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{i}-{p[2]}" for i, p in enumerate(POSITIVE)])
def test_twenty_second_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must not decide, family or None, extra facts)
NEAR_MISSES = [
    # A: a sanitizer's heap-buffer-overflow and a sentence mentioning a heap overflow are not GHC's exception
    (b"==4242==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x602000000018 at pc 0x55d4\n",
     "ghc-heap-overflow-exception", None, {}),
    (b"test_parser.c:91: detected a heap overflow in the fuzz corpus entry 17\n",
     "ghc-heap-overflow-exception", None, {}),
    # A: a spec runner's tree naming a test 'heap overflow' (indented with spaces) is not GHC's panic
    (b"Parser.Fuzz\n  bounds\n    heap overflow\n      rejects oversized frames FAILED [1]\n",
     "ghc-heap-overflow-exception", None, {}),
    # A: GHC's stack overflow is not a heap limit
    (b"spec-runner: stack overflow\n", "ghc-heap-overflow-exception", None, {}),
    # B: a 404 is a missing file (configuration), not the mirror's moment
    (b"E: Failed to fetch .../pool/main/n/nodejs/nodejs_12.22.12-1nodesource1_amd64.deb  404  Not Found "
     b"[IP: 198.51.100.20 443]\n",
     "apt-fetch-transient-reason", None, {"exit_code": 100}),
    # B: a refused connection to a local apt proxy the image configures is not read by this rule
    (b"E: Failed to fetch .../pool/main/c/curl/curl_7.88.1-10_amd64.deb  Could not connect to 127.0.0.1:3142 "
     b"(127.0.0.1). - connect (111: Connection refused)\n",
     "apt-fetch-transient-reason", None, {"exit_code": 100}),
    # B: a name that does not exist is not a temporary resolver failure
    (b"E: Failed to fetch .../dists/jammy/InRelease  Could not resolve 'pkgs.internal.example'\n",
     "apt-fetch-transient-reason", None, {"exit_code": 100}),
    # C: a linker that ran and failed is a build error, not a missing toolchain
    (b"error: linking with `cc` failed: exit status: 1\n"
     b"  = note: /usr/bin/ld: cannot find -lssl: No such file or directory\n",
     "rustc-linker-not-found", None, {"exit_code": 101}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{i}-{p[1]}" for i, p in enumerate(NEAR_MISSES)])
def test_twenty_second_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)


def test_twenty_second_pass_documented_misses_keep_their_decisions(taxonomy):
    """Identical evidence that carries opposite causes across splits stays as it was (docs/taxonomy.md,
    "Twenty-second pass"): Gradle's 'daemon has disappeared' is still resized (OOM in A and two V cases, a commit
    message's fault in one V case, a host's in one N case); GitLab Runner's artifact upload that ends in 500s and
    'FATAL: invalid argument' is still retried (transient in B, a server misconfiguration in V); a Java heap
    exhausted in a thread is still resized (OOM in Q and S, a leak in the tests in V)."""
    v, act = decided(b"The message received from the daemon indicates that the daemon has disappeared.\n"
                     b"Build request sent: Build{id=0d1e, currentDir=/builds/acme/app/android}\n", taxonomy)
    assert act == Action.RESIZE, (v.rule, v.evidence)
    v, act = decided(b"WARNING: Uploading artifacts as \"archive\" to coordinator... failed  id=77 "
                     b"responseStatus=500 Internal Server Error status=500 token=abcd1234\n"
                     b"WARNING: Retrying...                                context=artifacts-uploader error=invalid argument\n"
                     b"FATAL: invalid argument\n"
                     b"ERROR: Job failed: exit code 1\n", taxonomy)
    assert act == Action.RETRY, (v.rule, v.evidence)
    v, act = decided(b"Exception in thread \"consumer-7\"\n"
                     b"Exception: java.lang.OutOfMemoryError thrown from the UncaughtExceptionHandler in thread "
                     b"\"consumer-7\"\n", taxonomy)
    assert act == Action.RESIZE, (v.rule, v.evidence)
