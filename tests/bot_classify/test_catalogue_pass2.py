"""Issue 11, second pass: rules for the kinds still missed after pass one, each from the tool's own
message catalogue (the lines below are the tools' message formats, not excerpts of the evaluation
splits), and the decision the shipped policy takes on them."""

from __future__ import annotations

import dataclasses

import pytest

from retry_bot.classify import classify
from retry_bot.decide import Action, ClassUsage, decide
from retry_bot.policy import default_policy

from .conftest import decided, facts

GiB, MiB = 2**30, 2**20




LOST = (b"The self-hosted runner: ci-runner-7 lost communication with the server. Verify the machine is "
        b"running and has a healthy network connection. Anything in your workflow that terminates the "
        b"runner process, starves it for CPU/Memory, or blocks its network access can cause this error.\n")


def test_runner_lost_without_memory_evidence_is_infrastructure(taxonomy):
    v, action = decided(LOST, taxonomy)
    assert (v.family.value, v.category, v.rule) == ("infrastructure", "runner_shutdown", "runner-shutdown")
    assert action == Action.RETRY
    # thirteenth pass: a GitHub-hosted runner's loss (GitHub's VM, provisioned per job) is read as the workflow
    # exhausting it (hosted-runner-lost-under-load, oom, weak); a self-hosted one's stays the host's or network's
    v, _ = decided(b"The hosted runner: GitHub Actions 12 lost communication with the server.\n", taxonomy)
    assert (v.family.value, v.category, v.rule) == ("oom", "killed", "hosted-runner-lost-under-load")


def test_runner_lost_during_a_compile_stays_memory_evidence(taxonomy):
    v, action = decided(b"[ 61%] Building CXX object src/CMakeFiles/core.dir/big.cpp.o\n" + LOST, taxonomy)
    assert (v.family.value, v.rule) == ("oom", "runner-lost-under-memory-load")
    assert action == Action.RESIZE


@pytest.mark.parametrize("trace", [
    # GitLab Runner with CI_DEBUG_SERVICES: every service line is prefixed "[service:ALIAS] "
    b"[service:elasticsearch] [2024-05-01T10:00:00,000][ERROR][o.e.b.ElasticsearchUncaughtExceptionHandler] "
    b"fatal error in thread [main], exiting java.lang.OutOfMemoryError: Java heap space\n"
    b"$ pytest tests/\nE   ConnectionRefusedError: [Errno 111] Connection refused\nERROR: Job failed: exit code 1\n",
    # GitLab Runner's health-check dump of a service that did not start
    b"*** WARNING: Service runner-abc-project-1-concurrent-0-mongo-0 probably didn't start properly.\n\n"
    b"Health check error:\nservice \"runner-abc-mongo-0-wait-for-service\" timeout\n\n"
    b"Service container logs:\n2024-05-01T10:00:00.000Z java.lang.OutOfMemoryError: Java heap space\n\n*********\n",
    # Testcontainers: the failed container's own log
    b"ERROR tc.postgres:15 - Log output from the failed container:\n"
    b"There is insufficient memory for the Java Runtime Environment to continue.\n",
])
def test_a_service_containers_own_oom_is_not_the_jobs(taxonomy, trace):
    v, action = decided(trace, taxonomy)
    assert (v.family.value, v.category) == ("build_error", "service_oom")
    assert action == Action.NONE


def test_the_jobs_own_heap_oom_is_still_oom(taxonomy):
    v, action = decided(b"> Task :test\njava.lang.OutOfMemoryError: Java heap space\nERROR: Job failed: exit code 1\n",
                        taxonomy)
    assert (v.family.value, v.category) == ("oom", "runtime_oom")
    assert action == Action.RESIZE


@pytest.mark.parametrize("line", [
    b'{"message":"403 Forbidden"}\n',
    b"gitlab.exceptions.GitlabCreateError: 403: 403 Forbidden\n",
    b"[semantic-release] [@semantic-release/gitlab] \xe2\x80\xba \xe2\x9c\x98  An error occurred while making a request to "
    b"the GitLab release API:\nHTTPError: Response code 403 (Forbidden)\n",
])
def test_gitlab_api_403_for_the_job_token_is_configuration(taxonomy, line):
    v, action = decided(line, taxonomy)
    assert (v.family.value, v.category, v.rule) == ("config_error", "api_forbidden", "gitlab-api-forbidden")
    assert action == Action.NONE


def test_make_recipe_broken_pipe_is_a_build_error(taxonomy):
    v, action = decided(b"make[2]: *** [Makefile:1833: stage1scan.c] Broken pipe\n", taxonomy)
    assert (v.family.value, v.rule) == ("build_error", "make-recipe-broken-pipe")
    assert action == Action.NONE


@pytest.mark.parametrize("trace", [
    # googletest
    b"[ RUN      ] Store.FillUntilCollect\nunknown file: Failure\n"
    b'C++ exception with description "std::bad_alloc" thrown in the test body.\n'
    b"[  FAILED  ] Store.FillUntilCollect (12 ms)\n",
    # Catch2: the message is on the line after the reporter's header
    b"/src/test/t_stash.cpp:134: FAILED:\n  {Unknown expression after the reported line}\n"
    b"due to unexpected exception with message:\n  std::bad_alloc\n"
    b"===============================================================================\n"
    b"test cases: 3 | 2 passed | 1 failed\n",
])
def test_bad_alloc_in_a_test_process_without_a_kill_is_the_tests_failure(taxonomy, trace):
    """General pass: a cgroup memory limit never makes an allocation fail (the kernel SIGKILLs the
    process instead), so a reported std::bad_alloc without a kill is an absurd size, an address-space
    limit or the host's overcommit heuristic: the test's failure, not resized."""
    v, action = decided(trace, taxonomy)
    assert (v.family.value, v.category) == ("build_error", "test_failure")
    assert action == Action.NONE


@pytest.mark.parametrize("trace", [
    b"terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc\n",
    b"memory allocation of 18446744073709551615 bytes failed\n",
])
def test_a_bare_refused_allocation_is_a_weak_build_error(taxonomy, trace):
    v, action = decided(trace, taxonomy)
    assert (v.family.value, v.category, v.rule, v.confidence) == (
        "build_error", "allocation_failed", "allocation-refused", "weak")
    assert action == Action.NONE


def test_bad_alloc_with_a_sigkill_stays_oom(taxonomy):
    f = dataclasses.replace(facts(failure_reason="script_failure", exit_code=137),
                            variables={"KUBERNETES_MEMORY_LIMIT": "4Gi"})
    v = classify(f, b"terminate called after throwing an instance of 'std::bad_alloc'\nKilled\n", taxonomy)
    assert (v.family.value, v.rule) == ("oom", "sigkill-with-memory-hint")
    assert decide(f, v, [], default_policy(), ClassUsage()).action == Action.RESIZE


def test_an_indented_bad_alloc_without_a_test_framework_is_not_this_rule(taxonomy):
    v, _ = decided(b"  std::bad_alloc\n", taxonomy)
    assert v.family.value != "oom"


@pytest.mark.parametrize("line", [
    b"not ok 7 waits for the daemon\n# (in test file test/daemon.bats, line 12)\n#   `run wait_for_socket' failed due to timeout\n",
    b"#   `sleep 1000' failed with status 143 due to timeout\n",
])
def test_bats_test_timeout_is_a_timeout(taxonomy, line):
    v, action = decided(line, taxonomy)
    assert (v.family.value, v.category, v.rule) == ("timeout", "test_timeout", "bats-test-timeout")
    assert action == Action.NONE


# ------------------------------------------------------------------ helper_oom resizes the helper

HELPER_KILLED = (b"Restoring cache\nChecking cache for default-11...\nDownloading cache.zip from http://minio:9000/c\n"
                 b"Uploading artifacts for failed job\nERROR: Job failed: command terminated with exit code 137\n")


def helper_decision(taxonomy, variables, policy=None):
    f = dataclasses.replace(facts(exit_code=137), variables=variables)
    verdict = classify(f, HELPER_KILLED, taxonomy)
    assert verdict.category == "helper_oom"
    return decide(f, verdict, [], policy or default_policy(), ClassUsage())


def test_helper_oom_resizes_the_helper_containers_variables(taxonomy):
    # gitlab-runner: the helper's memory is KUBERNETES_HELPER_MEMORY_LIMIT, not the build's limit
    d = helper_decision(taxonomy, {"KUBERNETES_MEMORY_LIMIT": "4Gi", "KUBERNETES_HELPER_MEMORY_LIMIT": "1Gi"})
    assert d.action == Action.RESIZE
    assert d.variables["KUBERNETES_HELPER_MEMORY_LIMIT"] == "1536Mi"
    assert "KUBERNETES_MEMORY_LIMIT" not in d.variables
    # the lineage keeps the build container's limits: a helper resize must not pose as one
    assert d.memory_limit_bytes is None and d.memory_request_bytes is None


def test_helper_oom_without_a_known_helper_limit_says_what_is_missing(taxonomy):
    d = helper_decision(taxonomy, {"KUBERNETES_MEMORY_LIMIT": "4Gi"})
    assert d.action == Action.NONE
    assert "KUBERNETES_HELPER_MEMORY_LIMIT" in d.reason and "config.toml" in d.reason


def helper_policy(**resize):
    policy = default_policy()
    return dataclasses.replace(policy, resize=dataclasses.replace(policy.resize, **resize))


def test_helper_oom_sizes_from_the_runners_helper_limit_not_the_builds_default(taxonomy):
    # the build's default_memory says nothing about the helper container
    d = helper_decision(taxonomy, {"KUBERNETES_MEMORY_LIMIT": "4Gi"}, helper_policy(default_memory=8 * GiB))
    assert d.action == Action.NONE and "resize.helper_default_memory" in d.reason
    d = helper_decision(taxonomy, {}, helper_policy(default_memory=8 * GiB, helper_default_memory=512 * MiB))
    assert d.action == Action.RESIZE
    # 512Mi: max(x1.5, +512Mi min_bump) = 1Gi
    assert d.variables["KUBERNETES_HELPER_MEMORY_LIMIT"] == "1Gi"
    assert set(d.variables) <= {"KUBERNETES_HELPER_MEMORY_LIMIT", "KUBERNETES_HELPER_MEMORY_REQUEST"}
    assert "resize.helper_default_memory" in d.reason


def test_helper_oom_never_asks_more_than_the_runners_helper_ceiling(taxonomy):
    # gitlab-runner executors/kubernetes/overwrites.go: a helper overwrite above
    # helper_memory_limit_overwrite_max_allowed fails the job before it starts
    d = helper_decision(taxonomy, {"KUBERNETES_HELPER_MEMORY_LIMIT": "1Gi"},
                        helper_policy(helper_max_memory=1280 * MiB))
    assert d.action == Action.RESIZE
    assert d.variables["KUBERNETES_HELPER_MEMORY_LIMIT"] == "1280Mi"
    assert "resize.helper_max_memory" in d.reason
    d = helper_decision(taxonomy, {"KUBERNETES_HELPER_MEMORY_LIMIT": "1280Mi"},
                        helper_policy(helper_max_memory=1280 * MiB))
    assert d.action == Action.NONE and "ceiling" in d.reason


def test_an_unknown_helper_limit_goes_to_the_helper_ceiling_not_the_builds(taxonomy):
    d = helper_decision(taxonomy, {"KUBERNETES_MEMORY_LIMIT": "4Gi"}, helper_policy(helper_max_memory=2 * GiB))
    assert d.action == Action.RESIZE
    # (the request stays as it was: nothing known to reserve for, as for the build container)
    assert d.variables == {"KUBERNETES_HELPER_MEMORY_LIMIT": "2Gi"}
    assert "resize.helper_default_memory would size" in d.reason
    # unknown_limit = "none" leaves it alone, as it does the build container
    from retry_bot.policy import UnknownLimit
    d = helper_decision(taxonomy, {}, helper_policy(helper_max_memory=2 * GiB, unknown_limit=UnknownLimit.NONE))
    assert d.action == Action.NONE and "resize.helper_default_memory" in d.reason


def test_an_empty_helper_variable_falls_back_to_the_build_variables(taxonomy):
    policy = default_policy()
    policy = dataclasses.replace(policy, variables=dataclasses.replace(policy.variables, helper_memory_limit=""))
    d = helper_decision(taxonomy, {"KUBERNETES_MEMORY_LIMIT": "4Gi"}, policy)
    assert d.action == Action.RESIZE and "KUBERNETES_MEMORY_LIMIT" in d.variables


# ------------------------------------------------------------------ third pass: from held-out B's misses (kinds)


@pytest.mark.parametrize("trace,family,rule", [
    # CMake file(DOWNLOAD EXPECTED_HASH) / ExternalProject verify step
    (b"-- SHA256 hash of\n    /b/deps/zlib-1.3.tar.gz\n  does not match expected value\n    expected: 'aa'\n"
     b"      actual: 'bb'\n-- Hash mismatch, removing...\n", "build_error", "package-checksum-mismatch"),
    (b"ERROR: zlib-1.3-r0 do_fetch: Fetcher failure for URL: 'https://zlib.net/zlib-1.3.tar.gz'. Checksum mismatch!\n",
     "build_error", "package-checksum-mismatch"),
    (b"Error: An exception occurred within a child process:\n  ChecksumMismatchError: SHA256 mismatch\n",
     "build_error", "package-checksum-mismatch"),
    (b"Error: error configuring Terraform AWS Provider: no valid credential sources for Terraform AWS Provider found.\n",
     "config_error", "cloud-credentials"),
    (b"jobs:deploy-review script can't be blank\n", "config_error", "gitlab-ci-config-invalid"),
    (b"flake8 src\nsrc/app/views.py:12:80: E501 line too long (88 > 79 characters)\n", "build_error", "lint-or-format-failed"),
    (b"FAIL src/a.test.ts\n  \xe2\x97\x8f Test suite failed to run\n\n    Jest worker ran out of memory and crashed\n",
     "oom", "runtime-heap-exhausted"),
    (b"Error: UPGRADE FAILED: cannot patch \"web\" with kind StatefulSet: StatefulSet.apps \"web\" is invalid: spec: "
     b"Forbidden: updates to statefulset spec for fields other than 'replicas' are forbidden\n",
     "config_error", "deploy-tool-refused"),
    (b"12/40 proj:unit / slow_test                    TIMEOUT        600.02s   killed by signal 15 SIGTERM\n",
     "timeout", "test-harness-timeout"),
    (b"---- parser::tests::rejects_empty stdout ----\nthread 'parser::tests::rejects_empty' panicked at src/parser.rs:10:9:\n",
     "build_error", "rust-panic"),  # the panic line is the latest (general pass: rust-panic)
    (b"---- parser::tests::rejects_empty stdout ----\n", "build_error", "test-failure"),
    (b"WARNING: step_script could not run\nexecution took longer than 1h0m0s seconds\n", "timeout", "runner-execution-timeout"),
    (b"ccache: FATAL: Failed to open /ci/ccache/tmp/tmp.cpp_stderr.host.4242: No such file or directory\n",
     "infrastructure", "compiler-temp-file-vanished"),
])
def test_third_pass_catalogue_rules(taxonomy, trace, family, rule):
    v, _ = decided(trace, taxonomy)
    assert (v.family.value, v.rule) == (family, rule)


def test_yarn_and_lerna_report_a_sigkilled_child(taxonomy):
    trace = (b"@pkg/core: Killed\n@pkg/core: error Command failed with exit code 137.\n"
             b"lerna ERR! yarn run build exited 137 in '@pkg/core'\nerror Command failed with exit code 137.\n")
    v, action = decided(trace, taxonomy)
    assert (v.family.value, v.category, v.rule) == ("oom", "killed", "make-killed")
    assert action == Action.RESIZE


def test_a_pod_disruption_budget_is_not_a_pod(taxonomy):
    v, _ = decided(b'Error: PodDisruptionBudget.policy "db" is invalid: spec: Forbidden: updates to '
                   b'poddisruptionbudget spec are forbidden.\n', taxonomy)
    assert v.family.value == "config_error"
