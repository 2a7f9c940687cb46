"""Part A (the runner contract) combined with part C (a separate build user), end to end through the
wrapper on real cgroup v1, as root, the way GitLab Runner drives it (review of issue 10).

- cancel: SIGTERM to the driver's process group (R ``helpers/process/killer_unix.go``) reaches a build
  running as ``nobody``; its TERM trap runs within ``kill_grace_seconds``; a ``setsid`` escapee that
  ignores TERM is killed with the cgroup; 143 reaches ``BUILD_EXIT_CODE_FILE``, which the runner
  (the driver's uid) reads;
- an OOM kill of a build-user process: 137;
- ``cleanup`` removes the build user's directory even when the build left a read-only tree;
- reaping the cgroup of a crashed driver whose build runs as the build user removes its directory too;
- ``measure``'s parent-death signal survives dropping privileges.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner_wrapper.record import find_markers, verify_record

from .conftest import make_payload
from .driver import job_dir
from .test_forgery import BUILD_PYTHON, KEY, _config, _job, public_dir  # noqa: F401 - fixture

pytestmark = pytest.mark.slow  # end to end: outside the fast lane (pytest -m "not slow")

ALLOC = ("import sys, time; n=int(sys.argv[1]); b=bytearray(n*2**20); b[::4096]=b'x'*len(b[::4096]); "
         "time.sleep(0.2)")


def _with(cfg: Path, section: str, line: str) -> Path:
    cfg.write_text(cfg.read_text().replace(f"[{section}]\n", f"[{section}]\n{line}\n", 1))
    return cfg


def _read_until(proc: subprocess.Popen, needle: bytes, timeout: float = 20) -> bytes:
    seen = b""
    deadline = time.time() + timeout
    while needle not in seen and time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen += line
    assert needle in seen, seen
    return seen


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is not alive
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_cancel_of_a_build_user_stage_gets_grace_then_143_and_cleanup_removes_its_dir(tmp_path, cg_parent,
                                                                                     public_dir):  # noqa: F811
    cfg = _with(_config(tmp_path, cg_parent, public_dir, ""), "executor", "kill_grace_seconds = 1.5")
    jd = _job(tmp_path, cfg, 971)
    assert jd.call("prepare").returncode == 0
    script = jd.script("s.sh", """
setsid bash -c 'trap "" TERM; echo "escapee ready"; while :; do sleep 0.05; done' &
echo "escapee=$!"
trap 'echo "trapped as $(id -un)"; exit 1' TERM
echo "started as $(id -un) in $PWD"
sleep 300 & wait
""")
    proc = jd.popen("run", str(script), "build_script")
    seen = _read_until(proc, b"started as")
    if b"escapee ready" not in seen:  # its TERM trap is set: SIGTERM alone cannot end it
        seen += _read_until(proc, b"escapee ready")
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGTERM)  # what GitLab Runner does on cancel or timeout
    rest, _ = proc.communicate(timeout=30)
    out = (seen + rest).decode()
    assert proc.returncode == 7, out
    assert "started as nobody in " + str(public_dir / "build" / "job-971") in out
    assert "trapped as nobody" in out  # the trap ran: the driver did not SIGKILL the stage at once
    escapee = int(out.split("escapee=", 1)[1].split()[0])
    assert not _alive(escapee), "a setsid escapee of the build user survived the cancel"
    assert time.monotonic() - t0 >= 1.4  # it had the whole grace period to exit
    assert jd.exit_code_file.read_text() == "143\n"  # written by the driver, readable by the runner
    rec = verify_record(find_markers(out.encode())[-1], {"default": KEY.encode()})
    assert rec.exit_code == 143 and rec.usage.oom_kills == 0
    c = jd.call("cleanup")
    assert c.returncode == 0, c.stderr
    assert not (public_dir / "build" / "job-971").exists()


def test_oom_of_a_build_user_process_is_137(tmp_path, cg_parent, public_dir):  # noqa: F811
    cfg = _config(tmp_path, cg_parent, public_dir, "")
    jd = _job(tmp_path, cfg, 972)
    jd.env["CUSTOM_ENV_KUBERNETES_MEMORY_LIMIT"] = "96Mi"
    assert jd.call("prepare").returncode == 0
    p = jd.call("run", str(jd.script("s.sh", f'{BUILD_PYTHON} -c "{ALLOC}" 300')), "build_script")
    assert p.returncode == 7, p.stdout
    assert jd.exit_code_file.read_text() == "137\n"
    rec = verify_record(find_markers(p.stdout)[-1], {"default": KEY.encode()})
    assert rec.exit_code == 137 and rec.usage.oom_kills >= 1
    assert jd.call("cleanup").returncode == 0


def test_cleanup_removes_a_read_only_tree_the_build_left(tmp_path, cg_parent, public_dir):  # noqa: F811
    """Go's module cache is read-only (0555 directories); ``chmod -R a-w`` is common too.  Deleting
    as the build user must make its directories writable first, or the job directory stays."""
    cfg = _config(tmp_path, cg_parent, public_dir, "")
    jd = _job(tmp_path, cfg, 973)
    assert jd.call("prepare").returncode == 0
    body = "mkdir -p gomod/pkg/sub && echo x > gomod/pkg/sub/f && ln -s /etc/passwd gomod/link && chmod -R a-w gomod"
    p = jd.call("run", str(jd.script("s.sh", body)), "build_script")
    assert p.returncode == 0, p.stdout
    job = public_dir / "build" / "job-973"
    assert (job / "gomod" / "pkg" / "sub" / "f").exists()
    c = jd.call("cleanup")
    assert c.returncode == 0 and b"build directory not removed" not in c.stderr, c.stderr
    assert not job.exists()
    assert os.path.exists("/etc/passwd") and os.stat("/etc/passwd").st_mode & 0o777 == 0o644


def test_reaping_a_crashed_build_user_job_kills_its_build_and_removes_its_dir(tmp_path, cg_parent,
                                                                             public_dir):  # noqa: F811
    cfg = _config(tmp_path, cg_parent, public_dir, "")
    cfg.write_text(cfg.read_text().replace("stale_after_seconds = 3600", "stale_after_seconds = 1"))
    jd = _job(tmp_path, cfg, 974)
    assert jd.call("prepare").returncode == 0
    proc = jd.popen("run", str(jd.script("s.sh", 'echo "build=$$"; exec sleep 300')), "build_script")
    build = int(_read_until(proc, b"build=").split(b"build=", 1)[1].split()[0])
    os.kill(proc.pid, signal.SIGKILL)  # the driver dies mid-stage; its build (uid nobody) runs on
    proc.wait(timeout=10)
    assert _alive(build)
    time.sleep(1.3)  # longer than stale_after_seconds
    (tmp_path / "other").mkdir()
    p = job_dir(tmp_path / "other", cfg, make_payload(975)).call("config")  # the next job's config reaps
    assert p.returncode == 0 and b"reaped stale job cgroup" in p.stderr, p.stderr
    deadline = time.time() + 5
    while _alive(build) and time.time() < deadline:
        time.sleep(0.05)
    assert not _alive(build)
    assert not (public_dir / "build" / "job-974").exists(), "the crashed job's build directory was left"


def test_parent_death_signal_survives_dropping_to_the_build_user(tmp_path, public_dir):  # noqa: F811
    """``measure`` relies on PR_SET_PDEATHSIG; the kernel clears it when the credentials change
    (kernel/cred.c ``commit_creds``), so it must be set *after* ``pre_exec`` dropped privileges."""
    code = f"""
import os, sys, time
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from runner_wrapper.isolation import drop_privileges, resolve_build_user
from runner_wrapper.process import spawn_in_cgroup
user = resolve_build_user("nobody")
pid = spawn_in_cgroup(["sleep", "300"], [], dict(os.environ), pre_exec=lambda: drop_privileges(user),
                      pdeathsig=True)
print(pid, flush=True)
time.sleep(300)
"""
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, cwd="/")
    child = int(parent.stdout.readline())
    assert _alive(child) and os.stat(f"/proc/{child}").st_uid == 65534
    parent.kill()
    parent.wait(timeout=10)
    deadline = time.time() + 5
    while _alive(child) and time.time() < deadline:
        time.sleep(0.05)
    alive = _alive(child)
    if alive:
        os.kill(child, signal.SIGKILL)
    assert not alive, "the build-user child outlived its parent: PR_SET_PDEATHSIG was cleared"
