"""Issue 11, thirteenth pass: blind set L's misses (L scored blind once after the twelfth pass, then read),
generalised by mechanism (precision first) and per message source (each rule's description or the comment
beside each added pattern in config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
paths, sizes and numbers than L's excerpts. Each mechanism has a positive, a near miss next to it that
must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Thirteenth pass", lists the mechanisms.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule, check_trap, decided

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. kubelet's eviction of a container over its memory request, in its current wording ...
    (b"Status:   Failed\nReason:   Evicted\nMessage:  The node was low on resource: memory. Threshold quantity: 750Mi, "
     b"available: 402112Ki. Container maven was using 6291456Ki, request is 2Gi, has larger consumption of memory. \n",
     "oom", "kubelet-evicted-over-request", Action.RESIZE, {}),
    # ... and wrapped by a controller, the container sentence on a line of its own
    (b"[Pipeline] }\nERROR: Pod [Failed][TerminationByKubelet] The node was low on resource: memory.\n"
     b"Threshold quantity: 500Mi, available: 310044Ki.\n"
     b"Container jnlp-builder was using 9437184Ki (~9.0Gi), request is 4Gi,\n"
     b"has larger consumption of memory.\n",
     "oom", "kubelet-evicted-over-request", Action.RESIZE, {}),
    (b"WARNING: Event retrieved from the cluster: The node was low on resource: memory. Threshold quantity: 1Gi, "
     b"available: 800Mi.\n  Container build was using 3.1Gi, request is 1Gi, has larger consumption of memory.\n",
     "oom", "kubelet-evicted-over-request", Action.RESIZE, {}),
    # --- B. a GitHub-hosted runner losing contact with the service
    (b"Run ./gradlew assembleRelease --parallel\n"
     b"The hosted runner: GitHub Actions 1023 lost communication with the server. Anything in your workflow that "
     b"terminates the runner process, starves it for CPU/Memory, or blocks its network access can cause this error.\n",
     "oom", "hosted-runner-lost-under-load", Action.RESIZE, {}),
    # --- C. Haskell http-types' Status record (servant-client, http-client) with a 5xx or 429
    (b"stack: HttpExceptionRequest Request { host = \"hackage.example.org\" ... }\n"
     b" (StatusCodeException (Response {responseStatus = Status {statusCode = 503, statusMessage = "
     b"\"Service Unavailable\"}, responseVersion = HTTP/1.1}) \"\")\n",
     "infrastructure", "http-5xx", Action.RETRY, {}),
    (b"attic: FailureResponse (Request {...}) (Response {responseStatusCode = Status {statusCode = 429, "
     b"statusMessage = \"Too Many Requests\"}, responseHeaders = []})\n",
     "infrastructure", "http-5xx", Action.RETRY, {}),
    # --- D. Apache Ivy's URL handler (sbt, Ant) on a 5xx
    (b"[info] Resolving org.scala-lang:scala-library:2.12.18 ...\n"
     b"[error] SERVER ERROR: Service Unavailable url=https://repo.example.org/releases/org/typelevel/cats-core_2.12/"
     b"2.10.0/cats-core_2.12-2.10.0.pom\n"
     b"[warn] \t::::::::::::::::::::::::::::::::::::::::::::::\n[warn] \t::          UNRESOLVED DEPENDENCIES         ::\n",
     "infrastructure", "http-5xx", Action.RETRY, {}),
    # --- E. Winsock's WSAETIMEDOUT text (Windows tools, .NET)
    (b"Restoring packages for C:\\src\\App\\App.csproj...\n"
     b"error : Unable to load the service index for source https://nuget.example.com/v3/index.json.\n"
     b"error :   A connection attempt failed because the connected party did not properly respond after a period "
     b"of time, or established connection failed because connected host has failed to respond. (nuget.example.com:443)\n",
     "infrastructure", "network-timeout", Action.RETRY, {}),
    # --- F. kubelet refusing a pod while the node has a pressure condition
    (b"ERROR: Job failed (system failure): prepare environment: pod status is failed: reason \"Evicted\", "
     b"message \"Pod The node had condition: [MemoryPressure]. \"\n",
     "infrastructure", "spot-reclamation", Action.RETRY, {"failure_reason": "runner_system_failure"}),
    (b"argo: step build-image failed: Pod The node had condition: [PIDPressure]. \n",
     "infrastructure", "spot-reclamation", Action.RETRY, {}),
    # --- G. docker login without a user name (the secret is empty or misnamed)
    (b"$ echo \"$REGISTRY_TOKEN\" | docker login registry.example.com -u \"$REGISTRY_USER\" --password-stdin\n"
     b"Must provide --username with --password-stdin\n",
     "config_error", "registry-credentials-refused", Action.NONE, {}),
    (b"+ nerdctl login --password-stdin ghcr.io\nFATA[0000] must provide --username with --password-stdin\n",
     "config_error", "registry-credentials-refused", Action.NONE, {}),
    # --- H. @actions/artifact v1: the artifact service failing to create the container
    (b"With the provided path, there will be 12 files uploaded\n"
     b"##[error]Unable to create a container for the artifact coverage-report at "
     b"https://pipelines.actions.githubusercontent.com/AbCdEf0123/_apis/pipelines/workflows/987654/artifacts"
     b"?api-version=6.0-preview\n",
     "infrastructure", "artifact-upload", Action.RETRY, {}),
    # --- I. a file mktemp made vanishing under the job
    (b"+ out=$(mktemp)\n+ ./gen-config > \"$out\"\n+ sort \"$out\"\nsort: cannot read: /tmp/tmp.Q3xZ9kLmN0: No such file or directory\n",
     "infrastructure", "mktemp-file-vanished", Action.RETRY, {}),
    (b"./scripts/pack.sh: line 41: /var/tmp/ci/tmp.aB3dE5gH7j: No such file or directory\n",
     "infrastructure", "mktemp-file-vanished", Action.RETRY, {}),
    # --- J. the linker killed by SIGBUS (its mapped output file could not be backed: a full disk)
    (b"[ 97%] Linking CXX executable bin/server\n"
     b"collect2: fatal error: ld.gold terminated with signal 7 [Bus error]\ncompilation terminated.\n"
     b"make[2]: *** [CMakeFiles/server.dir/build.make:412: bin/server] Error 1\n",
     "infrastructure", "linker-bus-error", Action.RETRY, {}),
    (b"error: linking with `cc` failed: exit status: 1\n  = note: collect2: fatal error: ld terminated with signal 7 "
     b"[Bus error], core dumped\n          compilation terminated.\n\nerror: could not compile `app` (bin \"app\") due to 1 "
     b"previous error\n", "infrastructure", "linker-bus-error", Action.RETRY, {"exit_code": 101}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{i}-{p[2]}" for i, p in enumerate(POSITIVE)])
def test_thirteenth_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must NOT decide, family or None, extra facts)
NEAR_MISSES = [
    # A: an ephemeral-storage eviction in the same wording (the node's disk, not the job's memory), wrapped too
    (b"The node was low on resource: ephemeral-storage. Threshold quantity: 9Gi, available: 812Mi. Container build "
     b"was using 4Gi, request is 0, has larger consumption of ephemeral-storage. \n",
     "kubelet-evicted-over-request", "infrastructure", {}),
    (b"ERROR: Pod [Failed][TerminationByKubelet] The node was low on resource: ephemeral-storage.\n"
     b"Container tools was using 1048576Ki, request is 0,\nhas larger consumption of ephemeral-storage.\n",
     "kubelet-evicted-over-request", None, {}),
    # B: a self-hosted runner's loss without memory evidence stays the host's or network's
    (b"The self-hosted runner: build-07 lost communication with the server. Verify the machine is running and has a "
     b"healthy network connection. Anything in your workflow that terminates the runner process, starves it for "
     b"CPU/Memory, or blocks its network access can cause this error.\n",
     "hosted-runner-lost-under-load", "infrastructure", {}),
    # C/D: a 4xx in the same formats is no server fault
    (b"cachix: FailureResponse (Request {...}) (Response {responseStatusCode = Status {statusCode = 401, "
     b"statusMessage = \"Unauthorized\"}})\n", "http-5xx", None, {}),
    (b"[warn] CLIENT ERROR: Not Found url=https://repo.example.org/releases/org/foo/bar_2.13/1.0/bar_2.13-1.0.pom\n",
     "http-5xx", None, {}),
    # E: a connection refused (nothing listening) is not the timeout
    (b"error :   No connection could be made because the target machine actively refused it. (localhost:5000)\n",
     "network-timeout", None, {}),
    # F: a container exceeding its own ephemeral-storage limit is the job's (no node condition)
    (b"Message: Pod ephemeral local storage usage exceeds the total limit of containers 2Gi.\n",
     "spot-reclamation", None, {}),
    # G: the password option mixed with --password-stdin is a typo in the command, not an empty secret
    (b"--password and --password-stdin are mutually exclusive\n", "registry-credentials-refused", None, {}),
    # H: the artifact quota (403) has its own message, and a v2 name conflict is the workflow's
    (b"Error: Artifact storage quota has been hit. Unable to upload any new artifacts\n", "artifact-upload", None, {}),
    # I: a path under a directory mktemp made (the build's own subdirectory) and a fixed name are the build's
    (b"/tmp/tmp.Zx81Kd0PqA/rpmbuild/tmp/rpm-tmp.4kd9Q: line 12: cd: /tmp/tmp.Zx81Kd0PqA/rpmbuild/BUILD/pkg-1.0: "
     b"No such file or directory\nerror: Bad exit status from /tmp/tmp.Zx81Kd0PqA/rpmbuild/tmp/rpm-tmp.4kd9Q (%build)\n",
     "mktemp-file-vanished", "build_error", {}),
    (b"cat: /tmp/build.env: No such file or directory\n", "mktemp-file-vanished", None, {}),
    # J: the linker SIGKILLed is the OOM kill, not a bus error; a program's own bus error is a crash
    (b"collect2: fatal error: ld terminated with signal 9 [Killed]\ncompilation terminated.\n",
     "linker-bus-error", "oom", {}),
    (b"./bin/bench --iterations 10\nBus error (core dumped)\n", "linker-bus-error", None, {"exit_code": 135}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{i}-{n[1]}" for i, n in enumerate(NEAR_MISSES)])
def test_thirteenth_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)


# ------------------------------------------------------------------ traps stay right

@pytest.mark.parametrize("trace,extra", [
    # Ginkgo v2: a spec about OOMKilled reporting that failed (a runtime's own test, the job had memory)
    (b"  [sig-node] Pods Extended\n"
     b"\xe2\x80\xa2 [FAILED] [12.204 seconds]\n"
     b"[sig-node] Pods Extended Pod Container Status [It] should report OOMKilled for a container over its limit\n"
     b"test/e2e/node/pods.go:512\n\n  [FAILED] Timed out after 10.001s.\n  Expected\n      <string>: Error\n"
     b"  to equal\n      <string>: OOMKilled\n", {"exit_code": 1}),
    # the failure summary of the same suite, the spec line carrying exit code 137 and OOMKilled
    (b"Summarizing 1 Failure:\n"
     b"  [FAIL] [sig-node] Kubelet when a container is killed [It] should terminate with exitCode 137 and reason "
     b"OOMKilled\n  test/e2e/common/node/kubelet.go:188\n\nRan 41 of 7203 Specs in 612.442 seconds\n"
     b"FAIL! -- 40 Passed | 1 Failed | 0 Pending | 7162 Skipped\n", {"exit_code": 1}),
    # Ginkgo v1's header
    (b"\xe2\x80\xa2 Failure [3.112 seconds]\n"
     b"[k8s.io] Container OOM runtime should output OOMKilled reason [It] should terminate with exitCode 137\n"
     b"  /go/src/cri-tools/pkg/validate/container_linux.go:147\n", {"exit_code": 1}),
])
def test_thirteenth_pass_traps_are_never_resized(taxonomy, trace, extra):
    check_trap(taxonomy, trace, extra)


def test_thirteenth_pass_ginkgo_spec_needs_a_failure_in_view(taxonomy):
    """A passing OOM spec listed in verbose mode, with no failure header or summary in the window, is not a
    test verdict: the job's own OOM kill printed after it still decides."""
    trace = (b"\xe2\x80\xa2 [2.004 seconds]\n[sig-node] Container OOM [It] should report OOMKilled\n"
             b"test/e2e/node/oom.go:77\n"
             b"ERROR: Job failed: command terminated with exit code 137, reason: 'OOMKilled'\n")
    v, action = decided(trace, taxonomy, exit_code=137)
    assert v.rule != "ginkgo-spec-named-after-oom-failed", v.evidence
    assert v.family.value == "oom" and action == Action.RESIZE, (v.rule, v.evidence)


def test_thirteenth_pass_wasted_rerun_is_not_resized(taxonomy):
    """L's one wasted re-run, by mechanism: a critest spec that OOM-kills a container on purpose failed; the
    OOMKilled on its spec line was read as the job's container and resized. It now leaves the job alone."""
    trace = (b"    default: \xe2\x80\xa2 [FAILED] [6.310 seconds]\n"
             b"    default: [k8s.io] Container OOM runtime should output OOMKilled reason [It] should terminate with "
             b"exitCode 137 and reason OOMKilled\n"
             b"    default: sigs.k8s.io/cri-tools/pkg/validate/container_linux.go:160\n"
             b"    default:   STEP: create a container that will be killed by OOMKiller @ 03/02/26 09:12:44.101\n"
             b"    default:   STEP: container is stopped because of OOM @ 03/02/26 09:12:44.402\n")
    v, action = decided(trace, taxonomy)
    assert action == Action.NONE, (v.rule, v.evidence)
    assert v.family.value == "build_error", (v.rule, v.evidence)
    assert v.rule == "ginkgo-spec-named-after-oom-failed", (v.rule, v.evidence)
