"""Issue 11: GitLab Runner's own job-log messages (docs/taxonomy.md, "GitLab Runner's job-log catalogue").

The probes (benchmarks/redteam/runner.py) were written from gitlab-runner's source before scoring; the
mechanisms fixed after scoring are tested here in other contexts than the probes' (other images, hosts,
artifact types, versions, taints), each with a near miss that must not take the fix.
"""

from __future__ import annotations

import pytest

from retry_bot.classify.structure import drop_superseded_attempts
from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule, decided

RSF = {"failure_reason": "runner_system_failure", "exit_code": None}
#: the runner's first line (common/build.go:2390): superseded pull warnings are dropped only from a whole log
HEAD = b"\x1b[0KRunning with gitlab-runner 18.3.1 (5a0b7c21)\n  on shared-eu-4 zT9kQw, system ID: s_88aa\n"

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. the artifacts uploader's 403 (network/gitlab.go determineUploadState -> os.ErrPermission, not retried)
    (b"Uploading artifacts...\ntarget/site: found 88 matching artifact files and directories\n"
     b"ERROR: Uploading artifacts to coordinator... forbidden  id=5512 responseStatus=403 Forbidden status=403 token=aBcD1234\n"
     b"FATAL: permission denied\nCleaning up project directory and file based variables\nERROR: Job failed: exit code 1\n",
     "config_error", "runner-artifact-upload-refused", Action.NONE, {}),
    (b"Uploading artifacts...\nreport.xml: found 1 matching artifact files and directories\n"
     b"ERROR: Uploading artifacts as \"junit\" to coordinator... 403 Forbidden  id=770021 responseStatus=403 Forbidden "
     b"status=403 token=glcbt-1f\nFATAL: permission denied\nERROR: Job failed: command terminated with exit code 1\n",
     "config_error", "runner-artifact-upload-refused", Action.NONE, {}),
    # --- B. a pod left Pending on nodes the node lifecycle tainted: the runner's pod-start timeout decides
    (b"Waiting for pod gitlab/runner-zx81-project-77-concurrent-3-a1b2c3 to be running on the node <unknown>, status is Pending\n"
     b"\tUnschedulable: \"0/5 nodes are available: 2 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, "
     b"3 node(s) had untolerated taint {node.kubernetes.io/memory-pressure: }. preemption: 0/5 nodes are available\"\n"
     b"ERROR: Job failed (system failure): prepare environment: waiting for pod running: timed out waiting for pod to start "
     b"(last phase: Pending). Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information\n",
     "infrastructure", "pod-failure", Action.RETRY, RSF),
    (b"\tUnschedulable: \"0/9 nodes are available: 9 node(s) had untolerated taint "
     b"{node.cloudprovider.kubernetes.io/uninitialized: true}. preemption: 0/9 nodes are available\"\n"
     b"ERROR: Job failed (system failure): prepare environment: waiting for pod running: timed out waiting for pod to start. "
     b"Check https://docs.gitlab.com/runner/shells/index.html#shell-profile-loading for more information\n",
     "infrastructure", "pod-failure", Action.RETRY, RSF),
    # --- C. a superseded pull attempt (a later policy or attempt got the image) never decides
    (HEAD + b"Using effective pull policy of [always if-not-present] for container eu.gcr.io/acme/jdk:21\n"
     b"WARNING: Failed to pull image with policy \"always\": Error response from daemon: Get \"https://eu.gcr.io/v2/\": "
     b"net/http: TLS handshake timeout (manager.go:237:10s)\n"
     b"Attempt #2: Trying \"if-not-present\" pull policy\n"
     b"Using locally found image version due to \"if-not-present\" pull policy\n"
     b"Preparing environment\nRunning on runner-9-project-3-concurrent-0 via ci-7...\n"
     b"$ ./gradlew check\n> Task :api:compileJava FAILED\n"
     b"/builds/acme/api/src/main/java/acme/Api.java:12: error: cannot find symbol\n"
     b"ERROR: Job failed: exit code 1\n",
     "build_error", None, Action.NONE, {}),
    (HEAD + b"WARNING: Failed to pull image \"mcr.microsoft.com/dotnet/sdk:8.0\" (attempt #1), retrying: Error response from daemon: "
     b"toomanyrequests: retry-after: 112.5us, allowed: 44000/minute\n"
     b"Using docker image sha256:77aa for mcr.microsoft.com/dotnet/sdk:8.0 with digest mcr.microsoft.com/dotnet/sdk@sha256:1b ...\n"
     b"Executing \"step_script\" stage of the job script\n$ dotnet test\n  Failed Billing.Tests.RoundingTests.HalfEven [12 ms]\n"
     b"Failed!  - Failed:     1, Passed:   311, Skipped:     0, Total:   312, Duration: 4 s\n"
     b"ERROR: Job failed: exit code 1\n",
     "build_error", None, Action.NONE, {}),
    (HEAD + b"WARNING: Failed to pull image \"harbor.example.org/ci/base:5\" for container \"build\" with policy \"always\": "
     b"image pull failed: rpc error: code = Unknown desc = failed to pull and unpack image: unexpected status from HEAD "
     b"request: 502 Bad Gateway\nAttempt #2: Trying \"if-not-present\" pull policy for \"harbor.example.org/ci/base:5\" image "
     b"for container \"build\"\nGetting source from Git repository\nFetching changes...\n$ make lint\nsrc/util.sh:14:3: warning: Quote this to prevent word splitting. [SC2046]\n"
     b"make: *** [Makefile:5: lint] Error 1\nERROR: Job failed: command terminated with exit code 2\n",
     "build_error", None, Action.NONE, {"exit_code": 2}),
    # ... while a pull that failed for good is still read from the runner's final line
    (HEAD + b"WARNING: Failed to pull image with policy \"always\": Error response from daemon: received unexpected HTTP status: "
     b"504 Gateway Time-out (manager.go:237:30s)\n"
     b"ERROR: Job failed: failed to pull image \"harbor.example.org/ci/base:5\" with specified policies [always]: "
     b"Error response from daemon: received unexpected HTTP status: 504 Gateway Time-out (manager.go:237:30s)\n",
     "infrastructure", None, Action.RETRY, {"failure_reason": "runner_system_failure", "exit_code": None}),
    (HEAD + b"WARNING: Failed to pull image with policy \"always\": Error response from daemon: manifest for node:23-bullseye-slimm "
     b"not found: manifest unknown: manifest unknown (manager.go:237:0s)\n"
     b"ERROR: Job failed: failed to pull image \"node:23-bullseye-slimm\" with specified policies [always]: Error response "
     b"from daemon: manifest for node:23-bullseye-slimm not found: manifest unknown: manifest unknown (manager.go:237:0s)\n",
     "config_error", None, Action.NONE, {"failure_reason": "script_failure", "exit_code": None}),
]


POSITIVE += [
    # --- G. the namespace's LimitRange or a quota demanding limits refuses the build pod (admission, a system failure)
    (b"ERROR: Job failed (system failure): prepare environment: setting up build pod: pods \"runner-ab12-project-9-concurrent-1-x\" "
     b"is forbidden: [minimum cpu usage per Pod is 250m, but request is 100m, maximum memory usage per Container is 6Gi, "
     b"but limit is 12Gi]. Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information\n",
     "config_error", None, Action.NONE, RSF),
    (b"ERROR: Job failed (system failure): prepare environment: setting up build pod: pods \"runner-ab12-project-9-concurrent-1-x\" "
     b"is forbidden: failed quota: team-quota: must specify limits.cpu for: build,helper; limits.memory for: build,helper. "
     b"Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information\n",
     "config_error", "k8s-pod-admission-limit", Action.NONE, RSF),
    (b"ERROR: Job failed (system failure): prepare environment: setting up build pod: pods \"runner-q-project-2-concurrent-0-y\" "
     b"is forbidden: memory max limit to request ratio per Container is 2, but provided ratio is 8.000000. "
     b"Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information\n",
     "config_error", "k8s-pod-admission-limit", Action.NONE, RSF),
    # --- D. the runtime cannot start the image's entrypoint or command (runc via the daemon, the runner's system failure)
    (b"ERROR: Job failed (system failure): Error response from daemon: failed to create task for container: failed to "
     b"create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: "
     b"\"/opt/app/bin/start\": stat /opt/app/bin/start: no such file or directory: unknown (docker.go:851:0s)\n",
     "config_error", "runner-container-exec-missing", Action.NONE, RSF),
    (b"ERROR: Job failed (system failure): Error response from daemon: OCI runtime create failed: container_linux.go:380: "
     b"starting container process caused: process_linux.go:545: container init caused: unable to start container process: "
     b"exec: \"tini\": executable file not found in $PATH: unknown (docker.go:1102:0s)\n",
     "config_error", "runner-container-exec-missing", Action.NONE, RSF),
    # --- E. the custom executor's driver declared a system failure in the prepare script (SYSTEM_FAILURE_EXIT_CODE = 2)
    (b"Running with gitlab-runner 16.9.0 (656c1943)\n  on hpc-slurm-2 Xy9z\nPreparing the \"custom\" executor\n"
     b"Using Custom executor with driver slurm-ci 2.1.3...\nPreparing environment\n"
     b"sbatch: error: Batch job submission failed: Socket timed out on send/recv operation\n"
     b"ERROR: Job failed (system failure): prepare environment: exit status 2. "
     b"Check https://docs.gitlab.com/runner/shells/index.html#shell-profile-loading for more information\n",
     "infrastructure", "runner-custom-system-failure", Action.RETRY, RSF),
    # --- F. a preparation the runner retried, then the job ran and failed its tests
    (HEAD + b"Preparing the \"docker+machine\" executor\n"
     b"ERROR: Preparation failed: error during connect: Get \"https://10.4.0.12:2376/v1.24/info\": dial tcp 10.4.0.12:2376: "
     b"connect: connection refused (docker.go:958:0s)\nWill be retried in 3s ...\n"
     b"Using Docker executor with image ruby:3.3 ...\nPreparing environment\nRunning on runner-x via m-3...\n"
     b"Executing \"step_script\" stage of the job script\n$ bundle exec rake test\n"
     b"  1) Failure:\nOrderTest#test_total [test/order_test.rb:14]:\nExpected: 12\n  Actual: 11\n"
     b"31 runs, 40 assertions, 1 failures, 0 errors, 0 skips\nERROR: Job failed: exit code 1\n",
     "build_error", None, Action.NONE, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{i}-{p[2]}" for i, p in enumerate(POSITIVE)])
def test_runner_catalogue_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must NOT decide, family unless None, extra facts)
NEAR_MISSES = [
    # A: any other upload status stays the uploader's retryable failure (infrastructure); a refused download is artifacts-gone
    (b"WARNING: Uploading artifacts as \"archive\" to coordinator... 504 Gateway Timeout  id=5512 responseStatus=504 "
     b"Gateway Timeout status=504 token=aBcD1234\nFATAL: invalid argument\nERROR: Job failed: exit code 1\n",
     "runner-artifact-upload-refused", "infrastructure", {}),
    (b"ERROR: Downloading artifacts from coordinator... forbidden  id=5512 responseStatus=403 Forbidden status=403 Forbidden\n"
     b"FATAL: permission denied\nERROR: Job failed: exit code 1\n",
     "runner-artifact-upload-refused", "config_error", {}),
    # B: a taint the pool was given on purpose is still the job's configuration
    (b"\tUnschedulable: \"0/4 nodes are available: 4 node(s) had untolerated taint {dedicated: gpu-training}. "
     b"preemption: 0/4 nodes are available\"\n"
     b"ERROR: Job failed (system failure): prepare environment: waiting for pod running: timed out waiting for pod to start "
     b"(last phase: Pending). Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information\n",
     "pod-failure", "config_error", RSF),
    # C: kubelet's own pull event relayed by the runner is not the runner's superseded attempt: it is kept (and here the
    # test failure after it decides either way)
    (b"WARNING: Event retrieved from the cluster: Failed to pull image \"python:3.13\": rpc error: code = Unknown desc = "
     b"unexpected status from HEAD request: 503 Service Unavailable\n"
     b"$ pytest\nFAILED tests/test_a.py::test_b - assert 1 == 2\n1 failed, 3 passed in 0.21s\nERROR: Job failed: exit code 1\n",
     "registry-rate-limit", "build_error", {}),
]


NEAR_MISSES += [
    # G: a quota used up by the other running jobs is not the pod's configuration: it stays a system failure
    (b"ERROR: Job failed (system failure): prepare environment: setting up build pod: pods \"runner-q-project-2-concurrent-7-z\" "
     b"is forbidden: exceeded quota: ci-quota, requested: requests.memory=2Gi, used: requests.memory=31Gi, limited: "
     b"requests.memory=32Gi. Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information\n",
     "k8s-pod-admission-limit", "infrastructure", RSF),
    # D: the shells themselves stay runner-k8s-request-refused; a job's own docker run printing runc's words is not
    # the runner's system failure
    (b"ERROR: Job failed (system failure): Error response from daemon: OCI runtime create failed: runc create failed: "
     b"unable to start container process: exec: \"sh\": executable file not found in $PATH: unknown\n",
     "runner-container-exec-missing", "config_error", RSF),
    (b"$ docker run --rm acme/tool:3 --version\ndocker: Error response from daemon: failed to create task for container: "
     b"failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: "
     b"exec: \"/tool\": stat /tool: no such file or directory: unknown.\nERROR: Job failed: exit code 127\n",
     "runner-container-exec-missing", None, {"exit_code": 127}),
    # E: exit status 2 of the prepare script under another executor is the shell profile's (runner-prepare-script-failed)
    (b"Running with gitlab-runner 16.9.0 (656c1943)\nPreparing the \"shell\" executor\nUsing Shell (bash) executor...\n"
     b"Preparing environment\nbash: line 4: syntax error near unexpected token `fi'\n"
     b"ERROR: Job failed (system failure): prepare environment: exit status 2. "
     b"Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information\n",
     "runner-custom-system-failure", "config_error", RSF),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES, ids=[f"{i}-{p[1]}" for i, p in enumerate(NEAR_MISSES)])
def test_runner_catalogue_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)


def test_superseded_attempts_are_dropped_and_nothing_else():
    kept = (HEAD + b"Pulling docker image alpine:3.20 ...\n"
            b"WARNING: Event retrieved from the cluster: Failed to pull image \"alpine:3.20\": 503\n"
            b"Preparing environment\n$ make\n")
    assert drop_superseded_attempts(kept) is kept
    raw = (HEAD + b"Pulling docker image alpine:3.20 ...\n"
           b"\x1b[0;33mWARNING: Failed to pull image with policy \"always\": x (manager.go:1:0s)\x1b[0;m\n"
           b"WARNING: Failed to pull image \"alpine:3.20\" (attempt #2), retrying: y\n"
           b"WARNING: Failed to pull image \"alpine:3.20\" for container \"svc-0\" with policy \"if-not-present\": z\n"
           b"\x1b[31;1mERROR: Preparation failed: Error response from daemon: i/o timeout (docker.go:1:0s)\x1b[0;m\n"
           b"Will be retried in 3s ...\n"
           b"Preparing environment\n$ echo done\n")
    assert drop_superseded_attempts(raw) == (HEAD + b"Pulling docker image alpine:3.20 ...\nWill be retried in 3s ...\n"
                                             b"Preparing environment\n$ echo done\n")
    # a quoted excerpt or a tail cut from a longer log (no runner's first line) is left as it is
    assert drop_superseded_attempts(raw[len(HEAD):]) == raw[len(HEAD):]
    # a log that stops at the attempts (the last one failed; or quoted only that far) keeps them
    stops = HEAD + b"ERROR: Preparation failed: Error: No such image: acme/x:1 (docker.go:138:0s)\nWill be retried in 3s ...\n"
    assert drop_superseded_attempts(stops) is stops
    final = raw.split(b"Preparing environment")[0] + b"ERROR: Job failed (system failure): i/o timeout\n"
    assert drop_superseded_attempts(final) is final
    # only the first 32 KiB (the prepare section opens the log)
    late = HEAD + b"x" * 40000 + b"\nWARNING: Failed to pull image with policy \"always\": x\nPreparing environment\n"
    assert drop_superseded_attempts(late) is late


def test_the_learned_fallback_still_reads_the_dropped_lines(taxonomy, monkeypatch):
    # the rules do not see a superseded pull warning; the learned model, consulted on the unknown that is left, reads
    # the text its training saw (train.py drops no such line), the warning included
    import retry_bot.classify.engine as engine

    seen = []

    def spy(model, verdict, trace, **kw):
        seen.append(trace.raw)
        return verdict

    monkeypatch.setattr(engine, "consult", spy)
    trace = (HEAD + b"WARNING: Failed to pull image with policy \"always\": Error response from daemon: Get "
             b"\"https://registry.example.org/v2/\": dial tcp 10.9.8.7:443: i/o timeout (manager.go:237:0s)\n"
             b"Attempt #2: Trying \"if-not-present\" pull policy\n"
             b"Executing \"step_script\" stage of the job script\nERROR: Job failed: exit status 1\n")
    v, _ = decided(trace, taxonomy, exit_code=None)
    assert v.family.value == "unknown", (v.rule, v.evidence)
    assert seen and b"i/o timeout" in seen[0], seen
