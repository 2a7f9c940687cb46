"""Precedence and family examples: what the classifier decides, and why."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from retry_bot.classify import classify
from retry_bot.model import Family
from tests.common.fresh_interpreter import as_json, in_fresh_interpreters

from .conftest import facts, usage_record

JOBLOGS = Path(__file__).resolve().parents[1] / "data" / "joblogs"

COMPILE_ERR = b"src/a.cpp:12:3: error: 'foo' was not declared in this scope\n"
CC1PLUS = b"g++: fatal error: Killed signal terminated program cc1plus\ncompilation terminated.\n"
MAKE_ERR = b"make[2]: *** [CMakeFiles/x.dir/a.cpp.o] Error 1\nmake: *** [all] Error 2\n"


def verdict(taxonomy, trace=b"", record=None, **kw):
    return classify(facts(**kw), trace, taxonomy, record)


def test_verified_oom_record_outranks_all_text(taxonomy):
    trace = COMPILE_ERR + b"=== 3 failed, 10 passed in 2s ===\nERROR: Job failed: exit code 1\n"
    c = verdict(taxonomy, trace, usage_record(oom_kills=2), failure_reason="script_failure", exit_code=1)
    assert (c.family, c.category, c.rule, c.confidence) == (Family.OOM, "oom", "record-oom-kill", "strong")
    assert "oom_kills=2" in c.evidence[0] and "memory peak" in c.evidence[0]


def test_record_of_another_job_is_ignored(taxonomy):
    c = verdict(taxonomy, COMPILE_ERR, usage_record(job_id=7, oom_kills=1))
    assert c.family == Family.BUILD_ERROR
    assert any("usage record ignored" in e for e in c.evidence)


def test_record_without_oom_does_not_make_an_oom(taxonomy):
    c = verdict(taxonomy, COMPILE_ERR, usage_record(oom_kills=0))
    assert c.category == "compile_error"


def test_compile_error_followed_by_oom_kill_is_oom(taxonomy):
    c = verdict(taxonomy, COMPILE_ERR + CC1PLUS + MAKE_ERR, failure_reason="script_failure")
    assert (c.family, c.category) == (Family.OOM, "compiler_oom")
    assert "Killed signal terminated program cc1plus" in c.evidence[-1]


def test_oom_kill_outranks_later_build_errors(taxonomy):
    # make -j: the kill, then other jobs' errors and make's summary
    c = verdict(taxonomy, CC1PLUS + COMPILE_ERR * 3 + MAKE_ERR)
    assert c.family == Family.OOM


def test_unambiguous_failure_reason_beats_text(taxonomy):
    for reason in ("job_execution_timeout", "server_timeout_running", "stuck_or_timeout_failure",
                   "no_updates_running"):
        c = verdict(taxonomy, CC1PLUS, failure_reason=reason)
        assert c.family == Family.TIMEOUT, reason
    assert verdict(taxonomy, CC1PLUS, failure_reason="ci_quota_exceeded").family == Family.CONFIG_ERROR
    assert verdict(taxonomy, b"", failure_reason="missing_dependency_failure").category == "missing_dependency"


def test_runner_timeout_message_beats_kill_text(taxonomy):
    trace = CC1PLUS + b"ERROR: Job failed: execution took longer than 1h0m0s seconds\n"
    c = verdict(taxonomy, trace, failure_reason="script_failure")
    assert (c.family, c.rule) == (Family.TIMEOUT, "runner-execution-timeout")


def test_exit_137_alone_is_weak_killed(taxonomy):
    c = verdict(taxonomy, b"running tests\n", exit_code=137, failure_reason="script_failure")
    assert (c.family, c.category, c.confidence) == (Family.OOM, "killed", "weak")
    c = verdict(taxonomy, b"running\nERROR: Job failed: exit code 137\n")
    assert c.category == "killed" and "runner message" in c.evidence[0]
    c = verdict(taxonomy, b"ERROR: Job failed: exit status 137\n")  # custom/shell executor wording
    assert c.category == "killed"


def test_exit_137_with_memory_hint_is_oom(taxonomy):
    c = verdict(taxonomy, b"bash: line 12: 4242 Killed   ./run-tests\n", exit_code=137)
    assert (c.category, c.confidence) == ("oom", "strong")
    c = verdict(taxonomy, b"terminate called after throwing an instance of 'std::bad_alloc'\n", exit_code=137)
    assert c.category == "oom"


def test_137_without_oom_other_cause_wins(taxonomy):
    trace = (b"ERROR: Job failed (system failure): prepare environment: waiting for pod running: "
             b"timed out waiting for pod to start\n")
    assert verdict(taxonomy, trace, exit_code=137).family == Family.INFRASTRUCTURE
    trace = b"Pod was terminated in response to imminent node shutdown.\n"
    assert verdict(taxonomy, trace, exit_code=137).category == "spot_reclamation"


def test_kubernetes_oomkilled_and_spack_killed_port_fix(taxonomy):
    line = b"ERROR: Job failed (system failure): Error in container build: exit code: 137, reason: 'OOMKilled'\n"
    c = verdict(taxonomy, line, failure_reason="runner_system_failure")
    assert (c.family, c.rule, c.confidence) == (Family.OOM, "kubernetes-oomkilled", "strong")
    # 'Killed' inside 'OOMKilled' is not the weak bare-Killed rule
    assert taxonomy.rule("make-killed").patterns[0].regex.search(b"reason: 'OOMKilled'\n") is None


def test_dns_error_inside_test_failure_is_a_test_failure(taxonomy):
    trace = (b"E   requests.exceptions.ConnectionError: Failed to resolve 'api.example.org' "
             b"([Errno -3] Temporary failure in name resolution)\n"
             b"FAILED tests/test_api.py::test_fetch - requests.exceptions.ConnectionError: "
             b"Temporary failure in name resolution\n"
             b"========= 1 failed, 99 passed in 3.21s =========\n")
    c = verdict(taxonomy, trace, failure_reason="script_failure")
    assert (c.family, c.category) == (Family.BUILD_ERROR, "test_failure")


def test_dns_error_at_the_end_is_infrastructure(taxonomy):
    trace = (b"========= 1 failed, 99 passed in 3.21s =========\n"
             b"$ git push origin HEAD\n"
             b"fatal: unable to access 'https://gitlab.example.org/g/p.git/': Could not resolve host: gitlab.example.org\n")
    c = verdict(taxonomy, trace)
    assert (c.family, c.category) == (Family.INFRASTRUCTURE, "dns_error")


@pytest.mark.parametrize("trace,family,category", [
    (b"x509: certificate has expired or is not yet valid: current time 2024-01-02T00:00:00Z is after 2023-12-31T00:00:00Z\n", "infrastructure", "tls_error"),
    # seventh pass: an untrusted CA is configuration (docs/taxonomy.md, "Seventh pass")
    (b"x509: certificate signed by unknown authority\n", "config_error", "tls_untrusted"),
    (b"curl: (28) Operation timed out after 30000 milliseconds\n", "infrastructure", "network_timeout"),
    (b"write /var/lib/docker/x: no space left on device\n", "infrastructure", "no_space"),
    (b"ERROR: Uploading artifacts as \"archive\" to coordinator... error  error=couldn't execute POST\n",
     "infrastructure", "artifact_upload"),
    (b"ERROR: Downloading artifacts from coordinator... error  couldn't execute GET\n",
     "infrastructure", "artifact_download"),
    (b"WARNING: Failed to pull image with policy \"always\": Error response from daemon: "
     b"received unexpected HTTP status: 503 Service Unavailable\n", "infrastructure", "registry_error"),
    (b"HTTP Error 503: Service Unavailable\n", "infrastructure", "http_5xx"),
    (b"==> Error: concretization failed for the following reasons:\n", "config_error", "concretization_error"),
    (b"==> Error: sha256 checksum failed for /tmp/x.tar.gz\n", "build_error", "checksum_mismatch"),
    (b"2 errors found in build log:\n", "build_error", "build_error"),
    (b"error[E0308]: mismatched types\n", "build_error", "compile_error"),
    (b"--- FAIL: TestParse (0.00s)\n", "build_error", "test_failure"),
    (b"Tests:       2 failed, 40 passed, 42 total\n", "build_error", "test_failure"),
    (b"java.lang.OutOfMemoryError: Java heap space\n", "oom", "runtime_oom"),
    (b"virtual memory exhausted: Cannot allocate memory\n", "oom", "compiler_oom"),
    (b"[12345.6] Out of memory: Killed process 4242 (cc1plus)\n", "oom", "oom"),
    (b"WARNING: script canceled externally (UI, API)\n", "canceled", "job_canceled"),
    (b"bash: line 3: jq: command not found\n", "config_error", "command_not_found"),
])
def test_family_examples(taxonomy, trace, family, category):
    c = verdict(taxonomy, b"some build output\n" + trace + b"Cleaning up project directory\n")
    assert (c.family.value, c.category) == (family, category), c


def test_ambiguous_reasons_fall_back(taxonomy):
    assert verdict(taxonomy, b"ok\n", failure_reason="script_failure").category == "script_failure_unknown"
    c = verdict(taxonomy, b"", failure_reason="runner_system_failure")
    assert (c.family, c.category) == (Family.INFRASTRUCTURE, "runner_system_failure")
    assert verdict(taxonomy, b"", status="canceled").family == Family.CANCELED
    c = verdict(taxonomy, b"nothing to see\n")
    assert (c.family, c.rule, c.confidence) == (Family.UNKNOWN, "fallback", "weak")


def test_unknown_failure_reason_does_not_crash(taxonomy):
    c = verdict(taxonomy, CC1PLUS, failure_reason="brand_new_reason_from_gitlab_20")
    assert c.family == Family.OOM


def test_ansi_sections_and_carriage_returns_are_cleaned(taxonomy):
    trace = (b"section_start:1700000000:step_script\r\x1b[0K\x1b[0K\x1b[36;1mExecuting step\x1b[0;m\n"
             b"Downloading 10%\rDownloading 55%\rDownloading 100%\n"
             b"\x1b[31;1mc++: fatal error: \x1b[0mKilled signal terminated program cc1plus\n"
             b"section_end:1700000001:step_script\r\x1b[0K\n")
    c = verdict(taxonomy, trace)
    assert c.category == "compiler_oom"
    assert c.evidence[-1] == "c++: fatal error: Killed signal terminated program cc1plus"


def test_overwritten_progress_text_does_not_match(taxonomy):
    # the terminal shows only the last segment: the DNS error was overwritten
    c = verdict(taxonomy, b"Could not resolve host: x\rretrying... ok\n")
    assert c.category != "dns_error"


def test_binary_and_huge_lines_are_handled(taxonomy):
    junk = bytes(range(256)) * 400 + b"A" * 200_000
    c = verdict(taxonomy, junk + b"\nERROR: Job failed: execution took longer than 3h0m0s seconds\n")
    assert c.family == Family.TIMEOUT
    long_line = b"x" * 200_000 + b" curl: (6) Could not resolve host: gitlab.com " + b"y" * 20_000
    assert verdict(taxonomy, long_line).category == "dns_error"


def test_stage_scan_windows_bound_the_search(taxonomy):
    """Diagnostics are looked for in the last 32 KiB (stage scan_bytes); OOM kills in the last 64 KiB."""
    far = b"curl: (6) Could not resolve host: gitlab.com\n" + b"ok\n" * 20_000  # 60 KB later
    assert verdict(taxonomy, far).category == "unclassified"
    oom_far = CC1PLUS + b"still compiling other files\n" * 2_000                # ~56 KB later
    assert verdict(taxonomy, oom_far).category == "compiler_oom"


def test_evidence_is_trimmed(taxonomy):
    c = verdict(taxonomy, b"z" * 5000 + b" No space left on device " + b"z" * 5000 + b"\n")
    assert c.category == "no_space" and len(c.evidence[-1]) < 300 and "No space left" in c.evidence[-1]


def verdicts_of_the_labelled_logs() -> list[list]:
    """Every labelled job-log excerpt (tests/data/joblogs) classified with the default taxonomy."""
    from retry_bot.classify import load_taxonomy
    from retry_bot.model import JobFacts

    taxonomy = load_taxonomy()
    out = []
    for split in sorted(JOBLOGS.glob("*.toml")):
        for c in tomllib.loads(split.read_text("utf-8"))["case"]:
            f = JobFacts(job_id=1, name=c["id"], failure_reason=c.get("failure_reason"),
                         exit_code=c.get("exit_code"), status=c.get("status", "failed"))
            v = classify(f, c["excerpt"].encode("utf-8"), taxonomy)
            out.append([split.name, c["id"], v.family.value, v.category, v.rule, v.confidence, list(v.evidence)])
    return out


def test_classification_is_the_same_in_fresh_interpreters_with_other_hash_seeds():
    """Rule order, tie-breaks and evidence must not depend on set/dict order (PYTHONHASHSEED) or state."""
    here = as_json(verdicts_of_the_labelled_logs())
    assert len(json.loads(here)) >= 100
    for other in in_fresh_interpreters(verdicts_of_the_labelled_logs):
        assert other == here


@pytest.mark.parametrize("shift", range(-30, 31, 3))
def test_needle_straddling_a_window_boundary_is_found(taxonomy, shift):
    """'last' stages search the last 8 KiB, then 32 KiB: a needle cut by the 8 KiB mark is still seen."""
    line = b"curl: (6) Could not resolve host: gitlab.example.org\n"
    pos = line.index(b"Could not resolve host")
    tail_after = 8192 - pos - shift          # bytes from the needle's start to the end
    trace = b"x" * 10_000 + b"\n" + line + b"." * (tail_after - len(line) + pos) + b"\n"
    c = verdict(taxonomy, trace)
    assert c.category == "dns_error", shift
