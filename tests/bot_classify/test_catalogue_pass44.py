"""Issue 11, forty-fourth pass: held-out ZY's and ZZ's misses (scored blind once after the forty-third pass,
then read), generalised by mechanism (precision first) and per message source (each rule's description in
config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
repositories, paths and numbers than ZY's and ZZ's excerpts. Each mechanism has a positive, a near miss
next to it that must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Forty-fourth pass", lists the mechanisms and the documented misses.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. the Docker daemon: a local image the script names was never built or tagged
    (b"Successfully built 3f9a07c2d1e4\n"
     b"Successfully tagged ledger-api:build-2291\n"
     b"$ docker tag ledger-api:2.14.0 harbor.example.net/fin/ledger-api:2.14.0\n"
     b"Error response from daemon: No such image: ledger-api:2.14.0\n"
     b"Cleaning up project directory and file based variables\n",
     "build_error", "docker-daemon-no-such-image", Action.NONE, {}),
    # --- B. a HardhatError whose cause is Node's ERR_INVALID_ARG_TYPE: the tool against the runtime
    (b"Compiling 14 files with 0.8.24\n"
     b"An unexpected error occurred:\n"
     b"\n"
     b"HardhatError: HH502: Couldn't download compiler version list. Please check your internet connection "
     b"and try again.\n"
     b"    at CompilerDownloader._downloadCompilerList (/work/contracts/node_modules/hardhat/internal/solidity/"
     b"compiler/downloader.js:201:19)\n"
     b"\n"
     b"    Caused by: TypeError [ERR_INVALID_ARG_TYPE]: The \"data\" argument must be of type string or an "
     b"instance of Buffer, TypedArray, or DataView. Received an instance of ArrayBuffer\n"
     b"        at Object.writeFileSync (node:fs:2389:5)\n",
     "build_error", "hardhat-error-caused-by-node-invalid-arg", Action.NONE, {}),
    # --- C. Docker's v1 registry client: the index answered 502/503/504 on a pull
    (b"+ docker pull buildpack-deps:wheezy\n"
     b"Pulling repository buildpack-deps\n"
     b"time=\"2014-11-07T09:12:41Z\" level=\"fatal\" msg=\"HTTP code: 503\"\n"
     b"Build step 'Execute shell' marked build as failure\n",
     "infrastructure", "docker-v1-registry-http-5xx", Action.RETRY, {}),
    # --- D. Python's urllib: a download that stalled past its timeout
    (b"reading in sources list data from /etc/ros/rosdep/sources.list.d\n"
     b"ERROR: unable to process source [https://mirror.example.org/rosdistro/rosdep/python.yaml]:\n"
     b"    <urlopen error [Errno 110] Connection timed out>\n"
     b"ERROR: error loading sources list:\n"
     b"    <urlopen error timed out>\n",
     "infrastructure", "python-urlopen-error-timed-out", Action.RETRY, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{p[2]}-{i}" for i, p in enumerate(POSITIVE)])
def test_forty_fourth_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must not decide, family or None, extra facts)
NEAR_MISSES = [
    # A: a pull that failed on the network first: its tag's missing image only repeats it (network rule, retry)
    (b"$ docker pull quay.example.com/ops/runner-base:7\n"
     b"Error response from daemon: Get \"https://quay.example.com/v2/\": net/http: request canceled while "
     b"waiting for connection (Client.Timeout exceeded while awaiting headers)\n"
     b"$ docker tag quay.example.com/ops/runner-base:7 runner-base:ci\n"
     b"Error response from daemon: No such image: quay.example.com/ops/runner-base:7\n",
     "docker-daemon-no-such-image", "infrastructure", {}),
    # B: a HardhatError caused by undici's network failure is not this rule's
    (b"HardhatError: HH502: Couldn't download compiler version list. Please check your internet connection "
     b"and try again.\n"
     b"\n"
     b"    Caused by: TypeError: fetch failed\n"
     b"        at Object.fetch (node:internal/deps/undici/undici:11372:11)\n",
     "hardhat-error-caused-by-node-invalid-arg", None, {}),
    # C: 'Please login first (HTTP code 401)' is the credentials, and a 404 is not a gateway's moment
    (b"Pulling repository internal/toolbox\n"
     b"time=\"2015-02-11T14:03:09Z\" level=\"fatal\" msg=\"HTTP code: 404\"\n",
     "docker-v1-registry-http-5xx", None, {}),
    # D: a host that does not resolve is the configuration, not a timeout
    (b"ERROR: unable to process source [https://rosdistro.invalid.example/index.yaml]:\n"
     b"    <urlopen error [Errno -2] Name or service not known>\n",
     "python-urlopen-error-timed-out", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{n[1]}-{i}" for i, n in enumerate(NEAR_MISSES)])
def test_forty_fourth_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)
