from . import SS
P = []
def raw(pid, want, text, ec=None, fr="script_failure"): P.append((pid, want, text, ec, fr))
CE = SS + """\x1b[32;1m$ make -j8\x1b[0;m
src/parser.c:120:17: error: 'tok' undeclared (first use in this function)
make: *** [Makefile:40: build/parser.o] Error 1
section_end:1700000100:step_script\r\x1b[0K
"""
raw("after-script-slack-dns", "build_error", CE + """section_start:1700000100:after_script\r\x1b[0KRunning after_script
Running after script...
\x1b[32;1m$ curl -sS -X POST "$SLACK_WEBHOOK" -d "{\\"text\\":\\"build failed\\"}"\x1b[0;m
curl: (6) Could not resolve host: hooks.slack.com
section_end:1700000101:after_script\r\x1b[0K
ERROR: Job failed: exit code 2
""")
raw("after-script-timeout-notify", "build_error", CE + """section_start:1700000100:after_script\r\x1b[0KRunning after_script
Running after script...
\x1b[32;1m$ ./ci/notify.sh\x1b[0;m
notify: POST https://chat.example.com/hooks/abc -> 503 Service Unavailable
section_end:1700000101:after_script\r\x1b[0K
ERROR: Job failed: exit code 2
""")
raw("upload-failure-artifacts-502", "build_error", CE + """section_start:1700000100:upload_artifacts_on_failure\r\x1b[0KUploading artifacts for failed job
Uploading artifacts...
build/logs/: found 12 matching artifact files and directories
WARNING: Uploading artifacts as "archive" to coordinator... 502 Bad Gateway  id=99 responseStatus=502 Bad Gateway status=502 token=abcd
WARNING: Retrying...                                  context=artifacts-uploader error=invalid argument
ERROR: Uploading artifacts as "archive" to coordinator... 502 Bad Gateway  id=99 responseStatus=502 Bad Gateway status=502 token=abcd
FATAL: invalid argument
section_end:1700000102:upload_artifacts_on_failure\r\x1b[0K
ERROR: Job failed: exit code 2
""")
raw("after-script-kubectl-cleanup-refused", "build_error", CE + """section_start:1700000100:after_script\r\x1b[0KRunning after_script
\x1b[32;1m$ kubectl delete ns review-$CI_COMMIT_REF_SLUG --ignore-not-found\x1b[0;m
The connection to the server localhost:8080 was refused - did you specify the right host or port?
section_end:1700000101:after_script\r\x1b[0K
ERROR: Job failed: exit code 2
""")
raw("after-script-cache-push-timeout", "build_error", SS + """\x1b[32;1m$ npx jest\x1b[0;m
Tests:       3 failed, 97 passed, 100 total
section_end:1700000100:step_script\r\x1b[0K
section_start:1700000100:after_script\r\x1b[0KRunning after_script
\x1b[32;1m$ aws s3 cp coverage/ s3://ci-cov/ --recursive\x1b[0;m
upload failed: coverage/lcov.info to s3://ci-cov/lcov.info Connect timeout on endpoint URL: "https://ci-cov.s3.amazonaws.com/lcov.info"
section_end:1700000101:after_script\r\x1b[0K
ERROR: Job failed: exit code 1
""")
raw("runner-sysfail-bind-missing", "config_error", """Preparing the "docker" executor
ERROR: Job failed (system failure): Error response from daemon: invalid mount config for type "bind": bind source path does not exist: /srv/ci-cache-typo (docker.go:650:0s)
""", None, "runner_system_failure")
raw("runner-sysfail-no-bash", "config_error", """Preparing the "docker" executor
Using docker image sha256:abc for gcr.io/distroless/static:nonroot ...
ERROR: Job failed (system failure): Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: "sh": executable file not found in $PATH: unknown (exec.go:78:0s)
""", None, "runner_system_failure")
raw("runner-sysfail-privileged", "config_error", """Preparing the "kubernetes" executor
ERROR: Job failed (system failure): prepare environment: setting up build pod: pods "runner-abc" is forbidden: violates PodSecurity "restricted:latest": privileged (container "svc-0" must not set securityContext.privileged=true). Check https://docs.gitlab.com/runner/shells/index.html#shell-profile-loading for more information
""", None, "runner_system_failure")
# excerpts without the runner's line (other CI systems) where a test's output carries an exit line
raw("noverdict-node-child-exit-137", "build_error", """  ● supervisor › restarts the worker after a crash

    expect(received).toBe(expected)
    Expected: "restarted"
    Received: "gave up"

worker process exited with code 137 (expected by test 'restarts the worker after a crash')
""", None)
raw("noverdict-travis-143-teardown", "build_error", """$ bundle exec rake spec
12 examples, 2 failures
The command "bundle exec rake spec" exited with 1.
$ docker-compose down
Stopping app_db_1 ... done
The command "docker-compose down" exited with 143.
""", None)
