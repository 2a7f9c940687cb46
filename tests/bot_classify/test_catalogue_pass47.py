"""Issue 11, forty-seventh pass: held-out ZZE's and ZZF's misses (scored blind once after the forty-sixth pass,
then read), generalised by mechanism (precision first) and per message source (each rule's description in
config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
repositories, paths and numbers than ZZE's and ZZF's excerpts. Each mechanism has a positive, a near miss
next to it that must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Forty-seventh pass", lists the mechanisms and the documented misses.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. Vite's production build: Rollup could not resolve a module specifier (deterministic, not DNS)
    (b"> vite build --mode production\n"
     b"vite v5.2.11 building for production...\n"
     b"transforming (212) src/pages/Checkout.tsx\n"
     b"[vite]: Rollup failed to resolve import \"@acme/design-tokens/colors\" from "
     b"\"/builds/shop/web/src/pages/Checkout.tsx\".\n"
     b"This is most likely unintended because it can break your application at runtime.\n"
     b"If you do want to externalize this module explicitly add it to\n"
     b"`build.rollupOptions.external`\n"
     b"error during build:\n",
     "build_error", "vite-rollup-unresolved-import", Action.NONE, {}),
    # the thrown Error's own line, a virtual importer id, stack frames after it
    (b"error during build:\n"
     b"Error: [vite]: Rollup failed to resolve import \"sveltekit-flash/client\" from \"virtual:entry/app.js\".\n"
     b"    at onwarn (file:///srv/app/node_modules/vite/dist/node/chunks/dep-1a2b3c.js:48110:19)\n",
     "build_error", "vite-rollup-unresolved-import", Action.NONE, {}),
    # --- B. Karma: the captured browser sent nothing within browserNoActivityTimeout (the run's own limit)
    (b"05 03 2023 09:14:22.101:INFO [karma-server]: Karma v6.4.1 server started at http://localhost:9877/\n"
     b"05 03 2023 09:14:22.104:INFO [launcher]: Starting browser FirefoxHeadless\n"
     b"05 03 2023 09:14:30.551:INFO [Firefox 110.0 (Linux x86_64)]: Connected on socket Zq81 with id 7731\n"
     b"05 03 2023 09:15:30.560:WARN [Firefox 110.0 (Linux x86_64)]: Disconnected (0 times) , because no "
     b"message in 60000 ms.\n"
     b"Firefox 110.0 (Linux x86_64) ERROR\n"
     b"  Disconnected , because no message in 60000 ms.\n",
     "timeout", "karma-browser-no-activity-timeout", Action.NONE, {}),
    # the older wording without the space before the comma
    (b"HeadlessChrome 79.0.3945 (Mac OS X 10.14.6) ERROR\n"
     b"  Disconnected, because no message in 30000 ms.\n",
     "timeout", "karma-browser-no-activity-timeout", Action.NONE, {}),
    # --- C. The JDK's array-growth helper: a length past 2^31-1 (the program's design, not the heap)
    (b"> Task :report:generateSite\n"
     b"Exception in thread \"main\" java.lang.OutOfMemoryError: Required array length 2147483639 + 412 is too "
     b"large\n"
     b"\tat java.base/jdk.internal.util.ArraysSupport.hugeLength(ArraysSupport.java:752)\n"
     b"\tat java.base/java.io.ByteArrayOutputStream.ensureCapacity(ByteArrayOutputStream.java:100)\n",
     "build_error", "jvm-array-length-overflow-oom", Action.NONE, {}),
    # JDK 11's shorter message
    (b"[error] java.lang.OutOfMemoryError: Required array length too large\n"
     b"[error] \tat java.base/jdk.internal.util.ArraysSupport.hugeLength(ArraysSupport.java:613)\n",
     "build_error", "jvm-array-length-overflow-oom", Action.NONE, {}),
    # --- D. setup-zig: every mirror tried, then ziglang.org answers 404 for the tarball (no such version there)
    (b"Run mlugg/setup-zig@v1\n"
     b"Fetching zig-linux-aarch64-0.16.3.tar.xz\n"
     b"Attempting mirror: https://zig.mirror.example.org/zig\n"
     b"Mirror failed with error: Error: Unexpected HTTP response: 502\n"
     b"Attempting mirror: https://mirrors.example.net/ziglang\n"
     b"Mirror failed with error: Error: Unexpected HTTP response: 404\n"
     b"Attempting official: https://ziglang.org/download/0.16.3\n"
     b"Error: Unexpected HTTP response: 404\n",
     "config_error", "setup-zig-official-download-404", Action.NONE, {}),
    # --- E. Apache Ivy (sbt 0.13, Ant): a connection reset mid-download from a repository
    (b"[info] Resolving com.typesafe.akka#akka-actor_2.11;2.4.20 ...\n"
     b"[warn] \t[FAILED     ] com.typesafe.akka#akka-actor_2.11;2.4.20!akka-actor_2.11.jar: Connection reset "
     b"(12873ms)\n"
     b"[warn] ==== public: tried\n",
     "infrastructure", "ivy-download-connection-reset", Action.RETRY, {}),
    (b":: problems summary ::\n"
     b":::: ERRORS\n"
     b"\tServer access Error: Connection reset url=https://jcenter.example.com/libs-release/org/slf4j/slf4j-api/"
     b"1.7.25/slf4j-api-1.7.25.pom\n",
     "infrastructure", "ivy-download-connection-reset", Action.RETRY, {}),
    # Ivy since 2012: the exception class in parentheses
    (b"[ivy:retrieve] \tServer access error at url https://repo.example.org/maven2/junit/junit/4.13.2/junit-4.13.2.jar "
     b"(java.net.SocketException: Connection reset)\n",
     "infrastructure", "ivy-download-connection-reset", Action.RETRY, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{p[2]}-{i}" for i, p in enumerate(POSITIVE)])
def test_forty_seventh_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must not decide, family or None, extra facts)
NEAR_MISSES = [
    # A: a real name-resolution failure in the same kind of build stays dns-error's
    (b"> vite build\n"
     b"Error: getaddrinfo ENOTFOUND fonts.example-cdn.com\n",
     "vite-rollup-unresolved-import", "infrastructure", {}),
    # B: a browser that crashed is not the no-activity limit
    (b"Chrome Headless 120.0.6099.71 (Linux x86_64) ERROR\n"
     b"  Disconnected Client disconnected from CONNECTED state (transport close)\n",
     "karma-browser-no-activity-timeout", None, {}),
    # C: a real heap exhaustion stays runtime-heap-exhausted's (oom, resize)
    (b"Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space\n"
     b"\tat java.base/java.util.Arrays.copyOf(Arrays.java:3537)\n",
     "jvm-array-length-overflow-oom", "oom", {}),
    # D: the official site's 5xx after the mirrors is a service fault (actions-toolkit-retries-exhausted)
    (b"Attempting mirror: https://zig.mirror.example.org/zig\n"
     b"Mirror failed with error: Error: Unexpected HTTP response: 503\n"
     b"Attempting official: https://ziglang.org/builds\n"
     b"Error: Unexpected HTTP response: 503\n",
     "setup-zig-official-download-404", "infrastructure", {}),
    # D: another action's 404 (setup-go's version that does not exist) without setup-zig's official attempt
    (b"Run actions/setup-go@v5\n"
     b"Error: Unexpected HTTP response: 404\n",
     "setup-zig-official-download-404", None, {}),
    # E: Ivy's artifact that is simply not there is not a reset
    (b"[warn] \t[NOT FOUND  ] org.example#widgets;3.1.4!widgets.jar (211ms)\n"
     b"[warn] ==== local: tried\n",
     "ivy-download-connection-reset", None, {}),
    # E: a server error status in Ivy's access error is not a reset
    (b"\tServer access Error: Server returned HTTP response code: 401 for URL: https://nexus.example.com/repo/a.pom "
     b"url=https://nexus.example.com/repo/a.pom\n",
     "ivy-download-connection-reset", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{n[1]}-{i}" for i, n in enumerate(NEAR_MISSES)])
def test_forty_seventh_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)
