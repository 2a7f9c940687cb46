"""Issue 11 (+ issue 10's "text must not outrank a verified record"): structural evidence, indirect
OOM, traps, the deliberate fallback, and what a verified no-OOM record does to OOM words."""

from __future__ import annotations

import dataclasses

import pytest

from retry_bot.classify import classify, taxonomy_from_text
from retry_bot.classify.structure import analyse, record_covers_failure, signal_of
from retry_bot.decide import Action, ClassUsage, decide
from retry_bot.policy import default_policy
from retry_bot.problems import ConfigError
from runner_wrapper.record import StageUsage

from .conftest import facts, usage_record

GIB = 2**30


def with_stages(rec, *stages):
    return dataclasses.replace(rec, stages=tuple(stages))


def decision(f, trace: bytes, taxonomy, record=None):
    f = dataclasses.replace(f, variables={"KUBERNETES_MEMORY_LIMIT": "4Gi"})
    verdict = classify(f, trace, taxonomy, record)
    return verdict, decide(f, verdict, [], default_policy(), ClassUsage(), record=record)


# ------------------------------------------------------------------ the record outranks text


ECHOED = b"$ grep -r 'Killed signal terminated program cc1plus' docs/\ndocs/faq.md: c++: fatal error: Killed signal terminated program cc1plus\nERROR: Job failed: exit code 1\n"


def failing_step_record(oom_kills: int = 0):
    return with_stages(usage_record(oom_kills=oom_kills, exit_code=1),
                       StageUsage(name="get_sources", attempt=1, wall_seconds=1.0, exit_code=0),
                       StageUsage(name="build_script", attempt=1, wall_seconds=9.0, exit_code=1, oom_kills=0))


def test_echoed_cc1plus_line_with_verified_no_oom_record_is_not_resized(taxonomy):
    verdict, d = decision(facts(exit_code=1), ECHOED, taxonomy, failing_step_record())
    assert d.action != Action.RESIZE, (verdict, d)
    assert verdict.family.value != "oom"
    assert verdict.category == "oom_unconfirmed" and verdict.confidence == "weak"
    assert any("counts no OOM kill" in e for e in verdict.evidence)


def test_the_same_line_without_a_record_is_still_an_oom(taxonomy):
    verdict, d = decision(facts(exit_code=1), ECHOED, taxonomy)
    assert verdict.family.value == "oom" and d.action == Action.RESIZE


def test_a_record_that_does_not_cover_the_failing_stage_does_not_contradict(taxonomy):
    rec = with_stages(usage_record(oom_kills=0),
                      StageUsage(name="get_sources", attempt=1, wall_seconds=1.0, exit_code=0))
    assert record_covers_failure(rec) == (False, None)
    verdict, _ = decision(facts(exit_code=1), ECHOED, taxonomy, rec)
    assert verdict.family.value == "oom"


def test_oom_in_a_cgroup_the_wrapper_does_not_see_stays_recoverable(taxonomy):
    # docker-in-docker / buildkit: the RUN step ran in the build daemon's cgroup
    trace = (b'#12 [build 4/6] RUN make -j16\n#12 ERROR: process "/bin/sh -c make -j16" did not complete '
             b"successfully: exit code: 137\nERROR: Job failed: exit code 1\n")
    verdict, d = decision(facts(exit_code=1), trace, taxonomy, failing_step_record())
    assert verdict.family.value == "oom" and verdict.rule == "docker-build-step-sigkill"
    assert d.action == Action.RESIZE


def test_a_recorded_oom_kill_still_wins(taxonomy):
    verdict, d = decision(facts(exit_code=137), b"make: *** [all] Error 2\n", taxonomy, failing_step_record(1))
    assert verdict.rule == "record-oom-kill" and d.action == Action.RESIZE


def test_a_bare_137_with_a_no_oom_record_is_not_an_oom(taxonomy):
    verdict, d = decision(facts(exit_code=137), b"Terminated by the watchdog\n", taxonomy,
                          dataclasses.replace(failing_step_record(), exit_code=137))
    assert d.action != Action.RESIZE and verdict.family.value != "oom"


# ------------------------------------------------------------------ structure


def test_section_is_the_last_started_one_before_the_failure():
    raw = (b"section_start:1:prepare_script\r\x1b[0Kx\nsection_end:2:prepare_script\r\x1b[0K\n"
           b"section_start:3:get_sources\r\x1b[0K\x1b[32;1m$ git fetch\x1b[0;m\nfatal: boom\n"
           b"section_end:4:get_sources\r\x1b[0K\nsection_start:5:upload_artifacts_on_failure\r\x1b[0K"
           b"Uploading artifacts for failed job\nsection_start:6:cleanup_file_variables\r\x1b[0K\n"
           b"ERROR: Job failed: exit code 1\n")
    s = analyse(raw)
    assert s.section == "get_sources" and s.section_source == "marker"
    assert s.last_command == "git fetch"
    assert s.runner_verdict_last


def test_section_from_runner_headers_when_markers_are_gone():
    s = analyse(b"Restoring cache\nDownloading cache.zip from http://minio/x\nUploading artifacts for failed job\n"
                b"ERROR: Job failed: command terminated with exit code 137\n")
    assert s.section == "restore_cache" and s.section_source == "header"
    assert analyse(b"nothing here\n").section is None


@pytest.mark.parametrize("code,sig", [(137, 9), (143, 15), (139, 11), (1, None), (128, None), (255, None)])
def test_exit_code_signal(code, sig):
    assert signal_of(code) == sig


def test_signal_is_named_in_the_evidence(taxonomy):
    v = classify(facts(exit_code=137), b"nothing\n", taxonomy)
    assert any("128 + 9 (SIGKILL)" in e for e in v.evidence)


# ------------------------------------------------------------------ indirect OOM


@pytest.mark.parametrize("trace,rule", [
    (b"The command '/bin/sh -c ./build.sh' returned a non-zero code: 137\n", "docker-build-step-sigkill"),
    (b"FAILURE: Build failed with an exception.\n* What went wrong:\nGradle build daemon disappeared "
     b"unexpectedly (it may have been killed or may have crashed)\n", "gradle-daemon-killed"),
    (b"[ 40%] Building CXX object src/CMakeFiles/a.dir/big.cpp.o\nline 9: 312 Killed       make -j8\n"
     b"##[error]The runner has received a shutdown signal.\n##[error]Process completed with exit code 137.\n",
     "runner-lost-under-memory-load"),
])
def test_indirect_oom_is_resized(taxonomy, trace, rule):
    verdict, d = decision(facts(), trace, taxonomy)
    assert verdict.rule == rule and verdict.family.value == "oom"
    assert d.action == Action.RESIZE


def test_runner_shutdown_without_memory_load_stays_infrastructure(taxonomy):
    trace = (b"##[error]The runner has received a shutdown signal. This can happen when the runner service is "
             b"stopped, or a manually started runner is canceled.\nProcess completed with exit code 137.\n")
    verdict, d = decision(facts(exit_code=137), trace, taxonomy)
    assert verdict.family.value == "infrastructure" and d.action == Action.RETRY


def test_helper_killed_while_restoring_a_cache_is_a_helper_oom(taxonomy):
    trace = (b"Restoring cache\nChecking cache for default-11...\nDownloading cache.zip from http://minio:9000/c\n"
             b"Uploading artifacts for failed job\nERROR: Job failed: command terminated with exit code 137\n")
    verdict, d = decision(facts(), trace, taxonomy)
    assert verdict.category == "helper_oom"
    assert any("restore_cache" in e for e in verdict.evidence)
    # the helper's own limit is what a resize would raise; unknown here, so the bot says so
    # (test_catalogue_pass2: with KUBERNETES_HELPER_MEMORY_LIMIT set, the helper is resized)
    assert d.action == Action.NONE and "KUBERNETES_HELPER_MEMORY_LIMIT" in d.reason


@pytest.mark.parametrize("line,code", [
    (b"##[error]Process completed with exit code 137.\n", 137),
    (b"##[error]Exit code 139 returned from process: file name '/usr/bin/docker'\n", 139),
])
def test_exit_code_from_other_runners_messages(taxonomy, line, code):
    from retry_bot.classify import effective_exit_code
    from retry_bot.classify.trace import TraceText
    assert effective_exit_code(facts(), TraceText(line), None)[0] == code


# ------------------------------------------------------------------ traps


@pytest.mark.parametrize("trace,family", [
    (b"    TopNOomRaceTests > testRace {repeats = 20} FAILED\n        java.lang.OutOfMemoryError: Java heap space\n",
     "build_error"),
    (b"[ RUN      ] MemTest.OomHandled\nUnexpected native OOM\n[  FAILED  ] MemTest.OomHandled (0 ms)\n",
     "build_error"),
    (b"test_oom:test/integration/mallocx.c:89: Failed assertion: (mallocx(hugemax, 0)) == (NULL)\n", "build_error"),
    (b"elasticsearch.exceptions.TransportError: TransportError(429, 'circuit_breaking_exception', '[parent] "
     b"Data too large')\n", "build_error"),
    (b"=== RUN   TestStatus\npanic: test timed out after 10m0s\n\ngoroutine 7 [running]:\n", "timeout"),
    (b"tests/test_x.py::test_slow\nFailed: Timeout >300.0s\n", "timeout"),
    (b"_____ test_kill_group _____\n>       os.kill(pid, signal.SIGKILL)\nE       OSError: [Errno 3] No such process\n",
     "build_error"),
])
def test_traps_are_not_resized(taxonomy, trace, family):
    verdict, d = decision(facts(), trace, taxonomy)
    assert verdict.family.value == family, verdict
    assert d.action == Action.NONE


# ------------------------------------------------------------------ configuration and transient faults


@pytest.mark.parametrize("trace,family,category", [
    (b'Error from server (Forbidden): deployments.apps "web" is forbidden: User "system:serviceaccount:ci:default" '
     b'cannot get resource "deployments" in API group "apps"\n', "config_error", "permission_denied"),
    (b"remote: HTTP Basic: Access denied\nfatal: Authentication failed for 'https://gitlab.example.com/g/p.git/'\n",
     "config_error", "git_auth_failed"),
    (b"fatal: unable to access 'https://gitlab.example.com/g/p.git/': The requested URL returned error: 403\n",
     "config_error", "git_auth_failed"),
    (b"remote: GitLab: You are not allowed to push code to protected branches on this project.\n",
     "config_error", "push_rejected"),
    (b"$ docker login -u $U -p $P $R\nError: Cannot perform an interactive login from a non TTY device\n",
     "config_error", "registry_auth"),
    (b"c5cd: Pushing [==================================================>]  2.187GB\nunauthorized: "
     b"authentication required\n", "infrastructure", "registry_error"),
    (b"==> Warning: The contents of\n  the archive\n   look like HTML.\n==> Error: ChecksumError: sha256 checksum "
     b"failed for /tmp/x.tar.gz\n    Expected 1 but got 2\n", "infrastructure", "mirror_error"),
    (b"==> Error: ChecksumError: sha256 checksum failed for /tmp/x.tar.gz\n    Expected 1 but got 2\n",
     "build_error", "checksum_mismatch"),
    (b"fatal: shallow file has changed since we read it\n", "infrastructure", "git_race"),
    (b"would reformat src/a.py\n\nOh no! \xf0\x9f\x92\xa5 \xf0\x9f\x92\x94 \xf0\x9f\x92\xa5\n1 file would be "
     b"reformatted.\n", "build_error", "lint_failure"),
    (b"npm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree\n", "config_error",
     "dependency_resolution"),
    (b"Error in loadNamespace(x) : there is no package called \xe2\x80\x98SpiecEasi\xe2\x80\x99\n", "build_error",
     "r_package_error"),
])
def test_catalogue_rules(taxonomy, trace, family, category):
    verdict = classify(facts(), trace, taxonomy)
    assert (verdict.family.value, verdict.category) == (family, category), verdict


# ------------------------------------------------------------------ the deliberate fallback


@pytest.mark.parametrize("trace,kw,family,category", [
    (b"section_start:1:get_sources\r\x1b[0KFetching changes...\nsomething odd\nERROR: Job failed: exit code 1\n",
     {}, "infrastructure", "runner_helper_failure"),
    (b"\x1b[32;1m$ pytest -q\x1b[0;m\n....\nERROR: Job failed: exit code 1\n", {}, "build_error", "test_failure"),
    (b"\x1b[32;1m$ ruff check .\x1b[0;m\nERROR: Job failed: exit code 1\n", {}, "build_error", "lint_failure"),
    (b"\x1b[32;1m$ make -j8\x1b[0;m\nERROR: Job failed: exit code 2\n", {}, "build_error", "build_failed"),
    (b"Segmentation fault (core dumped)\n", {"exit_code": 139}, "build_error", "crashed"),
    (b"terminated\n", {"exit_code": 143}, "infrastructure", "terminated"),
    (b"ERROR: Job failed: exit code 1\n", {"failure_reason": "script_failure"}, "unknown", "script_failure_unknown"),
    (b"", {}, "unknown", "unclassified"),
])
def test_fallback_by_stage_command_and_exit_code(taxonomy, trace, kw, family, category):
    verdict = classify(facts(**kw), trace, taxonomy)
    assert (verdict.family.value, verdict.category) == (family, category), verdict


# ------------------------------------------------------------------ the new rule keys are validated


@pytest.mark.parametrize("body,message", [
    ('stage = "s"\ncategory = "x"\nfamily = "oom"\ndescription = "d"\nsections = "get_sources"\n',
     "sections: must be a non-empty list of strings"),
    ('stage = "s"\ncategory = "x"\nfamily = "oom"\ndescription = "d"\nsections = ["a"]\ncorroborated_by = ["abc"]\n',
     "corroborated_by: corroborates patterns"),
    ('stage = "s"\ncategory = "x"\nfamily = "oom"\ndescription = "d"\npatterns = ["abc"]\ncorroborated_by = ["(a"]\n',
     "corroborated_by[0]"),
    ('stage = "s"\ncategory = "x"\nfamily = "oom"\ndescription = "d"\nlast_command = "(x"\n',
     "last_command: invalid regular expression"),
    ('stage = "s"\ncategory = "x"\nfamily = "oom"\ndescription = "d"\npatterns = ["abc"]\noutside_cgroup = "yes"\n',
     "outside_cgroup: must be true or false"),
])
def test_new_rule_keys_give_clear_errors(body, message):
    text = f'schema = 1\nstage_order = ["s"]\n[stages.s]\nresolve = "first"\n[[rule]]\nname = "r"\n{body}'
    with pytest.raises(ConfigError) as exc:
        taxonomy_from_text(text)
    assert message in str(exc.value)


def test_localized_gcc_kill_is_reachable_despite_the_rules_keywords(taxonomy):
    # compiler-killed has explicit keywords (Killed, memory, ...); gcc prints strsignal(SIGKILL)
    # localized, e.g. zh_CN "已杀死", which holds none of them: the pattern must still be searched.
    line = "gcc: 致命错误：已杀死 signal terminated program cc1\n编译中断。\n".encode()
    verdict = classify(facts(), line, taxonomy)
    assert (verdict.rule, verdict.category) == ("compiler-killed", "compiler_oom")


def _one_rule(keywords: str, patterns: str) -> str:
    return ('schema = 1\nstage_order = ["s"]\n[stages.s]\nresolve = "last"\n[[rule]]\nname = "r"\nstage = "s"\n'
            f'category = "x"\nfamily = "oom"\ndescription = "d"\nkeywords = {keywords}\npatterns = {patterns}\n')


def test_keywords_that_miss_a_pattern_are_refused_with_a_clear_message():
    # Pass one's defect: explicit keywords replace the pre-filter literals, so a pattern holding
    # none of them was silently never searched.  The loader now refuses such a rule by name.
    with pytest.raises(ConfigError) as exc:
        taxonomy_from_text(_one_rule('["alpha"]', "['alpha beta', 'gamma delta']"))
    msg = str(exc.value)
    assert "rule[0](r).patterns[1]" in msg and "'alpha'" in msg and "'gamma delta'" in msg
    assert "do not cover" in msg


def test_keywords_must_cover_every_alternative_of_a_pattern():
    # 'foo one|bar two' with keyword "foo": a trace holding only "bar two" would be hidden by the
    # pre-filter (the first pass checked one alternative, so this rule loaded and never fired).
    with pytest.raises(ConfigError) as exc:
        taxonomy_from_text(_one_rule('["foo"]', "['foo one|bar two']"))
    assert "'bar two'" in str(exc.value)


def test_keywords_that_cover_another_literal_of_the_pattern_are_accepted():
    # every match of this pattern holds localhost or 127.0.0.1, even though its longest literals
    # are the error words: the coverage check looks at every literal the pattern guarantees.
    tax = taxonomy_from_text(_one_rule('["localhost", "127.0.0.1"]',
                                       "['(?:localhost|127\\.0\\.0\\.1).{0,30}(?:Connection refused|ECONNREFUSED)']"))
    assert classify(facts(), b"connect to 127.0.0.1:5432 ECONNREFUSED\n", tax).rule == "r"
    tax = taxonomy_from_text(_one_rule('["OOM"]', "['OOM ?killed by the kernel']"))
    assert classify(facts(), b"task OOMkilled by the kernel\n", tax).rule == "r"
