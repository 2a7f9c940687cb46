"""Issue 11, thirty-fifth pass: held-out ZJ's and ZK's misses (scored blind once after the thirty-fourth pass, then
read), generalised by mechanism (precision first) and per message source (each rule's description in
config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
repositories, paths and numbers than ZJ's and ZK's excerpts. Each mechanism has a positive, a near miss next to it
that must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Thirty-fifth pass", lists the mechanisms and the documented misses.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. a Go 1.4 (or older) compiler or linker SIGKILLed: the tools' per-architecture names
    (b"$ go install ./cmd/...\n"
     b"go build example.org/widgets/internal/tables: /usr/local/go/pkg/tool/linux_amd64/6g: signal: killed\n"
     b"ERROR: Job failed: exit code 2\n",
     "oom", "go14-toolchain-tool-killed", Action.RESIZE, {}),
    (b"##### ../misc/cgo/test\n"
     b"go build runtime/cgo: /home/ci/go1.3/pkg/tool/linux_arm/5l: signal: killed\n"
     b"FAIL\tmisc/cgo/test\t41.207s\n",
     "oom", "go14-toolchain-tool-killed", Action.RESIZE, {}),
    # --- B. MSVC ran out of heap in its second pass (code generation, at link time under /GL)
    (b"D:\\a\\engine\\src\\render\\shader_table.cpp(2214) : fatal error C1002: compiler is out of heap space in pass 2\n"
     b"LINK : fatal error LNK1257: code generation failed\n"
     b"NMAKE : fatal error U1077: 'link.exe' : return code '0x4e9'\n",
     "oom", "msvc-c1002-out-of-heap-pass2", Action.RESIZE, {}),
    (b"C:\\build\\geo\\kernels\\mesh_ops.cc(87): fatal error C1002: compiler is out of heap space in pass 2\n"
     b"ninja: build stopped: subcommand failed.\n",
     "oom", "msvc-c1002-out-of-heap-pass2", Action.RESIZE, {}),
    # --- C. apk-tools refused a package whose hash disagrees with the index (a mirror out of step)
    (b"fetch https://dl-cdn.alpinelinux.org/alpine/v3.19/main/x86_64/APKINDEX.tar.gz\n"
     b"(12/40) Installing libxml2 (2.11.7-r0)\n"
     b"ERROR: libxml2-2.11.7-r0: v2 package integrity error\n"
     b"1 error; 58 MiB in 31 packages\n",
     "infrastructure", "apk-v2-package-integrity", Action.RETRY, {}),
    (b"(  88/412) Downloading py3-numpy-1.26.4-r0\n"
     b"ERROR: py3-numpy-1.26.4-r0: v2 package integrity error\n",
     "infrastructure", "apk-v2-package-integrity", Action.RETRY, {}),
    # --- D. the go command refused a #cgo directive's flag
    (b"$ go build ./...\n"
     b"go build example.com/imaging/decoder: invalid flag in #cgo CFLAGS: -fplugin=/opt/tools/check.so\n"
     b"ERROR: Job failed: exit code 1\n",
     "build_error", "go-cgo-invalid-flag", Action.NONE, {}),
    (b"go build gitlab.example.net/sdr/driver: invalid flag in #cgo LDFLAGS: -Wl,--unknown-opt\n",
     "build_error", "go-cgo-invalid-flag", Action.NONE, {}),
    # --- E. GNU ld read a library built for another toolchain or architecture
    (b"# example.org/solver/glpk\n"
     b"C:/deps/glpk/w64/glpk_4_65.lib: error adding symbols: File in wrong format\n"
     b"collect2.exe: error: ld returned 1 exit status\n",
     "build_error", "ld-error-adding-symbols-wrong-format", Action.NONE, {}),
    # (ld's own line last: a later 'collect2: error: ld returned 1 exit status' is compile-error's, the same
    # family and decision, since the diagnostic stage's latest line wins)
    (b"/usr/bin/ld.bfd: ../third_party/libcodec.a(frame.o): error adding symbols: file in wrong format\n"
     b"make[2]: *** [CMakeFiles/player.dir/build.make:140: player] Error 1\n",
     "build_error", "ld-error-adding-symbols-wrong-format", Action.NONE, {}),
    # --- F. the Buildkite agent's job token refused mid-job: the agent cancels the job itself
    (b"2025-06-11 14:02:40 INFO   ci-agent-7f9c-2 Starting job 4d1e7a20-9b3c-4f11-8e2a-5c6d7e8f9a01\n"
     b"2025-06-11 14:09:12 ERROR  ci-agent-7f9c-2 Invalid access token, cancelling job "
     b"4d1e7a20-9b3c-4f11-8e2a-5c6d7e8f9a01\n"
     b"2025-06-11 14:09:12 INFO   ci-agent-7f9c-2 Process with PID: 311 finished with Exit Status: -1, Signal: SIGTERM\n",
     "infrastructure", "buildkite-agent-job-token-rejected", Action.RETRY, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{p[2]}-{i}" for i, p in enumerate(POSITIVE)])
def test_thirty_fifth_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must not decide, family or None, extra facts)
NEAR_MISSES = [
    # A: an old toolchain's compiler dying by another signal is not a kill
    (b"go build example.org/widgets/internal/tables: /usr/local/go/pkg/tool/linux_386/8g: signal: segmentation fault\n",
     "go14-toolchain-tool-killed", None, {}),
    # B: C1076 is the /Zm precompiled-header limit (an option), not the process's memory
    (b"C:\\build\\geo\\include\\geo\\all.h(12): fatal error C1076: compiler limit: internal heap limit reached\n",
     "msvc-c1002-out-of-heap-pass2", None, {}),
    # C: a file that is not an apk at all is a format error, not the mirror's hash skew
    (b"ERROR: ./packages/x86_64/mytool-0.3-r1.apk: v2 package format error\n",
     "apk-v2-package-integrity", None, {}),
    # D: the go command's other flag messages (a -ldflags value, a go vet flag) are not the #cgo check
    (b"go: invalid flag in -ldflags: missing = in -X\n",
     "go-cgo-invalid-flag", None, {}),
    # E: a truncated object is a race or a full disk, not a wrong format
    (b"/usr/bin/ld: obj/parser.o: error adding symbols: file truncated\n"
     b"collect2: error: ld returned 1 exit status\n",
     "ld-error-adding-symbols-wrong-format", None, {}),
    # F: the agent's ordinary poll failure is a warning it retries, not a cancellation
    (b"2025-06-11 14:05:01 WARN   ci-agent-7f9c-2 Problem with getting job state 4d1e7a20-9b3c-4f11-8e2a-5c6d7e8f9a01 "
     b"(POST https://agent.buildkite.com/v3/jobs/4d1e7a20/state: 502 Bad Gateway)\n",
     "buildkite-agent-job-token-rejected", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{n[1]}-{i}" for i, n in enumerate(NEAR_MISSES)])
def test_thirty_fifth_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)
