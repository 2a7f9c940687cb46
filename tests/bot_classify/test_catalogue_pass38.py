"""Issue 11, thirty-eighth pass: held-out ZN's and ZO's misses (scored blind once after the thirty-seventh pass,
then read), generalised by mechanism (precision first) and per message source (each rule's description in
config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
repositories, paths and numbers than ZN's and ZO's excerpts. Each mechanism has a positive, a near miss next to
it that must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Thirty-eighth pass", lists the mechanisms and the documented misses.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. a name lookup inside an OBS build (no network by design): the same on every run
    (b"[  112s] + cd /home/abuild/rpmbuild/BUILD/libfoo-2.4.1\n"
     b"[  113s] + wget -q https://downloads.example.net/libfoo/testdata-2.4.1.tar.xz\n"
     b"[  113s] wget: unable to resolve host address: Temporary failure in name resolution\n"
     b"[  113s] error: Bad exit status from /var/tmp/rpm-tmp.Xc81Qa (%build)\n",
     "config_error", "obs-build-name-resolution-without-network", Action.NONE, {}),
    (b"[ 1045s] ==> Retrieving sources...\n"
     b"[ 1045s]   -> Downloading zstd-1.5.6.tar.gz...\n"
     b"[ 1046s] curl: (6) Could not resolve host: codeload.example.org\n",
     "config_error", "obs-build-name-resolution-without-network", Action.NONE, {}),
    # --- B. an HTTP/2 server refused the stream before processing it (hyperium/h2): safe to retry
    (b"$ cargo fetch --locked\n"
     b"error: failed to download from `https://static.crates.example/crates/serde/serde-1.0.203.crate`\n"
     b"Caused by:\n"
     b"  [92] Stream error in the HTTP/2 framing layer\n"
     b"  error sending request for url: http2 error: stream error received: "
     b"refused stream before processing any application logic\n",
     "infrastructure", "h2-stream-refused-by-peer", Action.RETRY, {}),
    # --- C. the Actions results service not reached by the artifact client: a network fault
    (b"Artifact name is valid!\n"
     b"Error: Failed to FinalizeArtifact: Unable to make request: ECONNRESET\n"
     b"If you are using self-hosted runners, please make sure your runner has access to all GitHub endpoints\n",
     "infrastructure", "actions-results-service-network-error", Action.RETRY, {}),
    # --- D. HotSpot refused -Xms above -Xmx: the JVM never started
    (b"$ ./mvnw -B verify\n"
     b"Picked up JAVA_TOOL_OPTIONS: -Xms6g -Xmx2g\n"
     b"Error occurred during initialization of VM\n"
     b"Initial heap size set to a larger value than the maximum heap size\n",
     "config_error", "jvm-initial-heap-larger-than-maximum", Action.NONE, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{p[2]}-{i}" for i, p in enumerate(POSITIVE)])
def test_thirty_eighth_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must not decide, family or None, extra facts)
NEAR_MISSES = [
    # A: the same lookup failure without OBS's '[%5ds] ' prefix (a runner's own network) is not this rule
    (b"+ wget -q https://downloads.example.net/libfoo/testdata-2.4.1.tar.xz\n"
     b"curl: (6) Could not resolve host: codeload.example.org\n",
     "obs-build-name-resolution-without-network", None, {}),
    # B: a reset the client itself sent, or the server's CANCEL, is not a refused stream
    (b"error: http2 error: stream error sent by user: refused stream before processing any application logic\n",
     "h2-stream-refused-by-peer", None, {}),
    # C: the service answered (an HTTP status): not a network error
    (b"Error: Failed to CreateArtifact: Received non-retryable error: Failed request: (409) Conflict: "
     b"an artifact with this name already exists on the workflow run\n",
     "actions-results-service-network-error", None, {}),
    # D: the heap could not be reserved at all (another start-up refusal)
    (b"Error occurred during initialization of VM\n"
     b"Could not reserve enough space for 8388608KB object heap\n",
     "jvm-initial-heap-larger-than-maximum", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{n[1]}-{i}" for i, n in enumerate(NEAR_MISSES)])
def test_thirty_eighth_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)
