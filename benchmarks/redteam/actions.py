"""GitHub Actions' own job-log messages (issue 11): probes written from the sources.

The public threads every blind set is collected from are dominated by GitHub Actions logs, and a farm's
developers run the same actions' tools, ``gh`` and the toolkit's messages in GitLab jobs too.  Each probe
below is a job-log tail as GitHub Actions prints it (``gh``: the runner's "Set up job" header, each step's
``##[group]Run ...`` block, the runner's ``##[error]``/``##[warning]`` annotations, the post steps and
"Cleaning up orphan processes"; with the raw log's timestamps when ``ts``, as the web view copies it
without) around one message of the runner, the toolkit or an action, with the family its *cause* has (from
the source's semantics and GitHub's docs, never from what the classifier says) and a comment naming the
source.  GitHub has no GitLab failure_reason and no job exit code: every probe is scored with the scorer's
default (``script_failure``, no exit code), so the step's own ``Process completed with exit code N`` line is
all the log says about it.  A few probes are GitLab jobs (``job``) running ``gh``.

Sources, as fetched (``git --git-dir=/work/.mirror/OWNER+NAME/repo``, HEAD):
actions/runner ``258d6c85`` (RUN), actions/toolkit ``4b9afa4c`` (TK), actions/checkout ``f548e57e`` (CO),
actions/cache ``27d5ce7f`` (CA), actions/upload-artifact ``bbbca2dd`` (UA), actions/download-artifact
``484a0b52`` (DA), actions/setup-node ``ae0d4ed0`` (SN), actions/setup-python ``5fda3b95`` (SP),
actions/setup-java ``1dbac3c9`` (SJ), docker/login-action ``9f4a8ea5`` (DL).  Messages the service writes
(job-level annotations: the time limit, lost runners, action resolution) are not in an open repository:
the comment names GitHub's docs instead.  ``gh``'s ``HTTP %d: %s (%s)`` is cli/cli ``api`` HTTPError.Error;
BuildKit's ``process %q did not complete successfully: exit code: %d`` is moby/buildkit's exec op error as
buildx prints it (``ERROR: failed to solve: ...``).

Written before scoring (issue 11's red-team method: ``docs/taxonomy.md``, "Tenth pass").
"""
from . import job

P = []
I, O, B, C, T, X, U = "infrastructure", "oom", "build_error", "config_error", "timeout", "canceled", "unknown"
#: probes whose label an earlier pass reads differently (none yet)
ARGUABLE = frozenset()

RUNNER_VERSION = "2.321.0"


def setup(actions=("actions/checkout@v4",), image="ubuntu-24.04", runner="GitHub Actions 12"):
    # Runner.Worker JobExtension InitializeJob: the "Set up job" step's lines (hosted image's docs in
    # actions/runner-images: 'Runner Image' group), ActionManager 'Download action repository'
    t = (f"Current runner version: '{RUNNER_VERSION}'\n"
         f"Runner name: '{runner}'\nRunner group name: 'GitHub Actions'\nMachine name: 'fv-az1271-384'\n"
         "##[group]Operating System\nUbuntu\n24.04.1\nLTS\n##[endgroup]\n"
         f"##[group]Runner Image\nImage: {image}\nVersion: 20241117.1.0\n"
         "Included Software: https://github.com/actions/runner-images/blob/ubuntu24/20241117.1/images/ubuntu/Ubuntu2404-Readme.md\n##[endgroup]\n"
         "##[group]GITHUB_TOKEN Permissions\nContents: read\nMetadata: read\n##[endgroup]\n"
         "Secret source: Actions\nPrepare workflow directory\nPrepare all required actions\nGetting action download info\n")
    for a in actions:
        t += f"Download action repository '{a}' (SHA:11bd71901bbe5b1630ceea73d27597364c9af683)\n"
    return t + "Complete job name: build\n"


def checkout_ok(repo="acme/app"):
    # CO src/git-source-provider.ts:175 'Fetching the repository', git-command-manager.ts:285 the fetch
    return (f"##[group]Run actions/checkout@v4\nwith:\n  repository: {repo}\n  token: ***\n  fetch-depth: 1\n##[endgroup]\n"
            "Syncing repository: " + repo + "\n##[group]Fetching the repository\n"
            "[command]/usr/bin/git -c protocol.version=2 fetch --no-tags --prune --no-recurse-submodules --depth=1 origin "
            "+3f2a9c1e7b4d5a6c8e9f0a1b2c3d4e5f6a7b8c9d:refs/remotes/origin/main\n"
            " * [new ref]         3f2a9c1e7b4d5a6c8e9f0a1b2c3d4e5f6a7b8c9d -> origin/main\n##[endgroup]\n"
            "[command]/usr/bin/git log -1 --format=%H\n3f2a9c1e7b4d5a6c8e9f0a1b2c3d4e5f6a7b8c9d\n")


def run(cmd, out, code=None, shell="/usr/bin/bash -e {0}", env=""):
    # Runner.Worker ScriptHandler: '##[group]Run CMD', the script, 'shell: ...'; ScriptHandler.cs:354
    # ExecutionContext.Error('Process completed with exit code N.')
    t = f"##[group]Run {cmd.splitlines()[0]}\n{cmd}\nshell: {shell}\n" + env + "##[endgroup]\n" + out.strip("\n") + "\n"
    if code is not None:
        t += f"##[error]Process completed with exit code {code}.\n"
    return t


def uses(action, inputs, out):
    t = f"##[group]Run {action}\nwith:\n" + "".join(f"  {k}: {v}\n" for k, v in inputs.items()) + "##[endgroup]\n"
    return t + out.strip("\n") + "\n"


def post(checkout=True):
    # Runner.Worker Handlers/Handler.cs:107 'Post job cleanup.'; CO's post step removes the auth header;
    # JobExtension.cs:882 'Cleaning up orphan processes'
    t = ""
    if checkout:
        t += ("Post job cleanup.\n[command]/usr/bin/git version\ngit version 2.47.1\n"
              "Temporarily overriding HOME='/home/runner/work/_temp/5e1c0b7a' before making global git config changes\n"
              "[command]/usr/bin/git config --local --name-only --get-regexp http\\.https\\:\\/\\/github\\.com\\/\\.extraheader\n"
              "http.https://github.com/.extraheader\n"
              "[command]/usr/bin/git config --local --unset-all http.https://github.com/.extraheader\n")
    return t + "Cleaning up orphan processes\n"


def stamp(text, start=(10, 22, 31)):
    """The raw log's form: every line prefixed with its UTC timestamp (the web view copies it without)."""
    h, m, s = start
    out = []
    for i, line in enumerate(text.split("\n")[:-1]):
        sec = s + i // 3
        out.append(f"2024-11-20T{h:02d}:{m + sec // 60:02d}:{sec % 60:02d}.{(i * 7919) % 10_000_000:07d}Z {line}")
    return "\n".join(out) + "\n"


def gh(pid, want, body, ts=False, actions=("actions/checkout@v4",), tail=True, checkout=True):
    """A GitHub Actions job log: the Set up job lines, ``body`` (the steps) and the post steps."""
    t = setup(actions) + body.strip("\n") + "\n" + (post(checkout) if tail else "")
    P.append((pid, want, stamp(t) if ts else t))


def gl(pid, want, cmd, body, code=1):
    """A GitLab job running ``gh`` or a toolkit-based script (the red team's GitLab builder)."""
    P.append((pid, want, job(cmd, body, code)))


CO = checkout_ok()

# =====================================================================================================
# OOM kills the resize fixes
# =====================================================================================================
# RUN ScriptHandler.cs:354 'Process completed with exit code 137.': the step's shell was SIGKILLed (128+9);
# on a hosted or container runner with nothing else in the log that is the kernel's (cgroup's) OOM killer.
gh("gha-137-make-bare", O, CO + run("make -j4 all", "[ 61%] Building CXX object src/CMakeFiles/engine.dir/solver.cpp.o\n"
   "[ 62%] Building CXX object src/CMakeFiles/engine.dir/mesh_refine.cpp.o\n[ 62%] Building CXX object src/CMakeFiles/engine.dir/assembly.cpp.o", 137), ts=True)
gh("gha-137-shell-killed", O, CO + run("python train.py --epochs 5", "epoch 1/5: 100%|##########| 1250/1250 [03:02<00:00]\n"
   "/home/runner/work/_temp/0c3b5f2e-9a1d-4c7e-8b2f-6d1e0a9c3b7f.sh: line 1:  2211 Killed                  python train.py --epochs 5", 137))
gh("gha-137-gradle", O, CO + run("./gradlew assembleRelease --no-daemon", "> Task :app:compileReleaseKotlin\n> Task :app:mergeReleaseResources\n"
   "> Task :app:minifyReleaseWithR8\n<============-> 96% EXECUTING [6m 41s]\n> :app:minifyReleaseWithR8", 137), ts=True)
gh("gha-137-cargo", O, CO + run("cargo build --release --workspace", "   Compiling tokio v1.41.1\n   Compiling arrow-array v53.3.0\n"
   "   Compiling datafusion-physical-plan v43.0.0\n   Compiling datafusion v43.0.0", 137))
gh("gha-137-pytest", O, CO + run("pytest -n 4 tests/", "============================= test session starts ==============================\n"
   "created: 4/4 workers\n4 workers [1822 items]\n........................................................ [  3%]\n............", 137))
gh("gha-137-dotnet", O, CO + run("dotnet build -c Release", "  Determining projects to restore...\n  All projects are up-to-date for restore.\n"
   "  Acme.Core -> /home/runner/work/app/app/src/Acme.Core/bin/Release/net8.0/Acme.Core.dll", 137), ts=True)
# GCC's driver reports its compiler proper killed by SIGKILL (gcc/gcc.cc 'Killed signal terminated program %s')
gh("gha-cc1plus-killed", O, CO + run("make -j8", "[ 48%] Building CXX object src/CMakeFiles/core.dir/big_tables.cpp.o\n"
   "c++: fatal error: Killed signal terminated program cc1plus\ncompilation terminated.\n"
   "make[2]: *** [src/CMakeFiles/core.dir/build.make:146: src/CMakeFiles/core.dir/big_tables.cpp.o] Error 1\n"
   "make[1]: *** [CMakeFiles/Makefile2:213: src/CMakeFiles/core.dir/all] Error 2\nmake: *** [Makefile:136: all] Error 2", 2))
# collect2 'ld terminated with signal 9 [Killed]' (gcc/collect2.cc)
gh("gha-ld-signal9", O, CO + run("cmake --build build -j 4", "[ 99%] Linking CXX executable bin/simulator\n"
   "collect2: fatal error: ld terminated with signal 9 [Killed]\ncompilation terminated.\n"
   "gmake[2]: *** [CMakeFiles/simulator.dir/build.make:612: bin/simulator] Error 1\ngmake: *** [Makefile:146: all] Error 2", 2), ts=True)
# cargo's 'process didn't exit successfully: ... (signal: 9, SIGKILL: kill)' for rustc
gh("gha-rustc-sigkill", O, CO + run("cargo test --workspace", "   Compiling polars-core v0.44.2\n"
   "error: could not compile `polars-core` (lib)\n\nCaused by:\n  process didn't exit successfully: `/home/runner/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/bin/rustc "
   "--crate-name polars_core --edition=2021 crates/polars-core/src/lib.rs --crate-type lib -C opt-level=3` (signal: 9, SIGKILL: kill)", 101))
# Node's V8 heap limit (the default old space is sized from the machine's memory): 'JavaScript heap out of memory', abort -> 134
gh("gha-node-heap", O, CO + run("npm run build", "> webapp@4.2.0 build\n> webpack --mode production\n\n"
   "<--- Last few GCs --->\n\n[2211:0x6a1b2c0]   191342 ms: Mark-Compact 4040.2 (4131.6) -> 4026.9 (4133.1) MB, 2710.31 / 0.00 ms  (average mu = 0.121, current mu = 0.019) allocation failure;\n\n"
   "FATAL ERROR: Ineffective mark-compacts near heap limit Allocation failed - JavaScript heap out of memory\n"
   "----- Native stack trace -----\n\n 1: 0xb8d0a3 node::OOMErrorHandler(char const*, v8::OOMDetails const&) [node]\n"
   "Aborted (core dumped)", 134), actions=("actions/checkout@v4", "actions/setup-node@v4"))
# The service's annotation for a hosted runner that stopped renewing its lease (GitHub docs, "Troubleshooting
# ... lost communication"); the thirteenth pass reads it on GitHub's per-job VMs as memory starvation
# (rule hosted-runner-lost-under-load, oom): kept as that pass decided
gh("gha-hosted-runner-lost", O, CO + run("npm test -- --maxWorkers=4", " PASS  src/api/orders.test.ts (12.31 s)\n PASS  src/api/users.test.ts\n RUNS  src/reports/export.test.ts") +
   "##[error]The hosted runner: GitHub Actions 7 lost communication with the server. Anything in your workflow that terminates the runner process, "
   "starves it for CPU/Memory, or blocks its network access can cause this error.\n", tail=False)
# a self-hosted runner lost while compilers ran (rule runner-lost-under-memory-load, oom, eighth pass)
gh("gha-self-hosted-lost-during-compile", O, CO + run("make -j16", "  CXX      src/storage/btree.o\n  CXX      src/storage/wal.o\n"
   "  CXX      src/query/planner.o\n  CXX      src/query/optimizer.o") +
   "##[error]The self-hosted runner: ci-linux-04 lost communication with the server. Verify the machine is running and has a healthy network "
   "connection. Anything in your workflow that terminates the runner process, starves it for CPU/Memory, or blocks its network access can cause this error.\n", tail=False)
# docker/build-push-action: BuildKit's RUN step killed (137) inside the builder
gh("gha-buildx-run-137", O, CO + uses("docker/build-push-action@v6", {"context": ".", "push": "false", "tags": "acme/web:ci"},
   "#12 [build 5/6] RUN npm run build\n#12 3.112 > web@1.0.0 build\n#12 3.112 > next build\n#12 9.880   Creating an optimized production build ...\n"
   "#12 ERROR: process \"/bin/sh -c npm run build\" did not complete successfully: exit code: 137\n------\n > [build 5/6] RUN npm run build:\n------\n"
   "ERROR: failed to solve: process \"/bin/sh -c npm run build\" did not complete successfully: exit code: 137\n"
   "##[error]buildx failed with: ERROR: failed to solve: process \"/bin/sh -c npm run build\" did not complete successfully: exit code: 137"),
   actions=("actions/checkout@v4", "docker/build-push-action@v6"), ts=True)
# a job container (container: in the workflow): the step runs by docker exec, 137 as the container's cgroup killed it
gh("gha-container-job-137", O, CO + run("bazel build //...", "INFO: Analyzed 1812 targets (604 packages loaded, 21990 targets configured).\n"
   "INFO: Found 1812 targets...\n[2,411 / 5,980] 16 actions running\n    Compiling src/main/cpp/codegen/emit.cc; 41s linux-sandbox", 137,
   shell="sh -e {0}"))

# =====================================================================================================
# Infrastructure the retry fixes
# =====================================================================================================
# RUN JobRunner.cs:133 (ShutdownReason.UserCancelled): the runner's process got SIGTERM/Ctrl-C (hosted VM
# reclaimed, service stopped); no memory evidence in the window: rule runner-shutdown (infrastructure)
gh("gha-runner-shutdown-signal", I, CO + run("go test ./...", "ok  \tgithub.com/acme/svc/internal/api\t4.212s\n=== RUN   TestExport") +
   "##[error]The runner has received a shutdown signal. This can happen when the runner service is stopped, or a manually started runner is canceled.\n"
   "##[error]The operation was canceled.\n", tail=False)
# RUN JobRunner.cs:135 (ShutdownReason.OperatingSystemShutdown)
gh("gha-os-shutdown", I, CO + run("npm test", " RUNS  src/cart.test.ts") +
   "##[error]Operating system is shutting down for computer 'fv-az1271-384'\n##[error]The operation was canceled.\n", tail=False)
# service-side annotation for a hosted runner's VM failure (GitHub docs, "hosted runner encountered an error")
gh("gha-hosted-runner-error", I, CO + run("pytest", "collected 912 items\n\ntests/test_api.py ......") +
   "##[error]The hosted runner encountered an error while running your job. (Error Type: Disconnect).\n", tail=False, ts=True)
# self-hosted runner lost with no compiler or kill in the window (rule runner-shutdown)
gh("gha-self-hosted-lost", I, CO + run("npm run e2e", "> e2e\n> playwright test\n\nRunning 64 tests using 2 workers\n  ✓  1 [chromium] › login.spec.ts:8:3 › logs in (2.1s)") +
   "##[error]The self-hosted runner: ci-linux-04 lost communication with the server. Verify the machine is running and has a healthy network "
   "connection. Anything in your workflow that terminates the runner process, starves it for CPU/Memory, or blocks its network access can cause this error.\n", tail=False)
# RUN ActionManager.cs:1738 'Failed to download action ... Error: ...', :1746 'Back off N seconds before retry.',
# :1755 FailedToDownloadActionException 'Failed to download archive ... after N attempts.' (Set up job fails)
_url = "https://api.github.com/repos/actions/setup-node/tarball/39370e3970a6d050c480ffad4ff0ed4d3fdee5af"
P.append(("gha-action-download-503", I,
          "Current runner version: '2.321.0'\nPrepare workflow directory\nPrepare all required actions\nGetting action download info\n"
          "Download action repository 'actions/setup-node@v4' (SHA:39370e3970a6d050c480ffad4ff0ed4d3fdee5af)\n"
          f"##[warning]Failed to download action '{_url}'. Error: Response status code does not indicate success: 503 (Service Unavailable). (C5E2:3F1A:19B2A7:1E0F4C:673DB2A1)\n"
          "##[warning]Back off 22.519 seconds before retry.\n"
          f"##[warning]Failed to download action '{_url}'. Error: Response status code does not indicate success: 503 (Service Unavailable). (C5E2:3F1A:19B2A7:1E0F4C:673DB2B9)\n"
          "##[warning]Back off 17.068 seconds before retry.\n"
          f"##[error]Failed to download archive '{_url}' after 3 attempts.\n"))
# RUN ActionManager.cs:1734 'didn't finish download within N seconds', :1714 TimeoutException '... download has timed out'
_url2 = "https://api.github.com/repos/docker/build-push-action/tarball/4f58ea79222b3b9dc2c8bbdd6debcef730109a75"
P.append(("gha-action-download-timeout", I,
          "Current runner version: '2.321.0'\nPrepare workflow directory\nPrepare all required actions\nGetting action download info\n"
          f"##[warning]Action '{_url2}' didn't finish download within 100 seconds. (9A1B:2C3D:4E5F:6A7B:8C9D)\n##[warning]Back off 12.77 seconds before retry.\n"
          f"##[warning]Action '{_url2}' didn't finish download within 100 seconds. (9A1B:2C3D:4E5F:6A7B:8CA0)\n##[warning]Back off 25.1 seconds before retry.\n"
          f"##[error]Action '{_url2}' download has timed out. Error: The HTTP request timed out after 00:01:40. (9A1B:2C3D:4E5F:6A7B:8CA7)\n"))
# RUN ContainerOperationProvider.cs:214 '##[warning]Docker pull failed with exit code N, back off ...', :225 the error
# (job container / services: the 'Initialize containers' step), the daemon's network error
_pull = "##[group]Pulling container image\n/usr/bin/docker pull ghcr.io/acme/ci-builder:3.2\n"
gh("gha-container-pull-timeout", I, "##[group]Initialize containers\n" + _pull +
   "Error response from daemon: Get \"https://ghcr.io/v2/\": net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers)\n"
   "##[warning]Docker pull failed with exit code 1, back off 4.817 seconds before retry.\n/usr/bin/docker pull ghcr.io/acme/ci-builder:3.2\n"
   "Error response from daemon: Get \"https://ghcr.io/v2/\": net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers)\n"
   "##[warning]Docker pull failed with exit code 1, back off 8.211 seconds before retry.\n/usr/bin/docker pull ghcr.io/acme/ci-builder:3.2\n"
   "Error response from daemon: Get \"https://ghcr.io/v2/\": net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers)\n"
   "##[endgroup]\n##[error]Docker pull failed with exit code 1\n", tail=False)
gh("gha-service-pull-503", I, "##[group]Initialize containers\n##[group]Pulling container image\n/usr/bin/docker pull postgres:16\n"
   "Error response from daemon: received unexpected HTTP status: 503 Service Unavailable\n"
   "##[warning]Docker pull failed with exit code 1, back off 2.6 seconds before retry.\n/usr/bin/docker pull postgres:16\n"
   "Error response from daemon: received unexpected HTTP status: 503 Service Unavailable\n"
   "##[warning]Docker pull failed with exit code 1, back off 6.9 seconds before retry.\n/usr/bin/docker pull postgres:16\n"
   "Error response from daemon: received unexpected HTTP status: 503 Service Unavailable\n##[endgroup]\n"
   "##[error]Docker pull failed with exit code 1\n", tail=False, ts=True)
# Docker Hub's pull rate limit (the registry's 429 'toomanyrequests'; the earlier passes' registry-rate-limit: retry)
gh("gha-service-pull-toomanyrequests", I, "##[group]Initialize containers\n##[group]Pulling container image\n/usr/bin/docker pull redis:7.4\n"
   "Error response from daemon: toomanyrequests: You have reached your pull rate limit. You may increase the limit by authenticating and upgrading: https://www.docker.com/increase-rate-limit\n"
   "##[warning]Docker pull failed with exit code 1, back off 3.1 seconds before retry.\n/usr/bin/docker pull redis:7.4\n"
   "Error response from daemon: toomanyrequests: You have reached your pull rate limit. You may increase the limit by authenticating and upgrading: https://www.docker.com/increase-rate-limit\n"
   "##[endgroup]\n##[error]Docker pull failed with exit code 1\n", tail=False)
# RUN ActionManager.cs:954/:963: a Docker container action's image pull
gh("gha-docker-action-pull-reset", I, "Build container for action use: 'ghcr.io/super-linter/super-linter:slim-v7'.\n"
   "##[group]Pull down action image 'ghcr.io/super-linter/super-linter:slim-v7'\n/usr/bin/docker pull ghcr.io/super-linter/super-linter:slim-v7\n"
   "slim-v7: Pulling from super-linter/super-linter\n4f4fb700ef54: Pulling fs layer\n"
   "error pulling image configuration: download failed after attempts=6: read tcp 10.1.0.23:51230->140.82.114.33:443: read: connection reset by peer\n"
   "##[warning]Docker pull failed with exit code 1, back off 5.54 seconds before retry.\n/usr/bin/docker pull ghcr.io/super-linter/super-linter:slim-v7\n"
   "error pulling image configuration: download failed after attempts=6: read tcp 10.1.0.23:51244->140.82.114.33:443: read: connection reset by peer\n"
   "##[endgroup]\n##[error]Docker pull failed with exit code 1\n", tail=False)
# CO git-command-manager.ts:315 retryHelper around fetch; retry-helper.ts:37 'Waiting N seconds before trying again';
# TK exec toolrunner.ts:663 "The process '/usr/bin/git' failed with exit code 128" (info between attempts, the error at the end)
def checkout_fail(lines, tries=3):
    t = ("##[group]Run actions/checkout@v4\nwith:\n  repository: acme/app\n  token: ***\n##[endgroup]\nSyncing repository: acme/app\n"
         "##[group]Fetching the repository\n")
    fetch = ("[command]/usr/bin/git -c protocol.version=2 fetch --no-tags --prune --no-recurse-submodules --depth=1 origin "
             "+3f2a9c1e7b4d5a6c8e9f0a1b2c3d4e5f6a7b8c9d:refs/remotes/origin/main\n")
    for i in range(tries):
        t += fetch + lines
        if i < tries - 1:
            t += f"The process '/usr/bin/git' failed with exit code 128\nWaiting {11 + 4 * i} seconds before trying again\n"
    return t + "##[endgroup]\n##[error]The process '/usr/bin/git' failed with exit code 128\n"


gh("gha-checkout-500", I, checkout_fail("remote: Internal Server Error\n"
   "fatal: unable to access 'https://github.com/acme/app/': The requested URL returned error: 500\n"), ts=True)
gh("gha-checkout-early-eof", I, checkout_fail("error: RPC failed; curl 92 HTTP/2 stream 5 was not closed cleanly: CANCEL (err 8)\n"
   "error: 6218 bytes of body are still expected\nfetch-pack: unexpected disconnect while reading sideband packet\n"
   "fatal: early EOF\nfatal: fetch-pack: invalid index-pack output\n"))
gh("gha-checkout-resolve-host", I, checkout_fail("fatal: unable to access 'https://github.com/acme/app/': Could not resolve host: github.com\n"))
gh("gha-checkout-connect-timeout", I, checkout_fail(
   "fatal: unable to access 'https://github.com/acme/app/': Failed to connect to github.com port 443 after 134250 ms: Couldn't connect to server\n"))
# TK tool-cache tool-cache.ts:19 HTTPError 'Unexpected HTTP response: N' (retried for >= 500, 408, 429: :64-72),
# retry-helper.ts:43 'Waiting N seconds before trying again'; the action's setFailed ends the step
gh("gha-setup-node-503", I, uses("actions/setup-node@v4", {"node-version": "20.18.1"},
   "Attempting to download 20.18.1...\nAcquiring 20.18.1 - x64 from https://github.com/actions/node-versions/releases/download/20.18.1-12037893520/node-20.18.1-linux-x64.tar.gz\n"
   "Unexpected HTTP response: 503\nWaiting 12 seconds before trying again\nUnexpected HTTP response: 503\nWaiting 17 seconds before trying again\n"
   "##[error]Unexpected HTTP response: 503"), actions=("actions/setup-node@v4",), checkout=False)
gh("gha-setup-python-etimedout", I, uses("actions/setup-python@v5", {"python-version": "3.12.7"},
   "Version 3.12.7 was not found in the local cache\nVersion 3.12.7 is available for downloading\n"
   "Download from \"https://github.com/actions/python-versions/releases/download/3.12.7-11128208086/python-3.12.7-linux-24.04-x64.tar.gz\"\n"
   "connect ETIMEDOUT 185.199.108.133:443\nWaiting 15 seconds before trying again\nconnect ETIMEDOUT 185.199.108.133:443\nWaiting 10 seconds before trying again\n"
   "##[error]connect ETIMEDOUT 185.199.108.133:443"), actions=("actions/setup-python@v5",), checkout=False, ts=True)
gh("gha-setup-java-502", I, uses("actions/setup-java@v4", {"distribution": "temurin", "java-version": "21"},
   "Trying to resolve the latest version from remote\nResolved latest version as 21.0.5+11.0.LTS\nTrying to download...\n"
   "Downloading Java 21.0.5+11.0.LTS (Temurin-Hotspot) from https://github.com/adoptium/temurin21-binaries/releases/download/jdk-21.0.5%2B11/OpenJDK21U-jdk_x64_linux_hotspot_21.0.5_11.tar.gz ...\n"
   "Unexpected HTTP response: 502\nWaiting 19 seconds before trying again\nUnexpected HTTP response: 502\nWaiting 13 seconds before trying again\n"
   "##[error]Unexpected HTTP response: 502"), actions=("actions/setup-java@v4",), checkout=False)
# TK artifact artifact-twirp-client.ts:136 'Attempt N of M failed with error: ... Retrying request in N ms...',
# :127 'Failed to make request after N attempts: ...', :70 'Failed to CreateArtifact: ...'; UA's setFailed
def upload(body, name="dist"):
    return uses("actions/upload-artifact@v4", {"name": name, "path": "dist/"},
                "With the provided path, there will be 42 files uploaded\nArtifact name is valid!\nRoot directory input is valid!\n" + body)


gh("gha-artifact-create-503", I, CO + run("npm run build", "> build\n> vite build\n✓ 1822 modules transformed.\n✓ built in 14.21s") + upload(
   "Attempt 1 of 5 failed with error: Failed request: (503) Service Unavailable. Retrying request in 3000 ms...\n"
   "Attempt 2 of 5 failed with error: Failed request: (503) Service Unavailable. Retrying request in 4637 ms...\n"
   "Attempt 3 of 5 failed with error: Failed request: (503) Service Unavailable. Retrying request in 7186 ms...\n"
   "Attempt 4 of 5 failed with error: Failed request: (503) Service Unavailable. Retrying request in 11340 ms...\n"
   "##[error]Failed to CreateArtifact: Failed to make request after 5 attempts: Failed request: (503) Service Unavailable"),
   actions=("actions/checkout@v4", "actions/upload-artifact@v4"))
gh("gha-artifact-finalize-500", I, CO + run("make dist", "tar czf dist/app.tar.gz build/") + upload(
   "Beginning upload of artifact content to blob storage\nUploaded bytes 8388608\nUploaded bytes 12081114\nFinished uploading artifact content to blob storage!\n"
   "SHA256 digest of uploaded artifact zip is 6b1f0c2a7d5e8b1f0c2a7d5e8b1f0c2a7d5e8b1f0c2a7d5e8b1f0c2a7d5e8b1f\nFinalizing artifact upload\n"
   "Attempt 1 of 5 failed with error: Failed request: (500) Internal Server Error. Retrying request in 3000 ms...\n"
   "Attempt 2 of 5 failed with error: Failed request: (500) Internal Server Error. Retrying request in 4411 ms...\n"
   "Attempt 3 of 5 failed with error: Failed request: (500) Internal Server Error. Retrying request in 6902 ms...\n"
   "Attempt 4 of 5 failed with error: Failed request: (500) Internal Server Error. Retrying request in 10110 ms...\n"
   "##[error]Failed to FinalizeArtifact: Failed to make request after 5 attempts: Failed request: (500) Internal Server Error"),
   actions=("actions/checkout@v4", "actions/upload-artifact@v4"), ts=True)
# TK artifact shared/errors.ts:43 NetworkError 'Unable to make request: CODE' (+ the self-hosted hint)
gh("gha-artifact-econnreset", I, CO + run("make dist", "tar czf dist/app.tar.gz build/") + upload(
   "##[error]Unable to make request: ECONNRESET\nIf you are using self-hosted runners, please make sure your runner has access to all GitHub endpoints: "
   "https://docs.github.com/en/actions/hosting-your-own-runners/managing-self-hosted-runners/about-self-hosted-runners#communication-between-self-hosted-runners-and-github"),
   actions=("actions/checkout@v4", "actions/upload-artifact@v4"))
# TK artifact upload/blob-upload.ts:39 the stall timer: 'Upload progress stalled.'
gh("gha-artifact-upload-stalled", I, CO + run("make dist", "tar czf dist/app.tar.gz build/") + upload(
   "Beginning upload of artifact content to blob storage\nUploaded bytes 8388608\nUploaded bytes 16777216\n##[error]Upload progress stalled."),
   actions=("actions/checkout@v4", "actions/upload-artifact@v4"))
# DA download-artifact.ts:250 'Unable to download artifact(s): ...' with TK download-artifact.ts:78 (blob storage status)
gh("gha-download-artifact-blob-503", I, uses("actions/download-artifact@v4", {"name": "dist", "path": "dist/"},
   "Downloading single artifact\nPreparing to download the following artifacts:\n- dist (ID: 1923771, Size: 12081114, Expected Digest: sha256:6b1f0c2a7d5e)\n"
   "Redirecting to blob download url: https://productionresultssa3.blob.core.windows.net/actions-results/7f1e2d3c/workflow-job-run-5a6b/artifacts/9c8d.zip\n"
   "Starting download of artifact to: /home/runner/work/app/app/dist\n"
   "##[error]Unable to download artifact(s): Unexpected HTTP response from blob storage: 503 The server is busy."),
   actions=("actions/download-artifact@v4",), checkout=False)
# gh (cli/cli api HTTPError.Error 'HTTP %d: %s (%s)'): the API's own 5xx
gh("gha-gh-release-upload-502", I, CO + run("gh release upload \"$TAG\" dist/*.tar.gz --clobber",
   "HTTP 502: Bad Gateway (https://uploads.github.com/repos/acme/app/releases/183920417/assets?label=&name=app-linux-amd64.tar.gz)", 1,
   env="env:\n  GH_TOKEN: ***\n  TAG: v1.4.0\n"))
# docker/login-action DL docker.ts:77 'throw new Error(res.stderr.trim())' after 'Logging into REGISTRY...'
gh("gha-docker-login-timeout", I, CO + uses("docker/login-action@v3", {"registry": "ghcr.io", "username": "acme-bot", "password": "***"},
   "Logging into ghcr.io...\n##[error]Error response from daemon: Get \"https://ghcr.io/v2/\": net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers)"),
   actions=("actions/checkout@v4", "docker/login-action@v3"))
gh("gha-docker-login-502", I, CO + uses("docker/login-action@v3", {"username": "acmebot", "password": "***"},
   "Logging into Docker Hub...\n##[error]Error response from daemon: Get \"https://registry-1.docker.io/v2/\": received unexpected HTTP status: 502 Bad Gateway"),
   actions=("actions/checkout@v4", "docker/login-action@v3"), ts=True)
# buildx (docker/build-push-action prints buildx's error): registry push 5xx, base image resolve i/o timeout
gh("gha-buildx-push-502", I, CO + uses("docker/build-push-action@v6", {"push": "true", "tags": "ghcr.io/acme/api:sha-3f2a9c1"},
   "#15 exporting to image\n#15 pushing layers 4.1s done\n#15 ERROR: failed to push ghcr.io/acme/api:sha-3f2a9c1: failed to copy: unexpected status from PUT request to "
   "https://ghcr.io/v2/acme/api/blobs/uploads/0c7d2e9f?digest=sha256%3A4f3a: 502 Bad Gateway\n------\n"
   "ERROR: failed to solve: failed to push ghcr.io/acme/api:sha-3f2a9c1: failed to copy: unexpected status from PUT request to https://ghcr.io/v2/acme/api/blobs/uploads/0c7d2e9f?digest=sha256%3A4f3a: 502 Bad Gateway\n"
   "##[error]buildx failed with: ERROR: failed to solve: failed to push ghcr.io/acme/api:sha-3f2a9c1: failed to copy: unexpected status from PUT request to https://ghcr.io/v2/acme/api/blobs/uploads/0c7d2e9f?digest=sha256%3A4f3a: 502 Bad Gateway"),
   actions=("actions/checkout@v4", "docker/build-push-action@v6"))
gh("gha-buildx-base-dns-timeout", I, CO + uses("docker/build-push-action@v6", {"push": "false"},
   "#3 [internal] load metadata for docker.io/library/node:20-alpine\n#3 ERROR: failed to do request: Head \"https://registry-1.docker.io/v2/library/node/manifests/20-alpine\": "
   "dial tcp: lookup registry-1.docker.io on 127.0.0.53:53: read udp 127.0.0.1:48213->127.0.0.53:53: i/o timeout\n------\n"
   "ERROR: failed to solve: node:20-alpine: failed to resolve source metadata for docker.io/library/node:20-alpine: failed to do request: Head \"https://registry-1.docker.io/v2/library/node/manifests/20-alpine\": "
   "dial tcp: lookup registry-1.docker.io on 127.0.0.53:53: read udp 127.0.0.1:48213->127.0.0.53:53: i/o timeout\n"
   "##[error]buildx failed with: ERROR: failed to solve: node:20-alpine: failed to resolve source metadata for docker.io/library/node:20-alpine: failed to do request: Head \"https://registry-1.docker.io/v2/library/node/manifests/20-alpine\": dial tcp: lookup registry-1.docker.io on 127.0.0.53:53: read udp 127.0.0.1:48213->127.0.0.53:53: i/o timeout"),
   actions=("actions/checkout@v4", "docker/build-push-action@v6"), ts=True)
# the runner's own diagnostics could not be written: the disk is full (RUN JobDispatcher.cs:566 reads the
# worker's IOException as running out of disk); the earlier passes' no-space rule reads a full disk as infrastructure
gh("gha-runner-diag-no-space", I, CO + run("docker build -t acme/ml:ci .", "Step 7/12 : RUN pip install -r requirements.txt\n ---> Running in 5e8b1f0c2a7d") +
   "##[warning]You are running out of disk space. The runner will stop working when the machine runs out of disk space. Free space left: 38 MB\n"
   "##[error]System.IO.IOException: No space left on device : '/home/runner/runners/2.321.0/_diag/Worker_20241120-102231-utc.log'\n"
   "   at System.IO.RandomAccess.WriteAtOffset(SafeFileHandle handle, ReadOnlySpan`1 buffer, Int64 fileOffset)\n", tail=False)
# a tool's own network failure in a run step (npm's ECONNRESET): transient
gh("gha-npm-ci-econnreset", I, CO + run("npm ci", "npm error code ECONNRESET\nnpm error network aborted\n"
   "npm error network This is a problem related to network connectivity.\nnpm error network In most cases you are behind a proxy or have bad network settings.\n"
   "npm error A complete log of this run can be found in: /home/runner/.npm/_logs/2024-11-20T10_22_41_118Z-debug-0.log", 1),
   actions=("actions/checkout@v4", "actions/setup-node@v4"))
# GitLab jobs running gh (the same HTTPError)
gl("gitlab-gh-release-502", I, "gh release create \"$CI_COMMIT_TAG\" dist/* --repo acme/app-mirror --notes-file CHANGELOG.md",
   "HTTP 502: Bad Gateway (https://api.github.com/repos/acme/app-mirror/releases)")
gl("gitlab-gh-run-download-503", I, "gh run download 11934088172 --repo acme/app --name dist",
   "HTTP 503: Service Unavailable (https://api.github.com/repos/acme/app/actions/runs/11934088172/artifacts?per_page=100)")

# =====================================================================================================
# Leave alone: deterministic failures, configuration, limits
# =====================================================================================================
gh("gha-pytest-fail", B, CO + run("pytest -q", "F.......\n=================================== FAILURES ===================================\n"
   "______________________________ test_parse_total _______________________________\n\n    def test_parse_total():\n>       assert parse_total('1,200') == 1200\n"
   "E       AssertionError: assert 1 == 1200\n\ntests/test_parse.py:14: AssertionError\n=========================== short test summary info ============================\n"
   "FAILED tests/test_parse.py::test_parse_total - AssertionError: assert 1 == 1200\n1 failed, 7 passed in 0.41s", 1), ts=True)
gh("gha-tsc-fail", B, CO + run("npx tsc --noEmit", "src/api/orders.ts(41,7): error TS2322: Type 'string' is not assignable to type 'number'.\n"
   "src/api/orders.ts(58,15): error TS2339: Property 'totl' does not exist on type 'Order'.", 2))
gh("gha-go-test-fail", B, CO + run("go test ./...", "--- FAIL: TestExport (0.02s)\n    export_test.go:31: got 3 rows, want 4\nFAIL\n"
   "FAIL\tgithub.com/acme/svc/internal/export\t0.031s\nok  \tgithub.com/acme/svc/internal/api\t4.212s\nFAIL", 1))
gh("gha-command-not-found", C, CO + run("shellcheck scripts/*.sh", "/home/runner/work/_temp/7d1e0a9c.sh: line 1: shellcheck: command not found", 127))
# service-side job setup: 'Unable to resolve action' (GitHub docs, "Finding and customizing actions": a
# missing repository, tag or SHA): the same reference fails again
P.append(("gha-unable-resolve-action-repo", C, "Current runner version: '2.321.0'\nPrepare workflow directory\nPrepare all required actions\n"
          "Getting action download info\n##[error]Unable to resolve action `actions/setup-nodee@v4`, repository not found\n"))
P.append(("gha-unable-resolve-action-version", C, "Current runner version: '2.321.0'\nPrepare workflow directory\nPrepare all required actions\n"
          "Getting action download info\n##[error]Unable to resolve action `actions/checkout@v5.9.9`, unable to find version `v5.9.9`\n"))
# RUN ActionManager.cs:912 local action without action.yml
gh("gha-local-action-missing", C, "##[group]Run ./.github/actions/setup-env\nwith:\n  python: 3.12\n##[endgroup]\n"
   "##[error]Can't find 'action.yml', 'action.yaml' or 'Dockerfile' under '/home/runner/work/app/app/.github/actions/setup-env'. "
   "Did you forget to run actions/checkout before running your local action?\n", checkout=False)
# RUN ActionNotFoundException.cs:32 (404 on the tarball), ActionManager.cs:1696 AccessDeniedException (403)
P.append(("gha-action-not-found-uri", C, "Current runner version: '2.321.0'\nPrepare workflow directory\nPrepare all required actions\nGetting action download info\n"
          "##[error]An action could not be found at the URI 'https://api.github.com/repos/acme/deploy-action/tarball/0f3e9a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f' (4A1B:2C3D:5E6F7A:8B9C0D:673DB2A1)\n"))
P.append(("gha-action-access-denied", C, "Current runner version: '2.321.0'\nPrepare workflow directory\nPrepare all required actions\nGetting action download info\n"
          "##[error]Access denied to 'https://api.github.com/repos/acme/internal-deploy/tarball/7c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d' (4A1B:2C3D:5E6F7A:8B9C0D:673DB2C4)\n"))
# TK core core.ts:155 'Input required and not supplied: NAME'
gh("gha-input-required", C, CO + uses("softprops/action-gh-release@v2", {"files": "dist/*"},
   "##[error]Input required and not supplied: token"), actions=("actions/checkout@v4", "softprops/action-gh-release@v2"))
# SN base-distribution.ts:58, SP find-python.ts:128, SJ base-installer.ts:698: the version does not exist
gh("gha-setup-node-version-missing", C, uses("actions/setup-node@v4", {"node-version": "25.9"},
   "Attempting to download 25.9...\nNot found in manifest. Falling back to download directly from Node\n"
   "##[error]Unable to find Node version '25.9' for platform linux and architecture x64."), actions=("actions/setup-node@v4",), checkout=False)
gh("gha-setup-python-version-missing", C, uses("actions/setup-python@v5", {"python-version": "3.14.9"},
   "Version 3.14.9 was not found in the local cache\n##[error]The version '3.14.9' with architecture 'x64' was not found for Ubuntu 24.04.\n"
   "The list of all available versions can be found here: https://raw.githubusercontent.com/actions/python-versions/main/versions-manifest.json"),
   actions=("actions/setup-python@v5",), checkout=False, ts=True)
gh("gha-setup-java-version-missing", C, uses("actions/setup-java@v4", {"distribution": "temurin", "java-version": "26.0.9"},
   "Trying to resolve the latest version from remote\n##[error]No matching version found for SemVer '26.0.9'.\nDistribution: temurin\n"
   "Package type: jdk\nArchitecture: x64"), actions=("actions/setup-java@v4",), checkout=False)
# TK tool-cache: a 404 is not retried (tool-cache.ts:64-72): the asset does not exist
gh("gha-setup-go-404", C, uses("actions/setup-go@v5", {"go-version": "1.23.99"},
   "Setup go version spec 1.23.99\nAttempting to download 1.23.99...\nNot found in manifest.  Falling back to download directly from Go\n"
   "Install from dist\nAcquiring go1.23.99 from https://storage.googleapis.com/golang/go1.23.99.linux-amd64.tar.gz\n"
   "##[error]Failed to download version 1.23.99: Error: Unexpected HTTP response: 404"), actions=("actions/setup-go@v5",), checkout=False)
# SN cache-restore.ts:86: cache: npm without a lock file
gh("gha-setup-node-no-lockfile", C, uses("actions/setup-node@v4", {"node-version": "20", "cache": "npm"},
   "Found in cache @ /opt/hostedtoolcache/node/20.18.0/x64\n##[group]Environment details\nnode: v20.18.0\nnpm: 10.8.2\nyarn: 1.22.22\n##[endgroup]\n"
   "##[error]Dependencies lock file is not found in /home/runner/work/app/app. Supported file patterns: package-lock.json,npm-shrinkwrap.json,yarn.lock"),
   actions=("actions/checkout@v4", "actions/setup-node@v4"))
# DA download-artifact.ts:250 with TK find/get-artifact.ts:56 'Artifact not found for name: NAME'
gh("gha-artifact-not-found", C, uses("actions/download-artifact@v4", {"name": "dist"},
   "##[error]Unable to download artifact(s): Artifact not found for name: dist\n        Please ensure that your artifact is not expired and the artifact was uploaded using a compatible version of toolkit/upload-artifact.\n"
   "        For more information, visit the GitHub Artifacts FAQ: https://github.com/actions/toolkit/blob/main/packages/artifact/docs/faq.md"),
   actions=("actions/download-artifact@v4",), checkout=False, ts=True)
# UA upload-artifact.ts:42 (if-no-files-found: error)
gh("gha-artifact-no-files-error", C, CO + run("npm run build", "> build\n> vite build --outDir build") + uses(
   "actions/upload-artifact@v4", {"name": "dist", "path": "dist/", "if-no-files-found": "error"},
   "##[error]No files were found with the provided path: dist/. No artifacts will be uploaded."),
   actions=("actions/checkout@v4", "actions/upload-artifact@v4"))
# TK artifact-twirp-client.ts:122 'Received non-retryable error: ...' (409: the name is taken in this run)
gh("gha-artifact-409-conflict", C, CO + run("make dist", "tar czf dist/app.tar.gz build/") + upload(
   "##[error]Failed to CreateArtifact: Received non-retryable error: Failed request: (409) Conflict: an artifact with this name already exists on the workflow run"),
   actions=("actions/checkout@v4", "actions/upload-artifact@v4"))
# TK shared/errors.ts:63 UsageError (the account's storage quota)
gh("gha-artifact-quota", C, CO + run("make dist", "tar czf dist/app.tar.gz build/") + upload(
   "##[error]Artifact storage quota has been hit. Unable to upload any new artifacts.\n"
   "More info on storage limits: https://docs.github.com/en/billing/managing-billing-for-github-actions/about-billing-for-github-actions#calculating-minute-and-storage-spending"),
   actions=("actions/checkout@v4", "actions/upload-artifact@v4"))
# CO retries any fetch failure (git-command-manager.ts:315), deterministic ones too: the retry lines must not decide
gh("gha-checkout-repo-not-found", C, checkout_fail("remote: Repository not found.\nfatal: repository 'https://github.com/acme/app/' not found\n"), ts=True)
gh("gha-checkout-auth-failed", C, checkout_fail("remote: Invalid username or password.\nfatal: Authentication failed for 'https://github.com/acme/app/'\n"))
gh("gha-checkout-write-access", C, checkout_fail("remote: Write access to repository not granted.\n"
   "fatal: unable to access 'https://github.com/acme/app/': The requested URL returned error: 403\n"))
# CO ref-helper.ts:61
gh("gha-checkout-ref-missing", C, "##[group]Run actions/checkout@v4\nwith:\n  ref: release/9.9\n##[endgroup]\nSyncing repository: acme/app\n"
   "##[group]Determining the checkout info\n##[endgroup]\n[command]/usr/bin/git ls-remote --quiet --exit-code https://github.com/acme/app.git refs/heads/release/9.9 refs/tags/release/9.9\n"
   "##[error]A branch or tag with the name 'release/9.9' could not be found\n")
# DL docker.ts:38, :77 (the daemon refuses the credentials)
gh("gha-docker-login-denied", C, CO + uses("docker/login-action@v3", {"registry": "ghcr.io", "username": "acme-bot", "password": "***"},
   "Logging into ghcr.io...\n##[error]Error response from daemon: Get \"https://ghcr.io/v2/\": denied: denied"), actions=("actions/checkout@v4", "docker/login-action@v3"))
gh("gha-docker-login-unauthorized", C, CO + uses("docker/login-action@v3", {"username": "acmebot", "password": "***"},
   "Logging into Docker Hub...\n##[error]Error response from daemon: Get \"https://registry-1.docker.io/v2/\": unauthorized: incorrect username or password"),
   actions=("actions/checkout@v4", "docker/login-action@v3"), ts=True)
gh("gha-docker-login-no-password", C, uses("docker/login-action@v3", {"registry": "ghcr.io", "username": "acme-bot"},
   "##[error]Username and password required"), actions=("docker/login-action@v3",), checkout=False)
gh("gha-buildx-push-403", C, CO + uses("docker/build-push-action@v6", {"push": "true", "tags": "ghcr.io/acme/api:latest"},
   "#15 exporting to image\n#15 ERROR: failed to push ghcr.io/acme/api:latest: unexpected status from POST request to https://ghcr.io/v2/acme/api/blobs/uploads/: 403 Forbidden\n------\n"
   "ERROR: failed to solve: failed to push ghcr.io/acme/api:latest: unexpected status from POST request to https://ghcr.io/v2/acme/api/blobs/uploads/: 403 Forbidden\n"
   "##[error]buildx failed with: ERROR: failed to solve: failed to push ghcr.io/acme/api:latest: unexpected status from POST request to https://ghcr.io/v2/acme/api/blobs/uploads/: 403 Forbidden"),
   actions=("actions/checkout@v4", "docker/build-push-action@v6"))
gh("gha-buildx-run-fails", B, CO + uses("docker/build-push-action@v6", {"push": "false"},
   "#10 [build 4/6] RUN npm ci\n#10 2.812 npm error code ERESOLVE\n#10 2.813 npm error ERESOLVE unable to resolve dependency tree\n"
   "#10 2.814 npm error Could not resolve dependency:\n#10 2.814 npm error peer react@\"^17.0.0\" from react-table@7.8.0\n"
   "#10 ERROR: process \"/bin/sh -c npm ci\" did not complete successfully: exit code: 1\n------\n"
   "ERROR: failed to solve: process \"/bin/sh -c npm ci\" did not complete successfully: exit code: 1\n"
   "##[error]buildx failed with: ERROR: failed to solve: process \"/bin/sh -c npm ci\" did not complete successfully: exit code: 1"),
   actions=("actions/checkout@v4", "docker/build-push-action@v6"))
gh("gha-buildx-base-tag-missing", C, CO + uses("docker/build-push-action@v6", {"push": "false"},
   "#3 [internal] load metadata for docker.io/library/node:25-alpine9\n#3 ERROR: docker.io/library/node:25-alpine9: not found\n------\n"
   "ERROR: failed to solve: node:25-alpine9: failed to resolve source metadata for docker.io/library/node:25-alpine9: docker.io/library/node:25-alpine9: not found\n"
   "##[error]buildx failed with: ERROR: failed to solve: node:25-alpine9: failed to resolve source metadata for docker.io/library/node:25-alpine9: docker.io/library/node:25-alpine9: not found"),
   actions=("actions/checkout@v4", "docker/build-push-action@v6"))
# RUN ContainerOperationProvider.cs:214-225: the runner retries every failed pull, a missing tag too
gh("gha-service-manifest-unknown", C, "##[group]Initialize containers\n##[group]Pulling container image\n/usr/bin/docker pull postgres:17-alpine9\n"
   "Error response from daemon: manifest for postgres:17-alpine9 not found: manifest unknown: manifest unknown\n"
   "##[warning]Docker pull failed with exit code 1, back off 3.872 seconds before retry.\n/usr/bin/docker pull postgres:17-alpine9\n"
   "Error response from daemon: manifest for postgres:17-alpine9 not found: manifest unknown: manifest unknown\n"
   "##[warning]Docker pull failed with exit code 1, back off 9.04 seconds before retry.\n/usr/bin/docker pull postgres:17-alpine9\n"
   "Error response from daemon: manifest for postgres:17-alpine9 not found: manifest unknown: manifest unknown\n##[endgroup]\n"
   "##[error]Docker pull failed with exit code 1\n", tail=False)
gh("gha-container-pull-denied", C, "##[group]Initialize containers\n##[group]Pulling container image\n/usr/bin/docker pull ghcr.io/acme/private-builder:2\n"
   "Error response from daemon: Head \"https://ghcr.io/v2/acme/private-builder/manifests/2\": denied\n"
   "##[warning]Docker pull failed with exit code 1, back off 6.2 seconds before retry.\n/usr/bin/docker pull ghcr.io/acme/private-builder:2\n"
   "Error response from daemon: Head \"https://ghcr.io/v2/acme/private-builder/manifests/2\": denied\n##[endgroup]\n"
   "##[error]Docker pull failed with exit code 1\n", tail=False, ts=True)
# RUN ContainerOperationProvider.cs:134-140: a service whose health check never passed; its docker logs name the cause
gh("gha-service-unhealthy-config", C, "##[group]Initialize containers\n##[group]Waiting for all services to be ready\n##[endgroup]\n"
   "##[group]Service container mysql failed.\n/usr/bin/docker logs --details 5e8b1f0c2a7d\n"
   " 2024-11-20 10:22:41+00:00 [Note] [Entrypoint]: Entrypoint script for MySQL Server 8.4.3-1.el9 started.\n"
   " 2024-11-20 10:22:41+00:00 [ERROR] [Entrypoint]: Database is uninitialized and password option is not specified\n"
   "     You need to specify one of the following as an environment variable:\n     - MYSQL_ROOT_PASSWORD\n     - MYSQL_ALLOW_EMPTY_PASSWORD\n     - MYSQL_RANDOM_ROOT_PASSWORD\n"
   "##[error]Failed to initialize container mysql:8.4\n##[endgroup]\n##[error]One or more containers failed to start.\n", tail=False)
# gh's 4xx (cli/cli HTTPError) and its missing-token message (cli/cli pkg/cmd/root help for Actions)
gh("gha-gh-404", C, CO + run("gh release download v9.9.9 --pattern '*.deb'",
   "HTTP 404: Not Found (https://api.github.com/repos/acme/app/releases/tags/v9.9.9)", 1, env="env:\n  GH_TOKEN: ***\n"))
gh("gha-gh-403-integration", C, CO + run("gh pr comment \"$PR\" --body-file report.md",
   "HTTP 403: Resource not accessible by integration (https://api.github.com/repos/acme/app/issues/42/comments)", 1, env="env:\n  GH_TOKEN: ***\n  PR: 42\n"), ts=True)
gh("gha-gh-token-missing", C, CO + run("gh pr list --state open",
   "gh: To use GitHub CLI in a GitHub Actions workflow, set the GH_TOKEN environment variable. Example:\n  env:\n    GH_TOKEN: ${{ github.token }}", 4))
# actions/github-script (octokit's RequestError through @actions/core setFailed)
gh("gha-github-script-403", C, CO + uses("actions/github-script@v7", {"script": "await github.rest.issues.addLabels({...})"},
   "RequestError [HttpError]: Resource not accessible by integration\n    at /home/runner/work/_actions/actions/github-script/v7/dist/index.js:9537:21\n"
   "    at process.processTicksAndRejections (node:internal/process/task_queues:95:5) {\n  status: 403,\n"
   "##[error]Unhandled error: HttpError: Resource not accessible by integration"), actions=("actions/checkout@v4", "actions/github-script@v7"))
gl("gitlab-gh-404", C, "gh release download \"v$VERSION\" --repo acme/tools --pattern 'lint-*'",
   "HTTP 404: Not Found (https://api.github.com/repos/acme/tools/releases/tags/v3.9.1)")
gl("gitlab-gh-auth-missing", C, "gh pr create --fill --repo acme/app-mirror",
   "To get started with GitHub CLI, please run:  gh auth login\nAlternatively, populate the GH_TOKEN environment variable with a GitHub API authentication token.", 4)
# time limits: RUN StepsRunner.cs:328 (a step's timeout-minutes), the service's job limit (GitHub docs,
# "Usage limits": 'The job running on runner X has exceeded the maximum execution time of N minutes.'),
# then the step's '##[error]The operation was canceled.'
gh("gha-step-timeout", T, CO + run("npm run test:integration", " RUNS  test/integration/sync.test.ts") +
   "##[error]The action 'Run npm run test:integration' has timed out after 30 minutes.\n", ts=True)
gh("gha-job-max-time", T, CO + run("./scripts/soak.sh", "soak: iteration 812/1000 ok") +
   "##[error]The job running on runner GitHub Actions 12 has exceeded the maximum execution time of 360 minutes.\n##[error]The operation was canceled.\n")
gh("gha-job-timeout-minutes", T, CO + run("cargo test --release", "test sim::long_run ... has been running for over 60 seconds") +
   "##[error]The job running on runner ci-linux-04 has exceeded the maximum execution time of 60 minutes.\n##[error]The operation was canceled.\n", ts=True)
# Windows: an access violation (NTSTATUS), deterministic until the code changes
gh("gha-windows-access-violation", B, CO + run("ctest -C Release --output-on-failure", "1/12 Test #1: core_tests .......................***Exception: SegFault  0.21 sec", -1073741819,
   shell="C:\\Program Files\\PowerShell\\7\\pwsh.EXE -command \". '{0}'\""))

# =====================================================================================================
# Traps: GitHub's warnings and retried-then-succeeded lines in jobs that failed for another reason
# =====================================================================================================
PYFAIL = run("pytest -q", "FAILED tests/test_invoice.py::test_vat_rounding - assert Decimal('19.01') == Decimal('19.00')\n1 failed, 311 passed in 41.20s", 1)
JESTFAIL = run("npm test", " FAIL  src/cart.test.ts\n  ● cart › applies the coupon once\n\n    expect(received).toBe(expected) // Object.is equality\n\n"
               "    Expected: 90\n    Received: 81\n\nTests:       1 failed, 211 passed, 212 total", 1)
# CA restoreImpl.ts:63 'Cache not found for input keys: ...' (info, the job goes on)
gh("trap-cache-not-found", B, CO + uses("actions/cache@v4", {"path": "~/.cache/pip", "key": "Linux-pip-5e8b1f0c"},
   "Cache not found for input keys: Linux-pip-5e8b1f0c, Linux-pip-") + PYFAIL, actions=("actions/checkout@v4", "actions/cache@v4"), ts=True)
# TK cache.ts:217: a 5xx on restore is core.error (an ##[error] annotation) and the job goes on
gh("trap-cache-restore-503-error", B, CO + uses("actions/cache@v4", {"path": "node_modules", "key": "Linux-node-0c7d2e9f"},
   "##[error]Failed to restore: Cache service responded with 503") + run("npx tsc --noEmit",
   "src/api/orders.ts(41,7): error TS2322: Type 'string' is not assignable to type 'number'.", 2), actions=("actions/checkout@v4", "actions/cache@v4"))
# TK cache.ts:219 (other failures: a warning), cacheTwirpClient.ts:163 the retries
gh("trap-cache-restore-warning-retries", B, CO + uses("actions/setup-node@v4", {"node-version": "20", "cache": "npm"},
   "Found in cache @ /opt/hostedtoolcache/node/20.18.0/x64\n"
   "Attempt 1 of 5 failed with error: Failed request: (502) Bad Gateway. Retrying request in 3000 ms...\n"
   "Attempt 2 of 5 failed with error: Failed request: (502) Bad Gateway. Retrying request in 4390 ms...\n"
   "##[warning]Failed to restore: Failed to GetCacheEntryDownloadURL: Failed to make request after 5 attempts: Failed request: (502) Bad Gateway\n"
   "npm cache is not found") + JESTFAIL,
   actions=("actions/checkout@v4", "actions/setup-node@v4"), ts=True)
# TK cache.ts:471, :492: 'Failed to save: Unable to reserve cache ...' (a warning in a post step)
gh("trap-cache-reserve-warning", B, CO + JESTFAIL + "Post job cleanup.\n"
   "##[warning]Failed to save: Unable to reserve cache with key node-cache-Linux-x64-npm-5e8b1f0c, another job may be creating this cache. "
   "More details: Cache already exists. Scope: refs/heads/main, Key: node-cache-Linux-x64-npm-5e8b1f0c, Version: 9a1c3e7b\n",
   actions=("actions/checkout@v4", "Swatinem/rust-cache@v2"))
# RUN: the Node 16 / Node 20 deprecation annotations and the set-output one (annotations at job end)
gh("trap-node16-deprecated", B, CO + run("cargo build --locked", "   Compiling app v0.3.0 (/home/runner/work/app/app)\nerror[E0308]: mismatched types\n"
   "  --> src/main.rs:14:18\n   |\n14 |     let n: u32 = \"4\";\n   |            ---   ^^^ expected `u32`, found `&str`\n\n"
   "error: could not compile `app` (bin \"app\") due to 1 previous error", 101) + post() +
   "##[warning]Node.js 16 actions are deprecated. Please update the following actions to use Node.js 20: actions/checkout@v3. "
   "For more information see: https://github.blog/changelog/2023-09-22-github-actions-transitioning-from-node-16-to-node-20/.\n",
   tail=False, actions=("actions/checkout@v3",))
gh("trap-node20-deprecated", B, CO + PYFAIL + post() +
   "##[warning]Node.js 20 actions are deprecated. The following actions are running on Node.js 20 and may not work as expected: actions/checkout@v4. "
   "Actions will be forced to run with Node.js 24 by default starting June 2nd, 2026. Please check if updated versions of these actions are available that support Node.js 24. "
   "For more information see: https://github.blog/changelog/2025-09-19-deprecation-of-node-20-on-github-actions-runners/\n", tail=False, ts=True)
gh("trap-set-output-deprecated", B, CO + run("echo \"::set-output name=version::$(cat VERSION)\"",
   "##[warning]The `set-output` command is deprecated and will be disabled soon. Please upgrade to using Environment Files. "
   "For more information see: https://github.blog/changelog/2022-10-11-github-actions-deprecating-save-state-and-set-output-commands/") + JESTFAIL)
# RUN JobExtension.cs:915 'Terminate orphan process: pid (N) (NAME)' after a failed Gradle test run
gh("trap-orphan-process-terminated", B, CO + run("./gradlew test", "> Task :core:test FAILED\n\nInvoiceServiceTest > rounding() FAILED\n"
   "    org.opentest4j.AssertionFailedError at InvoiceServiceTest.java:41\n\n312 tests completed, 1 failed\n\nFAILURE: Build failed with an exception.\n\n"
   "* What went wrong:\nExecution failed for task ':core:test'.\n> There were failing tests. See the report at: file:///home/runner/work/app/app/core/build/reports/tests/test/index.html", 1) +
   post() + "Terminate orphan process: pid (2211) (java)\nTerminate orphan process: pid (2387) (java)\n", tail=False)
# RUN JobExtension.cs:1168 the low-disk warning in a job that failed on a test
gh("trap-low-disk-warning", B, CO + PYFAIL + "##[warning]You are running out of disk space. The runner will stop working when the machine runs out of disk space. Free space left: 812 MB\n")
# RUN ActionRunner.cs:235 'Unexpected input(s) ...' (a warning) then the tests fail
gh("trap-unexpected-input-warning", B, CO + uses("actions/setup-python@v5", {"python_version": "3.12"},
   "##[warning]Unexpected input(s) 'python_version', valid inputs are ['python-version', 'python-version-file', 'cache', 'architecture', 'check-latest', 'token', 'cache-dependency-path', 'update-environment', 'allow-prereleases', 'freethreaded']\n"
   "Installed versions\nSuccessfully set up CPython (3.12.7)") + PYFAIL, actions=("actions/checkout@v4", "actions/setup-python@v5"))
# UA upload-artifact.ts:36 (if-no-files-found: warn, the default) in an if: failure() step
gh("trap-upload-no-files-warning", B, CO + PYFAIL + uses("actions/upload-artifact@v4", {"name": "test-results", "path": "test-results/"},
   "##[warning]No files were found with the provided path: test-results/. No artifacts will be uploaded."),
   actions=("actions/checkout@v4", "actions/upload-artifact@v4"))
# TK artifact-twirp-client.ts:136 retries that succeeded (UA shared/upload-artifact.ts:19) in an if: failure() step
gh("trap-upload-retried-then-ok", B, CO + JESTFAIL + uses("actions/upload-artifact@v4", {"name": "jest-logs", "path": "logs/"},
   "With the provided path, there will be 3 files uploaded\nArtifact name is valid!\nRoot directory input is valid!\n"
   "Attempt 1 of 5 failed with error: Failed request: (503) Service Unavailable. Retrying request in 3000 ms...\n"
   "Beginning upload of artifact content to blob storage\nUploaded bytes 1822\nFinished uploading artifact content to blob storage!\n"
   "SHA256 digest of uploaded artifact zip is 0c7d2e9f41b8a3c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d\nFinalizing artifact upload\n"
   "Artifact jest-logs.zip successfully finalized. Artifact ID 1923771\n"
   "Artifact jest-logs has been successfully uploaded! Final size is 1822 bytes. Artifact ID is 1923771\n"
   "Artifact download URL: https://github.com/acme/app/actions/runs/11934088172/artifacts/1923771"),
   actions=("actions/checkout@v4", "actions/upload-artifact@v4"), ts=True)
# CO retry-helper.ts:37: a fetch that failed once on a 500 and then succeeded; cargo test fails later
gh("trap-checkout-retried-then-ok", B, "##[group]Run actions/checkout@v4\nwith:\n  repository: acme/app\n##[endgroup]\nSyncing repository: acme/app\n"
   "##[group]Fetching the repository\n[command]/usr/bin/git -c protocol.version=2 fetch --no-tags --prune --no-recurse-submodules --depth=1 origin +3f2a9c1e:refs/remotes/origin/main\n"
   "remote: Internal Server Error\nfatal: unable to access 'https://github.com/acme/app/': The requested URL returned error: 500\n"
   "The process '/usr/bin/git' failed with exit code 128\nWaiting 14 seconds before trying again\n"
   "[command]/usr/bin/git -c protocol.version=2 fetch --no-tags --prune --no-recurse-submodules --depth=1 origin +3f2a9c1e:refs/remotes/origin/main\n"
   " * [new ref]         3f2a9c1e -> origin/main\n##[endgroup]\n" + run("cargo test", "running 48 tests\ntest parse::tests::rejects_empty ... FAILED\n\nfailures:\n\n"
   "---- parse::tests::rejects_empty stdout ----\nthread 'parse::tests::rejects_empty' panicked at src/parse.rs:88:9:\nassertion failed: parse(\"\").is_err()\n\n"
   "test result: FAILED. 47 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.02s\n\nerror: test failed, to rerun pass `--lib`", 101))
# TK tool-cache retry that succeeded, then the build fails
gh("trap-setup-node-retried-then-ok", B, uses("actions/setup-node@v4", {"node-version": "20.18.1"},
   "Attempting to download 20.18.1...\nAcquiring 20.18.1 - x64 from https://github.com/actions/node-versions/releases/download/20.18.1-12037893520/node-20.18.1-linux-x64.tar.gz\n"
   "Unexpected HTTP response: 503\nWaiting 12 seconds before trying again\nExtracting ...\n[command]/usr/bin/tar xz --strip 1 --warning=no-unknown-keyword --overwrite -C /home/runner/work/_temp/5e8b1f0c -f /home/runner/work/_temp/0c7d2e9f\n"
   "Adding to the cache ...\nEnvironment details\nnode: v20.18.1") + run("npx tsc --noEmit",
   "src/api/orders.ts(58,15): error TS2339: Property 'totl' does not exist on type 'Order'.", 2), actions=("actions/checkout@v4", "actions/setup-node@v4"))
# RUN ContainerOperationProvider.cs:214: a service pull that failed once and then succeeded; the tests fail
gh("trap-service-pull-retried-then-ok", B, "##[group]Initialize containers\n##[group]Pulling container image\n/usr/bin/docker pull postgres:16\n"
   "Error response from daemon: received unexpected HTTP status: 503 Service Unavailable\n"
   "##[warning]Docker pull failed with exit code 1, back off 2.6 seconds before retry.\n/usr/bin/docker pull postgres:16\n"
   "16: Pulling from library/postgres\nDigest: sha256:0c7d2e9f41b8a3c5\nStatus: Downloaded newer image for postgres:16\ndocker.io/library/postgres:16\n##[endgroup]\n"
   "##[group]Waiting for all services to be ready\npostgres service is healthy.\n##[endgroup]\n##[endgroup]\n" + CO + PYFAIL)
# RUN ActionManager.cs:1738/:1746: an action download retried and then fine; the lint fails
gh("trap-action-download-retried-then-ok", B, "##[warning]Failed to download action 'https://api.github.com/repos/actions/setup-node/tarball/39370e39'. "
   "Error: Response status code does not indicate success: 503 (Service Unavailable). (C5E2:3F1A:19B2A7:1E0F4C:673DB2A1)\n##[warning]Back off 22.519 seconds before retry.\n"
   "Download action repository 'actions/setup-node@v4' (SHA:39370e3970a6d050c480ffad4ff0ed4d3fdee5af)\n" + CO +
   run("npx eslint .", "/home/runner/work/app/app/src/cart.ts\n  12:7  error  'total' is assigned a value but never used  @typescript-eslint/no-unused-vars\n\n"
       "✖ 1 problem (1 error, 0 warnings)", 1), actions=("actions/setup-node@v4",))
# the checkout's post step: 'The process ... failed with exit code 128' as a warning there
gh("trap-post-checkout-git-warning", B, CO + JESTFAIL + "Post job cleanup.\n[command]/usr/bin/git version\ngit version 2.47.1\n"
   "[command]/usr/bin/git config --local --name-only --get-regexp core\\.sshCommand\n"
   "fatal: not in a git directory\n##[warning]The process '/usr/bin/git' failed with exit code 128\nCleaning up orphan processes\n", tail=False)
# GitLab job running a toolkit-based script whose cache restore warned (the same TK lines), then the tests fail
gl("gitlab-toolkit-cache-warning-then-test", B, "node ci/restore-and-test.mjs",
   "::warning::Failed to restore: Cache service responded with 503\n"
   " FAIL  src/cart.test.ts\n  ● cart › applies the coupon once\n\n    Expected: 90\n    Received: 81\n\nTests:       1 failed, 211 passed, 212 total")
