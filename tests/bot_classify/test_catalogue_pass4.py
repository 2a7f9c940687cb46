"""Issue 11, fourth pass: rules per message source for the kinds held-out D's misses showed, and for
message sources the catalogue was still thin on (Haskell, .NET, Windows, Composer, Bundler, conda,
Nix, Bazel's remote cache, Xcode, Elixir).

Every line below is written from the tool's message format (the source is named in each rule's
description in config/taxonomy.toml), not copied from an evaluation case: other tools, packages,
URLs, numbers.  Each rule has a positive case and a near miss that must NOT take it, and the
decision the shipped policy takes is checked (retry, resize, leave alone).
"""

from __future__ import annotations


import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule, decided, usage_record




# (trace, family, rule, action, extra facts) -- realistic lines per message source
POSITIVE = [
    # --- OOM: runtimes, allocators and build drivers that name the kill in their own words
    (b"[\xe2\xa0\x8a] Compiling 412 files with Solc 0.8.24\nError: \nzksolc exited with signal: 9 (SIGKILL)\n",
     "oom", "compiler-killed", Action.RESIZE, {}),
    (b"--  While building package lens-5.2.3 (scroll up to its section to see the error) using:\n"
     b"      /home/ci/.stack/setup-exe-cache/x86_64-linux/Cabal-simple_3.8.1.0_ghc-9.4.7 build --ghc-options \"\"\n"
     b"    Process exited with code: ExitFailure (-9) (THIS MAY INDICATE OUT OF MEMORY)\n",
     "oom", "compiler-killed", Action.RESIZE, {}),
    (b"Error: cabal: Failed to build pandoc-3.1.11. The build process was killed (i.e. SIGKILL). The typical reason "
     b"for this is that there is not enough memory available (e.g. the OS killed a process using lots of memory).\n",
     "oom", "compiler-killed", Action.RESIZE, {}),
    (b"[37 of 120] Compiling Data.Aeson.TH ( src/Data/Aeson/TH.hs, dist/build/Data/Aeson/TH.o )\n"
     b"ghc: out of memory (requested 2097152 bytes)\n", "oom", "runtime-heap-exhausted", Action.RESIZE, {}),
    (b"ghc-9.6.3: internal error: Unable to commit 2097152 bytes of memory\n    (GHC version 9.6.3 for x86_64_unknown_linux)\n",
     "oom", "runtime-heap-exhausted", Action.RESIZE, {}),
    (b"agda: Heap exhausted;\nagda: Current maximum heap size is 3221225472 bytes (3072 MB).\n",
     "oom", "runtime-heap-exhausted", Action.RESIZE, {}),
    (b"cl : Command line error\nsrc\\big_table.cpp(4021): fatal error C1060: compiler is out of heap space\n",
     "oom", "compiler-killed", Action.RESIZE, {}),
    # errno ENOMEM in any tool
    (b"/usr/bin/ld: final link failed: Cannot allocate memory\ncollect2: error: ld returned 1 exit status\n",
     "oom", "errno-enomem", Action.RESIZE, {}),
    (b"# example.com/svc/cmd/api\n/usr/local/go/pkg/tool/linux_amd64/link: write $WORK/b001/exe/a.out: "
     b"cannot allocate memory\n", "oom", "errno-enomem", Action.RESIZE, {}),
    (b"   Compiling openssl-sys v0.9.99\nerror: could not exec the linker `cc`\n  |\n"
     b"  = note: Cannot allocate memory (os error 12)\n", "oom", "errno-enomem", Action.RESIZE, {}),
    (b"  File \"/usr/lib/python3.11/subprocess.py\", line 1885, in _execute_child\n"
     b"OSError: [Errno 12] Cannot allocate memory\n", "oom", "errno-enomem", Action.RESIZE, {}),
    (b"Error: spawn ENOMEM\n    at ChildProcess.spawn (node:internal/child_process:421:11)\n",
     "oom", "errno-enomem", Action.RESIZE, {}),
    # Windows: the process's NTSTATUS says the commit failed
    (b"##[error]Process completed with exit code -1073741801.\n", "oom", "windows-status-no-memory", Action.RESIZE, {}),
    (b"LINK : fatal error LNK1102: out of memory\nThe paging file is too small for this operation to complete.\n",
     "oom", "windows-status-no-memory", Action.RESIZE, {}),
    # image builds: the step's own output shows the SIGKILLed child, the builder reports 1
    (b"Step 9/14 : RUN npm ci && npm run build\n ---> Running in 3c1d2e4f5a6b\n> next build\n"
     b"npm ERR! path /app\nnpm ERR! command failed\nnpm ERR! signal SIGKILL\n"
     b"The command '/bin/sh -c npm ci && npm run build' returned a non-zero code: 1\n",
     "oom", "docker-build-step-child-killed", Action.RESIZE, {}),
    (b"#14 [build 6/7] RUN pnpm --filter web build\n#14 93.41 error Command failed with exit code 137.\n"
     b"#14 ERROR: process \"/bin/sh -c pnpm --filter web build\" did not complete successfully: exit code: 1\n"
     b"ERROR: failed to solve: process \"/bin/sh -c pnpm --filter web build\" did not complete successfully: exit code: 1\n",
     "oom", "docker-build-step-child-killed", Action.RESIZE, {}),
    (b"#6 [linux/arm64 3/4] RUN make -C native release\n#6 611.2 make: *** [Makefile:40: release] Error 2\n"
     b"#6 611.3 go: gcc: exit status 137\n", "oom", "docker-build-step-sigkill", Action.RESIZE, {}),
    # other conventions for a SIGKILLed child (weak, generic): negative statuses, macOS and zsh, qemu-user
    (b"./build.sh: line 12:  4242 Killed: 9               ./bin/indexer --full\n", "oom", "make-killed", Action.RESIZE, {}),
    (b"zsh: killed     cargo build --release\n", "oom", "make-killed", Action.RESIZE, {}),
    (b"subprocess.CalledProcessError: Command '['ninja', '-C', 'out']' returned non-zero exit status -9.\n",
     "oom", "make-killed", Action.RESIZE, {}),
    (b"qemu: uncaught target signal 9 (Killed) - core dumped\n", "oom", "make-killed", Action.RESIZE, {}),
    (b"#9 [linux/arm64 4/5] RUN cargo build --release\n#9 611.0 qemu: uncaught target signal 9 (Killed) - core dumped\n"
     b"#9 ERROR: process \"/bin/sh -c cargo build --release\" did not complete successfully: exit code: 101\n",
     "oom", "docker-build-step-child-killed", Action.RESIZE, {}),
    # --- registries: credentials (config), outages (retry), gone repositories (config)
    (b"[ERROR] Failed to execute goal org.apache.maven.plugins:maven-deploy-plugin:3.1.1:deploy (default-deploy) on "
     b"project billing: Failed to deploy artifacts: Could not transfer artifact com.example:billing:jar:2.4.0 from/to "
     b"releases (https://nexus.example.org/repository/releases/): Failed to transfer file "
     b"https://nexus.example.org/repository/releases/com/example/billing/2.4.0/billing-2.4.0.jar with status code 401\n",
     "config_error", "package-registry-auth", Action.NONE, {}),
    (b"[ERROR] Failed to execute goal org.apache.maven.plugins:maven-deploy-plugin:2.8.2:deploy (default-deploy): "
     b"Failed to deploy artifacts: Could not transfer artifact org.acme:core:pom:1.0 from/to snapshots "
     b"(https://repo.acme.io/snapshots): Failed to transfer file: https://repo.acme.io/snapshots/org/acme/core/1.0/"
     b"core-1.0.pom. Return code is: 403, ReasonPhrase: Forbidden. -> [Help 1]\n",
     "config_error", "package-registry-auth", Action.NONE, {}),
    (b"Uploading acme_sdk-2.0.1.tar.gz\nERROR    HTTPError: 403 Forbidden from https://test.pypi.org/legacy/\n",
     "config_error", "package-registry-auth", Action.NONE, {}),
    (b"    Updating crates.io index\nwarning: spurious network error (1 tries remaining): [16] Error in the HTTP2 framing layer\n",
     "infrastructure", "package-registry-5xx", Action.RETRY, {}),
    (b"error: failed to download from `https://static.crates.io/crates/serde_json/1.0.108/download`\n\nCaused by:\n"
     b"  failed to get 200 response from `https://static.crates.io/crates/serde_json/1.0.108/download`, got 503\n"
     b"thread 'main' panicked at src/tools/cargotest/main.rs:92:9:\ntests failed for https://github.com/x/y\n",
     "infrastructure", "cargo-download-5xx", Action.RETRY, {}),
    (b"<Error><Code>InternalError</Code><Message>We encountered an internal error. Please try again.</Message></Error>\n",
     "infrastructure", "package-registry-5xx", Action.RETRY, {}),
    (b"   > Could not GET 'https://dl.bintray.com/acme/maven/io/acme/lib/1.2/lib-1.2.pom'. Received status code 403 "
     b"from server: Forbidden\n", "config_error", "package-repository-gone", Action.NONE, {}),
    (b"      > Could not GET 'https://maven.example.org/releases/a/b/1.0/b-1.0.pom'. Received status code 410 from "
     b"server: Gone\n", "config_error", "package-repository-gone", Action.NONE, {}),
    (b"[ERROR] Failed to execute goal on project web: Could not resolve dependencies for project a:web:war:1.0: "
     b"Could not transfer artifact org.x:y:jar:2.1 from/to bintray-x (https://dl.bintray.com/x/maven/): "
     b"Transfer failed for https://dl.bintray.com/x/maven/org/x/y/2.1/y-2.1.jar 502 Bad Gateway\n",
     "config_error", "package-repository-gone", Action.NONE, {}),
    # --- CI systems
    (b"##[error]The job running on runner ci-linux-04 has exceeded the maximum execution time of 2h30m0s.\n",
     "timeout", "ci-system-timeout", Action.NONE, {}),
    (b"2025-01-10T09:12:01.1234567Z ok 812 - parser handles nested quotes\n"
     b"2025-01-10T15:00:02.7654321Z ##[error]The operation was canceled.\n",
     "timeout", "github-job-canceled-by-limit", Action.NONE, {}),
    (b"Error: The operation was canceled.\n", "timeout", "github-job-canceled-by-limit", Action.NONE, {}),
    (b"No runner matching the specified labels was found: self-hosted, linux, gpu-a100.\n",
     "config_error", "gitlab-job-stuck-no-runner", Action.NONE, {}),
    (b"Requested labels: self-hosted, arm64\nJob defined at: acme/api/.github/workflows/ci.yml@refs/heads/main\n"
     b"Waiting for a runner to pick up this job...\n", "config_error", "github-job-never-picked-up", Action.NONE, {}),
    (b"Total file count: 12 ---- Processed file #3 (25.0%)\n"
     b"A 502 status code has been received, will attempt to retry the upload\n",
     "infrastructure", "artifact-upload", Action.RETRY, {}),
    (b" > git fetch --tags --force --progress -- https://github.com/acme/app.git +refs/heads/*:refs/remotes/origin/*\n"
     b"ERROR: Error fetching remote repo 'origin'\n"
     b"hudson.plugins.git.GitException: Failed to fetch from https://github.com/acme/app.git\n"
     b"\tat hudson.plugins.git.GitSCM.fetchFrom(GitSCM.java:1003)\n",
     "infrastructure", "jenkins-scm-fetch-failed", Action.RETRY, {}),
    (b"$ ./mvnw -B verify\n/bin/bash: line 142: ./mvnw: Permission denied\n",
     "config_error", "shell-exec-permission-denied", Action.NONE, {}),
    (b"sh: 1: ./scripts/release.sh: Permission denied\n", "config_error", "shell-exec-permission-denied", Action.NONE, {}),
    (b"Running on runner-abc-project-1-concurrent-0 via runner-abc...\n"
     b"ERROR: Job failed (system failure): unable to upgrade connection: container not found (\"build\")\n",
     "config_error", "build-container-exited-before-attach", Action.NONE, {"failure_reason": "runner_system_failure"}),
    # --- deterministic: recipes, compilers, assertion diffs, a remote server's heap
    (b"==> Warning: There is no checksum on file to fetch hdf5@1.14.9 safely.\n==> Error: Will not fetch hdf5@1.14.9\n"
     b"    Add a checksum or use --no-checksum to skip this check.\n", "build_error", "spack-error", Action.NONE, {}),
    (b"Error CS0103: The name 'inventoryManager' does not exist in the current context\n",
     "build_error", "compile-error", Action.NONE, {}),
    (b"C:\\Program Files\\dotnet\\sdk\\8.0.100\\Microsoft.Common.CurrentVersion.targets(4651,5): error MSB3030: "
     b"Could not copy the file \"obj\\Release\\app.dll\" because it was not found.\n",
     "build_error", "compile-error", Action.NONE, {}),
    (b"Module1.vb(12,9): error BC30451: 'Foo' is not declared. It may be inaccessible due to its protection level.\n",
     "build_error", "compile-error", Action.NONE, {}),
    (b"== Compilation error in file lib/acme/router.ex ==\n** (CompileError) lib/acme/router.ex:14: undefined function plug/1\n",
     "build_error", "compile-error", Action.NONE, {}),
    (b"===> Compiling acme_core failed\n", "build_error", "compile-error", Action.NONE, {}),
    (b"    expect(received).toStrictEqual(expected) // deep equality\n\n    - Expected  - 1\n    + Received  + 1\n",
     "build_error", "test-failure", Action.NONE, {}),
    (b"        \tError Trace:\t/builds/acme/svc/cache_test.go:88\n        \tError:      \tNot equal: \n"
     b"        \t            \texpected: 3\n        \t            \tactual  : 4\n", "build_error", "test-failure",
     Action.NONE, {}),
    (b"FAIL: store_test.go:211: StoreSuite.TestCompactAfterCrash\n\nstore_test.go:230:\n    c.Assert(n, Equals, 3)\n"
     b"... obtained int = 2\n... expected int = 3\n", "build_error", "test-failure", Action.NONE, {}),
    (b"Test Suite 'All tests' failed at 2025-01-02 10:00:00.000.\n** TEST FAILED **\n",
     "build_error", "test-failure", Action.NONE, {}),
    (b"$ curl -si http://search:9200/_bulk\nHTTP/1.1 503 Service Unavailable\ncontent-type: application/json\n\n"
     b"{\"status\":503,\"error\":\"Service Unavailable\",\"message\":\"java.lang.OutOfMemoryError: GC overhead limit exceeded\"}\n",
     "build_error", "remote-server-oom-json-body", Action.NONE, {}),
    # --- more sources: Windows crash statuses, package managers, Nix, Bazel, sccache, Xcode
    (b"##[error]Process completed with exit code -1073741819.\n", "build_error", "windows-crash-status", Action.NONE, {}),
    (b"error: test failed, to rerun pass `--lib`\nCaused by:\n  process didn't exit successfully: `target\\debug\\deps\\x.exe` "
     b"(exit code: 0xc00000fd, STATUS_STACK_OVERFLOW)\n", "build_error", "windows-crash-status", Action.NONE, {}),
    (b"Your requirements could not be resolved to an installable set of packages.\n\n  Problem 1\n"
     b"    - Root composer.json requires acme/http ^9.0, found acme/http[1.0.0, ..., 3.2.1] but it does not match the constraint.\n",
     "config_error", "dependency-resolution-failed", Action.NONE, {}),
    (b"Your lock file does not contain a compatible set of packages. Please run composer update.\n",
     "config_error", "lockfile-out-of-sync", Action.NONE, {}),
    (b"    curl error 52 while downloading https://repo.packagist.org/p2/acme/http.json: Empty reply from server\n",
     "infrastructure", "network-error", Action.RETRY, {}),
    (b"Could not find gem 'rails (~> 9.1)' in locally installed gems.\n", "config_error",
     "dependency-resolution-failed", Action.NONE, {}),
    (b"Could not fetch specs from https://rubygems.org/ due to underlying error <timed out (https://rubygems.org/specs.4.8.gz)>\n",
     "infrastructure", "network-error", Action.RETRY, {}),
    (b"You are trying to install in deployment mode after changing\nyour Gemfile. Run `bundle install` elsewhere\n",
     "config_error", "lockfile-out-of-sync", Action.NONE, {}),
    (b"PackagesNotFoundError: The following packages are not available from current channels:\n\n  - pytorch-cuda=13.9\n",
     "config_error", "dependency-resolution-failed", Action.NONE, {}),
    (b"CondaHTTPError: HTTP 000 CONNECTION FAILED for url <https://conda.anaconda.org/conda-forge/linux-64/repodata.json>\n",
     "infrastructure", "network-error", Action.RETRY, {}),
    (b"CondaHTTPError: HTTP 502 BAD GATEWAY for url <https://conda.anaconda.org/conda-forge/noarch/repodata.json>\n",
     "infrastructure", "package-registry-5xx", Action.RETRY, {}),
    (b"error: Unsatisfiable requirements detected for package Acme [0a1b2c3d]:\n", "config_error",
     "dependency-resolution-failed", Action.NONE, {}),
    (b"Error: [Cabal-7107]\nCould not resolve dependencies:\n", "config_error", "dependency-resolution-failed", Action.NONE, {}),
    (b"  /tmp/Acme.Api.csproj : error NU1101: Unable to find package Acme.Http. No packages exist with this id in source(s): nuget.org\n",
     "config_error", "dependency-resolution-failed", Action.NONE, {}),
    (b"  /tmp/Acme.Api.csproj : error NU1301: Unable to load the service index for source https://api.nuget.org/v3/index.json.\n",
     "infrastructure", "network-error", Action.RETRY, {}),
    (b"error: hash mismatch in fixed-output derivation '/nix/store/abc123-source.drv':\n         specified: sha256-AAAA\n",
     "build_error", "package-checksum-mismatch", Action.NONE, {}),
    (b"error: unable to download 'https://cache.nixos.org/nar/0abc.nar.xz': HTTP error 503\n",
     "infrastructure", "package-registry-5xx", Action.RETRY, {}),
    (b"error: builder for '/nix/store/q1w2e3-acme-1.0.drv' failed with exit code 2;\n",
     "build_error", "build-tool-failed", Action.NONE, {}),
    (b"ERROR: Failed to query remote execution capabilities: UNAVAILABLE: io exception\n",
     "infrastructure", "network-error", Action.RETRY, {}),
    (b"ERROR: /src/BUILD:12:10: Lost inputs no longer available remotely: bazel-out/k8-opt/bin/libx.a\n",
     "infrastructure", "network-error", Action.RETRY, {}),
    (b"sccache: error: Timed out waiting for server startup. Maybe the remote service is unreachable?\n",
     "infrastructure", "network-error", Action.RETRY, {}),
    (b"** ARCHIVE FAILED **\n\nThe following build commands failed:\n", "build_error", "build-tool-failed", Action.NONE, {}),
    # --- probes of common CI failures the catalogue still missed
    (b"signal: killed\nFAIL\tgithub.com/acme/search/index\t301.442s\n", "oom", "go-test-binary-killed", Action.RESIZE, {}),
    (b"#\n# There is insufficient memory for the Java Runtime Environment to continue.\n"
     b"# Native memory allocation (malloc) failed to allocate 1048576 bytes for AllocateHeap\n",
     "oom", "errno-enomem", Action.RESIZE, {}),
    (b"Error: YAML parse error on web/templates/deployment.yaml: error converting YAML to JSON: yaml: line 8: "
     b"did not find expected key\n", "config_error", "deploy-tool-refused", Action.NONE, {}),
    (b"Error response from daemon: Get \"https://quay.io/v2/\": context deadline exceeded\n",
     "infrastructure", "network-timeout", Action.RETRY, {}),
    (b"npm ERR! enoent Could not read package.json: Error: ENOENT: no such file or directory, open "
     b"'/builds/acme/web/package.json'\n", "config_error", "file-not-found", Action.NONE, {}),
    (b"src/router.ts:44:7 - error TS2322: Type 'string' is not assignable to type 'number'.\n",
     "build_error", "compile-error", Action.NONE, {}),
    (b"    expect(jest.fn()).toHaveBeenCalledTimes(expected)\n\n    Expected number of calls: 1\n",
     "build_error", "test-failure", Action.NONE, {}),
    (b">       assert resp.status_code == 200\nE       assert 404 == 200\n", "build_error", "test-failure", Action.NONE, {}),
    (b"FAIL Required test coverage of 85% not reached. Total coverage: 80.02%\n", "build_error",
     "lint-or-format-failed", Action.NONE, {}),
    (b"ERROR: Coverage for branches (61.5%) does not meet global threshold (70%)\n", "build_error",
     "lint-or-format-failed", Action.NONE, {}),
    (b'Jest: "global" coverage threshold for statements (90%) not met: 88.4%\n', "build_error",
     "lint-or-format-failed", Action.NONE, {}),
    (b"##[error]The action has timed out.\n", "timeout", "ci-system-timeout", Action.NONE, {}),
    # --- a second probe: V8's OOM report, sbt, containerd's CRI, .NET's HTTP client, Azure, Maven via GitHub, Jest, npm 7+
    (b"<--- Last few GCs --->\n\n[28:0x6b]    91234 ms: Scavenge 2040.1 (2077.9) -> 2039.8 (2078.1) MB, 4.1 / 0.0 ms\n",
     "oom", "runtime-heap-exhausted", Action.RESIZE, {}),
    (b"[error] sbt.ForkMain 55123 failed with exit code 137\n", "oom", "make-killed", Action.RESIZE, {}),
    (b"ERROR: Job failed: image pull failed: rpc error: code = NotFound desc = failed to pull and unpack image "
     b"\"registry.example.com/acme/buidler:1.4\": failed to resolve reference: not found\n",
     "config_error", "image-pull-not-found", Action.NONE, {"failure_reason": "runner_system_failure"}),
    (b"Error: Response status code does not indicate success: 502 (Bad Gateway).\n", "infrastructure", "http-5xx",
     Action.RETRY, {}),
    (b"##[error]We stopped hearing from agent Azure Pipelines 3. Verify the agent machine is running and has a "
     b"healthy network connection.\n", "infrastructure", "runner-shutdown", Action.RETRY, {}),
    (b"Error:  /home/runner/work/app/src/main/java/a/B.java:[33,17] cannot find symbol\n", "build_error",
     "compile-error", Action.NONE, {}),
    (b"Test Suites: 2 failed, 14 passed, 16 total\n", "build_error", "test-failure", Action.NONE, {}),
    (b"npm error Lifecycle script `build` failed with error:\nnpm error code 2\n", "build_error", "build-tool-failed",
     Action.NONE, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE, ids=[f"{p[2]}-{i}" for i, p in enumerate(POSITIVE)])
def test_fourth_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must not decide, family expected or None, extra facts)
NEAR_MISSES = [
    # a compiler stopped by SIGTERM is not an OOM kill; ExitFailure of another signal or status is not -9
    (b"zksolc exited with signal: 15 (SIGTERM)\n", "compiler-killed", None, {}),
    (b"    Process exited with code: ExitFailure (-6)\n", "compiler-killed", None, {}),
    (b"    Process exited with code: ExitFailure 1\n", "compiler-killed", None, {}),
    # GHC's heap words in prose, not the RTS
    (b"see the FAQ: Heap exhausted errors mean the -M limit is too low\n", "runtime-heap-exhausted", None, {}),
    # fork's EAGAIN is the process-count limit, not memory
    (b"/bin/sh: fork: retry: Resource temporarily unavailable\nbash: fork: Resource temporarily unavailable\n",
     "errno-enomem", None, {}),
    # a docker build step failing with a compile error, no SIGKILLed child: the build's error
    (b"Step 7/9 : RUN go build ./...\n ---> Running in 1a2b3c\n./main.go:12:2: undefined: Foo\n"
     b"The command '/bin/sh -c go build ./...' returned a non-zero code: 1\n", "docker-build-step-child-killed",
     "build_error", {}),
    # buildkit progress with a child's ordinary failure
    (b"#6 211.3 go: gcc: exit status 1\n", "docker-build-step-sigkill", None, {}),
    # neighbours of -9 and of 'Killed: 9', and qemu's other signals
    (b"Process finished with exit code -90\n", "make-killed", None, {}),
    (b"Killed: 95 stale sessions\n", "make-killed", None, {}),
    (b"qemu: uncaught target signal 11 (Segmentation fault) - core dumped\n", "make-killed", None, {}),
    # a Maven transfer that broke on the network stays a network error; twine's 5xx is not a credentials problem
    (b"[ERROR] Failed to deploy artifacts: Could not transfer artifact a:b:jar:1 from/to r (https://r.example/): "
     b"Connection reset\n", "package-registry-auth", "infrastructure", {}),
    (b"ERROR    HTTPError: 503 Service Unavailable from https://upload.pypi.org/legacy/\n", "package-registry-auth", None, {}),
    # JCenter stayed up read-only: its 5xx is transient
    (b"   > Could not GET 'https://jcenter.bintray.com/a/b/1.0/b-1.0.pom'. Received status code 502 from server: "
     b"Bad Gateway\n", "package-repository-gone", "infrastructure", {}),
    # a 404 from crates.io is not the registry's fault
    (b"  failed to get 200 response from `https://static.crates.io/crates/nope/0.0.1/download`, got 404\n",
     "cargo-download-5xx", None, {}),
    # the GitHub runner shut down: the cancel is its consequence (runner_shutdown, retried)
    (b"2025-01-10T10:00:00.0000000Z ##[error]The runner has received a shutdown signal. This can happen when the "
     b"runner service is stopped, or a manually started runner is canceled.\n"
     b"2025-01-10T10:00:00.1000000Z ##[error]The operation was canceled.\n", "github-job-canceled-by-limit",
     "infrastructure", {}),
    # a job that got a runner and then failed: the failure decides, not the queueing line
    (b"Waiting for a runner to pick up this job...\n$ make\nsrc/a.c:3:1: error: expected ';' before '}' token\n",
     "github-job-never-picked-up", "build_error", {}),
    # an artifact service answering 404 (the artifact is not there) is not an outage
    (b"A 404 status code has been received, will attempt to retry the upload\n", "artifact-upload", None, {}),
    # Jenkins' fetch failure with git's own cause: the cause decides
    (b"ERROR: Error fetching remote repo 'origin'\nhudson.plugins.git.GitException: Failed to fetch from "
     b"https://github.com/acme/app.git\nstderr: remote: Invalid username or password.\n"
     b"fatal: Authentication failed for 'https://github.com/acme/app.git/'\n", "jenkins-scm-fetch-failed",
     "config_error", {}),
    (b"ERROR: Error fetching remote repo 'origin'\nhudson.plugins.git.GitException: Failed to fetch from "
     b"git@github.com:acme/app.git\nerror: unable to write file .git/objects/pack/tmp_pack_x: No space left on device\n",
     "jenkins-scm-fetch-failed", "infrastructure", {}),
    # ssh refusing a key is not the shell's EACCES on a file
    (b"git@gitlab.example.com: Permission denied (publickey).\n", "shell-exec-permission-denied", None, {}),
    # the helper container gone before attach is not the build container's rule (the nineteenth pass reads it at
    # prepare time as the helper image that cannot run there: k8s-helper-container-exited-at-prepare, config_error)
    (b"ERROR: Job failed (system failure): prepare environment: unable to upgrade connection: container not found "
     b"(\"helper\")\n", "build-container-exited-before-attach", "config_error",
     {"failure_reason": "runner_system_failure"}),
    # a fetch that failed before, then Spack's ordinary success
    (b"==> Fetching https://mirror.spack.io/_source-cache/archive/ab/ab12.tar.gz\n", "spack-error", None, {}),
    # compiler warnings are not errors
    (b"Program.cs(8,13): warning CS0618: 'Client.Send()' is obsolete\n", "compile-error", None, {}),
    # testify's single-spaced words and a bare 'expected:' line are not assertion diffs
    (b"actual: 5 requests in flight\nexpected: 5\n", "test-failure", None, {}),
    # the job's own structured log with a heap error and no HTTP 5xx: the job's memory
    (b"{\"level\":\"error\",\"message\":\"java.lang.OutOfMemoryError: Java heap space\"}\n",
     "remote-server-oom-json-body", "oom", {}),
    # NTSTATUS values in other contexts: a zero exit, another code
    (b"##[error]Process completed with exit code 1073741819.\n", "windows-crash-status", None, {}),
    (b"##[error]Process completed with exit code 1073741801.\n", "windows-status-no-memory", None, {}),
    # package managers: warnings and successes
    (b"Warning: The lock file is not up to date with the latest changes in composer.json.\nGenerating autoload files\n",
     "lockfile-out-of-sync", None, {}),
    (b"Fetching gem metadata from https://rubygems.org/.........\nResolving dependencies...\n",
     "network-error", None, {}),
    (b"warning: spurious-retry is disabled\n", "package-registry-5xx", None, {}),
    (b"** BUILD SUCCEEDED **\n", "build-tool-failed", None, {}),
    # a test's own message that quotes a killed child inline is not go test's report of its binary
    (b"    runner_test.go:41: want error, got: signal: killed\n", "go-test-binary-killed", None, {}),
    # apt's error lines are not pytest's failure lines; pytest-cov's success line is not a gate failure
    (b"E: Unable to locate package libfoo-dev\n", "test-failure", None, {}),
    (b"Required test coverage of 80% reached. Total coverage: 85.00%\n", "lint-or-format-failed", None, {}),
    (b"Test Suites: 16 passed, 16 total\n", "test-failure", None, {}),
    (b"[error] sbt.ForkMain 55123 failed with exit code 1\n", "make-killed", None, {}),
    (b"Error: Response status code does not indicate success: 404 (Not Found).\n", "http-5xx", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES, ids=[f"not-{m[1]}-{i}" for i, m in enumerate(NEAR_MISSES)])
def test_fourth_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)


def test_a_service_containers_enomem_is_the_services(taxonomy):
    """GitLab Runner's dump of a failed service's log carries the service's own ENOMEM: not the job's memory."""
    trace = (b"*** WARNING: Service runner-x-project-1-concurrent-0-es-0 probably didn't start properly.\n"
             b"Service container logs:\n"
             b"2025-01-01T00:00:00Z OpenJDK 64-Bit Server VM warning: INFO: os::commit_memory(0x00000000c5330000, "
             b"1020067840, 0) failed; error='Cannot allocate memory' (errno=12)\n$ pytest -q\n")
    v, action = decided(trace, taxonomy)
    assert (v.family.value, v.rule) == ("build_error", "service-container-own-oom"), v.evidence
    assert action != Action.RESIZE


# ------------------------------------------------------------------ traps stay right

@pytest.mark.parametrize("trace", [
    # a test that asserts a SIGKILL/137 and got something else
    b"--- FAIL: TestOOMKillReported (2.01s)\n    oom_test.go:61:\n        \tError Trace:\toom_test.go:61\n"
    b"        \tError:      \tNot equal: \n        \t            \texpected: 137\n        \t            \tactual  : 1\n",
    # a test suite that SIGKILLs a shim on purpose (go-check)
    b"FAIL: shim_linux_test.go:88: ShimSuite.TestKillShimWithSIGKILL\n... obtained uint32 = 0xff\n... expected uint32 = 0x89\n",
    # a remote server's own heap failure in its JSON error body (Spring Boot)
    b"HTTP/1.1 500\nContent-Type: application/json\n\n{\n  \"timestamp\": \"2025-01-01T00:00:00.000+0000\",\n"
    b"  \"status\": 500,\n  \"error\": \"Internal Server Error\",\n  \"message\": \"Java heap space\",\n"
    b"  \"path\": \"/api/reports\"\n}\n",
    # a Go test about ENOMEM that failed: its 'cannot allocate memory' is the test's subject
    b"=== RUN   TestMmapReportsENOMEM\n    mmap_test.go:31: want EAGAIN, got: cannot allocate memory\n"
    b"--- FAIL: TestMmapReportsENOMEM (0.00s)\nFAIL\tacme/mem\t0.012s\n",
    # pytest's summary of a test named after OOM whose output quotes an ENOMEM
    b"E       OSError: [Errno 12] Cannot allocate memory\n"
    b"FAILED tests/test_limits.py::test_oom_guard_rejects_huge_buffer - OSError: [Errno 12] Cannot allocate memory\n",
])
def test_fourth_pass_traps_are_never_resized(taxonomy, trace):
    v, action = decided(trace, taxonomy)
    assert v.family.value == "build_error", (v.rule, v.evidence)
    assert action != Action.RESIZE


def test_enomem_is_set_aside_by_a_record_that_saw_no_oom(taxonomy):
    """ENOMEM is weak text evidence: the wrapper's record of the failed job with no OOM kill sets it aside."""
    trace = b"OSError: [Errno 12] Cannot allocate memory\n"
    v, action = decided(trace, taxonomy)
    assert (v.family.value, action) == ("oom", Action.RESIZE)
    v, action = decided(trace, taxonomy, record=usage_record(oom_kills=0, exit_code=1))
    assert v.family.value != "oom" and action != Action.RESIZE, (v.rule, v.evidence)
