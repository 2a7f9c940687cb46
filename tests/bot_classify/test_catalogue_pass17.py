"""Issue 11, seventeenth pass: held-out Q's misses (scored blind once after the sixteenth pass, then read),
generalised by mechanism (precision first) and per message source (each rule's description or the comment
beside each added pattern in config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
paths, sizes and numbers than Q's excerpts. Each mechanism has a positive, a near miss next to it that
must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Seventeenth pass", lists the mechanisms.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule, check_trap, decided

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. Buildbot's worker time limits (no output; maxTime), then its SIGKILL of the process group
    (b"test 1187/2210 ........ Passed 41.2 sec\n\n"
     b"command timed out: 1200 seconds without output running [b'ninja', b'-C', b'out/Release', b'check-all'], "
     b"attempting to kill\nprocess killed by signal 9\nprogram finished with exit code -1\n",
     "timeout", "ci-system-timeout", Action.NONE, {}),
    (b"command timed out: 7200 seconds elapsed running ['python3', 'run_tests.py', '--jobs', '8'], "
     b"attempting to kill\nprocess killed by signal 9\n",
     "timeout", "ci-system-timeout", Action.NONE, {"exit_code": 137}),
    # --- B. a SIGKILL on a line of a test's captured output ('  1> ' / '  2> '): the test's process, not the job
    (b"  2> REPRODUCE WITH: ./gradlew ':qa:os:test' --tests \"org.acme.search.PackagingTests.test20\"\n"
     b"  1> ERROR: OpenSearch exited unexpectedly, with exit code 137\n",
     "build_error", "test-captured-output-kill", Action.NONE, {}),
    (b"  1> [2025-02-03T10:11:12,345][INFO ][o.a.f.Fixture] starting fixture\n"
     b"  2> fixture process terminated by signal SIGKILL\n",
     "build_error", "test-captured-output-kill", Action.NONE, {}),
    # --- C. curl's exit codes as opam 2.2 relays them ('Curl failed', capitalised)
    (b"#=== ERROR while fetching sources for zarith.1.13 ===#\n"
     b"OpamSolution.Fetch_fail(\"https://example.org/zarith-1.13.tgz (Curl failed: \\\"/usr/bin/curl --retry 3 -L -o "
     b"/root/.opam/5.1/.opam-switch/sources/zarith.1.13/z.tgz.part -- https://example.org/zarith-1.13.tgz\\\" "
     b"exited with code 28)\")\n",
     "infrastructure", "download-tool-transient-exit-code", Action.RETRY, {}),
    # --- D. WinHTTP's transport error codes as vcpkg's downloader relays them
    (b"  Downloading cmake-3.29.2-windows-x86_64.zip...\n  Failed to download from mirror set:\n"
     b"  https://example.org/cmake/cmake-3.29.2-windows-x86_64.zip: WinHttpSendRequest() failed: 12002\n",
     "infrastructure", "download-tool-transient-exit-code", Action.RETRY, {}),
    # --- E. HotSpot's heap message as a nested cause in Maven's report
    (b"[ERROR] Failed to execute goal org.apache.maven.plugins:maven-shade-plugin:3.5.1:shade (default) on project "
     b"billing-api: Error creating shaded jar: Execution exception: Java heap space -> [Help 1]\n"
     b"[ERROR] \n[ERROR] To see the full stack trace of the errors, re-run Maven with the -e switch.\n",
     "oom", "runtime-heap-exhausted", Action.RESIZE, {}),
    (b"[ERROR] Failed to execute goal org.apache.maven.plugins:maven-javadoc-plugin:3.6.3:jar (attach-javadocs) on "
     b"project core: MavenReportException: Error while generating Javadoc: GC overhead limit exceeded -> [Help 1]\n",
     "oom", "runtime-heap-exhausted", Action.RESIZE, {}),
    # --- F. the Docker daemon's registry request cut short (Go's url.Error with io.EOF)
    (b"Error response from daemon: Get \"https://ghcr.io/v2/acme/builder/manifests/2.4.1\": EOF\n",
     "infrastructure", "network-error", Action.RETRY, {}),
    (b"docker: Error response from daemon: Head \"https://quay.io/v2/acme/tools/manifests/latest\": "
     b"Get \"https://quay.io/v2/auth?scope=repository%3Aacme%2Ftools%3Apull&service=quay.io\": EOF.\n"
     b"See 'docker run --help'.\n",
     "infrastructure", None, Action.RETRY, {}),
    # --- G. a call to one of Hex's processes timed out
    (b"** (exit) exited in: GenServer.call(Hex.Registry.Server, {:prefetch, [\"jason\"]}, 60000)\n"
     b"    ** (EXIT) time out\n    (elixir 1.15.7) lib/gen_server.ex:1074: GenServer.call/3\n",
     "infrastructure", "hex-genserver-call-timeout", Action.RETRY, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{i}-{p[2]}" for i, p in enumerate(POSITIVE)])
def test_seventeenth_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must NOT decide, family unless None, extra facts)
NEAR_MISSES = [
    # A: a test's own message about a timed-out command, not Buildbot's worker line
    (b"FAIL: test_runner (3 of 40): the command timed out after 30 seconds\n",
     "ci-system-timeout", None, {}),
    # B: the same SIGKILL without the captured-output prefix is the job's own (kill_signal, an OOM reading)
    (b"ERROR: OpenSearch exited unexpectedly, with exit code 137\n",
     "test-captured-output-kill", "oom", {}),
    # B: a captured line with another exit code is not read here
    (b"  1> ERROR: OpenSearch exited unexpectedly, with exit code 78\n",
     "test-captured-output-kill", None, {}),
    # C: curl's 22 (any HTTP status >= 400) stays out, capitalised or not
    (b"OpamSolution.Fetch_fail(\"https://example.org/a.tgz (Curl failed: \\\"/usr/bin/curl -L -o /tmp/a.part -- "
     b"https://example.org/a.tgz\\\" exited with code 22)\")\n",
     "download-tool-transient-exit-code", None, {}),
    # D: WinHTTP's certificate failure (12175) and a bad URL (12005) are not transport faults
    (b"  https://example.org/x.zip: WinHttpSendRequest() failed: 12175\n",
     "download-tool-transient-exit-code", None, {}),
    (b"  example.org/x.zip: WinHttpConnect() failed: 12005\n",
     "download-tool-transient-exit-code", None, {}),
    # E: the words in a Maven failure that are not the JVM's message closing the cause chain
    (b"[ERROR] Failed to execute goal org.acme:heap-check-plugin:1.0:check (default) on project web: Java heap space "
     b"setting -Xmx64m is below the required minimum -> [Help 1]\n",
     "runtime-heap-exhausted", None, {}),
    # F: a registry's refusal is an HTTP status, and a JSON decoder's EOF is not a request
    (b"Error response from daemon: Head \"https://registry.example/v2/acme/app/manifests/9.9\": unauthorized: "
     b"authentication required\n",
     "network-error", None, {}),
    (b"Error response from daemon: failed to parse config: unexpected EOF\n",
     "network-error", None, {}),
    # G: a call to the project's own process timing out is the project's
    (b"** (exit) exited in: GenServer.call(MyApp.Cache, :warm, 5000)\n    ** (EXIT) time out\n",
     "hex-genserver-call-timeout", None, {}),
    # G: a Hex process exiting for another reason (not a time-out)
    (b"** (exit) exited in: GenServer.call(Hex.Registry.Server, :close, 60000)\n    ** (EXIT) no process\n",
     "hex-genserver-call-timeout", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{i}-{p[1]}" for i, p in enumerate(NEAR_MISSES)])
def test_seventeenth_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)


@pytest.mark.parametrize("trace,extra", [
    # Buildbot's no-output limit, then its SIGKILL: never resized
    (b"command timed out: 900 seconds without output running ['make', 'check'], attempting to kill\n"
     b"process killed by signal 9\n", {"exit_code": 137}),
    # a server under test killed, reported in the test's captured output: never resized
    (b"  1> Jan 01, 2025 1:02:03 AM org.acme.Boot main\n  1> ERROR: Solr exited unexpectedly, with exit code 137\n", {}),
])
def test_seventeenth_pass_traps_are_never_resized(taxonomy, trace, extra):
    check_trap(taxonomy, trace, extra)


def test_seventeenth_pass_documented_misses_keep_their_decisions(taxonomy):
    """Identical texts that carry opposite causes across splits stay as they were: a registry's 401 is
    configuration (credentials), not retried, even where a thread found it flaky."""
    v, act = decided(b"Error response from daemon: Head \"https://registry.example/v2/acme/app/manifests/1\": "
                     b"unauthorized: authentication required\n", taxonomy)
    assert act == Action.NONE and v.family.value == "config_error", (v.rule, v.evidence)
