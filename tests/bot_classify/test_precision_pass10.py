"""Issue 11, tenth pass (precision): the red-team's wasted re-runs, fixed by mechanism.

Each case of FIXED is a deterministic failure (or a time limit) the classifier re-ran before this
pass, rewritten from the tool's own output format (other tools, hosts, paths and numbers than the
red-team's probes); each case of KEPT is the real transient failure or OOM kill next to it, which
must keep its retry or resize.  docs/taxonomy.md, "Tenth pass: precision", lists the mechanisms.
"""

from __future__ import annotations

import pytest

from retry_bot.classify.structure import drop_post_failure_output
from retry_bot.decide import Action

from .conftest import decided

SCRIPT = b"section_start:1710000000:step_script\r\x1b[0KExecuting \"step_script\" stage of the job script\n"
END = b"section_end:1710000300:step_script\r\x1b[0K\n"


def _section(name: str, header: str, body: bytes) -> bytes:
    return (f"section_start:1710000301:{name}\r\x1b[0K{header}\n".encode() + body
            + f"section_end:1710000302:{name}\r\x1b[0K\n".encode())


def _job(cmd: str, body: bytes, code: int = 1, after: bytes = b"") -> bytes:
    return (SCRIPT + f"\x1b[32;1m$ {cmd}\x1b[0;m\n".encode() + body + END + after
            + f"ERROR: Job failed: exit code {code}\n".encode())


MAKE_FAIL = b"src/io.c:41:9: error: 'fd' undeclared (first use in this function)\nmake: *** [Makefile:12: all] Error 1\n"

# (id, trace, family wanted (None: any but oom/infrastructure), action wanted, extra facts)
FIXED = [
    # A: after_script / failed-job uploads are not the cause
    ("A-after-script-dns", _job("make", MAKE_FAIL, 2, _section(
        "after_script", "Running after_script",
        b"\x1b[32;1m$ curl -fsS -X POST \"$TEAMS_WEBHOOK\" -d @msg.json\x1b[0;m\n"
        b"curl: (6) Could not resolve host: outlook.office.com\n")), "build_error", Action.NONE, {"exit_code": 2}),
    ("A-after-script-5xx", _job("make", MAKE_FAIL, 2, _section(
        "after_script", "Running after_script",
        b"\x1b[32;1m$ ./ci/report.sh\x1b[0;m\nreport: PUT https://dash.example.net/api/runs/7 -> 502 Bad Gateway\n")),
     "build_error", Action.NONE, {"exit_code": 2}),
    ("A-failed-upload-fatal", _job("make", MAKE_FAIL, 2, _section(
        "upload_artifacts_on_failure", "Uploading artifacts for failed job",
        b"Uploading artifacts...\ncoverage/: found 40 matching artifact files and directories\n"
        b"ERROR: Uploading artifacts as \"archive\" to coordinator... 503 Service Unavailable  id=7 status=503\n"
        b"FATAL: invalid argument\n")), "build_error", Action.NONE, {"exit_code": 2}),
    ("A-quoted-after-script", b"Executing \"step_script\" stage of the job script\n$ make\n" + MAKE_FAIL
     + b"Running after_script\nRunning after script...\n$ ./notify.sh\n"
       b"curl: (7) Failed to connect to chat.example.org port 443: Connection timed out\n"
       b"ERROR: Job failed: exit code 2\n", "build_error", Action.NONE, {"exit_code": 2}),
]

FIXED += [
    # G: coreutils timeout(1) reporting the signal of its own time limit
    ("G-preserve-status-143", _job("timeout --preserve-status 20m make test-e2e",
                                   b"e2e: 31 of 120 scenarios done\n", 143), "timeout", Action.NONE, {"exit_code": 143}),
    ("G-signal-kill-137", _job("timeout --signal=KILL 45m ./ci/soak.sh", b"soak: still running (2690s)\n", 137),
     "timeout", Action.NONE, {"exit_code": 137}),
    ("G-kill-after-137", _job("timeout -k 30s 10m cargo test --release", b"test big::roundtrip has been running for over 60 seconds\n",
                              137), "timeout", Action.NONE, {"exit_code": 137}),
]

FIXED += [
    # B: network words in lint / type-check findings, the job's own services, 4xx answers, TLS on a plain port
    ("B-flake8-names-timeout", _job("flake8 app", b"app/fetch.py:7:1: F401 'requests.exceptions.ConnectTimeout' imported "
                                    b"but unused\napp/fetch.py:8:1: F401 'urllib3.exceptions.ConnectTimeoutError' imported but unused\n"),
     "build_error", Action.NONE, {}),
    ("B-tsc-string-type", _job("npx tsc -p .", b"lib/errors.ts(40,3): error TS2322: Type '\"ECONNRESET\"' is not assignable "
                               b"to type 'RetryableCode'.\n"), "build_error", Action.NONE, {}),
    ("B-localhost-503", _job("./smoke.sh", b"smoke: GET http://localhost:3000/ready -> 503 Service Unavailable\nsmoke: giving up\n"),
     "build_error", Action.NONE, {}),
    ("B-local-dial-timeout", _job("go test ./e2e/...", b"    e2e_test.go:31: dial tcp [::1]:5432: i/o timeout\n"),
     "build_error", Action.NONE, {}),
    ("B-status-assertion", _job("npm test", b"  1) GET /orders\n     AssertionError: GET /orders expected 201, got 503 "
                                b"Service Unavailable (upstream misconfigured)\n"), "build_error", Action.NONE, {}),
    ("B-urllib-404", _job("python tools/get_fixtures.py", b"urllib.error.HTTPError: HTTP Error 404: Not Found\n"),
     "config_error", Action.NONE, {}),
    ("B-curl22-422", _job("curl -fsSL -o sdk.zip https://dl.example.com/sdk.zip",
                          b"curl: (22) The requested URL returned error: 422\n"), "config_error", Action.NONE, {}),
    ("B-git-413", _job("git push origin HEAD:release", b"error: RPC failed; HTTP 413 curl 22 The requested URL returned "
                       b"error: 413\nsend-pack: unexpected disconnect while reading sideband packet\n"
                       b"fatal: the remote end hung up unexpectedly\n"), "config_error", Action.NONE, {}),
    ("B-apt-404", _job("apt-get install -y libpq5", b"Err:1 http://archive.ubuntu.com/ubuntu jammy-updates/main amd64 libpq5 "
                       b"amd64 14.9-0ubuntu0.22.04.1\n  404  Not Found [IP: 185.125.190.36 80]\nE: Failed to fetch "
                       b"http://archive.ubuntu.com/ubuntu/pool/main/p/postgresql-14/libpq5_14.9-0ubuntu0.22.04.1_amd64.deb  "
                       b"404  Not Found [IP: 185.125.190.36 80]\n"), "config_error", Action.NONE, {}),
    ("B-helm-404", _job("helm dependency build chart/", b"Error: could not download https://charts.example.org/redis-0.0.9.tgz: "
                        b"failed to fetch https://charts.example.org/redis-0.0.9.tgz : 404 Not Found\n"),
     "config_error", Action.NONE, {}),
    ("B-maven-409", _job("mvn deploy", b"[ERROR] Failed to execute goal org.apache.maven.plugins:maven-deploy-plugin:3.1.1:deploy "
                         b"(default-deploy) on project svc: Failed to deploy artifacts: Could not transfer artifact "
                         b"org.example:svc:pom:2.0.1 from/to releases (https://repo.example.org/releases/): status code: 409, "
                         b"reason phrase: Conflict (409) -> [Help 1]\n"), "config_error", Action.NONE, {}),
    ("B-curl35-plain-port", _job("curl -fsS https://artifacts.internal:8081/health",
                                 b"curl: (35) OpenSSL/3.0.13: error:0A00010B:SSL routines::wrong version number\n"),
     "config_error", Action.NONE, {}),
]

FIXED += [
    # C: LLVM lit's transcript of a test feeding a malformed object on purpose
    ("C-lit-malformed-object", _job("ninja check-lld", b"FAIL: lld :: ELF/invalid/short-header.s (812 of 3104)\n"
                                    b"# .---command stderr------------\n# | ld.lld: error: short.o: truncated or malformed object "
                                    b"(file too small to be an ELF file)\n# `-----------------------------\n"
                                    b"Failed Tests (1):\n  lld :: ELF/invalid/short-header.s\n"), "build_error", Action.NONE, {}),
    # E: 'Killed' in a program's sentence; SIGKILL and 137 on a test assertion's line
    ("E-app-killed-sentence", _job("./integration.sh", b"10:14:07 proxy: Killed stale upstream session 4411\n"
                                   b"integration: 3 checks failed\n"), None, Action.NONE, {}),
    # (family None since the twenty-seventh pass: no rule reads this check's own sentence; the naive Bayes named it
    # build_error, then config_error once ZA trained it; the logistic regression that replaced it leans oom below
    # min_probability, so unknown stays; the policy never acts on any of them)
    ("E-assert-sigkill", _job("./ci/checks.sh", b"[check] watchdog stops a child killed by SIGKILL: expected 0 restarts, got 2\n"),
     None, Action.NONE, {}),
    ("E-assert-137", _job("make check", b"tests/kill.sh: case 'term-group': want exit status 137, got 0\n"
                          b"make: *** [Makefile:88: check] Error 1\n", 2), "build_error", Action.NONE, {"exit_code": 2}),
    # F: a RUN step's test asserting on a child's 137 (buildkit plain progress; the classic builder)
    ("F-buildkit-assert-137", _job("docker build --progress=plain -t svc .", b"#9 [5/6] RUN cargo test\n"
                                   b"#9 12.40 thread 'reaper' panicked at tests/reap.rs:22:5: expected exit code 137, got 0\n"
                                   b"#9 ERROR: process \"/bin/sh -c cargo test\" did not complete successfully: exit code: 101\n"),
     "build_error", Action.NONE, {}),
    ("F-classic-assert-137", _job("docker build -t svc .", b"Step 6/7 : RUN ./selftest\n ---> Running in 4f1e\n"
                                  b"selftest: kill-group: expected exit status 137 from worker, got 1\n"
                                  b"The command '/bin/sh -c ./selftest' returned a non-zero code: 1\n"), "build_error", Action.NONE, {}),
]

FIXED += [
    # D: OOM words in a test's assertion, a fixture string, a remote server's error body, a Debug-printed error
    ("D-assert-oomkilled", _job("go test ./pkg/status/...", b"    classify_test.go:19: got phase \"Failed\", expected "
                                b"OOMKilled for pod worker-0\n--- FAIL: TestClassify (0.00s)\nFAIL\n"), "build_error", Action.NONE, {}),
    ("D-fixture-oom-killer", _job("pytest tests/test_dmesg.py", b"    sample = '[ 8812.004511] postgres invoked oom-killer: "
                                  b"gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0'\n"
                                  b"E   AssertionError: assert None == 'postgres'\n"), "build_error", Action.NONE, {}),
    ("D-array-vm-limit", _job("./gradlew test", b"Exception in thread \"main\" java.lang.OutOfMemoryError: Requested array size "
                              b"exceeds VM limit\n\tat java.base/java.util.Arrays.copyOf(Arrays.java:3537)\n"), None, Action.NONE, {}),
    ("D-remote-heap", _job("pytest tests/it", b"E   opensearchpy.exceptions.TransportError: TransportError(500, "
                           b"'exception', 'java.lang.OutOfMemoryError: Java heap space')\n"), None, Action.NONE, {}),
    ("D-rust-debug-enomem", _job("cargo test", b"---- alloc::huge_map stdout ----\nthread 'alloc::huge_map' panicked at "
                                 b"tests/alloc.rs:14:40:\ncalled `Result::unwrap()` on an `Err` value: Os { code: 12, kind: "
                                 b"OutOfMemory, message: \"Cannot allocate memory\" }\n"), None, Action.NONE, {}),
]

FIXED += [
    # H: runner/platform words in the job's own output
    ("H-app-log-evicted", _job("./e2e.sh", b"2025-03-02T08:00:09Z WARN scheduler: pod api-7f9 was evicted from node-b, requeueing\n"
                               b"e2e: 2 scenarios failed\n"), None, Action.NONE, {}),
    ("H-kubectl-get-pods-row", _job("kubectl -n review get pods", b"NAME                   READY   STATUS             RESTARTS   AGE\n"
                                    b"shop-5c8d7b9f4-qw2lz   0/1     ErrImagePull       0          40s\n"), None, Action.NONE, {}),
    ("H-mock-agent-lost", _job("go test ./ci/...", b"    runner_test.go:88: output: step 3: Exited with status -1 (agent lost)\n"
                               b"--- FAIL: TestRetryPolicy (0.01s)\nFAIL\n"), None, Action.NONE, {}),
    ("H-assert-channel", _job("mvn test", b"org.opentest4j.AssertionFailedError: expected: <Unexpected termination of the channel> "
                              b"but was: <null>\n"), None, Action.NONE, {}),
    ("H-webhook-denied", _job("kubectl apply -f deploy/", b"Error from server (InternalError): error when creating \"deploy/job.yaml\": "
                              b"Internal error occurred: failed calling webhook \"policy.gatekeeper.sh\": admission webhook "
                              b"\"policy.gatekeeper.sh\" denied the request: [require-labels] missing label team\n"),
     None, Action.NONE, {}),
    ("H-app-lost-communication", _job("make -j4", b"[ 71%] Building CXX object src/CMakeFiles/core.dir/a.cpp.o\n"
                                      b"client: lost communication with the server (handshake version 2, expected 3)\n"),
     None, Action.NONE, {}),
]

def _sysfail(msg: bytes) -> bytes:
    return b'Preparing the "docker" executor\nERROR: Job failed (system failure): ' + msg + b"\n"


FIXED += [
    # K: runner system failures that are the runner's or the image's configuration
    ("K-bind-missing", _sysfail(b'Error response from daemon: invalid mount config for type "bind": bind source path does not '
                                b'exist: /opt/cache (docker.go:512:0s)'), "config_error", Action.NONE,
     {"failure_reason": "runner_system_failure", "exit_code": None}),
    ("K-no-shell", _sysfail(b'Error response from daemon: OCI runtime create failed: runc create failed: unable to start container '
                            b'process: exec: "bash": executable file not found in $PATH: unknown'), "config_error", Action.NONE,
     {"failure_reason": "runner_system_failure", "exit_code": None}),
    ("K-pod-security", _sysfail(b'prepare environment: setting up build pod: pods "runner-x1-project-7-concurrent-0" is forbidden: '
                                b'violates PodSecurity "baseline:latest": hostPath volumes (volume "docker-sock")'),
     "config_error", Action.NONE, {"failure_reason": "runner_system_failure", "exit_code": None}),
]

GET_SOURCES = b"section_start:1710000001:get_sources\r\x1b[0KGetting source from Git repository\n"


def _get_sources(body: bytes) -> bytes:
    return GET_SOURCES + body + b"section_end:1710000009:get_sources\r\x1b[0K\nERROR: Job failed: exit code 1\n"


FIXED += [
    # I: the sources' and the downloads' own configuration errors, before the structural fallbacks
    ("I-submodule-no-url", _get_sources(b"Updating/initializing submodules recursively...\n"
                                        b"fatal: No url found for submodule path 'vendor/proto' in .gitmodules\n"),
     "config_error", Action.NONE, {}),
    ("I-lfs-404", _get_sources(b"Error downloading object: data/weights.pt (9ab31c0): Smudge error: Error downloading "
                               b"data/weights.pt (9ab31c07): [9ab31c07] Object does not exist on the server: [404] Object does not "
                               b"exist on the server\nerror: external filter 'git-lfs filter-process' failed\n"), "config_error",
     Action.NONE, {}),
    ("I-wget-error-404", _job("wget https://dl.example.net/cli-0.0.1.tgz", b"HTTP request sent, awaiting response... 404 Not Found\n"
                              b"2025-01-09 07:12:44 ERROR 404: Not Found.\n", 8), "config_error", Action.NONE, {"exit_code": 8}),
    ("I-busybox-wget-403", _job("docker build -t t .", b"#4 [2/3] RUN wget -q https://dl.example.net/cli.tgz\n"
                                b"#4 0.51 wget: server returned error: HTTP/1.1 403 Forbidden\n#4 ERROR: process \"/bin/sh -c wget -q "
                                b"https://dl.example.net/cli.tgz\" did not complete successfully: exit code: 8\n"),
     "config_error", Action.NONE, {}),
    # L: a full /dev/shm is the executor's fixed tmpfs size
    ("L-dev-shm-full", _job("python -m pytest tests/loader", b"E   OSError: [Errno 28] No space left on device: "
                            b"'/dev/shm/joblib_memmapping_folder_81_3f2'\n"), "config_error", Action.NONE, {}),
]

FIXED += [
    # excerpt-only exit codes: TeamCity's line at line start; Travis's first failed command, not a teardown's 143
    ("X-teamcity-unanchored", b"  \xe2\x97\x8f pool \xe2\x80\xba respawns a crashed worker\n    Expected: 1\n    Received: 0\n"
     b"pool: child process exited with code 137 (simulated crash)\n", None, Action.NONE, {"exit_code": None}),
    ("X-travis-teardown-143", b"$ ./gradlew check\nBUILD FAILED in 2m 3s\nThe command \"./gradlew check\" exited with 1.\n"
     b"$ docker compose down\nThe command \"docker compose down\" exited with 143.\n", None, Action.NONE, {"exit_code": None}),
    # the red-team's missed OOM: Surefire's fork SIGKILLed, reported with 'There are test failures.'
    ("R-surefire-fork-137", _job("./mvnw -B verify", b"[ERROR] Failed to execute goal org.apache.maven.plugins:maven-failsafe-plugin:"
                                 b"3.1.2:integration-test (default) on project api: There are test failures.\n"
                                 b"[ERROR] The forked VM terminated without properly saying goodbye. VM crash or System.exit called?\n"
                                 b"[ERROR] Process Exit Code: 137\n"), "oom", Action.RESIZE, {}),
]

FIXED += [
    # J: the job's own checkout of a revision its clone lacks (GitLab checks the pipeline's commit out in get_sources)
    ("J-script-checkout", _job("git checkout \"$RELEASE_SHA\"", b"fatal: reference is not a tree: "
                               b"0d1e2f3a4b5c6d7e8f90a1b2c3d4e5f6a7b8c9d0\n", 128), "config_error", Action.NONE, {"exit_code": 128}),
    # TLS: a certificate for another host
    ("T-x509-other-host", _job("helm repo add infra https://charts.infra.example", b"Error: looks like \"https://charts.infra."
                               b"example\" is not a valid chart repository or cannot be reached: Get \"https://charts.infra.example/"
                               b"index.yaml\": tls: failed to verify certificate: x509: certificate is valid for *.apps.example, "
                               b"apps.example, not charts.infra.example\n"), "config_error", Action.NONE, {}),
    # D: a thread limit, not memory
    ("D-native-thread", _job("./gradlew test", b"Exception in thread \"pool-3-thread-1\" java.lang.OutOfMemoryError: unable to "
                             b"create native thread: possibly out of memory or process/resource limits reached\n"),
     None, Action.NONE, {}),
]

KEPT = [
    # J: another CI system's checkout of the pushed commit keeps the fetch-race reading
    ("J-ci-checkout-race", b"Run git checkout $GITHUB_SHA\nfatal: reference is not a tree: 9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d\n"
     b"##[error]Process completed with exit code 128.\n", "infrastructure", Action.RETRY, {"exit_code": None}),
    ("T-x509-clock", _job("go mod download", b"go: example.org/m@v1.0.0: Get \"https://proxy.golang.org/example.org/m/@v/v1.0.0.mod\""
                          b": tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time "
                          b"2019-01-01T00:00:05Z is before 2024-03-01T00:00:00Z\n"), "infrastructure", Action.RETRY, {}),
    # the exit-code conventions still read where the CI systems print them
    ("X-teamcity-own-line", b"[10:02:11] [Step 2/3] Starting: make -j8\n[10:09:40]W: [Step 2/3] Process exited with code 137\n",
     "oom", Action.RESIZE, {"exit_code": None}),
    ("X-travis-first-137", b"$ make -j8\nThe command \"make -j8\" exited with 137.\n$ ./report.sh\n"
     b"The command \"./report.sh\" exited with 1.\n", "oom", Action.RESIZE, {"exit_code": None}),
    ("R-surefire-tests-failed", _job("./mvnw -B verify", b"[ERROR] Tests run: 40, Failures: 2, Errors: 0, Skipped: 0\n"
                                     b"[ERROR] Failed to execute goal org.apache.maven.plugins:maven-surefire-plugin:3.1.2:test "
                                     b"(default-test) on project api: There are test failures.\n"), "build_error", Action.NONE, {}),
    # I/L: the transient counterparts
    ("I-wget-error-503", _job("wget https://dl.example.net/cli-1.0.tgz", b"2025-01-09 07:12:44 ERROR 503: Service Unavailable.\n", 8),
     "infrastructure", Action.RETRY, {"exit_code": 8}),
    ("I-lfs-batch-502", _get_sources(b"batch response: Fatal error: Server error: https://gitlab.example.com/g/p.git/info/lfs/"
                                     b"objects/batch (HTTP 502)\n"), "infrastructure", Action.RETRY, {}),
    ("L-disk-full", _job("make -j4", b"/usr/bin/ld: final link failed: No space left on device\n"), "infrastructure",
     Action.RETRY, {}),
    # H/K: the platforms' own reports
    ("H-buildkite-agent-lost", b"~~~ Running commands\n$ make test\n2024-06-01 10:00:00 Exited with status -1 (agent lost)\n",
     "infrastructure", Action.RETRY, {"exit_code": None}),
    ("H-jenkins-channel", b"[Pipeline] sh\n+ ./gradlew build\njava.io.IOException: Unexpected termination of the channel\n"
     b"\tat hudson.remoting.SynchronousCommandTransport$ReaderThread.run\n", "infrastructure", Action.RETRY, {"exit_code": None}),
    ("H-kubectl-apiserver-503", _job("kubectl apply -f deploy/", b"Error from server (ServiceUnavailable): the server is currently "
                                     b"unable to handle the request\n"), "infrastructure", Action.RETRY, {}),
    ("H-runner-image-pull", b"Preparing the \"kubernetes\" executor\nWARNING: Event retrieved from the cluster: Error: ImagePullBackOff\n"
     b"ERROR: Job failed (system failure): prepare environment: waiting for pod running: pulling image \"registry.example.org/ci/"
     b"builder:3\": image pull failed: Back-off pulling image \"registry.example.org/ci/builder:3\"\n", "infrastructure",
     Action.RETRY, {"failure_reason": "runner_system_failure", "exit_code": None}),
    ("K-sysfail-other", _sysfail(b"Error response from daemon: Cannot connect to the Docker daemon: connection reset"),
     "infrastructure", Action.RETRY, {"failure_reason": "runner_system_failure", "exit_code": None}),
    # D: the same words where the kernel, the kubelet and the JVM print them
    ("D-kubelet-oomkilled", _job("make -j8", b"  CC lib/x.o\n", 137) .replace(b"ERROR: Job failed: exit code 137",
     b"ERROR: Job failed: command terminated with exit code 137, reason: 'OOMKilled'"), "oom", Action.RESIZE, {"exit_code": 137}),
    ("D-dmesg-oom-killer", _job("./run-bench.sh", b"[ 4411.902113] bench invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE"
                                b"|__GFP_COMP), order=0, oom_score_adj=0\n", 137), "oom", Action.RESIZE, {"exit_code": 137}),
    ("D-jvm-heap", _job("mvn -B verify", b"Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space\n"),
     "oom", Action.RESIZE, {}),
    ("D-enomem-display", _job("cargo build --release", b"error: could not exec the linker `cc`\n  = note: Cannot allocate memory "
                              b"(os error 12)\n"), "oom", Action.RESIZE, {}),
    # C: a truncated object outside a test transcript is still the race
    ("C-ld-truncated", _job("make -j16", b"/usr/bin/ld: obj/parse.o: file not recognized: file truncated\n"
                            b"collect2: error: ld returned 1 exit status\n"), "infrastructure", Action.RETRY, {}),
    # E/F: the shell's and the tools' own reports of a SIGKILL
    ("E-bash-killed", _job("./build.sh", b"./build.sh: line 12:  4242 Killed                  g++ -O2 -c big.cpp\n", 137),
     "oom", Action.RESIZE, {"exit_code": 137}),
    ("E-go-signal-killed", _job("go test ./...", b"FAIL\texample.org/pkg [build failed]\n"
                                b"go: error running compile: signal: killed\n"), "oom", Action.RESIZE, {}),
    ("F-yarn-137-in-step", _job("docker build -t web .", b"#12 [7/8] RUN yarn build\n#12 88.1 Command failed with exit code 137.\n"
                                b"#12 ERROR: process \"/bin/sh -c yarn build\" did not complete successfully: exit code: 1\n"),
     "oom", Action.RESIZE, {}),
    # B: the same clients meeting a real outage
    ("B-curl22-503", _job("curl -fsSL -o sdk.zip https://dl.example.com/sdk.zip",
                          b"curl: (22) The requested URL returned error: 503\n"), "infrastructure", Action.RETRY, {}),
    ("B-curl22-429", _job("curl -fsSL -o sdk.zip https://dl.example.com/sdk.zip",
                          b"curl: (22) The requested URL returned error: 429\n"), "infrastructure", Action.RETRY, {}),
    ("B-urllib-502", _job("python tools/get_fixtures.py", b"urllib.error.HTTPError: HTTP Error 502: Bad Gateway\n"),
     "infrastructure", Action.RETRY, {}),
    ("B-real-read-timeout", _job("pip install -r requirements.txt", b"pip._vendor.urllib3.exceptions.ReadTimeoutError: "
                                 b"HTTPSConnectionPool(host='files.pythonhosted.org', port=443): Read timed out.\n"),
     "infrastructure", Action.RETRY, {}),
    ("B-remote-dial-timeout", _job("go mod download", b"go: example.org/x@v1.2.0: Get \"https://proxy.golang.org/example.org/x/@v/"
                                   b"v1.2.0.zip\": dial tcp 142.250.74.17:443: i/o timeout\n"), "infrastructure", Action.RETRY, {}),
    ("B-remote-502", _job("./publish.sh", b"publish: PUT https://uploads.example.com/v1/pkg -> 502 Bad Gateway\n"),
     "infrastructure", Action.RETRY, {}),
    # G: a 137 under a plain timeout (TERM) is the kernel's kill of the child; a bare 143 stays external
    ("G-plain-timeout-137", _job("timeout 2h make -j8", b"  CXX      src/big.o\n", 137), "oom", Action.RESIZE,
     {"exit_code": 137}),
    ("G-no-timeout-143", _job("./deploy.sh", b"deploy: waiting for rollout\n", 143), "infrastructure", Action.RETRY,
     {"exit_code": 143}),
    # A: the same network errors in the script itself are still the cause
    ("A-script-dns", _job("./fetch-deps.sh", b"curl: (6) Could not resolve host: deps.example.org\n", 6,
                          _section("after_script", "Running after_script", b"\x1b[32;1m$ echo done\x1b[0;m\ndone\n")),
     "infrastructure", Action.RETRY, {"exit_code": 6}),
    ("A-success-upload-5xx", _job("make", b"build ok\n", 1, _section(
        "upload_artifacts_on_success", "Uploading artifacts for successful job",
        b"Uploading artifacts...\nERROR: Uploading artifacts as \"archive\" to coordinator... 502 Bad Gateway  id=9\n"
        b"FATAL: invalid argument\n")), "infrastructure", Action.RETRY, {}),
]


@pytest.mark.parametrize("case,trace,family,action,extra", FIXED, ids=[c[0] for c in FIXED])
def test_wasted_reruns_fixed(taxonomy, case, trace, family, action, extra):
    """``family`` None: nothing specific is left on the trace; any verdict but a re-run is right."""
    verdict, got = decided(trace, taxonomy, **extra)
    if family is None:
        assert got == action, (case, verdict.rule)
        if verdict.rule.startswith("learned:"):
            # thirteenth pass: a learned guess is allowed a retryable family here as long as the decision stays
            # none (checked above by ``got``: the shipped policy resizes no learned oom, and since session 24
            # retries a learned infrastructure verdict once, which would fail this case).
            # Retrained with L's Kubernetes cases, the model reads H-app-log-evicted's 'pod ... was evicted'
            # as infrastructure (p=0.96); no rule does (spot-reclamation skips a log record with a level tag)
            assert verdict.confidence == "weak" and got == Action.NONE, (case, verdict.rule)
        else:
            assert verdict.family.value not in ("oom", "infrastructure"), (case, verdict.rule)
    else:
        assert (verdict.family.value, got) == (family, action), (case, verdict.rule, verdict.evidence)


@pytest.mark.parametrize("case,trace,family,action,extra", KEPT, ids=[c[0] for c in KEPT])
def test_real_transients_and_ooms_kept(taxonomy, case, trace, family, action, extra):
    verdict, got = decided(trace, taxonomy, **extra)
    assert (verdict.family.value, got) == (family, action), (case, verdict.rule, verdict.evidence)


def test_post_failure_output_dropped_markers_kept():
    raw = _job("make", MAKE_FAIL, 2, _section("after_script", "Running after_script", b"curl: (6) x\n"))
    out = drop_post_failure_output(raw)
    assert b"curl: (6)" not in out
    assert b"section_start:1710000301:after_script" in out and b"section_end:1710000302:after_script" in out
    assert out.endswith(b"ERROR: Job failed: exit code 2\n") and MAKE_FAIL in out


def test_post_failure_output_untouched_without_such_sections():
    raw = _job("make", MAKE_FAIL, 2)
    assert drop_post_failure_output(raw) is raw
