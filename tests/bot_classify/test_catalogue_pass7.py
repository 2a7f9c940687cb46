"""Issue 11, seventh pass: the miss kinds of the blind sets F, G and H, generalised per message
source (a tool's own catalogue, an exit-status or errno convention; each rule's description in
config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools,
hosts, paths and numbers. Each rule has a positive, a near miss that must NOT take it, and the
traps around it must stay right; the decision the shipped policy takes is checked too.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule, check_trap

TS = b"2026-02-03T04:05:06.7890123Z "   # a CI system's timestamp prefix

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- OOM evidence that generic rules used to win
    # a build tool's summary after a SIGKILLed child: the kill decides (kill_signal before generic)
    (b"[esbuild] worker terminated by signal SIGKILL\nmake[1]: *** [Makefile:30: dist/app.js] Error 2\n"
     b"make: *** [Makefile:12: all] Error 2\n", "oom", "sigkill-any-tool", Action.RESIZE, {}),
    (TS + b"emcc: error: '/opt/emsdk/upstream/bin/clang++ -O2 -c gen/tables.cpp' failed (received SIGKILL (-9))\n"
     + TS + b"ninja: build stopped: subcommand failed.\n", "oom", "sigkill-any-tool", Action.RESIZE, {}),
    (b"$ rollup -c\nerror Command failed with signal \"SIGKILL\".\n"
     b"info Visit https://yarnpkg.com/en/docs/cli/run for documentation about this command.\n",
     "oom", "make-killed", Action.RESIZE, {}),
    (b"Creating an optimized production build...\nThe build failed because the process exited too early. This probably "
     b"means the system ran out of memory or someone called `kill -9` on the process.\n", "oom", "make-killed",
     Action.RESIZE, {}),
    (b"Error: Command failed: node scripts/bundle.js\n    at ChildProcess.exithandler (node:child_process:422:12) {\n"
     b"  code: null,\n  killed: true,\n  signal: 'SIGKILL',\n  cmd: 'node scripts/bundle.js'\n}\n", "oom", "make-killed",
     Action.RESIZE, {}),
    (b"INFO: Analyzed 4120 targets (812 packages loaded, 31002 targets configured).\n"
     b"Server terminated abruptly (error code: 14, error message: 'Connection reset by peer', "
     b"log file: '/root/.cache/bazel/_bazel_root/5f0e/server/jvm.out')\n", "oom", "bazel-server-vanished", Action.RESIZE, {}),
    # the JVM's GC-overhead message alone (a compiler's reporter), OCaml's Out_of_memory
    (b"[info] compiling 412 Scala sources to /builds/acme/core/target/scala-2.13/classes ...\n"
     b"[error] GC overhead limit exceeded\n", "oom", "runtime-heap-exhausted", Action.RESIZE, {}),
    (b"GC overhead limit exceeded\n", "oom", "runtime-heap-exhausted", Action.RESIZE, {}),
    (b"COQC theories/Cat/Limits.v\nFile \"./theories/Cat/Limits.v\", line 310, characters 2-11:\n"
     b"Error: Out of memory.\n", "oom", "runtime-heap-exhausted", Action.RESIZE, {}),
    (b"$ dune build @install\nFatal error: exception Out_of_memory\n", "oom", "runtime-heap-exhausted",
     Action.RESIZE, {}),
    (b"> Task :app:compileReleaseKotlin\n"
     b"Daemon will be stopped at the end of the build after running out of JVM memory\n",
     "oom", "gradle-daemon-memory-exhausted", Action.RESIZE, {}),
    (b"The Daemon will expire after the build after running out of JVM heap space.\n",
     "oom", "gradle-daemon-memory-exhausted", Action.RESIZE, {}),
    # a Kubernetes build container SIGKILLed, the pod gone by cleanup time: the 137 decides, not the cleanup
    (b"ERROR: Error cleaning up pod: pods \"runner-q1w2e3-project-77-concurrent-1abcd\" not found\n"
     b"ERROR: Job failed: command terminated with exit code 137\n", "oom", None, Action.RESIZE,
     {"exit_code": 137}),
    # --- infrastructure that read as deterministic
    (b"#9 [4/7] RUN wget -q https://downloads.example.org/tool-2.4.tgz && tar xzf tool-2.4.tgz\n"
     b"#9 ERROR: process \"/bin/sh -c wget -q https://downloads.example.org/tool-2.4.tgz && tar xzf tool-2.4.tgz\" "
     b"did not complete successfully: exit code: 4\n", "infrastructure", "wget-network-failure-exit", Action.RETRY, {}),
    (b"Step 5/9 : RUN wget -nv https://mirror.example.net/pkg/lib-3.1.zip\n"
     b"The command '/bin/sh -c wget -nv https://mirror.example.net/pkg/lib-3.1.zip' returned a non-zero code: 8\n",
     "infrastructure", "wget-network-failure-exit", Action.RETRY, {}),
    (b"$ wget -q -O sdk.tar.xz https://sdk.example.org/sdk-9.tar.xz\n", "infrastructure", "fallback-wget-exit",
     Action.RETRY, {"exit_code": 4}),
    (b"Getting source from Git repository\n/usr/bin/bash: line 212: /builds/acme/app.tmp/gitlab_runner_env: "
     b"No such file or directory\n", "infrastructure", "runner-env-file-vanished", Action.RETRY, {}),
    (b"Fetching changes with git depth set to 50...\nfatal: couldn't find remote ref refs/pipelines/55501234\n",
     "infrastructure", "git-remote-overloaded", Action.RETRY, {}),
    (b"fatal: remote error: GitLab is currently unable to handle this request due to load (ID 0a1b2c3d4e).\n",
     "infrastructure", "git-remote-overloaded", Action.RETRY, {}),
    (b"error: could not lock config file /home/ci/.gitconfig: File exists\n", "infrastructure",
     "git-concurrent-update", Action.RETRY, {}),
    (b"ERROR: Job failed: adding cache volume: set volume permissions: running permission container \"9f8e\" "
     b"for volume \"runner-abc-project-3-concurrent-0-cache-1\": waiting for permission container to finish: "
     b"exit code 1\n", "infrastructure", "runner-helper-fatal", Action.RETRY, {}),
    (b"WARNING: Uploading artifacts as \"junit\" to coordinator... 308 Permanent Redirect  id=81234 responseStatus=308 "
     b"Permanent Redirect status=308\n", "infrastructure", "artifact-upload", Action.RETRY, {}),
    (b"ERROR: Error cleaning up pod: pods \"runner-z9-project-1-concurrent-0\" not found\n"
     b"ERROR: Job failed: exit code 1\n", "infrastructure", "fallback-pod-cleanup-error", Action.RETRY, {}),
    (b"warning: fetch failed: error sending request: dns error: failed to lookup address information: "
     b"Try again\n", "infrastructure", "dns-error", Action.RETRY, {}),
    (b"[!] CDN: trunk URL couldn't be downloaded: https://cdn.example.org/Specs/0/1/2/Lib.podspec.json "
     b"Response: Failure when receiving data from the peer\n", "infrastructure", "network-error", Action.RETRY, {}),
    (b"CDN: trunk URL couldn't be downloaded: https://cdn.example.org/Specs/a.json Response: 429 429: Too Many "
     b"Requests\n", "infrastructure", "http-5xx", Action.RETRY, {}),
    (b"/src/restore.proj : error : Unable to load the service index for source "
     b"https://pkgs.example.org/feed/nuget/v3/index.json.\n", "infrastructure", "network-error", Action.RETRY, {}),
    (b"ERROR: Download of https://ftp.example.org/gnu/m4.tar.gz failed: hostname 'm.mirror.example.net' doesn't "
     b"match 'ftp.example.org'\n", "infrastructure", "tls-error", Action.RETRY, {}),
    # --- configuration that read as infrastructure or build
    (b"fatal: unable to access 'https://git.corp.example/a/b.git/': SSL certificate problem: self-signed "
     b"certificate in certificate chain\n", "config_error", "tls-untrusted", Action.NONE, {}),
    (b"Error response from daemon: Get \"https://registry.corp.example/v2/\": tls: failed to verify certificate: "
     b"x509: certificate signed by unknown authority\n", "config_error", "tls-untrusted", Action.NONE, {}),
    (b"npm ERR! code SELF_SIGNED_CERT_IN_CHAIN\n", "config_error", "tls-untrusted", Action.NONE, {}),
    (b"Caused by: sun.security.validator.ValidatorException: PKIX path building failed: "
     b"sun.security.provider.certpath.SunCertPathBuilderException\n", "config_error", "tls-untrusted",
     Action.NONE, {}),
    (b"fatal: unable to access 'https://git.corp.example/g/p.git/': server certificate verification failed. "
     b"CAfile: /etc/ssl/certs/ca-certificates.crt CRLfile: none\n", "config_error", "tls-untrusted",
     Action.NONE, {}),
    (b"ssl.SSLCertVerificationError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get "
     b"local issuer certificate (_ssl.c:1006)\n", "config_error", "tls-untrusted", Action.NONE, {}),
    (b"> Could not GET 'https://acme.bintray.com/maven/com/acme/ui/2.0/ui-2.0.pom'. Received status code 503 "
     b"from server: Service Unavailable\n", "config_error", "package-repository-gone", Action.NONE, {}),
    (b"/src/App.csproj : error NU1301: Unable to load the service index for source "
     b"https://dotnet.myget.org/F/roslyn/api/v3/index.json.\n", "config_error", "package-repository-gone",
     Action.NONE, {}),
    (b"error building image: GET https://ghcr.io/token?scope=repository%3Aacme%2Fbase%3Apull&service=ghcr.io: "
     b"unexpected status code 401 Unauthorized: {\"errors\":[{\"code\":\"UNAUTHORIZED\"}]}\n",
     "config_error", "registry-credentials-refused", Action.NONE, {}),
    (b"could not read Username for 'https://git.example.org': terminal prompts disabled\n",
     "config_error", "git-credentials-refused", Action.NONE, {}),
    (b"  - Installing acme/tools (dev-main 1a2b3c4): Cloning 1a2b3c4\n    Failed to download acme/tools from source: "
     b"Failed to clone https://hg.example.org/acme/tools, hg was not found, check that it is installed and in "
     b"your PATH env.\n", "config_error", "executable-not-found", Action.NONE, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{p[2] or p[1]}-{i}" for i, p in enumerate(POSITIVE)])
def test_seventh_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must not decide, family expected or None, extra facts)
NEAR_MISSES = [
    # other signals and other Bazel server errors
    (b"error Command failed with signal \"SIGTERM\".\n", "make-killed", None, {}),
    (b"  killed: true,\n  signal: 'SIGTERM',\n", "make-killed", None, {}),
    (b"The build failed because the process exited too early.\n", "make-killed", None, {}),
    (b"Server terminated abruptly (error code: 2, error message: '', log file: '/tmp/jvm.out')\n", "bazel-server-vanished",
     None, {}),
    # the GC-overhead or Out_of_memory words quoted, not reported
    (b"    assert 'GC overhead limit exceeded' in caplog.text\n", "runtime-heap-exhausted", None, {}),
    (b"Error: Out of memory budget for the solver (raise -max-mem)\n", "runtime-heap-exhausted", None, {}),
    (b"Daemon will be stopped at the end of the build after the daemon registry became unreadable\n",
     "gradle-daemon-memory-exhausted", None, {}),
    # another tool's 4 or 8 in a RUN step, and wget's own 404 (a wrong URL): not the network
    (b"#5 ERROR: process \"/bin/sh -c make -j4\" did not complete successfully: exit code: 4\n",
     "wget-network-failure-exit", "build_error", {}),
    (b"$ wget -q https://example.org/a.tgz\n", "fallback-wget-exit", None, {"exit_code": 1}),
    # a script's own missing file is the project's, not the runner's
    (b"/usr/bin/bash: line 3: ./ci/env.sh: No such file or directory\n", "runner-env-file-vanished",
     "config_error", {}),
    # a missing branch is configuration (Spack's ref_not_found), only refs/pipelines/ is GitLab's timing
    (b"fatal: couldn't find remote ref refs/heads/feature-gone\n", "git-remote-overloaded", "config_error", {}),
    (b"error: could not lock config file /root/.gitconfig: Permission denied\n", "git-concurrent-update", None, {}),
    (b"Checking permission container image policy\n", "runner-helper-fatal", None, {}),
    (b"Uploading artifacts as \"archive\" to coordinator... 201 Created  id=81234 responseStatus=201 Created\n",
     "artifact-upload", None, {}),
    # a cleanup error after a compile error: the compile error decides
    (b"src/a.c:3:1: error: expected ';' before '}' token\nERROR: Error cleaning up pod: pods \"p\" not found\n",
     "fallback-pod-cleanup-error", "build_error", {}),
    (b"failed to lookup address information for 3 hosts in 0.2s\n", "dns-error", None, {}),
    (b"served 1429: Too Many Requests handled\n", "http-5xx", None, {}),
    (b"Failure when sending the report to the dashboard\n", "network-error", None, {}),
    # expiry and name mismatch are not trust: they stay infrastructure
    (b"x509: certificate has expired or is not yet valid: current time 2026-01-01T00:00:00Z is after "
     b"2025-12-31T23:59:59Z\n", "tls-untrusted", "infrastructure", {}),
    # (the thirty-sixth pass reads OpenSSL's own 'certificate has expired' as configuration: an expired server
    # certificate or CA-bundle root fails every re-run; openssl-certificate-has-expired, not tls-untrusted)
    (b"curl: (60) SSL certificate problem: certificate has expired\n", "tls-untrusted", "config_error", {}),
    (b"hostname 'm.mirror.example.net' doesn't match 'ftp.example.org'\n", "tls-untrusted", "infrastructure", {}),
    # JCenter stayed read-only: its 5xx is an outage; nuget.org's service index is an outage
    (b"> Could not GET 'https://jcenter.bintray.com/com/x/y/1.0/y-1.0.pom'. Received status code 502 from "
     b"server: Bad Gateway\n", "package-repository-gone", "infrastructure", {}),
    (b"error : Unable to load the service index for source https://api.nuget.org/v3/index.json.\n",
     "package-repository-gone", "infrastructure", {}),
    (b"error building image: GET https://registry.example.org/v2/acme/base/manifests/3: unexpected status code "
     b"503 Service Unavailable\n", "registry-credentials-refused", None, {}),
    (b"warning: could not read the username from .netrc\n", "git-credentials-refused", None, {}),
    (b"git was not found in the list of changed files\n", "executable-not-found", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"not-{m[1]}-{i}" for i, m in enumerate(NEAR_MISSES)])
def test_seventh_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)


# ------------------------------------------------------------------ traps stay right

@pytest.mark.parametrize("trace,extra", [
    # a test that SIGKILLs its child and fails: its summary (a diagnostic) decides before kill_signal
    (b"=== RUN   TestShutdown\n    shutdown_test.go:40: child terminated by signal SIGKILL\n"
     b"--- FAIL: TestShutdown (0.40s)\nFAIL\tacme/agent\t0.5s\nmake: *** [Makefile:9: test] Error 1\n", {}),
    # a remote server's own GC-overhead error relayed in its error response
    (b"requests.exceptions.HTTPError: 500 Server Error: java.lang.OutOfMemoryError: GC overhead limit exceeded "
     b"for url: http://search:8983/solr/core/select\n", {}),
    # a test named after OOM that failed its own assertion
    (b"[  FAILED  ] AllocatorTest.OutOfMemoryIsReported (3 ms)\n", {}),
])
def test_seventh_pass_traps_are_never_resized(taxonomy, trace, extra):
    check_trap(taxonomy, trace, extra)


def test_kill_signal_stage_sits_between_diagnostic_and_generic(taxonomy):
    names = [s.name for s in taxonomy.stages]
    assert names.index("diagnostic") < names.index("kill_signal") < names.index("generic")
    # the twentieth pass adds CircleCI's step verdict for a SIGKILLed step (weak, like the other two)
    # the thirtieth pass adds Julia Pkg's '(received signal: KILL)' and the shell's 'Killed' glued to a progress line
    # the forty-eighth pass adds the same word glued to a tqdm bar (which starts with its description)
    assert {r.name for r in taxonomy.rules_by_stage["kill_signal"]} == {"make-killed", "sigkill-any-tool",
                                                                         "circleci-killed-signal",
                                                                         "julia-pkg-test-sigkill",
                                                                         "progress-line-killed",
                                                                         "tqdm-progress-bar-killed"}
