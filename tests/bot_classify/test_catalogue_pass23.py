"""Issue 11, twenty-third pass: held-out W's misses (scored blind once after the twenty-second pass, then read),
generalised by mechanism (precision first) and per message source (each rule's description in
config/taxonomy.toml names it).

Every line below is written from the format, not copied from an evaluation case: other tools, hosts,
repositories, paths and numbers than W's excerpts. Each mechanism has a positive, a near miss next to it that
must NOT take the rule, and the decision the shipped policy takes is checked too.
docs/taxonomy.md, "Twenty-third pass", lists the mechanisms and the documented misses.
"""

from __future__ import annotations

import pytest

from retry_bot.decide import Action

from .conftest import check_near_miss, check_rule, decided

# (trace, family, rule, action, extra facts)
POSITIVE = [
    # --- A. ci-operator's pending timeout with a container still in the kubelet's image-pull back-off
    (b"INFO[2025-03-04T08:00:12Z] Running step e2e-metal-ipi-ovn-install.\n"
     b"ERRO[2025-03-04T09:00:13Z] Some steps failed:\n"
     b"ERRO[2025-03-04T09:00:13Z] \n"
     b"  * could not run steps: step e2e-metal failed: \"e2e-metal\" pre steps failed: \"e2e-metal\" pod "
     b"\"e2e-metal-ipi-install\" failed: pod pending for more than 1h0m0s: containers have not started in "
     b"1h0m0.004211s: test: \n"
     b"* Container test is not ready with reason ImagePullBackOff and message Back-off pulling image "
     b"\"image-registry.openshift-image-registry.svc:5000/ci-op-q7x2mn4d/pipeline:baremetal-installer\"\n",
     "config_error", "ci-operator-pending-image-pull-backoff", Action.NONE, {}),
    (b"INFO[2022-11-08T10:01:40Z] Running step metering-operator-e2e.\n"
     b"INFO[2022-11-08T10:31:41Z] pod pending timeout: container \"setup\" has not started in 30m0s: \n"
     b"* Container setup is not ready with reason ImagePullBackOff and message Back-off pulling image "
     b"\"registry.ci.example.org/ci-op-5k2j9w1z/stable:metering-ansible\"\n",
     "config_error", "ci-operator-pending-image-pull-backoff", Action.NONE, {}),
    # --- B. the kernel's memory-cgroup OOM report, without the 'Killed process' line
    (b"[ 8123.553190] Task in /kubepods/burstable/pod5c1e/9f2a3b killed as a result of limit of "
     b"/kubepods/burstable/pod5c1e\n"
     b"[ 8123.553201] memory: usage 2097152kB, limit 2097152kB, failcnt 118\n"
     b"[ 8123.553204] memory+swap: usage 0kB, limit 9007199254740988kB, failcnt 0\n",
     "oom", "kernel-memcg-oom-report", Action.RESIZE, {"exit_code": 137}),
    (b"Mar 02 10:11:12 ci-worker-7 kernel: Call Trace:\n"
     b"Mar 02 10:11:12 ci-worker-7 kernel:  dump_stack_lvl+0x48/0x60\n"
     b"Mar 02 10:11:12 ci-worker-7 kernel:  dump_header+0x4a/0x211\n"
     b"Mar 02 10:11:12 ci-worker-7 kernel:  oom_kill_process+0xf9/0x190\n"
     b"Mar 02 10:11:12 ci-worker-7 kernel:  mem_cgroup_out_of_memory+0x13a/0x150\n",
     "oom", "kernel-memcg-oom-report", Action.RESIZE, {}),
    # --- C. docker buildx's own 'ERROR: ' print of the client's ErrorConnectionFailed: no daemon for the job
    (b"$ docker buildx build --platform linux/amd64 -t registry.example.org/team/api:9 --push .\n"
     b"ERROR: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n",
     "config_error", "job-docker-cli-error-without-daemon", Action.NONE, {}),
    # --- D. a registry's gateway status on an image push or pull
    (b"#14 exporting to image\n"
     b"#14 pushing layers 3.2s done\n"
     b"#14 ERROR: failed to push registry.gitlab.example.com/ops/web:2024.3: unexpected status from PUT request to "
     b"https://registry.gitlab.example.com/v2/ops/web/manifests/2024.3: 503 Service Unavailable\n",
     "infrastructure", "registry-transfer-gateway-5xx", Action.RETRY, {}),
    (b"error: failed to push quay.io/acme/worker:v7.1.0: failed to parse error response 502: "
     b"<html><body><h1>502 Bad Gateway</h1></body></html>\n",
     "infrastructure", "registry-transfer-gateway-5xx", Action.RETRY, {}),
]


@pytest.mark.parametrize("trace,family,rule,action,extra", POSITIVE,
                         ids=[f"{i}-{p[2]}" for i, p in enumerate(POSITIVE)])
def test_twenty_third_pass_rules(taxonomy, trace, family, rule, action, extra):
    check_rule(taxonomy, trace, family, rule, action, extra)


# (trace, rule that must not decide, family or None, extra facts)
NEAR_MISSES = [
    # A: GitLab's Kubernetes executor gives up after its 3-minute poll timeout: a registry's moment, still retried
    (b"WARNING: Failed to pull image with policy \"always\": image pull failed: Back-off pulling image "
     b"\"registry.example.com/group/app:1.2\"\n"
     b"ERROR: Job failed: prepare environment: waiting for pod running: pulling image "
     b"\"registry.example.com/group/app:1.2\": image pull failed: Back-off pulling image "
     b"\"registry.example.com/group/app:1.2\"\n",
     "ci-operator-pending-image-pull-backoff", "infrastructure", {}),
    # A: a container of ci-operator's pod still being created is not an image that cannot be pulled
    (b"* Container test is not ready with reason ContainerCreating\n",
     "ci-operator-pending-image-pull-backoff", None, {}),
    # B: the report quoted in a test's expected output (a string literal) is data
    (b"    assert parse_oom(\"memory: usage 1024kB, limit 1024kB, failcnt 3\") == 1024\n"
     b"AssertionError\n",
     "kernel-memcg-oom-report", None, {}),
    # B: a user-space function named out_of_memory in a backtrace has no kernel '+0xOFF/0xSIZE' frame
    (b"#3  0x00007f2a1c3b in out_of_memory (sz=4096) at src/alloc.c:42\n"
     b"Segmentation fault (core dumped)\n",
     "kernel-memcg-oom-report", None, {"exit_code": 139}),
    # C: GitLab Runner's own daemon failure keeps its words between the prefix and the error: infrastructure
    (b"ERROR: Preparation failed: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
     b"Is the docker daemon running? (docker.go:950:0s)\n",
     "job-docker-cli-error-without-daemon", "infrastructure", {}),
    # D: a 500 from the registry (a manifest it rejects every time) is not a gateway's moment
    (b"ERROR: failed to push ghcr.example.io/acme/tool:3: unexpected status from PUT request to "
     b"https://ghcr.example.io/v2/acme/tool/manifests/3: 500 Internal Server Error\n",
     "registry-transfer-gateway-5xx", None, {}),
    # D: a 401 is the job's credentials
    (b"ERROR: failed to push registry.example.net/app:1: unexpected status from HEAD request to "
     b"https://registry.example.net/v2/app/blobs/sha256:0a1b: 401 Unauthorized\n",
     "registry-transfer-gateway-5xx", None, {}),
]


@pytest.mark.parametrize("trace,rule,family,extra", NEAR_MISSES,
                         ids=[f"{i}-{p[1]}" for i, p in enumerate(NEAR_MISSES)])
def test_twenty_third_pass_near_misses(taxonomy, trace, rule, family, extra):
    check_near_miss(taxonomy, trace, rule, family, extra)


def test_twenty_third_pass_documented_misses_keep_their_decisions(taxonomy):
    """Evidence that carries the opposite cause in other splits stays as it was (docs/taxonomy.md,
    "Twenty-third pass"): a registry's HTTP 400 on a push is not retried (a 4xx is the client's request; W's
    Wercker case, labelled infrastructure after the vendor's own fault, stays a documented miss); the docker
    client's bare error behind a Jenkins timestamp stays docker-daemon (a host's daemon that was down, R)."""
    v, act = decided(b"PUT https://registry.example.com/v1/repositories/acme/api/ returned 400\n", taxonomy)
    assert act == Action.NONE, (v.rule, v.evidence)
    v, act = decided(b"09:12:31  Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
                     b"Is the docker daemon running?\n", taxonomy)
    assert act == Action.RETRY, (v.rule, v.evidence)
