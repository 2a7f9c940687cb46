"""Issue 11, thirty-ninth pass: held-out ZP's and ZQ's misses (scored blind once after the thirty-eighth pass,
then read), generalised by mechanism (precision first) and per message source (each rule's description in
config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
repositories, paths and numbers than ZP's and ZQ's excerpts. Each mechanism has a positive, a near miss next to
it that must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Thirty-ninth pass", lists the mechanisms and the documented misses.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. shards reads shard.yml at a ref its mirror clone does not have: the same on every run
    (b"$ shards install --frozen\n"
     b"Resolving dependencies\n"
     b"Fetching https://gitlab.example.org/libs/kemal-session.git\n"
     b"Failed git ls-tree -r --full-tree --name-only release/2.x -- shard.yml (). "
     b"Maybe a commit, branch or file doesn't exist?\n",
     "config_error", "shards-git-ref-missing", Action.NONE, {}),
    (b"E: Failed git ls-tree -r --full-tree --name-only 3f9a2c17 -- shard.yml "
     b"(Not a valid object name 3f9a2c17).\n"
     b"Maybe a commit, branch or file doesn't exist?\n",
     "config_error", "shards-git-ref-missing", Action.NONE, {}),
    # --- B. the image has no manifest for the runner's platform: the same on every run on it
    (b"Using Docker executor with image arm64v8/postgres:15.4 ...\n"
     b"Pulling docker image arm64v8/postgres:15.4 ...\n"
     b"ERROR: Job failed: failed to pull image \"arm64v8/postgres:15.4\" with specified policies [always]: "
     b"no matching manifest for linux/amd64 in the manifest list entries (manager.go:251:0s)\n",
     "config_error", "image-platform-manifest-missing", Action.NONE, {}),
    (b"$ docker pull mcr.example.com/windows/servercore:ltsc2022\n"
     b"ltsc2022: Pulling from windows/servercore\n"
     b"no matching manifest for linux/arm64/v8 in the manifest list entries\n",
     "config_error", "image-platform-manifest-missing", Action.NONE, {}),
    # --- C. apk ignored a repository on a temporary error, then found no package: the index fetch was transient
    (b" ---> Running in 0b4e51d7a2c9\n"
     b"fetch https://mirror.example.net/alpine/v3.19/main/aarch64/APKINDEX.tar.gz\n"
     b"WARNING: Ignoring https://mirror.example.net/alpine/v3.19/main/aarch64/APKINDEX.tar.gz: "
     b"temporary error (try again later)\n"
     b"ERROR: unable to select packages:\n"
     b"  openssl-dev (no such package):\n"
     b"    required by: world[openssl-dev]\n",
     "infrastructure", "apk-repository-ignored-transient", Action.RETRY, {}),
    # --- D. ExUnit's own per-test time limit fired: a timeout, not a failed assertion
    (b"  3) test replays the journal after a crash (Ledger.JournalTest)\n"
     b"     test/ledger/journal_test.exs:58\n"
     b"     ** (ExUnit.TimeoutError) test timed out after 30000ms. You can change the timeout:\n"
     b"       1. per test by setting \"@tag timeout: x\" (accepts :infinity)\n",
     "timeout", "exunit-test-timeout", Action.NONE, {}),
    # --- E. Homebrew's GitHub client: the token from the environment was refused
    (b"==> brew bump-cask-pr --version 4.2.0 example-viewer\n"
     b"Error: GitHub API Error: Bad credentials\n"
     b"HOMEBREW_GITHUB_API_TOKEN may be invalid or expired; check:\n"
     b"  https://github.com/settings/tokens\n",
     "config_error", "homebrew-github-api-token-rejected", Action.NONE, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{p[2]}-{i}" for i, p in enumerate(POSITIVE)])
def test_thirty_ninth_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must not decide, family or None, extra facts)
NEAR_MISSES = [
    # A: a failed checkout into the install directory (a lock another process held), not the ref lookup
    (b"E: Failed git --work-tree=/srv/ci/build/lib/kemal-session checkout refs/tags/v0.14.2 -- . (). "
     b"Maybe a commit, branch or file doesn't exist?\n",
     "shards-git-ref-missing", None, {}),
    # B: the tag itself is not in the registry (another rule's config error, not a platform's)
    (b"ERROR: Job failed: failed to pull image \"registry.example.com/tools/builder:9.9\" with specified "
     b"policies [always]: Error response from daemon: manifest for registry.example.com/tools/builder:9.9 "
     b"not found: manifest unknown: manifest unknown (manager.go:251:0s)\n",
     "image-platform-manifest-missing", None, {}),
    # C: the index is not there at all (a wrong release), not a temporary error
    (b"WARNING: Ignoring https://mirror.example.net/alpine/v3.99/main: No such file or directory\n"
     b"ERROR: unable to select packages:\n"
     b"  openssl-dev (no such package):\n"
     b"    required by: world[openssl-dev]\n",
     "apk-repository-ignored-transient", None, {}),
    # C: the temporary error without the missing package it causes (apk went on with its other repositories)
    (b"WARNING: Ignoring https://mirror.example.net/alpine/v3.19/community: temporary error (try again later)\n"
     b"OK: 118 MiB in 64 packages\n"
     b"$ make check\n"
     b"FAIL: test_parser (exit status 1)\n",
     "apk-repository-ignored-transient", None, {}),
    # D: a GenServer call that timed out inside the code under test is not ExUnit's own limit
    (b"** (stop) exited in: GenServer.call(Ledger.Journal, {:replay, 12}, 5000)\n"
     b"    ** (EXIT) time out\n"
     b"    (elixir 1.16.2) lib/gen_server.ex:1114: GenServer.call/3\n",
     "exunit-test-timeout", None, {}),
    # E: the GitHub API's rate limit is not a refused token
    (b"Error: GitHub API Error: API rate limit exceeded for 203.0.113.17.\n"
     b"Try again in 41 minutes 12 seconds, or create a personal access token:\n",
     "homebrew-github-api-token-rejected", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{n[1]}-{i}" for i, n in enumerate(NEAR_MISSES)])
def test_thirty_ninth_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)
