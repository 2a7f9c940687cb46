"""Issue 11, eighth pass: the miss kinds of blind set I, generalised by mechanism (a CI system's own
agent-loss lines, a tool's catalogue read whole, a build driver's summary that must not outrank the
child's kill, an exit-code convention of another CI system) and per message source (each rule's
description in config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools,
hosts, paths and numbers. Each rule has a positive, a near miss that must NOT take it, and the
traps around it must stay right; the decision the shipped policy takes is checked too.
"""

from __future__ import annotations

import pytest

from retry_bot.classify import classify
from retry_bot.classify.engine import effective_exit_code
from retry_bot.classify.trace import TraceText
from retry_bot.decide import Action
from retry_bot.model import JobFacts

from .conftest import check_near_miss, check_rule, check_trap

TS = b"09:14:03 "   # a Jenkins console timestamp

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- CI agents lost, in their controllers' own words (runner stage: before any script text)
    (TS + b"Running on build-arm64-07 in /home/jenkins/workspace/pr-check\n"
     + TS + b"FATAL: java.nio.channels.ClosedChannelException\n"
     + TS + b"\tat org.jenkinsci.remoting.protocol.impl.ChannelApplicationLayer.onReadClosed(ChannelApplicationLayer.java:209)\n",
     "infrastructure", "runner-shutdown", Action.RETRY, {}),
    (b"make: *** [Makefile:88: check] Terminated\n"
     b"Caused: hudson.remoting.ChannelClosedException: Channel \"hudson.remoting.Channel@1f2e3d4c:ci-agent-3\": "
     b"Remote call on ci-agent-3 failed. The channel is closing down or has closed down\n",
     "infrastructure", "runner-shutdown", Action.RETRY, {}),
    (b"Caused: java.io.IOException: Backing channel 'win-agent-12' is disconnected.\n"
     b"\tat hudson.remoting.RemoteInvocationHandler.channelOrFail(RemoteInvocationHandler.java:227)\n",
     "infrastructure", "runner-shutdown", Action.RETRY, {}),
    (b"Agent went offline during the build\nERROR: Connection was broken\nFinished: FAILURE\n",
     "infrastructure", "runner-shutdown", Action.RETRY, {}),
    (b"~~~ Running tests\n$ ./scripts/test.sh\nExited with status -1 (agent lost)\n",
     "infrastructure", "runner-shutdown", Action.RETRY, {}),
    (b"ERROR: Connection terminated\njava.io.IOException: Unexpected termination of the channel\n"
     b"\tat hudson.remoting.SynchronousCommandTransport$ReaderThread.run(SynchronousCommandTransport.java:90)\n",
     "infrastructure", "runner-shutdown", Action.RETRY, {}),
    (b"Cannot contact k8s-agent-x1y2z: java.lang.InterruptedException\n"
     b"Agent k8s-agent-x1y2z was deleted; cancelling node body\n", "infrastructure", "runner-shutdown", Action.RETRY, {}),
    (b"##[error]The hosted runner encountered an error while running your job. (Error Type: Disconnect).\n",
     "infrastructure", "runner-shutdown", Action.RETRY, {}),
    (b"##[error]The job was not acquired by Runner of type hosted even after multiple attempts\n",
     "infrastructure", "runner-shutdown", Action.RETRY, {}),
    (b"##[error]No agent found in pool Builders which satisfies the specified demands: cmake, Agent.Version "
     b"-gtVersion 3.220.0\n", "config_error", "gitlab-job-stuck-no-runner", Action.NONE, {}),
    # ... and with memory evidence in the window, the agent died of the build's memory (weak OOM)
    (b"[ 41%] Building CXX object src/CMakeFiles/core.dir/solver.cpp.o\n"
     b"Agent went offline during the build\n", "oom", "runner-lost-under-memory-load", Action.RESIZE, {}),
    # --- pods that never started
    (b"Init container initupload not ready: (state: waiting, reason: \"PodInitializing\", message: \"\")\n",
     "infrastructure", "pod-failure", Action.RETRY, {}),
    (b"Container test not ready: (state: waiting, reason: ContainerCreating, message: \"\")\n",
     "infrastructure", "pod-failure", Action.RETRY, {}),
    (b"ERROR sandbox: pod did not start within 300 seconds, giving up\n", "infrastructure", "pod-failure",
     Action.RETRY, {}),
    (b"error: build error: The pod for this build was deleted before the build completed.\n", "infrastructure",
     "pod-failure", Action.RETRY, {}),
    # --- kubelet's own refusals, evictions and lost containers (infrastructure) vs its configuration errors
    (b"Pod was rejected: Node didn't have enough resource: memory, requested: 4294967296, used: 30064771072, "
     b"capacity: 32212254720\n", "infrastructure", "spot-reclamation", Action.RETRY, {}),
    (b"  Reason:   UnexpectedAdmissionError\n", "infrastructure", "spot-reclamation", Action.RETRY, {}),
    (b"Message: Preempted in order to admit critical pod\n", "infrastructure", "spot-reclamation", Action.RETRY, {}),
    (b"      reason: ContainerStatusUnknown\n", "infrastructure", "spot-reclamation", Action.RETRY, {}),
    (b"Error: container has runAsNonRoot and image will run as root (pod: \"runner-q1\", container: build)\n",
     "config_error", "pod-config-refused", Action.NONE, {}),
    (b"Error: ErrImageNeverPull: Container image \"acme/tools:7\" is not present with pull policy of Never\n",
     "config_error", "pod-config-refused", Action.NONE, {}),
    (b"OCI runtime create failed: runc create failed: unable to start container process: exec: \"/bin/bash\": stat "
     b"/bin/bash: no such file or directory: unknown\n", "config_error", "executable-not-found", Action.NONE, {}),
    # --- OpenShift's build status catalogue
    (b"error: build error: The build pod was killed due to an out of memory condition.\n", "oom",
     "openshift-build-oomkilled", Action.RESIZE, {}),
    (b"Build acme/web-7 failed: Missing push secret.\n", "config_error", "openshift-build-refused", Action.NONE, {}),
    (b"error: Referenced image could not be resolved.\n", "config_error", "openshift-build-refused", Action.NONE, {}),
    # --- GitLab's git access refusals, read whole (configuration) and its storage move (transient)
    (b"Cloning into '/builds/acme/app/vendor/shared'...\nremote: Authentication by CI/CD job token not allowed from "
     b"app to shared.\n", "config_error", "git-credentials-refused", Action.NONE, {}),
    (b"remote: Insufficient permissions to pull from the repository of project shared.\n", "config_error",
     "git-credentials-refused", Action.NONE, {}),
    (b"remote: GitLab: You can't push code to an archived project.\n", "config_error", "git-credentials-refused",
     Action.NONE, {}),
    (b"remote: Pushing over HTTP is not allowed.\n", "config_error", "git-credentials-refused", Action.NONE, {}),
    (b"remote: GitLab: The repository is temporarily read-only. Please try again later.\n", "infrastructure",
     "git-remote-overloaded", Action.RETRY, {}),
    # --- a linker reading an object another job was still writing
    (b"/usr/bin/x86_64-linux-gnu-ld: obj/parser.o: file not recognized: file truncated\n"
     b"collect2: error: ld returned 1 exit status\nmake[2]: *** [Makefile:40: parser] Error 1\n",
     "infrastructure", "object-file-truncated", Action.RETRY, {}),
    (b"ld.lld: error: build/libfoo.a(bar.o): truncated or malformed object (section header table goes past the "
     b"end of the file)\n", "infrastructure", "object-file-truncated", Action.RETRY, {}),
    # --- races on files a compiler or the shell uses (transient) vs a compiler that is not installed (config)
    (b"ccache: error: Failed to create temporary file for /var/cache/ccache/tmp/cpp_stdout.tmp.a1b2: No such file "
     b"or directory\n", "infrastructure", "compiler-temp-file-vanished", Action.RETRY, {}),
    (b"cc1: fatal error: opening dependency file src/CMakeFiles/core.dir/io.c.o.d: No such file or directory\n"
     b"compilation terminated.\n", "infrastructure", "compiler-temp-file-vanished", Action.RETRY, {}),
    (b"/usr/bin/bash: line 88: ./mvnw: Text file busy\n", "infrastructure", "compiler-temp-file-vanished",
     Action.RETRY, {}),
    (b"aarch64-linux-gnu-gcc: fatal error: cannot execute 'cc1obj': execvp: No such file or directory\n",
     "config_error", "executable-not-found", Action.NONE, {}),
    # --- dnf / apt: the repository's entry point is missing (config) vs a file it lists (transient)
    (b"Errors during downloading metadata for repository 'acme-nightly':\n"
     b"  - Status code: 404 for https://repo.example.org/nightly/el9/x86_64/repodata/repomd.xml (IP: 192.0.2.7)\n"
     b"Error: Failed to download metadata for repo 'acme-nightly': Cannot download repomd.xml: Cannot download "
     b"repodata/repomd.xml: All mirrors were tried\n", "config_error", "os-repository-missing-summary", Action.NONE, {}),
    (b"Error: Failed to download metadata for repo 'appstream': Cannot prepare internal mirrorlist: No URLs in "
     b"mirrorlist\n", "config_error", "os-repository-missing", Action.NONE, {}),
    (b"E: The repository 'http://archive.example.org/debian stretch-backports Release' does not have a Release file.\n",
     "config_error", "os-repository-missing", Action.NONE, {}),
    # --- a build driver's summary after a SIGKILLed child: the kill decides (kill_signal before generic)
    (b"   Compiling engine v0.4.0 (/builds/acme/engine)\nsccache: Compile terminated by signal 9\n"
     b"error: could not compile `engine` (lib)\n", "oom", "sigkill-any-tool", Action.RESIZE, {}),
    # --- rustc's linker SIGKILLed (Rust's ExitStatus Display on the compile-error line); .NET at its cgroup heap limit
    (b"   Compiling engine v0.4.0\nerror: linking with `cc` failed: signal: 9 (SIGKILL)\n  |\n  = note: LC_ALL=\"C\" \"cc\"\n",
     "oom", "compiler-killed", Action.RESIZE, {}),
    (b"Unhandled exception. System.OutOfMemoryException: Exception of type 'System.OutOfMemoryException' was thrown.\n"
     b"   at Acme.Indexer.Build(Stream input) in /src/Indexer.cs:line 88\n", "oom", "runtime-heap-exhausted",
     Action.RESIZE, {}),
    # --- the JVM's heap message alone behind a logger's level tag
    (b"[info] compiling 87 Scala sources to /work/target/scala-3.3.1/classes ...\n[error] Java heap space\n",
     "oom", "runtime-heap-exhausted", Action.RESIZE, {}),
    (b"[api] [error] Java heap space\n", "oom", "runtime-heap-exhausted", Action.RESIZE, {}),
    # --- git: the job's commit missing from what the fetch returned (a push/fetch race)
    (b"$ git checkout -qf 0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c\n"
     b"fatal: reference is not a tree: 0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c\n",
     "infrastructure", "git-commit-not-fetched", Action.RETRY, {}),
    # --- transient transfers from containerd, moby, the JVM, the registry client
    (b"ERROR: failed to solve: failed to compute cache key: failed to copy: httpReadSeeker: failed open: failed to do "
     b"request: Get \"https://cdn.registry.example.com/blobs/sha256/ab/abcd\": EOF\n",
     "infrastructure", "network-error", Action.RETRY, {}),
    (b"#7 ERROR: failed to copy: unexpected EOF\n", "infrastructure", "network-error", Action.RETRY, {}),
    (b"> Could not GET 'https://repo.example.org/maven2/org/acme/core/1.2/core-1.2.pom'.\n   > Connection reset\n",
     "infrastructure", "network-error", Action.RETRY, {}),
    (b"Exception in thread \"main\" java.net.UnknownHostException: downloads.example.org\n"
     b"\tat java.base/sun.nio.ch.NioSocketImpl.connect(NioSocketImpl.java:567)\n",
     "infrastructure", "dns-error", Action.RETRY, {}),
    (b"filesystem layer verification failed for digest sha256:9a8b7c6d5e4f\n", "infrastructure",
     "download-integrity-vs-index", Action.RETRY, {}),
    (b"Error response from daemon: unknown: Bad Gateway\n", "infrastructure", "http-5xx-any-wording", Action.RETRY, {}),
    (b"pip._vendor.urllib3.exceptions.ProtocolError: ('Connection broken: IncompleteRead(524288 bytes read, 1048576 "
     b"more expected)', IncompleteRead(524288 bytes read, 1048576 more expected))\n", "infrastructure", "network-error",
     Action.RETRY, {}),
    # --- the runner's own requests refused by the API server: its configuration, not the platform
    (b"ERROR: Job failed (system failure): prepare environment: setting up credentials: secrets is forbidden: User "
     b"\"system:serviceaccount:builds:runner\" cannot create resource \"secrets\" in API group \"\" in the namespace "
     b"\"builds\". Check https://docs.gitlab.com/runner/shells/index.html#shell-profile-loading for more information\n",
     "config_error", "runner-k8s-request-refused", Action.NONE, {}),
    (b"ERROR: Job failed (system failure): prepare environment: setting up build pod: admission webhook "
     b"\"policy.kyverno.svc\" denied the request: image registry not allowed\n", "config_error",
     "runner-k8s-request-refused", Action.NONE, {}),
    # --- configuration: the job's toolchain, shell, token permissions, inputs and base image
    (b"npm ERR! code EBADENGINE\nnpm ERR! engine Unsupported engine\nnpm ERR! notsup Required: {\"node\":\">=20\"}\n",
     "config_error", "toolchain-version-mismatch", Action.NONE, {}),
    (b"error vite@5.2.0: The engine \"node\" is incompatible with this module. Expected version \"^18.0.0 || >=20.0.0\". "
     b"Got \"16.14.0\"\n", "config_error", "toolchain-version-mismatch", Action.NONE, {}),
    (b"go: go.mod requires go >= 1.23.0 (running go 1.22.4; GOTOOLCHAIN=local)\n", "config_error",
     "toolchain-version-mismatch", Action.NONE, {}),
    (b"> Unsupported class file major version 66\n", "config_error", "toolchain-version-mismatch", Action.NONE, {}),
    (b"$ ./ci/publish.sh\n./ci/publish.sh: 14: twine: not found\n/bin/sh: 1: twine: not found\n", "config_error",
     "command-not-found-text", Action.NONE, {}),
    (b"zsh:1: command not found: bazel\n", "config_error", "command-not-found-text", Action.NONE, {}),
    (b"RequestError [HttpError]: Resource not accessible by integration\n", "config_error", "gitlab-api-forbidden",
     Action.NONE, {}),
    (b"##[error]Input required and not supplied: registry-password\n", "config_error", "cli-usage-error",
     Action.NONE, {}),
    (b"ERROR: failed to solve: failed to resolve source metadata for docker.io/library/pyton:3.12-slim: "
     b"docker.io/library/pyton:3.12-slim: not found\n", "config_error", "image-pull-not-found", Action.NONE, {}),
    # --- timeouts of other HTTP clients (Ruby, Haskell)
    (b"fastlane finished with errors\n[!] Net::ReadTimeout with #<TCPSocket:(closed)>\n",
     "infrastructure", "network-timeout", Action.RETRY, {}),
    (b"stack: HttpExceptionRequest Request {\n  host = \"casa.stackage.org\"\n  port = 443\n}\n ConnectionTimeout\n",
     "infrastructure", "network-timeout", Action.RETRY, {}),
    # --- deterministic failures in other tools' words (families)
    (b"Undefined symbols for architecture x86_64:\n  \"_png_read_info\", referenced from:\n", "build_error",
     "linker-error", Action.NONE, {}),
    (b"Coverage failure: total of 64 is less than fail-under=75\n", "build_error", "lint-or-format-failed",
     Action.NONE, {}),
    (b"Assertion failed: (len <= cap), function buf_push, file buf.c, line 41.\n", "build_error",
     "generic-test-assertion", Action.NONE, {}),
    (b"./run_fuzz.sh: line 9: 4242 Segmentation fault      (core dumped) ./fuzz_parser corpus/\n", "build_error",
     "shell-reported-crash", Action.NONE, {}),
    (b"timeout: sending signal KILL to command 'make'\n", "timeout", "test-harness-timeout-extra", Action.NONE, {}),
    # --- test-harness time limits, test suites, recipes, build targets (families)
    (b"Tests run: 12, Failures: 0, Errors: 0, Skipped: 0\n[ERROR] Timeout 300 s exceeded. Process was killed.\n",
     "timeout", "test-harness-timeout-extra", Action.NONE, {}),
    (b"    Test suite failure for package acme-parser-0.3.1\n        spec:  exited with: ExitFailure 1\n",
     "build_error", "test-failure", Action.NONE, {}),
    (b"Test suite unit-tests: FAIL\n", "build_error", "test-failure", Action.NONE, {}),
    (b"==>   zlib-ng/abc1234 (in stack e4s) was reported broken here: https://ci.example.org/jobs/991\n",
     "build_error", "spack-error", Action.NONE, {}),
    (b"Could not execute build: Unknown build target: f99-candidate\n", "config_error", "cli-usage-error",
     Action.NONE, {}),
    (b"+ cd /builddir/build/BUILD/acme-2.1\n/var/tmp/rpm-tmp.Xy12: line 40: cd: acme-2.1: No such file or directory\n"
     b"error: Bad exit status from /var/tmp/rpm-tmp.Xy12 (%prep)\n", "build_error", "build-tool-failed", Action.NONE, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{p[2] or p[1]}-{i}" for i, p in enumerate(POSITIVE)])
def test_eighth_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must not decide, family expected or None, extra facts)
NEAR_MISSES = [
    # a test's own ClosedChannelException (no Jenkins FATAL line, no remoting class) is not the agent
    (b"java.nio.channels.ClosedChannelException\n\tat io.netty.channel.AbstractChannel.write(AbstractChannel.java:80)\n",
     "runner-shutdown", None, {}),
    (b"Exited with status 1\n", "runner-shutdown", None, {}),
    (b"Agent pool drained; agent was deleted from the pool list\n", "runner-shutdown", None, {}),
    (b"The hosted runner image will be deprecated on 2026-03-01\n", "runner-shutdown", None, {}),
    (b"No agent found in the cache, downloading\n", "gitlab-job-stuck-no-runner", None, {}),
    # the configuration reasons of a waiting container are not a pod that failed to start
    (b"Container build not ready: (state: waiting, reason: \"CreateContainerConfigError\", message: \"\")\n",
     "pod-failure", None, {}),
    (b"the pod started on time\n", "pod-failure", None, {}),
    # a container of the build pod failing is not its OOM kill
    (b"The pod for this build has at least one container with a non-zero exit status.\n",
     "openshift-build-oomkilled", None, {}),
    (b"You are not allowed to download code coverage reports without logging in\n", "git-credentials-refused",
     None, {}),
    (b"The repository is temporarily read-only in this test fixture\n", "git-remote-overloaded", None, {}),
    # a webhook that could not be called and a full quota stay the platform's
    (b"ERROR: Job failed (system failure): prepare environment: setting up build pod: Internal error occurred: "
     b"failed calling webhook \"policy.kyverno.svc\": context deadline exceeded\n", "runner-k8s-request-refused",
     "infrastructure", {}),
    (b"ERROR: Job failed (system failure): prepare environment: setting up build pod: pods \"runner-a1\" is forbidden: "
     b"exceeded quota: ci, requested: limits.memory=8Gi\n", "runner-k8s-request-refused", "infrastructure", {}),
    (b"IncompleteRead is raised when the body is short\n", "network-error", None, {}),
    (b"error: linking with `cc` failed: exit status: 1\n", "compiler-killed", "build_error", {}),
    (b"    public void Throws_OutOfMemoryException_when_asked() => Assert.Throws<OutOfMemory>(F);\n",
     "runtime-heap-exhausted", None, {}),
    (b"npm WARN EBADENGINE Unsupported engine {\n", "toolchain-version-mismatch", None, {}),
    (b"/bin/sh: 1: cannot open ci/env: No such file\n", "command-not-found-text", None, {}),
    (b"ERROR: failed to solve: failed to resolve source metadata for docker.io/library/python:3.12: failed to do "
     b"request: Head \"https://registry-1.docker.io/v2/library/python/manifests/3.12\": dial tcp: i/o timeout\n",
     "image-pull-not-found", "infrastructure", {}),
    # 'Skill' is not a kill word: a real SIGKILL of a child of a test run named so stays the kill
    (b"test matcher::skill_tree_depth ... FAILED\nerror: linking with `cc` failed: signal: 9 (SIGKILL)\n",
     "test-named-after-oom-failed", "oom", {}),
    (b"    }\n  ResponseTimeoutMillis = 30000\n", "network-timeout", None, {}),
    (b"Undefined symbols for architecture x86_64 were resolved lazily\n", "linker-error", None, {}),
    (b"echo 'Segmentation fault handler installed'\n", "shell-reported-crash", None, {}),
    (b"timeout: the monitored command dumped core\n", "test-harness-timeout-extra", None, {}),
    (b"the node didn't have enough resource to say\n", "spot-reclamation", None, {}),
    (b"stat /bin/bash: no such file or directory\n", "executable-not-found", None, {}),
    (b"cc1: fatal error: src/io.c: No such file or directory\n", "compiler-temp-file-vanished", None, {}),
    (b"note: the build is busy: Text file busy handling is retried by the tool\n", "compiler-temp-file-vanished",
     None, {}),
    # a wrong-architecture object is deterministic
    (b"/usr/bin/ld: lib/arm/blob.o: file not recognized: file format not recognized\n", "object-file-truncated",
     "build_error", {}),
    # a 404 for a file the index lists is a mirror between syncs; a timeout on repomd.xml is the network
    (b"  - Status code: 404 for https://mirror.example.net/el9/repodata/0a1b2c-primary.xml.gz (IP: 198.51.100.4)\n"
     b"Error: Failed to download metadata for repo 'baseos': Yum repo downloading error\n",
     "os-repository-missing-summary", "infrastructure", {}),
    (b"Error: Failed to download metadata for repo 'updates': Cannot download repomd.xml: Curl error (28): Timeout "
     b"was reached\n", "os-repository-missing-summary", "infrastructure", {}),
    # cargo's summary after a real rustc error is a compile error, not a kill
    (b"error[E0308]: mismatched types\n --> src/lib.rs:4:5\nerror: could not compile `engine` (lib) due to 1 "
     b"previous error\n", "sigkill-any-tool", "build_error", {}),
    # the heap message quoted in a JSON body, or inside a sentence, is not the job's heap
    (b"{\"status\": 200, \"message\": \"Java heap space\"}\n", "runtime-heap-exhausted", None, {}),
    (b"[info] tuning notes: Java heap space is set by -Xmx\n", "runtime-heap-exhausted", None, {}),
    # a submodule's missing commit stays configuration
    (b"fatal: reference is not a tree: 1234567890abcdef1234567890abcdef12345678\n"
     b"Unable to checkout '1234567890abcdef1234567890abcdef12345678' in submodule path 'third_party/zlib'\n",
     "git-commit-not-fetched", "config_error", {}),
    # a cause git printed before it decides (credentials)
    (b"remote: HTTP Basic: Access denied\nfatal: Authentication failed for 'https://gitlab.example.com/g/p.git/'\n"
     b"fatal: reference is not a tree: 1234567890abcdef1234567890abcdef12345678\n", "git-commit-not-fetched",
     "config_error", {}),
    # a registry's 404 or a missing Dockerfile path under 'failed to compute cache key' stays the Dockerfile's
    (b"ERROR: failed to solve: failed to compute cache key: failed to calculate checksum of ref 4a5b: \"/app/dist\": "
     b"not found\n", "network-error", "build_error", {}),
    (b"java.net.SocketException: Socket closed by the test on purpose\n", "network-error", None, {}),
    (b"unknown: manifest tagged by \"3.1\" is not found\n", "http-5xx-any-wording", None, {}),
    # a test harness's timeout word without the watchdog's kill
    (b"[INFO] Timeout 300 s configured for the forked runtime\n", "test-harness-timeout-extra", None, {}),
    (b"Test suite unit-tests: PASS\n", "test-failure", None, {}),
    (b"error: Bad exit status is not an option here\nusage: rpmbuild\n", "build-tool-failed", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"not-{m[1]}-{i}" for i, m in enumerate(NEAR_MISSES)])
def test_eighth_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)


# ------------------------------------------------------------------ traps stay right

@pytest.mark.parametrize("trace,extra", [
    # a test that SIGKILLs its child, then cargo's summary: the test summary decides
    (b"test supervisor::kills_stuck_child ... FAILED\n    child terminated by signal 9\n"
     b"test result: FAILED. 41 passed; 1 failed; 0 ignored\nerror: test failed, to rerun pass `--lib`\n", {}),
    # a remote server's own heap error relayed in its response
    (b"requests.exceptions.HTTPError: 500 Server Error: java.lang.OutOfMemoryError: Java heap space for url: "
     b"http://search:9200/_bulk\n", {}),
    # a test named after OOM failing its own assertion
    (b"--- FAIL: TestHeapLimitReportsOOM (0.02s)\nFAIL\tacme/alloc\t0.1s\n", {}),
    # a test named after killing that SIGKILLs its child on purpose and prints Rust's ExitStatus of it
    (b"running 12 tests\ntest supervisor::kill_stuck_worker ... FAILED\n\nfailures:\n\n---- supervisor::kill_stuck_worker "
     b"stdout ----\nthread 'supervisor::kill_stuck_worker' panicked at src/supervisor.rs:88:9:\nworker exited with "
     b"signal: 9 (SIGKILL) before the grace period\n", {}),
    (b"[ RUN      ] Watchdog.KillsHungChild\nchild failed: signal: 9 (SIGKILL)\n"
     b"[  FAILED  ] Watchdog.KillsHungChild (12 ms)\n", {}),
    # a remote .NET service's own OutOfMemoryException in its 500 response
    (b"System.Net.Http.HttpRequestException: Response status code does not indicate success: 500 (Internal Server "
     b"Error). Body: System.OutOfMemoryException: Insufficient memory to continue the execution of the program.\n", {}),
    # a test harness's own time limit on a memory-named test
    (b"FAILED tests/test_memory_pool.py::test_memory_pool_grow - Failed: Timeout >60.0s\n", {}),
])
def test_eighth_pass_traps_are_never_resized(taxonomy, trace, extra):
    check_trap(taxonomy, trace, extra)


@pytest.mark.parametrize("line,code", [
    (b"##[error]Bash exited with code '137'.\n", 137),
    (b"##[error]PowerShell exited with code '1'.\n", 1),
    (b"##[error]Cmd.exe exited with code '2'.\n", 2),
    # other CI systems' own result lines (travis-build, CircleCI, Buildkite, Jenkins Pipeline, TeamCity)
    (b"The command \"./ci/build.sh --release\" exited with 137.\n", 137),
    (b"The command \"pip install -e .\" failed and exited with 1 during .\n\nYour build has been stopped.\n", 1),
    (b"Exited with code exit status 137\n", 137),
    (b"Exited with code 143\n", 143),
    (b"Exited with status 137\n", 137),
    (b"ERROR: script returned exit code 137\nFinished: FAILURE\n", 137),
    (b"[12:00:01]W:\t [Step 2/3] Process exited with code 137\n", 137),
    (b"Failing command: make test\nExit code: 137\nOutput:\n", 137),
])
def test_azure_task_exit_code_is_read(line, code):
    facts = JobFacts(job_id=1, name="build")
    got, src = effective_exit_code(facts, TraceText(b"Running tests\n" + line), None)
    assert got == code, src


def test_azure_task_137_reaches_the_exit_code_stage(taxonomy):
    # an Azure job's SIGKILL after a compile, with the exit code only in the task's summary: the 137
    # convention applies as it does to GitLab's and GitHub's lines
    f = JobFacts(job_id=1, name="build", variables={"KUBERNETES_MEMORY_LIMIT": "4Gi"})
    v = classify(f, b"$ make -j8\n##[error]Bash exited with code '137'.\n", taxonomy)
    assert v.family.value == "oom", (v.rule, v.evidence)
    assert v.rule.startswith("sigkill"), v.rule


def test_a_quoted_exit_sentence_is_not_an_exit_code():
    facts = JobFacts(job_id=1, name="build")
    got, _ = effective_exit_code(facts, TraceText(b"the docs say Bash exited with code 5 when no tests ran\n"), None)
    assert got is None
    got, _ = effective_exit_code(facts, TraceText(b"the command exited with an error\n"), None)
    assert got is None


def test_another_ci_systems_137_reaches_the_exit_code_stage(taxonomy):
    # a Travis job SIGKILLed in its build script: the 137 convention applies as on GitLab
    f = JobFacts(job_id=1, name="build", variables={"KUBERNETES_MEMORY_LIMIT": "4Gi"})
    v = classify(f, b"$ ./gradlew assemble\nThe command \"./gradlew assemble\" exited with 137.\n", taxonomy)
    assert v.family.value == "oom" and v.rule.startswith("sigkill"), (v.rule, v.evidence)
