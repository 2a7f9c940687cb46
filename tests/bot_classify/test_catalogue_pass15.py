"""Issue 11, fifteenth pass: blind set N's misses (N scored blind once after the fourteenth pass, then read),
generalised by mechanism (precision first) and per message source (each rule's description or the comment
beside each added pattern in config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
paths, sizes and numbers than N's excerpts. Each mechanism has a positive, a near miss next to it that
must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Fifteenth pass", lists the mechanisms.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule, check_trap, decided

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. the kubelet's memory-pressure eviction, its node sentence alone (an events table, a controller)
    (b"LAST SEEN   TYPE      REASON    OBJECT                         MESSAGE\n"
     b"2m          Warning   Evicted   pod/runner-x7k2p-project-12-concurrent-3   "
     b"The node was low on resource: memory.\n",
     "oom", "kubelet-evicted-over-request", Action.RESIZE, {}),
    (b"Pod [Failed][Evicted] The node was low on resource: memory. Threshold quantity: 750Mi, available: 612044Ki.\n",
     "oom", "kubelet-evicted-over-request", Action.RESIZE, {}),
    # --- B. Gradle's daemon health check on Metaspace (the non-heap branch of the same strategy)
    (b"> Task :feature:search:compileReleaseKotlin\n"
     b"The Daemon will expire after the build after running out of JVM Metaspace.\n"
     b"The project memory settings are likely not configured or are configured to an insufficient value.\n"
     b"The currently configured max heap space is '3 GiB' and the configured max metaspace is '768 MiB'.\n"
     b"> Task :app:mergeReleaseResources FAILED\n",
     "oom", "gradle-daemon-memory-exhausted", Action.RESIZE, {}),
    (b"Daemon will be stopped at the end of the build after running out of JVM Metaspace\n"
     b"FAILURE: Build failed with an exception.\n",
     "oom", "gradle-daemon-memory-exhausted", Action.RESIZE, {}),
    # --- C. jest-worker's pool giving up on a child that keeps dying (a build tool's worker)
    (b"> next build\n   Generating static pages (120/480)\n> Build error occurred\n"
     b"Error: Call retries were exceeded\n"
     b"    at ChildProcessWorker.initialize (/srv/app/node_modules/next/dist/compiled/jest-worker/index.js:1:11580)\n"
     b"    at ChildProcessWorker._onExit (/srv/app/node_modules/next/dist/compiled/jest-worker/index.js:1:12545) {\n"
     b"  type: 'WorkerError'\n}\n",
     "oom", "js-worker-retries-exceeded", Action.RESIZE, {}),
    (b"ERROR in vendors.3f9a.js from Terser\nError: Call retries were exceeded\n"
     b"    at ChildProcessWorker.initialize (/home/ci/work/web/node_modules/jest-worker/build/workers/"
     b"ChildProcessWorker.js:193:21)\n",
     "oom", "js-worker-retries-exceeded", Action.RESIZE, {}),
    # --- D. the Docker daemon relaying a registry connection cut mid-response
    (b"$ docker pull quay.io/example/builder:2024.06\n2024.06: Pulling from example/builder\n"
     b"Error response from daemon: unexpected EOF\n",
     "infrastructure", "network-error", Action.RETRY, {}),
    (b"docker: Error response from daemon: Get \"https://registry.example.org/v2/\": unexpected EOF.\n",
     "infrastructure", "network-error", Action.RETRY, {}),
    # --- E. @actions/artifact's (and @actions/cache's) diagnostic block with a retryable 5xx
    (b"Run actions/upload-artifact@v3\nWith the provided path, there will be 214 files uploaded\n"
     b"Error: Unexpected response. Unable to upload chunk to https://pipelines.actions.example.net/Ab3/_apis/"
     b"resources/Containers/88231?itemPath=coverage%2Findex.html\n"
     b"##### Begin Diagnostic HTTP information #####\nStatus Code: 503\nStatus Message: Service Unavailable\n"
     b"Header Information: {\n  \"content-length\": \"0\"\n}\n###### End Diagnostic HTTP information ######\n",
     "infrastructure", "actions-http-diagnostics-5xx", Action.RETRY, {}),
    # --- F. Ruby HTTP clients' 5xx exception classes (octokit.rb, Faraday)
    (b"/usr/local/bundle/gems/octokit-6.1.1/lib/octokit/response/raise_error.rb:14:in `on_complete': "
     b"GET https://api.github.com/repos/acme/widgets/releases/tags/v2.3.0: 503 - Service Unavailable "
     b"(Octokit::ServiceUnavailable)\n"
     b"\tfrom /usr/local/bundle/gems/faraday-2.7.4/lib/faraday/middleware.rb:19:in `block in call'\n",
     "infrastructure", "ruby-http-client-server-error", Action.RETRY, {}),
    (b"[!] fastlane finished with errors\n"
     b"/var/lib/gems/3.1.0/gems/faraday-1.10.3/lib/faraday/response/raise_error.rb:41:in `on_complete': "
     b"the server responded with status 504 (Faraday::ServerError)\n",
     "infrastructure", "ruby-http-client-server-error", Action.RETRY, {}),
    # --- G. pip's hash check on a download its progress bar shows cut short
    (b"#9 12.40   Downloading tensorflow-2.15.0-cp311-cp311-manylinux_2_17_x86_64.whl (475.2 MB)\n"
     b"#9 12.40      \xe2\x94\x81\xe2\x94\x81\xe2\x94\x81\xe2\x94\x81\xe2\x94\x81          "
     b"118.0/475.2 MB 96.1 MB/s eta 0:00:04\n"
     b"#9 12.41 ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. If you have updated "
     b"the package versions, please update the hashes. Otherwise, examine the package contents carefully; "
     b"someone may have tampered with them.\n"
     b"#9 12.41     tensorflow==2.15.0 from https://files.pythonhosted.org/packages/aa/bb/tensorflow-2.15.0.whl:\n"
     b"#9 12.41         Expected sha256 1c2b3a4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b\n"
     b"#9 12.41              Got        9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0\n",
     "infrastructure", "pip-download-truncated", Action.RETRY, {}),
    # --- H. @actions/io which(): the runner image lacks the tool an action runs
    (b"Run some-org/yarn-audit-action@v1\n"
     b"Error: Unable to locate executable file: yarn. Please verify either the file path exists or the file can "
     b"be found within a directory specified by the PATH environment variable. Also check the file mode to "
     b"verify the file is executable.\n",
     "config_error", "executable-not-found", Action.NONE, {}),
    # --- I. the R packages r-lib/actions itself runs, missing from the job's library
    (b"Run r-lib/actions/check-r-package@v2\n"
     b"Error in loadNamespace(x) : there is no package called \xe2\x80\x98rcmdcheck\xe2\x80\x99\n"
     b"Calls: loadNamespace -> withRestarts -> withOneRestart -> doWithOneRestart\nExecution halted\n"
     b"Error: Process completed with exit code 1.\n",
     "config_error", "r-ci-tooling-package-missing", Action.NONE, {}),
    (b"Run r-lib/actions/setup-r-dependencies@v2\n"
     b"Error in loadNamespace(x) : there is no package called 'pak'\nExecution halted\n",
     "config_error", "r-ci-tooling-package-missing", Action.NONE, {}),
    # --- J. Travis CI's worker ending a job whose log passed its limit: the cause is cut from the log
    (b"test/integration/sync_test.rb:88: warning: deprecated\n\n"
     b"The log length has exceeded the limit of 4 MB (this usually means that the test suite is raising the "
     b"same exception over and over).\n\nThe job has been terminated\n",
     "unknown", "log-limit-exceeded", Action.NONE, {}),
    # --- K. perl's require of a module the image lacks, with perl's own install hint
    (b"Can't locate YAML/XS.pm in @INC (you may need to install the YAML::XS module) (@INC contains: "
     b"/etc/perl /usr/local/lib/x86_64-linux-gnu/perl/5.38.2 /usr/share/perl5) at tools/gen-config.pl line 7.\n"
     b"BEGIN failed--compilation aborted at tools/gen-config.pl line 7.\n"
     b"make: *** [Makefile:41: config.h] Error 2\n",
     "config_error", "perl-module-not-installed", Action.NONE, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{i}-{p[2]}" for i, p in enumerate(POSITIVE)])
def test_fifteenth_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must NOT decide, family unless None, extra facts)
NEAR_MISSES = [
    # A: an eviction for ephemeral storage stays the node's (retry), not memory
    (b"Warning  Evicted  pod/build-7f9c  The node was low on resource: ephemeral-storage. Threshold quantity: "
     b"4Gi, available: 3110088Ki.\n",
     "kubelet-evicted-over-request", "infrastructure", {}),
    # B: Gradle's daemon expiring for an unrelated reason (a changed JVM option), not memory
    (b"The Daemon will expire after the build after the JVM options changed.\n"
     b"src/main/java/com/acme/App.java:14: error: cannot find symbol\n",
     "gradle-daemon-memory-exhausted", None, {}),
    # C: Jest's own test runner giving up on a worker a test crashed: not the build tools' wording
    (b"FAIL src/native/binding.test.js\n"
     b"  \xe2\x97\x8f Test suite failed to run\n\n"
     b"    Jest worker encountered 4 child process exceptions, exceeding retry limit\n",
     "js-worker-retries-exceeded", None, {}),
    # D: the daemon refusing a pull for a missing manifest (configuration), not a cut transfer
    (b"Error response from daemon: manifest for example/builder:2024.13 not found: manifest unknown\n",
     "network-error", "config_error", {}),
    # E: the same diagnostic block with a 403 (an expired runtime token, a retention limit): not read
    (b"Error: Unexpected response. Unable to upload chunk to https://pipelines.actions.example.net/x\n"
     b"##### Begin Diagnostic HTTP information #####\nStatus Code: 403\nStatus Message: Forbidden\n",
     "actions-http-diagnostics-5xx", None, {}),
    # E: a test framework's own 'Status Code: 500' assertion output, with no toolkit diagnostic block
    (b"AssertionError: expected response\n    Status Code: 500\n    Body: {\"error\": \"boom\"}\nFAILED\n",
     "actions-http-diagnostics-5xx", None, {}),
    # F: octokit's client errors (a token without rights) stay configuration
    (b"/home/travis/.rvm/gems/ruby-3.1.2/gems/octokit-4.25.1/lib/octokit/response/raise_error.rb:14:in "
     b"`on_complete': POST https://api.github.com/repos/acme/tool/releases: 403 - Resource not accessible by "
     b"integration // See: https://docs.github.com/rest/releases (Octokit::Forbidden)\n",
     "ruby-http-client-server-error", None, {}),
    # G: a pip hash mismatch without evidence of a cut download stays the deterministic checksum error
    (b"  Downloading urllib3-2.2.1-py3-none-any.whl (121 kB)\n"
     b"     \xe2\x94\x81\xe2\x94\x81\xe2\x94\x81\xe2\x94\x81\xe2\x94\x81 121.1/121.1 kB 4.2 MB/s eta 0:00:00\n"
     b"ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. If you have updated the package "
     b"versions, please update the hashes. Otherwise, examine the package contents carefully; someone may have "
     b"tampered with them.\n"
     b"    urllib3==2.2.1 from https://files.pythonhosted.org/packages/cc/dd/urllib3-2.2.1-py3-none-any.whl:\n"
     b"        Expected sha256 aaaabbbbccccddddeeeeffff00001111222233334444555566667777888899990\n"
     b"             Got        0999988887777666655554444333322221111000ffffeeeeddddccccbbbbaaaa\n",
     "pip-download-truncated", "build_error", {}),
    # H: which() in a program's own help text, not @actions/io's error
    (b"hint: Unable to locate executable file? Run `doctor --fix`\nerror: build failed\n",
     "executable-not-found", None, {}),
    # I: any other missing R package stays the package's own dependency error (build_error)
    (b"Error in library(ggplot2) : there is no package called \xe2\x80\x98ggplot2\xe2\x80\x99\nExecution halted\n",
     "r-ci-tooling-package-missing", "build_error", {}),
    # J: a program printing the words inside its own output, not Travis's line of its own
    (b"    expect(msg).toContain('The log length has exceeded the limit of 4 MB (this usually means')\n"
     b"FAIL test/log.test.js\n",
     "log-limit-exceeded", None, {}),
    # K: perl's older wording without the install hint (a module path of the project's own, mistyped)
    (b"Can't locate lib/Acme/Utils.pm in @INC (@INC contains: /etc/perl /usr/share/perl5 .) at bin/run line 3.\n",
     "perl-module-not-installed", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{i}-{n[1]}" for i, n in enumerate(NEAR_MISSES)])
def test_fifteenth_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)


# ------------------------------------------------------------------ traps stay right

@pytest.mark.parametrize("trace,extra", [
    # a test named after memory-pressure evictions, failing its own assertion: never resized
    (b"--- FAIL: TestEvictionMessage (0.01s)\n"
     b"    eviction_test.go:41: got \"The node was low on resource: memory.\", want \"The node had condition\"\n"
     b"FAIL\tgithub.com/acme/controller/eviction\t0.214s\n", {}),
])
def test_fifteenth_pass_traps_are_never_resized(taxonomy, trace, extra):
    check_trap(taxonomy, trace, extra)


def test_fifteenth_pass_documented_misses_keep_their_decisions(taxonomy):
    """Texts N labelled against their mechanism (identical text, opposite causes across splits) keep the
    decision of the convention the other splits establish: a DNS failure retried, a hosted runner lost
    under load resized, Bazel's vanished server resized."""
    for trace, want in (
        (b"W: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease  "
         b"Temporary failure resolving 'deb.debian.org'\n", Action.RETRY),
        (b"Server terminated abruptly (error code: 14, error message: 'Socket closed', log file: "
         b"'/home/ci/.cache/bazel/_bazel_ci/0f1e2d3c/server/jvm.out')\n", Action.RESIZE),
    ):
        _, action = decided(trace, taxonomy)
        assert action == want
