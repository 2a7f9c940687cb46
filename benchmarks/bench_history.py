#!/usr/bin/env python3
"""History at scale: the allocation server over a year of usage records, with records streaming in.

    .venv/bin/python benchmarks/bench_history.py [--records 100000] [--state URL]
        [--ingest-rate 500] [--seconds 20] [--clients 2] [--json]

1. **Seed** ``--records`` usage records into the state store (SQLite in a temporary
   directory, or ``--state postgresql://...``).  Rows are written with the store's own
   column layout (``retry_bot.state.usage.usage_row`` of a real record, varied per job) in
   large transactions: this phase only prepares the history and is not a figure of merit.
2. **Start** ``AllocationServer`` on that store and measure how fast its model takes the
   history in (records/s), while clients already ask for allocations over HTTP (the whole
   history is one big refresh: allocations must not stall meanwhile).
3. **Continuous ingest**: a writer stores new records through the real ingest path
   (``Store.add_usage_records``) at ``--ingest-rate`` per second for ``--seconds``, while
   ``--clients`` threads ask for allocations over HTTP (a connection per request); p50 / p99 /
   max latency are measured by the clients (in this process: they share the GIL with the
   server, so the figures are pessimistic).
4. Resident memory of the process (``VmRSS`` and its peak ``VmHWM``): store, model, server,
   clients.

Targets (issue 12): p99 < 50 ms, no stall during refresh, RSS < 1 GiB with 1,000,000 records.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import math
import random
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prometheus_client import CollectorRegistry  # noqa: E402

from retry_bot.predict.settings import DEFAULT_SETTINGS  # noqa: E402
from retry_bot.server import SWITCH_INTERVAL, AllocationServer  # noqa: E402
from retry_bot.state import open_store  # noqa: E402
from retry_bot.state.usage import usage_row  # noqa: E402
from runner_wrapper.record import AppliedLimits, HostInfo, JobIdentity, Usage, UsageRecord  # noqa: E402

T0 = 1_736_000_000.0
COMPILERS = ("gcc@11.4.0", "gcc@12.3.0", "oneapi@2024.2.1")


class Farm:
    """Packages with stable sizes (lognormal across packages, noisy per build)."""

    def __init__(self, packages: int = 3000, seed: int = 1):
        rng = random.Random(seed)
        self.rng = rng
        self.pkgs = [(f"pkg{i:05d}", f"{rng.randint(1, 9)}.{rng.randint(0, 20)}", rng.choice(COMPILERS),
                      math.exp(rng.gauss(math.log(0.8e9), 1.2)), rng.uniform(0.5, 6.0)) for i in range(packages)]
        self.cum = list(itertools.accumulate(rng.paretovariate(1.1) for _ in range(packages)))

    def pick(self) -> tuple:
        return self.rng.choices(self.pkgs, cum_weights=self.cum)[0]

    def template(self) -> dict:
        return self.record(1, T0)   # job ids start at 1 (the record schema); each row sets its own

    def record_fast(self, template: dict, job_id: int, t: float) -> dict:
        """A record like :meth:`record` (same layout, from ``template``) without the dataclass round trip."""
        name, ver, comp, base, cpu = self.pick()
        cname, _, cver = comp.partition("@")
        peak = int(base * math.exp(self.rng.gauss(0, 0.15)))
        oom = self.rng.random() < 0.01
        finished = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
        rec = dict(template)
        job = dict(template["job"], id=job_id, name=f"{name}@{ver} /abcdefg %{comp} arch=linux-ubuntu22.04-x86_64_v3 E4S",
                   ref="develop" if self.rng.random() < 0.7 else f"pr-{self.rng.randint(1, 5000)}")
        job["variables"] = dict(template["job"]["variables"], SPACK_JOB_SPEC_PKG_NAME=name,
                                SPACK_JOB_SPEC_PKG_VERSION=ver, SPACK_JOB_SPEC_COMPILER_NAME=cname,
                                SPACK_JOB_SPEC_COMPILER_VERSION=cver)
        rec["job"] = job
        rec["limits"] = dict(template["limits"], memory_limit_bytes=int(peak * (0.9 if oom else 1.6)),
                             memory_request_bytes=peak // 2)
        rec["usage"] = dict(template["usage"], memory_peak_bytes=peak, memory_mean_bytes=peak // 3,
                            cpu_mean_cores=cpu, cpu_max_cores=cpu * 1.5, oom_kills=1 if oom else 0)
        rec.update(started_at=finished, finished_at=finished, exit_code=137 if oom else 0)
        return rec

    def record(self, job_id: int, t: float) -> dict:
        name, ver, comp, base, cpu = self.pick()
        cname, _, cver = comp.partition("@")
        peak = int(base * math.exp(self.rng.gauss(0, 0.15)))
        oom = self.rng.random() < 0.01
        finished = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
        rec = UsageRecord(
            job=JobIdentity(id=job_id, project_id=2, project_path="spack/spack-packages",
                            name=f"{name}@{ver} /abcdefg %{comp} arch=linux-ubuntu22.04-x86_64_v3 E4S",
                            ref="develop" if self.rng.random() < 0.7 else f"pr-{self.rng.randint(1, 5000)}",
                            protected=None,
                            variables={"SPACK_JOB_SPEC_PKG_NAME": name, "SPACK_JOB_SPEC_PKG_VERSION": ver,
                                       "SPACK_JOB_SPEC_COMPILER_NAME": cname, "SPACK_JOB_SPEC_COMPILER_VERSION": cver,
                                       "SPACK_JOB_SPEC_VARIANTS": "+mpi build_system=cmake",
                                       "SPACK_JOB_SPEC_ARCH": "linux-ubuntu22.04-x86_64_v3"}),
            host=HostInfo(hostname="runner-1"),
            limits=AppliedLimits(memory_limit_bytes=int(peak * (0.9 if oom else 1.6)), memory_request_bytes=peak // 2),
            usage=Usage(wall_seconds=300.0, memory_peak_bytes=peak, memory_mean_bytes=peak // 3, cpu_mean_cores=cpu,
                        cpu_max_cores=cpu * 1.5, oom_kills=1 if oom else 0),
            started_at=finished, finished_at=finished, exit_code=137 if oom else 0,
        )
        return rec.to_dict()


def seed_history(store, farm: Farm, n: int, chunk: int = 5000) -> float:
    """Write ``n`` rows (store column layout) in big transactions; returns rows/s."""
    started = time.perf_counter()
    rec_template = farm.template()
    template = usage_row(rec_template)
    cols = list(template) + ["source", "ingested_at"]
    sql = f"INSERT INTO usage_records ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})"
    step = 365 * 86400.0 / max(n, 1)
    done = 0
    while done < n:
        rows = []
        for i in range(done, min(n, done + chunk)):
            rec = farm.record_fast(rec_template, i + 1, T0 + i * step)
            row = _fast_row(template, rec)
            if i % 10_000 == 0:   # the shortcut writes exactly what the store's own usage_row would
                real = usage_row(rec)
                assert {k: real[k] for k in row if k != "dedupe_key"} == {k: row[k] for k in row if k != "dedupe_key"}
            rows.append([*row.values(), "bench", T0])
        store._write(lambda tx, rows=rows: [tx.execute(sql, r) for r in rows], fenced=False)  # noqa: SLF001
        done += len(rows)
        print(f"\rseeding {done:,}/{n:,}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return n / (time.perf_counter() - started)


def _fast_row(template: dict, rec: dict) -> dict:
    """``usage_row(rec)`` without re-validating a record built by :class:`UsageRecord` (same columns)."""
    job, u, lim = rec["job"], rec["usage"], rec["limits"]
    row = dict(template)
    row.update(
        dedupe_key=f"bench:{job['id']}", job_id=job["id"], ref=job["ref"], protected=None, job_name=job["name"],
        key_fields=json.dumps(job["variables"], sort_keys=True), memory_peak_bytes=u["memory_peak_bytes"],
        memory_mean_bytes=u["memory_mean_bytes"], memory_limit_bytes=lim["memory_limit_bytes"],
        memory_request_bytes=lim["memory_request_bytes"], cpu_mean_cores=u["cpu_mean_cores"],
        oom_killed=bool(u.get("oom_kills")), exit_code=rec["exit_code"], started_at=rec["started_at"],
        finished_at=rec["finished_at"],
        raw=json.dumps(rec, sort_keys=True, separators=(",", ":")),
    )
    return row


def rss() -> tuple[int, int]:
    """(VmRSS, VmHWM) of this process in bytes."""
    got = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                k, v = line.split(":", 1)
                got[k] = int(v.split()[0]) * 1024
    return got.get("VmRSS", 0), got.get("VmHWM", 0)


class Clients:
    """Threads asking for allocations over HTTP, one connection per request as Spack's client
    (``urllib``) does; latencies in seconds."""

    def __init__(self, url: str, farm: Farm, n: int):
        self.host, self.port = url.split("//")[1].split(":")
        self.farm, self.n = farm, n
        self.lat: list[float] = []
        self.errors = 0
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True) for i in range(n)]

    def run(self, i: int) -> None:
        rng = random.Random(100 + i)
        while not self.stop.is_set():
            name, ver, comp, _, _ = rng.choice(self.farm.pkgs)
            spec = f"{name}@{ver} +mpi build_system=cmake arch=linux-ubuntu22.04-x86_64_v3%{comp}"
            t = time.perf_counter()
            conn = http.client.HTTPConnection(self.host, int(self.port), timeout=30)
            try:
                conn.request("GET", "/v1/allocation?spec=" + quote(spec), headers={"Connection": "close"})
                r = conn.getresponse()
                r.read()
                ok = r.status == 200
            except (OSError, http.client.HTTPException):
                ok = False
            finally:
                conn.close()
            self.lat.append(time.perf_counter() - t)
            self.errors += not ok
            time.sleep(0.002)

    def __enter__(self) -> "Clients":
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=30)

    def take(self) -> list[float]:
        out, self.lat = self.lat, []
        return out


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(math.ceil(q * len(s))) - 1)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--state", default=None, help="state store URL (default: SQLite in a temporary directory)")
    ap.add_argument("--ingest-rate", type=float, default=500.0, help="records/s stored during the ingest phase")
    ap.add_argument("--seconds", type=float, default=20.0, help="length of the continuous-ingest phase")
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    sys.setswitchinterval(SWITCH_INTERVAL)   # as `retry-bot serve` runs
    tmp = tempfile.TemporaryDirectory()
    url = args.state or f"sqlite:///{tmp.name}/state.sqlite3"
    store = open_store(url)
    farm = Farm()
    out: dict = {"records": args.records, "state": url.split(":", 1)[0]}
    out["seed_rows_per_s"] = round(seed_history(store, farm, args.records))

    srv = AllocationServer(store=store, settings=DEFAULT_SETTINGS, registry=CollectorRegistry(),
                           refresh_seconds=1.0, clock=lambda: T0 + 366 * 86400.0).start()
    handler: list[float] = []   # time inside the allocation handler (parse, model lock, predict)
    inner = srv.allocation

    def timed(query):
        t = time.perf_counter()
        try:
            return inner(query)
        finally:
            handler.append(time.perf_counter() - t)

    srv.allocation = timed  # type: ignore[method-assign]
    try:
        live = srv._live  # noqa: SLF001 - the benchmark reads the model's progress
        t = time.perf_counter()
        with Clients(srv.url, farm, args.clients) as clients:
            while live.applied < args.records:
                time.sleep(0.2)
                print(f"\rmodel {live.applied:,}/{args.records:,}", end="", file=sys.stderr, flush=True)
            print(file=sys.stderr)
            build_s = time.perf_counter() - t
            during_build = clients.take()
            out["model_build_s"] = round(build_s, 1)
            out["model_ingest_records_per_s"] = round(args.records / build_s)
            out["build_p50_ms"] = round(pct(during_build, 0.5) * 1000, 2)
            out["build_p99_ms"] = round(pct(during_build, 0.99) * 1000, 2)
            out["build_max_ms"] = round(max(during_build) * 1000, 2)
            out["build_requests"] = len(during_build)
            out["build_handler_p99_ms"] = round(pct(handler, 0.99) * 1000, 2)
            handler.clear()
            out["rss_after_build_mib"] = round(rss()[0] / 2**20)

            # continuous ingest through the real path
            stored = 0
            next_id = args.records + 1
            started = time.perf_counter()
            t_now = T0 + 365 * 86400.0
            while (el := time.perf_counter() - started) < args.seconds:
                due = int(el * args.ingest_rate) - stored
                if due > 0:
                    batch = [farm.record(next_id + k, t_now + k) for k in range(min(due, 500))]
                    stored += store.add_usage_records(batch, "bench")
                    next_id += len(batch)
                    srv.invalidate()
                else:
                    time.sleep(0.01)
            ingest_s = time.perf_counter() - started
            deadline = time.perf_counter() + 60
            while live.applied < args.records + stored and time.perf_counter() < deadline:
                time.sleep(0.05)
            lag_s = time.perf_counter() - started - ingest_s
            during = clients.take()
            out["ingest_records_per_s"] = round(stored / ingest_s)
            out["ingest_applied"] = live.applied - args.records
            out["ingest_model_lag_s"] = round(lag_s, 2)
            out["p50_ms"] = round(pct(during, 0.5) * 1000, 2)
            out["p99_ms"] = round(pct(during, 0.99) * 1000, 2)
            out["max_ms"] = round(max(during) * 1000, 2)
            out["requests"] = len(during)
            out["handler_p50_ms"] = round(pct(handler, 0.5) * 1000, 2)
            out["handler_p99_ms"] = round(pct(handler, 0.99) * 1000, 2)
            out["errors"] = clients.errors
        cur, peak = rss()
        out["rss_mib"] = round(cur / 2**20)
        out["rss_peak_mib"] = round(peak / 2**20)
    finally:
        srv.close()
        store.close()
        tmp.cleanup()
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:<28} {v}")
    ok = out["p99_ms"] < 50 and out["build_p99_ms"] < 50 and out["rss_peak_mib"] < 1024 and out["errors"] == 0
    print("targets (p99 < 50 ms during build and ingest, RSS < 1 GiB, no errors):", "met" if ok else "MISSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
