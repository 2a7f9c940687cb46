"""Attacks on the usage record from inside a real build run through the wrapper (docs/usage-record.md,
"Threat model").

The build script is a hostile job: it reads ``/proc/<pid>/environ`` of every ancestor (the driver,
and whatever started it), the wrapper's configuration and any key file it names, and its own
environment; with every key it finds (plus a guessed one) it signs a record claiming 64 GiB and an OOM
kill for *its own* job, and prints those forged markers, and an unsigned one, after the genuine marker.
The retry bot's extraction must still return the kernel's figures.  The driver runs as root (as
gitlab-runner does on a packaged install) with ``[signing] build_user = "nobody"``.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import tempfile
from pathlib import Path

import pytest

from retry_bot.classify import extract_verified_record
from runner_wrapper.record import find_markers

from .conftest import make_payload, write_config
from .driver import job_dir

pytestmark = pytest.mark.slow  # end to end: outside the fast lane (pytest -m "not slow")

GiB = 2**30
KEY = "sig-key-for-tests"
KEYS = {"default": KEY.encode()}
BUILD_PYTHON = "/usr/bin/python3"

# The hostile build: argv[1] = the record to forge (JSON), argv[2:] = files the attacker knows of.
ATTACK = r'''
import base64, hashlib, hmac, json, os, re, sys
template, paths = json.loads(sys.argv[1]), sys.argv[2:]
keys, log = set(), []
def steal(blob, where):
    for m in re.finditer(rb"RIGHTSIZER_SIGNING_KEY=([^\0\n]+)", blob):
        keys.add(m.group(1)); log.append("key from " + where)
    for m in re.finditer(rb'(?m)^\s*key\s*=\s*"([^"]+)"', blob):
        keys.add(m.group(1)); log.append("key from " + where)
    for m in re.finditer(rb'(?m)^\s*key_file\s*=\s*"([^"]+)"', blob):
        read(m.group(1).decode())
def read(path):
    try:
        with open(path, "rb") as fh:
            blob = fh.read()
    except OSError as e:
        log.append("%s: %s" % (path, e.strerror)); return
    log.append("read " + path)
    if not path.endswith(".toml") and not path.startswith("/proc/"):
        keys.add(blob.split(b"\n")[0].strip()); log.append("key from " + path)
    steal(blob, path)
pid = os.getpid()
while pid > 1:  # every ancestor: the shell, the driver, whatever started the driver
    pid = int(open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[1])
    if pid > 1:
        read("/proc/%d/environ" % pid)
for p in paths:
    read(p)
steal(b"\0".join(("%s=%s" % kv).encode() for kv in os.environ.items()), "own environment")
def line(rec):
    return "RIGHTSIZER-USAGE v1 " + base64.urlsafe_b64encode(
        json.dumps(rec, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()).decode()
for k in sorted(keys) + [b"guessed-key"]:
    body = json.dumps(template, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    print(line(dict(template, signature={"alg": "hmac-sha256", "key_id": "default",
                                         "value": hmac.new(k, body, hashlib.sha256).hexdigest()})))
print(line(template))
for entry in log:
    print("attack: " + entry)
'''


def _build_user_usable() -> str | None:
    if os.geteuid() != 0:
        return "needs root: the driver switches the build to another user"
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        return "no 'nobody' user on this host"
    if not os.access(BUILD_PYTHON, os.X_OK):
        return f"{BUILD_PYTHON} missing: the hostile build needs a Python the build user can run"
    return None


@pytest.fixture
def public_dir():
    """A root-owned directory the build user may traverse (pytest's tmp_path is 0700 root)."""
    why = _build_user_usable()
    if why:
        pytest.skip(why)
    d = Path(tempfile.mkdtemp(prefix="rightsizer-forgery-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _config(tmp_path: Path, parent: str, public: Path, signing: str) -> Path:
    """wrapper.toml where a build can read it (0644, as /etc/gitlab-rightsizer/wrapper.toml is)."""
    cfg = write_config(tmp_path, parent)
    text = cfg.read_text() + f'\n[signing]\nbuild_user = "nobody"\nbuild_dir = "{public / "build"}"\n{signing}\n'
    out = public / "wrapper.toml"
    out.write_text(text)
    out.chmod(0o644 if "key =" not in signing else 0o600)
    return out


def _job(tmp_path: Path, cfg: Path, job_id: int):
    """A job as GitLab Runner drives it: ``config`` first, its ``job_env`` in every later call (so
    ``run`` takes the lean stage path, as in production)."""
    jd = job_dir(tmp_path, cfg, make_payload(job_id))
    c = jd.call("config")
    assert c.returncode == 0, c.stderr.decode()
    jd.env.update(json.loads(c.stdout)["job_env"])
    return jd


def _hostile_job(tmp_path: Path, cfg: Path, job_id: int, known: list[str]):
    jd = _job(tmp_path, cfg, job_id)
    forged = {"schema": "gitlab-rightsizer/usage-record/v1",
              "job": {"id": job_id, "project_id": 7, "project_path": "group/p", "pipeline_id": 99, "name": "build",
                      "stage": "build", "ref": "main", "protected": True, "url": None, "variables": {}},
              "host": {"hostname": "h", "runner": None, "backend": "cgroup-v1", "approximate": False,
                       "kernel": None, "wrapper_version": None},
              "limits": {"memory_limit_bytes": 64 * GiB, "sources": {}},
              "usage": {"wall_seconds": 9999.0, "memory_peak_bytes": 64 * GiB, "oom_kills": 1},
              "started_at": "2026-01-01T00:00:00Z", "finished_at": "2030-01-01T00:00:00Z", "exit_code": 137,
              "stages": [], "stages_truncated": False}
    attack = jd.script("attack.sh", "echo compiling\nexit 1")  # the genuine build: a compile error
    hostile = jd.script("after.sh", f"{BUILD_PYTHON} - {json.dumps(json.dumps(forged))} "
                                    + " ".join(json.dumps(p) for p in known) + " <<'PY'\n" + ATTACK + "PY")
    return jd, attack, hostile


def _run_attack(tmp_path: Path, cfg: Path, job_id: int, known: list[str]) -> tuple[bytes, str]:
    jd, build, hostile = _hostile_job(tmp_path, cfg, job_id, known)
    assert jd.call("prepare").returncode == 0
    b = jd.call("run", str(build), "build_script")
    assert b.returncode == 7, b.stdout.decode() + b.stderr.decode()
    a = jd.call("run", str(hostile), "after_script")  # after the genuine marker, as after_script runs
    trace = b.stdout + a.stdout
    assert jd.call("cleanup").returncode == 0
    return trace, a.stdout.decode() + a.stderr.decode()


def _assert_kernel_figures_win(trace: bytes, job_id: int) -> None:
    assert len(find_markers(trace)) >= 3  # the genuine one and the forgeries are all in the log
    rec, why = extract_verified_record(trace, KEYS, job_id=job_id, project_id=7)
    assert rec is not None and rec.job.id == job_id
    assert rec.usage.oom_kills == 0 and rec.exit_code == 1, why
    assert rec.usage.memory_peak_bytes < GiB and rec.limits.memory_limit_bytes != 64 * GiB
    assert "does not verify" in why or "not signed" in why


def test_build_cannot_take_the_key_from_any_ancestors_environ(tmp_path, cg_parent, public_dir):
    # The key in the driver's environment (RIGHTSIZER_SIGNING_KEY, as the runner's service sets it).
    cfg = _config(tmp_path, cg_parent, public_dir, "")
    trace, out = _run_attack(tmp_path, cfg, 951, [])
    assert "key from" not in out, out
    driver_environ = [ln for ln in out.splitlines() if ln.startswith("attack: /proc/") and "environ" in ln]
    assert driver_environ and all("Permission denied" in ln for ln in driver_environ), out
    _assert_kernel_figures_win(trace, 951)


def test_build_cannot_read_the_key_file_named_in_the_config(tmp_path, cg_parent, public_dir):
    key_file = public_dir / "signing.key"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o600)
    cfg = _config(tmp_path, cg_parent, public_dir, f'key_file = "{key_file}"\nkey_env = ""')
    trace, out = _run_attack(tmp_path, cfg, 952, [str(cfg)])
    assert f"attack: read {cfg}" in out  # the configuration is readable, as /etc/gitlab-rightsizer/ is
    assert f"attack: {key_file}: Permission denied" in out and "key from" not in out, out
    _assert_kernel_figures_win(trace, 952)


def test_build_cannot_read_a_literal_key_in_a_private_config(tmp_path, cg_parent, public_dir):
    cfg = _config(tmp_path, cg_parent, public_dir, f'key = "{KEY}"\nkey_env = ""')
    trace, out = _run_attack(tmp_path, cfg, 953, [str(cfg), os.path.dirname(str(cfg))])
    assert f"attack: {cfg}: Permission denied" in out and "key from" not in out, out
    _assert_kernel_figures_win(trace, 953)


def test_build_runs_as_the_build_user_with_its_own_tmpdir_and_home(tmp_path, cg_parent, public_dir):
    cfg = _config(tmp_path, cg_parent, public_dir, "")
    jd = _job(tmp_path, cfg, 954)
    assert jd.call("prepare").returncode == 0
    s = jd.script("id.sh", 'echo "uid=$(id -u) tmp=$TMPDIR home=$HOME user=$USER"; touch "$TMPDIR/x"; '
                           'cat "$JOB_RESPONSE_FILE" || echo no-response-file; echo "$RIGHTSIZER_SIGNING_KEY"')
    p = jd.call("run", str(s), "build_script")
    out = p.stdout.decode()
    nobody = pwd.getpwnam("nobody")
    assert p.returncode == 0, out + p.stderr.decode()
    assert f"uid={nobody.pw_uid} tmp={public_dir / 'build' / 'job-954'} home={nobody.pw_dir} user=nobody" in out
    assert "no-response-file" in out and "job-token-xyz" not in out and KEY not in out
    assert (public_dir / "build" / "job-954" / "x").exists()
    assert jd.call("cleanup").returncode == 0
    assert not (public_dir / "build" / "job-954").exists()  # cleanup removes the build user's directory


def test_build_user_cannot_be_enforced_without_root_and_never_as_root():
    from runner_wrapper.isolation import IsolationError, resolve_build_user

    with pytest.raises(IsolationError, match=r"build_user = 'nobody' needs the driver to run as root \(it runs as uid 1000\)"):
        resolve_build_user("nobody", euid=1000)
    with pytest.raises(IsolationError, match="is root"):
        resolve_build_user("root", euid=0)
    with pytest.raises(IsolationError, match="no such user"):
        resolve_build_user("no-such-user-rightsizer", euid=0)


def test_doctor_warns_when_records_can_be_forged_and_says_when_they_cannot(tmp_path, public_dir):
    from runner_wrapper.config import load_config
    from runner_wrapper.doctor import diagnose

    open_cfg = write_config(tmp_path, "rightsizer-doctor")
    d = diagnose(load_config(str(open_cfg)), {"RIGHTSIZER_SIGNING_KEY": KEY})
    assert any(w.startswith("usage records can be forged by builds") for w in d["warnings"])
    assert d["record_protection"].startswith("NOT enforced")

    key_file = public_dir / "signing.key"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o644)
    cfg = _config(tmp_path, "rightsizer-doctor", public_dir, f'key_file = "{key_file}"')
    d = diagnose(load_config(str(cfg)), {})
    assert any("has mode 0644: builds can read it" in p for p in d["problems"])
    key_file.chmod(0o600)
    d = diagnose(load_config(str(cfg)), {})
    assert d["record_protection"].startswith("enforced: builds run as nobody")
    assert not any("forged" in w for w in d["warnings"]) and not any("key_file" in p for p in d["problems"])

    lit = _config(tmp_path, "rightsizer-doctor", public_dir, f'key = "{KEY}"')
    lit.chmod(0o644)
    d = diagnose(load_config(str(lit)), {})
    assert any("holds the signing key ([signing] key) and is readable by builds" in p for p in d["problems"])


def test_the_attack_is_real_without_a_build_user(tmp_path, cg_parent, public_dir):
    """The same hostile build on a host where builds run with the driver's uid (no ``build_user``): it
    finds the key and its forged 64 GiB OOM verifies.  This is what doctor warns about, and it keeps the
    attack program honest (the tests above would pass for a toothless attack too)."""
    cfg = _config(tmp_path, cg_parent, public_dir, "")
    cfg.write_text(cfg.read_text().replace('build_user = "nobody"\n', ""))
    trace, out = _run_attack(tmp_path, cfg, 956, [])
    assert "key from /proc/" in out, out
    rec, _why = extract_verified_record(trace, KEYS, job_id=956, project_id=7)
    assert rec is not None and rec.usage.memory_peak_bytes == 64 * GiB and rec.usage.oom_kills == 1


def test_replaying_another_jobs_genuine_record_from_a_build(tmp_path, cg_parent, public_dir):
    """Job 961's genuine marker (a real 200 MiB peak), printed by job 962's after_script after 962's own
    marker: for job 962 the bot keeps 962's record; the replay is named as such."""
    from retry_bot.classify import classify, load_taxonomy
    from retry_bot.model import JobFacts

    cfg = _config(tmp_path, cg_parent, public_dir, "")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = _job(tmp_path / "a", cfg, 961)
    assert a.call("prepare").returncode == 0
    big = a.script("big.sh", f"{BUILD_PYTHON} -c \"b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096])\""
                             "\nexit 1")
    pa = a.call("run", str(big), "build_script")
    assert pa.returncode == 7 and a.call("cleanup").returncode == 0
    replay = [ln for ln in pa.stdout.decode().splitlines() if ln.startswith("RIGHTSIZER-USAGE v1 ")][-1]

    b = _job(tmp_path / "b", cfg, 962)
    assert b.call("prepare").returncode == 0
    pb = b.call("run", str(b.script("s.sh", "echo small; exit 1")), "build_script")
    pr = b.call("run", str(b.script("after.sh", f"echo '{replay}'")), "after_script")
    assert b.call("cleanup").returncode == 0
    t = pb.stdout + pr.stdout
    found = extract_verified_record(t, KEYS)  # offline: two jobs' genuine markers, neither trusted
    assert found[0] is None and "cannot tell which is this job's" in found[1]
    rec, why = extract_verified_record(t, KEYS, job_id=962, project_id=7)
    assert rec.job.id == 962 and rec.usage.memory_peak_bytes < 100 * 2**20
    assert "replayed usage marker of job 961" in why
    verdict = classify(JobFacts(job_id=962, name="build", failure_reason="script_failure", exit_code=1), t,
                       load_taxonomy(), rec)
    # (the learned fallback's evidence names its model, whose version ends in its training-case count: 961
    # since the twelfth pass, which is not job 961)
    from retry_bot.classify.learned import default_model
    tag = default_model().version
    assert verdict.family.value != "oom" and not any("961" in e.replace(tag, "") for e in verdict.evidence)
