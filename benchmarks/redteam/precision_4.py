from . import job
P = []
def p(pid, want, cmd, body, code=1): P.append((pid, want, job(cmd, body, code)))
p("go-test-want-OOMKilled", "build_error", "go test ./...",
"""--- FAIL: TestContainerStatusReason (0.00s)
    status_test.go:42: reason = "Error", want "OOMKilled"
FAIL
FAIL	example.com/operator/status	0.011s
FAIL""")
p("pytest-parser-oom-killer-fixture", "build_error", "pytest -q",
"""____________________________ test_parse_dmesg ____________________________
    def test_parse_dmesg():
        line = "[12345.678] myproc invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0"
>       assert parse(line).pid == 4242
E       AttributeError: 'NoneType' object has no attribute 'pid'
tests/test_dmesg.py:9: AttributeError
=========================== short test summary info ============================
FAILED tests/test_dmesg.py::test_parse_dmesg - AttributeError: 'NoneType' object has no attribute 'pid'
1 failed, 30 passed in 0.5s""")
p("java-array-exceeds-vm-limit", "build_error", "mvn -B test",
"""[ERROR] Tests run: 3, Failures: 0, Errors: 1, Skipped: 0, Time elapsed: 0.1 s <<< FAILURE! - in com.acme.BufferTest
[ERROR] growsBeyondInt(com.acme.BufferTest)  Time elapsed: 0.01 s  <<< ERROR!
java.lang.OutOfMemoryError: Requested array size exceeds VM limit
	at com.acme.Buffer.grow(Buffer.java:55)
[INFO] Results:
[ERROR] Errors:
[ERROR]   BufferTest.growsBeyondInt:20 » OutOfMemory Requested array size exceeds VM limit
[ERROR] Tests run: 3, Failures: 0, Errors: 1, Skipped: 0
[INFO] BUILD FAILURE""")
p("java-xmx-fixed-heap-surefire", "build_error", "mvn -B test -DargLine=-Xmx64m",
"""[ERROR] Tests run: 1, Failures: 0, Errors: 1, Skipped: 0, Time elapsed: 2.1 s <<< FAILURE! - in com.acme.CacheTest
[ERROR] fillsCache(com.acme.CacheTest)  Time elapsed: 2.0 s  <<< ERROR!
java.lang.OutOfMemoryError: Java heap space
	at com.acme.Cache.put(Cache.java:40)
[ERROR] Tests run: 1, Failures: 0, Errors: 1, Skipped: 0
[INFO] BUILD FAILURE""")
p("java-native-thread", "build_error", "./gradlew test",
"""Exception in thread "main" java.lang.OutOfMemoryError: unable to create native thread: possibly out of memory or process/resource limits reached
	at java.base/java.lang.Thread.start0(Native Method)
	at com.acme.Pool.spawn(Pool.java:12)""")
p("python-memoryerror-bug", "build_error", "python -m app.selfcheck",
"""Traceback (most recent call last):
  File "/builds/g/p/app/selfcheck.py", line 8, in <module>
    buf = bytearray(size_from_header)   # header parsed as big-endian by mistake
MemoryError""")
p("rust-test-enomem-expected", "build_error", "cargo test",
"""---- mmap::tests::huge_map_fails stdout ----
thread 'mmap::tests::huge_map_fails' panicked at src/mmap.rs:120:14:
called `Result::unwrap()` on an `Err` value: Os { code: 12, kind: OutOfMemory, message: "Cannot allocate memory" }

failures:
    mmap::tests::huge_map_fails

test result: FAILED. 11 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.03s""", 101)
p("remote-es-oom-message", "build_error", "pytest -q tests/integration",
"""E   elasticsearch.ApiError: ApiError(500, 'search_phase_execution_exception', 'java.lang.OutOfMemoryError: Java heap space')
=========================== short test summary info ============================
FAILED tests/integration/test_search.py::test_big_agg - elasticsearch.ApiError: ApiError(500, 'search_phase_execution_exception', 'java.lang.OutOfMemoryError: Java heap space')
1 failed, 10 passed in 9.12s""")
p("grpc-remote-oom", "build_error", "go test ./integration/...",
"""    client_test.go:77: rpc error: code = ResourceExhausted desc = grpc: received message larger than max (5242880 vs. 4194304)
--- FAIL: TestBulkUpload (0.40s)
FAIL
FAIL	example.com/integration	0.433s""")
p("app-log-Killed-idle", "build_error", "./scripts/check-migrations.sh",
"""2026-11-24 10:00:01 pgbouncer: Killed idle connection (client_idle_timeout)
check-migrations: pending migration 0042 not applied; run ./manage.py migrate""")
p("timeout-s-KILL-137", "timeout", "timeout -s KILL 600 ./integration.sh",
"""[integ] waiting for cluster to become ready...
[integ] still waiting (590s)""", 137)
p("preserve-status-143", "timeout", "timeout --preserve-status 300 npm run e2e",
"""> e2e
> playwright test
Running 40 tests using 2 workers
  ✓  1 [chromium] › login.spec.ts:3:1 › logs in (2.1s)""", 143)
p("script-kill-TERM-143", "build_error", "./deploy.sh",
"""deploy: health check failed for web (HTTP 500 from /healthz: missing env DATABASE_URL)
deploy: rolling back and terminating
Terminated""", 143)
p("bats-signal9-doc", "build_error", "./test/check-docs.sh",
"""docs/signals.md:12: broken link to '#signal-9' (anchor not found)
check-docs: 1 broken link""")
p("app-test-prints-SIGKILL", "build_error", "./run-checks.sh",
"""[check] supervisor restarts child killed by SIGKILL: expected restart count 1, got 0
[check] 1 of 12 checks failed""")
p("exit-status-137-in-shell-test", "build_error", "make check",
"""./tests/run.sh: case 'kill-child': got exit status 137, expected 0
FAIL: kill-child
make: *** [Makefile:30: check] Error 1""", 2)
p("bats-expect-137", "build_error", "bats test/",
"""not ok 4 watchdog kills hung worker
# (in test file test/watchdog.bats, line 40)
#   `[ "$status" -eq 137 ]' failed
# watchdog: worker returned 137 too early
4 tests, 1 failure""")
p("oom-test-name-jest", "build_error", "npx jest",
"""  ● MemoryLimiter › rejects when OOM is imminent

    expect(received).toBe(expected)

Tests:       1 failed, 40 passed, 41 total""")
p("node-heap-fixed-max-old-space", "build_error", "node --max-old-space-size=256 scripts/gen-fixtures.js",
"""<--- Last few GCs --->
[52:0x5f1a]     4002 ms: Mark-Compact 250.1 (258.3) -> 249.8 (258.3) MB, 180.2 / 0.0 ms  (average mu = 0.11) allocation failure
FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory""", 134)
p("wasm-oom-trap", "build_error", "npm test",
"""RuntimeError: Aborted(Cannot enlarge memory arrays to size 2147487744 bytes (OOM). Either (1) compile with -sINITIAL_MEMORY=X with X higher than the current value 16777216, (2) compile with -sALLOW_MEMORY_GROWTH)
npm ERR! Test failed.  See above for more details.""")
