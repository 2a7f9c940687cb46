"""Issue 11, thirty-third pass: held-out ZG's misses (scored blind once after the thirty-second pass, then read),
generalised by mechanism (precision first) and per message source (each rule's description in
config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
repositories, paths and numbers than ZG's excerpts. Each mechanism has a positive, a near miss next to it that
must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Thirty-third pass", lists the mechanisms and the documented misses.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. GHC's runtime linker could not map a few pages in the low address window (not the job's memory)
    (b"[12 of 40] Compiling Data.Codec.Th ( src/Data/Codec/Th.hs, dist/build/Data/Codec/Th.o )\n"
     b"ghc: mmap 4096 bytes at (nil): Cannot allocate memory\n"
     b"ghc: Try specifying an address with +RTS -xm<addr> -RTS\n",
     "build_error", "ghc-rts-linker-low-memory-mmap-failed", Action.NONE, {}),
    (b"ghc-iserv: mmap 0x20000 bytes at 0x40000000: Cannot allocate memory\n"
     b"ghc-iserv: mmapForLinker: failed to mmap() memory between 0x40000000 and 0xc0000000; asked for 131072 "
     b"bytes at 0x40000000. Try specifying an address with +RTS -xm<addr> -RTS\n"
     b"ghc-iserv: internal error: m32_allocator_init: Failed to map\n"
     b"    (GHC version 8.10.7 for x86_64_unknown_linux)\n"
     b"    Please report this as a GHC bug:  https://www.haskell.org/ghc/reportabug\n",
     "build_error", "ghc-rts-linker-low-memory-mmap-failed", Action.NONE, {}),
    # --- B. Apache HttpClient's connect time-out in a resolver's cause chain
    (b"> Could not resolve com.example.widgets:widget-core:3.4.1.\n"
     b"   > Could not get resource 'https://maven.example.org/releases/com/example/widgets/widget-core/3.4.1/"
     b"widget-core-3.4.1.pom'.\n"
     b"      > Could not GET 'https://maven.example.org/releases/com/example/widgets/widget-core/3.4.1/"
     b"widget-core-3.4.1.pom'.\n"
     b"         > Connect to maven.example.org:443 [maven.example.org/203.0.113.41, maven.example.org/"
     b"203.0.113.42] failed: Connect timed out\n",
     "infrastructure", "java-httpclient-connect-timed-out", Action.RETRY, {}),
    (b"[ERROR] Failed to execute goal on project billing-api: Could not transfer artifact from/to central: "
     b"Connect to plugins.example.net:8443 timed out\n",
     "infrastructure", "java-httpclient-connect-timed-out", Action.RETRY, {}),
    # --- C. buildah's search-registry list where one registry failed a blob with a 5xx
    (b"Error: error creating build container: The following failures happened while trying to pull image "
     b"specified by \"busybox:1.31\" based on search registries in /etc/containers/registries.conf:\n"
     b"* \"quay.io/busybox:1.31\": Error initializing source docker://quay.io/busybox:1.31: Error reading "
     b"manifest 1.31 in quay.io/busybox: unauthorized: access to the requested resource is not authorized\n"
     b"* \"docker.io/library/busybox:1.31\": Error reading blob sha256:0f5b1c2d3e4a: Invalid status code "
     b"returned when fetching blob 502 (Bad Gateway)\n"
     b"* \"registry.centos.org/busybox:1.31\": Error initializing source docker://registry.centos.org/busybox:1.31: "
     b"Error reading manifest 1.31 in registry.centos.org/busybox: manifest unknown: manifest unknown\n",
     "infrastructure", "buildah-search-registries-blob-5xx", Action.RETRY, {}),
    (b"Copying blob sha256:7a3e91c4d2b0\n"
     b"Error: Error reading blob sha256:7a3e91c4d2b0: Invalid status code returned when fetching blob 500 "
     b"(Internal Server Error)\n",
     "infrastructure", "buildah-search-registries-blob-5xx", Action.RETRY, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{p[2]}-{i}" for i, p in enumerate(POSITIVE)])
def test_thirty_third_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must not decide, family or None, extra facts)
NEAR_MISSES = [
    # A: GHC's own heap exhaustion is the job's memory: it stays oom (runtime-heap-exhausted)
    (b"[7 of 19] Compiling Parser.Grammar ( src/Parser/Grammar.hs, dist/build/Parser/Grammar.o )\n"
     b"ghc: out of memory (requested 2097152 bytes)\n",
     "ghc-rts-linker-low-memory-mmap-failed", "oom", {}),
    # B: a refused connection (the job's own service not listening yet) is not the connect time-out
    (b"org.apache.http.conn.HttpHostConnectException: Connect to localhost:9200 [localhost/127.0.0.1] failed: "
     b"Connection refused\n",
     "java-httpclient-connect-timed-out", None, {}),
    # C: every candidate registry says the image is not there, and no blob failed: still a missing image
    (b"Error: error creating build container: The following failures happened while trying to pull image "
     b"specified by \"myorg/toolbox:9.9\" based on search registries in /etc/containers/registries.conf:\n"
     b"* \"registry.fedoraproject.org/myorg/toolbox:9.9\": Error initializing source docker://registry."
     b"fedoraproject.org/myorg/toolbox:9.9: Error reading manifest 9.9 in registry.fedoraproject.org/myorg/toolbox: "
     b"manifest unknown: manifest unknown\n"
     b"* \"docker.io/myorg/toolbox:9.9\": Error initializing source docker://myorg/toolbox:9.9: Error reading "
     b"manifest 9.9 in docker.io/myorg/toolbox: manifest unknown: manifest unknown\n",
     "buildah-search-registries-blob-5xx", "config_error", {}),
    # C: a blob refused with a 4xx is not the registry's server error
    (b"Error: Error reading blob sha256:9c1d44e0a7f2: Invalid status code returned when fetching blob 401 "
     b"(Unauthorized)\n",
     "buildah-search-registries-blob-5xx", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{n[1]}-{i}" for i, n in enumerate(NEAR_MISSES)])
def test_thirty_third_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)
