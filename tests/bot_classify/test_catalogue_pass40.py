"""Issue 11, fortieth pass: held-out ZR's misses (scored blind once after the thirty-ninth pass, then read),
generalised by mechanism (precision first) and per message source (each rule's description in
config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
repositories, paths and numbers than ZR's excerpts. Each mechanism has a positive, a near miss next to
it that must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Fortieth pass", lists the mechanisms and the documented misses.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. Pulumi's plugin download answered 404 or 403: the server refused it, the same on every run
    (b"$ pulumi preview --stack staging\n"
     b"Diagnostics:\n"
     b"  pulumi:providers:acmedns (default_2_4_0):\n"
     b"    error: Could not automatically download and install resource plugin 'pulumi-resource-acmedns' at "
     b"version v2.4.0: error downloading provider acmedns to file: failed to download plugin: acmedns-2.4.0: "
     b"404 HTTP error fetching plugin from https://downloads.example.org/pulumi/acmedns/v2.4.0/"
     b"pulumi-resource-acmedns-v2.4.0-linux-arm64.tar.gz\n",
     "config_error", "pulumi-plugin-download-rejected", Action.NONE, {}),
    (b"[resource plugin netbox-0.9.1] installing\n"
     b"warning: Error downloading plugin: 403 HTTP error fetching plugin from "
     b"https://get.pulumi.com/releases/plugins/pulumi-resource-netbox-v0.9.1-linux-amd64.tar.gz\n"
     b"error: could not load plugin for netbox provider 'default_0_9_1'\n",
     "config_error", "pulumi-plugin-download-rejected", Action.NONE, {}),
    # --- B. ansible-galaxy: the Galaxy server (or its proxy) answered 502, 503 or 504: a re-run installs
    (b"$ ansible-galaxy collection install -r requirements.yml -p ./collections\n"
     b"Starting galaxy collection install process\n"
     b"Process install dependency map\n"
     b"ERROR! Error when getting collection version metadata for ansible.posix:1.5.4 from release_galaxy "
     b"(https://galaxy.example.net/api/) (HTTP Code: 503, Message: Service Unavailable Code: Unknown)\n",
     "infrastructure", "ansible-galaxy-server-5xx", Action.RETRY, {}),
    # --- C. Chromium's allocator could not get memory: the browser or renderer killed itself
    (b"  Running:  checkout/cart.spec.js                                                 (7 of 22)\n"
     b"[4187:0312/104455.219873:FATAL:memory.cc(37)] Out of memory. size=2097152\n"
     b"#0 0x55d0c2a1b3f9 base::debug::CollectStackTrace()\n",
     "oom", "chromium-base-out-of-memory", Action.RESIZE, {}),
    # --- D. Cypress: the browser's renderer process died, memory first among its causes in CI
    (b"  Running:  reports/export.cy.ts                                                  (3 of 9)\n"
     b"We detected that the Chrome Renderer process just crashed.\n"
     b"\n"
     b"We have failed the current spec but will continue running the next spec.\n"
     b"\n"
     b"This can happen for a number of different reasons.\n",
     "oom", "cypress-renderer-process-crashed", Action.RESIZE, {}),
    # --- E. Jasmine's own per-spec time limit fired: a timeout, not a failed expectation
    (b"Firefox Headless 115.0 (Linux x86_64) InvoiceListComponent loads the next page FAILED\n"
     b"\tError: Timeout - Async function did not complete within 20000ms (custom timeout)\n"
     b"\t    at <Jasmine>\n"
     b"Firefox Headless 115.0 (Linux x86_64): Executed 48 of 310 (1 FAILED) (0 secs / 21.7 secs)\n",
     "timeout", "jasmine-async-function-timeout", Action.NONE, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{p[2]}-{i}" for i, p in enumerate(POSITIVE)])
def test_fortieth_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must not decide, family or None, extra facts)
NEAR_MISSES = [
    # A: a 5xx from the plugin server is not a refusal (Pulumi retries those itself)
    (b"error: failed to download plugin: acmedns-2.4.0: 502 HTTP error fetching plugin from "
     b"https://downloads.example.org/pulumi/acmedns/v2.4.0/pulumi-resource-acmedns-v2.4.0-linux-arm64.tar.gz\n",
     "pulumi-plugin-download-rejected", None, {}),
    # A: a 403 from GitHub's API is its rate limit, not a missing plugin
    (b"error: could not find latest version for provider netbox: 403 HTTP error fetching plugin from "
     b"https://api.github.com/repos/example-org/pulumi-netbox/releases/latest\n",
     "pulumi-plugin-download-rejected", None, {}),
    # B: a 404 from Galaxy is a collection or version that does not exist
    (b"ERROR! Error when getting collection version metadata for ansible.posix:9.9.9 from release_galaxy "
     b"(https://galaxy.example.net/api/) (HTTP Code: 404, Message: Not found. Code: not_found)\n",
     "ansible-galaxy-server-5xx", None, {}),
    # C: a test that asserts on the message's text is not Chromium's FATAL line from memory.cc
    (b"  1) crash reporter parses an allocator failure:\n"
     b"     AssertionError: expected 'Out of memory. size=4096' to equal 'Out of memory. size=8192'\n"
     b"      at Context.<anonymous> (test/crash_report.spec.js:41:12)\n",
     "chromium-base-out-of-memory", None, {}),
    # D: the browser failing to start is not a renderer crash
    (b"Cypress failed to make a connection to the Chrome DevTools Protocol after retrying for 50 seconds.\n"
     b"This usually indicates there was a problem opening the Chrome browser.\n",
     "cypress-renderer-process-crashed", None, {}),
    # E: a project's own helper that words a time-out alike, without Jasmine's origin
    (b"Error: Timeout: Async function did not complete within 3000ms\n"
     b"    at promiseWithTimeout (src/util/timeout.ts:7:19)\n",
     "jasmine-async-function-timeout", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{n[1]}-{i}" for i, n in enumerate(NEAR_MISSES)])
def test_fortieth_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)
