"""Issue 11, twelfth pass: blind set K's misses (K scored blind after the eighth to eleventh passes, then
read), generalised by mechanism (precision first) and per message source (each rule's description or the
comment beside each added pattern in config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
paths, sizes and numbers than K's excerpts. Each mechanism has a positive, a near miss next to it that
must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Twelfth pass", lists the mechanisms.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule, check_trap, decided

WIN_ABORT = b"(exit code: 0xc0000409, STATUS_STACK_BUFFER_OVERRUN)"

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. the job's own server answering 5xx in RubyGems' FetchError layout (phrase, status, then the URL)
    (b"     Failure/Error: expect(run(\"gem\", \"install\", \"rack\")).to be_success\n"
     b"       ERROR:  While executing gem ... (Gem::RemoteFetcher::FetchError)\n"
     b"           bad response Bad Gateway 502 (http://127.0.0.1:8808/gems/rack-3.1.7.gem)\n",
     "build_error", "local-service-unavailable", Action.NONE, {}),
    (b"Retrying fetcher due to error (3/4): Gem::RemoteFetcher::FetchError bad response Service Unavailable 503 "
     b"(http://localhost:4567/quick/Marshal.4.8/puma-6.4.2.gemspec.rz)\n",
     "build_error", "local-service-unavailable", Action.NONE, {}),
    # --- B. libcurl's partial-file text relayed without curl's '(18)'
    (b"Downloading https://ftp.example.org/pub/libfoo/libfoo-2.4.tar.bz2\n"
     b"Failed to download sources: module libfoo: transfer closed with 1048576 bytes remaining to read\n",
     "infrastructure", "network-error", Action.RETRY, {}),
    (b"[download] fetching https://mirror.example.net/dist/zlib-1.3.1.tar.gz\n"
     b"error: transfer closed with outstanding read data remaining\n",
     "infrastructure", "network-error", Action.RETRY, {}),
    # --- C. x/net/http2 StreamError: the server reset the stream (failed or shed load)
    (b"go: downloading golang.org/x/sys v0.25.0\n"
     b"go: golang.org/x/sys@v0.25.0: read \"https://goproxy.example.com/golang.org/x/sys/@v/v0.25.0.zip\": "
     b"stream error: stream ID 1207; REFUSED_STREAM; received from peer\n",
     "infrastructure", "network-error", Action.RETRY, {}),
    (b"level=error msg=\"upload failed\" err=\"stream error: stream ID 93; ENHANCE_YOUR_CALM; received from peer\"\n",
     "infrastructure", "network-error", Action.RETRY, {}),
    (b"terraform init\nError: Failed to install provider: stream error: stream ID 5; INTERNAL_ERROR\n",
     "infrastructure", "network-error", Action.RETRY, {}),
    # --- D. GIO's connect failure prefix (libsoup, flatpak, ostree relay it)
    (b"error: Unable to load summary from remote gnome-nightly: Could not connect: No route to host\n",
     "infrastructure", "network-error", Action.RETRY, {}),
    (b"Downloading https://download.example.org/src/glib-2.80.tar.xz\n"
     b"Failed to download sources: module glib: Could not connect: Host is down\n",
     "infrastructure", "network-error", Action.RETRY, {}),
    # --- E. ostree's fetchers and Ruby net/http's 5xx response classes
    (b"Installing app/org.example.Viewer/aarch64/stable\n"
     b"error: While pulling app/org.example.Viewer/aarch64/stable from remote fh-beta: "
     b"Server returned status 502: Bad Gateway\n",
     "infrastructure", "http-5xx", Action.RETRY, {}),
    (b"Fetching gem metadata from https://gems.example.com/Net::HTTPGatewayTimeout: <html><body>upstream timed out"
     b"</body></html>\n", "infrastructure", "http-5xx", Action.RETRY, {}),
    (b"remote: -----> Installing dependencies using bundler 2.4.22\n"
     b"       Net::HTTPServiceUnavailable: <?xml version=\"1.0\"?><Error><Code>SlowDown</Code></Error>\n",
     "infrastructure", "http-5xx", Action.RETRY, {}),
    # --- F. the Docker daemon's socket refused to the job's user (EACCES), in several clients' words
    (b"$ docker build -t web .\nGot permission denied while trying to connect to the Docker daemon socket at "
     b"unix:///run/docker.sock: Post \"http://%2Frun%2Fdocker.sock/v1.45/build\": dial unix /run/docker.sock: "
     b"connect: permission denied\n", "config_error", "docker-socket-permission-denied", Action.NONE, {}),
    (b"> Task :app:dockerBuildImage FAILED\n* What went wrong:\nExecution failed for task ':app:dockerBuildImage'.\n"
     b"> org.newsclub.net.unix.AFUNIXSocketException: Permission denied (socket: /run/user/1001/docker.sock)\n",
     "config_error", "docker-socket-permission-denied", Action.NONE, {}),
    (b"Caused by: io.netty.channel.unix.Errors$NativeConnectException: connect(..) failed: Permission denied: "
     b"/var/run/docker.sock\n", "config_error", "docker-socket-permission-denied", Action.NONE, {}),
    # --- G. the checksum utilities' own verdict after -c (coreutils, BusyBox)
    (b">>> libfoo: Checking sha256sums...\nlibfoo-1.9.tar.gz: FAILED\n"
     b"sha256sum: WARNING: 1 of 2 computed checksums did NOT match\n",
     "build_error", "package-checksum-mismatch", Action.NONE, {}),
    (b"$ sha512sum -c SHA512SUMS\nnode-v20.15.0-linux-x64.tar.xz: FAILED\n"
     b"sha512sum: WARNING: 1 computed checksum did NOT match\n",
     "build_error", "package-checksum-mismatch", Action.NONE, {}),
    # --- H. Julia's code loader
    (b"     Testing Running tests...\nERROR: LoadError: ArgumentError: Package DataFrames not found in current path.\n"
     b"- Run `import Pkg; Pkg.add(\"DataFrames\")` to install the DataFrames package.\n",
     "build_error", "runtime-load-error", Action.NONE, {}),
    # --- I. Buildkite's agent stopped under the job (agent_stop: host shutdown, spot reclamation)
    (b"~~~ Running commands\n$ make test\n# Received cancellation signal, interrupting\nTerminated\n"
     b"Terminated with signal SIGTERM (from the agent because the agent was stopped). Exit status -1\n",
     "infrastructure", "ci-agent-stopped", Action.RETRY, {"exit_code": 143}),
    (b"2024-05-02 10:11:12 Exited with status 255 (after intercepting the agent's termination signal, sent because "
     b"the agent was stopped)\n", "infrastructure", "ci-agent-stopped", Action.RETRY, {"exit_code": 255}),
    # --- J. LUCI's recipe engine: a step declared infrastructure failed
    (b"recipe infra failure: Infra Failure: Step('provision android devices') (retcode: 87)\n",
     "infrastructure", "luci-infra-step-failure", Action.RETRY, {}),
    (b"Summary: Infra Failure: Step('cipd ensure') (retcode: 1)\n",
     "infrastructure", "luci-infra-step-failure", Action.RETRY, {}),
    # --- K. Rust's allocation refused on Windows: the commit limit, the Windows form of running out of memory
    (b"   Compiling syn v2.0.72\nmemory allocation of 268435456 bytes failed\n"
     b"error: could not compile `syn` (lib)\n\nCaused by:\n  process didn't exit successfully: "
     b"`C:\\Users\\runneradmin\\.rustup\\toolchains\\stable-x86_64-pc-windows-msvc\\bin\\rustc.exe --crate-name syn` "
     + WIN_ABORT + b"\n", "oom", "windows-allocation-refused", Action.RESIZE, {}),
    (b"[RUSTC-TIMING] regex test:false 12.8\nmemory allocation of 2147483656 bytes failed\n"
     b"error: could not compile `regex-automata`.\nerror: build failed\n"
     b"command did not execute successfully: \"cargo\" \"build\" \"--target\" \"i686-pc-windows-gnu\" \"--release\"\n",
     "oom", "windows-allocation-refused", Action.RESIZE, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{i}-{p[2]}" for i, p in enumerate(POSITIVE)])
def test_twelfth_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must NOT decide, family or None, extra facts)
NEAR_MISSES = [
    # A: the same FetchError from a public registry is the registry's outage
    (b"ERROR:  While executing gem ... (Gem::RemoteFetcher::FetchError)\n"
     b"    bad response Service Unavailable 503 (https://rubygems.org/gems/rack-3.1.7.gem)\n",
     "local-service-unavailable", "infrastructure", {}),
    # B: 'transfer closed' in a tool's own progress words is no transfer error
    (b"sync: transfer closed: 12 files uploaded, 0 skipped\nmake: *** [Makefile:30: check] Error 1\n",
     "network-error", None, {}),
    # C: a client-side protocol error (PROTOCOL_ERROR, a malformed request) is not the server shedding load
    (b"Error: stream error: stream ID 3; PROTOCOL_ERROR\n", "network-error", None, {}),
    # D: GIO's prefix before a refusal that no network causes
    (b"error: Could not connect: Permission denied\n", "network-error", None, {}),
    # E: ostree's 404 (a ref or a commit the remote does not have) and Ruby's 404 class are not 5xx
    (b"error: While pulling runtime/org.example.Sdk/x86_64/47 from remote flathub: Server returned status 404: Not Found\n",
     "http-5xx", None, {}),
    (b"Fetching gem metadata from https://gems.example.com/Net::HTTPNotFound: <html>404</html>\n", "http-5xx", None, {}),
    # F: a daemon that is not there (no socket) or not up is not a permission problem
    (b"$ docker info\nCannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n",
     "docker-socket-permission-denied", None, {}),
    (b"error during connect: Get \"http://%2Fvar%2Frun%2Fdocker.sock/v1.45/info\": dial unix /var/run/docker.sock: "
     b"connect: no such file or directory\n", "docker-socket-permission-denied", None, {}),
    # G: a checksum file whose listed files are missing is not a mismatch
    (b"$ sha256sum -c SHA256SUMS\nsha256sum: app.tar.gz: No such file or directory\n"
     b"sha256sum: WARNING: 1 listed file could not be read\n", "package-checksum-mismatch", None, {}),
    # H: Julia's package registry resolution failing is not the loader's message
    (b"ERROR: The following package names could not be resolved:\n * Foo (not found in project, manifest or registry)\n",
     "runtime-load-error", None, {}),
    # I: a job cancelled from the UI or by its time limit: the cancel, not the agent stop, and a test quoting it
    (b"# Received cancellation signal, interrupting\nTerminated\nExited with status -1\n",
     "ci-agent-stopped", "timeout", {"exit_code": 143}),
    (b"    expected: \"Exited with status 255 (after intercepting the agent's termination signal, sent because the "
     b"agent was stopped)\"\n", "ci-agent-stopped", None, {}),
    # J: a canceled infra step, and the project's own step failure
    (b"Infra Failure: Step('sleep forever') (canceled) (retcode: -15)\n", "luci-infra-step-failure", None, {}),
    (b"Step Failure: Step('run unit tests') (retcode: 1)\n", "luci-infra-step-failure", None, {}),
    # K: the same Rust message on Linux (a cgroup kills instead; an absurd size or an address-space limit) ...
    (b"memory allocation of 1048576 bytes failed\n/builds/x.sh: line 3:  812 Aborted (core dumped) ./target/debug/tool\n",
     "windows-allocation-refused", "build_error", {}),
    # ... and on Windows with a size no machine holds (a size computed wrongly)
    (b"memory allocation of 18446744073709551615 bytes failed\n" + WIN_ABORT + b"\n",
     "windows-allocation-refused", "build_error", {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{i}-{n[1]}" for i, n in enumerate(NEAR_MISSES)])
def test_twelfth_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)


# ------------------------------------------------------------------ traps stay right

@pytest.mark.parametrize("trace,extra", [
    # a test of an allocator's failure path on a Windows runner: its own summary decides
    (b"test alloc::tests::oom_hook_reports_size ... FAILED\n\nfailures:\n\n---- alloc::tests::oom_hook_reports_size "
     b"stdout ----\nthread 'alloc::tests::oom_hook_reports_size' panicked at src/alloc.rs:88:9:\n"
     b"assertion `left == right` failed\n  left: \"memory allocation of 64 bytes failed\"\n right: \"\"\n\n"
     b"test result: FAILED. 41 passed; 1 failed; 0 ignored\nerror: test failed, to rerun pass `--lib`\n"
     b"target x86_64-pc-windows-msvc\n", {"exit_code": 101}),
])
def test_twelfth_pass_traps_are_never_resized(taxonomy, trace, extra):
    check_trap(taxonomy, trace, extra)


def test_twelfth_pass_wasted_rerun_is_not_retried(taxonomy):
    """K's one wasted re-run, by mechanism: a spec's own gem server answering 500 through RubyGems' FetchError
    (the URL after the status) read as a registry outage; it now leaves the job alone."""
    trace = (b"  1) Mirror fetches gems through the proxy\n     Failure/Error: expect(result).to be_success\n"
             b"       Retrying download gem from http://[::1]:9292/ due to error (2/4): Gem::RemoteFetcher::FetchError "
             b"bad response Internal Server Error 500 (http://[::1]:9292/gems/json-2.7.2.gem)\n")
    v, action = decided(trace, taxonomy)
    assert action == Action.NONE, (v.rule, v.evidence)
    assert v.family.value == "build_error", (v.rule, v.evidence)
