#!/usr/bin/env python3
"""Benchmark the runner wrapper's own cost (prints numbers; not a test).

1. Per-stage overhead: ``runner-wrapper executor run SCRIPT STAGE`` versus
   ``bash SCRIPT`` for a trivial script, N times each, interleaved; median and
   p90 of the difference.  Both a plain stage (``get_sources``) and the main
   stage (``build_script``, which also builds and signs the usage marker).
   Target: <= 50 ms median added.  Measured for three launches:

   - **production**: a throwaway venv with a normal, non-editable ``pip install``
     of this checkout (what a runner host has), started through pip's
     ``bin/runner-wrapper`` console script;
   - **production, -I -m**: the same venv's ``python -I -m runner_wrapper`` (what
     ``packaging/runner/config.toml.example`` recommends);
   - **dev (editable)**: this checkout's ``.venv`` (editable install: its import
     finder alone costs ~20 ms per start).

   A job is re-created (cleanup + prepare, untimed) every ``--stages-per-job``
   runs, so the job state holds as many stages as a real job.
2. Sampling CPU overhead during a 10 s busy build: CPU time used by the
   driver process itself (``/proc/PID/stat`` utime+stime, children excluded)
   over the build's wall time.  Target: < 1 % of one core.
3. Wrapper RSS: the driver's ``VmHWM`` during that build.  Target: < 40 MB.

Needs root and a writable cgroup v1/v2 hierarchy for real numbers (else the
psutil fallback is measured and the output says so).  Usage::

    .venv/bin/python benchmarks/bench_wrapper.py [--runs 30] [--busy-seconds 10] [--no-production]

The load average (``/proc/loadavg``) is printed at the start and the end: the
machine is shared, so read the numbers with it.
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


def driver_cmd(config: Path, launcher: list[str] | None = None) -> list[str]:
    if launcher is None:
        exe = shutil.which("runner-wrapper", path=str(Path(sys.executable).parent)) or shutil.which("runner-wrapper")
        launcher = [exe] if exe else [sys.executable, "-m", "runner_wrapper"]
    return launcher + ["--config", str(config), "executor"]


def production_venv(tmp: Path) -> Path:
    """A throwaway venv with a normal (non-editable) install of this checkout, as on a runner host.

    The sources are copied first so that the build leaves nothing in the checkout; the runtime
    dependencies the driver uses (psutil, structlog, tenacity, prometheus-client) come from pip's
    configured index/cache.  ``--system-site-packages`` is not used: nothing leaks in from elsewhere.
    """
    src = tmp / "src"
    src.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for pkg in ("runner_wrapper", "retry_bot"):
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    subprocess.run(pip + ["--no-deps", str(src)], check=True, **quiet)  # type: ignore[call-overload]
    subprocess.run(pip + ["psutil", "structlog", "tenacity", "prometheus-client"], check=True,
                   **quiet)  # type: ignore[call-overload]
    return venv


def write_wrapper_toml(tmp: Path) -> Path:
    parent = f"rightsizer-bench-{os.getpid()}"
    cfg = tmp / "wrapper.toml"
    cfg.write_text(f'[cgroup]\nparent = "{parent}"\n[executor]\nstate_dir = "{tmp / "state"}"\n'
                   f'[sinks]\nspool = "{tmp / "spool.jsonl"}"\n')
    return cfg


def setup(tmp: Path, job_id: int, cfg: Path | None = None) -> tuple[Path, dict[str, str]]:
    cfg = cfg or write_wrapper_toml(tmp)
    job = tmp / f"job{job_id}"
    job.mkdir()
    (job / "response.json").write_text(json.dumps({
        "id": job_id, "job_info": {"name": "bench", "project_id": 1, "project_full_path": "bench/p"},
        "git_info": {"ref": "main"}, "variables": []}))
    env = dict(os.environ, TMPDIR=str(job), BUILD_FAILURE_EXIT_CODE="1", SYSTEM_FAILURE_EXIT_CODE="2",
               BUILD_EXIT_CODE_FILE=str(job / "build_exit_code"), JOB_RESPONSE_FILE=str(job / "response.json"),
               RIGHTSIZER_SIGNING_KEY="bench-signing-key", JOB_ID=str(job_id))
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


def _new_job(tmp: Path, cmd: list[str], job_id: int, cfg: Path) -> dict[str, str]:
    _cfg, env = setup(tmp, job_id, cfg)
    env = with_job_env(cmd, env)
    subprocess.run(cmd + ["prepare"], env=env, cwd=env["TMPDIR"], check=True, capture_output=True)
    return env


class Variant:
    """One way of launching the driver, with its own job directory and job."""

    def __init__(self, label: str, launcher: list[str] | None, work: Path, per_job: int) -> None:
        self.label, self.work, self.per_job = label, work, per_job
        self.cfg = write_wrapper_toml(work)
        self.cmd = driver_cmd(self.cfg, launcher)
        if launcher and "python" in Path(launcher[0]).name:
            self.python = launcher[0]
        else:  # the console script's shebang names its interpreter
            exe = Path(self.cmd[0])
            self.python = exe.read_text().splitlines()[0][2:].strip() if exe.is_file() else sys.executable
        self.job_ids = iter(range(910001, 919999))
        self.env = _new_job(work, self.cmd, next(self.job_ids), self.cfg)
        self.runs = 0
        self.added: dict[str, list[float]] = {}
        self.cpu_added: dict[str, list[float]] = {}

    def backend(self) -> str:
        from runner_wrapper.state import load_state

        st = load_state(str(self.work / "state" / f"job-{int(self.env['JOB_ID'])}.state"))
        return st.backend if st else "unknown (no job state)"

    def measure(self, script: Path, stage: str) -> None:
        if self.runs and self.runs % self.per_job == 0:  # a new job: its state holds a real job's stages
            subprocess.run(self.cmd + ["cleanup"], env=self.env, cwd=self.env["TMPDIR"], capture_output=True)
            self.env = _new_job(self.work, self.cmd, next(self.job_ids), self.cfg)
        self.runs += 1
        r0, t = _children_cpu(), time.perf_counter()
        subprocess.run(["bash", str(script)], env=self.env, check=True)
        direct, cpu_direct = time.perf_counter() - t, _children_cpu() - r0
        r0, t = _children_cpu(), time.perf_counter()
        subprocess.run(self.cmd + ["run", str(script), stage], env=self.env, cwd=self.env["TMPDIR"], check=True,
                       stdout=subprocess.DEVNULL)
        wrapped, cpu_wrapped = time.perf_counter() - t, _children_cpu() - r0
        self.added.setdefault(stage, []).append(wrapped - direct)
        self.cpu_added.setdefault(stage, []).append(cpu_wrapped - cpu_direct)

    def close(self) -> None:
        subprocess.run(self.cmd + ["cleanup"], env=self.env, cwd=self.env["TMPDIR"], capture_output=True)


def _p(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(round(q * len(v))) - 1))]


def bench_overhead(tmp: Path, runs: int, launchers: list[tuple[str, list[str] | None]], per_job: int) -> None:
    """All launchers measured in the same loop (round robin), so they share the machine's load."""
    variants = []
    for i, (label, launcher) in enumerate(launchers):
        work = tmp / f"v{i}"
        work.mkdir()
        variants.append(Variant(label, launcher, work, per_job))
    script = tmp / "script.sh"
    script.write_text("echo hello >/dev/null\n")
    for v in variants:
        base = []
        for _ in range(max(5, runs // 3)):
            r0 = _children_cpu()
            subprocess.run([v.python, "-c", "pass"], env=v.env, check=True)
            base.append(_children_cpu() - r0)
        print(f"[{v.label}] backend {v.backend()}; driver: {' '.join(v.cmd[:-3])}; a bare `python -c pass` of "
              f"this interpreter costs {statistics.median(base) * 1000:.1f} ms CPU")
    for stage in ("get_sources", "build_script"):
        for _ in range(runs):
            for v in variants:
                v.measure(script, stage)
    print(f"per-stage overhead of `executor run` versus `bash SCRIPT` ({runs} runs each, interleaved; "
          f"target <= 50 ms median added):")
    for v in variants:
        for stage in ("get_sources", "build_script"):
            a, c = v.added[stage], v.cpu_added[stage]
            print(f"  [{v.label}] {stage:12s}: added wall median {statistics.median(a) * 1000:5.1f} ms, "
                  f"p90 {_p(a, 0.9) * 1000:5.1f} ms;  added CPU median {statistics.median(c) * 1000:5.1f} ms, "
                  f"p90 {_p(c, 0.9) * 1000:5.1f} ms")
        v.close()


def bench_busy(tmp: Path, seconds: float, launcher: list[str] | None = None) -> None:
    cfg, env = setup(tmp, 920002)
    cmd = driver_cmd(cfg, launcher)
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
    from runner_wrapper.stagerun import run_in_group

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


def _loadavg() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--busy-seconds", type=float, default=10.0)
    ap.add_argument("--stages-per-job", type=int, default=10)
    ap.add_argument("--no-production", action="store_true", help="skip the throwaway production venv")
    a = ap.parse_args()
    print(f"load average (1/5/15 min) at start: {_loadavg()} on {os.cpu_count()} CPUs")
    # pip compiles .pyc files at install time; an editable checkout (and PYTHONDONTWRITEBYTECODE=1)
    # would make every driver start compile the sources again, which is not what a runner host sees.
    import compileall

    compileall.compile_dir(str(ROOT / "runner_wrapper"), quiet=1)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    tmp = Path(tempfile.mkdtemp(prefix="rightsizer-bench-"))
    try:
        variants: list[tuple[str, list[str] | None]] = []
        if not a.no_production:
            t = time.perf_counter()
            venv = production_venv(tmp / "prod")
            print(f"production venv (non-editable pip install) built in {time.perf_counter() - t:.0f} s: {venv}")
            variants += [("production, bin/runner-wrapper", [str(venv / "bin" / "runner-wrapper")]),
                         ("production, python -I -m", [str(venv / "bin" / "python"), "-I", "-m", "runner_wrapper"])]
        variants.append(("dev editable .venv", None))
        overhead = tmp / "overhead"
        overhead.mkdir()
        bench_overhead(overhead, a.runs, variants, a.stages_per_job)
        print(f"load average after the overhead runs: {_loadavg()}")
        busy = tmp / "busy"
        busy.mkdir()
        bench_busy(busy, a.busy_seconds, variants[0][1])
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
        print(f"load average (1/5/15 min) at end: {_loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
