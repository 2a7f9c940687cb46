"""``runner-wrapper spool send`` against the retry bot's real collector (``retry_bot.server``) on
127.0.0.1, with a temporary SQLite state store, and against a tiny stdlib server for 5xx answers."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
import threading
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from runner_wrapper import cli
from runner_wrapper.sinks import append_spool
from runner_wrapper.spool import (Answer, Progress, SidecarError, read_progress, send_spool, sidecar_path,
                                  write_progress)
from tests.wrapper.httpserver import serve

TOKEN = "spool-send-token-5f3a9c"
KEY = b"spool-send-signing-key-0123456789"


def record(job_id: int, key: bytes = KEY, pad: int = 0) -> dict:
    from runner_wrapper.record import AppliedLimits, HostInfo, JobIdentity, Usage, UsageRecord, sign_record

    rec = UsageRecord(
        job=JobIdentity(id=job_id, project_id=2, project_path="group/p", name="build" + "x" * pad, ref="main",
                        protected=True, variables={"KUBERNETES_MEMORY_LIMIT": "1Gi"}),
        host=HostInfo(hostname="runner-1"),
        limits=AppliedLimits(memory_limit_bytes=1 << 30),
        usage=Usage(wall_seconds=10.0, memory_peak_bytes=100_000_000, memory_mean_bytes=50_000_000,
                    cpu_mean_cores=1.0, cpu_max_cores=2.0, oom_kills=0),
        started_at="2026-11-21T23:25:07Z", finished_at="2026-11-21T23:25:17Z", exit_code=0,
    )
    return sign_record(rec.to_dict(), key, "default")


class Collector:
    """The retry bot's real ``POST /v1/usage`` with its own SQLite store."""

    def __init__(self, tmp_path: Path, port: int = 0, max_body: int = 64 * 1024) -> None:
        from retry_bot.server import AllocationServer
        from retry_bot.state import open_store

        self.store = open_store(f"sqlite:///{tmp_path / 'state.sqlite3'}")
        self.registry = CollectorRegistry()
        self.srv = AllocationServer(store=self.store, tokens=[TOKEN], signing_keys={"default": KEY},
                                    registry=self.registry, max_body=max_body, port=port).start()
        self.url = self.srv.url + "/v1/usage"

    def job_ids(self) -> list[int]:
        return sorted(r["job_id"] for r in self.store.usage_records())

    def requests(self) -> int:
        """POST /v1/usage requests answered so far (the server counts each just after answering it)."""
        import time

        last = -1
        while True:
            now = self._requests()
            if now == last:
                return now
            last = now
            time.sleep(0.05)

    def _requests(self) -> int:
        total = 0.0
        for metric in self.registry.collect():
            for s in metric.samples:
                if s.name == "rightsizer_http_requests_total" and s.labels.get("endpoint") == "usage":
                    total += s.value
        return int(total)

    def close(self) -> None:
        self.srv.close()
        self.store.close()


@pytest.fixture
def collector(tmp_path):
    c = Collector(tmp_path)
    yield c
    c.close()


@pytest.fixture(autouse=True)
def token(monkeypatch):
    monkeypatch.setenv("RIGHTSIZER_COLLECTOR_TOKEN", TOKEN)


def write_config(tmp_path: Path, url: str | None, attempts: int = 2) -> tuple[Path, Path]:
    spool = tmp_path / "spool" / "usage.jsonl"
    cfg = tmp_path / "wrapper.toml"
    lines = ["[sinks]", f'spool = "{spool}"', f"collector_attempts = {attempts}", "collector_timeout = 2"]
    if url is not None:
        lines.append(f'collector_url = "{url}"')
    cfg.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return cfg, spool


def send(capsys, cfg: Path, *extra: str) -> tuple[int, dict | None, str]:
    code = cli.main(["spool", "send", "--config", str(cfg), "--json", *extra])
    out, err = capsys.readouterr()
    assert TOKEN not in out + err
    assert "Traceback" not in out + err
    return code, (json.loads(out) if out.strip() else None), err


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- delivery


def test_delivers_pending_records_once_then_sends_nothing(tmp_path, capsys, collector):
    cfg, spool = write_config(tmp_path, collector.url)
    for i in range(1, 4):
        append_spool(str(spool), record(i))
    before = digest(spool)

    code, out, err = send(capsys, cfg)
    assert code == 0, err
    assert out["delivered"] == 3 and out["up_to_date"] and out["offset"] == spool.stat().st_size
    assert collector.job_ids() == [1, 2, 3]
    assert read_progress(sidecar_path(str(spool))) == Progress(spool.stat().st_size, 3, spool.stat().st_ino)

    requests = collector.requests()
    side_mtime = os.stat(sidecar_path(str(spool))).st_mtime_ns
    code, out, err = send(capsys, cfg)
    assert code == 0 and out["delivered"] == 0 and out["up_to_date"]
    assert collector.requests() == requests, "an up-to-date spool must cost no request"
    assert os.stat(sidecar_path(str(spool))).st_mtime_ns == side_mtime, "nor a sidecar write"

    append_spool(str(spool), record(4))
    code, out, _ = send(capsys, cfg)
    assert code == 0 and out["delivered"] == 1 and out["start_offset"] > 0
    assert collector.job_ids() == [1, 2, 3, 4]
    assert collector.requests() == requests + 1
    assert digest(spool) != before and spool.read_bytes().count(b"\n") == 4  # only the job appended


def test_records_the_collector_already_has_count_as_duplicates(tmp_path, capsys, collector):
    cfg, spool = write_config(tmp_path, collector.url)
    append_spool(str(spool), record(1))
    append_spool(str(spool), record(2))
    collector.store.add_usage_record(record(1), "collector")  # delivered by cleanup at the time
    code, out, _ = send(capsys, cfg)
    assert code == 0 and out["delivered"] == 1 and out["duplicates"] == 1
    assert collector.job_ids() == [1, 2]


@pytest.mark.slow
def test_collector_down_keeps_the_offset_then_delivers_when_back(tmp_path, capsys):
    port = free_port()
    cfg, spool = write_config(tmp_path, f"http://127.0.0.1:{port}/v1/usage")
    append_spool(str(spool), record(1))
    append_spool(str(spool), record(2))
    before = digest(spool)

    code, out, err = send(capsys, cfg)
    assert code == 1
    assert not out["up_to_date"] and out["pending"] == 2 and out["offset"] == 0
    assert "stopped at line 1: collector unreachable" in err and "2 record(s) left" in err
    assert read_progress(sidecar_path(str(spool))).offset == 0
    assert digest(spool) == before

    back = Collector(tmp_path, port=port)
    try:
        code, out, err = send(capsys, cfg)
        assert code == 0, err
        assert out["delivered"] == 2 and back.job_ids() == [1, 2]
    finally:
        back.close()


@pytest.mark.slow
def test_5xx_is_retried_a_bounded_number_of_times_then_stops(tmp_path, capsys):
    srv, rec, url = serve(lambda h, body: (503, {"error": "store unavailable"}))
    try:
        cfg, spool = write_config(tmp_path, url + "/v1/usage", attempts=2)
        append_spool(str(spool), record(1))
        code, out, err = send(capsys, cfg)
    finally:
        srv.shutdown()
        srv.server_close()
    assert code == 1 and out["offset"] == 0 and out["pending"] == 1
    assert len(rec.requests) == 2, "collector_attempts bounds the retries"
    assert rec.requests[0]["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert json.loads(rec.requests[0]["body"])["job"]["id"] == 1
    assert "HTTP 503: store unavailable" in err


def test_bad_records_are_reported_with_their_line_and_skipped(tmp_path, capsys, collector):
    cfg, spool = write_config(tmp_path, collector.url)
    append_spool(str(spool), record(1))
    append_spool(str(spool), record(2, key=b"a-key-the-collector-does-not-know"))  # line 2: bad signature
    with open(spool, "ab") as f:
        f.write(b"{not json at all\n")                                             # line 3
    append_spool(str(spool), record(4))
    code, out, err = send(capsys, cfg)
    assert code == 0, err
    assert out["delivered"] == 2 and collector.job_ids() == [1, 4]
    assert [(r["line"], r["status"]) for r in out["rejected"]] == [(2, 400), (3, 400)]
    assert "line 2 (job 2): rejected by the collector (HTTP 400:" in err and "skipped" in err
    assert "line 3: rejected by the collector (HTTP 400: invalid JSON" in err
    assert out["offset"] == spool.stat().st_size
    code, out, _ = send(capsys, cfg)  # skipped for good: not sent again
    assert code == 0 and out["rejected"] == [] and out["delivered"] == 0


def test_too_large_record_is_skipped(tmp_path, capsys):
    big = Collector(tmp_path, max_body=4096)
    try:
        cfg, spool = write_config(tmp_path, big.url)
        append_spool(str(spool), record(1, pad=8000))
        append_spool(str(spool), record(2))
        code, out, err = send(capsys, cfg)
        assert code == 0, err
        assert [(r["line"], r["status"]) for r in out["rejected"]] == [(1, 413)]
        assert "body too large" in err and big.job_ids() == [2]
    finally:
        big.close()


def test_wrong_token_stops_without_advancing(tmp_path, capsys, collector, monkeypatch):
    monkeypatch.setenv("RIGHTSIZER_COLLECTOR_TOKEN", "not-the-token-77")
    cfg, spool = write_config(tmp_path, collector.url)
    append_spool(str(spool), record(1))
    append_spool(str(spool), record(2))
    code, out, err = send(capsys, cfg)
    assert code == 1 and out["offset"] == 0 and out["pending"] == 2
    assert "HTTP 401" in err and "not-the-token-77" not in err
    assert collector.requests() == 1, "401 is not retried, and the rest is not tried"
    assert collector.job_ids() == []


def test_partial_last_line_is_left_for_next_time(tmp_path, capsys, collector):
    cfg, spool = write_config(tmp_path, collector.url)
    append_spool(str(spool), record(1))
    whole = json.dumps(record(2)).encode() + b"\n"
    with open(spool, "ab") as f:
        f.write(whole[:50])  # a writer mid-append
    code, out, _ = send(capsys, cfg)
    assert code == 0 and out["partial_tail"] and out["delivered"] == 1
    assert out["offset"] == spool.stat().st_size - 50
    with open(spool, "ab") as f:
        f.write(whole[50:])
    code, out, _ = send(capsys, cfg)
    assert code == 0 and not out["partial_tail"] and out["delivered"] == 1
    assert collector.job_ids() == [1, 2]


def test_concurrent_appends_are_all_delivered_exactly_once(tmp_path, capsys, collector):
    cfg, spool = write_config(tmp_path, collector.url)
    n = 40
    done = threading.Event()

    def writer() -> None:
        for i in range(1, n + 1):
            append_spool(str(spool), record(i))
        done.set()

    t = threading.Thread(target=writer)
    t.start()
    runs = 0
    while not done.is_set() or runs == 0:
        code, out, err = send(capsys, cfg)
        assert code == 0, err
        runs += 1
    t.join()
    code, out, _ = send(capsys, cfg)
    assert code == 0 and out["up_to_date"]
    assert collector.job_ids() == list(range(1, n + 1))
    assert read_progress(sidecar_path(str(spool))).line == n


def test_a_second_sender_does_not_race(tmp_path, capsys, collector):
    cfg, spool = write_config(tmp_path, collector.url)
    append_spool(str(spool), record(1))
    fd = os.open(str(spool) + ".sent.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        code, out, err = send(capsys, cfg)
        assert code == 1 and out is None and "another 'spool send' is running" in err
        assert collector.requests() == 0
    finally:
        os.close(fd)
    code, out, _ = send(capsys, cfg)
    assert code == 0 and out["delivered"] == 1


def test_dry_run_counts_without_sending(tmp_path, capsys, collector):
    cfg, spool = write_config(tmp_path, collector.url)
    append_spool(str(spool), record(1))
    append_spool(str(spool), record(2))
    code, out, _ = send(capsys, cfg, "--dry-run")
    assert code == 1 and out["pending"] == 2 and out["dry_run"]
    assert collector.requests() == 0 and not os.path.exists(sidecar_path(str(spool)))
    send(capsys, cfg)
    code, out, _ = send(capsys, cfg, "--dry-run")
    assert code == 0 and out["pending"] == 0


def test_replaced_spool_is_sent_again_from_its_start(tmp_path, capsys, collector):
    cfg, spool = write_config(tmp_path, collector.url)
    append_spool(str(spool), record(1))
    append_spool(str(spool), record(2))
    assert send(capsys, cfg)[0] == 0
    os.rename(spool, str(spool) + ".1")  # logrotate
    append_spool(str(spool), record(3))
    code, out, err = send(capsys, cfg)
    assert code == 0 and out["delivered"] == 1 and out["restarted"] == "the spool file was replaced"
    assert collector.job_ids() == [1, 2, 3]


# --------------------------------------------------------------------------- errors, human output


def test_human_summary_and_no_spool_yet(tmp_path, capsys, collector):
    cfg, spool = write_config(tmp_path, collector.url)
    assert cli.main(["--config", str(cfg), "spool", "send"]) == 0
    assert "up to date" in capsys.readouterr().out
    append_spool(str(spool), record(1))
    assert cli.main(["--config", str(cfg), "spool", "send"]) == 0
    assert capsys.readouterr().out.strip() == \
        "runner-wrapper: spool send: 1 record(s) delivered, 0 already there, 0 rejected; up to date"


@pytest.mark.parametrize("case, message", [
    ("no-url", "[sinks] collector_url is empty"),
    ("no-token", "$RIGHTSIZER_COLLECTOR_TOKEN is not set"),
    ("bad-sidecar", "is not a spool progress file"),
    ("bad-config", "spool send:"),
    ("bad-args", "usage: runner-wrapper spool send"),
])
def test_usage_and_config_errors_exit_2(tmp_path, capsys, monkeypatch, case, message):
    cfg, spool = write_config(tmp_path, None if case == "no-url" else "http://127.0.0.1:9/v1/usage")
    append_spool(str(spool), record(1))
    argv = ["spool", "send", "--config", str(cfg)]
    if case == "no-token":
        monkeypatch.delenv("RIGHTSIZER_COLLECTOR_TOKEN")
    elif case == "bad-sidecar":
        Path(sidecar_path(str(spool))).write_text("garbage", encoding="utf-8")
    elif case == "bad-config":
        cfg.write_text("[sinks]\ncollector_attempts = 'many'\n", encoding="utf-8")
    elif case == "bad-args":
        argv = ["spool", "sned"]
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


# --------------------------------------------------------------------------- the core, without HTTP


def test_core_checkpoints_and_sidecar_round_trip(tmp_path):
    spool = tmp_path / "usage.jsonl"
    spool.write_bytes(b"".join(b'{"n":%d}\n' % i for i in range(10)))
    seen: list[bytes] = []

    def deliver(body: bytes) -> Answer:
        seen.append(body)
        if len(seen) == 7:
            raise KeyboardInterrupt  # killed mid-run
        return Answer(200)

    with pytest.raises(KeyboardInterrupt):
        send_spool(str(spool), deliver, checkpoint_every=3)
    # everything acknowledged before the interruption is kept
    assert read_progress(sidecar_path(str(spool))).line == 6
    report = send_spool(str(spool), lambda body: Answer(200))
    assert report.delivered == 4 and report.up_to_date
    with pytest.raises(SidecarError):
        Path(sidecar_path(str(spool))).write_text('{"offset": -1}')
        read_progress(sidecar_path(str(spool)))
    write_progress(sidecar_path(str(spool)), Progress(5, 1, 42))
    assert read_progress(sidecar_path(str(spool))) == Progress(5, 1, 42)


def test_the_cli_module_does_not_load_the_sender_up_front():
    """``executor run`` pays for every import of runner_wrapper.cli: the sender stays out of it."""
    import subprocess
    import sys

    code = "import sys, runner_wrapper.cli; print(sorted(m for m in ('runner_wrapper.spool', 'json', 'tenacity', " \
           "'argparse', 'urllib.request') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=str(Path(__file__).resolve().parents[2]))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
