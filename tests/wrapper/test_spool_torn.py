"""The spool append (runner_wrapper.sinks.append_spool) under an interrupted or short write.

A short write is produced by the real kernel: RLIMIT_FSIZE (with SIGXFSZ ignored) makes write(2)
return fewer bytes than asked, exactly as ENOSPC part-way through a write does, and as a writer
SIGKILLed in the middle of a multi-page write leaves a torn line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from runner_wrapper.record import iter_jsonl_records
from runner_wrapper.sinks import append_spool
from runner_wrapper.spool import Answer, send_spool

ROOT = Path(__file__).resolve().parents[2]


def _record(job_id: int) -> dict:
    return {"job": {"id": job_id}, "pad": "x" * 3000, "schema": "gitlab-rightsizer/usage-record/v1"}


CHILD = r"""
import json, resource, signal, sys
from runner_wrapper.sinks import append_spool
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
path, limit = sys.argv[1], int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
try:
    append_spool(path, {"job": {"id": 2}, "pad": "x" * 3000, "schema": "gitlab-rightsizer/usage-record/v1"})
except OSError as exc:
    print("raised", exc.errno)
else:
    print("returned")
"""


def _short_write(spool: str) -> str:
    size = os.path.getsize(spool)
    p = subprocess.run([sys.executable, "-c", CHILD, spool, str(size + 1000)], capture_output=True, text=True,
                       cwd=str(ROOT), timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def test_a_short_spool_write_is_not_reported_as_spooled(tmp_path):
    spool = str(tmp_path / "usage.jsonl")
    append_spool(spool, _record(1))
    said = _short_write(spool)
    assert os.path.getsize(spool) < len(open(spool, "rb").read().split(b"\n")[0]) * 2  # the kernel cut it
    # cmd_cleanup counts the record as spooled (no error, rc 0) unless append_spool raises
    assert said.startswith("raised"), f"append_spool returned normally after a short write: {said!r}"


def test_a_torn_spool_tail_does_not_swallow_the_next_good_record(tmp_path):
    spool = str(tmp_path / "usage.jsonl")
    append_spool(spool, _record(1))
    _short_write(spool)  # job 2's cleanup: ENOSPC / SIGKILL mid-append leaves a line without newline
    append_spool(spool, _record(3))  # job 3's cleanup, later: a complete, good record
    with open(spool, "rb") as fh:
        lines = fh.read().splitlines()
    parsed = [d for _n, d in iter_jsonl_records(lines) if isinstance(d, dict)]  # what `retry-bot ingest` reads
    sent: list[int] = []

    def deliver(body: bytes) -> Answer:
        try:
            sent.append(json.loads(body)["job"]["id"])
            return Answer(200)
        except ValueError:
            return Answer(400, "malformed")

    send_spool(spool, deliver)  # what `runner-wrapper spool send` does
    assert [d["job"]["id"] for d in parsed] == [1, 3] and sent == [1, 3], (
        f"job 3's complete record was glued onto job 2's torn line: ingest sees {[d['job']['id'] for d in parsed]},"
        f" spool send delivered {sent}")
