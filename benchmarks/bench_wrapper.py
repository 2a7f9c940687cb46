#!/usr/bin/env python3
"""Benchmark the runner wrapper's own cost (prints numbers; not a test).

1. Per-stage overhead: ``runner-wrapper executor run SCRIPT STAGE`` versus
   ``bash SCRIPT`` for a trivial script, N times each, interleaved; median and
   p90 of the difference.  Both a plain stage (``get_sources``) and the main
   stage (``build_script``, which also builds and signs the usage marker).
   Target: <= 50 ms median added.
2. Sampling CPU overhead during a 10 s busy build: CPU time used by the
   driver process itself (``/proc/PID/stat`` utime+stime, children excluded)
   over the build's wall time.  Target: < 1 % of one core.
3. Wrapper RSS: the driver's ``VmHWM`` during that build.  Target: < 40 MB.

Needs root and a writable cgroup v1/v2 hierarchy for real numbers (else the
psutil fallback is measured and the output says so).  Usage::

    .venv/bin/python benchmarks/bench_wrapper.py [--runs 30] [--busy-seconds 10]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def driver_cmd(config: Path) -> list[str]:
    exe = shutil.which("runner-wrapper", path=str(Path(sys.executable).parent)) or shutil.which("runner-wrapper")
    base = [exe] if exe else [sys.executable, "-m", "runner_wrapper"]
    return base + ["--config", str(config), "executor"]


def setup(tmp: Path, job_id: int) -> tuple[Path, dict[str, str]]:
    parent = f"rightsizer-bench-{os.getpid()}"
    cfg = tmp / "wrapper.toml"
    cfg.write_text(f'[cgroup]\nparent = "{parent}"\n[executor]\nstate_dir = "{tmp / "state"}"\n'
                   f'[sinks]\nspool = "{tmp / "spool.jsonl"}"\n')
    job = tmp / f"job{job_id}"
    job.mkdir()
    (job / "response.json").write_text(json.dumps({
        "id": job_id, "job_info": {"name": "bench", "project_id": 1, "project_full_path": "bench/p"},
        "git_info": {"ref": "main"}, "variables": []}))
    env = dict(os.environ, TMPDIR=str(job), BUILD_FAILURE_EXIT_CODE="1", SYSTEM_FAILURE_EXIT_CODE="2",
               BUILD_EXIT_CODE_FILE=str(job / "build_exit_code"), JOB_RESPONSE_FILE=str(job / "response.json"),
               RIGHTSIZER_SIGNING_KEY="bench-signing-key")
    return cfg, env


def _children_cpu() -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def proc_cpu_and_hwm(pid: int) -> tuple[float, int] | None:
    try:
        stat = open(f"/proc/{pid}/stat").read()
        status = open(f"/proc/{pid}/status").read()
    except OSError:
        return None
    f = stat[stat.rindex(")") + 2:].split()
    cpu = (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    hwm = next((int(ln.split()[1]) * 1024 for ln in status.splitlines() if ln.startswith("VmHWM:")), 0)
    return cpu, hwm


def with_job_env(cmd: list[str], env: dict[str, str]) -> dict[str, str]:
    """Call ``config`` and add its ``job_env`` to later calls, as GitLab Runner does."""
    out = subprocess.run(cmd + ["config"], env=env, cwd=env["TMPDIR"], check=True, capture_output=True).stdout
    return {**env, **json.loads(out).get("job_env", {})}


def bench_overhead(tmp: Path, runs: int) -> None:
    cfg, env = setup(tmp, 910001)
    cmd = driver_cmd(cfg)
    env = with_job_env(cmd, env)
    script = tmp / "script.sh"
    script.write_text("echo hello >/dev/null\n")
    subprocess.run(cmd + ["prepare"], env=env, cwd=env["TMPDIR"], check=True, capture_output=True)
    backend = json.loads((tmp / "state" / "job-910001.json").read_text())["backend"]
    print(f"backend: {backend}; driver: {' '.join(cmd[:1])}")
    base = []
    for _ in range(runs):
        r0 = _children_cpu()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
        base.append(_children_cpu() - r0)
    print(f"baseline: a bare `python -c pass` of this interpreter costs {statistics.median(base) * 1000:.1f} ms CPU")
    for stage in ("get_sources", "build_script"):
        direct, wrapped, cpu_direct, cpu_wrapped = [], [], [], []
        for _ in range(runs):
            r0, t = _children_cpu(), time.perf_counter()
            subprocess.run(["bash", str(script)], env=env, check=True)
            direct.append(time.perf_counter() - t)
            cpu_direct.append(_children_cpu() - r0)
            r0, t = _children_cpu(), time.perf_counter()
            subprocess.run(cmd + ["run", str(script), stage], env=env, cwd=env["TMPDIR"], check=True,
                           stdout=subprocess.DEVNULL)
            wrapped.append(time.perf_counter() - t)
            cpu_wrapped.append(_children_cpu() - r0)
        added = sorted(w - d for w, d in zip(wrapped, direct))
        p90 = added[int(len(added) * 0.9) - 1]
        cpu_added = statistics.median(w - d for w, d in zip(cpu_wrapped, cpu_direct))
        print(f"per-stage overhead [{stage}]: bash direct median {statistics.median(direct) * 1000:.1f} ms, "
              f"wrapped median {statistics.median(wrapped) * 1000:.1f} ms, added median "
              f"{statistics.median(added) * 1000:.1f} ms (p90 {p90 * 1000:.1f} ms) over {runs} runs  [target <= 50 ms]")
        print(f"    CPU time added per stage (user+system of the driver, load-independent): "
              f"median {cpu_added * 1000:.1f} ms")
    subprocess.run(cmd + ["cleanup"], env=env, cwd=env["TMPDIR"], capture_output=True)


def bench_busy(tmp: Path, seconds: float) -> None:
    cfg, env = setup(tmp, 910002)
    cmd = driver_cmd(cfg)
    env = with_job_env(cmd, env)
    script = tmp / "busy.sh"
    script.write_text(f"{sys.executable} -c 'import time\nt=time.time()\nwhile time.time()-t<{seconds}: pass'\n")
    subprocess.run(cmd + ["prepare"], env=env, cwd=env["TMPDIR"], check=True, capture_output=True)
    t = time.perf_counter()
    p = subprocess.Popen(cmd + ["run", str(script), "build_script"], env=env, cwd=env["TMPDIR"],
                         stdout=subprocess.DEVNULL)
    last = None
    while p.poll() is None:
        got = proc_cpu_and_hwm(p.pid)
        if got:
            last = got
        time.sleep(0.05)
    wall = time.perf_counter() - t
    subprocess.run(cmd + ["cleanup"], env=env, cwd=env["TMPDIR"], capture_output=True)
    if not last:
        print("busy build: could not read the driver's /proc entries")
        return
    cpu, hwm = last
    print(f"busy build {seconds:.0f} s: driver's own CPU {cpu * 1000:.0f} ms over {wall:.1f} s wall = "
          f"{cpu / wall * 100:.2f} % of one core (start-up included)  [target < 1 %]")
    print(f"wrapper RSS (VmHWM of the driver during the build): {hwm / 2**20:.1f} MiB  [target < 40 MB]")

    # The sampler alone, in-process, at the default and a 10x faster interval.
    from runner_wrapper.cgroup.detect import select_backend
    from runner_wrapper.config import load_config
    from runner_wrapper.executor import run_in_group

    c = load_config(str(cfg))
    backend = select_backend(c.cgroup).backend
    for interval in (0.5, 0.05):
        g = backend.group(f"sampler-{int(interval * 1000)}")
        g.create()
        t0, w0 = time.process_time(), time.perf_counter()
        run_in_group(["bash", str(script)], g, dict(os.environ), interval)
        cpu, wall = time.process_time() - t0, time.perf_counter() - w0
        g.kill_all()
        g.remove()
        print(f"sampler at {interval} s interval: {cpu * 1000:.0f} ms CPU over {wall:.1f} s = "
              f"{cpu / wall * 100:.3f} % of one core")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--busy-seconds", type=float, default=10.0)
    a = ap.parse_args()
    with open("/proc/loadavg") as fh:
        print(f"load average at start: {fh.read().split()[0]} on {os.cpu_count()} CPUs")
    # pip compiles .pyc files at install time; an editable checkout (and PYTHONDONTWRITEBYTECODE=1)
    # would make every driver start compile the sources again, which is not what a runner host sees.
    import compileall

    compileall.compile_dir(str(ROOT / "runner_wrapper"), quiet=1)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    tmp = Path(tempfile.mkdtemp(prefix="rightsizer-bench-"))
    try:
        bench_overhead(tmp, a.runs)
        bench_busy(tmp, a.busy_seconds)
    finally:
        parent = f"rightsizer-bench-{os.getpid()}"
        for ctrl in ("memory", "cpu", "cpuacct"):
            d = Path("/sys/fs/cgroup") / ctrl / parent
            if d.is_dir():
                for sub in sorted(d.glob("**/"), key=lambda x: -len(str(x))):
                    try:
                        sub.rmdir()
                    except OSError:
                        pass
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
