"""Issue 11, fourteenth pass: blind set M's misses (M scored blind once after the thirteenth pass, then read),
generalised by mechanism (precision first) and per message source (each rule's description or the comment
beside each added pattern in config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
paths, sizes and numbers than M's excerpts. Each mechanism has a positive, a near miss next to it that
must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Fourteenth pass", lists the mechanisms.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule, check_trap, decided

HEX38 = b"0c4e1b7a9f3d2e8c6b5a4f3e2d1c0b9a8f7e6d"

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. a registry's 'Authentication is required' (Artifactory's 401 body) relayed by an image pull
    (b"Preparing the \"kubernetes\" executor\nUsing Kubernetes namespace: ci-jobs\n"
     b"ERROR: Job failed: image pull failed: rpc error: code = Unknown desc = failed to resolve reference "
     b"\"jfrog.corp.example:8443/ci-images/node:20-slim\": unknown: Authentication is required\n",
     "config_error", "registry-credentials-refused", Action.NONE, {}),
    (b"$ docker pull art.example.net/tools/helm:3.14\n"
     b"Error response from daemon: Head \"https://art.example.net/v2/tools/helm/manifests/3.14\": unknown: "
     b"Authentication is required\n",
     "config_error", "registry-credentials-refused", Action.NONE, {}),
    # --- B. randomizedtesting's suite time limit, with a JVM OutOfMemoryError of another task after it
    (b"com.example.index.MergePolicyTests > testForceMergeLarge FAILED\n"
     b"    java.lang.Exception: Test abandoned because suite timeout was reached.\n"
     b"        at __randomizedtesting.SeedInfo.seed([3C0FFEE12345ABCD]:0)\n\n"
     b"> Task :modules:analysis:internalClusterTest\n"
     b"Exception in thread \"Test worker\" java.lang.OutOfMemoryError: Java heap space\n",
     "timeout", "test-harness-timeout", Action.NONE, {}),
    # --- C. libpq refused by a database on a private (sibling container or CI service) address
    (b"django.db.utils.OperationalError: could not connect to server: Connection refused\n"
     b"\tIs the server running on host \"postgres\" (10.42.3.17) and accepting\n"
     b"\tTCP/IP connections on port 5433?\n",
     "build_error", "local-service-unavailable", Action.NONE, {}),
    (b"api_1  | psycopg2.OperationalError: could not connect to server: Connection refused\n"
     b"api_1  | \tIs the server running on host \"pg\" (192.168.96.4) and accepting\n",
     "build_error", "local-service-unavailable", Action.NONE, {}),
    # --- D. a corrupt loose object in the agent's reused repository
    (b"Fetching changes with git depth set to 20...\n"
     b"error: object file /builds/team/app/.git/objects/5c/" + HEX38 + b" is empty\n"
     b"fatal: loose object 5c" + HEX38 + b" (stored in /builds/team/app/.git/objects/5c/" + HEX38 + b") is corrupt\n",
     "infrastructure", "git-loose-object-corrupt", Action.RETRY, {}),
    (b"> git checkout -f 91ab3e2 # timeout=10\n"
     b"error: object file D:/agent/workspace/win-build/.git/objects/9a/" + HEX38 + b" is empty\n",
     "infrastructure", "git-loose-object-corrupt", Action.RETRY, {}),
    # --- E. the CA file GitLab Runner wrote for the job, unreadable
    (b"Fetching changes...\nfatal: unable to access 'https://gitlab-ci-token:[MASKED]@git.example.org/grp/svc.git/': "
     b"error setting certificate verify locations:\n"
     b"  CAfile: /builds/grp/svc.tmp/CI_SERVER_TLS_CA_FILE\n  CApath: none\n",
     "infrastructure", "runner-ca-file-unreadable", Action.RETRY, {}),
    # --- F. perl's own allocator failure
    (b"Reading repodata/primary.xml from the mirror...\nOut of memory!\n"
     b"make: *** [Makefile:88: repodata] Error 1\n",
     "oom", "perl-out-of-memory", Action.RESIZE, {}),
    (b"+ ./tools/gen-symbols.pl build/vmlinux.map\n"
     b"Out of memory during request for 262144 bytes, total sbrk() is 3221225472 bytes!\n",
     "oom", "perl-out-of-memory", Action.RESIZE, {}),
    # --- G. the GitHub Actions runner's low-disk warning, alone
    (b"Run ./gradlew :app:bundleRelease\n"
     b"You are running out of disk space. The runner will stop working when the machine runs out of disk space. "
     b"Free space left: 41 MB\n",
     "infrastructure", "runner-low-disk-warning", Action.RETRY, {}),
    # --- H. the GitHub REST API's own 5xx as octokit and PyGithub relay it
    (b"Run actions/github-script@v7\nRequestError [HttpError]: Server Error\n",
     "infrastructure", "github-api-server-error", Action.RETRY, {}),
    (b"Traceback (most recent call last):\n  File \"release.py\", line 40, in <module>\n"
     b"github.GithubException.GithubException: 503 {\"message\": \"Server Error\"}\n",
     "infrastructure", "github-api-server-error", Action.RETRY, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{i}-{p[2]}" for i, p in enumerate(POSITIVE)])
def test_fourteenth_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must NOT decide, family unless None, extra facts)
NEAR_MISSES = [
    # A: an application's own 'Authentication is required', no image pull or manifest on the line
    (b"Error: Authentication is required to access https://api.example.com/v1/reports\n",
     "registry-credentials-refused", None, {}),
    # A: an image pull refused by a registry outage stays the runner's (retry)
    (b"ERROR: Job failed: image pull failed: rpc error: code = Unknown desc = Get "
     b"https://registry.example.io/v2/base/manifests/1.0: received unexpected HTTP status: 503 Service Unavailable\n",
     "registry-credentials-refused", "infrastructure", {}),
    # B: a passing test about suite timeouts, then the job's own heap exhaustion
    (b"SuiteTimeoutTests > testTimeoutReported PASSED\n"
     b"Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space\n",
     "test-harness-timeout", "oom", {}),
    # C: libpq refused by a public address: a remote database, not a sibling container
    (b"psycopg2.OperationalError: could not connect to server: Connection refused\n"
     b"\tIs the server running on host \"db.example.com\" (203.0.113.9) and accepting\n"
     b"\tTCP/IP connections on port 5432?\n",
     "local-service-unavailable", "infrastructure", {}),
    # D: a tool's own empty file, not an object of a git repository
    (b"error: object file config/schema.json is empty\n", "git-loose-object-corrupt", None, {}),
    # E: the CA bundle path of the job's image (its configuration)
    (b"curl: (77) error setting certificate verify locations:\n  CAfile: /etc/ssl/certs/ca-bundle.crt\n"
     b"  CApath: none\n",
     "runner-ca-file-unreadable", "config_error", {}),
    # F: 'Out of memory!' inside a test's own description line
    (b"    [PASS] prints Out of memory! when malloc fails\n", "perl-out-of-memory", None, {}),
    # F: a perl test script named after the message, failing on an assertion
    (b"t/oom_message.t .. 3/5\n#   Failed test 'Out of memory! is printed'\nFailed 1/5 subtests\n",
     "perl-out-of-memory", None, {}),
    # G: a compile error decides even with the runner's low-disk warning printed after it
    (b"src/parse.c:12:5: error: unknown type name 'sizet'\nmake: *** [Makefile:20: all] Error 1\n"
     b"You are running out of disk space. The runner will stop working when the machine runs out of disk space. "
     b"Free space left: 88 MB\n",
     "runner-low-disk-warning", "build_error", {}),
    # H: the job's own service answering 500 (the reason phrase), not GitHub's API
    (b"AxiosError: Request failed with status code 500\nError: Internal Server Error\n",
     "github-api-server-error", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{i}-{n[1]}" for i, n in enumerate(NEAR_MISSES)])
def test_fourteenth_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)


# ------------------------------------------------------------------ traps stay right

@pytest.mark.parametrize("trace,extra", [
    # randomizedtesting's suite timeout with the OutOfMemoryError of another task in view: not resized
    (b"    java.lang.Exception: Test abandoned because suite timeout was reached.\n"
     b"Exception: java.lang.OutOfMemoryError thrown from the UncaughtExceptionHandler in thread \"worker-3\"\n", {}),
])
def test_fourteenth_pass_traps_are_never_resized(taxonomy, trace, extra):
    check_trap(taxonomy, trace, extra)


def test_fourteenth_pass_wasted_reruns_are_left_alone(taxonomy):
    """M's three wasted re-runs, by mechanism: a registry's refusal of missing credentials in an image pull
    (was: the runner's image-pull, retry), a suite time limit with an OutOfMemoryError of another task after
    it (was: resize), a database sibling container not up yet (was: network-error, retry)."""
    for trace in (
        b"ERROR: Job failed: image pull failed: rpc error: code = Unknown desc = Get "
        b"https://artifacts.example.org:5001/v2/ci/dotnet-sdk/manifests/8.0: unknown: Authentication is required\n",
        b"    java.lang.Exception: Test abandoned because suite timeout was reached.\n"
        b"Exception in thread \"pool-4-thread-2\" java.lang.OutOfMemoryError: GC overhead limit exceeded\n",
        b"E   sqlalchemy.exc.OperationalError: (psycopg2.OperationalError) could not connect to server: "
        b"Connection refused\nE   \tIs the server running on host \"testdb\" (172.19.0.2) and accepting\n",
    ):
        _, action = decided(trace, taxonomy)
        assert action == Action.NONE
