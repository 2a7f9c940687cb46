"""Issue 11, forty-ninth pass: held-out ZZI's and ZZJ's misses (scored blind once after the forty-eighth pass,
then read), generalised by mechanism (precision first) and per message source (each rule's description in
config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
repositories, paths and numbers than ZZI's and ZZJ's excerpts. Each mechanism has a positive, a near miss
next to it that must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Forty-ninth pass", lists the mechanisms and the documented misses.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. tlmgr's critical packages are older than the repository's: every install refuses
    (b"$ tlmgr install biblatex biber csquotes\n"
     b"tlmgr: package repository https://ctan.math.example.edu/tex-archive/systems/texlive/tlnet (verified)\n"
     b"===============================================================================\n"
     b"tlmgr itself needs to be updated.\n"
     b"Please do this via either\n"
     b"  tlmgr update --self\n"
     b"or by getting the latest updater for Unix-ish systems:\n"
     b"  https://ctan.math.example.edu/tex-archive/systems/texlive/tlnet/update-tlmgr-latest.sh\n"
     b"Then continue with other updates as usual.\n"
     b"===============================================================================\n"
     b"tlmgr: Terminating; please see warning above!\n"
     b"ERROR: Job failed: exit code 1\n",
     "config_error", "tlmgr-critical-self-update-required", Action.NONE, {}),
    # an update --all in a Kaniko build step, the step's prefix before the warning
    (b"INFO[0042] RUN tlmgr update --all\n"
     b"[build] tlmgr itself needs to be updated.\n"
     b"[build] Please do this via either\n"
     b"[build]   tlmgr update --self\n"
     b"error building image: error building stage: failed to execute command: waiting for process to exit: "
     b"exit status 1\n",
     "config_error", "tlmgr-critical-self-update-required", Action.NONE, {}),
    # --- B. Bazel's downloader: the archive's bytes are not the pinned checksum
    (b"INFO: Repository zlib instantiated at:\n"
     b"  /builds/media/encoder/WORKSPACE:41:13: in <toplevel>\n"
     b"ERROR: An error occurred during the fetch of repository 'zlib':\n"
     b"java.io.IOException: Error downloading [https://zlib.example.org/fossils/zlib-1.2.13.tar.gz] to "
     b"/root/.cache/bazel/_bazel_root/5f0c2d1e/external/zlib/temp9182736450/zlib-1.2.13.tar.gz: Checksum was "
     b"b3a24de97a8fdbc835b9833169501030b8977031bcb54b3b3ac13740f846ab30 but wanted "
     b"d14c38e313afc35a9a8760dadf26042f51ea0f5d154b0630a31da0540107fb98\n"
     b"ERROR: no such package '@zlib//': Error downloading\n",
     "build_error", "bazel-download-checksum-was-but-wanted", Action.NONE, {}),
    # an integrity attribute (SRI form), Bzlmod's registry file
    (b"ERROR: Error computing the main repository mapping: Failed to fetch registry file "
     b"https://bcr.example.com/modules/abseil-cpp/20240116.2/MODULE.bazel: Checksum was "
     b"sha256-Xk3oqLmS0pYv7t0f2bQh9Zc4uN1eW8rJdA5gHs6KpTI= but wanted "
     b"sha256-9PWqM2nLxYc1RfEtB7dVo4KsHj3uZaGi0w8Nr5TyXbQ=\n",
     "build_error", "bazel-download-checksum-was-but-wanted", Action.NONE, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{p[2]}-{i}" for i, p in enumerate(POSITIVE)])
def test_forty_ninth_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must not decide, family or None, extra facts)
NEAR_MISSES = [
    # A: the cross-release refusal is another message, not read here
    (b"tlmgr: Local TeX Live (2023) is older than remote repository (2025).\n"
     b"Cross release updates are only supported with\n"
     b"  update-tlmgr-latest(.sh/.exe) --update\n",
     "tlmgr-critical-self-update-required", None, {}),
    # A: a script's echo quoting the words mid-sentence is not tlmgr's warning line
    (b"note: if you see 'tlmgr itself needs to be updated.' run the self-update first, then rerun\n"
     b"make: *** [Makefile:12: pdf] Error 2\n",
     "tlmgr-critical-self-update-required", None, {}),
    # B: a truncated transfer is the content-length check, not a checksum
    (b"ERROR: An error occurred during the fetch of repository 'boringssl':\n"
     b"java.io.IOException: Error downloading [https://mirror.example.net/boringssl-0aa1.tar.gz] to "
     b"/home/ci/.cache/bazel/external/boringssl/temp771/boringssl-0aa1.tar.gz: Bytes read 1048576 but wanted "
     b"8388608\n",
     "bazel-download-checksum-was-but-wanted", None, {}),
    # B: a tool's own wording with no digests after it
    (b"verify: Checksum was not computed for artifact protobuf-java-3.25.1.jar; skipping\n",
     "bazel-download-checksum-was-but-wanted", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{n[1]}-{i}" for i, n in enumerate(NEAR_MISSES)])
def test_forty_ninth_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)
