from . import job
P = []
def p(pid, want, cmd, body, code=1): P.append((pid, want, job(cmd, body, code)))
p("nexus-redeploy-400", "config_error", "mvn -B deploy",
"""[ERROR] Failed to execute goal org.apache.maven.plugins:maven-deploy-plugin:3.1.1:deploy (default-deploy) on project app: Failed to deploy artifacts: Could not transfer artifact com.acme:app:jar:1.2.0 from/to releases (https://nexus.example.com/repository/maven-releases/): status code: 400, reason phrase: Repository does not allow updating assets: maven-releases (400) -> [Help 1]""")
p("shm-enospc-dataloader", "config_error", "python train_smoke.py",
"""ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).
RuntimeError: DataLoader worker (pid 312) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory limit.
OSError: [Errno 28] No space left on device: '/dev/shm/torch_312_1234'""")
p("x509-unknown-authority", "config_error", "docker login -u ci -p $TOKEN registry.corp.local",
"""Error response from daemon: Get "https://registry.corp.local/v2/": tls: failed to verify certificate: x509: certificate signed by unknown authority""")
p("x509-wrong-name", "config_error", "helm repo add acme https://charts.corp.local",
"""Error: looks like "https://charts.corp.local" is not a valid chart repository or cannot be reached: Get "https://charts.corp.local/index.yaml": tls: failed to verify certificate: x509: certificate is valid for ingress.local, not charts.corp.local""")
p("x509-expired-own-endpoint", "config_error", "./deploy.sh",
"""Error: Get "https://api.staging.example.com/healthz": x509: certificate has expired or is not yet valid: current time 2026-11-24T10:00:00Z is after 2026-11-01T00:00:00Z""")
p("ssh-host-key-changed", "config_error", "ssh deploy@web1 ./release.sh",
"""@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
Host key verification failed.""", 255)
p("bats-broken-pipe-own", "build_error", "./ci/gen-changelog.sh",
"""gen-changelog: writing CHANGELOG section
./ci/gen-changelog.sh: line 22: printf: write error: Broken pipe
gen-changelog: header missing in CHANGELOG.md (expected '## Unreleased')""")
p("ruby-test-openTimeout-expected", "build_error", "bundle exec rake test",
"""ClientTest#test_open_timeout_is_wrapped:
Net::OpenTimeout: execution expired
    lib/client.rb:30:in `get'
    test/client_test.rb:12:in `test_open_timeout_is_wrapped'

9 runs, 14 assertions, 0 failures, 1 errors, 0 skips
rake aborted!
Command failed with status (1)""")
p("dotnet-test-socket-expected", "build_error", "dotnet test",
"""  Failed Acme.Tests.ClientTests.Wraps_reset [12 ms]
  Error Message:
   Assert.IsType() Failure
Expected: Acme.TransientError
Actual:   System.Net.Http.HttpRequestException: An error occurred while sending the request. ---> System.IO.IOException: Unable to read data from the transport connection: Connection reset by peer.
Failed!  - Failed:     1, Passed:    88, Skipped:     0, Total:    89, Duration: 2 s - Acme.Tests.dll (net8.0)""")
p("gtest-named-timeout-conn", "build_error", "./build/tests/net_tests",
"""[ RUN      ] Socket.ConnectRefusedReportsError
net_test.cc:51: Failure
Expected equality of these values:
  err.message()
    Which is: "Connection refused"
  "connection refused"
[  FAILED  ] Socket.ConnectRefusedReportsError (0 ms)
[==========] 40 tests from 6 test suites ran. (12 ms total)
[  PASSED  ] 39 tests.
[  FAILED  ] 1 test, listed below:
[  FAILED  ] Socket.ConnectRefusedReportsError

 1 FAILED TEST""")
