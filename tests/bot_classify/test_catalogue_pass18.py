"""Issue 11, eighteenth pass: held-out R's misses (scored blind once after the seventeenth pass, then read),
generalised by mechanism (precision first) and per message source (each rule's description in
config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
ports, paths and numbers than R's excerpts. Each mechanism has a positive, a near miss next to it that
must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Eighteenth pass", lists the mechanisms.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule, decided

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. an Erlang/Elixir client refused by the job's own service on this host (inet's lower-case atom)
    (b"12:00:01.004 [error] Redix.Connection (#PID<0.311.0>) failed to connect to Redis (127.0.0.1:6379): "
     b"connection refused - :econnrefused\n** (Mix) The task \"test\" failed\n",
     "build_error", "local-service-refused-erlang", Action.NONE, {}),
    (b"** (DBConnection.ConnectionError) tcp connect (localhost:3306): connection refused - :econnrefused\n"
     b"    (db_connection 2.6.0) lib/db_connection/connection.ex:100: DBConnection.Connection.connect/2\n"
     b"##[error]Process completed with exit code 1.\n",
     "build_error", "local-service-refused-erlang", Action.NONE, {}),
    (b"=ERROR REPORT==== 3-Mar-2025::10:11:12.131 ===\nemqx_client connect to [::1]:1883 failed: "
     b"{error,econnrefused}\n",
     "build_error", "local-service-refused-erlang", Action.NONE, {}),
    # --- B. Jenkins could not create a launcher: the agent's channel is not (or no longer) there
    (b"[Pipeline] sh\n08:15:44  ERROR: Issue with creating launcher for agent build-arm64-07. The agent has not "
     b"been fully initialized yet\n[Pipeline] }\n[Pipeline] // node\njava.io.EOFException\n",
     "infrastructure", "jenkins-agent-launcher-unavailable", Action.RETRY, {}),
    (b"ERROR: Issue with creating launcher for agent k8s-pod-x7q2. Computer has been disconnected\n",
     "infrastructure", "jenkins-agent-launcher-unavailable", Action.RETRY, {}),
    # --- C. the Gradle daemon's own expiry line (heap, Tenured, Metaspace)
    (b"> Task :app:mergeDexRelease\nFAILURE: Build failed with an exception.\n\nBUILD FAILED in 3m 12s\n"
     b"2024-05-06T07:08:09.123Z [WARN] Expiring Daemon because JVM heap space is exhausted\n",
     "oom", "gradle-daemon-expiring-memory", Action.RESIZE, {}),
    (b"Expiring Daemon because JVM Tenured space is exhausted\nBUILD FAILED\n",
     "oom", "gradle-daemon-expiring-memory", Action.RESIZE, {}),
    (b"Expiring Daemon due to JVM Metaspace space being exhausted\n",
     "oom", "gradle-daemon-expiring-memory", Action.RESIZE, {}),
    # --- D. the kernel OOM killer's task table as dmesg prints it (new and pre-4.19 headers)
    (b"[ 8812.100201] Tasks state (memory values in pages):\n"
     b"[ 8812.100202] [  pid  ]   uid  tgid total_vm      rss pgtables_bytes swapents oom_score_adj name\n"
     b"[ 8812.100210] [   3121]  1001  3121  2210331   901122  8112128        0             0 node\n",
     "oom", "kernel-oom-task-dump", Action.RESIZE, {}),
    (b"Jul  9 01:02:03 ci-node-4 kernel: [ pid ]   uid  tgid total_vm      rss nr_ptes nr_pmds swapents "
     b"oom_score_adj name\nJul  9 01:02:03 ci-node-4 kernel: [  612]     0   612    11012     1220      23       "
     b"3        0             0 sshd\n",
     "oom", "kernel-oom-task-dump", Action.RESIZE, {}),
    # --- E. Jenkins' git plugin fetching from an unexpanded variable
    (b" > git config remote.origin.url $REPO_URL # timeout=10\nFetching upstream changes from $REPO_URL\n"
     b"ERROR: Error cloning remote repo 'origin'\n"
     b"hudson.plugins.git.GitException: Failed to fetch from $REPO_URL\n"
     b"\tat hudson.plugins.git.GitSCM.fetchFrom(GitSCM.java:999)\n",
     "config_error", "jenkins-scm-unexpanded-variable", Action.NONE, {}),
    (b"ERROR: Error fetching remote repo '${upstreamRemote}'\n"
     b"hudson.plugins.git.GitException: Failed to fetch from ${upstreamUrl}\n",
     "config_error", "jenkins-scm-unexpanded-variable", Action.NONE, {}),
    # --- F. git without the program for the URL's transport (git-remote-https missing)
    (b"ERROR: Error cloning remote repo 'origin'\nhudson.plugins.git.GitException: Command \"git fetch --tags "
     b"--progress -- https://git.example.org/acme/tools.git +refs/heads/*:refs/remotes/origin/*\" returned status "
     b"code 128:\nstdout: \nstderr: fatal: unable to find remote helper for 'https'\n",
     "config_error", "git-remote-helper-missing", Action.NONE, {}),
    (b"Cloning into 'vendor/lib'...\nfatal: Unable to find remote helper for 'hg'\n",
     "config_error", "git-remote-helper-missing", Action.NONE, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{i}-{p[2]}" for i, p in enumerate(POSITIVE)])
def test_eighteenth_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must NOT decide, family unless None, extra facts)
NEAR_MISSES = [
    # A: a remote host's refusal stays the network's (retried), in Erlang's words too
    (b"** (Mix) Could not fetch: tcp connect (repo.hex.pm:443): connection refused - :econnrefused\n",
     "local-service-refused-erlang", None, {}),
    # A: the word in a test's name, with no refusal by a local port
    (b"test handles :econnrefused from the pool (MyApp.PoolTest)\n  Assertion with == failed\n",
     "local-service-refused-erlang", None, {}),
    # B: Jenkins' launcher words without the agent-connection reason
    (b"ERROR: Issue with creating launcher for the release job: see the console of the previous stage\n",
     "jenkins-agent-launcher-unavailable", None, {}),
    # C: Gradle's other daemon lifecycle lines are not memory
    (b"Expiring Daemon because JVM garbage collector is idle\nDaemon will be stopped at the end of the build "
     b"stopping after processing\n",
     "gradle-daemon-expiring-memory", None, {}),
    (b"Daemon will be stopped at the end of the build after being idle for 180 minutes\n",
     "gradle-daemon-expiring-memory", None, {}),
    # D: the header quoted inside a string (a parser test's fixture) is data, not the kernel
    (b"    input = \"[  pid  ]   uid  tgid total_vm      rss pgtables_bytes swapents oom_score_adj name\"\n"
     b"FAIL: TestParseDmesg (0.00s)\n",
     "kernel-oom-task-dump", None, {}),
    # E: a fetch from a real URL that failed keeps the generic Jenkins rule (infrastructure)
    (b"ERROR: Error fetching remote repo 'origin'\n"
     b"hudson.plugins.git.GitException: Failed to fetch from https://git.example.org/acme/app.git\n",
     "jenkins-scm-unexpanded-variable", "infrastructure", {}),
    # F: git's other transport failures are not a missing helper
    (b"fatal: unable to access 'https://git.example.org/acme/app.git/': Could not resolve host: git.example.org\n",
     "git-remote-helper-missing", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{i}-{p[1]}" for i, p in enumerate(NEAR_MISSES)])
def test_eighteenth_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)


def test_eighteenth_pass_remote_refusal_is_still_retried(taxonomy):
    """Precision of A in the other direction: the Erlang rule reads only this host's addresses, so a
    registry's refused connection keeps its retry."""
    v, act = decided(b"** (Mix) Could not fetch: tcp connect (repo.hex.pm:443): connection refused - :econnrefused\n",
                     taxonomy)
    assert v.rule != "local-service-refused-erlang" and act == Action.RETRY, (v.rule, v.evidence)


def test_eighteenth_pass_documented_misses_keep_their_decisions(taxonomy):
    """Identical texts that carry opposite causes across splits stay as they were (docs/taxonomy.md,
    "Eighteenth pass"): GitHub's bare runner shutdown is retried (labelled OOM in four threads and
    infrastructure in four others), and the job's docker client without a daemon is configuration."""
    v, act = decided(b"##[error]The runner has received a shutdown signal. This can happen when the runner service "
                     b"is stopped, or a manually started runner is canceled.\n##[error]The operation was canceled.\n",
                     taxonomy)
    assert act == Action.RETRY and v.rule == "runner-shutdown", (v.rule, v.evidence)
    v, act = decided(b"Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon "
                     b"running?\n", taxonomy)
    assert act == Action.NONE and v.family.value == "config_error", (v.rule, v.evidence)
