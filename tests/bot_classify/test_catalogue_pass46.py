"""Issue 11, forty-sixth pass: held-out ZZC's and ZZD's misses (scored blind once after the forty-fifth pass,
then read), generalised by mechanism (precision first) and per message source (each rule's description in
config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
repositories, paths and numbers than ZZC's and ZZD's excerpts. Each mechanism has a positive, a near miss
next to it that must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Forty-sixth pass", lists the mechanisms and the documented misses.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. Ansible's connection plugin giving up on become's prompt: the play's time limit, not a transient fault
    (b"PLAY [db_servers] ***************************************************************\n"
     b"TASK [Install postgresql packages] **********************************************\n"
     b"fatal: [db3.staging.internal]: FAILED! => {\"msg\": \"Timeout (30s) waiting for privilege escalation prompt: \"}\n"
     b"PLAY RECAP **********************************************************************\n"
     b"db3.staging.internal       : ok=4    changed=0    unreachable=0    failed=1    skipped=0\n",
     "timeout", "ansible-become-prompt-timeout", Action.NONE, {}),
    # the SSH plugin's newer AnsibleConnectionFailure form, with the partial output after the colon
    (b"TASK [Gathering Facts] *********************************************************\n"
     b"fatal: [10.20.4.17]: UNREACHABLE! => {\"changed\": false, \"msg\": \"Timeout (10s) waiting for privilege "
     b"escalation prompt: Authorized use only\\r\\n\", \"unreachable\": true}\n",
     "timeout", "ansible-become-prompt-timeout", Action.NONE, {}),
    # --- B. RubyGems' fetcher timing out on a gem download: the gem server at that moment
    (b"Fetching gem metadata from https://rubygems.org/.........\n"
     b"Installing rack 2.2.3\n"
     b"Gem::RemoteFetcher::UnknownHostError: timed out (https://rubygems.org/gems/puma-5.6.4.gem)\n"
     b"An error occurred while installing puma (5.6.4), and Bundler cannot continue.\n",
     "infrastructure", "rubygems-remote-fetcher-timed-out", Action.RETRY, {}),
    # --- C. Composer 1: a content-addressed provider-include the root index listed answers 404 (mirror out of sync)
    (b"Loading composer repositories with package information\n"
     b"  [Composer\\Downloader\\TransportException]\n"
     b"  The \"https://repo.packagist.org/p/provider-2021-04%24" + b"3f" * 32 + b".json\" file could not be "
     b"downloaded (HTTP/1.1 404 Not Found)\n",
     "infrastructure", "composer-provider-include-404", Action.RETRY, {}),
    # --- D. Composer: packagist.org's own root index empty or truncated during an incident
    (b"$ composer install --no-interaction --prefer-dist\n"
     b"\"https://repo.packagist.org/packages.json\" does not contain valid JSON\n"
     b"Parse error on line 1:\n"
     b"{\"packages\":[],\"notify\n"
     b"^\n",
     "infrastructure", "composer-packagist-root-index-invalid-json", Action.RETRY, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{p[2]}-{i}" for i, p in enumerate(POSITIVE)])
def test_forty_sixth_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must not decide, family or None, extra facts)
NEAR_MISSES = [
    # A: Ansible's SSH connection itself timing out is not the become prompt's limit
    (b"fatal: [web7.prod.example]: UNREACHABLE! => {\"changed\": false, \"msg\": \"Failed to connect to the host "
     b"via ssh: ssh: connect to host web7.prod.example port 22: Connection timed out\", \"unreachable\": true}\n",
     "ansible-become-prompt-timeout", None, {}),
    # B: the same class's 'no such name' (a getaddrinfo failure, possibly a wrong source host) is not taken
    (b"Gem::RemoteFetcher::UnknownHostError: no such name (https://gems.internal.example/quick/Marshal.4.8/"
     b"rake-13.0.6.gemspec.rz)\n",
     "rubygems-remote-fetcher-timed-out", None, {}),
    # C: a 404 for a package's own metadata (Composer 2's p2 file of a package that does not exist)
    (b"  The \"https://repo.packagist.org/p2/acme-internal/billing-sdk.json\" file could not be downloaded "
     b"(HTTP/2 404 )\n",
     "composer-provider-include-404", None, {}),
    # D: a project's own composer.json that is not valid JSON: deterministic
    (b"\"./composer.json\" does not contain valid JSON\n"
     b"Parse error on line 14:\n"
     b"...\"php\": \">=8.1\",    },    \"autoload\n"
     b"---------------------^\n",
     "composer-packagist-root-index-invalid-json", None, {}),
    # D: a private repository's index answering HTML is the repository's configuration, not packagist's incident
    (b"\"https://satis.corp.example/packages.json\" does not contain valid JSON\n"
     b"Parse error on line 1:\n"
     b"<!DOCTYPE html><html\n"
     b"^\n",
     "composer-packagist-root-index-invalid-json", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{n[1]}-{i}" for i, n in enumerate(NEAR_MISSES)])
def test_forty_sixth_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)
