"""Issue 11, nineteenth pass: held-out S's misses (scored blind once after the eighteenth pass and GitLab
Runner's job-log catalogue, then read), generalised by mechanism (precision first) and per message source
(each rule's description in config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
ports, paths and numbers than S's excerpts. Each mechanism has a positive, a near miss next to it that
must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Nineteenth pass", lists the mechanisms.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule, decided

RSF = {"failure_reason": "runner_system_failure", "exit_code": None}

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. the helper container exited as soon as the Kubernetes executor started it (precision)
    (b"Running with gitlab-runner 16.4.1 (d89a789a)\n  on k8s-arm-pool-5c9d 7xQpLm2a\n"
     b"Preparing the \"kubernetes\" executor\nUsing Kubernetes namespace: ci-jobs\n"
     b"Waiting for pod ci-jobs/runner-7xqplm2a-project-42-concurrent-1abcd to be running, status is Pending\n"
     b"\tContainersNotReady: \"containers with unready status: [build helper svc-0]\"\n"
     b"ERROR: Job failed (system failure): prepare environment: setting up trapping scripts on emptyDir: unable to "
     b"upgrade connection: container not found (\"helper\"). Check https://docs.gitlab.com/runner/shells/index.html"
     b"#shell-profile-loading for more information\n",
     "config_error", "k8s-helper-container-exited-at-prepare", Action.NONE, RSF),
    (b"ERROR: Job failed (system failure): prepare environment: unable to upgrade connection: container not found "
     b"(\"helper\")\n",
     "config_error", "k8s-helper-container-exited-at-prepare", Action.NONE, RSF),
    # --- B. .NET's WebException for a 5xx, as Windows PowerShell prints it
    (b"Exception calling \"DownloadString\" with \"1\" argument(s): \"The remote server returned an error: (503) "
     b"Server Unavailable.\"\nAt C:\\ci\\bootstrap.ps1:31 char:5\n+ FullyQualifiedErrorId : WebException\n",
     "infrastructure", "dotnet-webexception-5xx", Action.RETRY, {}),
    (b"Invoke-WebRequest : The remote server returned an error: (504) Gateway Timeout.\nAt line:1 char:1\n",
     "infrastructure", "dotnet-webexception-5xx", Action.RETRY, {}),
    # --- C. libcurl's low-speed abort, relayed by any libcurl user
    # (curl's own 'curl: (28)' prefix was already 'network-timeout': the decision is the same)
    (b"curl: (28) Operation too slow. Less than 1000 bytes/sec transferred the last 30 seconds\n",
     "infrastructure", None, Action.RETRY, {}),
    (b"Error: Failed to download metadata for repo 'epel': Yum repo downloading error: Downloading error(s): "
     b"repodata/primary.xml.zst - Cannot download, all mirrors were tried; Last error: Operation too slow. Less than "
     b"1000 bytes/sec transferred the last 30 seconds\n",
     "infrastructure", None, Action.RETRY, {}),
    (b"Downloading artifact https://downloads.example.net/toolchains/llvm-17.tar.xz\n"
     b"ERROR: RequestError: HTTP/1.1 200 (Operation too slow. Less than 10 bytes/sec transferred the last 60 "
     b"seconds) while requesting https://downloads.example.net/toolchains/llvm-17.tar.xz\n",
     "infrastructure", "curl-low-speed-abort", Action.RETRY, {}),
    # --- D. Hex's tarball fetch failing in transport or on a 5xx
    (b"* Getting jason (Hex package)\nRequest failed (:closed)\n"
     b"** (Mix) Package fetch failed and no cached copy available (https://hex.example.org/tarballs/jason-1.4.1.tar)\n",
     "infrastructure", "hex-fetch-network-failure", Action.RETRY, {}),
    (b"Request failed (503)\n** (Mix) Package fetch failed and no cached copy available "
     b"(https://repo.hex.pm/tarballs/plug-1.15.3.tar)\n",
     "infrastructure", "hex-fetch-network-failure", Action.RETRY, {}),
    (b"Request failed: {:failed_connect, [{:to_address, {'mirror.example.cn', 443}}, {:inet, [:inet], :timeout}]}\n",
     "infrastructure", "hex-fetch-network-failure", Action.RETRY, {}),
    # --- E. Azure Pipelines' older words for an agent it lost
    (b"##[Error 1]\nThe agent: ci-win-2019-03 lost communication with the server. Verify the machine is running and "
     b"has a healthy network connection. For more information, see: https://go.microsoft.com/fwlink/?linkid=846610\n",
     "infrastructure", "azure-agent-lost-communication", Action.RETRY, {}),
    # --- F. Maven's summary of a goal's OutOfMemoryError after GitHub's level word
    (b"Error:  GC overhead limit exceeded -> [Help 1]\nError:  \n"
     b"Error:  To see the full stack trace of the errors, re-run Maven with the -e switch.\n",
     "oom", "maven-oom-level-prefix", Action.RESIZE, {}),
    # (Maven's '[ERROR] ' and a bare 'ERROR: ' were already read by 'runtime-heap-exhausted')
    (b"ERROR: Java heap space -> [Help 2]\n", "oom", None, Action.RESIZE, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{i}-{p[2]}" for i, p in enumerate(POSITIVE)])
def test_nineteenth_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must NOT decide, family unless None, extra facts)
NEAR_MISSES = [
    # A: outside 'prepare environment' the helper's loss stays the generic pod failure (retried)
    (b"ERROR: Job failed (system failure): unable to upgrade connection: container not found (\"helper\")\n",
     "k8s-helper-container-exited-at-prepare", "infrastructure", RSF),
    # A: another container's name is the build container's rule
    (b"ERROR: Job failed (system failure): prepare environment: unable to upgrade connection: container not found "
     b"(\"build\")\n", "k8s-helper-container-exited-at-prepare", "config_error", RSF),
    # B: a 404 from the same API is the job's URL, not the server's moment
    (b"Exception calling \"DownloadFile\" with \"2\" argument(s): \"The remote server returned an error: (404) Not "
     b"Found.\"\n", "dotnet-webexception-5xx", None, {}),
    # C: curl's other time-out words without the low-speed figures
    (b"the test sets CURLOPT_LOW_SPEED_LIMIT and expects 'Operation too slow' to be reported\nFAILED test_speed\n",
     "curl-low-speed-abort", None, {}),
    # D: a release that is not there (retired or misspelt) is configuration, as the final line alone is
    (b"Request failed (404)\n** (Mix) Package fetch failed and no cached copy available "
     b"(https://repo.hex.pm/tarballs/distillery-2.0.9.tar)\n",
     "hex-fetch-network-failure", None, {}),
    # E: the agent's own words about a job it cancelled are not a lost agent
    (b"##[error]The job running on agent ci-linux-07 ran longer than the maximum time of 60 minutes.\n",
     "azure-agent-lost-communication", None, {}),
    # F: a test quoting the help link after other words is no OOM
    (b"Error:  Failed to execute goal org.apache.maven.plugins:maven-surefire-plugin:3.2.5:test (default-test) on "
     b"project core: There are test failures. -> [Help 1]\n",
     "maven-oom-level-prefix", None, {}),
    (b"    assertEquals(\"Java heap space -> [Help 1]\", summary.line());\n",
     "maven-oom-level-prefix", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{i}-{p[1]}" for i, p in enumerate(NEAR_MISSES)])
def test_nineteenth_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)


def test_nineteenth_pass_documented_misses_keep_their_decisions(taxonomy):
    """Identical evidence that carries opposite causes across splits stays as it was (docs/taxonomy.md,
    "Nineteenth pass"): a bare exit 137 with the runner's 'Job failed' line is resized (OOM in most splits, a
    podman flake in S and a SIGKILL with headroom in B), and GitHub's hosted runner that lost communication
    keeps the thirteenth pass's resize."""
    v, act = decided(b"WARNING: Job failed: exit code 137\n", taxonomy, exit_code=137)
    assert act == Action.RESIZE, (v.rule, v.evidence)
    v, act = decided(b"The hosted runner: GitHub Actions 12 lost communication with the server. Anything in your "
                     b"workflow that terminates the runner process, starves it for CPU/Memory, or blocks its network "
                     b"access can cause this error.\n", taxonomy)
    assert act == Action.RESIZE, (v.rule, v.evidence)
