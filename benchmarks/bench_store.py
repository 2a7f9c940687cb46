"""State store throughput on both backends (not a test; prints numbers).

Run: ``.venv/bin/python -m benchmarks.bench_store`` (PostgreSQL part needs Debian's server
binaries; the lead may move this under ``benchmarks/``).
"""

from __future__ import annotations

import tempfile
import time

from retry_bot.state import open_store

from tests.bot_state.pgserver import PgServer, find_bindir
from tests.bot_state.records import make_record


def bench(url: str, label: str, jobs: int = 300, records: int = 2000) -> None:
    s = open_store(url)
    t = time.perf_counter()
    for i in range(jobs):
        s.mark_job_seen(i, 1, {"name": "build", "failure_reason": "script_failure"}, {"family": "oom"})
        s.record_decision(i, {"action": "resize"})
        intent = s.begin_action(f"resize:{i}:1", i, "resize", {"memory": "2Gi"})
        s.complete_action(intent.intent_id, {"job_id": 100000 + i})
    dt = time.perf_counter() - t
    print(f"{label}: {jobs / dt:.0f} failed jobs/s through seen+decide+begin+complete "
          f"({4 * jobs / dt:.0f} transactions/s)")
    recs = [make_record(i, finished_at=f"2026-01-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z")
            for i in range(records)]
    t = time.perf_counter()
    for r in recs[: records // 4]:
        s.add_usage_record(r, "collector")
    dt = time.perf_counter() - t
    print(f"{label}: usage ingest one by one {records // 4 / dt:.0f} records/s")
    t = time.perf_counter()
    added = s.add_usage_records(recs, "spool")
    dt = time.perf_counter() - t
    print(f"{label}: spool ingest (batched) {records / dt:.0f} records/s ({added} new)")
    t = time.perf_counter()
    n = sum(1 for _ in s.usage_records())
    print(f"{label}: read {n / (time.perf_counter() - t):.0f} records/s")
    t = time.perf_counter()
    for i in range(200):
        s.history(i)
    print(f"{label}: history() {200 / (time.perf_counter() - t):.0f} jobs/s")
    s.close()


def main() -> None:
    bench(f"sqlite:///{tempfile.mkdtemp()}/bench.sqlite3", "sqlite")
    bindir = find_bindir()
    if bindir is None:
        print("postgresql: skipped (no server binaries)")
        return
    server = PgServer(bindir)
    server.init()
    server.start()
    try:
        bench(server.url(schema=server.new_schema()), "postgresql")
    finally:
        server.destroy()


if __name__ == "__main__":
    main()
