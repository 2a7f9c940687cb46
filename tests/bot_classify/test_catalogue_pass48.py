"""Issue 11, forty-eighth pass: held-out ZZG's and ZZH's misses (scored blind once after the forty-seventh pass,
then read), generalised by mechanism (precision first) and per message source (each rule's description in
config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
repositories, paths and numbers than ZZG's and ZZH's excerpts. Each mechanism has a positive, a near miss
next to it that must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Forty-eighth pass", lists the mechanisms and the documented misses.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. OpenDAL's credential chain fell through to EC2's metadata service, unreachable off EC2
    (b"+ sccache --start-server\n"
     b"sccache: Starting the server...\n"
     b"sccache: error: Server startup failed: cache storage failed to write: Unexpected (temporary) at write => "
     b"loading credential to sign http request\n"
     b"\n"
     b"Context:\n"
     b"   called: reqsign::LoadCredential\n"
     b"   service: s3\n"
     b"   path: .sccache_check\n"
     b"\n"
     b"Source:\n"
     b"   error sending request for url (http://169.254.169.254/latest/api/token): error trying to connect: "
     b"tcp connect error: Network is unreachable (os error 101)\n",
     "config_error", "opendal-s3-credential-imds-unreachable", Action.NONE, {}),
    # IMDSv1's role listing, another tool on OpenDAL
    (b"Error: Unexpected (temporary) at stat, context: { service: s3, path: wheels/index.json } => loading "
     b"credential to sign http request\n"
     b"Caused by: error sending request for url "
     b"(http://169.254.169.254/latest/meta-data/iam/security-credentials/): operation timed out\n",
     "config_error", "opendal-s3-credential-imds-unreachable", Action.NONE, {}),
    # --- B. PowerShell's web cmdlet: the URL is not on the server (404), the record's own id in the tail
    (b"Fetching the SDK installer from https://downloads.example.net/sdk/4.2/sdk_4.2.7_win64.msi\n"
     b"Invoke-WebRequest : 404 Not Found 404 Not Found nginx\n"
     b"At C:\\agent\\_work\\1\\s\\ci\\fetch-sdk.ps1:58 char:5\n"
     b"+     Invoke-WebRequest -Uri $SdkUrl -OutFile $SdkMsi\n"
     b"+     ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~\n"
     b"    + CategoryInfo          : InvalidOperation: (System.Net.HttpWebRequest:HttpWebRequest) "
     b"[Invoke-WebRequest], WebException\n"
     b"    + FullyQualifiedErrorId : WebCmdletWebResponseException,Microsoft.PowerShell.Commands."
     b"InvokeWebRequestCommand\n",
     "config_error", "powershell-webcmdlet-http-404", Action.NONE, {}),
    # PowerShell 7's concise view, the resource string with no body
    (b"Invoke-RestMethod: Response status code does not indicate success: 404 (Not Found).\n"
     b"FullyQualifiedErrorId : WebCmdletWebResponseException,Microsoft.PowerShell.Commands.InvokeRestMethodCommand\n",
     "config_error", "powershell-webcmdlet-http-404", Action.NONE, {}),
    # --- C. @actions/cache: the service throttled a chunk, the closed archive crashed the post step
    (b"Post job cleanup.\n"
     b"/usr/bin/tar --posix -z -cf cache.tgz -P -C /home/runner/work/api/api --files-from manifest.txt\n"
     b"Warning: Failed to save: Cache service responded with 503 during upload chunk.\n"
     b"/home/runner/work/_actions/actions/setup-node/v3/dist/cache-save/index.js:5120\n"
     b"                    throw new Error(`Cache upload failed because file read failed with ${error.message}`);\n"
     b"                    ^\n"
     b"\n"
     b"Error: Cache upload failed because file read failed with EBADF: bad file descriptor, read\n"
     b"    at ReadStream.<anonymous> (/home/runner/work/_actions/actions/setup-node/v3/dist/cache-save/index.js:"
     b"5120:27)\n",
     "infrastructure", "actions-cache-upload-chunk-throttled-ebadf", Action.RETRY, {}),
    # --- D. tqdm's bar, then the shell's word for the SIGKILL on the same line
    (b"$ python convert_weights.py --model ./ckpt/falcon-40b --out ./gguf\n"
     b"Loading checkpoint shards:  22%|\xe2\x96\x88\xe2\x96\x88\xe2\x96\x8f       | 2/9 [00:41<02:26, 20.87s/it]Killed\n",
     "oom", "tqdm-progress-bar-killed", Action.RESIZE, {}),
    # an ASCII bar with a postfix, no description
    (b" 61%|######1   | 611/1000 [03:12<02:02,  3.17it/s, loss=0.412]Killed\n",
     "oom", "tqdm-progress-bar-killed", Action.RESIZE, {}),
    # --- E. Bazel's pre-gRPC client: its server vanished mid-build
    (b"INFO: Found 3 targets...\n"
     b"[812 / 1,907] Compiling src/core/lib/surface/call.cc\n"
     b"Error: unexpected EOF from Bazel server.\n"
     b"Contents of '/home/ci/.cache/bazel/_bazel_ci/4f1e0c/server/jvm.out':\n",
     "oom", "bazel-afunix-server-eof", Action.RESIZE, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{p[2]}-{i}" for i, p in enumerate(POSITIVE)])
def test_forty_eighth_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must not decide, family or None, extra facts)
NEAR_MISSES = [
    # A: a timeout to the bucket itself (credentials found) is not the metadata fallback
    (b"sccache: error: Server startup failed: cache storage failed to read: Unexpected (temporary) at read => "
     b"send http request\n"
     b"Source:\n"
     b"   error sending request for url (https://ci-cache.s3.eu-west-1.amazonaws.com/.sccache_check): "
     b"operation timed out\n",
     "opendal-s3-credential-imds-unreachable", None, {}),
    # A: the metadata endpoint timing out in a tool that is not OpenDAL (no credential message)
    (b"botocore.exceptions.ConnectTimeoutError: Connect timeout on endpoint URL: "
     b"\"http://169.254.169.254/latest/api/token\"\n"
     b"error sending request for url (http://169.254.169.254/latest/api/token): operation timed out\n",
     "opendal-s3-credential-imds-unreachable", None, {}),
    # B: a 503 from the same cmdlet is the server's moment (dotnet-webexception-5xx)
    (b"Invoke-WebRequest : The remote server returned an error: (503) Server Unavailable.\n"
     b"    + FullyQualifiedErrorId : WebCmdletWebResponseException,Microsoft.PowerShell.Commands."
     b"InvokeWebRequestCommand\n",
     "powershell-webcmdlet-http-404", "infrastructure", {}),
    # B: a script's own message about a 404, not the cmdlet's error record
    (b"Invoke-WebRequest : 404 Not Found\n"
     b"Write-Host 'retrying with the mirror list'\n",
     "powershell-webcmdlet-http-404", None, {}),
    # C: the same crash after a 400 (a cache too large for the service) is not a throttle
    (b"Warning: Cache service responded with 400 during upload chunk.\n"
     b"Error: Cache upload failed because file read failed with EBADF: bad file descriptor, read\n",
     "actions-cache-upload-chunk-throttled-ebadf", None, {}),
    # C: a 429 warning alone (the post step only warns) does not take the rule
    (b"Warning: Failed to save: Cache service responded with 429 during upload chunk.\n"
     b"Cleaning up orphan processes\n",
     "actions-cache-upload-chunk-throttled-ebadf", None, {}),
    # D: a Kubernetes OOMKilled word after a bar is kubernetes-oomkilled's, not the shell's 'Killed'
    (b"Epoch 3: 48%|####8     | 96/200 [01:10<01:16,  1.36it/s]OOMKilled\n",
     "tqdm-progress-bar-killed", None, {}),
    # D: a bar that finished, then a test named after killing
    (b"Downloading shards: 100%|##########| 4/4 [00:09<00:00,  2.31s/it]\n"
     b"test_worker_killed ... Killed workers: 0\n",
     "tqdm-progress-bar-killed", None, {}),
    # E: Bazel's own heap exhaustion is named as such
    (b"FATAL: bazel ran out of memory and crashed. Printing stack trace:\n"
     b"java.lang.OutOfMemoryError: Java heap space\n",
     "bazel-afunix-server-eof", "oom", {}),
    # E: a message quoting the words mid-line is not the client's line
    (b"note: the wrapper saw 'Error: unexpected EOF from Bazel server.' in an old log; ignoring\n"
     b"ERROR: //app:lib failed to build\n",
     "bazel-afunix-server-eof", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{n[1]}-{i}" for i, n in enumerate(NEAR_MISSES)])
def test_forty_eighth_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)
