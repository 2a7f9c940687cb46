from . import job
P = []
def p(pid, want, cmd, body, code=1): P.append((pid, want, job(cmd, body, code)))
p("gcc-MF-dir-missing", "build_error", "make",
"""gcc -MMD -MF build/deps/main.d -c src/main.c -o build/obj/main.o
cc1: fatal error: opening dependency file build/deps/main.d: No such file or directory
compilation terminated.
make: *** [Makefile:21: build/obj/main.o] Error 1""", 2)
p("gas-cant-create-objdir", "build_error", "make",
"""as -o out/obj/start.o src/start.S
Assembler messages:
Fatal error: can't create out/obj/start.o: No such file or directory
make: *** [Makefile:9: out/obj/start.o] Error 1""", 2)
p("ld-output-dir-missing", "build_error", "make",
"""gcc -o dist/bin/app build/main.o build/util.o
/usr/bin/ld: cannot open output file dist/bin/app: No such file or directory
collect2: error: ld returned 1 exit status
make: *** [Makefile:30: dist/bin/app] Error 1""", 2)
p("clang-output-dir-missing", "build_error", "clang -c src/a.c -o objs/a.o",
"""error: unable to open output file 'objs/a.o': 'No such file or directory'
1 error generated.""")
p("llvm-test-truncated-object", "build_error", "ninja check-llvm",
"""FAIL: LLVM :: tools/llvm-objdump/ELF/bad-section.test (4012 of 51000)
******************** TEST 'LLVM :: tools/llvm-objdump/ELF/bad-section.test' FAILED ********************
# .---command stderr------------
# | error: 'bad.o': truncated or malformed object (section header table goes past the end of the file)
# | FileCheck: error: CHECK: expected string not found in input
********************
Failed Tests (1):
  LLVM :: tools/llvm-objdump/ELF/bad-section.test
ninja: build stopped: subcommand failed.""")
p("git-lock-test-output", "build_error", "./t/t1400-update-ref.sh",
"""not ok 12 - update-ref fails cleanly when index.lock exists
#	
#		fatal: Unable to create '/builds/g/p/t/trash directory.t1400/.git/index.lock': File exists.
#	
# failed 1 among 40 test(s)
1..40""")
p("shell-text-file-busy-own", "build_error", "./build.sh",
"""+ cp target/release/tool /usr/local/bin/tool
+ /usr/local/bin/tool --selftest & /usr/local/bin/tool --selftest
./build.sh: line 14: /usr/local/bin/tool: Text file busy""")
p("conda-verification-corrupt-pin", "config_error", "conda env create -f env.yml",
"""CondaVerificationError: The package for mylib located at /opt/conda/pkgs/mylib-1.0-0
appears to be corrupted. The path 'lib/libmy.so' specified in the package manifest cannot be found.""")
p("travis-style-line-in-test", "build_error", "./ci/check-travis-compat.sh",
"""compat: replaying legacy log
The command "make test" exited with 137.
compat: expected the parser to report 'oom', got 'unknown'
compat: FAILED""")
p("circleci-line-in-fixture", "build_error", "python tools/lint_logs.py fixtures/",
"""fixtures/circle.log: line 3: Exited with code exit status 143
tools/lint_logs.py: fixtures/circle.log: unterminated section 'build' (1 error)""")
p("jenkins-script-returned-143", "build_error", "groovy ci/replay.groovy",
"""[replay] stage 'deploy': script returned exit code 143
replay: assertion failed: stage status UNSTABLE != FAILURE""")
p("azure-bash-exited-137-quoted", "build_error", "cat docs/troubleshooting.md | ./check-spelling",
"""docs/troubleshooting.md:33: ##[error]Bash exited with code '137'.  <- 'exited' misspelled as 'exitted' elsewhere
check-spelling: 1 misspelling found: exitted""")
p("app-log-agent-lost", "build_error", "./scripts/e2e.sh",
"""[e2e] buildkite-agent mock: Exited with status -1 (agent lost)
[e2e] expected dashboard badge 'lost', got 'failed'
[e2e] 1 scenario failed""")
p("jenkins-channel-closed-test", "build_error", "mvn -B test",
"""[ERROR] channelClosedIsReported(org.acme.AgentTest)  Time elapsed: 0.1 s  <<< FAILURE!
java.lang.AssertionError: expected message 'Unexpected termination of the channel' but was 'Channel closed'
[ERROR] Tests run: 8, Failures: 1, Errors: 0, Skipped: 0""")
p("runner-shutdown-words-app-cmake", "build_error", "cmake --build build",
"""[ 50%] Building CXX object src/CMakeFiles/srv.dir/server.cpp.o
/builds/g/p/src/server.cpp:88:5: error: 'shutdown_signal' was not declared in this scope
   88 |     shutdown_signal(The runner has received a shutdown signal);
      |     ^~~~~~~~~~~~~~~
gmake[2]: *** [src/CMakeFiles/srv.dir/build.make:76: src/CMakeFiles/srv.dir/server.cpp.o] Error 1""", 2)
p("lost-comm-app-cmake", "build_error", "./build-and-smoke.sh",
"""[ 98%] Building CXX object tools/CMakeFiles/cli.dir/cli.cpp.o
[100%] Linking CXX executable cli
smoke: ./cli --server 10.0.0.5 ping
cli: lost communication with the server (protocol version mismatch: server 3, client 4)
smoke: FAILED""")
p("runner-system-failure-quoted-in-test", "build_error", "pytest -q tests/test_bot.py",
"""E       AssertionError: assert 'infrastructure' == 'build_error'
E         - build_error
E         + infrastructure
tests/test_bot.py:40: AssertionError
----------------------------- Captured stdout call -----------------------------
fixture: ERROR: Job failed (system failure): prepare environment: exit code 1
1 failed, 12 passed in 0.4s""")
p("upload-artifacts-after-test-fail", "build_error", "npm test",
"""Tests:       2 failed, 50 passed, 52 total
section_start:1700000100:upload_artifacts_on_failure\r\x1b[0KUploading artifacts for failed job
Uploading artifacts...
WARNING: coverage/: no matching files. Ensure that the artifact path is relative to the working directory
ERROR: No files to upload""")
p("artifacts-too-large", "config_error", "make dist",
"""dist/app.tar.gz built (1.4 GiB)
section_start:1700000100:upload_artifacts_on_success\r\x1b[0KUploading artifacts for successful job
Uploading artifacts...
dist/: found 1 matching artifact files and directories
ERROR: Uploading artifacts as "archive" to coordinator... 413 Request Entity Too Large  id=42 responseStatus=413 Request Entity Too Large status=413 token=abcd
FATAL: too large""")
p("artifact-download-expired", "config_error", "echo deploy",
"""section_start:1700000001:download_artifacts\r\x1b[0KDownloading artifacts
Downloading artifacts for build (4242)...
ERROR: Downloading artifacts from coordinator... not found  id=4242 responseStatus=404 Not Found status=404 token=abcd
FATAL: permission denied""")
p("cache-restore-then-fails", "build_error", "npm run build",
"""src/index.ts(3,10): error TS2305: Module '"./util"' has no exported member 'fmt'.""")
