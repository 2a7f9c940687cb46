"""Issue 11, thirty-seventh pass: held-out ZM's misses (scored blind once after the thirty-sixth pass, then read),
generalised by mechanism (precision first) and per message source (each rule's description in
config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
repositories, paths and numbers than ZM's excerpts. Each mechanism has a positive, a near miss next to it
that must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Thirty-seventh pass", lists the mechanisms and the documented misses.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. Hugo's WASM libwebp encoder ran out of its own linear memory: not the job's memory
    (b"$ hugo --minify --environment production\n"
     b"Start building sites \xe2\x80\xa6\n"
     b"WebPEncode failed: 1 (OUT_OF_MEMORY: Out of memory allocating objects)\n"
     b"ERROR error building site: render: failed to render pages: resize image \"gallery/harbour-0412.png\"\n",
     "build_error", "hugo-webp-encode-out-of-memory", Action.NONE, {}),
    (b"WebPEncode failed: 2 (BITSTREAM_OUT_OF_MEMORY: Out of memory re-allocating byte buffer)\n"
     b"Total in 48213 ms\n",
     "build_error", "hugo-webp-encode-out-of-memory", Action.NONE, {}),
    # --- B. an Azure service answered 403 through go-autorest: the CI identity lacks a role
    (b"Error: retrieving Key Vault \"kv-ci-westeu\": vaults.VaultsClient#Get: Failure responding to request: "
     b"StatusCode=403 -- Original Error: autorest/azure: Service returned an error. Status=403 "
     b"Code=\"AuthorizationPermissionMismatch\" Message=\"This request is not authorized to perform this operation\"\n",
     "config_error", "azure-autorest-service-returned-403", Action.NONE, {}),
    (b"  on modules/dns/main.tf line 14, in resource \"azurerm_dns_zone\" \"internal\":\n"
     b" dns.ZonesClient#CreateOrUpdate: Failure responding to request:\n"
     b" StatusCode=403 -- Original Error: autorest/azure: Service returned an error.\n"
     b"Status=403 Code=\"LinkedAuthorizationFailed\" Message=\"scope check failed\"\n",
     "config_error", "azure-autorest-service-returned-403", Action.NONE, {}),
    # --- C. GHC's runtime: the heap reached its -M limit, behind a test harness's prefix
    (b"    golden/Compile/Records.out:\n"
     b"stderr | liquidhaskell: Heap exhausted;\n"
     b"stderr | liquidhaskell: Current maximum heap size is 4294967296 bytes (4096 MB).\n"
     b"stderr | liquidhaskell: Use `+RTS -M<size>' to increase it.\n",
     "oom", "ghc-rts-current-maximum-heap-size", Action.RESIZE, {}),
    # --- D. LuaRocks could not fetch the default server's manifest: luarocks.org or the network
    (b"$ luarocks install --local busted 2.2.0\n"
     b"Warning: Failed searching manifest: Failed fetching manifest for https://luarocks.org - "
     b"Failed downloading https://luarocks.org/manifest-5.4 - /home/ci/.cache/luarocks/https___luarocks.org/manifest-5.4\n"
     b"Error: No results matching query were found for Lua 5.4.\n",
     "infrastructure", "luarocks-default-server-manifest-fetch-failed", Action.RETRY, {}),
    # --- E. snapcraft: the exported Snap Store login expired or was revoked
    (b"$ snapcraft upload --release=edge build/fleetd_3.1.0_arm64.snap\n"
     b"Exported credentials are no longer valid for the Snap Store.\n"
     b"Recommended resolution: Run export-login and update SNAPCRAFT_STORE_CREDENTIALS.\n",
     "config_error", "snapcraft-store-credentials-no-longer-valid", Action.NONE, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{p[2]}-{i}" for i, p in enumerate(POSITIVE)])
def test_thirty_seventh_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must not decide, family or None, extra facts)
NEAR_MISSES = [
    # A: another libwebp error (a picture too large) is not the memory failure
    (b"WebPEncode failed: 5 (BAD_DIMENSION: Bad picture dimension. Maximum width and height allowed is 16383 pixels.)\n",
     "hugo-webp-encode-out-of-memory", None, {}),
    # B: 'Failure sending request' got no answer (the network) and a 429 is throttling: neither is a 403
    (b"storage.AccountsClient#ListKeys: Failure sending request: StatusCode=0 -- Original Error: "
     b"context deadline exceeded\n",
     "azure-autorest-service-returned-403", None, {}),
    (b"compute.VirtualMachinesClient#Get: Failure responding to request: StatusCode=429 -- Original Error: "
     b"autorest/azure: Service returned an error. Status=429 Code=\"TooManyRequests\" Message=\"throttled\"\n",
     "azure-autorest-service-returned-403", None, {}),
    # C: a program's own sentence about its heap is not the RTS's line
    (b"INFO the current maximum heap size is 512 MB; raise it with -Xmx if the import is larger\n",
     "ghc-rts-current-maximum-heap-size", None, {}),
    # D: a project's own rocks server may be a wrong URL: not the default server
    (b"Warning: Failed searching manifest: Failed fetching manifest for https://rocks.example.org/dev - "
     b"Failed downloading https://rocks.example.org/dev/manifest - /tmp/luarocks_cache/manifest\n",
     "luarocks-default-server-manifest-fetch-failed", None, {}),
    # E: no login at all is another message
    (b"No keyring found to store or retrieve credentials from.\n"
     b"Recommended resolution: Ensure the keyring is working or SNAPCRAFT_STORE_CREDENTIALS is correctly exported "
     b"into the environment\n",
     "snapcraft-store-credentials-no-longer-valid", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{n[1]}-{i}" for i, n in enumerate(NEAR_MISSES)])
def test_thirty_seventh_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)
