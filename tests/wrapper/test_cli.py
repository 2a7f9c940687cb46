"""``measure`` and ``doctor`` from the command line; driver misuse gives the system-failure code."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .conftest import v1_usable, write_config


def rw(*args, env=None):
    return subprocess.run([sys.executable, "-m", "runner_wrapper", *args], capture_output=True, timeout=60,
                          env=env or dict(os.environ))


def test_measure_json_and_exit_code(tmp_path):
    cfg = write_config(tmp_path, "unused", backend="psutil")
    p = rw("--config", str(cfg), "measure", "--json", "--", "bash", "-c", "exit 4")
    assert p.returncode == 4
    m = json.loads(p.stderr.decode().strip().splitlines()[-1])
    assert m["exit_code"] == 4 and m["command"] == ["bash", "-c", "exit 4"]
    assert m["backend"] == "psutil" and m["approximate"] is True


@pytest.mark.cgroup
def test_measure_oom_is_137_with_a_human_summary(tmp_path):
    if v1_usable():
        pytest.skip(v1_usable())
    parent = f"rightsizer-test-{os.getpid()}-m2"
    cfg = write_config(tmp_path, parent)
    try:
        p = rw("--config", str(cfg), "measure", "--memory-limit", "64Mi", "--", sys.executable, "-c",
               "b = bytearray(300 * 2**20)")
        err = p.stderr.decode()
        assert p.returncode == 137, err
        assert "exit code: 137 (OOM: 1 process(es) killed at the memory limit)" in err
        assert "of limit 64.0 MiB" in err
    finally:
        for ctrl in ("memory", "cpu", "cpuacct"):
            d = f"/sys/fs/cgroup/{ctrl}/{parent}"
            if os.path.isdir(d):
                os.rmdir(d)


def test_measure_rejects_bad_quantity(tmp_path):
    p = rw("measure", "--memory-limit", "lots", "--", "true")
    assert p.returncode == 2 and b"not a Kubernetes quantity" in p.stderr


def test_doctor_reports_backend_and_missing_key(tmp_path):
    cfg = write_config(tmp_path, "rightsizer-doctor")
    env = {k: v for k, v in os.environ.items() if k != "RIGHTSIZER_SIGNING_KEY"}
    p = rw("--config", str(cfg), "doctor", env=env)
    out = p.stdout.decode()
    assert p.returncode == 1, out  # a PROBLEM line means a non-zero exit
    assert "cgroup version:" in out and "memory peak from:" in out
    assert "PROBLEM: no signing key configured" in out
    ok = rw("--config", str(cfg), "doctor", "--json", env={**env, "RIGHTSIZER_SIGNING_KEY": "k" * 16})
    assert ok.returncode == 0, ok.stdout
    d = json.loads(ok.stdout)
    assert d["backend"]["backend"] in ("cgroup-v2", "cgroup-v1", "psutil") and d["problems"] == []
    if not v1_usable():
        assert d["backend"]["backend"] == "cgroup-v1" and "memory.max_usage_in_bytes" in d["backend"]["memory_peak_file"]


def test_executor_misuse_is_a_system_failure(tmp_path):
    env = {**os.environ, "SYSTEM_FAILURE_EXIT_CODE": "9", "BUILD_FAILURE_EXIT_CODE": "7"}
    assert rw("executor", "run", "only-one-arg", env=env).returncode == 9
    bad = tmp_path / "bad.toml"
    bad.write_text("[nope]\n")
    p = rw("--config", str(bad), "executor", "prepare", env=env)
    assert p.returncode == 9 and b"unknown table [nope]" in p.stderr
    env.pop("JOB_RESPONSE_FILE", None)
    cfg = write_config(tmp_path, "x", backend="psutil")
    p = rw("--config", str(cfg), "executor", "prepare", env=env)
    assert p.returncode == 9 and b"JOB_RESPONSE_FILE is not set" in p.stdout


def test_doctor_reports_every_problem_of_a_bad_config(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[nope]\n[caps]\nmemory = "lots"\n[sinks]\ncolector_url = "x"\n')
    p = rw("--config", str(bad), "doctor")
    out = p.stdout.decode()
    assert p.returncode == 1, out
    problems = [ln for ln in out.splitlines() if ln.startswith("PROBLEM: ")]
    assert len(problems) == 3, out
    assert "unknown table [nope]" in problems[0]
    assert any("[caps] memory" in ln and "lots" in ln for ln in problems)
    assert any("[sinks] unknown key(s): colector_url" in ln for ln in problems)


def test_measure_of_a_short_command_reports_unknown_sampled_figures_not_zero(tmp_path):
    cfg = write_config(tmp_path, f"rightsizer-test-{os.getpid()}-short",
                       backend="psutil" if v1_usable() else "auto")
    cfg.write_text(cfg.read_text().replace("interval = 0.05", "interval = 2"))  # one sample at most
    p = rw("--config", str(cfg), "measure", "--", "sh", "-c", "exit 7")
    err = p.stderr.decode()
    assert p.returncode == 7, err
    assert "max 0.00 cores" not in err and "max unknown (run too short to sample)" in err
    assert "mean unknown (run too short to sample)" in err  # memory mean of a run shorter than a sample
    for ctrl in ("memory", "cpu", "cpuacct"):
        d = f"/sys/fs/cgroup/{ctrl}/rightsizer-test-{os.getpid()}-short"
        if os.path.isdir(d):
            os.rmdir(d)


def test_doctor_names_the_real_reason_for_an_unusable_key_file(tmp_path):
    """A ``key_file`` that is set but missing is not "no signing key configured": say why."""
    missing = tmp_path / "no-such-key"
    cfg = write_config(tmp_path, "rightsizer-doctor-kf", extra=f'[signing]\nkey_file = "{missing}"\n')
    env = {k: v for k, v in os.environ.items() if k != "RIGHTSIZER_SIGNING_KEY"}
    p = rw("--config", str(cfg), "doctor", env=env)
    out = p.stdout.decode()
    assert p.returncode == 1, out
    assert f"PROBLEM: [signing] key_file {missing}: cannot read:" in out, out
