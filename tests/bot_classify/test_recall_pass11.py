"""Issue 11, eleventh pass (recall): transient faults and OOM kills the classifier missed, fixed by mechanism.

Each case of FIXED is a transient infrastructure failure or an OOM kill that the shipped policy left alone
before this pass, rewritten from the tool's own output format (other tools, hosts, paths and numbers than
the recall probes in /work/rt-probes/recall.py); each case of NEAR is the deterministic failure next to it
(a 4xx, exit code 1, SIGTERM, an absurd allocation, no transient cause in the window), which must not be
retried or resized.  docs/taxonomy.md, "Eleventh pass: recall", lists the mechanisms.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import decided

SCRIPT = b"section_start:1720000000:step_script\r\x1b[0KExecuting \"step_script\" stage of the job script\n"
END = b"section_end:1720000300:step_script\r\x1b[0K\n"


def _job(cmd: str, body: str, code: int = 1) -> bytes:
    return (SCRIPT + f"\x1b[32;1m$ {cmd}\x1b[0;m\n".encode() + body.encode() + END
            + f"ERROR: Job failed: exit code {code}\n".encode())


INFRA, OOM = ("infrastructure", Action.RETRY), ("oom", Action.RESIZE)

# (id, trace, (family, action), exit code)
FIXED = [
    # A. 5xx / 429 in more clients' formats (reqwest, libmamba, got, cargo's registry, gcloud, Azure, OCI)
    ("A-reqwest-503", _job("uv pip sync requirements.lock",
                           "error: Failed to download `numpy==2.0.1`\n  Caused by: HTTP status server error (520 <unknown "
                           "status code>) for url (https://pypi.internal.example/simple/numpy/)\n", 2), INFRA, 2),
    ("A-libmamba-504", _job("mamba env update -f ci/env.yaml",
                            "error    libmamba Transfer finalized, status: 504 [https://conda.example.org/bioconda/noarch/"
                            "repodata.json] 812 bytes\ncritical libmamba Multiple errors occurred:\n"), INFRA, 1),
    ("A-got-yarn-502", _job("yarn install --immutable",
                            "➤ YN0001: │ RequestError: Response code 502 (Bad Gateway)\n    at ClientRequest.<anonymous> "
                            "(/builds/web/.yarn/releases/yarn-3.6.4.cjs:195:14118)\n➤ YN0000: · Failed with errors in 8s\n"),
     INFRA, 1),
    ("A-cargo-index-500", _job("cargo build --locked",
                               "error: failed to get `tokio` as a dependency of package `svc v0.3.0 (/builds/svc)`\n\nCaused by:\n"
                               "  failed to get successful HTTP response from `https://index.crates.io/to/ki/tokio` (151.101.1.1),"
                               " got 500\n  body:\n  Internal Server Error\n", 101), INFRA, 101),
    ("A-gcloud-429", _job("gcloud run deploy api --image $IMAGE --region us-central1",
                          "ERROR: (gcloud.run.deploy) ResponseError: code=429, message=Quota exceeded for quota metric "
                          "'Write requests'\n"), INFRA, 1),
    ("A-azure-arm-503", _job("az deployment group create -g ci -f main.bicep",
                             "ERROR: (ServiceUnavailable) The server (leader) is currently unable to handle the request.\n"
                             "Code: ServiceUnavailable\n"), INFRA, 1),
    ("A-azure-storage-timeout", _job("az storage blob download -c cache -n deps.tgz -f deps.tgz",
                                     "ERROR: Operation could not be completed within the specified time.\n"
                                     "ErrorCode:OperationTimedOut\n"), INFRA, 1),
    ("A-oci-toomanyrequests", _job("crane digest docker.io/library/nginx:1.27",
                                   "Error: fetching manifest docker.io/library/nginx:1.27: GET https://index.docker.io/v2/"
                                   "library/nginx/manifests/1.27: TOOMANYREQUESTS: retry-after: 812.17µs, allowed: 44000/minute\n"),
     INFRA, 1),
    # B. connection cut in more tools' own words
    ("B-httpcore-truncated", _job("mvn -B -U package",
                                  "[ERROR] Failed to execute goal on project web: Could not resolve dependencies: "
                                  "org.apache.commons:commons-lang3:jar:3.14.0 was not found\n"
                                  "Caused by: org.apache.hc.core5.http.ConnectionClosedException: Premature end of "
                                  "Content-Length delimited message body (expected: 658,022; received: 131,072)\n"), INFRA, 1),
    ("B-cpanm-retry", _job("cpanm -n --installdeps .",
                           "--> Working on DBI\nFetching https://cpan.metacpan.org/authors/id/T/TI/TIMB/DBI-1.643.tar.gz ... "
                           "FAIL\n! Download https://cpan.metacpan.org/authors/id/T/TI/TIMB/DBI-1.643.tar.gz failed. "
                           "Retrying ...\n! Couldn't find module or a distribution DBI\n"), INFRA, 1),
    ("B-pacman-curl", _job("pacman -S --noconfirm cmake",
                           "error: failed retrieving file 'cmake-3.30.2-1-x86_64.pkg.tar.zst' from mirror.example.de : "
                           "Resolving timed out after 10000 milliseconds\nerror: failed to commit transaction (failed to "
                           "retrieve some files)\n"), INFRA, 1),
    ("B-anyhow-timeout", _job("uv sync",
                              "error: Failed to fetch: `https://files.example.org/wheels/torch-2.3.0-cp312-linux_x86_64.whl`"
                              "\n  Caused by: Request failed after 3 retries\n  Caused by: operation timed out\n", 2),
     INFRA, 2),
    ("B-containers-image-eof", _job("skopeo copy docker-archive:img.tar docker://registry.example.net/team/img:7",
                                    "Copying blob 2b9f8e0d1a1c [=====>------] 18.0MiB / 61.2MiB\ntime=\"2026-11-24T09:00:00Z\" "
                                    "level=fatal msg=\"writing blob: uploading layer to https://registry.example.net/v2/team/"
                                    "img/blobs/uploads/x: unexpected EOF\"\n"
                                    .replace('"\n', '\n'), 1), INFRA, 1),
    # C. the package index not fetched, then the package reported missing
    ("C-apt-connect-then-missing", _job("apt-get update -qq && apt-get install -y -qq postgresql-client",
                                        "W: Failed to fetch http://ftp.example.org/debian/dists/bookworm/InRelease  Could not "
                                        "connect to ftp.example.org:80 (10.2.3.4), connection timed out\nW: Some index files "
                                        "failed to download. They have been ignored, or old ones used instead.\n"
                                        "E: Package 'postgresql-client' has no installation candidate\n", 100), INFRA, 100),
    ("C-apk-dns-then-missing", _job("apk add --no-cache make",
                                    "WARNING: fetching https://mirror.example.com/alpine/v3.20/main: DNS lookup error\n"
                                    "ERROR: unable to select packages:\n  make (no such package):\n    required by: world[make]\n"),
     INFRA, 1),
    # D. a download's summary, then the script's generic stop, with a transient transfer error
    ("D-r-download-5xx", _job("Rscript ci/deps.R",
                              "Warning in download.file(url, destfile) :\n  cannot open URL 'https://cran.example.org/src/"
                              "contrib/xml2_1.3.6.tar.gz': HTTP status was '502 Bad Gateway'\nWarning in download.packages"
                              "(pkgs, destdir = tmpd) :\n  download of package 'xml2' failed\nExecution halted\n"), INFRA, 1),
    ("D-vcpkg-timeout", _job("vcpkg install --triplet x64-linux",
                             "Downloading https://github.com/fmtlib/fmt/archive/10.2.1.tar.gz\nerror: https://github.com/fmtlib/"
                             "fmt/archive/10.2.1.tar.gz: curl failed: Operation timed out after 300000 milliseconds\n"
                             "error: Failed to download from mirror set\nCMake Error at scripts/cmake/"
                             "vcpkg_download_distfile.cmake:136 (message):\n  Download failed, halting portfile.\n"), INFRA, 1),
    # E. ENOSPC while writing output, then the driver's summary; ESTALE
    ("E-lld-write-enospc", _job("cargo build --release",
                                "  = note: ld.lld: error: failed to write output 'target/release/deps/api-3f2a': No space left "
                                "on device\n          clang: error: linker command failed with exit code 1 (use -v to see "
                                "invocation)\n", 101), INFRA, 101),
    ("E-gold-final-link", _job("cmake --build out",
                               "/usr/bin/ld.gold: final link failed: No space left on device\ncollect2: error: ld returned 1 "
                               "exit status\n", 2), INFRA, 2),
    ("E-estale", _job("python -m pip wheel -w wheels -r requirements.txt",
                      "  File \"/usr/lib/python3.12/shutil.py\", line 262, in copyfile\n    with open(src, 'rb') as fsrc:\n"
                      "OSError: [Errno 116] Stale file handle: '/cache/pip/http-v2/a/b/c/d/e/abcdef.body'\n"), INFRA, 1),
    # F. drivers and test runners relaying 137 / SIGKILL; runtimes' own words
    ("F-clang-linker-137", _job("make -j4 LD=lld",
                                "clang-17: error: linker command failed with exit code 137 (use -v to see invocation)\n"
                                "make: *** [Makefile:60: bin/daemon] Error 1\n", 2), OOM, 2),
    ("F-msbuild-137", _job("dotnet publish -c Release",
                           "/usr/share/dotnet/sdk/6.0.420/Roslyn/Microsoft.VisualBasic.Core.targets(87,5): error MSB6006: "
                           "\"csc.dll\" exited with code 137. [/builds/erp/Erp.vbproj]\n"), OOM, 1),
    ("F-bazel-killed", _job("bazel build //server:all",
                            "ERROR: /builds/mono/server/BUILD.bazel:40:11: Linking server/app failed: (Killed): clang failed: "
                            "error executing CppLink command (from target //server:app) /usr/bin/clang @server/app-2.params\n"),
     OOM, 1),
    ("F-jest-worker-sigkill", _job("yarn jest --maxWorkers=6",
                                   "    A jest worker process (pid=2211) was terminated by another process: signal=SIGKILL, "
                                   "exitCode=null. Operating system logs may contain more information on why this occurred.\n"
                                   "Test Suites: 2 failed, 140 passed, 142 total\n"), OOM, 1),
    ("F-gradle-exec-137", _job("./gradlew :server:integrationTest",
                               "* What went wrong:\nExecution failed for task ':api:test'.\n> Process 'Gradle "
                               "Test Executor 12' finished with non-zero exit value 137\n"), OOM, 1),
    ("F-scons-minus-9", _job("scons -j6 target=release",
                             "g++ -o bin/obj/core/variant.o -c -O3 core/variant.cpp\nscons: *** [bin/obj/core/variant.o] Error -9"
                             "\nscons: building terminated because of errors.\n", 2), OOM, 2),
    ("F-numpy-gib", _job("python -m pipeline.features",
                         "  File \"/builds/ds/pipeline/features.py\", line 61, in build\n    m = np.empty((rows, 4096))\n"
                         "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 9.54 GiB for an array with shape "
                         "(312500, 4096) and data type float64\n"), OOM, 1),
    ("F-ruby-nomemory", _job("bundle exec rspec",
                             "An error occurred while loading ./spec/reports/export_spec.rb.\nFailure/Error: rows = "
                             "Export.load_all\n\nNoMemoryError:\n  failed to allocate memory\n[FATAL] failed to allocate memory\n"),
     OOM, 1),
]

# (id, trace, rule that must not decide it, exit code): deterministic neighbours; never retried or resized
NEAR = [
    ("reqwest-404", _job("uv pip install pkg==0.0.9", "  Caused by: HTTP status client error (404 Not Found) for url "
                                                     "(https://pypi.example.org/simple/pkg/)\n", 2), "http-5xx", 2),
    ("got-401", _job("yarn install", "➤ YN0001: │ RequestError: Response code 401 (Unauthorized)\n"), "http-5xx", 1),
    ("gcloud-403", _job("gcloud storage ls gs://priv", "ERROR: (gcloud.storage.ls) ResponseError: code=403, message=denied\n"),
     "cloud-api-throttled", 1),
    ("azure-authz", _job("az group list", "ERROR: (AuthorizationFailed) The client 'x' does not have authorization\n"),
     "cloud-api-throttled", 1),
    ("apt-404-then-missing", _job("apt-get update && apt-get install -y foo",
                                  "E: Failed to fetch http://deb.example.org/debian/dists/nope/InRelease  404  Not Found\n"
                                  "E: Unable to locate package foo\n", 100), "package-index-fetch-failed", 100),
    ("apt-dns-no-missing", _job("apt-get update", "W: Failed to fetch http://x.example/InRelease  Temporary failure "
                                                  "resolving 'x.example'\nsrc/a.c:1:1: error: expected ';'\n"),
     "package-index-fetch-failed", 1),
    ("r-download-404", _job("Rscript deps.R", "  cannot open URL 'https://cran.example.org/x_0.1.tar.gz': HTTP status was "
                                              "'404 Not Found'\n  download of package 'x' failed\nExecution halted\n"),
     "download-failed-transient-status", 1),
    ("clang-exit-1", _job("make", "clang: error: linker command failed with exit code 1 (use -v to see invocation)\n", 2),
     "compiler-killed", 2),
    ("msbuild-exit-1", _job("dotnet build", "error MSB6006: \"csc.dll\" exited with code 1. [/b/x.csproj]\n"),
     "compiler-killed", 1),
    ("gradle-exec-1", _job("./gradlew test", "> Process 'Gradle Test Executor 2' finished with non-zero exit value 1\n"),
     "test-worker-sigkilled", 1),
    ("jest-sigterm", _job("npx jest", "A jest worker process (pid=9) was terminated by another process: signal=SIGTERM, "
                                      "exitCode=null.\n"), "test-worker-sigkilled", 1),
    ("scons-interrupt", _job("scons", "scons: *** [build/a.o] Error -2\nscons: building terminated because of errors.\n", 2),
     "make-killed", 2),
    ("numpy-tib", _job("python shape_bug.py", "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 7.28 TiB for "
                                             "an array with shape (1000000, 1000000) and data type float64\n"),
     "runtime-heap-exhausted", 1),
    ("python-bare-memoryerror", _job("python -m app.parse", "    buf = bytearray(length_field)\nMemoryError\n"),
     "runtime-heap-exhausted", 1),
    ("bazel-exit-1", _job("bazel build //...", "ERROR: /b/BUILD:3:10: Compiling a.cc failed: (Exit 1): gcc failed: error "
                                               "executing CppCompile command\n"), "compiler-killed", 1),
]


@pytest.mark.parametrize("case,trace,want,code", FIXED, ids=[c[0] for c in FIXED])
def test_missed_transients_and_ooms_fixed(taxonomy, case, trace, want, code):
    verdict, got = decided(trace, taxonomy, exit_code=code)
    assert (verdict.family.value, got) == want, (case, verdict.rule, verdict.evidence)


@pytest.mark.parametrize("case,trace,rule,code", NEAR, ids=[c[0] for c in NEAR])
def test_deterministic_neighbours_not_rerun(taxonomy, case, trace, rule, code):
    verdict, got = decided(trace, taxonomy, exit_code=code)
    assert verdict.rule != rule, (case, verdict.evidence)
    assert got not in (Action.RETRY, Action.RESIZE), (case, verdict.rule, verdict.evidence)
