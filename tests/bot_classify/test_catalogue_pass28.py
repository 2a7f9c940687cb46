"""Issue 11, twenty-eighth pass: held-out ZB's misses (scored blind once after the twenty-seventh pass, then read),
generalised by mechanism (precision first) and per message source (each rule's description in
config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
repositories, paths and numbers than ZB's excerpts. Each mechanism has a positive, a near miss next to it that
must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Twenty-eighth pass", lists the mechanisms and the documented misses.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule, decided

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. maven-wagon 3.x's capitalised authorization catalogue (HttpMessageUtils.formatAuthorizationMessage)
    (b"[ERROR] Failed to execute goal on project billing-api: Could not resolve dependencies for project "
     b"com.example:billing-api:war:4.2.0: Failed to collect dependencies at org.acme:ledger-core:jar:2.7.1: "
     b"Failed to read artifact descriptor for org.acme:ledger-core:jar:2.7.1: Could not transfer artifact "
     b"org.acme:ledger-core:pom:2.7.1 from/to acme-private (https://nexus.acme.example/repository/releases/): "
     b"Authentication failed for https://nexus.acme.example/repository/releases/org/acme/ledger-core/2.7.1/"
     b"ledger-core-2.7.1.pom 401 Unauthorized -> [Help 1]\n",
     "config_error", "maven-wagon-auth-refused-capitalised", Action.NONE, {}),
    (b"[ERROR] Failed to execute goal org.apache.maven.plugins:maven-deploy-plugin:2.8.2:deploy (default-deploy) on "
     b"project widgets: Failed to deploy artifacts: Could not transfer artifact io.widgets:widgets:jar:0.3.1 from/to "
     b"staging (https://repo.widgets.example.org/staging): Authorization failed for "
     b"https://repo.widgets.example.org/staging/io/widgets/widgets/0.3.1/widgets-0.3.1.jar 403 Forbidden\n",
     "config_error", "maven-wagon-auth-refused-capitalised", Action.NONE, {}),
    # --- B. cabal-install's own OOM hint for a package build killed by signal 9
    (b"[12 of 88] Compiling Data.Vector.Fusion.Bundle.Monadic ( src/Data/Vector/Fusion/Bundle/Monadic.hs, "
     b"dist/build/Data/Vector/Fusion/Bundle/Monadic.o )\n"
     b"Failed to install vector-0.12.3.1\n"
     b"cabal: Error: some packages failed to install:\n"
     b"vector-0.12.3.1 failed during the building phase. The exception was:\n"
     b"ExitFailure 9\n"
     b"This may be due to an out-of-memory condition.\n",
     "oom", "cabal-install-oom-hint", Action.RESIZE, {}),
    # --- C. Koji's BuildrootError: mock could not create the buildroot before the package's build
    (b"HandlerFault: BuildrootError: could not init mock buildroot, mock exited with status 1; "
     b"see root.log for more information\n",
     "infrastructure", "koji-mock-buildroot-init", Action.RETRY, {}),
    # --- D. cabal-install's package index it cannot parse (a truncated or mid-sync index download)
    (b"Resolving dependencies...\n"
     b"cabal: internal error when reading package index: failed to parse .cabal file\n"
     b"The package index or index cache is probably corrupt. Running cabal update might fix it.\n",
     "infrastructure", "cabal-package-index-corrupt", Action.RETRY, {}),
    # --- E. (family) cargo-nextest's TERMINATING status for a test its slow-timeout ends
    (b"        SLOW [> 45.000s] (\xe2\x94\x80\xe2\x94\x80\xe2\x94\x80) storage-engine::compaction merges_overlapping_runs\n"
     b" TERMINATING [> 90.000s] (\xe2\x94\x80\xe2\x94\x80\xe2\x94\x80) storage-engine::compaction merges_overlapping_runs\n",
     "timeout", "nextest-terminating-slow-test", Action.NONE, {}),
    # --- F. (family) Travis's log-limit notice in bytes: the cause was cut from the log
    (b"Running 1812 examples...\n"
     b"The log length has exceeded the limit of 8388608 Bytes\n",
     "unknown", "travis-log-limit-bytes", Action.NONE, {}),
    # --- G. (family) botocore's NoCredentialsError as the AWS CLI prints it
    (b"$ aws s3 sync ./dist s3://releases.example.net/widgets/ --delete\n"
     b"fatal error: Unable to locate credentials\n",
     "config_error", "aws-cli-no-credentials", Action.NONE, {}),
    (b"$ aws ecr get-login-password --region eu-west-1\n"
     b"Unable to locate credentials. You can configure credentials by running \"aws configure\".\n",
     "config_error", "aws-cli-no-credentials", Action.NONE, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{i}-{p[2]}" for i, p in enumerate(POSITIVE)])
def test_twenty_eighth_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must not decide, family or None, extra facts)
NEAR_MISSES = [
    # A: the same catalogue's 5xx ('Transfer failed for URL 503') is the repository's fault, not read here
    (b"[ERROR] Failed to execute goal on project billing-api: Could not resolve dependencies for project "
     b"com.example:billing-api:war:4.2.0: Could not transfer artifact org.acme:ledger-core:pom:2.7.1 from/to "
     b"acme-private (https://nexus.acme.example/repository/releases/): Transfer failed for "
     b"https://nexus.acme.example/repository/releases/org/acme/ledger-core/2.7.1/ledger-core-2.7.1.pom "
     b"503 Service Unavailable\n",
     "maven-wagon-auth-refused-capitalised", None, {}),
    # A: an application's own log line in that wording without a status is not Maven's
    (b"WARN  c.e.auth.Gate - Authorization failed for https://api.example.com/v1/orders: token expired\n",
     "maven-wagon-auth-refused-capitalised", None, {}),
    # B: an ordinary failing build (ExitFailure 1, no hint) is not an OOM
    (b"vector-0.12.3.1 failed during the building phase. The exception was:\n"
     b"ExitFailure 1\n",
     "cabal-install-oom-hint", None, {}),
    # B: the sentence quoted inside a test's output is not cabal's hint at line start
    (b"    expected: \"This may be due to an out-of-memory condition.\"\n"
     b"     but got: \"\"\n",
     "cabal-install-oom-hint", None, {}),
    # C: Koji's package build failing in %build is the package's error, not the buildroot's
    (b"BuildError: error building package (arch x86_64), mock exited with status 1; see build.log for more "
     b"information\n",
     "koji-mock-buildroot-init", None, {}),
    # D: a project's own .cabal file that does not parse is the project's error
    (b"Error: cabal: Errors encountered when parsing cabal file ./widgets.cabal:\n"
     b"widgets.cabal:14:3: error:\n"
     b"unexpected 'build-depend'\n",
     "cabal-package-index-corrupt", None, {}),
    # E: nextest's SLOW status alone is a warning, not the termination
    (b"        SLOW [> 60.000s] (\xe2\x94\x80\xe2\x94\x80\xe2\x94\x80) storage-engine::compaction merges_overlapping_runs\n",
     "nextest-terminating-slow-test", None, {}),
    # F: a log that mentions a length limit in prose is not Travis's notice
    (b"error: The log length has exceeded the limit of 100 characters per line in src/main.rs\n",
     "travis-log-limit-bytes", None, {}),
    # G: an application's own credential error in other words is not botocore's
    (b"Error: Unable to locate credentials file ~/.config/widgets/creds.json\n",
     "aws-cli-no-credentials", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{i}-{p[1]}" for i, p in enumerate(NEAR_MISSES)])
def test_twenty_eighth_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)


def test_twenty_eighth_pass_documented_misses_keep_their_decisions(taxonomy):
    """Evidence left alone (docs/taxonomy.md, "Twenty-eighth pass"): a macOS shell's 'Killed: 9' for a validator's
    own SIGKILL stays an OOM kill (the same text is a linker's OOM kill in heldout-b; nothing in the log tells the
    two apart), and opam 1.x's bare '[ERROR] URL is not available' takes no rule (the same words follow a dead
    URL, a 404, as well as a host outage)."""
    v, act = decided(b"/Users/runner/work/_temp/1b2c.sh: line 5: 40412 Killed: 9               "
                     b"./build/Release/fuzz-driver --runs 500000\n"
                     b"Error: Process completed with exit code 137.\n", taxonomy, exit_code=137)
    assert act == Action.RESIZE, (v.rule, v.evidence)
    v, act = decided(b"[ERROR] http://downloads.example.org/src/libfoo-2.1.tar.gz is not available\n"
                     b"Could not get the source for libfoo.2.1.\n", taxonomy)
    # no rule reads it: at most the learned fallback names a family, and its verdicts do not act (config/policy.toml)
    assert v.rule.startswith("learned:") or v.family.value == "unknown", (v.rule, v.evidence)
    assert act == Action.NONE, (v.rule, v.evidence)
