"""Issue 11: GitHub Actions' own job-log messages (docs/taxonomy.md, "GitHub Actions' job-log catalogue").

The probes (benchmarks/redteam/actions.py) were written from actions/runner's, actions/toolkit's and the
common actions' source before scoring; the mechanisms fixed after scoring are tested here in other contexts
than the probes' (other actions, tools, hosts, statuses, numbers), each with a near miss that must not take
the fix.
"""

from __future__ import annotations

import pytest

from retry_bot.classify.structure import drop_superseded_attempts
from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule

#: GitHub has no GitLab failure reason or job exit code: the log's own lines are all there is
GH = {"exit_code": None}
#: the 'Set up job' step's first line (actions/runner JobExtension): a whole GitHub Actions log
SETUP = (b"2025-03-02T08:14:05.1180000Z Current runner version: '2.322.0'\n"
         b"2025-03-02T08:14:05.1200000Z Runner name: 'gpu-ci-2'\n2025-03-02T08:14:05.1210000Z Machine name: 'gpu-ci-2'\n")

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. the runner's OS shutdown (JobRunner.cs:135) on a Windows self-hosted machine; the steps' cancel follows
    (b"Run msbuild Acme.sln /p:Configuration=Release /m\n  Acme.Core -> C:\\a\\acme\\bin\\Release\\Acme.Core.dll\n"
     b"##[error]Operating system is shutting down for computer 'WIN-BUILD07'\n##[error]The operation was canceled.\n",
     "infrastructure", "actions-runner-os-shutdown", Action.RETRY, GH),
    (b"Error: Operating system is shutting down for computer 'mac-mini-ci-03'\nError: The operation was canceled.\n",
     "infrastructure", "actions-runner-os-shutdown", Action.RETRY, GH),
    # --- B. an action's archive that did not download in time (ActionManager.cs:1714), a Docker action's this time
    (b"Getting action download info\n##[warning]Action 'https://api.github.com/repos/aquasecurity/trivy-action/tarball/6e7b7d1f' "
     b"didn't finish download within 100 seconds. (0A1B:2C3D:4E5F)\n##[warning]Back off 19.4 seconds before retry.\n"
     b"##[error]Action 'https://api.github.com/repos/aquasecurity/trivy-action/tarball/6e7b7d1f' download has timed out. "
     b"Error: The operation was canceled. (0A1B:2C3D:4E60)\n",
     "infrastructure", "actions-action-download-timeout", Action.RETRY, GH),
    # --- C. the toolkit's retries ran out on a service fault: tool-cache through setup-go and setup-dotnet, the
    # artifact service's Twirp methods for a download, the blob upload's stall timer, blob storage's 500
    (b"Setup go version spec 1.22.5\nAttempting to download 1.22.5...\nAcquiring 1.22.5 from "
     b"https://github.com/actions/go-versions/releases/download/1.22.5-9879150512/go-1.22.5-linux-arm64.tar.gz\n"
     b"Unexpected HTTP response: 502\nWaiting 16 seconds before trying again\n"
     b"##[error]Failed to download version 1.22.5: Error: Unexpected HTTP response: 502\n",
     "infrastructure", "actions-toolkit-retries-exhausted", Action.RETRY, GH),
    (b"Run actions/setup-dotnet@v4\nDownloading https://builds.dotnet.microsoft.com/dotnet/Sdk/8.0.404/dotnet-sdk-8.0.404-osx-arm64.tar.gz\n"
     b"Error: Unexpected HTTP response: 429\n",
     "infrastructure", "actions-toolkit-retries-exhausted", Action.RETRY, GH),
    (b"Run actions/download-artifact@v4\nDownloading multiple artifacts\n"
     b"Attempt 1 of 5 failed with error: Failed request: (502) Bad Gateway. Retrying request in 3000 ms...\n"
     b"Attempt 4 of 5 failed with error: Failed request: (502) Bad Gateway. Retrying request in 9120 ms...\n"
     b"Error: Failed to ListArtifacts: Failed to make request after 5 attempts: Failed request: (502) Bad Gateway\n",
     "infrastructure", "actions-toolkit-retries-exhausted", Action.RETRY, GH),
    (b"With the provided path, there will be 1 file uploaded\nBeginning upload of artifact content to blob storage\n"
     b"Uploaded bytes 4194304\n##[error]Upload progress stalled.\n",
     "infrastructure", "actions-toolkit-retries-exhausted", Action.RETRY, GH),
    (b"Preparing to download the following artifacts:\n- coverage-linux (ID: 88123, Size: 5512)\n"
     b"##[error]Unable to download artifact(s): Unexpected HTTP response from blob storage: 500 Server Error\n",
     "infrastructure", "actions-toolkit-retries-exhausted", Action.RETRY, GH),
    # --- D. a step's timeout-minutes (StepsRunner.cs:328), a matrix job's step
    (b"Run cargo test --all-features\n     Running tests/e2e.rs (target/debug/deps/e2e-5a1b)\n"
     b"##[error]The action 'Run cargo test --all-features' has timed out after 45 minutes.\n",
     "timeout", "actions-step-timeout-minutes", Action.NONE, GH),
    # --- E. the runner's superseded pull attempts (ContainerOperationProvider.cs:214) in a job that then failed its tests
    (SETUP + b"##[group]Initialize containers\n##[group]Pulling container image\n"
     b"2025-03-02T08:14:09.0010000Z /usr/bin/docker pull mcr.microsoft.com/mssql/server:2022-latest\n"
     b"2025-03-02T08:14:10.0010000Z Error response from daemon: Get \"https://mcr.microsoft.com/v2/\": net/http: TLS handshake timeout\n"
     b"2025-03-02T08:14:10.0020000Z ##[warning]Docker pull failed with exit code 1, back off 3.3 seconds before retry.\n"
     b"2025-03-02T08:14:13.0010000Z /usr/bin/docker pull mcr.microsoft.com/mssql/server:2022-latest\n"
     b"2025-03-02T08:14:40.0010000Z Status: Downloaded newer image for mcr.microsoft.com/mssql/server:2022-latest\n"
     b"##[endgroup]\n##[group]Run dotnet test\ndotnet test\n##[endgroup]\n"
     b"  Failed Billing.Tests.RoundingTests.HalfEven [12 ms]\n"
     b"Failed!  - Failed:     1, Passed:   311, Skipped:     0, Total:   312, Duration: 4 s\n"
     b"##[error]Process completed with exit code 1.\n",
     "build_error", None, Action.NONE, GH),
    # ... while pulls that failed for good are still read (a registry fault: retry; a missing tag: left alone)
    (SETUP + b"##[group]Initialize containers\n/usr/bin/docker pull bitnami/kafka:3.7\n"
     b"Error response from daemon: toomanyrequests: You have reached your pull rate limit.\n"
     b"##[warning]Docker pull failed with exit code 1, back off 2.1 seconds before retry.\n/usr/bin/docker pull bitnami/kafka:3.7\n"
     b"Error response from daemon: toomanyrequests: You have reached your pull rate limit.\n"
     b"##[error]Docker pull failed with exit code 1\n",
     "infrastructure", None, Action.RETRY, GH),
    (SETUP + b"##[group]Initialize containers\n/usr/bin/docker pull bitnami/kafka:3.77\n"
     b"Error response from daemon: manifest for bitnami/kafka:3.77 not found: manifest unknown: manifest unknown\n"
     b"##[warning]Docker pull failed with exit code 1, back off 2.1 seconds before retry.\n/usr/bin/docker pull bitnami/kafka:3.77\n"
     b"Error response from daemon: manifest for bitnami/kafka:3.77 not found: manifest unknown: manifest unknown\n"
     b"##[error]Docker pull failed with exit code 1\n",
     "config_error", None, Action.NONE, GH),
    # --- F. a self-hosted runner lost while automake's quiet rules compiled (runner-lost-under-memory-load)
    (b"Run make -j32\n  CC       lib/libz_la-inflate.lo\n  CC       lib/libz_la-deflate.lo\n  CXX      src/server/handler.o\n"
     b"##[error]The self-hosted runner: arm-builder-2 lost communication with the server. Verify the machine is running and "
     b"has a healthy network connection.\n",
     "oom", "runner-lost-under-memory-load", Action.RESIZE, GH),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{i}-{p[2]}" for i, p in enumerate(POSITIVE)])
def test_actions_catalogue_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must NOT decide, family unless None, extra facts)
NEAR_MISSES = [
    # A: a program's own words about shutting down (no runner annotation, no computer name) in a failed test run
    (b"Run pytest\nINFO agent: operating system is shutting down, flushing spool\n"
     b"FAILED tests/test_spool.py::test_flush - assert 3 == 4\n1 failed, 80 passed in 2.10s\n"
     b"##[error]Process completed with exit code 1.\n",
     "actions-runner-os-shutdown", "build_error", GH),
    # B: a slow action download that a retry got, then the build fails
    (b"##[warning]Action 'https://api.github.com/repos/actions/cache/tarball/1bd1e32a' didn't finish download within 100 seconds.\n"
     b"##[warning]Back off 11.2 seconds before retry.\nDownload action repository 'actions/cache@v4' (SHA:1bd1e32a)\n"
     b"Run npx tsc --noEmit\nsrc/x.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.\n"
     b"##[error]Process completed with exit code 2.\n",
     "actions-action-download-timeout", "build_error", GH),
    # C: a 404 is a version that does not exist (tool-cache does not retry it); a 409 is non-retryable; an info line
    # between attempts, or a cache's error annotation, does not end the job
    (b"Acquiring 1.99.0 from https://go.dev/dl/go1.99.0.linux-amd64.tar.gz\n"
     b"##[error]Failed to download version 1.99.0: Error: Unexpected HTTP response: 404\n",
     "actions-toolkit-retries-exhausted", None, GH),
    (b"Error: Failed to CreateArtifact: Received non-retryable error: Failed request: (409) Conflict: an artifact with this "
     b"name already exists on the workflow run\n",
     "actions-toolkit-retries-exhausted", None, GH),
    (b"Acquiring 3.3.6 from https://github.com/ruby/ruby-builder/releases/download/toolcache/ruby-3.3.6-ubuntu-24.04.tar.gz\n"
     b"Unexpected HTTP response: 503\nWaiting 14 seconds before trying again\nExtracting ...\n"
     b"Run bundle exec rspec\nFailures:\n\n  1) Order#total applies the discount\n     Failure/Error: expect(order.total).to eq(90)\n\n"
     b"       expected: 90\n            got: 81\n\n12 examples, 1 failure\n##[error]Process completed with exit code 1.\n",
     "actions-toolkit-retries-exhausted", "build_error", GH),
    (b"##[error]Failed to save: Failed to CreateCacheEntry: Failed to make request after 5 attempts: Failed request: (503) "
     b"Service Unavailable\nRun go vet ./...\n# acme/svc\n./main.go:14:2: fmt.Printf format %d has arg s of wrong type string\n"
     b"##[error]Process completed with exit code 1.\n",
     "actions-toolkit-retries-exhausted", None, GH),
    # D: a program's own message naming an action and a timeout (no annotation) before a test failure
    (b"Run npm test\n[sync] The action 'refresh-index' has timed out after 2 minutes, giving up\n"
     b" FAIL  src/sync.test.ts\n  * sync > refreshes the index\nTests:       1 failed, 40 passed, 41 total\n"
     b"##[error]Process completed with exit code 1.\n",
     "actions-step-timeout-minutes", "build_error", GH),
    # F: a self-hosted runner lost during a test run (no compiler in the window) stays the runner's loss
    (b"Run npm run e2e\n  PASS  e2e/login.spec.ts\n  RUNS  e2e/checkout.spec.ts\n"
     b"##[error]The self-hosted runner: arm-builder-2 lost communication with the server.\n",
     "runner-lost-under-memory-load", "infrastructure", GH),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES, ids=[f"{i}-{p[1]}" for i, p in enumerate(NEAR_MISSES)])
def test_actions_catalogue_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)


def test_superseded_actions_pulls_are_dropped_and_nothing_else():
    attempt = (b"/usr/bin/docker pull redis:7\nError response from daemon: received unexpected HTTP status: 503\n"
               b"##[warning]Docker pull failed with exit code 1, back off 2.6 seconds before retry.\n")
    ok = b"/usr/bin/docker pull redis:7\nStatus: Downloaded newer image for redis:7\n##[endgroup]\n"
    raw = SETUP + b"##[group]Initialize containers\n" + attempt + ok + b"##[group]Run make test\n"
    assert drop_superseded_attempts(raw) == SETUP + b"##[group]Initialize containers\n" + ok + b"##[group]Run make test\n"
    # a tail without the runner's first line, a pull that failed for good, or a log that stops at the attempts: kept
    assert drop_superseded_attempts(raw[len(SETUP):]) == raw[len(SETUP):]
    failed = SETUP + attempt + attempt + b"##[error]Docker pull failed with exit code 1\n##[group]Run echo never\n"
    assert drop_superseded_attempts(failed) is failed
    stops = SETUP + attempt
    assert drop_superseded_attempts(stops) is stops
