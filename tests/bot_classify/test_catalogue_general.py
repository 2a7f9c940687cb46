"""Issue 11, general pass: rules written per message source (each tool's own message catalogue or
exit-code convention), after every labelled split had become tuning data.

Every line below is written from the tool's message format (the source is named in each rule's
description in config/taxonomy.toml), not copied from an evaluation case.  Each rule has a positive
case and a near miss that must NOT take it, and the decision the shipped policy takes is checked
where it matters (retry, resize, leave alone).
"""

from __future__ import annotations


import pytest

from retry_bot.decide import Action

from .conftest import decided




# (trace, family, rule, action) -- one realistic line (or two) per message source
POSITIVE = [
    # --- CI systems' own time limits
    (b"Build timed out (after 45 minutes). Marking the build as failed.\nBuild was aborted\nFinished: FAILURE\n",
     "timeout", "ci-system-timeout", Action.NONE),
    (b"[Pipeline] // timeout\nTimeout has been exceeded\n[Pipeline] }\n", "timeout", "ci-system-timeout", Action.NONE),
    (b"##[error]The job running on runner gh-runner-12 has exceeded the maximum execution time of 360 minutes.\n",
     "timeout", "ci-system-timeout", Action.NONE),
    (b"##[error]The job running on agent Hosted Agent ran longer than the maximum time of 60 minutes.\n",
     "timeout", "ci-system-timeout", Action.NONE),
    (b"Too long with no output (exceeded 10m0s): context deadline exceeded\n", "timeout", "ci-system-timeout", Action.NONE),
    (b'{"component":"entrypoint","level":"error","msg":"Process did not finish before 2h0m0s timeout"}\n',
     "timeout", "ci-system-timeout", Action.NONE),
    # --- harness time limits
    (b"//src/server:integration_test                                         TIMEOUT in 300.1s\n",
     "timeout", "test-harness-timeout-extra", Action.NONE),
    (b"        TIMEOUT [  60.003s] storage::tests::compaction_finishes\n", "timeout", "test-harness-timeout-extra", Action.NONE),
    (b"    thrown: \"Exceeded timeout of 5000 ms for a test.\n", "timeout", "test-harness-timeout-extra", Action.NONE),
    (b"     Error: Timeout of 2000ms exceeded. For async tests and hooks, ensure \"done()\" is called\n",
     "timeout", "test-harness-timeout-extra", Action.NONE),
    # --- build JVMs out of heap
    (b"> Task :app:compileReleaseKotlin\nGradle build daemon has been stopped: since the JVM garbage collector is thrashing\n",
     "oom", "gradle-daemon-memory-exhausted", Action.RESIZE),
    (b"e: Not enough memory to run compilation. Try to increase it via 'gradle.properties':\n",
     "oom", "gradle-daemon-memory-exhausted", Action.RESIZE),
    (b"* What went wrong:\nExecution failed for task ':core:compileJava'.\n> A failure occurred while executing "
     b"org.gradle.api.internal.tasks.compile.CompilerWorkAction\n      > GC overhead limit exceeded\n",
     "oom", "build-jvm-heap-cause", Action.RESIZE),
    # --- kubelet eviction of a pod over its request
    (b"ERROR: Job failed (system failure): pod \"runner-x\" status is \"Failed\": The node was low on resource: memory. "
     b"Threshold quantity: 100Mi, available: 80Mi. Container build was using 6Gi, which exceeds its request of 2Gi.\n",
     "oom", "kubelet-evicted-over-request", Action.RESIZE),
    # --- the job's docker client pointed at the wrong daemon
    (b"$ docker info\nCannot connect to the Docker daemon at tcp://docker:2375. Is the docker daemon running?\n",
     "config_error", "docker-daemon-misaddressed", Action.NONE),
    (b"Couldn't connect to Docker daemon at http+docker://localhost - is it running?\n\n"
     b"If it's at a non-standard location, specify the URL with the DOCKER_HOST environment variable.\n",
     "config_error", "docker-daemon-misaddressed", Action.NONE),
    # --- GitLab Runner: a shell profile that fails
    (b"Using Shell (pwsh) executor...\nERROR: Job failed (system failure): prepare environment: failed to start process: "
     b"exec: \"pwsh\": executable file not found in %PATH%. Check https://docs.gitlab.com/runner/shells/index.html"
     b"#shell-profile-loading for more information\n", "config_error", "runner-shell-profile", Action.NONE),
    (b"Preparing environment\nERROR: Job failed: prepare environment: exit status 1. "
     b"Check https://docs.gitlab.com/runner/shells/index.html#shell-profile-loading for more information\n",
     "config_error", "runner-shell-profile", Action.NONE),
    # --- kubelet cannot build the container from the spec
    (b"WARNING: Event retrieved from the cluster: Error: secret \"registry-creds\" not found\n"
     b"ERROR: Job failed (system failure): prepare environment: waiting for pod running: pod status is "
     b"CreateContainerConfigError\n", "config_error", "pod-config-refused", Action.NONE),
    # --- package indexes: an outage vs a version that does not exist
    (b"WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken\n"
     b"ERROR: Could not find a version that satisfies the requirement numpy==1.26.4 (from versions: none)\n"
     b"ERROR: No matching distribution found for numpy==1.26.4\n", "infrastructure", "pip-index-empty", Action.RETRY),
    (b"ERROR: Could not find a version that satisfies the requirement requests==9.1 (from versions: 2.31.0, 2.32.3)\n"
     b"ERROR: No matching distribution found for requests==9.1\n", "config_error", "pip-version-not-listed", Action.NONE),
    (b"WARNING: Skipping page https://pypi.internal/simple/attrs/ because the GET request got Content-Type: "
     b"application/octet-stream. The only supported Content-Type is text/html\n"
     b"ERROR: Could not find a version that satisfies the requirement attrs (from versions: none)\n",
     "infrastructure", "package-index-warning", Action.RETRY),
    (b"WARNING: Skipping page https://pypi.internal/simple/attrs/ because the GET request got Content-Type: text/plain.\n"
     b"ERROR: No matching distribution found for attrs\n", "infrastructure", "pip-index-empty", Action.RETRY),
    (b"[ERROR] Failed to execute goal on project core: Could not resolve dependencies for project a:core:jar:1.0: "
     b"Failure to transfer org.x:y:jar:2.0 from https://repo.maven.apache.org/maven2 was cached in the local repository, "
     b"resolution will not be reattempted until the update interval of central has elapsed or updates are forced. "
     b"Original error: Received fatal alert: handshake_failure\n",
     "infrastructure", "package-index-fault", Action.RETRY),
    (b"[ERROR] Failed to execute goal on project core: Could not resolve dependencies for project a:core:jar:1.0: "
     b"Failure to find org.x:y:jar:2.0-SNAPSHOT in https://nexus.example/repository/snapshots was cached in the "
     b"local repository, resolution will not be reattempted until the update interval of snapshots has elapsed\n",
     "config_error", "artifact-not-in-repository", Action.NONE),
    (b"[ERROR] Failed to execute goal on project web: Could not resolve dependencies for project a:web:war:1.0: "
     b"The following artifacts could not be resolved: a:b:jar:3.0\n",
     "config_error", "maven-dependencies-unresolved", Action.NONE),
    (b"* What went wrong:\nExecution failed for task ':app:compileDebugJavaWithJavac'.\n"
     b"> Could not resolve all files for configuration ':app:debugCompileClasspath'.\n"
     b"   > Could not find com.example:widgets:2.4.1.\n", "config_error", "artifact-not-in-repository", Action.NONE),
    (b"npm ERR! code E404\nnpm ERR! 404 Not Found - GET https://registry.npmjs.org/left-padd - Not found\n",
     "config_error", "artifact-not-in-repository", Action.NONE),
    (b"error: no matching package named `serde_jsn` found\nlocation searched: crates.io index\n",
     "config_error", "artifact-not-in-repository", Action.NONE),
    # --- lock files
    (b"npm ERR! code EUSAGE\nnpm ERR! `npm ci` can only install packages when your package.json and "
     b"package-lock.json or npm-shrinkwrap.json are in sync.\n", "config_error", "lockfile-out-of-sync", Action.NONE),
    (b"error Your lockfile needs to be updated, but yarn was run with `--frozen-lockfile`.\n",
     "config_error", "lockfile-out-of-sync", Action.NONE),
    (b" ERR_PNPM_OUTDATED_LOCKFILE  Cannot install with \"frozen-lockfile\" because pnpm-lock.yaml is not up to date\n",
     "config_error", "lockfile-out-of-sync", Action.NONE),
    # --- registries: credentials vs outage
    (b"npm ERR! code E401\nnpm ERR! Unable to authenticate, need: Basic realm=\"GitLab Package Registry\"\n",
     "config_error", "package-registry-auth", Action.NONE),
    (b"> Could not GET 'https://gitlab.example/api/v4/groups/7/-/packages/maven/a/b/1.0/b-1.0.pom'. "
     b"Received status code 401 from server: Unauthorized\n", "config_error", "package-registry-auth", Action.NONE),
    (b"The push refers to repository [docker.io/acme/app]\nno basic auth credentials\n",
     "config_error", "package-registry-auth", Action.NONE),
    (b"npm ERR! code E503\n",
     "infrastructure", "package-registry-5xx", Action.RETRY),
    (b"> Could not GET 'https://repo.gradle.org/x.pom'. Received status code 502 from server: Bad Gateway\n",
     "infrastructure", "package-registry-5xx", Action.RETRY),
    (b"Error response from daemon: error pulling image configuration: download failed after attempts=6: "
     b"denied: requested access to the resource is denied\n", "infrastructure", "registry-config-blob-refused", Action.RETRY),
    # --- git and the server
    (b"remote: The project you were looking for could not be found or you don't have permission to view it.\n"
     b"fatal: repository 'https://gitlab.example/group/gone.git/' not found\n",
     "config_error", "git-repository-refused", Action.NONE),
    (b"fatal: detected dubious ownership in repository at '/builds/group/app'\n",
     "config_error", "git-repository-refused", Action.NONE),
    # (the bare 'reference is not a tree' is a push/fetch race since the eighth pass: git-commit-not-fetched;
    # a submodule's commit missing from its remote stays configuration)
    (b"fatal: reference is not a tree: 3f1c2a9b8e7d6c5b4a3928171615141312111009\n"
     b"Unable to checkout '3f1c2a9b8e7d6c5b4a3928171615141312111009' in submodule path 'vendor/lib'\n",
     "config_error", "git-repository-refused", Action.NONE),
    (b"fatal: unable to access 'https://ci-bot:p@ss/word@gitlab.example/g/r.git/': Could not resolve host: ci-bot\n",
     "config_error", "url-userinfo-as-host", Action.NONE),
    # --- Kubernetes clients
    (b"The connection to the server localhost:8080 was refused - did you specify the right host or port?\n",
     "config_error", "kube-client-unconfigured", Action.NONE),
    (b'Error: Kubernetes cluster unreachable: Get "http://localhost:8080/version": dial tcp 127.0.0.1:8080: '
     b"connect: connection refused\n", "config_error", "kube-client-unconfigured", Action.NONE),
    (b"W0301 08:00:00.000000    42 loader.go:222] Config not found: /builds/app/.kube/config\n"
     b"Error: Kubernetes cluster unreachable\n", "config_error", "kube-cluster-unreachable-unconfigured", Action.NONE),
    (b'Error from server (NotFound): deployments.apps "web" not found\n', "config_error", "kubectl-server-refused", Action.NONE),
    (b'error: unable to recognize "k8s/ingress.yaml": no matches for kind "Ingress" in version "extensions/v1beta1"\n',
     "config_error", "kubectl-server-refused", Action.NONE),
    (b"Error from server (ServiceUnavailable): the server is currently unable to handle the request\n",
     "infrastructure", "kubectl-server-unavailable", Action.RETRY),
    # --- terraform
    (b"\xe2\x95\xb7\n\xe2\x94\x82 Error: Reference to undeclared input variable\n\xe2\x94\x82 \n"
     b"\xe2\x94\x82   on main.tf line 14, in resource \"aws_s3_bucket\" \"logs\":\n",
     "config_error", "terraform-config-invalid", Action.NONE),
    # --- image builds
    (b"COPY failed: file not found in build context or excluded by .dockerignore: stat dist/app.jar: file does not exist\n",
     "build_error", "image-build-context-missing", Action.NONE),
    (b'ERROR: failed to solve: failed to compute cache key: failed to calculate checksum of ref abc::def: '
     b'"/requirements.txt": not found\n', "build_error", "image-build-context-missing", Action.NONE),
    (b"error building image: error building stage: failed to get files used from context: failed to get fileinfo for "
     b"/kaniko/buildcontext/build/out: lstat /kaniko/buildcontext/build/out: no such file or directory\n",
     "build_error", "image-build-context-missing", Action.NONE),
    # --- linkers, make, ninja
    (b"ld.lld: error: undefined symbol: crc32_update\n>>> referenced by stream.c:88\n",
     "build_error", "linker-error", Action.NONE),
    (b"ld: symbol(s) not found for architecture arm64\n", "build_error", "linker-error", Action.NONE),
    (b"make[1]: *** No rule to make target 'src/gen/version.h', needed by 'src/main.o'.  Stop.\n",
     "build_error", "make-no-rule", Action.NONE),
    (b"ninja: error: 'proto/api.pb.h', needed by 'src/server.o', missing and no known rule to make it\n",
     "build_error", "make-no-rule", Action.NONE),
    # --- Rust panics, tests
    (b"thread 'main' panicked at src/config.rs:41:10:\ncalled `Option::unwrap()` on a `None` value\n",
     "build_error", "rust-panic", Action.NONE),
    (b"_______________ ERROR collecting tests/test_api.py _______________\n"
     b"!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!\n",
     "build_error", "test-harness-failure-extra", Action.NONE),
    (b"Failed!  - Failed:     2, Passed:   118, Skipped:     0, Total:   120, Duration: 3 s - App.Tests.dll (net8.0)\n",
     "build_error", "test-harness-failure-extra", Action.NONE),
    (b"There were failing tests. See the report at: file:///builds/app/build/reports/tests/test/index.html\n",
     "build_error", "test-harness-failure-extra", Action.NONE),
    # --- mypy's summary indented by tox
    (b"  mypy: commands[0]> mypy src\n  src/app.py:3: error: Incompatible types in assignment\n"
     b"  Found 1 error in 1 file (checked 20 source files)\n", "build_error", "lint-or-format-failed", Action.NONE),
    # --- container runtimes, curl's own errors, pip builds and interpreters
    (b"Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime create "
     b"failed: runc create failed: unable to start container process: exec: \"pnpm\": executable file not found in "
     b"$PATH: unknown\n", "config_error", "executable-not-found", Action.NONE),
    (b"curl: (3) URL using bad/illegal format or missing URL\n", "config_error", "curl-usage-error", Action.NONE),
    (b"curl: (77) error setting certificate verify locations:  CAfile: /etc/ssl/custom.pem CApath: none\n",
     "config_error", "curl-usage-error", Action.NONE),
    (b"  error: subprocess-exited-with-error\n  Failed building wheel for lxml\n"
     b"ERROR: Failed to build installable wheels for some pyproject.toml based projects (lxml)\n",
     "build_error", "python-package-build-failed", Action.NONE),
    (b"error: externally-managed-environment\n\n\xc3\x97 This environment is externally managed\n",
     "config_error", "python-environment-refused", Action.NONE),
    (b"ERROR: Package 'fastapi-x' requires a different Python: 3.8.18 not in '>=3.10'\n",
     "config_error", "python-environment-refused", Action.NONE),
    (b"ERROR: Job failed (system failure): pod \"runner-abc\" status is \"Failed\": "
     b"Pod was active on the node longer than the specified deadline\n", "timeout", "ci-system-timeout", Action.NONE),
    # --- SIGKILL reported by other tools (generic, weak OOM)
    (b"ERROR: /src/core/BUILD:12:11: Compiling core/big.cc failed: (Exit 137): gcc failed: error executing command\n",
     "oom", "make-killed", Action.RESIZE),
    (b"[ERROR] Crashed tests:\n[ERROR] ExecutionException The forked VM terminated without properly saying goodbye. "
     b"VM crash or System.exit called?\n[ERROR] Process Exit Code: 137\n", "oom", "surefire-fork-sigkilled", Action.RESIZE),
    (b"npm ERR! path /builds/app\nnpm ERR! command failed\nnpm ERR! signal SIGKILL\nnpm ERR! command sh -c next build\n",
     "oom", "make-killed", Action.RESIZE),
    (b"error building image: error building stage: failed to execute command: waiting for process to exit: signal: killed\n",
     "oom", "make-killed", Action.RESIZE),
    (b"go build k8s.io/kubernetes/pkg/apis/core: /usr/local/go/pkg/tool/linux_amd64/compile: signal: killed\n",
     "oom", "compiler-killed", Action.RESIZE),
    (b"FATAL: bazel ran out of memory and crashed. Printing stack trace:\n", "oom", "runtime-heap-exhausted", Action.RESIZE),
    # --- Go CLIs' usage errors, cloud permissions and throttling
    (b"$ docker login -u $CI_REGISTRY_USER -p\nflag needs an argument: 'p' in -p\n", "config_error", "cli-usage-error",
     Action.NONE),
    (b'Error: unknown flag: --atomic-wait\n', "config_error", "cli-usage-error", Action.NONE),
    (b"ERROR: (gcloud.run.deploy) PERMISSION_DENIED: Permission 'run.services.get' denied on resource\n",
     "config_error", "cloud-permission-denied", Action.NONE),
    (b"An error occurred (SlowDown) when calling the PutObject operation (reached max retries: 4): Please reduce your "
     b"request rate.\n", "infrastructure", "cloud-api-throttled", Action.RETRY),
    (b"gh: API rate limit exceeded for installation ID 4242. (HTTP 403)\n", "infrastructure", "cloud-api-throttled",
     Action.RETRY),
    # --- distribution package managers
    (b"Reading package lists...\nE: Unable to locate package libssl1.0-dev\n", "config_error", "os-package-unavailable",
     Action.NONE),
    (b"ERROR: unable to select packages:\n  py3-foo (no such package):\n    required by: world[py3-foo]\n",
     "config_error", "os-package-unavailable", Action.NONE),
    (b"E: Failed to fetch http://deb.debian.org/debian/pool/main/g/gcc/cpp_12.deb  Hash Sum mismatch\n",
     "infrastructure", "os-package-manager-transient", Action.RETRY),
    (b"E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 2101 (unattended-upgr)\n",
     "infrastructure", "os-package-manager-transient", Action.RETRY),
    (b"Error: Failed to download metadata for repo 'appstream': Cannot download repomd.xml\n",
     "infrastructure", "os-package-manager-transient", Action.RETRY),
    # --- more linters and test summaries
    (b"In scripts/deploy.sh line 14:\nrm -rf $DIR/*\n       ^--^ SC2115 (warning): Use \"${var:?}\"\n"
     b"For more information:\n  https://www.shellcheck.net/wiki/SC2115 -- Use \"${var:?}\" to ensure this never expands\n",
     "build_error", "lint-or-format-failed", Action.NONE),
    (b"2 files would be reformatted, 40 files would be left unchanged.\n",
     "build_error", "lint-or-format-failed", Action.NONE),
    (b"12 files inspected, 3 offenses detected, 3 offenses autocorrectable\n", "build_error", "lint-or-format-failed",
     Action.NONE),
    (b"Finished in 0.2 seconds (0.1s async, 0.1s sync)\n42 tests, 2 failures\n", "build_error", "test-failure", Action.NONE),
    (b" Test Files  1 failed | 11 passed (12)\n      Tests  1 failed | 120 passed (121)\n", "build_error", "test-failure",
     Action.NONE),
    (b"go: verifying github.com/acme/lib@v1.2.3: checksum mismatch\n\tdownloaded: h1:abc=\n\tgo.sum:     h1:def=\n",
     "build_error", "package-checksum-mismatch", Action.NONE),
    # --- the scheduler, artifacts, ssh, loaders, file permissions
    (b"WARNING: Event retrieved from the cluster: 0/6 nodes are available: 6 Insufficient memory. preemption: 0/6 nodes "
     b"are available: 6 No preemption victims found for incoming pod.\nERROR: Job failed (system failure): prepare "
     b"environment: waiting for pod running: timed out waiting for pod to start\n",
     "config_error", "pod-unschedulable-request", Action.NONE),
    (b"Downloading artifacts for build (1234)...\nERROR: Downloading artifacts from coordinator... not found  id=1234 "
     b"responseStatus=404 Not Found status=404\nFATAL: permission denied\n",
     "config_error", "artifacts-gone", Action.NONE),
    (b"Cloning into 'deploy'...\nHost key verification failed.\nfatal: Could not read from remote repository.\n",
     "config_error", "ssh-config-refused", Action.NONE),
    (b'Load key "/root/.ssh/id_ed25519": error in libcrypto\nfatal: Could not read from remote repository.\n',
     "config_error", "ssh-config-refused", Action.NONE),
    (b"node:internal/modules/cjs/loader:1147\n  throw err;\n  ^\n\nError: Cannot find module 'esbuild'\n",
     "build_error", "runtime-load-error", Action.NONE),
    (b"npm ERR! code EACCES\nnpm ERR! Error: EACCES: permission denied, mkdir '/root/.npm/_cacache'\n",
     "config_error", "filesystem-permission-denied", Action.NONE),
    # --- a shell builtin losing the pipe race under pipefail
    (b"+ printf '%s\\n' linux darwin\n+ grep -q linux\n./ci/check.sh: line 12: printf: write error: Broken pipe\n",
     "infrastructure", "shell-builtin-broken-pipe", Action.RETRY),
]


@pytest.mark.parametrize("trace,family,rule,action", POSITIVE, ids=[f"{p[2]}-{i}" for i, p in enumerate(POSITIVE)])
def test_general_rules(taxonomy, trace, family, rule, action):
    v, got = decided(trace, taxonomy)
    assert (v.family.value, v.rule) == (family, rule), v.evidence
    assert got == action


# (trace, rule it must NOT take, family it must have instead or None)
NEAR_MISSES = [
    # a test NAMED after a timeout is a test failure, not a CI time limit
    (b"--- FAIL: TestBuildTimedOut (0.01s)\n    ci_test.go:40: want \"Build timed out\"\nFAIL\n", "ci-system-timeout", None),
    (b"//src/server:timeout_test                                          FAILED in 1.2s\n",
     "test-harness-timeout-extra", "build_error"),
    # Gradle's daemon stopped for another reason (an idle timeout) is not memory
    (b"Gradle build daemon has been stopped: stop command received\n", "gradle-daemon-memory-exhausted", None),
    # a nested '> ' cause that is not an OutOfMemoryError message
    (b"   > Java heap space must be at least 512m, see gradle.properties\n", "build-jvm-heap-cause", None),
    # eviction for disk pressure is not the job's memory
    (b"The node was low on resource: ephemeral-storage. Container build was using 12Gi, which exceeds its request of 0.\n",
     "kubelet-evicted-over-request", "infrastructure"),
    # the runner's own daemon on 2375 is the runner host's problem (infrastructure)
    (b"ERROR: Preparation failed: Cannot connect to the Docker daemon at tcp://10.0.0.5:2375. Is the docker daemon running?\n",
     "docker-daemon-misaddressed", "infrastructure"),
    # dind with TLS on 2376 not ready yet: a start-up race, not this rule
    (b"Cannot connect to the Docker daemon at tcp://docker:2376. Is the docker daemon running?\n",
     "docker-daemon-misaddressed", "infrastructure"),
    # other prepare-environment errors carry the same link but are not the shell profile
    (b"ERROR: Job failed (system failure): prepare environment: setting up credentials: Post https://10.0.0.1/api: "
     b"net/http: TLS handshake timeout. Check https://docs.gitlab.com/runner/shells/index.html#shell-profile-loading\n",
     "runner-shell-profile", "infrastructure"),
    # pip's versions were listed: not an index outage
    (b"ERROR: Could not find a version that satisfies the requirement django==9.0 (from versions: 4.2, 5.0)\n"
     b"ERROR: No matching distribution found for django==9.0\n", "pip-index-empty", "config_error"),
    # Maven's transfer failure is not a missing artifact
    (b"Failure to transfer a:b:jar:1 from https://repo.example/m2 was cached in the local repository, resolution will not "
     b"be reattempted until the update interval of r has elapsed or updates are forced. Original error: timeout\n",
     "artifact-not-in-repository", "infrastructure"),
    # a 404 from a registry for a *download URL* is still http-client-error, not npm's E404
    (b"curl: (22) The requested URL returned error: 404\n", "artifact-not-in-repository", "config_error"),
    # npm 5xx is not an auth problem, and an auth problem is not 5xx
    (b"npm ERR! code E500\n", "package-registry-auth", "infrastructure"),
    (b"npm ERR! code E403\nnpm ERR! 403 Forbidden - PUT https://registry.npmjs.org/pkg\n", "package-registry-5xx",
     "config_error"),
    # the manifest itself refused: wrong credentials (config), not the config-blob outage
    (b"Error response from daemon: pull access denied for acme/private, repository does not exist or may require "
     b"'docker login': denied: requested access to the resource is denied\n", "registry-config-blob-refused", "config_error"),
    # a repository that is merely unreachable is transient
    (b"fatal: unable to access 'https://gitlab.example/g/r.git/': Could not resolve host: gitlab.example\n",
     "url-userinfo-as-host", "infrastructure"),
    (b"fatal: unable to access 'https://gitlab.example/g/r.git/': The requested URL returned error: 502\n",
     "git-repository-refused", "infrastructure"),
    # a real cluster that does not answer is the network, not a missing kubeconfig
    (b'Error: Kubernetes cluster unreachable: Get "https://10.0.0.1:6443/version": dial tcp 10.0.0.1:6443: i/o timeout\n',
     "kube-cluster-unreachable-unconfigured", "infrastructure"),
    (b'Error from server (Forbidden): pods is forbidden: User "system:serviceaccount:ci:default" cannot list resource\n',
     "kubectl-server-refused", "config_error"),
    # terraform's plan output mentions files without being a diagnostic
    (b"  # aws_s3_bucket.logs will be created (declared in main.tf line 14)\n", "terraform-config-invalid", None),
    # the Dockerfile step failed by itself (a compile in RUN) is not a context problem
    (b'ERROR: failed to solve: process "/bin/sh -c make" did not complete successfully: exit code: 2\n',
     "image-build-context-missing", "build_error"),
    # an ld warning is not a linker error
    (b"/usr/bin/ld: warning: libfoo.so.1, needed by libbar.so, not found\n", "linker-error", None),
    # a Rust panic quoting a DNS error: the network rule wins on the same line
    (b"thread 'main' panicked at src/fetch.rs:9:5:\nerror sending request: dns error: failed to lookup address "
     b"information: Temporary failure in name resolution\n", "rust-panic", "infrastructure"),
    # curl's network exit codes stay transient
    (b"curl: (7) Failed to connect to mirror.example port 443 after 3 ms: Connection refused\n", "curl-usage-error",
     "infrastructure"),
    # a wheel build that failed because the download broke is the network's
    (b"Failed building wheel for lxml\nerror: Could not resolve host: xmlsoft.org\n", "python-package-build-failed",
     "infrastructure"),
    # a harmless builtin broken pipe earlier does not outrank a later compile error
    (b"./ci/env.sh: line 3: echo: write error: Broken pipe\nsrc/a.c:3:1: error: expected ';' before '}' token\n",
     "shell-builtin-broken-pipe", "build_error"),
    # an extra index that is down does not outrank a later test failure
    (b"WARNING: Could not fetch URL https://extra.example/simple/pip/: connection error - skipping\n"
     b"FAILED tests/test_a.py::test_sum - assert 3 == 4\n", "package-index-fault", "build_error"),
    # the subject line of a transient provider API error is not a configuration diagnostic
    (b"Error: creating EC2 Instance: RequestLimitExceeded: Request limit exceeded.\n  with aws_instance.web,\n"
     b"  on main.tf line 12, in resource \"aws_instance\" \"web\":\n", "terraform-config-invalid", None),
    # a structured log of the job's own JVM is the job's OOM
    (b'{"level":"fatal","error":"java.lang.OutOfMemoryError: Java heap space"}\n', "remote-server-own-oom", "oom"),
    # compose's generic hint is printed while dind is still starting: not the misaddressed daemon
    (b"Couldn't connect to Docker daemon at https://docker:2376 - is it running?\n\nIf it's at a non-standard location, "
     b"specify the URL with the DOCKER_HOST environment variable.\n", "docker-daemon-misaddressed", None),
    # kaniko's push-permission check that hit a network timeout is the network
    (b"error checking push permissions -- make sure you entered the correct tag name, and that you are authenticated "
     b"correctly, and try again: checking push permission for \"r.example/app\": Get https://r.example/v2/: "
     b"dial tcp 10.0.0.9:443: i/o timeout\n", "package-registry-auth", "infrastructure"),
    # a pytest failure about a subprocess the test SIGKILLed on purpose is the test's failure
    (b"E   AssertionError: child died with <Signals.SIGKILL: 9>.\nFAILED tests/test_supervisor.py::test_kill - "
     b"AssertionError\n", "make-killed", "build_error"),
    # AWS access denial is not throttling
    (b"An error occurred (AccessDenied) when calling the PutObject operation: Access Denied\n", "cloud-api-throttled",
     "config_error"),
    # apt's mirror fault on a later line than an old 'Unable to locate' is not a missing package
    (b"E: Unable to locate package foo\nE: Failed to fetch http://deb.debian.org/x.deb  Hash Sum mismatch\n",
     "os-package-unavailable", "infrastructure"),
    # a Go test named after a kill is not a SIGKILL report
    (b"--- FAIL: TestSignalKilledChild (0.01s)\nFAIL\n", "make-killed", "build_error"),
    # a pod merely pending on an autoscaler (no FitError) stays the transient pod failure
    (b"Waiting for pod ci/runner-abc to be running, status is Pending\nERROR: Job failed (system failure): prepare "
     b"environment: waiting for pod running: timed out waiting for pod to start\n", "pod-unschedulable-request",
     "infrastructure"),
    # an artifact download that failed on the network is transient
    (b"ERROR: Downloading artifacts from coordinator... error couldn't execute GET against https://gitlab.example/api/v4/"
     b"jobs/1/artifacts: dial tcp: i/o timeout\n", "artifacts-gone", "infrastructure"),
    # an ssh connection that timed out is the network
    (b"ssh: connect to host deploy.example port 22: Connection timed out\n", "ssh-config-refused", "infrastructure"),
    # harmless warnings early in a log must not outrank a later generic OOM marker (diagnostic beats generic)
    (b"WARNING: Could not fetch URL https://extra.example/simple/x/: 503 - skipping\nSuccessfully installed x-1.0\n"
     b"[ 40%] Building CXX object big.cpp.o\nmake[2]: *** [big.cpp.o] Error 137\n", "package-index-warning", "oom"),
    (b"fatal: not a git repository (or any of the parent directories): .git\nmake: *** [all] Error 137\n",
     "git-repository-refused", "oom"),
    (b"Waiting for cache lock: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 99 (apt-get)...\n"
     b"Setting up gcc (4:12.2.0-3) ...\nKilled\n", "os-package-manager-transient", "oom"),
    (b"time=\"2024-01-01\" level=warning msg=\"exec: \\\"git\\\": executable file not found in $PATH\"\nKilled\n",
     "executable-not-found", "oom"),
    # a gRPC service's test printing PERMISSION_DENIED is not the CI identity
    (b"    rpc error: code = PermissionDenied desc = PERMISSION_DENIED: caller lacks role\n--- FAIL: TestAuthz (0.01s)\n",
     "cloud-permission-denied", "build_error"),
    # a builtin's broken pipe inside make's recipe summary stays make's (deterministic)
    (b"make: *** [Makefile:12: gen] Broken pipe\n", "shell-builtin-broken-pipe", "build_error"),
]


@pytest.mark.parametrize("trace,rule,family", NEAR_MISSES, ids=[f"not-{m[1]}-{i}" for i, m in enumerate(NEAR_MISSES)])
def test_general_rules_near_misses(taxonomy, trace, rule, family):
    v, _ = decided(trace, taxonomy)
    assert v.rule != rule, v.evidence
    if family is not None:
        assert v.family.value == family, (v.rule, v.evidence)


# ------------------------------------------------------------------ exit-code conventions (the structural fallback)

@pytest.mark.parametrize("code,family,rule", [
    (124, "timeout", "timeout-command-exit"),
    (125, "config_error", "container-run-failed-exit"),
    (126, "config_error", "command-not-executable-exit"),
    (127, "config_error", "command-not-found-exit"),
    (143, "infrastructure", "terminated-signal"),
    (139, "build_error", "crash-signal"),
])
def test_exit_code_conventions_when_the_text_is_silent(taxonomy, code, family, rule):
    v, _ = decided(b"$ ./run-suite.sh\n", taxonomy, exit_code=code)
    assert (v.family.value, v.rule) == (family, rule)


@pytest.mark.parametrize("command", [
    "make -j8 all", "ninja -C build", "cargo build --release", "./gradlew assembleRelease", "mvn -B package",
    "cmake --build build -j 4", "g++ -O2 -c big.cpp", "time make -j16", "poetry run pytest -n 8", "go test ./...",
])
def test_sigkill_in_a_memory_heavy_step_is_oom(taxonomy, command):
    v, action = decided(f"$ {command}\n".encode(), taxonomy, exit_code=137)
    assert (v.family.value, v.category, v.rule) == ("oom", "oom", "sigkill-in-memory-heavy-step")
    assert action == Action.RESIZE


@pytest.mark.parametrize("command", ["./deploy.sh", "sleep 3600", "kubectl rollout status deploy/web", "makeself x"])
def test_sigkill_after_another_command_stays_the_weak_killed(taxonomy, command):
    v, _ = decided(f"$ {command}\n".encode(), taxonomy, exit_code=137)
    assert (v.category, v.rule) == ("killed", "sigkill")


def test_exit_code_conventions_yield_to_text(taxonomy):
    # 124/125/126 are read in the fallback stage: a DNS error printed before the exit is what a
    # retry fixes, whatever timeout(1) or docker run returned afterwards
    for code in (124, 125, 126):
        v, _ = decided(b"curl: (6) Could not resolve host: mirror.example\n", taxonomy, exit_code=code)
        assert v.family.value == "infrastructure", code


def test_exit_124_beats_the_last_command_fallback(taxonomy):
    v, _ = decided(b"$ timeout 600 pytest tests/slow\n", taxonomy, exit_code=124)
    assert (v.family.value, v.rule) == ("timeout", "timeout-command-exit")


@pytest.mark.parametrize("command,category", [
    ("poetry run pytest -q", "test_failure"), ("npx jest --ci", "test_failure"), ("bundle exec rspec", "test_failure"),
    ("dotnet test App.sln", "test_failure"), ("npm run lint", "lint_failure"), ("pyright src", "lint_failure"),
    ("python -m mypy src", "lint_failure"), ("git diff --exit-code", "lint_failure"), ("dotnet build -c Release", "build_failed"), ("tsc -p .", "build_failed"),
])
def test_fallback_by_last_command_understands_wrappers_and_more_tools(taxonomy, command, category):
    v, _ = decided(f"$ {command}\n".encode(), taxonomy)
    assert (v.family.value, v.category) == ("build_error", category)


def test_fallback_by_last_command_does_not_guess_from_unknown_tools(taxonomy):
    v, _ = decided(b"$ ./scripts/release.sh\n", taxonomy)
    assert v.family.value == "unknown"


# ------------------------------------------------------------------ traps stay right

@pytest.mark.parametrize("trace,family", [
    # a test named after OOM that failed
    (b"[ RUN      ] Allocator.OomKillerSparesParent\n[  FAILED  ] Allocator.OomKillerSparesParent (3 ms)\n", "build_error"),
    # a test that deliberately SIGKILLs its child and fails an assertion about it
    (b"    killed child 4242 with SIGKILL\n--- FAIL: TestSupervisorRestartsKilledChild (0.50s)\nFAIL\tsup\t0.61s\n",
     "build_error"),
    # a remote server's own OutOfMemoryError relayed through an HTTP error in a test
    (b"E   requests.exceptions.HTTPError: 500 Server Error: java.lang.OutOfMemoryError: Java heap space\n"
     b"FAILED tests/test_search.py::test_bulk_index - requests.exceptions.HTTPError: 500\n", "build_error"),
    # a test-harness time limit is a timeout
    (b"        TIMEOUT [ 120.001s] net::tests::reconnects\n", "timeout"),
    # Hadoop IPC relays the NameNode's own heap failure
    (b"org.apache.hadoop.ipc.RemoteException(java.lang.OutOfMemoryError): Java heap space\n", "build_error"),
])
def test_traps_stay_right(taxonomy, trace, family):
    v, action = decided(trace, taxonomy)
    assert v.family.value == family, (v.rule, v.evidence)
    assert action != Action.RESIZE


def test_the_jobs_own_oom_is_not_a_remote_servers(taxonomy):
    v, action = decided(b'Exception in thread "main" java.lang.OutOfMemoryError: Java heap space\n', taxonomy)
    assert (v.family.value, action) == ("oom", Action.RESIZE)
    assert v.rule != "remote-server-own-oom"
