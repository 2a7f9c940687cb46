"""GitLab Runner's own job-log messages (issue 11): probes written from gitlab-runner's source.

Every failed GitLab job log carries the runner's lines: its section headers, its pull/prepare/retry
messages, the helpers' artifact and cache lines, and the final ``ERROR: Job failed: ...`` line that
``common/build.go`` writes (``Job failed (system failure): ...`` when the failure reason is
``runner_system_failure``).  Each probe below is a job-log tail built with the builder of this package
(``gl``: the runner's header and sections; ``job``: a bare step_script) around one message of the
runner, with the family its *cause* has (from the source's semantics and GitLab's docs, never from what
the classifier says), the failure_reason the runner reports for it, and a comment naming the source:
``path:line`` at gitlab-runner ``d79f3e7b`` (HEAD of the mirror, after v19.3.0) unless a tag is named.

How a runner failure reason reaches GitLab (``common/network.go:76-106``, ``failureReasonsCompatibilityMap``):
``image_pull_failure`` and ``runner_external_dependency_failure`` fall back to ``runner_system_failure``
and ``runner_configuration_error`` to ``script_failure`` on instances that do not know them; probes use
the runner's own value (the classifier knows both spellings).

Written before scoring (issue 11's red-team method: ``docs/taxonomy.md``, "Tenth pass").
"""
from . import job

P = []
I, O, B, C, T, X, U = "infrastructure", "oom", "build_error", "config_error", "timeout", "canceled", "unknown"
RSF, SF, EDF, IPF, CFG = ("runner_system_failure", "script_failure", "runner_external_dependency_failure",
                          "image_pull_failure", "runner_configuration_error")


def hdr(version="17.5.2"):
    return (f"Running with gitlab-runner {version} (9a1c3e7b)\n"
            "  on ci-runner-03 t2_Qx7Lm, system ID: s_4f1e2d3c9b\n")


def sec(name, title, body, ts):
    body = body.strip("\n")
    return (f"section_start:{ts}:{name}\r\x1b[0K\x1b[0K\x1b[36;1m{title}\x1b[0;m\n" + (body + "\n" if body else "")
            + f"section_end:{ts + 7}:{name}\r\x1b[0K\n")


def gl(pid, want, parts, final, code=None, fr=SF, version="17.5.2"):
    """A GitLab job log: the runner's header, ``parts`` as (section, header, body) and the final lines."""
    t, ts = hdr(version), 1732440000
    for name, title, body in parts:
        t += sec(name, title, body, ts)
        ts += 10
    P.append((pid, want, t + final.strip("\n") + "\n", code, fr))


def raw(pid, want, text, code=None, fr=SF):
    P.append((pid, want, text, code, fr))


def p(pid, want, cmd, body, code=1):
    P.append((pid, want, job(cmd, body, code)))


def err(msg):  # common/build.go:1467 buildLogger.SoftErrorln(msg): red, then reset
    return f"\x1b[31;1mERROR: Job failed: {msg}\n\x1b[0;m"


def syserr(msg):  # common/build.go:1469 (BuildError with RunnerSystemFailure), :1500 (any other error)
    return f"\x1b[31;1mERROR: Job failed (system failure): {msg}\n\x1b[0;m"


IMG = "registry.example.com/acme/ci-builder:3.2"


def prep_docker(image=IMG, extra=""):
    # executors/docker/internal/pull/manager.go:145 'Using effective pull policy of ...'
    return ("prepare_executor", 'Preparing the "docker" executor',
            f"Using Docker executor with image {image} ...\n"
            f"Using effective pull policy of [always] for container {image}\n"
            f"Pulling docker image {image} ...\n" + extra)


def prep_docker_ok(image=IMG):
    return prep_docker(image, f"Using docker image sha256:5e8b1f0c2a7d for {image} with digest "
                              f"{image.split(':')[0]}@sha256:0c7d2e9f41 ...\n")


def prep_k8s(image="python:3.12-slim", extra=""):
    # executors/kubernetes/kubernetes.go:454-456, :716; util.go:235 'Waiting for pod ... status is'
    return ("prepare_executor", 'Preparing the "kubernetes" executor',
            f"Using Kubernetes namespace: ci-jobs\nUsing Kubernetes executor with image {image} ...\n"
            "Using attach strategy to execute scripts...\n" + extra)


def env_k8s(extra="", phase="Running"):
    return ("prepare_script", "Preparing environment",
            "Using FF_USE_POD_ACTIVE_DEADLINE_SECONDS, the Pod activeDeadlineSeconds will be set to the job timeout: 1h0m0s...\n"
            "Waiting for pod ci-jobs/runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q to be running, status is Pending\n"
            + extra +
            ("Running on runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q via gitlab-runner-7c9d6b5f4-x2lzp...\n"
             if phase == "Running" else ""))


def env_docker():
    return ("prepare_script", "Preparing environment", "Running on runner-t2qx7lm-project-4411-concurrent-0 via ci-runner-03...")


def src(extra=""):
    # shells/abstract.go:931 'Fetching changes with git depth set to %d...', :1231 'Checking out ... as detached HEAD'
    return ("get_sources", "Getting source from Git repository",
            "Fetching changes with git depth set to 20...\nReinitialized existing Git repository in /builds/acme/app/.git/\n"
            + (extra or "Checking out 3f2a9c1e as detached HEAD (ref is main)...\nSkipping Git submodules setup\n"))


def cache_miss():
    # shells/abstract.go:352 'Checking cache for %s...', commands/helpers/cache_extractor.go:648
    # 'Cache file does not exist', shells/abstract.go:375 'Failed to extract cache' (a WARNING: the job goes on)
    return ("restore_cache", "Restoring cache",
            "Checking cache for main-protected...\n"
            "\x1b[0;33mWARNING: file does not exist                      \x1b[0;m\n"
            "\x1b[0;33mWARNING: Failed to extract cache\x1b[0;m\n")


def script(cmd, body):
    return ("step_script", 'Executing "step_script" stage of the job script', f"\x1b[32;1m$ {cmd}\x1b[0;m\n{body}")


def upload_fail(body=""):
    # common/build.go:782 'Uploading artifacts for failed job' (runs because the job already failed)
    return ("upload_artifacts_on_failure", "Uploading artifacts for failed job", body)


def cleanup():
    # common/build.go:784
    return ("cleanup_file_variables", "Cleaning up project directory and file based variables", "")


DOCKER_OK = [prep_docker_ok(), env_docker(), src()]
K8S_OK = [prep_k8s(), env_k8s(), src()]

# =====================================================================================================
# OOM kills the resize fixes
# =====================================================================================================
# executors/kubernetes/kubernetes.go:255 podContainerError 'Error in container %s: exit code: %d, reason: '%s''
# (podContainerStatusChecker, :3358-3372, the container's State.Terminated.Reason); not a BuildError, so
# common/build.go:1500 writes it as '(system failure)' and reports runner_system_failure (since v17.x, see v17.11.0)
gl("k8s-build-container-oomkilled", O, K8S_OK + [
    script("make -j8 all", "[ 41%] Building CXX object src/CMakeFiles/core.dir/solver.cpp.o\n[ 42%] Building CXX object src/CMakeFiles/core.dir/mesh.cpp.o"),
    cleanup()], syserr("Error in container build: exit code: 137, reason: 'OOMKilled'"), None, RSF)
gl("k8s-build-container-oomkilled-node", O, K8S_OK + [
    script("npm run build", "> webapp@4.2.0 build\n> webpack --mode production\n\n<s> [webpack.Progress] 68% building 1233/1890 modules"),
    cleanup()], syserr("Error in container build: exit code: 137, reason: 'OOMKilled'"), None, RSF, version="18.2.0")
# the helper container (restore_cache runs in it, executors/kubernetes) OOMKilled while unzipping a cache
gl("k8s-helper-container-oomkilled-cache", O, [prep_k8s(), env_k8s(), src(), (
    "restore_cache", "Restoring cache",
    "Checking cache for node-modules-v3-protected...\nDownloading cache from https://storage.googleapis.com/acme-runner-cache/project/4411/node-modules-v3-protected  ETag=\"4f0c2a\"\n"),
    cleanup()], syserr("Error in container helper: exit code: 137, reason: 'OOMKilled'"), None, RSF)
# executors/kubernetes/kubernetes.go:176 commandTerminatedError 'command terminated with exit code %d' (:1020, script_failure, ExitCode)
gl("k8s-attach-137-after-make", O, K8S_OK + [
    script("make -j16", "  CXX      src/storage/btree.o\n  CXX      src/storage/wal.o\n  CXX      src/query/planner.o"),
    cleanup()], err("command terminated with exit code 137"), 137, SF)
gl("k8s-attach-137-cargo", O, K8S_OK + [
    script("cargo build --release --workspace", "   Compiling tokio v1.38.0\n   Compiling arrow-array v52.0.0\n   Compiling datafusion-physical-plan v39.0.0"),
    cleanup()], err("command terminated with exit code 137"), 137, SF)
# docker executor: the script container's exit code (common/build.go:1467 'Job failed: exit code N', script_failure)
gl("docker-137-gradle", O, DOCKER_OK + [
    script("./gradlew assembleRelease --no-daemon", "> Task :app:compileReleaseKotlin\n> Task :app:mergeReleaseResources\n<============-> 93% EXECUTING [4m 12s]"),
    cleanup()], err("exit code 137"), 137, SF)
gl("docker-137-shell-killed-line", O, DOCKER_OK + [
    script("python train.py --epochs 3", "epoch 1/3: 100%|##########| 812/812 [02:11<00:00]\n/scripts-4411-9921/step_script: line 212:    88 Killed                  python train.py --epochs 3"),
    cleanup()], err("exit code 137"), 137, SF)
# 137 while the helper fetched sources / a cache / artifacts (Kubernetes: the helper container)
gl("k8s-helper-137-restore-cache", O, [prep_k8s(), env_k8s(), src(), (
    "restore_cache", "Restoring cache",
    "Checking cache for gradle-8.7-protected...\nDownloading cache from https://s3.eu-west-1.amazonaws.com/acme-runner-cache/project/4411/gradle-8.7-protected  ETag=\"9c1d\"\n")],
    err("command terminated with exit code 137"), 137, SF)
gl("k8s-helper-137-get-sources", O, [prep_k8s(), env_k8s(), (
    "get_sources", "Getting source from Git repository",
    "Fetching changes with git depth set to 50...\nInitialized empty Git repository in /builds/acme/monorepo/.git/\nCreated fresh repository.\nUpdating/initializing submodules recursively with git depth set to 50...\nPulling LFS files...")],
    err("command terminated with exit code 137"), 137, SF)
gl("k8s-helper-137-download-artifacts", O, [prep_k8s(), env_k8s(), src(), (
    "download_artifacts", "Downloading artifacts",
    "Downloading artifacts for build:linux (88213)...\nDownloading artifacts from coordinator... ok        host=cdn.example.com id=88213 responseStatus=200 OK token=glcbt-64")],
    err("command terminated with exit code 137"), 137, SF)
# executors/kubernetes/kubernetes.go:873 'Event retrieved from the cluster: %s' (print_pod_warning_events);
# kubelet's OOM event for the build container, then the runner's result
gl("k8s-event-oomkilling-then-137", O, K8S_OK + [
    script("mvn -B -T 4 package", "[INFO] --- compiler:3.13.0:compile (default-compile) @ billing-core ---\n"
           "[INFO] Compiling 1432 source files with javac [debug release 21] to target/classes\n"
           "\x1b[0;33mWARNING: Event retrieved from the cluster: Memory cgroup out of memory: Killed process 2211 (java) total-vm:9812344kB, anon-rss:4190212kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:8812kB oom_score_adj:984\x1b[0;m"),
    cleanup()], err("command terminated with exit code 137"), 137, SF)
# kubelet eviction for memory (pod watcher, watchers/pod.go:176 'pod %q is disrupted: reason %q, message %q'):
# TerminationByKubelet with kubelet's eviction message naming the build container over its request
gl("k8s-disrupted-evicted-memory", O, K8S_OK + [
    script("pytest -n 8 tests/", "============================= test session starts ==============================\ncreated: 8/8 workers\n8 workers [2214 items]\n.........................................")],
    syserr('pod "ci-jobs/runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q" is disrupted: reason "TerminationByKubelet", message "The node was low on resource: memory. Threshold quantity: 100Mi, available: 91232Ki. Container build was using 6911320Ki, request is 2Gi, has larger consumption of memory. "'),
    None, RSF, version="18.0.1")
# the docker executor's 137 while the compiler ran (no Killed line; compiler driver last)
gl("docker-137-g++-direct", O, DOCKER_OK + [
    script("g++ -O2 -flto -o bin/sim src/*.cpp", "")], err("exit code 137"), 137, SF)

# =====================================================================================================
# Infrastructure the retry fixes
# =====================================================================================================
# ---- image pulls: the docker executor (executors/docker/internal/pull/manager.go:157 the per-policy WARNING,
# :164 'failed to pull image %q with specified policies %v: %w'; ClassifyImagePullFailure,
# common/classify_image_pull_failure.go:20: network failures -> runner_external_dependency_failure)
gl("docker-pull-502", I, [prep_docker(IMG,
    f"\x1b[0;33mWARNING: Failed to pull image with policy \"always\": Error response from daemon: received unexpected HTTP status: 502 Bad Gateway (manager.go:251:0s)\x1b[0;m\n")],
    err(f'failed to pull image "{IMG}" with specified policies [always]: Error response from daemon: received unexpected HTTP status: 502 Bad Gateway (manager.go:251:0s)'),
    None, IPF)
gl("docker-pull-client-timeout", I, [prep_docker("node:22-bookworm",
    "\x1b[0;33mWARNING: Failed to pull image with policy \"always\": Error response from daemon: Get \"https://registry-1.docker.io/v2/\": net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers) (manager.go:251:15s)\x1b[0;m\n")],
    err('failed to pull image "node:22-bookworm" with specified policies [always]: Error response from daemon: Get "https://registry-1.docker.io/v2/": net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers) (manager.go:251:15s)'),
    None, EDF)
# manager.go:410 'Failed to pull image %q (attempt #%d), retrying: %v' (transient pulls are retried in place)
gl("docker-pull-dial-timeout-retried", I, [prep_docker("ghcr.io/acme/toolbox:2024.11",
    "\x1b[0;33mWARNING: Failed to pull image \"ghcr.io/acme/toolbox:2024.11\" (attempt #1), retrying: Error response from daemon: Get \"https://ghcr.io/v2/\": dial tcp 140.82.121.34:443: i/o timeout\x1b[0;m\n"
    "\x1b[0;33mWARNING: Failed to pull image \"ghcr.io/acme/toolbox:2024.11\" (attempt #2), retrying: Error response from daemon: Get \"https://ghcr.io/v2/\": dial tcp 140.82.121.34:443: i/o timeout\x1b[0;m\n"
    "\x1b[0;33mWARNING: Failed to pull image with policy \"always\": Error response from daemon: Get \"https://ghcr.io/v2/\": dial tcp 140.82.121.34:443: i/o timeout\x1b[0;m\n")],
    err('failed to pull image "ghcr.io/acme/toolbox:2024.11" with specified policies [always]: Error response from daemon: Get "https://ghcr.io/v2/": dial tcp 140.82.121.34:443: i/o timeout'),
    None, EDF, version="19.2.0")
gl("docker-pull-conn-reset-token", I, [prep_docker("quay.io/acme/base:9",
    "\x1b[0;33mWARNING: Failed to pull image with policy \"always\": Error response from daemon: Get \"https://quay.io/v2/auth?scope=repository%3Aacme%2Fbase%3Apull&service=quay.io\": read tcp 10.1.4.7:51822->44.219.11.8:443: read: connection reset by peer (manager.go:251:0s)\x1b[0;m\n")],
    err('failed to pull image "quay.io/acme/base:9" with specified policies [always]: Error response from daemon: Get "https://quay.io/v2/auth?scope=repository%3Aacme%2Fbase%3Apull&service=quay.io": read tcp 10.1.4.7:51822->44.219.11.8:443: read: connection reset by peer (manager.go:251:0s)'),
    None, EDF)
# Docker Hub's rate limit: ClassifyImagePullFailure's default (image_pull_failure); the limit resets: a retry later fixes it
gl("docker-pull-toomanyrequests", I, [prep_docker("postgres:16",
    "\x1b[0;33mWARNING: Failed to pull image with policy \"always\": Error response from daemon: toomanyrequests: You have reached your pull rate limit. You may increase the limit by authenticating and upgrading: https://www.docker.com/increase-rate-limit (manager.go:251:1s)\x1b[0;m\n")],
    err('failed to pull image "postgres:16" with specified policies [always]: Error response from daemon: toomanyrequests: You have reached your pull rate limit. You may increase the limit by authenticating and upgrading: https://www.docker.com/increase-rate-limit (manager.go:251:1s)'),
    None, IPF)
# the helper image (registry.gitlab.com) pull failing during preparation: 'Preparation failed' (common/build.go:1362,
# retried PreparationRetries times, :1363 'Will be retried in'), then the final error
gl("docker-helper-image-tls-timeout", I, [("prepare_executor", 'Preparing the "docker" executor',
    f"Using Docker executor with image {IMG} ...\n"
    "Pulling docker image registry.gitlab.com/gitlab-org/gitlab-runner/gitlab-runner-helper:x86_64-v17.5.2 ...\n"
    "\x1b[31;1mERROR: Preparation failed: failed to pull image \"registry.gitlab.com/gitlab-org/gitlab-runner/gitlab-runner-helper:x86_64-v17.5.2\" with specified policies [always]: Error response from daemon: Get \"https://registry.gitlab.com/v2/\": net/http: TLS handshake timeout (manager.go:251:10s)\x1b[0;m\n"
    "Will be retried in 3s ...\n"
    "\x1b[31;1mERROR: Preparation failed: failed to pull image \"registry.gitlab.com/gitlab-org/gitlab-runner/gitlab-runner-helper:x86_64-v17.5.2\" with specified policies [always]: Error response from daemon: Get \"https://registry.gitlab.com/v2/\": net/http: TLS handshake timeout (manager.go:251:10s)\x1b[0;m\n"
    "Will be retried in 3s ...\n")],
    err('failed to pull image "registry.gitlab.com/gitlab-org/gitlab-runner/gitlab-runner-helper:x86_64-v17.5.2" with specified policies [always]: Error response from daemon: Get "https://registry.gitlab.com/v2/": net/http: TLS handshake timeout (manager.go:251:10s)'),
    None, EDF)
# ---- image pulls: the Kubernetes executor (watchers/pod.go:206-210 ErrImagePull with kubelet's message)
gl("k8s-errimagepull-503", I, [prep_k8s("registry.example.com/acme/py-ci:3.12"), env_k8s(
    "Waiting for pod ci-jobs/runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q to be running, status is Pending\n"
    "\tContainersNotReady: \"containers with unready status: [build helper]\"\n", phase="Pending")],
    syserr('prepare environment: waiting for pod running: pod "ci-jobs/runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q" failed: image pull failed: rpc error: code = Unknown desc = failed to pull and unpack image "registry.example.com/acme/py-ci:3.12": failed to resolve reference "registry.example.com/acme/py-ci:3.12": unexpected status from HEAD request to https://registry.example.com/v2/acme/py-ci/manifests/3.12: 503 Service Unavailable. Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information'),
    None, IPF, version="18.4.0")
gl("k8s-errimagepull-io-timeout", I, [prep_k8s("docker.io/library/golang:1.23"), env_k8s(phase="Pending")],
    err('prepare environment: waiting for pod running: pod "ci-jobs/runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q" failed: image pull failed: rpc error: code = DeadlineExceeded desc = failed to pull and unpack image "docker.io/library/golang:1.23": failed to resolve reference "docker.io/library/golang:1.23": failed to do request: Head "https://registry-1.docker.io/v2/library/golang/manifests/1.23": dial tcp 54.236.113.205:443: i/o timeout. Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information'),
    None, EDF, version="19.0.0")
# ---- Kubernetes pods lost, never started, deleted, disrupted
# util.go:330 'timed out waiting for pod to start (last phase: %s)' (HEAD); v16.11.0 util.go:244 without the phase
gl("k8s-pod-start-timeout-head", I, [prep_k8s(), env_k8s(
    "Waiting for pod ci-jobs/runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q to be running on the node <unknown>, status is Pending\n"
    "\tUnschedulable: \"0/12 nodes are available: 12 node(s) had untolerated taint {node.kubernetes.io/not-ready: }. preemption: 0/12 nodes are available\"\n", phase="Pending")],
    syserr("prepare environment: waiting for pod running: timed out waiting for pod to start (last phase: Pending). Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information"),
    None, RSF, version="19.3.0")
gl("k8s-pod-start-timeout-v16", I, [prep_k8s(), env_k8s(phase="Pending")],
    syserr("prepare environment: waiting for pod running: timed out waiting for pod to start. Check https://docs.gitlab.com/runner/shells/index.html#shell-profile-loading for more information"),
    None, RSF, version="16.11.1")
# kubernetes.go:226 podPhaseError 'pod %q status is %q' (checkPodStatus, :3396): the pod left Running under the job
gl("k8s-pod-phase-failed", I, K8S_OK + [
    script("go test ./...", "ok  \tgithub.com/acme/api/internal/auth\t0.412s\n=== RUN   TestLedgerReplay")],
    syserr('pod "runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q" status is "Failed"'), None, RSF)
# pods "X" not found (client-go StatusError: the pod was deleted under the job; kubernetes.go:3385 IsKubernetesPodNotFoundError)
gl("k8s-pod-not-found", I, K8S_OK + [
    script("./ci/integration.sh", "starting integration suite (shard 3/6)\n[shard 3] 118/410 passed")],
    syserr('pods "runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q" not found'), None, RSF)
# watchers/pod.go:176 DisruptionTarget: preemption by the scheduler, node drain (EvictionByEvictionAPI), taint manager
gl("k8s-disrupted-preempted", I, K8S_OK + [
    script("bundle exec rspec", "Randomized with seed 40412\n.......................*.........")],
    syserr('pod "ci-jobs/runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q" is disrupted: reason "PreemptionByScheduler", message "ci-critical/deploy-9b8c7: preempting to accommodate a higher priority pod"'),
    None, RSF, version="17.8.0")
gl("k8s-disrupted-drain", I, K8S_OK + [
    script("yarn test --ci", "PASS src/cart/cart.test.ts\nRUNS src/checkout/checkout.test.ts")],
    syserr('pod "ci-jobs/runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q" is disrupted: reason "EvictionByEvictionAPI", message "Eviction API: evicting"'),
    None, RSF, version="17.8.0")
gl("k8s-disrupted-taint", I, K8S_OK + [
    script("make check", "PASS: test_codec\nPASS: test_frame")],
    syserr('pod "ci-jobs/runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q" is disrupted: reason "DeletionByTaintManager", message "Taint manager: deleting due to NoExecute taint"'),
    None, RSF, version="18.1.0")
# watchers/pod.go:180 'pod %q is being deleted', :141 'pod %q is deleted'
gl("k8s-pod-being-deleted", I, K8S_OK + [
    script("terraform plan -out plan.tfplan", "Acquiring state lock. This may take a few moments...\nRefreshing state...")],
    syserr('pod "ci-jobs/runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q" is being deleted'), None, RSF, version="17.10.0")
gl("k8s-pod-is-deleted", I, K8S_OK + [
    script("npm run e2e", "> e2e\n> playwright test\n\nRunning 212 tests using 4 workers\n  [chromium] > login.spec.ts:14:3 > logs in")],
    syserr('pod "ci-jobs/runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q" is deleted'), None, RSF, version="17.10.0")
# util.go:383 'timed out waiting for pod to become attachable' (kubernetes.go:1192 'pod failed to become attachable')
gl("k8s-not-attachable", I, [prep_k8s(), env_k8s()],
    syserr("prepare environment: pod failed to become attachable timed out waiting for pod to become attachable. Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information"),
    None, RSF, version="17.11.0")
# exec.go:104 the pod left Running before the runner attached
gl("k8s-exec-not-running", I, K8S_OK[:2],
    syserr('pod "runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q" (on namespace "ci-jobs") is not running and cannot execute commands; current phase is "Failed"'),
    None, RSF)
# the attach through the API server to the kubelet failing (client-go remotecommand; kubelet port 10250)
gl("k8s-attach-dial-kubelet", I, K8S_OK + [script("make test", "")],
    syserr("error dialing backend: dial tcp 10.20.3.17:10250: i/o timeout"), None, RSF)
gl("k8s-attach-container-not-found", I, K8S_OK + [script("./build.sh", "")],
    syserr('unable to upgrade connection: container not found ("build")'), None, RSF)
# the API server itself (retried requests exhausted: kubernetes.go:160-166 retryNetworkErrorsGroup)
gl("k8s-api-etcd-timeout", I, [prep_k8s()],
    syserr("prepare environment: setting up build pod: etcdserver: request timed out. Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information"),
    None, RSF)
# ---- docker daemon (executors/docker): Preparation failed lines, then the system failure
gl("docker-daemon-socket-down", I, [("prepare_executor", 'Preparing the "docker" executor',
    "\x1b[31;1mERROR: Preparation failed: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running? (docker.go:958:0s)\x1b[0;m\n"
    "Will be retried in 3s ...\n"
    "\x1b[31;1mERROR: Preparation failed: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running? (docker.go:958:0s)\x1b[0;m\n"
    "Will be retried in 3s ...\n")],
    syserr("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running? (docker.go:958:0s)"), None, RSF)
gl("docker-daemon-name-conflict", I, DOCKER_OK[:2],
    syserr('Error response from daemon: Conflict. The container name "/runner-t2qx7lm-project-4411-concurrent-0-cache-3c3f060a0374fc8bc39395164f415a70" is already in use by container "8d1f0c2b7a93". You have to remove (or rename) that container to be able to reuse that name. (docker.go:1165:0s)'),
    None, RSF)
gl("docker-daemon-disk-full", I, DOCKER_OK[:1],
    syserr('Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error mounting "/var/lib/docker/volumes/runner-t2qx7lm-project-4411-concurrent-0-cache/_data": write /var/lib/docker/overlay2/7e1c/merged/.wh..wh..opq: no space left on device: unknown (docker.go:1102:1s)'),
    None, RSF)
gl("docker-daemon-eof", I, DOCKER_OK + [script("make test", "running 412 tests")],
    syserr("error during connect: Post \"http://%2Fvar%2Frun%2Fdocker.sock/v1.45/containers/0b1e/wait?condition=not-running\": EOF (docker.go:812:0s)"),
    None, RSF)
# ---- the runner process stopped under the job: common/build.go:1284 'aborted: %v' with runner_interrupted
# (HEAD: not a system failure); before runner_interrupted (v16.11.0) it was '(system failure): aborted: terminated'
gl("runner-aborted-head", I, DOCKER_OK + [script("make -j4", "  CC  lib/hash.o\n  CC  lib/map.o")],
    err("aborted: terminated"), None, "runner_interrupted", version="19.3.0")
gl("runner-aborted-v16", I, DOCKER_OK + [script("./gradlew check", "> Task :core:test")],
    syserr("aborted: terminated"), None, RSF, version="16.11.1")
gl("runner-aborted-interrupt-v16", I, DOCKER_OK + [script("pytest", "collected 812 items")],
    syserr("aborted: interrupt"), None, RSF, version="16.11.1")
# ---- fleeting / autoscaler: executors/internal/autoscaler/executor.go:74 and :77
gl("autoscaler-acquire-timeout", I, [("prepare_executor", 'Preparing the "docker-autoscaler" executor', "")],
    syserr("unable to acquire instance within the configured timeout of 15m0s: context deadline exceeded"), None, RSF)
gl("autoscaler-acquire-failed", I, [("prepare_executor", 'Preparing the "instance" executor',
    "\x1b[31;1mERROR: Preparation failed: unable to acquire instance: no capacity\x1b[0;m\nWill be retried in 3s ...\n")],
    syserr("unable to acquire instance: no capacity"), None, RSF)
# docker+machine: the machine could not be created (docker-machine's driver errors, through Preparation failed)
gl("docker-machine-create-failed", I, [("prepare_executor", 'Preparing the "docker+machine" executor',
    "\x1b[31;1mERROR: Preparation failed: exit status 1\x1b[0;m\nWill be retried in 3s ...\n"
    "\x1b[31;1mERROR: Preparation failed: exit status 1\x1b[0;m\nWill be retried in 3s ...\n")],
    syserr("exit status 1"), None, RSF)
# ---- artifacts: network/gitlab.go:1163 determineUploadState; :1182 503 -> artifacts_uploader.go:34 'service unavailable'
# (retryable, commands/helpers/retry_helper.go:77 'Retrying...'), FATAL from logrus.Fatalln (artifacts_uploader.go:227)
UP = ("upload_artifacts_on_success", "Uploading artifacts for successful job", "Uploading artifacts...\ndist/: found 412 matching artifact files and directories \n")
gl("artifacts-upload-503", I, DOCKER_OK + [script("npm run build", "webpack compiled successfully in 41213 ms"), (
    UP[0], UP[1], UP[2] +
    "\x1b[31;1mERROR: Uploading artifacts as \"archive\" to coordinator... 503 Service Unavailable\x1b[0;m  id=88213 responseStatus=503 Service Unavailable status=503 token=glcbt-64\n"
    "\x1b[0;33mWARNING: Retrying...                               \x1b[0;m  context=artifacts-uploader error=service unavailable\n"
    "\x1b[31;1mERROR: Uploading artifacts as \"archive\" to coordinator... 503 Service Unavailable\x1b[0;m  id=88213 responseStatus=503 Service Unavailable status=503 token=glcbt-64\n"
    "\x1b[31;1mFATAL: service unavailable                        \x1b[0;m\n"), cleanup()],
    err("exit code 1"), 1, SF)
# any other status: network/gitlab.go:1185 default -> UploadFailed -> retryableError 'upload failed with no response'
gl("artifacts-upload-502", I, DOCKER_OK + [script("make dist", "tar czf dist/app.tgz build/"), (
    UP[0], UP[1], UP[2] +
    "\x1b[0;33mWARNING: Uploading artifacts as \"archive\" to coordinator... 502 Bad Gateway\x1b[0;m  id=88213 responseStatus=502 Bad Gateway status=502 token=glcbt-64\n"
    "\x1b[0;33mWARNING: Retrying...                               \x1b[0;m  context=artifacts-uploader error=invalid argument\n"
    "\x1b[0;33mWARNING: Uploading artifacts as \"archive\" to coordinator... 502 Bad Gateway\x1b[0;m  id=88213 responseStatus=502 Bad Gateway status=502 token=glcbt-64\n"
    "\x1b[31;1mFATAL: invalid argument                           \x1b[0;m\n"), cleanup()],
    err("exit code 1"), 1, SF)
# network/gitlab.go:1120 transport error (logged with 'error'), then 'upload failed with no response from coordinator'
gl("artifacts-upload-conn-reset", I, DOCKER_OK + [script("make dist", "done"), (
    UP[0], UP[1], UP[2] +
    "\x1b[31;1mERROR: Uploading artifacts as \"archive\" to coordinator... error\x1b[0;m  error=couldn't execute POST against https://gitlab.example.com/api/v4/jobs/88213/artifacts?artifact_format=zip&artifact_type=archive: Post \"https://gitlab.example.com/api/v4/jobs/88213/artifacts?artifact_format=zip&artifact_type=archive\": write tcp 10.1.4.7:40122->10.0.0.15:443: write: connection reset by peer id=88213 token=glcbt-64\n"
    "\x1b[0;33mWARNING: Retrying...                               \x1b[0;m  context=artifacts-uploader error=couldn't execute POST against https://gitlab.example.com/api/v4/jobs/88213/artifacts: write: connection reset by peer\n"
    "\x1b[31;1mFATAL: couldn't execute POST against https://gitlab.example.com/api/v4/jobs/88213/artifacts?artifact_format=zip&artifact_type=archive: Post \"https://gitlab.example.com/api/v4/jobs/88213/artifacts?artifact_format=zip&artifact_type=archive\": write tcp 10.1.4.7:40122->10.0.0.15:443: write: connection reset by peer\x1b[0;m\n"), cleanup()],
    err("exit code 1"), 1, SF)
# artifacts download: network/gitlab.go:1440 'failed' with the status, retried (artifacts_downloader.go:82), then FATAL
gl("artifacts-download-502", I, DOCKER_OK + [(
    "download_artifacts", "Downloading artifacts",
    "Downloading artifacts for build:linux (88201)...\n"
    "\x1b[0;33mWARNING: Downloading artifacts from coordinator... failed\x1b[0;m  id=88201 status=502 Bad Gateway token=glcbt-64\n"
    "\x1b[0;33mWARNING: Retrying...                               \x1b[0;m  context=artifacts-downloader error=invalid argument\n"
    "\x1b[0;33mWARNING: Downloading artifacts from coordinator... failed\x1b[0;m  id=88201 status=502 Bad Gateway token=glcbt-64\n"
    "\x1b[31;1mFATAL: invalid argument                           \x1b[0;m\n"), cleanup()],
    err("exit code 1"), 1, SF)
# ---- git in get_sources (GET_SOURCES_ATTEMPTS; helpers/retry/retry.go:178 'Retrying...')
gl("git-fetch-rpc-502", I, DOCKER_OK[:2] + [src(
    "error: RPC failed; HTTP 502 curl 22 The requested URL returned error: 502\nfatal: expected flush after ref listing\n"), cleanup()],
    err("exit code 1"), 1, SF)
gl("git-fetch-http2-cancel", I, DOCKER_OK[:2] + [src(
    "error: RPC failed; curl 92 HTTP/2 stream 5 was not closed cleanly: CANCEL (err 8)\nerror: 2283 bytes of body are still expected\n"
    "fetch-pack: unexpected disconnect while reading sideband packet\nfatal: early EOF\nfatal: fetch-pack: invalid index-pack output\n"), cleanup()],
    err("exit code 128"), 128, SF)
gl("git-fetch-gitaly-unavailable", I, DOCKER_OK[:2] + [src(
    "remote: GitLab is currently unable to handle this request due to load.\nfatal: unable to access 'https://gitlab.example.com/acme/app.git/': The requested URL returned error: 503\n"), cleanup()],
    err("exit code 1"), 1, SF)
gl("git-clone-resolve-k8s", I, [prep_k8s(), env_k8s(), (
    "get_sources", "Getting source from Git repository",
    "Fetching changes with git depth set to 20...\nInitialized empty Git repository in /builds/acme/app/.git/\nCreated fresh repository.\n"
    "fatal: unable to access 'https://gitlab.example.com/acme/app.git/': Could not resolve host: gitlab.example.com\n"), cleanup()],
    err("command terminated with exit code 1"), 1, SF)
# ---- cache upload 5xx in a job that otherwise passed: archive_cache fails only with CACHE_... no: the runner only
# WARNs 'Failed to create cache' (shells/abstract.go:1655); see the traps.

# =====================================================================================================
# Deterministic: leave alone
# =====================================================================================================
# ---- script failures (common/build.go:1467; kubernetes.go:1020; shell executor 'exit status N'; custom executor)
gl("script-exit-1-pytest", B, DOCKER_OK + [script("pytest -q", "F.......\n=========================== short test summary info ============================\nFAILED tests/test_tax.py::test_vat_rounding - AssertionError: assert 19.99 == 20.0\n1 failed, 211 passed in 14.02s"), cleanup()],
    err("exit code 1"), 1, SF)
gl("script-exit-2-make", B, K8S_OK + [script("make", "src/parser.c:412:17: error: 'tok' undeclared (first use in this function)\nmake: *** [Makefile:31: src/parser.o] Error 1"), cleanup()],
    err("command terminated with exit code 2"), 2, SF)
gl("shell-exit-status-1", B, [("prepare_executor", 'Preparing the "shell" executor', "Using Shell (bash) executor..."),
    ("prepare_script", "Preparing environment", "Running on build-host-2..."), src(),
    script("go vet ./...", "# github.com/acme/api/internal/ledger\ninternal/ledger/replay.go:88:2: unreachable code"), cleanup()],
    err("exit status 1"), 1, SF)
# executors/custom/command/command.go:145 'exit status %s' (BUILD_FAILURE_EXIT_CODE with the build's code)
gl("custom-build-failure", B, [("prepare_executor", 'Preparing the "custom" executor', "Using Custom executor with driver libvirt 1.4.0..."),
    ("prepare_script", "Preparing environment", "Running on vm-4411-0..."), src(),
    script("cargo test", "test ledger::tests::replay ... FAILED\n\nfailures:\n\n---- ledger::tests::replay stdout ----\nthread 'ledger::tests::replay' panicked at src/ledger.rs:88:9:\nassertion `left == right` failed\n\ntest result: FAILED. 41 passed; 1 failed"), cleanup()],
    err("exit status 101"), 101, SF)
# the shell profile (common/build.go:911 'prepare environment: %w. Check ...#shell-profile-loading')
gl("prepare-env-shell-profile", C, [("prepare_executor", 'Preparing the "shell" executor', "Using Shell (bash) executor..."),
    ("prepare_script", "Preparing environment", "bash: /home/gitlab-runner/.bash_logout: line 7: clear_console: command not found")],
    syserr("prepare environment: exit status 1. Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information"), None, RSF)
# ---- artifacts: 413 (network/gitlab.go:1179 -> artifacts_uploader.go:35 'too large', not retried)
gl("artifacts-upload-413", C, DOCKER_OK + [script("make dist", "tar czf dist/app.tgz build/"), (
    UP[0], UP[1], UP[2] +
    "\x1b[31;1mERROR: Uploading artifacts as \"archive\" to coordinator... 413 Request Entity Too Large\x1b[0;m  id=88213 responseStatus=413 Request Entity Too Large status=413 token=glcbt-64\n"
    "\x1b[31;1mFATAL: too large                                   \x1b[0;m\n"), cleanup()],
    err("exit code 1"), 1, SF)
# 403 on upload (network/gitlab.go:1176 -> os.ErrPermission 'permission denied'): the job's token no longer valid
gl("artifacts-upload-403", C, DOCKER_OK + [script("make dist", "done"), (
    UP[0], UP[1], UP[2] +
    "\x1b[31;1mERROR: Uploading artifacts as \"archive\" to coordinator... 403 Forbidden\x1b[0;m  id=88213 responseStatus=403 Forbidden status=403 token=glcbt-64\n"
    "\x1b[31;1mFATAL: permission denied                           \x1b[0;m\n"), cleanup()],
    err("exit code 1"), 1, SF)
# download: network/gitlab.go:1273 'not found' (expired or erased artifacts), :1267 'forbidden'
gl("artifacts-download-not-found", C, DOCKER_OK + [(
    "download_artifacts", "Downloading artifacts",
    "Downloading artifacts for build:linux (80001)...\n"
    "\x1b[31;1mERROR: Downloading artifacts from coordinator... not found\x1b[0;m  id=80001 responseStatus=404 Not Found status=404 Not Found token=glcbt-64\n"
    "\x1b[31;1mFATAL: file does not exist                         \x1b[0;m\n"), cleanup()],
    err("exit code 1"), 1, SF)
gl("artifacts-download-forbidden", C, DOCKER_OK + [(
    "download_artifacts", "Downloading artifacts",
    "Downloading artifacts for build:windows (80002)...\n"
    "\x1b[31;1mERROR: Downloading artifacts from coordinator... forbidden\x1b[0;m  id=80002 responseStatus=403 Forbidden status=403 Forbidden token=glcbt-64\n"
    "\x1b[31;1mFATAL: permission denied                           \x1b[0;m\n"), cleanup()],
    err("exit code 1"), 1, SF)
# ---- images that do not exist or are refused (ClassifyImagePullFailure -> runner_configuration_error)
gl("docker-pull-manifest-unknown", C, [prep_docker("ruby:3.4-alpine9",
    "\x1b[0;33mWARNING: Failed to pull image with policy \"always\": Error response from daemon: manifest for ruby:3.4-alpine9 not found: manifest unknown: manifest unknown (manager.go:251:1s)\x1b[0;m\n")],
    err('failed to pull image "ruby:3.4-alpine9" with specified policies [always]: Error response from daemon: manifest for ruby:3.4-alpine9 not found: manifest unknown: manifest unknown (manager.go:251:1s)'),
    None, CFG)
gl("docker-pull-access-denied", C, [prep_docker("registry.example.com/acme/private-builder:2",
    "\x1b[0;33mWARNING: Failed to pull image with policy \"always\": Error response from daemon: pull access denied for registry.example.com/acme/private-builder, repository does not exist or may require 'docker login': denied: requested access to the resource is denied (manager.go:251:0s)\x1b[0;m\n")],
    err('failed to pull image "registry.example.com/acme/private-builder:2" with specified policies [always]: Error response from daemon: pull access denied for registry.example.com/acme/private-builder, repository does not exist or may require \'docker login\': denied: requested access to the resource is denied (manager.go:251:0s)'),
    None, CFG)
gl("docker-pull-unauthorized-v15", C, [prep_docker("registry.example.com/acme/builder:1.9",
    "\x1b[0;33mWARNING: Failed to pull image with policy \"always\": Error response from daemon: Head \"https://registry.example.com/v2/acme/builder/manifests/1.9\": unauthorized: HTTP Basic: Access denied (manager.go:237:0s)\x1b[0;m\n")],
    syserr('failed to pull image "registry.example.com/acme/builder:1.9" with specified policies [always]: Error response from daemon: Head "https://registry.example.com/v2/acme/builder/manifests/1.9": unauthorized: HTTP Basic: Access denied (manager.go:237:0s)'),
    None, RSF, version="15.11.1")
# docker's reference parser (distribution/reference): an invalid image: name
gl("docker-invalid-reference", C, [prep_docker("registry.example.com/Acme/Builder:3")],
    err('failed to pull image "registry.example.com/Acme/Builder:3" with specified policies [always]: invalid reference format: repository name (Acme/Builder) must be lowercase (manager.go:251:0s)'),
    None, CFG)
# watchers/pod.go:203 InvalidImageName (ConfigurationError)
gl("k8s-invalid-image-name", C, [prep_k8s("registry.example.com:5000/acme/ci-image:"), env_k8s(phase="Pending")],
    err('prepare environment: waiting for pod running: pod "ci-jobs/runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q" failed: image pull failed: Failed to apply default image tag "registry.example.com:5000/acme/ci-image:": couldn\'t parse image reference "registry.example.com:5000/acme/ci-image:": invalid reference format. Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information'),
    None, CFG, version="18.4.0")
# ErrImagePull with 'not found' (a tag that does not exist)
gl("k8s-errimagepull-not-found", C, [prep_k8s("docker.io/library/pyhton:3.12"), env_k8s(phase="Pending")],
    err('prepare environment: waiting for pod running: pod "ci-jobs/runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q" failed: image pull failed: rpc error: code = NotFound desc = failed to pull and unpack image "docker.io/library/pyhton:3.12": failed to resolve reference "docker.io/library/pyhton:3.12": docker.io/library/pyhton:3.12: not found. Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information'),
    None, CFG, version="18.4.0")
# ErrImagePull with the registry's 401/403 (private image without imagePullSecrets)
gl("k8s-errimagepull-forbidden", C, [prep_k8s("registry.example.com/acme/private-ci:1"), env_k8s(phase="Pending")],
    err('prepare environment: waiting for pod running: pod "ci-jobs/runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q" failed: image pull failed: rpc error: code = Unknown desc = failed to pull and unpack image "registry.example.com/acme/private-ci:1": failed to resolve reference "registry.example.com/acme/private-ci:1": pull access denied, repository does not exist or may require authorization: server message: insufficient_scope: authorization failed. Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information'),
    None, CFG, version="18.4.0")
# watchers/pod.go:215 CrashLoopBackOff with the last termination's message (exec format error: a wrong-arch image)
gl("k8s-crashloop-exec-format", C, [prep_k8s("registry.example.com/acme/arm-tools:1"), env_k8s(phase="Pending")],
    err('prepare environment: waiting for pod running: pod "ci-jobs/runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q" failed: container "build" is in CrashLoopBackOff: back-off 40s restarting failed container=build pod=runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q_ci-jobs(3c1d): exec /usr/bin/dumb-init: exec format error. Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information'),
    None, CFG, version="19.1.0")
# watchers/pod.go:220 CreateContainerConfigError (a secret key that does not exist)
gl("k8s-create-container-config", C, [prep_k8s(), env_k8s(phase="Pending")],
    err('prepare environment: waiting for pod running: pod "ci-jobs/runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q" failed: container configuration error: couldn\'t find key AWS_SECRET in Secret ci-jobs/deploy-creds. Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information'),
    None, CFG, version="19.1.0")
# executors/docker/docker.go:454 'invalid service image name' (ConfigurationError)
gl("docker-invalid-service-name", C, [prep_docker_ok()],
    err("invalid service image name: postgres:16 --name db"), None, CFG)
# executors/docker/internal/pull/manager.go:140 'invalid pull policy for image' (ConfigurationError)
gl("docker-pull-policy-not-allowed", C, [("prepare_executor", 'Preparing the "docker" executor', f"Using Docker executor with image {IMG} ...")],
    err(f'invalid pull policy for image "{IMG}": pull_policy ([Always]) defined in GitLab pipeline config is not one of the allowed_pull_policies ([IfNotPresent])'),
    None, CFG, version="17.5.2")
# ---- timeouts and cancels
# common/build.go:1233 'execution took longer than %v seconds' (JobExecutionTimeout)
gl("timeout-execution-longer", T, DOCKER_OK + [script("./ci/e2e.sh", "[e2e] 311/900 scenarios done")],
    err("execution took longer than 1h0m0s seconds"), None, "job_execution_timeout")
gl("timeout-execution-longer-k8s", T, K8S_OK + [script("make -j8 check", "PASS: t/0001-basic.sh\nPASS: t/0002-merge.sh")],
    err("execution took longer than 3h0m0s seconds"), None, "job_execution_timeout", version="18.6.0")
# the same with a 137 from the killed script after it (the timeout's kill, not OOM)
gl("timeout-after-137", T, K8S_OK + [script("cargo test --release", "test storage::compaction ... ")],
    err("execution took longer than 2h0m0s seconds"), 137, "job_execution_timeout")
# common/build.go:135 ErrJobCanceled 'canceled' (JobCanceled, runner-internal; GitLab's status is canceled)
gl("canceled-head", X, DOCKER_OK + [script("./deploy.sh staging", "Uploading release bundle 41%")],
    err("canceled"), None, "job_canceled")
gl("canceled-with-143", X, DOCKER_OK + [script("./gradlew build", "> Task :app:compileJava")],
    err("canceled"), 143, "job_canceled")
# ---- the job's log limit (helpers/trace/buffer.go:191): the log stopped, the failure's cause is not in it
gl("log-limit-exceeded", U, DOCKER_OK + [script("make V=1", "gcc -O2 -Wall -c src/a.c -o src/a.o\n\n\x1b[33;1mJob's log exceeded limit of 4194304 bytes.\nJob execution will continue but no more output will be collected.\x1b[0;m")],
    err("exit code 2"), 2, SF)

# =====================================================================================================
# TRAPS: the runner's warnings in jobs that fail for another reason (they must not decide)
# =====================================================================================================
# cache not found (cache_extractor.go:648; shells/abstract.go:375), then a failing test
gl("trap-cache-miss-test-fail", B, [prep_docker_ok(), env_docker(), src(), cache_miss(),
    script("npm test", "FAIL src/api/orders.test.ts\n  x rejects an empty cart (12 ms)\nTests:       1 failed, 88 passed, 89 total"), cleanup()],
    err("exit code 1"), 1, SF)
gl("trap-cache-miss-k8s-compile", B, [prep_k8s(), env_k8s(), src(), cache_miss(),
    script("go build ./...", "# github.com/acme/api/cmd/server\ncmd/server/main.go:44:9: undefined: config.LoadFromEnv"), cleanup()],
    err("command terminated with exit code 1"), 1, SF)
# cache download failing on a 503 (the runner warns and goes on: shells/abstract.go:375) then a lint failure
gl("trap-cache-503-then-lint", B, [prep_docker_ok(), env_docker(), src(), (
    "restore_cache", "Restoring cache",
    "Checking cache for lint-protected...\n"
    "\x1b[0;33mWARNING: Retrying...                               \x1b[0;m  error=received: 503 Service Unavailable\n"
    "\x1b[0;33mWARNING: received: 503 Service Unavailable         \x1b[0;m\n"
    "\x1b[0;33mWARNING: Failed to extract cache\x1b[0;m\n"),
    script("ruff check .", "src/app/views.py:41:5: F841 Local variable `resp` is assigned to but never used\nFound 1 error."), cleanup()],
    err("exit code 1"), 1, SF)
# services' health check (executors/docker/services.go:296-303): a WARNING, the job goes on; then its own failure
SVC = ("*** WARNING: Service registry.example.com/acme/postgres-test:16 probably didn't start properly.\n\n"
       "Health check error:\nservice \"runner-t2qx7lm-project-4411-concurrent-0-1f2e3d-registry.example.com__acme__postgres-test-0-wait-for-service\" timeout\n\n"
       "Health check container logs:\n2024-11-24T10:00:41.1Z FATAL: No HOST or PORT found\n\n"
       "Service container logs:\n2024-11-24T10:00:12.1Z LOG:  database system is ready to accept connections\n\n*********\n")
gl("trap-service-healthcheck-test-fail", B, [prep_docker(IMG, f"Using docker image sha256:5e8b for {IMG} ...\nStarting service registry.example.com/acme/postgres-test:16 ...\nWaiting for services to be up and running (timeout 30 seconds)...\n" + SVC),
    env_docker(), src(),
    script("bundle exec rspec", "Failures:\n\n  1) Invoice#total rounds half up\n     Failure/Error: expect(invoice.total).to eq(10.05)\n\n       expected: 10.05\n            got: 10.04\n\n41 examples, 1 failure"), cleanup()],
    err("exit code 1"), 1, SF)
gl("trap-service-healthcheck-compile", B, [prep_docker(IMG, "Starting service redis:7 ...\nWaiting for services to be up and running (timeout 30 seconds)...\n"
    + SVC.replace("registry.example.com/acme/postgres-test:16", "redis:7").replace("registry.example.com__acme__postgres-test", "redis")),
    env_docker(), src(),
    script("mvn -B verify", "[ERROR] COMPILATION ERROR : \n[ERROR] /builds/acme/app/src/main/java/acme/Cache.java:[41,17] cannot find symbol\n[ERROR]   symbol:   method evict(java.lang.String)\n[INFO] BUILD FAILURE"), cleanup()],
    err("exit code 1"), 1, SF)
# pull policy fallback (manager.go:151, :157, :292): 'always' failed on a network error, 'if-not-present' found the
# local image, then the script failed
gl("trap-pull-fallback-then-test", B, [prep_docker("node:20-alpine",
    "\x1b[0;33mWARNING: Failed to pull image with policy \"always\": Error response from daemon: Get \"https://registry-1.docker.io/v2/\": dial tcp: lookup registry-1.docker.io on 10.0.0.2:53: no such host (manager.go:251:0s)\x1b[0;m\n"
    "Attempt #2: Trying \"if-not-present\" pull policy\nUsing locally found image version due to \"if-not-present\" pull policy\n"
    "Using docker image sha256:1a2b3c for node:20-alpine with digest node@sha256:9f8e7d ...\n"),
    env_docker(), src(),
    script("npx vitest run", " FAIL  src/money.test.ts > formats negative amounts\nAssertionError: expected '-1,00 EUR' to be '-1.00 EUR'\n Test Files  1 failed | 31 passed (32)"), cleanup()],
    err("exit code 1"), 1, SF)
gl("trap-pull-fallback-503-then-compile", B, [prep_docker("registry.example.com/acme/gcc:13",
    "\x1b[0;33mWARNING: Failed to pull image with policy \"always\": Error response from daemon: received unexpected HTTP status: 503 Service Unavailable (manager.go:251:0s)\x1b[0;m\n"
    "Attempt #2: Trying \"if-not-present\" pull policy\nUsing locally found image version due to \"if-not-present\" pull policy\n"),
    env_docker(), src(),
    script("make", "src/io.c:88:5: error: implicit declaration of function 'readn' [-Wimplicit-function-declaration]\nmake: *** [Makefile:20: src/io.o] Error 1"), cleanup()],
    err("exit code 2"), 2, SF)
# 'Uploading artifacts for failed job' with its own warnings (no matching files: file_archiver.go:182; 'No files
# to upload': artifacts_uploader.go:144) after a test failure
gl("trap-upload-on-failure-no-files", B, DOCKER_OK + [
    script("pytest --junitxml=report.xml", "E   KeyError: 'currency'\n=========================== short test summary info ============================\nFAILED tests/test_fx.py::test_convert - KeyError: 'currency'\n1 failed, 90 passed in 8.12s"),
    upload_fail("Uploading artifacts...\n\x1b[0;33mWARNING: coverage/: no matching files. Ensure that the artifact path is relative to the working directory (/builds/acme/app)\x1b[0;m \n"
                "\x1b[31;1mERROR: No files to upload                         \x1b[0;m \n"), cleanup()],
    err("exit code 1"), 1, SF)
# the failed-job upload itself hitting a 502 after a compile error (the job had already failed)
gl("trap-upload-on-failure-502", B, DOCKER_OK + [
    script("cargo build", "error[E0308]: mismatched types\n  --> src/main.rs:14:20\nerror: could not compile `ledger` (bin \"ledger\") due to 1 previous error"),
    upload_fail("Uploading artifacts...\ntarget/debug/build: found 212 matching artifact files and directories \n"
                "\x1b[0;33mWARNING: Uploading artifacts as \"archive\" to coordinator... 502 Bad Gateway\x1b[0;m  id=88214 responseStatus=502 Bad Gateway status=502 token=glcbt-64\n"
                "\x1b[31;1mFATAL: invalid argument                           \x1b[0;m\n"), cleanup()],
    err("exit code 101"), 101, SF)
# after_script failing (common/build.go:1007: a WARNING, the job's result is the script's) after a test failure
gl("trap-after-script-warning", B, DOCKER_OK + [
    script("go test ./...", "--- FAIL: TestRefund (0.00s)\n    refund_test.go:31: got 4, want 5\nFAIL\nFAIL\tgithub.com/acme/pay\t0.214s"),
    ("after_script", "Running after_script", "Running after script...\n\x1b[32;1m$ curl -sf -X POST https://hooks.example.com/ci -d @status.json\x1b[0;m\ncurl: (6) Could not resolve host: hooks.example.com\n"
     "\x1b[0;33mWARNING: after_script failed, but job will continue unaffected: exit code 6\x1b[0;m\n"), cleanup()],
    err("exit code 1"), 1, SF)
# the Kubernetes executor's 'Error cleaning up pod' (kubernetes.go:1604) after a script failure
gl("trap-k8s-cleanup-error-after-test", B, K8S_OK + [
    script("npm test", "Tests:       2 failed, 140 passed, 142 total"),
    cleanup()], err("command terminated with exit code 1") +
    '\x1b[31;1mERROR: Error cleaning up pod: pods "runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q" not found\x1b[0;m\n', 1, SF)
# 'Cleaning up project directory' + 'Failed to create cache' (shells/abstract.go:1655, archive_cache_on_failure) after a lint failure
gl("trap-cache-archive-failed-after-lint", B, DOCKER_OK + [
    script("npx eslint .", "/builds/acme/web/src/app.ts\n  12:7  error  'unused' is assigned a value but never used  no-unused-vars\n\n1 problem (1 error, 0 warnings)"),
    ("archive_cache_on_failure", "Saving cache for failed job",
     "Creating cache web-node-modules-non_protected...\nnode_modules/: found 41203 matching artifact files and directories \n"
     "\x1b[0;33mWARNING: Retrying...                               \x1b[0;m  error=received: 503 Service Unavailable\n"
     "\x1b[0;33mWARNING: Failed to create cache\x1b[0;m\n"), cleanup()],
    err("exit code 1"), 1, SF)
# the log limit reached during a compile, with the compile error before it
gl("trap-log-limit-after-compile-error", B, DOCKER_OK + [script("make -k", "src/x.c:3:10: fatal error: zlib.h: No such file or directory\ncompilation terminated.\n"
    "\x1b[33;1mJob's log exceeded limit of 4194304 bytes.\nJob execution will continue but no more output will be collected.\x1b[0;m")],
    err("exit code 2"), 2, SF)
# pod events printed as warnings while waiting (util.go:235-258) for a pod that did start; the script then failed
gl("trap-k8s-pending-events-then-test", B, [prep_k8s(), env_k8s(
    "Waiting for pod ci-jobs/runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q to be running, status is Pending\n"
    "\tContainersNotReady: \"containers with unready status: [build helper]\"\n"
    "\x1b[0;33mWARNING: Event retrieved from the cluster: Failed to pull image \"python:3.12-slim\": rpc error: code = Unknown desc = failed to pull and unpack image: unexpected status from HEAD request: 503 Service Unavailable\x1b[0;m\n"
    "\x1b[0;33mWARNING: Event retrieved from the cluster: Back-off pulling image \"python:3.12-slim\"\x1b[0;m\n"), src(),
    script("python -m pytest", "FAILED tests/test_parse.py::test_dates - ValueError: month must be in 1..12\n1 failed, 58 passed in 2.10s"), cleanup()],
    err("command terminated with exit code 1"), 1, SF)
# 'Job's log exceeded limit' is not a failure: the job that exited 0 is not here. A runner's 'Retrying...'
# on a submodule update that then succeeded, and a later test failure:
gl("trap-submodule-retry-then-test", B, DOCKER_OK[:2] + [src(
    "Checking out 3f2a9c1e as detached HEAD (ref is main)...\nUpdating/initializing submodules recursively with git depth set to 20...\n"
    "fatal: unable to access 'https://gitlab.example.com/acme/proto.git/': The requested URL returned error: 502\n"
    "\x1b[0;33mWARNING: Updating submodules failed. Retrying...\x1b[0;m\nSubmodule 'proto' (https://gitlab.example.com/acme/proto.git) registered for path 'proto'\nUpdated submodules\n"),
    script("make test", "--- FAIL: TestEncode (0.00s)\n    encode_test.go:19: unexpected field order\nFAIL\nmake: *** [Makefile:9: test] Error 1"), cleanup()],
    err("exit code 2"), 2, SF)
# a git ref GitLab no longer has (a deleted pipeline ref: deterministic) in get_sources
gl("git-ref-gone", C, DOCKER_OK[:2] + [src(
    "fatal: couldn't find remote ref refs/pipelines/981123\n"), cleanup()],
    err("exit code 1"), 1, SF)
gl("git-auth-refused", C, DOCKER_OK[:2] + [src(
    "remote: HTTP Basic: Access denied. If a password was provided for Git authentication, the password was incorrect or you're required to use a token instead of a password.\n"
    "fatal: Authentication failed for 'https://gitlab.example.com/acme/app.git/'\n"), cleanup()],
    err("exit code 1"), 1, SF)

# ---- arguable: kubelet's 'Back-off pulling image' without the cause (watchers/pod.go:206: ImagePullBackOff's
# waiting message names no cause; it follows a failed pull of any kind: a missing tag or an outage)
gl("k8s-imagepullbackoff-no-cause", U, [prep_k8s("registry.example.com/acme/py-ci:3.12"), env_k8s(phase="Pending")],
    syserr('prepare environment: waiting for pod running: pod "ci-jobs/runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q" failed: image pull failed: Back-off pulling image "registry.example.com/acme/py-ci:3.12". Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information'),
    None, IPF, version="18.4.0")
#: probes whose label is arguable (left out of the counts by score_redteam.ARGUABLE)
#: Moved here after the first scoring, each against an earlier pass's reading of the same source (kept, not
#: changed): 'couldn't find remote ref refs/pipelines/N' is GitLab's persistent pipeline ref, deleted when a
#: pipeline finishes and re-created when a job of it runs (Ci::PersistentRef), so the seventh pass reads it
#: as a race (git-remote-overloaded, infrastructure), not as a deterministic missing ref; and the Kubernetes
#: attach's 'container not found ("build")' means the build container had already exited (an image without
#: a shell or an ENTRYPOINT that exits: build-container-exited-before-attach, config_error), which the
#: probe's label (a lost container) did not weigh.
ARGUABLE = frozenset({"k8s-imagepullbackoff-no-cause", "git-ref-gone", "k8s-attach-container-not-found"})

# =====================================================================================================
# Second batch (written after the first was scored and fixed, committed before it was scored itself)
# =====================================================================================================
# ---- the Kubernetes API server in the runner's prepare (kubernetes.go:1107 'setting up build pod: %w'):
# a webhook that could not be called (apiserver 'failed calling webhook': the webhook's service down or slow) is
# transient; a webhook that answered 'denied the request' is the pod's configuration (runner-k8s-request-refused)
gl("k8s-webhook-unreachable", I, [prep_k8s()],
    syserr('prepare environment: setting up build pod: Internal error occurred: failed calling webhook "mpod.kyverno.svc-fail": failed to call webhook: Post "https://kyverno-svc.kyverno.svc:443/mutate/fail?timeout=10s": context deadline exceeded. Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information'),
    None, RSF)
gl("k8s-webhook-denied", C, [prep_k8s()],
    syserr('prepare environment: setting up build pod: admission webhook "validate.kyverno.svc-fail" denied the request: resource Pod/ci-jobs/runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q was blocked due to the following policies require-requests-limits: validate-resources: CPU and memory resource requests and limits are required. Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information'),
    None, RSF)
gl("k8s-apiserver-request-timeout", I, [prep_k8s()],
    syserr("prepare environment: setting up build pod: Timeout: request did not complete within requested timeout - context deadline exceeded. Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information"),
    None, RSF, version="17.2.1")
# ---- the docker executor's per-build network (FF_NETWORK_PER_BUILD): the daemon's address pools exhausted by
# networks not yet removed (moby libnetwork ipam); the runner's system failure
gl("docker-network-pool-exhausted", I, DOCKER_OK[:1],
    syserr("failed to create network: Error response from daemon: could not find an available, non-overlapping IPv4 address pool among the defaults to assign to the network"),
    None, RSF)
# ---- pull_policy never with an image the host does not have (manager.go: the 'never' policy's inspect error)
gl("docker-pull-never-missing", C, [prep_docker("acme/local-only:dev")],
    err('failed to pull image "acme/local-only:dev" with specified policies [never]: Error: No such image: acme/local-only:dev (manager.go:251:0s)'),
    None, CFG)
# ---- a job image whose entrypoint does not exist (runc: the image, not the host)
gl("docker-entrypoint-missing", C, DOCKER_OK[:2],
    syserr('Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: "/usr/local/bin/entrypoint.sh": stat /usr/local/bin/entrypoint.sh: no such file or directory: unknown (docker.go:1102:0s)'),
    None, RSF)
# ---- artifacts upload failing on DNS (network/gitlab.go:1120 the transport error, retried, then FATAL)
gl("artifacts-upload-dns", I, DOCKER_OK + [script("make dist", "done"), (
    UP[0], UP[1], UP[2] +
    "\x1b[31;1mERROR: Uploading artifacts as \"archive\" to coordinator... error\x1b[0;m  error=couldn't execute POST against https://gitlab.example.com/api/v4/jobs/88213/artifacts?artifact_format=zip&artifact_type=archive: Post \"https://gitlab.example.com/api/v4/jobs/88213/artifacts?artifact_format=zip&artifact_type=archive\": dial tcp: lookup gitlab.example.com on 10.0.0.2:53: no such host id=88213 token=glcbt-64\n"
    "\x1b[31;1mFATAL: couldn't execute POST against https://gitlab.example.com/api/v4/jobs/88213/artifacts?artifact_format=zip&artifact_type=archive: Post \"https://gitlab.example.com/api/v4/jobs/88213/artifacts?artifact_format=zip&artifact_type=archive\": dial tcp: lookup gitlab.example.com on 10.0.0.2:53: no such host\x1b[0;m\n"), cleanup()],
    err("exit code 1"), 1, SF)
# ---- the get_sources and prepare time limits (common/build.go:918 'get sources timeout: exceeded timeout of %s',
# :1575 'prepare timeout: ...', both reported as job_execution_timeout)
gl("get-sources-timeout", T, DOCKER_OK[:2] + [src("Updating/initializing submodules recursively with git depth set to 20...\n")],
    err("get sources timeout: exceeded timeout of 10m0s"), None, "job_execution_timeout", version="18.5.0")
gl("prepare-timeout", T, [prep_k8s(), env_k8s(phase="Pending")],
    err("prepare timeout: exceeded timeout of 30m0s"), None, "job_execution_timeout", version="18.5.0")
# ---- the custom executor's driver: SYSTEM_FAILURE_EXIT_CODE (the plain exec error, a system failure) and an
# exit code that is neither (executors/custom/command/errors.go:14 'unknown Custom executor executable exit code')
gl("custom-system-failure", I, [("prepare_executor", 'Preparing the "custom" executor', "Using Custom executor with driver libvirt 1.4.0..."),
    ("prepare_script", "Preparing environment", "virsh: error: failed to connect to the hypervisor\nerror: Failed to connect socket to '/var/run/libvirt/libvirt-sock': Connection refused")],
    syserr("prepare environment: exit status 2. Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information"), None, RSF)
gl("custom-unknown-exit", I, [("prepare_executor", 'Preparing the "custom" executor', "Using Custom executor with driver fargate 0.5.0..."),
    ("prepare_script", "Preparing environment", "Starting Fargate task..."), src(), script("make test", "")],
    syserr("unknown Custom executor executable exit code 3; executable execution terminated with: exit status 3"), None, RSF)
# ---- traps: a job that ran after the runner's own retried preparation (the last 'Preparation failed' was
# followed by a successful attempt) and then failed its tests; a k8s job whose helper pull fell back to the
# local image (Kubernetes 'Failed to pull image ... for container' warning, kubernetes/internal/pull/manager.go:66)
gl("trap-preparation-retried-then-test", B, [("prepare_executor", 'Preparing the "docker" executor',
    f"Using Docker executor with image {IMG} ...\n"
    "\x1b[31;1mERROR: Preparation failed: Error response from daemon: Get \"https://registry.example.com/v2/\": net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers) (manager.go:251:15s)\x1b[0;m\n"
    "Will be retried in 3s ...\n"
    f"Using Docker executor with image {IMG} ...\nUsing docker image sha256:5e8b1f0c2a7d for {IMG} with digest registry.example.com/acme/ci-builder@sha256:0c7d ...\n"),
    env_docker(), src(),
    script("cargo test", "test money::tests::rounds_half_even ... FAILED\n\ntest result: FAILED. 88 passed; 1 failed; 0 ignored"), cleanup()],
    err("exit code 101"), 101, SF)
gl("trap-k8s-pull-policy-fallback-then-lint", B, [prep_k8s("registry.example.com/acme/lint:4",
    "\x1b[0;33mWARNING: Failed to pull image \"registry.example.com/acme/lint:4\" for container \"build\" with policy \"always\": image pull failed: Back-off pulling image \"registry.example.com/acme/lint:4\"\x1b[0;m\n"
    "Attempt #2: Trying \"if-not-present\" pull policy for \"registry.example.com/acme/lint:4\" image for container \"build\"\n"),
    env_k8s(), src(),
    script("golangci-lint run ./...", "internal/pay/refund.go:41:2: ineffectual assignment to err (ineffassign)\n\terr = validate(r)\n\t^\n1 issues:\n* ineffassign: 1"), cleanup()],
    err("command terminated with exit code 1"), 1, SF)

# =====================================================================================================
# Third batch (written after the second was scored and fixed, committed before it was scored itself)
# =====================================================================================================
# ---- the API server's admission of the build pod (kubernetes.go:1107 'setting up build pod: %w'): a namespace's
# ResourceQuota used up by the other jobs running (used + requested > limited, requested alone fits) is transient;
# a LimitRange's per-container maximum below the pod's limit is the configuration (a resize over the range too)
gl("k8s-quota-exceeded-by-others", I, [prep_k8s()],
    syserr('prepare environment: setting up build pod: pods "runner-t2qx7lm-project-4411-concurrent-5-0q1w2e3r" is forbidden: exceeded quota: ci-jobs-quota, requested: limits.memory=8Gi, used: limits.memory=60Gi, limited: limits.memory=64Gi. Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information'),
    None, RSF)
gl("k8s-limitrange-max", C, [prep_k8s()],
    syserr('prepare environment: setting up build pod: pods "runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q" is forbidden: maximum memory usage per Container is 4Gi, but limit is 8Gi. Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information'),
    None, RSF)
# ---- the docker daemon's storage driver out of space (devicemapper's thin pool): the host's, a system failure
gl("docker-thinpool-full", I, DOCKER_OK[:1],
    syserr("Error response from daemon: devmapper: Thin Pool has 2187 free data blocks which is less than minimum required 163840 free data blocks. Create more free space in thin pool or use dm.min_free_space option to change behavior (docker.go:1102:0s)"),
    None, RSF)
# ---- a submodule over HTTPS that the job's token may not read (git asks for a user name: no terminal)
gl("git-submodule-credentials", C, DOCKER_OK[:2] + [src(
    "Checking out 3f2a9c1e as detached HEAD (ref is main)...\nUpdating/initializing submodules recursively with git depth set to 20...\n"
    "Submodule 'vendor/proto' (https://gitlab.example.com/platform/proto.git) registered for path 'vendor/proto'\n"
    "Cloning into '/builds/acme/app/vendor/proto'...\n"
    "fatal: could not read Username for 'https://gitlab.example.com': No such device or address\n"
    "fatal: clone of 'https://gitlab.example.com/platform/proto.git' into submodule path '/builds/acme/app/vendor/proto' failed\n"
    "Failed to clone 'vendor/proto'. Retry scheduled\n"
    "fatal: could not read Username for 'https://gitlab.example.com': No such device or address\n"
    "Failed to clone 'vendor/proto' a second time, aborting\n"
    "\x1b[0;33mWARNING: Updating submodules failed. Retrying...\x1b[0;m\n"
    "fatal: could not read Username for 'https://gitlab.example.com': No such device or address\n"), cleanup()],
    err("exit code 1"), 1, SF)
# ---- artifacts download: the transport error (network/gitlab.go:1397 'failed'), retried, then FATAL
gl("artifacts-download-io-timeout", I, DOCKER_OK + [(
    "download_artifacts", "Downloading artifacts",
    "Downloading artifacts for build:linux (88201)...\n"
    "\x1b[0;33mWARNING: Downloading artifacts from coordinator... failed\x1b[0;m  error=couldn't execute GET against https://gitlab.example.com/api/v4/jobs/88201/artifacts?direct_download=true: Get \"https://gitlab.example.com/api/v4/jobs/88201/artifacts?direct_download=true\": dial tcp 10.0.0.15:443: i/o timeout id=88201 token=glcbt-64\n"
    "\x1b[0;33mWARNING: Retrying...                               \x1b[0;m  context=artifacts-downloader error=invalid argument\n"
    "\x1b[31;1mFATAL: invalid argument                           \x1b[0;m\n"), cleanup()],
    err("exit code 1"), 1, SF)
# ---- a service image whose tag does not exist (executors/docker services pull through the same manager.go)
gl("docker-service-tag-missing", C, [prep_docker(IMG,
    "Using docker image sha256:5e8b for registry.example.com/acme/ci-builder:3.2 ...\nStarting service postgres:17-alpine9 ...\nPulling docker image postgres:17-alpine9 ...\n"
    "\x1b[0;33mWARNING: Failed to pull image with policy \"always\": Error response from daemon: manifest for postgres:17-alpine9 not found: manifest unknown: manifest unknown (manager.go:251:0s)\x1b[0;m\n")],
    err('failed to pull image "postgres:17-alpine9" with specified policies [always]: Error response from daemon: manifest for postgres:17-alpine9 not found: manifest unknown: manifest unknown (manager.go:251:0s)'),
    None, CFG)
# ---- a Kubernetes service container's image pull failing on a registry 5xx (watchers/pod.go:206 for any container)
gl("k8s-service-errimagepull-502", I, [prep_k8s(), env_k8s(phase="Pending")],
    syserr('prepare environment: waiting for pod running: pod "ci-jobs/runner-t2qx7lm-project-4411-concurrent-0-8fk2jw1q" failed: image pull failed: failed to pull and unpack image "docker.io/library/redis:7.4": failed to copy: httpReadSeeker: failed open: unexpected status code https://registry-1.docker.io/v2/library/redis/blobs/sha256:4f3a: 502 Bad Gateway. Check https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information'),
    None, IPF, version="18.4.0")
# ---- trap: allow_failure's 'WARNING: Job failed' is not read differently; a job whose cache restore retried a
# 502 and went on, then failed on a missing command
gl("trap-cache-502-then-cmd-missing", C, [prep_docker_ok(), env_docker(), src(), (
    "restore_cache", "Restoring cache",
    "Checking cache for tools-protected...\n"
    "\x1b[0;33mWARNING: Retrying...                               \x1b[0;m  error=received: 502 Bad Gateway\n"
    "\x1b[0;33mWARNING: received: 502 Bad Gateway                 \x1b[0;m\n"
    "\x1b[0;33mWARNING: Failed to extract cache\x1b[0;m\n"),
    script("shellcheck scripts/*.sh", "/scripts-4411-9921/step_script: line 180: shellcheck: command not found"), cleanup()],
    err("exit code 127"), 127, SF)
