"""The cgroup v2 backend on a real kernel: no fake, the kernel's own files and answers.

Runs wherever the cgroup2 mount offers the memory controller at its root and we are root: a pure
cgroup v2 host, or the throw-away VM of the v2 lane (tests/vm/cgroup2-lane.sh boots Debian 12's stock
6.1 kernel over this machine's filesystem; tests/wrapper/test_cgroup_v2_vm.py runs this file there and
reports each test).  Elsewhere (this project's hybrid hosts) every test skips with the reason.

Figures (peak vs limit, the spike, CPU seconds, SIGTERM timing) are appended as JSON lines to
``$RIGHTSIZER_V2_FIGURES`` when it is set, so the lane can print what the kernel measured.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from runner_wrapper.cgroup.v2 import V2Backend, find_cgroup2_mount

MiB = 2**20
_n = itertools.count()


def _why_not() -> str | None:
    mount = find_cgroup2_mount()
    if mount is None:
        return "no cgroup2 mount on this host"
    try:
        controllers = open(os.path.join(mount, "cgroup.controllers")).read().split()
    except OSError:
        controllers = []
    if "memory" not in controllers:
        return (f"the cgroup2 mount {mount} offers {' '.join(controllers) or 'no controllers'}, not memory "
                f"(hybrid host: memory is bound to cgroup v1); the real-kernel v2 tests run in the VM lane "
                f"(tests/wrapper/test_cgroup_v2_vm.py)")
    if os.geteuid() != 0:
        return "needs root to create cgroups under the cgroup2 root"
    return None


pytestmark = [pytest.mark.skipif(_why_not() is not None, reason=_why_not() or ""), pytest.mark.cgroup, pytest.mark.slow]


def figure(test: str, **values: object) -> None:
    """Record what the kernel measured, for the lane's report."""
    path = os.environ.get("RIGHTSIZER_V2_FIGURES")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps({"test": test, **values}) + "\n")


def _rm_tree(top: str) -> None:
    """Kill what is left below ``top`` and remove it, deepest first (cgroupfs has no rmtree)."""
    if not os.path.isdir(top):
        return
    for sub, _dirs, _files in os.walk(top):
        if os.path.exists(os.path.join(sub, "cgroup.kill")):
            with open(os.path.join(sub, "cgroup.kill"), "w") as fh:
                fh.write("1")
    for sub, _dirs, _files in sorted(os.walk(top), key=lambda t: -len(t[0])):
        for _ in range(100):
            try:
                os.rmdir(sub)
                break
            except OSError:
                time.sleep(0.02)


@pytest.fixture
def parent():
    """A fresh parent that does NOT exist yet (the first build on a host creates it), removed afterwards."""
    mount = find_cgroup2_mount() or "/sys/fs/cgroup"
    name = f"rightsizer-real-{os.getpid()}-{next(_n)}"
    assert not os.path.exists(os.path.join(mount, name))
    yield name
    _rm_tree(os.path.join(mount, name))


def config(tmp_path: Path, parent: str, interval: float = 0.05) -> Path:
    p = tmp_path / "wrapper.toml"
    p.write_text(f'[cgroup]\nbackend = "v2"\nparent = "{parent}"\n\n[sampler]\ninterval = {interval}\n')
    p.chmod(0o644)
    return p


def measure(cfg: Path, *cmd: str, memory: str | None = None, cpus: str | None = None,
            pre: object = None, timeout: float = 120) -> tuple[int, dict | None, str]:
    """``runner-wrapper measure --json -- CMD``: (exit code, the JSON summary, stderr)."""
    argv = [sys.executable, "-m", "runner_wrapper", "--config", str(cfg), "measure", "--json"]
    argv += (["--memory-limit", memory] if memory else []) + (["--cpus", cpus] if cpus else []) + ["--", *cmd]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, preexec_fn=pre,  # type: ignore
                       env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    summary = None
    for line in p.stderr.splitlines():
        if line.startswith("{"):
            summary = json.loads(line)
    return p.returncode, summary, p.stderr


def alloc(mib: int, hold: float = 0.0, then_sleep: float = 0.0) -> list[str]:
    """A command that touches ``mib`` MiB, holds it, frees it, then idles."""
    return [sys.executable, "-c",
            f"import time; b = b'x' * ({mib} * 2**20); time.sleep({hold}); del b; time.sleep({then_sleep})"]


# --------------------------------------------------------------------------- the defects


def test_first_measure_without_a_limit_has_a_peak_and_a_mean(tmp_path, parent):
    """Defect 1: on a fresh parent the first command's memory peak and mean came out null."""
    rc, m, err = measure(config(tmp_path, parent), *alloc(100, hold=0.5))
    assert rc == 0, err
    assert m["backend"] == "cgroup-v2"
    assert m["memory_peak_bytes"] is not None and m["memory_peak_bytes"] >= 100 * MiB, m
    assert m["memory_mean_bytes"] is not None, m
    figure("peak_without_limit", peak_mib=round(m["memory_peak_bytes"] / MiB, 1),
           mean_mib=round(m["memory_mean_bytes"] / MiB, 1), touched_mib=100)


def test_first_measure_with_a_limit_has_a_peak_below_the_limit(tmp_path, parent):
    rc, m, err = measure(config(tmp_path, parent), *alloc(100, hold=0.3), memory="256Mi")
    assert rc == 0, err
    assert 100 * MiB <= m["memory_peak_bytes"] <= 256 * MiB, m
    assert m["oom_kills"] == 0
    figure("peak_with_limit", peak_mib=round(m["memory_peak_bytes"] / MiB, 1), limit_mib=256, touched_mib=100)


def test_doctor_finds_memory_peak_and_cgroup_kill_in_a_child(tmp_path, parent):
    """Defects 2 and 3: doctor probed the root, which never has memory.peak or cgroup.kill."""
    from runner_wrapper.config import load_config
    from runner_wrapper.doctor import diagnose

    mount = find_cgroup2_mount() or ""
    assert not os.path.exists(os.path.join(mount, "memory.peak"))  # the kernel's rule the old probe missed
    d = diagnose(load_config(str(config(tmp_path, parent))), {"RIGHTSIZER_SIGNING_KEY": "k" * 16})
    b = d["backend"]
    assert (b["backend"], b["memory_peak_file"], b["cgroup_kill"]) == ("cgroup-v2", "memory.peak", True), b
    assert not os.path.exists(b["probe"]["probe_cgroup"])
    assert "kill via cgroup.kill" in d["plan"][0]
    figure("doctor", memory_peak_file=b["memory_peak_file"], cgroup_kill=b["cgroup_kill"], psi=b["psi"],
           controllers=b["controllers"])


# --------------------------------------------------------------------------- the lane's coverage


def test_oom_kill_gives_137(tmp_path, parent):
    rc, m, err = measure(config(tmp_path, parent), *alloc(300), memory="64Mi")
    assert rc == 137, err
    assert m["oom_kills"] >= 1 and m["exit_code"] == 137
    assert m["memory_peak_bytes"] <= 64 * MiB
    figure("oom", exit_code=rc, oom_kills=m["oom_kills"], peak_mib=round(m["memory_peak_bytes"] / MiB, 1),
           limit_mib=64)


def test_oom_through_the_runner_is_script_failure_137(tmp_path, parent):
    """The whole GitLab Runner call sequence (job cgroup, stage children) on the real kernel."""
    from standin.runner import run_job
    from runner_wrapper.record import find_markers, verify_record

    from .conftest import make_payload, write_config

    cfg = write_config(tmp_path, parent, backend="v2")
    payload = make_payload(9137, script=[f"{sys.executable} -c 'b = bytearray(300 * 2**20)'"],
                           variables={"KUBERNETES_MEMORY_LIMIT": "100Mi"})
    r = run_job(payload, driver_cmd=[sys.executable, "-m", "runner_wrapper", "--config", str(cfg), "executor"],
                workdir=tmp_path / "w", extra_env={"RIGHTSIZER_SIGNING_KEY": "vm-lane-key-0123456789"})
    assert (r.status, r.failure_reason, r.exit_code) == ("failed", "script_failure", 137), r.log[-2000:]
    rec = verify_record(find_markers(r.log)[-1], {"default": b"vm-lane-key-0123456789"})
    assert rec.oom_killed and rec.exit_code == 137
    assert rec.usage.memory_peak_bytes is not None and rec.usage.memory_peak_bytes <= 100 * MiB
    figure("oom_job", exit_code=r.exit_code, failure_reason=r.failure_reason,
           peak_mib=round(rec.usage.memory_peak_bytes / MiB, 1), limit_mib=100)


def test_a_200ms_spike_is_caught_by_memory_peak(tmp_path, parent):
    """memory.peak is the kernel's high-water mark: a spike between two samples is not lost."""
    from runner_wrapper.executor import run_in_group

    rc, m, err = measure(config(tmp_path, parent, interval=1.0), *alloc(300, hold=0.2, then_sleep=1.5))
    assert rc == 0, err
    assert m["memory_peak_bytes"] >= 300 * MiB, m
    # The same spike in a bare stage cgroup, to show what 1 s sampling alone would have seen.
    g = V2Backend(find_cgroup2_mount() or "", parent).group("job-1/build_script-1")
    g.create()
    _ex, counters, sampled, _left, _sig = run_in_group(alloc(300, hold=0.2, then_sleep=1.5), g, dict(os.environ), 1.0)
    assert counters.memory_peak_bytes >= 300 * MiB
    figure("spike", peak_mib=round(m["memory_peak_bytes"] / MiB, 1), spike_mib=300, spike_ms=200,
           sampler_interval_s=1.0, stage_peak_mib=round(counters.memory_peak_bytes / MiB, 1),
           stage_sampled_max_mib=round((sampled.memory_max_bytes or 0) / MiB, 1))


def test_cpu_seconds_match_the_work_done(tmp_path, parent):
    """cpu.stat user+system against the CPU time the command itself burned (its own clock)."""
    burn = 1.5
    out = tmp_path / "burned"
    cmd = [sys.executable, "-c",
           f"import time\nwhile time.process_time() < {burn}: pass\nopen({str(out)!r}, 'w').write(str(time.process_time()))"]
    rc, m, err = measure(config(tmp_path, parent), *cmd)
    assert rc == 0, err
    own = float(out.read_text())
    got = m["cpu_user_seconds"] + m["cpu_system_seconds"]
    assert own <= got <= own * 1.3 + 0.5, (own, got)
    figure("cpu", burn_until_own_cpu_s=burn, process_own_s=round(own, 3), cgroup_s=round(got, 3),
           wall_s=m["wall_seconds"])


def test_cpu_limit_throttles(tmp_path, parent):
    """cpu.max = 50000 100000: one busy second of CPU takes about two seconds of wall time."""
    cmd = [sys.executable, "-c", "import time\nwhile time.process_time() < 1.0: pass"]
    rc, m, err = measure(config(tmp_path, parent), *cmd, cpus="0.5")
    assert rc == 0, err
    cpu = m["cpu_user_seconds"] + m["cpu_system_seconds"]
    assert m["wall_seconds"] >= cpu / 0.5 * 0.8, m
    figure("cpu_limit", cpus=0.5, cgroup_cpu_s=round(cpu, 3), wall_s=m["wall_seconds"],
           mean_cores=m["cpu_mean_cores"])


def test_cgroup_kill_takes_a_forking_tree_and_a_setsid_escapee(parent):
    from runner_wrapper.process import spawn_in_cgroup

    b = V2Backend(find_cgroup2_mount() or "", parent)
    g = b.group("job-1/build_script-1")
    g.create()
    assert os.path.exists(g._f("cgroup.kill"))
    pid = spawn_in_cgroup(["sh", "-c", "setsid sleep 300 & sleep 300 & (sleep 300 &) ; wait"],
                          g.attach_files(), dict(os.environ))
    deadline = time.monotonic() + 10
    while len(g.pids()) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    before = g.pids()
    assert len(before) >= 4
    t0 = time.monotonic()
    assert g.kill_all(timeout=5) >= 4
    took = time.monotonic() - t0
    os.waitpid(pid, 0)
    assert not g.pids()
    for p in before:
        assert not os.path.exists(f"/proc/{p}") or open(f"/proc/{p}/stat").read().split()[2] == "Z"
    g.remove()
    figure("cgroup_kill", processes=len(before), seconds=round(took, 3))


def test_leftover_background_processes_are_reaped(tmp_path, parent):
    from runner_wrapper.executor import run_in_group

    b = V2Backend(find_cgroup2_mount() or "", parent)
    g = b.group("job-2/build_script-1")
    g.create()
    pidfile = tmp_path / "daemon.pid"
    ex, counters, _s, leftover, _sig = run_in_group(
        ["sh", "-c", f"nohup sleep 300 >/dev/null 2>&1 & echo $! > {pidfile}"], g, dict(os.environ), 0.05)
    assert ex.shell_code == 0 and leftover == 1
    daemon = int(pidfile.read_text())
    time.sleep(0.1)
    assert not os.path.exists(f"/proc/{daemon}") or open(f"/proc/{daemon}/stat").read().split()[2] == "Z"
    assert not g.pids()
    g.remove()
    figure("leftovers", killed=leftover)


def _term_script(tmp_path: Path) -> tuple[list[str], Path, Path]:
    ready, trapped = tmp_path / "ready", tmp_path / "trapped"
    script = (f"trap 'echo graceful > {trapped}; exit 143' TERM; "
              f"(trap '' TERM; exec sleep 300) & setsid sleep 300 & echo up > {ready}; "
              f"while :; do sleep 0.1; done")
    return ["sh", "-c", script], ready, trapped


def _start_and_term(tmp_path: Path, parent: str) -> tuple[subprocess.Popen, float, Path]:
    cmd, ready, trapped = _term_script(tmp_path)
    p = subprocess.Popen([sys.executable, "-m", "runner_wrapper", "--config", str(config(tmp_path, parent)),
                          "measure", "--json", "--", *cmd], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ready.exists(), "the build never started"
    time.sleep(0.3)
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=90)
    return p, time.monotonic() - t0, trapped


def test_sigterm_leaves_nothing_running(tmp_path, parent):
    """After SIGTERM the wrapper ends everything in the cgroup (a TERM-ignoring child, a setsid escapee)."""
    p, took, _trapped = _start_and_term(tmp_path, parent)
    mount = find_cgroup2_mount() or ""
    left = [d for d, _s, _f in os.walk(os.path.join(mount, parent))
            if open(os.path.join(d, "cgroup.procs")).read().split()]
    assert left == [], left
    figure("sigterm_cleanup", wrapper_exit=p.returncode, seconds_to_exit=round(took, 3))


def test_sigterm_gives_the_build_its_grace(tmp_path, parent):
    """The build's TERM trap runs (it gets SIGTERM, not an immediate cgroup.kill)."""
    p, took, trapped = _start_and_term(tmp_path, parent)
    figure("sigterm_grace", trap_ran=trapped.exists(), seconds_to_exit=round(took, 3), wrapper_exit=p.returncode)
    assert trapped.exists(), "the build's TERM trap never ran"
    assert p.returncode == 143, "a canceled build is recorded as 143 (SIGTERM), never as 137 (OOM)"


# --------------------------------------------------------------------------- a delegated parent


NOBODY = 65534


def _delegate(mount: str, parent: str) -> tuple[Path, Path]:
    """What systemd does for ``Delegate=yes`` + ``DelegateSubgroup=supervisor`` (systemd.resource-control(5),
    cgroup-v2.rst "Delegation"): the service cgroup and its files handed to the service user."""
    top = Path(mount) / parent
    svc = top / "runner.service"
    sup = svc / "supervisor"
    top.mkdir()
    (Path(mount) / "cgroup.subtree_control").write_text("+memory +cpu")
    (top / "cgroup.subtree_control").write_text("+memory +cpu")
    svc.mkdir()
    sup.mkdir()
    for d in (svc, sup):
        os.chown(d, NOBODY, NOBODY)
        for f in ("cgroup.procs", "cgroup.subtree_control", "cgroup.threads"):
            os.chown(d / f, NOBODY, NOBODY)
    return svc, sup


def _can_run_as_nobody() -> str | None:
    try:
        p = subprocess.run([sys.executable, "-c", "import runner_wrapper"], user=NOBODY, capture_output=True,
                           text=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}, cwd="/")
    except OSError as exc:
        return (f"uid {NOBODY} cannot run {sys.executable}: {exc.strerror} (an interpreter under a 0700 "
                f"home; the VM lane makes it reachable, see tests/vm/cgroup2-lane.sh)")
    return None if p.returncode == 0 else f"uid {NOBODY} cannot import runner_wrapper: {p.stderr[-300:]}"


def test_delegated_parent_as_an_unprivileged_runner(tmp_path, parent):
    """A runner running as an unprivileged user, in the supervisor leaf of its delegated service cgroup."""
    why = _can_run_as_nobody()
    if why:
        pytest.skip(why)
    mount = find_cgroup2_mount() or ""
    svc, sup = _delegate(mount, parent)
    readable = Path(tempfile.mkdtemp(prefix="rightsizer-delegated-"))  # pytest's tmp_path is root's 0700
    readable.chmod(0o755)

    def join_supervisor() -> None:
        """In the child before exec: join the supervisor leaf as root (moving out of the root cgroup needs
        write access to the common ancestor's cgroup.procs), then become the unprivileged runner user."""
        with open(sup / "cgroup.procs", "w") as fh:
            fh.write(str(os.getpid()))
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)

    cfg = config(readable, f"{parent}/runner.service/builds")
    try:
        rc, m, err = measure(cfg, *alloc(50, hold=0.3), memory="128Mi", pre=join_supervisor)
        rc2, _m2, err2 = measure(cfg, *alloc(300), memory="64Mi", pre=join_supervisor)
    finally:
        shutil.rmtree(readable)
    assert rc == 0, err
    assert m["backend"] == "cgroup-v2" and m["memory_peak_bytes"] >= 50 * MiB, m
    assert (svc / "builds").stat().st_uid == NOBODY
    assert set((svc / "cgroup.subtree_control").read_text().split()) >= {"memory", "cpu"}
    assert rc2 == 137, err2
    figure("delegated", uid=NOBODY, parent=f"{parent}/runner.service/builds", peak_mib=round(m["memory_peak_bytes"] / MiB, 1),
           oom_exit=rc2)


def test_delegated_parent_still_holding_the_runner_names_ebusy(tmp_path, parent):
    """Without the supervisor leaf the kernel refuses controllers (no internal processes): a clear error."""
    mount = find_cgroup2_mount() or ""
    svc, _sup = _delegate(mount, parent)

    def join_service() -> None:
        with open(svc / "cgroup.procs", "w") as fh:
            fh.write(str(os.getpid()))

    rc, _m, err = measure(config(tmp_path, f"{parent}/runner.service"), "true", pre=join_service)
    assert rc == 125, err
    assert "runner.service/cgroup.subtree_control: Device or resource busy" in err, err
