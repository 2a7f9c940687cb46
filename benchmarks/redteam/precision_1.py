from . import job
P = []
def p(pid, want, cmd, body, code=1): P.append((pid, want, job(cmd, body, code)))

# --- lint / type-check findings naming network exceptions
p("flake8-unused-ConnectTimeout", "build_error", "flake8 src",
"""src/client/http.py:4:1: F401 'urllib3.exceptions.ConnectTimeoutError' imported but unused
src/client/http.py:5:1: F401 'urllib3.exceptions.ReadTimeoutError' imported but unused""")
p("ruff-socket-timeout", "build_error", "ruff check .",
"""src/retry.py:3:8: F401 [*] `socket.timeout` imported but unused
Found 1 error.
[*] 1 fixable with the `--fix` option.""")
p("mypy-ReadTimeoutError", "build_error", "mypy src",
"""src/net.py:12: error: Module "urllib3.exceptions" has no attribute "ReadTimeoutError"  [attr-defined]
Found 1 error in 1 file (checked 40 source files)""")
p("tsc-ETIMEDOUT-union", "build_error", "npx tsc --noEmit",
"""src/net/retry.ts(12,5): error TS2322: Type '"ETIMEDOUT"' is not assignable to type '"ECONNRESET" | "EPIPE"'.""")
p("eslint-socket-hang-up", "build_error", "npx eslint src",
"""/builds/g/p/src/retry.js
  14:9  error  Unexpected string 'socket hang up' in comparison, use err.code instead  no-restricted-syntax

✖ 1 problem (1 error, 0 warnings)""")
p("shellcheck-curl28", "build_error", "shellcheck scripts/*.sh",
"""In scripts/fetch.sh line 9:
  if [ $rc == 28 ]; then echo "curl: (28) timed out"; fi
       ^-^ SC2086 (info): Double quote to prevent globbing and word splitting.

For more information:
  https://www.shellcheck.net/wiki/SC2086 -- Double quote to prevent globbing ...""")
p("golangci-lint-ctx-deadline", "build_error", "golangci-lint run",
"""internal/fetch/fetch.go:88:15: Error return value of `resp.Body.Close` is not checked (errcheck)
	defer resp.Body.Close() // Get "https://x": context deadline exceeded
              ^""")
p("pylint-timeout-missing", "build_error", "pylint src",
"""************* Module app.client
src/app/client.py:31:15: W3101: Missing timeout argument for method 'requests.get' can cause your program to hang indefinitely (missing-timeout)
-----------------------------------
Your code has been rated at 9.12/10""")
# --- tests asserting on network errors, with various runners
p("pytest-conn-reset-expected", "build_error", "pytest -q",
"""F.
=================================== FAILURES ===================================
___________________________ test_reports_reset ___________________________
    def test_reports_reset(fake_server):
        fake_server.reset_after(0)
        with pytest.raises(ClientError, match="Connection reset by peer"):
>           client.get("/")
E       Failed: DID NOT RAISE <class 'app.ClientError'>
tests/test_client.py:22: Failed
----------------------------- Captured log call ------------------------------
WARNING  urllib3.connectionpool:connectionpool.py:810 Retrying (Retry(total=2)) after connection broken by 'ConnectionResetError(104, 'Connection reset by peer')': /
=========================== short test summary info ============================
FAILED tests/test_client.py::test_reports_reset - Failed: DID NOT RAISE <class 'app.ClientError'>
1 failed, 1 passed in 0.31s""")
p("rspec-503-retry-helper", "build_error", "bundle exec rspec",
"""Failures:

  1) RetryHelper retries on 503
     Failure/Error: expect(client.get('/x').status).to eq(200)

       expected: 200
            got: 503
     # ./spec/retry_helper_spec.rb:14:in `block (2 levels) in <top (required)>'
     # Faraday::ServerError: the server responded with status 503 Service Unavailable

Finished in 0.41 seconds (files took 1.2 seconds to load)
12 examples, 1 failure

Failed examples:

rspec ./spec/retry_helper_spec.rb:10 # RetryHelper retries on 503""")
p("phpunit-curl7", "build_error", "vendor/bin/phpunit",
"""There was 1 failure:

1) Tests\\HttpClientTest::testRetriesOnRefused
Failed asserting that exception message 'cURL error 7: Failed to connect to localhost port 8089: Connection refused' contains 'retry'.

/builds/g/p/tests/HttpClientTest.php:41

FAILURES!
Tests: 34, Assertions: 80, Failures: 1.""")
p("cargo-test-timeout-msg", "build_error", "cargo test",
"""running 3 tests
test client::tests::times_out ... FAILED
test client::tests::ok ... ok

failures:

---- client::tests::times_out stdout ----
thread 'client::tests::times_out' panicked at src/client.rs:88:9:
assertion `left == right` failed
  left: "operation timed out"
 right: "Connection timed out"

failures:
    client::tests::times_out

test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.02s

error: test failed, to rerun pass `--lib`""")
p("bats-curl-6", "build_error", "bats test/",
"""1..3
ok 1 prints usage
not ok 2 reports unresolvable host
# (in test file test/cli.bats, line 14)
#   `[ "$output" = "error: cannot resolve" ]' failed
# curl: (6) Could not resolve host: nonexistent.invalid
ok 3 version

3 tests, 1 failure""")
p("ctest-no-route", "build_error", "ctest --output-on-failure",
"""3/4 Test #3: net_errors .......................***Failed    0.02 sec
[net] expected EHOSTUNREACH, got: No route to host (errno 113) mismatch in message table
FAIL: net_errors.c:77

75% tests passed, 1 tests failed out of 4

The following tests FAILED:
	  3 - net_errors (Failed)
Errors while running CTest""")
p("junit-socketexception", "build_error", "mvn -B test",
"""[ERROR] Tests run: 5, Failures: 1, Errors: 0, Skipped: 0, Time elapsed: 0.3 s <<< FAILURE! - in com.acme.ClientTest
[ERROR] resetIsWrapped(com.acme.ClientTest)  Time elapsed: 0.02 s  <<< FAILURE!
org.opentest4j.AssertionFailedError: expected: <com.acme.TransientException> but was: <java.net.SocketException>
Caused by: java.net.SocketException: Connection reset
	at com.acme.FakeServer.reset(FakeServer.java:31)
[INFO]
[INFO] Results:
[INFO]
[ERROR] Failures:
[ERROR]   ClientTest.resetIsWrapped:44 expected: <com.acme.TransientException> but was: <java.net.SocketException>
[INFO]
[ERROR] Tests run: 5, Failures: 1, Errors: 0, Skipped: 0
[INFO] BUILD FAILURE""")
p("unittest-http404-fixture", "build_error", "python -m unittest",
"""======================================================================
FAIL: test_missing_raises (tests.test_fetch.FetchTest)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/builds/g/p/tests/test_fetch.py", line 30, in test_missing_raises
    self.assertIn("HTTP Error 404", str(cm.exception))
AssertionError: 'HTTP Error 404' not found in 'HTTP Error 410: Gone'

----------------------------------------------------------------------
Ran 9 tests in 0.050s

FAILED (failures=1)""")
p("minitest-net-read-timeout", "build_error", "bundle exec rake test",
"""  1) Failure:
ClientTest#test_wraps_timeout [test/client_test.rb:19]:
Expected #<Net::ReadTimeout: Net::ReadTimeout with #<TCPSocket:(closed)>> to be a kind of Client::Timeout.

9 runs, 14 assertions, 1 failures, 0 errors, 0 skips""")
p("exunit-econnrefused", "build_error", "mix test",
"""  1) test returns error tuple on refused (MyApp.ClientTest)
     test/client_test.exs:12
     Assertion with == failed
     code:  assert Client.get("http://localhost:1") == {:error, :refused}
     left:  {:error, %Mint.TransportError{reason: :econnrefused}}
     right: {:error, :refused}

Finished in 0.1 seconds (0.00s async, 0.1s sync)
5 tests, 1 failure""")
p("go-test-expected-dial", "build_error", "go test ./...",
"""--- FAIL: TestDialError (0.00s)
    dial_test.go:21: got "dial tcp: lookup nonexistent.invalid: no such host", want prefix "lookup failed"
FAIL
FAIL	example.com/dial	0.005s
FAIL""")
p("jest-econnreset-assert", "build_error", "npx jest",
"""  ● retry › gives up after ECONNRESET

    expect(received).toBe(expected) // Object.is equality

    Expected: 3
    Received: 4

      at Object.<anonymous> (src/retry.test.ts:20:25)

    console.error
      Error: read ECONNRESET
          at TCP.onStreamRead (node:internal/stream_base_commons:217:20)

Test Suites: 1 failed, 3 passed, 4 total
Tests:       1 failed, 20 passed, 21 total""")
p("plain-script-test-503", "build_error", "./scripts/smoke-test.sh",
"""+ ./bin/retry-helper --max 0 http://127.0.0.1:8080/flaky
retry-helper: GET http://127.0.0.1:8080/flaky -> 503 Service Unavailable (attempt 1/1)
retry-helper: giving up
+ test 1 -eq 0
smoke test FAILED: retry-helper must succeed once the stub recovers""")
p("custom-runner-502-assert", "build_error", "npm run test:e2e",
"""> app@1.0.0 test:e2e
> node e2e/run.js

[e2e] GET /api/health expected 200, received 502 Bad Gateway (proxy config: upstream 'api:8081' in nginx.conf; service listens on 8080)
[e2e] 1 check failed""")
