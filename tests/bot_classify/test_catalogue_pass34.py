"""Issue 11, thirty-fourth pass: held-out ZH's and ZI's misses (scored blind once after the thirty-third pass, then
read), generalised by mechanism (precision first) and per message source (each rule's description in
config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
repositories, paths and numbers than ZH's and ZI's excerpts. Each mechanism has a positive, a near miss next to it
that must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Thirty-fourth pass", lists the mechanisms and the documented misses.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. gzip refuses an HTML page fetched from a GitHub blob URL (the file view, never the file)
    (b"$ wget -q https://github.com/acme-labs/toolchain-bins/blob/v2.3/dist/llvm-tools-2.3.tgz\n"
     b"$ tar xzf llvm-tools-2.3.tgz -C /opt\n"
     b"\n"
     b"gzip: stdin: not in gzip format\n"
     b"tar: Child returned status 1\n"
     b"tar: Error is not recoverable: exiting now\n",
     "config_error", "gzip-not-gzip-from-github-blob-page", Action.NONE, {}),
    (b"+ curl -sSo protoc.tar.gz \"https://github.com/example-org/protoc-dist/blob/main/protoc-3.9.0.tar.gz\"\n"
     b"+ gunzip protoc.tar.gz\n"
     b"\n"
     b"gzip: protoc.tar.gz: not in gzip format\n"
     b"ERROR: Job failed: exit code 1\n",
     "config_error", "gzip-not-gzip-from-github-blob-page", Action.NONE, {}),
    # --- B. the Boehm collector's heap-section table is full (a build-time limit, not the job's memory)
    (b"evaluating jobset release-combined.nix ...\n"
     b"Too many heap sections: Increase MAXHINCR or MAX_HEAP_SECTS\n"
     b"/builds/infra/nix-ci.tmp/script.sh: line 41:  2817 Aborted                 (core dumped) hydra-eval-jobs\n",
     "build_error", "bdwgc-too-many-heap-sections", Action.NONE, {}),
    (b"i7 : elapsedTime primaryDecomposition ideal(x^5*y-z^3, y^7-w^2*z)\n"
     b"Too many heap sections\n",
     "build_error", "bdwgc-too-many-heap-sections", Action.NONE, {}),
    # --- C. ghr's assets path is not there
    (b"$ ghr -t \"$GH_TOKEN\" -u example-corp -r widget-cli -replace v1.4.0 ./dist/\n"
     b"Failed to find assets from ./dist/: failed to get file stat: stat /builds/example-corp/widget-cli/dist: "
     b"no such file or directory\n"
     b"Cleaning up project directory and file based variables\n"
     b"ERROR: Job failed: exit code 10\n",
     "config_error", "ghr-assets-path-missing", Action.NONE, {}),
    (b"ghr -prerelease v0.9.2-rc1 /home/builder/project/out/packages\n"
     b"Failed to find assets from /home/builder/project/out/packages: failed to get file stat: stat "
     b"/home/builder/project/out/packages: no such file or directory\n",
     "config_error", "ghr-assets-path-missing", Action.NONE, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{p[2]}-{i}" for i, p in enumerate(POSITIVE)])
def test_thirty_fourth_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must not decide, family or None, extra facts)
NEAR_MISSES = [
    # A: gzip's line after a release asset (a mirror's error page or a broken upload): not read
    (b"$ curl -sSLo helm.tar.gz https://github.com/example-org/helm-dist/releases/download/v3.8.1/"
     b"helm-v3.8.1-linux-amd64.tar.gz\n"
     b"$ tar -xzf helm.tar.gz\n"
     b"\n"
     b"gzip: stdin: not in gzip format\n"
     b"tar: Child returned status 1\n"
     b"tar: Error is not recoverable: exiting now\n",
     "gzip-not-gzip-from-github-blob-page", None, {}),
    # A: a blob URL with ?raw=true redirects to the file itself: not the HTML view
    (b"$ curl -sSLo sdk.tgz https://github.com/acme-labs/sdk-bins/blob/main/sdk-7.1.tgz?raw=true\n"
     b"$ tar xzf sdk.tgz\n"
     b"\n"
     b"gzip: stdin: not in gzip format\n"
     b"tar: Child returned status 1\n",
     "gzip-not-gzip-from-github-blob-page", None, {}),
    # B: a Boehm heap that really ran out of memory is not the section table
    (b"GC Warning: Out of Memory! Heap size: 3812 MiB. Returning NULL!\n"
     b"error: out of memory\n",
     "bdwgc-too-many-heap-sections", None, {}),
    # C: ghr's GitHub-side failure is not the missing path
    (b"Failed to upload one of assets: failed to upload asset: /work/dist/widget_linux_amd64.tar.gz POST "
     b"https://uploads.github.com/repos/example-corp/widget-cli/releases/1234/assets: 502 Bad Gateway []\n",
     "ghr-assets-path-missing", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{n[1]}-{i}" for i, n in enumerate(NEAR_MISSES)])
def test_thirty_fourth_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)
