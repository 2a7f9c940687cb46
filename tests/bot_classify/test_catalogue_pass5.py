"""Issue 11, fifth pass: GENERAL mechanisms, each from a convention many tools share (the GNU
diagnostic format, the SIGKILL conventions, a download checked against its own index, git's ref
lock, GitLab Runner's prepare-script wrapper), so that message families no rule lists yet still
get a family instead of ``unknown``.

Every line below is written from the format (the source is named in each rule's description in
config/taxonomy.toml), not copied from an evaluation case: other tools, files, numbers. Each
mechanism has positives, near misses that must NOT take it, and traps that must stay right; the
decision the shipped policy takes is checked too.
"""

from __future__ import annotations

import dataclasses


import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule, check_trap, decided, usage_record




TS = b"2025-03-04T05:06:07.1234567Z "   # a CI system's timestamp prefix

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- 1. generic diagnostics -> build_error (weak), not unknown
    (TS + b"/Users/runner/work/app/app/Sources/Core/Store.swift:41:9: error: cannot find 'Ledger' in scope\n",
     "build_error", "generic-compiler-diagnostic", Action.NONE, {}),
    (TS + b"src/codec/frame.c:77:1: fatal error: zstd.h: No such file or directory\n",
     "build_error", "generic-compiler-diagnostic", Action.NONE, {}),
    (TS + b"error[E0308]: mismatched types\n" + TS + b"  --> crates/io/src/lib.rs:12:20\n",
     "build_error", "generic-compiler-diagnostic", Action.NONE, {}),
    (b"Notice: src/Api/Client.cs(88,17): error CA2016: Forward the 'CancellationToken' parameter\n",
     "build_error", "generic-compiler-diagnostic", Action.NONE, {}),
    (b"> Task :core:compileKotlin FAILED\ne: file:///builds/acme/pay/core/src/main/kotlin/Fees.kt:23:14 "
     b"Type mismatch: inferred type is String but Int was expected\n",
     "build_error", "generic-compiler-diagnostic", Action.NONE, {}),
    (b"e: /home/ci/app/src/main/kotlin/Main.kt: (7, 3): Unresolved reference: launch\n",
     "build_error", "generic-compiler-diagnostic", Action.NONE, {}),
    (TS + b"vet: ./internal/cache/lru.go:57:3: unreachable code\n",
     "build_error", "generic-compiler-diagnostic", Action.NONE, {}),
    (TS + b"ledger/models.py:14:80: E501 line too long (97 > 79 characters)\n",
     "build_error", "generic-lint-finding", Action.NONE, {}),
    (b"/builds/acme/web/src/cart.js:12:5: 'total' is assigned a value but never used. [Error/no-unused-vars]\n",
     "build_error", "generic-lint-finding", Action.NONE, {}),
    (b'File "src/lexer.ml", line 120, characters 8-21:\n120 |   | Some tok -> emit tok\n'
     b"              ^^^^^^^^^^^^^\nError: This expression has type token but an expression was expected of type unit\n",
     "build_error", "generic-ocaml-diagnostic", Action.NONE, {}),
    (b'# File "bin/main.re", line 4, characters 2-9:\n# Error: Unbound value printf\n',
     "build_error", "generic-ocaml-diagnostic", Action.NONE, {}),
    (b'$ python tools/render_docs.py\nTraceback (most recent call last):\n  File "tools/render_docs.py", line 58, in <module>\n'
     b"    main()\n  File \"tools/render_docs.py\", line 51, in main\n    tmpl = templates[name]\nKeyError: 'changelog'\n",
     "build_error", "generic-python-traceback", Action.NONE, {}),
    (b"scripts/release.sh:31:12: warning: Declare and assign separately to avoid masking return values. [SC2155]\n",
     "build_error", "generic-lint-finding", Action.NONE, {}),
    (b".github/workflows/nightly.yml:40:9: shellcheck reported issue in this script: SC2046:warning:3:7: "
     b"Quote this to prevent word splitting [shellcheck]\n",
     "build_error", "generic-lint-finding", Action.NONE, {}),
    (b"  2) test refunds a payment (Shop.RefundTest)\n     test/refund_test.exs:30\n     Assertion with === failed\n",
     "build_error", "generic-test-assertion", Action.NONE, {}),
    (b"Summary: 2 of 48 tests failed.\n", "build_error", "generic-test-assertion", Action.NONE, {}),
    (b"assertion `left == right` failed\n"
     b"  left: 3\n right: 0\n", "build_error", "generic-test-assertion", Action.NONE, {}),
    (b"bench: tests/check_heap.c:41: run_case: Assertion `heap_size(h) == 0' failed.\nAborted (core dumped)\n",
     "build_error", "generic-test-assertion", Action.NONE, {}),
    (b"org.opentest4j.AssertionFailedError: expected: <200> but was: <404>\n", "build_error", "generic-test-assertion",
     Action.NONE, {}),
    (b"  \xe2\x97\x8f checkout \xe2\x80\xba uses the cart currency\n\n    Expected: \"EUR\"\n    Received: \"USD\"\n",
     "build_error", "generic-expected-received", Action.NONE, {}),
    (b'Exception in thread "main" java.lang.IllegalStateException: schema version 7 is not supported\n'
     b"\tat com.acme.migrate.Main.run(Main.java:44)\n", "build_error", "generic-uncaught-exception", Action.NONE, {}),
    (b"lib/tasks/seed.rb:12:in `block in load': undefined method `name' for nil:NilClass (NoMethodError)\n",
     "build_error", "generic-uncaught-exception", Action.NONE, {}),
    (b"panic: assignment to entry in nil map\n\ngoroutine 1 [running]:\nmain.main()\n\t/src/cmd/gen/main.go:31 +0x1d\n",
     "build_error", "generic-uncaught-exception", Action.NONE, {}),
    (TS + b"  py/app/helpers.py:93: error: Unused \"type: ignore\" comment  [unused-ignore]\n",
     "build_error", "generic-compiler-diagnostic", Action.NONE, {}),
    # --- 2. SIGKILL in any tool's wording -> oom (weak), resized
    (b"error: index-pack died of signal 9\nfatal: fetch-pack: invalid index-pack output\n",
     "oom", "sigkill-any-tool", Action.RESIZE, {}),
    (b"error: running 'protoc-gen-grpc-web': signal: killed\n",
     "oom", "sigkill-any-tool", Action.RESIZE, {}),
    (b"ccache: compiler terminated by signal 9\n", "oom", "sigkill-any-tool", Action.RESIZE, {}),
    (b"Task failed: the worker process exited with signal SIGKILL\n", "oom", "sigkill-any-tool", Action.RESIZE, {}),
    (b"FAILED: the rollup worker (pid 4121) got signal 9\n", "oom", "sigkill-any-tool", Action.RESIZE, {}),
    (b"[build] clang++ returned 137\n", "oom", "sigkill-any-tool", Action.RESIZE, {}),
    (b"  1: 0x7f3a10 node::OOMErrorHandler(char const*, v8::OOMDetails const&) [/opt/hostedtoolcache/node/bin/node]\n"
     b"  2: 0xc4e2b0 v8::Utils::ReportOOMFailure(v8::internal::Isolate*, char const*) [node]\n",
     "oom", "v8-oom-handler-frame", Action.RESIZE, {}),
    # --- 3. integrity of downloads against their own index -> infrastructure; git's ref-lock race
    (b"CondaVerificationError: The package for scipy located at /opt/conda/pkgs/scipy-1.12.0-py312h\n"
     b"appears to be corrupted. The path 'lib/python3.12/site-packages/scipy/__init__.py'\n",
     "infrastructure", "download-integrity-vs-index", Action.RETRY, {}),
    (b"error    libmamba File not valid: SHA256 sum doesn't match expectation \"/opt/conda/pkgs/arrow-15.0.0.conda\"\n",
     "infrastructure", "download-integrity-vs-index", Action.RETRY, {}),
    (b"Error: MD5 sums mismatch for download: https://repo.anaconda.com/pkgs/free/linux-64/six-1.10.0-py35_0.tar.bz2\n",
     "infrastructure", "download-integrity-vs-index", Action.RETRY, {}),
    (b"error: cannot lock ref 'refs/remotes/origin/release/2.4': is at 1f2e3d4c5b6a79808f7e6d5c4b3a2918171615aa "
     b"but expected 9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b\n",
     "infrastructure", "git-ref-lock-race", Action.RETRY, {}),
    (b"error: fetching the package index failed: HTTP 503\n",
     "infrastructure", "http-5xx-any-wording", Action.RETRY, {}),
    (b"helm: pulling chart: the repository answered with response code 502 after 3 attempts\n",
     "infrastructure", "http-5xx-any-wording", Action.RETRY, {}),
    (b"Error: Could not reach any registry endpoint\n", "infrastructure", "registry-unreachable-legacy", Action.RETRY, {}),
    (b"[ERROR] Failed to execute goal on project core: Could not transfer artifact com.acme:bom:pom:2.1 from/to central "
     b"(https://repo.maven.apache.org/maven2): status code: 403, reason phrase: Forbidden (403)\n",
     "infrastructure", "public-repository-throttled", Action.RETRY, {}),
    # --- 4. a runner's own prepare script and the job's docker client
    (b"ERROR: Job failed (system failure): prepare environment: exit status 2. Check "
     b"https://docs.gitlab.com/runner/shells/#shell-profile-loading for more information\n",
     "config_error", "runner-prepare-script-failed", Action.NONE, {"failure_reason": "runner_system_failure"}),
    (b"ERROR: Job failed: prepare environment: exit code 126. Check "
     b"https://docs.gitlab.com/runner/shells/index.html#shell-profile-loading for more information\n",
     "config_error", "runner-prepare-script-failed", Action.NONE, {"failure_reason": "runner_system_failure"}),
    (b"$ docker build -t registry.example.com/app:ci .\n"
     b"Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n",
     "config_error", "job-docker-client-without-daemon", Action.NONE, {}),
    (b"/bin/sh: 1: protoc: not found\nmake[1]: *** [Makefile:40: gen/api.pb.go] Error 127\n",
     "config_error", "make-recipe-command-not-found", Action.NONE, {}),
    # --- test harness time limits and pods under test
    (b"The following tests FAILED:\n\t 12 - integration_db (Timeout)\n\t 15 - parser_fuzz (Failed)\n"
     b"Errors while running CTest\n", "timeout", "test-harness-timeout-listed", Action.NONE, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE, ids=[f"{p[2]}-{i}" for i, p in enumerate(POSITIVE)])
def test_fifth_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must not decide, family expected or None, extra facts)
NEAR_MISSES = [
    # warnings and notes are not errors; prose about a file and line is not a diagnostic
    (TS + b"src/a.c:3:1: warning: unused variable 'n' [-Wunused-variable]\n", "generic-compiler-diagnostic", None, {}),
    (b"see docs/errors.md:12 for error: codes\n", "generic-compiler-diagnostic", None, {}),
    (b"w: file:///builds/a/src/Main.kt:3:5 Parameter 'x' is never used\n", "generic-compiler-diagnostic", None, {}),
    # a Python traceback location is not OCaml's; an OCaml warning has no Error line
    (b'  File "setup.py", line 3, in <module>\n', "generic-ocaml-diagnostic", None, {}),
    (b'File "src/a.ml", line 3, characters 4-9:\nWarning 26 [unused-var]: unused variable x.\n',
     "generic-ocaml-diagnostic", None, {}),
    # a traceback cut before its exception line, or ended by a KeyboardInterrupt
    (b'Traceback (most recent call last):\n  File "run.py", line 3, in <module>\n', "generic-python-traceback", None, {}),
    (b'Traceback (most recent call last):\n  File "run.py", line 3, in <module>\nKeyboardInterrupt\n',
     "generic-python-traceback", None, {}),
    # a shellcheck code quoted in prose
    (b"# shellcheck disable=SC2086 (see SC2086 on the wiki)\n", "generic-lint-finding", None, {}),
    # neighbours of signal 9 and of 137
    (b"worker exited with signal 15\n", "sigkill-any-tool", None, {}),
    (b"handler for signal 97 installed\n", "sigkill-any-tool", None, {}),
    (b"timeout: sending SIGKILL after 10s grace\n", "sigkill-any-tool", None, {}),
    (TS + b"vet: ./internal/cache/lru.go: no Go files\n", "generic-compiler-diagnostic", None, {}),
    (b"/builds/acme/web/src/cart.js:12:5: 'x' is unused. [Warning/no-unused-vars]\n", "generic-lint-finding", None, {}),
    (b"ccache: compiler terminated by signal 90\n", "sigkill-any-tool", None, {}),
    (b"Error: Process completed with exit code 1370.\n", "sigkill-any-tool", None, {}),
    (b"query returned 1375 rows\n", "sigkill-any-tool", None, {}),
    # git's deterministic ref conflict (a directory/file clash) is not the race
    (b"error: cannot lock ref 'refs/remotes/origin/feature': 'refs/remotes/origin/feature/x' exists; "
     b"cannot create 'refs/remotes/origin/feature'\n", "git-ref-lock-race", None, {}),
    # checksums pinned in a lock file or recipe stay build errors
    (b"ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. If you have updated the package "
     b"versions, please update the hashes.\n", "download-integrity-vs-index", "build_error", {}),
    (b"Error: SHA256 mismatch\nExpected: 1a2b\n  Actual: 3c4d\n", "download-integrity-vs-index", None, {}),
    (b"verifying example.com/lib@v1.2.3: checksum mismatch\n", "download-integrity-vs-index", "build_error", {}),
    # a private repository's 403 is the project's credentials
    (b"Could not transfer artifact com.acme:lib:jar:1.0 from/to nexus (https://nexus.acme.example/repository/releases/): "
     b"status code: 403, reason phrase: Forbidden (403)\n", "public-repository-throttled", None, {}),
    # the runner's own daemon failure stays infrastructure
    (b"ERROR: Preparation failed: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
     b"Is the docker daemon running? (docker.go:650:0s)\n", "job-docker-client-without-daemon", "infrastructure",
     {"failure_reason": "runner_system_failure"}),
    # make's other errors are not 127
    (b"make[1]: *** [Makefile:40: gen/api.pb.go] Error 1\n", "make-recipe-command-not-found", None, {}),
    (b"make: *** [all] Error 1270\n", "make-recipe-command-not-found", None, {}),
    # ctest's ordinary failures are not time limits; no failed test is not a failure
    (b"The following tests FAILED:\n\t 15 - parser_fuzz (Failed)\n", "test-harness-timeout-listed", None, {}),
    (b"Summary: 0 of 48 tests failed.\n", "generic-test-assertion", None, {}),
    (b"    api_test.go:88: expected 200, got 500\n", "http-5xx-any-wording", None, {}),
    (b"E       assert response.status_code == 503\n", "http-5xx-any-wording", None, {}),
    (b"HTTP 5000 connections served\n", "http-5xx-any-wording", None, {}),
    (b"    Expected: 3 replicas to become ready\n", "generic-expected-received", None, {}),
    (b"assertion checks passed\n", "generic-test-assertion", None, {}),
    (b"Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space\n", "generic-uncaught-exception", "oom", {}),
    (b"goroutine 7 [select]:\n", "generic-uncaught-exception", None, {}),
    # V8 frames of an ordinary crash
    (b"  1: 0x7f3a10 node::Abort() [node]\n", "v8-oom-handler-frame", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES, ids=[f"not-{m[1]}-{i}" for i, m in enumerate(NEAR_MISSES)])
def test_fifth_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)


# ------------------------------------------------------------------ traps stay right

@pytest.mark.parametrize("trace,extra", [
    # a test that asserts a SIGKILL and failed: the test summary decides
    (b"=== RUN   TestWorkerKilled\n    worker_test.go:55: worker exited: signal: killed\n"
     b"--- FAIL: TestWorkerKilled (1.20s)\nFAIL\tacme/pool\t1.3s\n", {}),
    # a test named after the exit status it checks
    (b"FAILED tests/test_runner.py::test_reports_exit_status_137 - AssertionError: assert 'exit status 137' in ''\n", {}),
    # a pod the job deployed and described was OOMKilled: the pod's limit, not the job's
    (b"$ kubectl describe pod -l app=operator -n e2e\n    Last State:     Terminated\n      Reason:       OOMKilled\n"
     b"      Exit Code:    137\n      Restart Count: 3\n", {}),
    # the runner's own preparation (a permission container) was killed: the runner's failure, not the job's OOM
    (b"ERROR: Preparation failed: adding cache volume: set volume permissions: running permission container "
     b"\"4f1c\" for volume \"runner-x-cache-1\": waiting for permission container to finish: exit code 137\n",
     {"failure_reason": "runner_system_failure"}),
])
def test_fifth_pass_traps_are_never_resized(taxonomy, trace, extra):
    check_trap(taxonomy, trace, extra)


# ------------------------------------------------------------------ precedence and the fallback policy

def test_oom_and_infrastructure_rules_decide_before_generic_diagnostics(taxonomy):
    """The generic mechanisms are the last text stage: a kill or a network fault after a diagnostic decides."""
    diag = b"src/io.c:10:2: error: implicit declaration of function 'pread64'\n"
    v, action = decided(TS + diag + TS + b"cc1: out of memory allocating 1048576 bytes\nKilled\n", taxonomy)
    assert (v.family.value, action) == ("oom", Action.RESIZE), (v.rule, v.evidence)
    v, action = decided(TS + diag + b"curl: (6) Could not resolve host: mirror.example.org\n", taxonomy)
    assert (v.family.value, action) == ("infrastructure", Action.RETRY), (v.rule, v.evidence)
    # a killed linker after a generic diagnostic: the latest line, the kill, wins within the stage
    v, action = decided(TS + diag + b"collect2: fatal error: ld terminated by signal 9\n", taxonomy)
    assert v.family.value == "oom", (v.rule, v.evidence)


def test_a_weak_sigkill_is_set_aside_by_a_record_without_oom_kill(taxonomy):
    trace = b"error: running 'protoc-gen-grpc-web': signal: killed\n"
    v, action = decided(trace, taxonomy)
    assert (v.rule, action) == ("sigkill-any-tool", Action.RESIZE)
    v, action = decided(trace, taxonomy, record=usage_record(oom_kills=0, exit_code=1))
    assert v.family.value != "oom" and action != Action.RESIZE, (v.rule, v.evidence)


def test_unknown_only_when_nothing_points_anywhere(taxonomy):
    """docs/taxonomy.md, "The fallback policy": a generic diagnostic gives a family; a log without any
    evidence (no diagnostic, no known section or command, an ambiguous reason) stays unknown."""
    v, _ = decided(b"$ ./ci/run-checks\nchecking tree\n" + TS + b"lib/a.rb:3:1: error: unexpected token\n", taxonomy)
    assert (v.family.value, v.rule) == ("build_error", "generic-compiler-diagnostic")
    # the rules leave it unknown (the learned fallback may name a family, weakly: it acts on nothing
    # but oom and infrastructure, and those not in the shipped policy; see test_learned.py)
    rules_only = dataclasses.replace(taxonomy, learned_enabled=False)
    v, action = decided(b"$ ./ci/run-checks\nchecking tree\ndone, 3 problems\n", rules_only)
    assert (v.family.value, action) == ("unknown", Action.NONE), (v.rule, v.evidence)
    v, action = decided(b"$ ./ci/run-checks\nchecking tree\ndone, 3 problems\n", taxonomy)
    assert action == Action.NONE and (v.family.value == "unknown" or v.rule.startswith("learned:"))
    # the deterministic diagnostic does not hide a runner_system_failure's verdict from the reason fallback
    v, _ = decided(b"$ ./ci/run-checks\nchecking tree\n", taxonomy, failure_reason="runner_system_failure")
    assert v.family.value == "infrastructure", (v.rule, v.evidence)
