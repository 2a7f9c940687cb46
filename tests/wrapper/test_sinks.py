"""Sinks: marker, spool, collector POST with retries, node_exporter textfile."""

import json

import pytest

from runner_wrapper.record import find_markers, verify_record
from runner_wrapper.sinks import CollectorError, append_spool, marker_line, post_collector, write_textfile

from .httpserver import serve
from .test_schema import sample_record

KEY = b"test-key-0123456789"


def test_marker_signed_and_unsigned():
    rec = sample_record().to_dict()
    signed = find_markers(("noise\n" + marker_line(rec, KEY, "farm") + "\n").encode())
    assert verify_record(signed[-1], {"farm": KEY}).job.id == 4242
    unsigned = find_markers(marker_line(rec, None, "farm"))
    assert "signature" not in unsigned[-1] and unsigned[-1]["job"]["id"] == 4242


def test_spool_appends_lines(tmp_path):
    p = tmp_path / "s" / "usage.jsonl"
    append_spool(str(p), {"a": 1})
    append_spool(str(p), {"a": 2})
    assert [json.loads(x)["a"] for x in p.read_text().splitlines()] == [1, 2]


def test_collector_retries_5xx_then_succeeds():
    answers = [503, 502, 201]
    srv, rec, base = serve(lambda h, b: (answers.pop(0), {}))
    try:
        status = post_collector(base + "/v1/usage", {"x": 1}, "tok", 2.0, 3, wait_initial=0.01)
    finally:
        srv.shutdown()
    assert status == 201 and len(rec.requests) == 3
    assert rec.requests[-1]["headers"]["Authorization"] == "Bearer tok"
    assert json.loads(rec.requests[-1]["body"]) == {"x": 1}


def test_collector_down_raises_after_attempts():
    with pytest.raises(CollectorError, match="unreachable after 2 attempt"):
        post_collector("http://127.0.0.1:9/v1/usage", {"x": 1}, None, 0.5, 2, wait_initial=0.01)
    srv, rec, base = serve(lambda h, b: (400, {}))
    try:
        with pytest.raises(CollectorError, match="HTTP 400"):
            post_collector(base, {"x": 1}, None, 1.0, 3, wait_initial=0.01)
        assert len(rec.requests) == 1  # 4xx is not retried
    finally:
        srv.shutdown()


def test_textfile_written_atomically(tmp_path):
    p = tmp_path / "tf" / "rightsizer.prom"
    write_textfile(str(p), sample_record().to_dict())
    text = p.read_text()
    assert 'rightsizer_last_job_memory_peak_bytes{job_name="build",project="group/p"} 1.34217728e+08' in text
    assert not [f for f in p.parent.iterdir() if f.name != "rightsizer.prom"]
