"""Issue 11, forty-first pass: held-out ZS's and ZT's misses (scored blind once after the fortieth pass, then
read), generalised by mechanism (precision first) and per message source (each rule's description in
config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
repositories, paths and numbers than ZS's and ZT's excerpts. Each mechanism has a positive, a near miss next
to it that must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Forty-first pass", lists the mechanisms and the documented misses.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. NuGet: the feed refused the job's credentials (401/403): the same on every run
    (b"  Determining projects to restore...\n"
     b"/builds/acme/ledger/src/Ledger.Api/Ledger.Api.csproj : error NU1301: Unable to load the service index "
     b"for source https://pkgs.example.com/acme/_packaging/internal/nuget/v3/index.json.\n"
     b"/builds/acme/ledger/src/Ledger.Api/Ledger.Api.csproj : error NU1301:   Response status code does not "
     b"indicate success: 401 (Unauthorized).\n"
     b"  Failed to restore /builds/acme/ledger/src/Ledger.Api/Ledger.Api.csproj (in 2.41 sec).\n",
     "config_error", "nuget-feed-credentials-rejected", Action.NONE, {}),
    (b"    error NU1301: Failed to retrieve information about 'Contoso.Telemetry' from remote source "
     b"'https://nuget.example.org/v3/registration/contoso.telemetry/index.json'.\n"
     b"    error NU1301:   Response status code does not indicate success: 403 (Forbidden).\n",
     "config_error", "nuget-feed-credentials-rejected", Action.NONE, {}),
    # --- B. MPICH's MPD mpiexec ended the job at MPIEXEC_TIMEOUT: the job's own time limit
    (b"Running allred3 with 4 processes\n"
     b"cn042_mpiexec (handle_sig_occurred 1210): job ending due to env var MPIEXEC_TIMEOUT=600\n"
     b"Program allred3 exited without No Errors\n",
     "timeout", "mpich-mpd-mpiexec-timeout", Action.NONE, {}),
    # --- C. Jenkins: the build was aborted (a user, an administrator or the build-timeout plugin)
    (b"[Pipeline] sh\n"
     b"+ ./gradlew integrationTest --no-daemon\n"
     b"> Task :service:integrationTest\n"
     b"Build was aborted\n"
     b"Aborted by ops-oncall\n"
     b"Finished: ABORTED\n",
     "timeout", "jenkins-build-aborted", Action.NONE, {}),
    # --- D. MSBuild's Exec task: the command was SIGKILLed (137), the OOM killer in a container
    (b"  Generating native code\n"
     b"/src/Tools/Codegen.targets(118,5): error MSB3073: The command \"\"/usr/local/bin/protoc-gen-native\" "
     b"--input obj/Release/net8.0/schema.bin --out obj/Release/net8.0/gen\" exited with code 137. "
     b"[/src/Billing/Billing.csproj]\n",
     "oom", "msbuild-exec-exited-137", Action.RESIZE, {}),
    # --- E. PBS's mom killed the job over its memory limit
    (b"Mon Mar  3 02:11:40 CET 2025 starting ctest -j 16\n"
     b"=>> PBS: job killed: mem 33816576kb exceeded limit 33554432kb\n",
     "oom", "pbs-mom-memory-limit-killed", Action.RESIZE, {}),
    (b"=>> PBS: job killed: vmem 17203200000 exceeded limit 17179869184\n",
     "oom", "pbs-mom-memory-limit-killed", Action.RESIZE, {}),
    # --- F. ReFrame cancelled a Slurm job whose nodes are down (ReqNodeNotAvail): the cluster's state
    (b"FAILURE INFO for StreamBenchmark_gpu\n"
     b"  * System partition: alps:gpu\n"
     b"  * Job type: batch job (id=4410932)\n"
     b"  * Failing phase: poll\n"
     b"  * Reason: job blocked error: [jobid=4410932] job cancelled because it was blocked due to a perhaps "
     b"non-recoverable reason: ReqNodeNotAvail, UnavailableNodes:gpu-[0117,0203-0206]\n",
     "infrastructure", "reframe-slurm-nodes-unavailable", Action.RETRY, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{p[2]}-{i}" for i, p in enumerate(POSITIVE)])
def test_forty_first_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must not decide, family or None, extra facts)
NEAR_MISSES = [
    # A: a 503 from the feed is the server's moment, not the credentials (network-error, retry)
    (b"  error NU1301: Unable to load the service index for source https://pkgs.example.com/v3/index.json.\n"
     b"  error NU1301:   Response status code does not indicate success: 503 (Service Unavailable).\n",
     "nuget-feed-credentials-rejected", "infrastructure", {}),
    # B: a script that only exports the variable is not MPD's verdict
    (b"+ export MPIEXEC_TIMEOUT=900\n"
     b"+ mpiexec -n 8 ./solver --mesh cube.msh\n"
     b"Fatal error in PMPI_Comm_split: Invalid communicator, error stack:\n",
     "mpich-mpd-mpiexec-timeout", None, {}),
    # C: a failed Jenkins build is not an aborted one
    (b"+ make -j4 check\n"
     b"make: *** [Makefile:212: check] Error 2\n"
     b"Build step 'Execute shell' marked build as failure\n"
     b"Finished: FAILURE\n",
     "jenkins-build-aborted", None, {}),
    # D: the Exec task's command failing with code 1 is a failed command, not a kill
    (b"/src/Tools/Codegen.targets(118,5): error MSB3073: The command \"./gen.sh schema.bin\" exited with code 1. "
     b"[/src/Billing/Billing.csproj]\n",
     "msbuild-exec-exited-137", None, {}),
    # E: PBS's wall-time limit is a time limit, not memory
    (b"=>> PBS: job killed: walltime 7215 exceeded limit 7200\n",
     "pbs-mom-memory-limit-killed", None, {}),
    # F: a partition limit is the job's configuration, not nodes down
    (b"  * Reason: job blocked error: [jobid=4410933] job cancelled because it was blocked due to a perhaps "
     b"non-recoverable reason: PartitionNodeLimit\n",
     "reframe-slurm-nodes-unavailable", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{n[1]}-{i}" for i, n in enumerate(NEAR_MISSES)])
def test_forty_first_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)
