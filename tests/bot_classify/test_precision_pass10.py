"""Issue 11, tenth pass (precision): the red-team's wasted re-runs, fixed by mechanism.

Each case of FIXED is a deterministic failure (or a time limit) the classifier re-ran before this
pass, rewritten from the tool's own output format (other tools, hosts, paths and numbers than the
red-team's probes); each case of KEPT is the real transient failure or OOM kill next to it, which
must keep its retry or resize.  docs/taxonomy.md, "Tenth pass: precision", lists the mechanisms.
"""

from __future__ import annotations

import pytest

from retry_bot.classify.structure import drop_post_failure_output
from retry_bot.decide import Action

from .conftest import decided

SCRIPT = b"section_start:1710000000:step_script\r\x1b[0KExecuting \"step_script\" stage of the job script\n"
END = b"section_end:1710000300:step_script\r\x1b[0K\n"


def _section(name: str, header: str, body: bytes) -> bytes:
    return (f"section_start:1710000301:{name}\r\x1b[0K{header}\n".encode() + body
            + f"section_end:1710000302:{name}\r\x1b[0K\n".encode())


def _job(cmd: str, body: bytes, code: int = 1, after: bytes = b"") -> bytes:
    return (SCRIPT + f"\x1b[32;1m$ {cmd}\x1b[0;m\n".encode() + body + END + after
            + f"ERROR: Job failed: exit code {code}\n".encode())


MAKE_FAIL = b"src/io.c:41:9: error: 'fd' undeclared (first use in this function)\nmake: *** [Makefile:12: all] Error 1\n"

# (id, trace, family wanted, action wanted, extra facts)
FIXED = [
    # A: after_script / failed-job uploads are not the cause
    ("A-after-script-dns", _job("make", MAKE_FAIL, 2, _section(
        "after_script", "Running after_script",
        b"\x1b[32;1m$ curl -fsS -X POST \"$TEAMS_WEBHOOK\" -d @msg.json\x1b[0;m\n"
        b"curl: (6) Could not resolve host: outlook.office.com\n")), "build_error", Action.NONE, {"exit_code": 2}),
    ("A-after-script-5xx", _job("make", MAKE_FAIL, 2, _section(
        "after_script", "Running after_script",
        b"\x1b[32;1m$ ./ci/report.sh\x1b[0;m\nreport: PUT https://dash.example.net/api/runs/7 -> 502 Bad Gateway\n")),
     "build_error", Action.NONE, {"exit_code": 2}),
    ("A-failed-upload-fatal", _job("make", MAKE_FAIL, 2, _section(
        "upload_artifacts_on_failure", "Uploading artifacts for failed job",
        b"Uploading artifacts...\ncoverage/: found 40 matching artifact files and directories\n"
        b"ERROR: Uploading artifacts as \"archive\" to coordinator... 503 Service Unavailable  id=7 status=503\n"
        b"FATAL: invalid argument\n")), "build_error", Action.NONE, {"exit_code": 2}),
    ("A-quoted-after-script", b"Executing \"step_script\" stage of the job script\n$ make\n" + MAKE_FAIL
     + b"Running after_script\nRunning after script...\n$ ./notify.sh\n"
       b"curl: (7) Failed to connect to chat.example.org port 443: Connection timed out\n"
       b"ERROR: Job failed: exit code 2\n", "build_error", Action.NONE, {"exit_code": 2}),
]

FIXED += [
    # G: coreutils timeout(1) reporting the signal of its own time limit
    ("G-preserve-status-143", _job("timeout --preserve-status 20m make test-e2e",
                                   b"e2e: 31 of 120 scenarios done\n", 143), "timeout", Action.NONE, {"exit_code": 143}),
    ("G-signal-kill-137", _job("timeout --signal=KILL 45m ./ci/soak.sh", b"soak: still running (2690s)\n", 137),
     "timeout", Action.NONE, {"exit_code": 137}),
    ("G-kill-after-137", _job("timeout -k 30s 10m cargo test --release", b"test big::roundtrip has been running for over 60 seconds\n",
                              137), "timeout", Action.NONE, {"exit_code": 137}),
]

KEPT = [
    # G: a 137 under a plain timeout (TERM) is the kernel's kill of the child; a bare 143 stays external
    ("G-plain-timeout-137", _job("timeout 2h make -j8", b"  CXX      src/big.o\n", 137), "oom", Action.RESIZE,
     {"exit_code": 137}),
    ("G-no-timeout-143", _job("./deploy.sh", b"deploy: waiting for rollout\n", 143), "infrastructure", Action.RETRY,
     {"exit_code": 143}),
    # A: the same network errors in the script itself are still the cause
    ("A-script-dns", _job("./fetch-deps.sh", b"curl: (6) Could not resolve host: deps.example.org\n", 6,
                          _section("after_script", "Running after_script", b"\x1b[32;1m$ echo done\x1b[0;m\ndone\n")),
     "infrastructure", Action.RETRY, {"exit_code": 6}),
    ("A-success-upload-5xx", _job("make", b"build ok\n", 1, _section(
        "upload_artifacts_on_success", "Uploading artifacts for successful job",
        b"Uploading artifacts...\nERROR: Uploading artifacts as \"archive\" to coordinator... 502 Bad Gateway  id=9\n"
        b"FATAL: invalid argument\n")), "infrastructure", Action.RETRY, {}),
]


@pytest.mark.parametrize("case,trace,family,action,extra", FIXED, ids=[c[0] for c in FIXED])
def test_wasted_reruns_fixed(taxonomy, case, trace, family, action, extra):
    verdict, got = decided(trace, taxonomy, **extra)
    assert (verdict.family.value, got) == (family, action), (case, verdict.rule, verdict.evidence)


@pytest.mark.parametrize("case,trace,family,action,extra", KEPT, ids=[c[0] for c in KEPT])
def test_real_transients_and_ooms_kept(taxonomy, case, trace, family, action, extra):
    verdict, got = decided(trace, taxonomy, **extra)
    assert (verdict.family.value, got) == (family, action), (case, verdict.rule, verdict.evidence)


def test_post_failure_output_dropped_markers_kept():
    raw = _job("make", MAKE_FAIL, 2, _section("after_script", "Running after_script", b"curl: (6) x\n"))
    out = drop_post_failure_output(raw)
    assert b"curl: (6)" not in out
    assert b"section_start:1710000301:after_script" in out and b"section_end:1710000302:after_script" in out
    assert out.endswith(b"ERROR: Job failed: exit code 2\n") and MAKE_FAIL in out


def test_post_failure_output_untouched_without_such_sections():
    raw = _job("make", MAKE_FAIL, 2)
    assert drop_post_failure_output(raw) is raw
