"""Issue 11, ninth pass: blind set J's misses, generalised by mechanism (precision first: which rule or
convention sent a deterministic failure to a re-run) and per message source (each rule's description
in config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
paths, sizes and numbers. Each rule has a positive, a near miss that must NOT take it, and the traps
around it stay right; the decision the shipped policy takes is checked too.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule, check_trap, decided

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- a CI system stopping the step on purpose: Jenkins' durable-task stop(), then SIGTERM's 143
    (b"[Pipeline] sh\n+ ./gradlew integrationTest\n> Task :app:integrationTest\n"
     b"Sending interrupt signal to process\n"
     b"/var/lib/jenkins/workspace/app@tmp/durable-0a1b2c3d/script.sh: line 1:  4711 Terminated  ./gradlew integrationTest\n"
     b"script returned exit code 143\n", "timeout", "ci-step-interrupted", Action.NONE, {"exit_code": 143}),
    (b"10:42:07  Cancelling nested steps due to timeout\n10:42:07  Sending interrupt signal to process\n"
     b"10:42:09  script returned exit code 143\n", "timeout", "ci-step-interrupted", Action.NONE, {"exit_code": 143}),
    (b"~~~ Running commands\n$ make integration\n# Received cancellation signal, interrupting\nTerminated\n"
     b"Error: The command was interrupted by a signal: terminated\n", "timeout", "ci-step-interrupted", Action.NONE,
     {"exit_code": 143}),
    # --- a JVM server's own heap, in its log4j/logback layout (a test cluster node, an IT service)
    (b"2023-11-02T08:15:31,044 INFO [main] org.example.search.node.Node - starting ...\n"
     b"2023-11-02T08:15:33,910 WARN [gc-monitor] org.example.search.Monitor - [gc][12] overhead, spent [2.1s]\n"
     b"java.lang.OutOfMemoryError: Java heap space\n"
     b"Terminating due to java.lang.OutOfMemoryError: Java heap space\n",
     "build_error", "jvm-server-log-oom", Action.NONE, {}),
    (b"[2022-06-14 17:02:11,377][INFO ][o.e.n.Node               ] [it-node-0] started\n"
     b"[2022-06-14 17:02:40,902][WARN ][o.e.i.b.HierarchyCircuitBreakerService] [it-node-0] attempting to trigger G1GC\n"
     b"Exception in thread \"elasticsearch[it-node-0][search][T#3]\" java.lang.OutOfMemoryError: Java heap space\n",
     "build_error", "jvm-server-log-oom", Action.NONE, {}),
    # --- hosted CI platforms' own memory-limit reports
    (b"+ yarn jest --ci\nContainer 'Build' exceeded memory limit.\n", "oom", "ci-platform-memory-limit", Action.RESIZE, {}),
    (b"+ docker build -t app .\nService 'docker' exceeded memory limit.\n", "oom", "ci-platform-memory-limit", Action.RESIZE, {}),
    (b"#!/bin/bash -eo pipefail\nmake -j16 all\nYour build has exceeded the memory limit of 8G on 1 container.\n",
     "oom", "ci-platform-memory-limit", Action.RESIZE, {}),
    # --- the Boehm collector's fatal heap-growth failures (Nix's evaluator, Guile...)
    (b"evaluating jobset...\nGC Warning: Failed to expand heap by 8589934592 bytes\nCan't start up: not enough memory\n",
     "oom", "runtime-heap-exhausted", Action.RESIZE, {}),
    (b"guild compile -o out.go module.scm\nGC Warning: Out of Memory! Heap size: 3900 MiB. Returning NULL!\n",
     "oom", "runtime-heap-exhausted", Action.RESIZE, {}),
    # --- Maven's error reporter around the heap messages
    (b"[INFO] BUILD FAILURE\n[ERROR] Java heap space -> [Help 1]\n", "oom", "runtime-heap-exhausted", Action.RESIZE, {}),
    (b"[INFO] Final Memory: 52M/610M\n[ERROR] GC overhead limit exceeded -> [Help 1]\n",
     "oom", "runtime-heap-exhausted", Action.RESIZE, {}),
    # --- the job's docker client names a daemon host nobody serves (configuration)
    (b"$ docker login -u ci registry.example.org\n"
     b"error during connect: Post \"http://docker:2375/v1.41/auth\": dial tcp: lookup docker on 10.96.0.10:53: no such host\n",
     "config_error", "docker-client-daemon-host-unresolved", Action.NONE, {}),
    (b"$ docker build -t app .\nCannot connect to the Docker daemon at tcp://dind:2376. Is the docker daemon running?: "
     b"dial tcp: lookup dind: no such host\n", "config_error", "docker-client-daemon-host-unresolved", Action.NONE, {}),
    (b"$ docker push app:1\nerror during connect: Get https://0.0.0.0:2376/v1.24/version: "
     b"dial tcp 0.0.0.0:2376: connect: connection refused\n",
     "config_error", "docker-client-daemon-host-unresolved", Action.NONE, {}),
    # --- a client dialling 0.0.0.0 (a listen address) reaches the job's own host
    (b"$ ./wait-for-api\nGet \"http://0.0.0.0:8080/health\": dial tcp 0.0.0.0:8080: connect: connection refused\n",
     "build_error", "local-service-unavailable", Action.NONE, {}),
    # --- gocheck's assertion report: the compared values are the test's subject
    (b"----------------------------------------------------------------------\n"
     b"FAIL: api_test.go:120: APISuite.TestPullRetries\n\napi_test.go:131:\n    c.Assert(err, check.IsNil)\n"
     b"... value *url.Error = &url.Error{Op:\"Get\", Err:\"read tcp 10.1.2.3:443: read: connection reset by peer\"}\n\n",
     "build_error", "test-failure", Action.NONE, {}),
    (b"FAIL: resolve_test.go:44: S.TestLookup\n\nresolve_test.go:50:\n    c.Assert(out, check.Equals, \"ok\")\n"
     b"... obtained string = \"dial tcp: lookup registry.internal: no such host\"\n... expected string = \"ok\"\n",
     "build_error", "test-failure", Action.NONE, {}),
    # --- git's transport summary after the child's own cause: the cause decides
    (b"Cloning into 'vendor/lib'...\nHost key verification failed.\nfatal: The remote end hung up unexpectedly\n",
     "config_error", "ssh-config-refused", Action.NONE, {}),
    (b"remote: HTTP Basic: Access denied\nfatal: Authentication failed for 'https://git.example.org/grp/app.git/'\n"
     b"fatal: early EOF\n", "config_error", None, Action.NONE, {}),
    # ... and alone it is still the broken transfer
    (b"Fetching changes...\nremote: Counting objects: 48211, done.\nfatal: The remote end hung up unexpectedly\n"
     b"fatal: early EOF\nfatal: index-pack failed\n", "infrastructure", None, Action.RETRY, {}),
    # --- librepo's capitalised status line; yum's metalink check against a mirror mid-sync
    (b"Updating and loading repositories:\n>>> Status code: 503 for https://mirror.example.net/f41/x86_64/repodata/repomd.xml "
     b"(IP: 192.0.2.7)\n", "infrastructure", "http-5xx", Action.RETRY, {}),
    (b" * epel: mirror.example.edu\nhttps://mirror.example.edu/epel/8/Everything/x86_64/repodata/repomd.xml: "
     b"[Errno -1] repomd.xml does not match metalink for epel\nTrying other mirror.\n",
     "infrastructure", "os-package-manager-transient", Action.RETRY, {}),
    # --- a RUN step's 127: the image lacks the command (configuration), classic and buildkit wordings
    (b"Step 6/9 : RUN poetry install --no-root\n ---> Running in 0c1d2e3f4a5b\n/bin/sh: 1: poetry: not found\n"
     b"The command '/bin/sh -c poetry install --no-root' returned a non-zero code: 127\n",
     "config_error", "image-step-command-not-found", Action.NONE, {}),
    (b"#12 [build 3/6] RUN pnpm install\n#12 0.201 /bin/sh: pnpm: not found\n"
     b"ERROR: failed to solve: process \"/bin/sh -c pnpm install\" did not complete successfully: exit code: 127\n",
     "config_error", "image-step-command-not-found", Action.NONE, {}),
    # --- test harnesses' time limits: Twisted trial, CPython's faulthandler watchdog
    (b"[ERROR]\nTraceback (most recent call last):\nFailure: twisted.internet.defer.TimeoutError: "
     b"<myproj.test.test_rpc.RPCTests testMethod=test_roundtrip> (test_roundtrip) still running at 120.0 secs\n",
     "timeout", "test-harness-timeout-extra", Action.NONE, {}),
    (b"0:41:07 load avg: 3.10 [212/433] test_asyncio\ntest_sock_recv (test.test_asyncio.test_sock.SockTests) ... "
     b"Timeout (0:20:00)!\nThread 0x00007f1e2b3c4740 (most recent call first):\n"
     b"  File \"/build/Lib/selectors.py\", line 468 in select\n", "timeout", "test-harness-timeout-extra", Action.NONE, {}),
    # --- systemd's report of the kernel's kill in a unit's cgroup; binutils' BFD out of memory
    (b"Running as unit: run-r2f0c1.service\nrun-r2f0c1.service: A process of this unit has been killed by the OOM killer.\n",
     "oom", "kernel-oom-killer", Action.RESIZE, {}),
    (b"ci-build@7.service: Main process exited, code=killed, status=9/KILL\nci-build@7.service: Failed with result 'oom-kill'.\n",
     "oom", "kernel-oom-killer", Action.RESIZE, {}),
    (b"[100%] Linking CXX executable bin/server\n/usr/bin/x86_64-linux-gnu-ld.bfd: final link failed: memory exhausted\n"
     b"collect2: error: ld returned 1 exit status\n", "oom", "runtime-heap-exhausted", Action.RESIZE, {}),
    # --- GitHub's ssh server refusing the repository to the key (before git's 'Could not read from remote')
    (b"Cloning into 'infra'...\nERROR: Repository not found.\nfatal: Could not read from remote repository.\n",
     "config_error", "git-repository-refused", Action.NONE, {}),
    (b"ERROR: Permission to acme/site.git denied to deploy-key-ci.\nfatal: Could not read from remote repository.\n",
     "config_error", "git-repository-refused", Action.NONE, {}),
    # --- pip's own error codes for a package whose build failed
    (b"  note: This error originates from a subprocess, and is likely not a problem with pip.\n"
     b"error: legacy-install-failure\n\nx Encountered error while trying to install package.\n",
     "build_error", "python-package-build-failed", Action.NONE, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{i}-{p[2] or p[1]}" for i, p in enumerate(POSITIVE)])
def test_ninth_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must not decide, family expected or None, extra facts)
NEAR_MISSES = [
    # a 143 without the durable-task stop line stays the weak SIGTERM reading; a quoted sentence is not the stop
    (b"make check\nscript returned exit code 143\n", "ci-step-interrupted", "infrastructure", {"exit_code": 143}),
    (b"echo 'the plugin logs Sending interrupt signal to process when aborted'\n", "ci-step-interrupted", None, {}),
    # a build JVM's heap without a server log's layout is the job's (Gradle's --debug timestamps use a period)
    (b"2023-11-02T08:15:31.044+0000 [DEBUG] [org.gradle.launcher] Starting build\n"
     b"Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space\n", "jvm-server-log-oom", "oom", {}),
    (b"> Task :compileJava\njava.lang.OutOfMemoryError: Java heap space\n", "jvm-server-log-oom", "oom", {}),
    # a database's own memory limit, and a test named after one, are not the platform's
    (b"E   DB::Exception: Received from db:9000. DB::Exception: (total) memory limit exceeded: would use 9.1 GiB\n",
     "ci-platform-memory-limit", None, {}),
    (b"assert that the service reports exceeded memory limit for the tenant\n", "ci-platform-memory-limit", None, {}),
    # the Boehm collector's expansion warning alone: it retries and the program may go on
    (b"GC Warning: Failed to expand heap by 1048576 bytes\nerror: attribute 'foo' missing\n",
     "runtime-heap-exhausted", None, {}),
    # Maven's reporter with another message is a build error
    (b"[ERROR] Failed to execute goal on project app: Could not resolve dependencies -> [Help 1]\n",
     "runtime-heap-exhausted", None, {}),
    # the runner's own daemon failure stays infrastructure; a dind alias that resolves and refuses is starting up
    (b"ERROR: Preparation failed: error during connect: Get http://docker:2375/v1.40/info: dial tcp: lookup docker "
     b"on 10.0.0.2:53: no such host\n", "docker-client-daemon-host-unresolved", "infrastructure",
     {"failure_reason": "runner_system_failure"}),
    (b"$ docker info\nerror during connect: Get \"https://docker:2376/v1.41/info\": dial tcp 172.17.0.3:2376: "
     b"connect: connection refused\n", "docker-client-daemon-host-unresolved", "infrastructure", {}),
    # a network error outside gocheck's report is the network
    (b"... building the image\nError response from daemon: Get https://registry.example.org/v2/: "
     b"read tcp 10.0.0.5:41234->203.0.113.9:443: read: connection reset by peer\n", "test-failure",
     "infrastructure", {}),
    # a RUN step failing with another code stays the generic image-build failure
    (b"ERROR: failed to solve: process \"/bin/sh -c make test\" did not complete successfully: exit code: 2\n",
     "image-step-command-not-found", "build_error", {}),
    (b"The command '/bin/sh -c ./configure' returned a non-zero code: 1270\n", "image-step-command-not-found", None, {}),
    # a timeout word in a test's own assertion, and faulthandler's format quoted mid-line, are not the watchdog
    (b"FAIL: test_timeout_message (tests.test_util.T)\nAssertionError: 'Timeout (0:00:05)!' != 'Timeout'\n",
     "test-harness-timeout-extra", None, {}),
    # a unit that failed for another reason, bison's parser stack, a sentence about a repository
    (b"ci-build@7.service: Failed with result 'exit-code'.\n", "kernel-oom-killer", None, {}),
    (b"parse.y: grammar.c:1234: memory exhausted\n", "runtime-heap-exhausted", None, {}),
    (b"warning: ERROR: Repository not found. is printed when the key lacks access\n", "git-repository-refused", None, {}),
    # pip's subprocess error alone (a build-dependency download can end the same way) is not read as the build
    (b"error: subprocess-exited-with-error\n", "python-package-build-failed", None, {}),
    # librepo's status line with a 4xx is not a server error (os-repository-missing reads 404s)
    (b"librepo: Status code: 404 for https://mirror.example.net/repo/repodata/repomd.xml\n", "http-5xx", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{i}-{n[1]}" for i, n in enumerate(NEAR_MISSES)])
def test_ninth_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)


# ------------------------------------------------------------------ traps stay right

@pytest.mark.parametrize("trace,extra", [
    # a test cluster node's heap in its own log, relayed before the test's failure
    (b"[2024-01-09T11:20:03,551][INFO ][o.e.c.m.MetadataCreateIndexService] [node-1] creating index\n"
     b"java.lang.OutOfMemoryError: Java heap space\n"
     b"Dumping heap to /tmp/java_pid3322.hprof ...\n", {}),
    # a go test that checks the OOM-killer's 137 and gets a reset instead: gocheck's report
    (b"FAIL: oom_test.go:30: OOMSuite.TestOOMKilledExit\n\noom_test.go:41:\n    c.Assert(code, check.Equals, 137)\n"
     b"... obtained int = 1\n... expected int = 137\n", {}),
    # a Jenkins step interrupted while a test named after OOM ran
    (b"[INFO] Running org.example.MemoryPressureOomTest\nSending interrupt signal to process\nTerminated\n"
     b"script returned exit code 143\n", {"exit_code": 143}),
    # a test harness's time limit on a memory-named test
    (b"test_oom_killer_disabled (test.test_resource.T) ... Timeout (0:15:00)!\n", {}),
])
def test_ninth_pass_traps_are_never_resized(taxonomy, trace, extra):
    check_trap(taxonomy, trace, extra)


def test_ninth_pass_wasted_reruns_are_not_retried(taxonomy):
    """The mechanisms that re-ran deterministic failures: each now leaves the job alone."""
    cases = [
        (b"Sending interrupt signal to process\nscript returned exit code 143\n", {"exit_code": 143}),
        (b"Host key verification failed.\nfatal: Could not read from remote repository.\n"
         b"fatal: The remote end hung up unexpectedly\n", {}),
        (b"error during connect: Get http://docker:2375/v1.40/version: dial tcp: lookup docker on 1.1.1.1:53: "
         b"no such host\n", {}),
        (b"... value *errors.errorString = &errors.errorString{s:\"read: connection reset by peer\"}\n", {}),
    ]
    for trace, extra in cases:
        v, action = decided(trace, taxonomy, **extra)
        assert action == Action.NONE, (trace, v.rule, v.evidence)
