"""HTTP endpoints over real loopback HTTP, and idempotent spool ingest."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry

from retry_bot.cli import main as cli_main
from retry_bot.predict import Observation, extract_key, KeySettings
from retry_bot.predict.estimator import new_index
from retry_bot.predict.settings import DEFAULT_SETTINGS
from retry_bot.server import AllocationServer
from retry_bot.state import open_store
from tests.bot_predict.conftest import SIGNING_KEY, signed_record

TOKEN = "collector-token-abc"


def _req(url, data=None, headers=None, method=None):
    req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@pytest.fixture
def store(tmp_path):
    s = open_store(f"sqlite:///{tmp_path / 'state.sqlite3'}")
    yield s
    s.close()


@pytest.fixture
def server(store):
    srv = AllocationServer(store=store, settings=DEFAULT_SETTINGS, tokens=[TOKEN],
                           signing_keys={"default": SIGNING_KEY}, registry=CollectorRegistry(),
                           max_body=64 * 1024, clock=lambda: 1_736_200_000.0, refresh_seconds=0.0).start()
    yield srv
    srv.close()


def test_allocation_like_gantry_with_and_without_history(server, store):
    status, body = _req(server.url + "/v1/allocation?spec=" + urllib.request.quote(
        "alpha@1.0 +mpi arch=linux-ubuntu22.04-x86_64_v3%gcc@12.3.0"))
    assert status == 200
    v = json.loads(body)["variables"]
    # no history: gantry's default request, and no memory limit (the runner's default applies)
    assert set(v) == {"KUBERNETES_MEMORY_REQUEST", "KUBERNETES_CPU_REQUEST", "KUBERNETES_CPU_LIMIT"}
    assert v["KUBERNETES_MEMORY_REQUEST"] == "2000M" and v["KUBERNETES_CPU_REQUEST"] == "1000m"
    for i in range(5):
        store.add_usage_record(signed_record(100 + i, peak=6_000_000_000, name="alpha@1.0 /abcdefg %gcc@12.3.0",
                                             finished=f"2025-01-06T0{i}:00:00Z"), "test")
    assert server.sync()   # written behind the server's back: wait until its model has them
    status, body = _req(server.url + "/v1/allocation/explain?spec=alpha@1.0%25gcc@12.3.0")
    got = json.loads(body)
    assert status == 200 and got["explanation"]["samples"] == 5
    assert set(got["variables"]) == {"KUBERNETES_MEMORY_REQUEST", "KUBERNETES_MEMORY_LIMIT",
                                     "KUBERNETES_CPU_REQUEST", "KUBERNETES_CPU_LIMIT"}
    from runner_wrapper.quantity import parse_memory
    assert parse_memory(got["variables"]["KUBERNETES_MEMORY_LIMIT"]) > 6_000_000_000


@pytest.mark.parametrize("query", ["", "?spec=", "?spec=%40%40%40", "?spec=pkg@1.0%20%3Brm"])
def test_allocation_rejects_missing_or_invalid_spec(server, query):
    status, body = _req(server.url + "/v1/allocation" + query)
    assert status == 400 and "spec" in json.loads(body)["error"]


def test_allocation_by_job_name_for_the_runner_wrapper(server):
    status, body = _req(server.url + "/v1/allocation?job_name=" + urllib.request.quote("build linux 2/4")
                        + "&project=group%2Fapp&ref=main")
    assert status == 200 and "KUBERNETES_MEMORY_REQUEST" in json.loads(body)["variables"]


def test_usage_needs_a_bearer_token(server):
    data = json.dumps(signed_record(1)).encode()
    assert _req(server.url + "/v1/usage", data)[0] == 401
    assert _req(server.url + "/v1/usage", data, {"Authorization": "Bearer wrong"})[0] == 401
    assert _req(server.url + "/v1/usage", data, {"Authorization": f"Basic {TOKEN}"})[0] == 401


def test_usage_body_limit_and_bad_json(server):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    status, body = _req(server.url + "/v1/usage", b"x" * (64 * 1024 + 1), auth)
    assert status == 413 and json.loads(body)["error"] == "body too large"
    status, body = _req(server.url + "/v1/usage", b"{not json", auth)
    assert status == 400 and "JSON" in json.loads(body)["error"]


def test_usage_array_of_non_records_says_what_is_wrong(server, store):
    # Issue 13: [1,2,3] was answered "record is not signed".
    auth = {"Authorization": f"Bearer {TOKEN}"}
    status, body = _req(server.url + "/v1/usage", b"[1,2,3]", auth)
    got = json.loads(body)
    assert status == 400 and got["rejected"] == 3
    assert got["errors"][0] == "item 0: expected a usage record (a JSON object), got a number (1)"
    assert not any("signed" in e for e in got["errors"])
    assert store.rejected_counts() == {("collector", "malformed"): 3}


def test_usage_stores_verified_records_once_and_counts_forgeries(server, store):
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    good = signed_record(7)
    status, body = _req(server.url + "/v1/usage", json.dumps(good).encode(), auth)
    assert status == 200 and json.loads(body)["stored"] == 1
    status, body = _req(server.url + "/v1/usage", json.dumps(good).encode(), auth)
    assert status == 200 and json.loads(body)["duplicates"] == 1
    forged = dict(signed_record(8))
    forged["usage"] = dict(forged["usage"], memory_peak_bytes=10**12)
    status, body = _req(server.url + "/v1/usage", json.dumps(forged).encode(), auth)
    assert status == 400 and json.loads(body)["rejected"] == 1
    assert store.rejected_counts() == {("collector", "bad_signature"): 1}
    status, body = _req(server.url + "/v1/usage", json.dumps(forged).encode(), auth)   # sent again
    assert status == 400 and json.loads(body)["rejected_seen_before"] == 1
    assert store.rejected_counts() == {("collector", "bad_signature"): 1}
    assert len(list(store.usage_records())) == 1
    status, metrics = _req(server.url + "/metrics")
    assert status == 200 and b'rightsizer_usage_records_total{outcome="rejected_bad_signature"' in metrics
    assert b'outcome="rejected_again",source="collector"} 1.0' in metrics


def test_healthz_and_unknown_paths(server):
    assert _req(server.url + "/healthz") == (200, b'{"status": "ok"}\n')
    assert _req(server.url + "/nope")[0] == 404


def test_server_without_store_serves_a_given_index():
    idx = new_index(DEFAULT_SETTINGS)
    key = extract_key(KeySettings(), explicit={"package": "beta", "version": "2"})
    for i in range(6):
        idx.add(Observation(key=key, at=1000.0 + i, memory_peak_bytes=3e9, memory_mean_bytes=1e9, cpu_mean_cores=2.0))
    srv = AllocationServer(index=idx, clock=lambda: 5000.0).start()
    try:
        status, body = _req(srv.url + "/v1/allocation?spec=beta@2")
        v = json.loads(body)["variables"]
        assert status == 200 and v["KUBERNETES_CPU_REQUEST"] == "2100m"
        assert _req(srv.url + "/v1/usage", b"{}", {"Authorization": "Bearer x"})[0] == 401
    finally:
        srv.close()


def test_ingest_is_idempotent_and_rejects_forgeries(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RIGHTSIZER_SIGNING_KEY", SIGNING_KEY.decode())
    url = f"sqlite:///{tmp_path / 'state.sqlite3'}"
    spool = tmp_path / "spool.jsonl"
    forged = dict(signed_record(3))
    forged["exit_code"] = 1
    spool.write_text("\n".join(json.dumps(r) for r in (signed_record(1), signed_record(2), forged)) + "\nnot json\n")
    assert cli_main(["ingest", "--state", url, str(spool)]) == 1
    out = capsys.readouterr().out
    assert "2 stored, 0 already stored, 2 rejected" in out
    assert cli_main(["ingest", "--state", url, str(spool), "--format", "json"]) == 1
    got = json.loads(capsys.readouterr().out)["files"][str(spool)]
    assert (got["stored"], got["duplicates"], got["rejected"], got["rejected_seen_before"]) == (0, 2, 2, 2)
    with open_store(url) as s:
        assert len(list(s.usage_records())) == 2
        # each bad record is counted once however often the file is ingested
        assert s.rejected_counts() == {("spool", "bad_signature"): 1, ("spool", "malformed"): 1}
        assert s.stats()["rejected_records"] == 2


def test_rejections_are_counted_once_per_record_across_files(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RIGHTSIZER_SIGNING_KEY", SIGNING_KEY.decode())
    url = f"sqlite:///{tmp_path / 'state.sqlite3'}"
    forged = dict(signed_record(3), exit_code=1)
    other = dict(signed_record(4), exit_code=1)
    (tmp_path / "a.jsonl").write_text(json.dumps(forged) + "\n")
    (tmp_path / "b.jsonl").write_text(json.dumps(forged) + "\n" + json.dumps(other) + "\n")  # a copy + a new one
    assert cli_main(["ingest", "--state", url, str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]) == 1
    out = capsys.readouterr().out
    assert "a.jsonl: 0 stored, 0 already stored, 1 rejected\n" in out
    assert "b.jsonl: 0 stored, 0 already stored, 2 rejected (1 already counted)" in out
    with open_store(url) as s:
        assert s.rejected_counts() == {("spool", "bad_signature"): 2}


def test_ingest_without_key_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("RIGHTSIZER_SIGNING_KEY", raising=False)
    assert cli_main(["ingest", "--state", f"sqlite:///{tmp_path / 's.db'}", str(tmp_path / "x")]) == 2
    assert "RIGHTSIZER_SIGNING_KEY" in capsys.readouterr().err


def test_serve_reads_the_wrappers_token_variable_by_default(tmp_path):
    import os
    import subprocess
    import sys
    import urllib.error
    import urllib.request

    from retry_bot.cli import build_parser

    args = build_parser().parse_args(["serve"])
    assert args.token_env == "RIGHTSIZER_COLLECTOR_TOKEN"       # the runner wrapper's name
    env = {**os.environ, "RIGHTSIZER_COLLECTOR_TOKEN": "tok-123", "RIGHTSIZER_SIGNING_KEY": SIGNING_KEY.decode()}
    env.pop("RETRY_BOT_COLLECTOR_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-m", "retry_bot", "--log-format", "json", "serve",
                             "--listen", "127.0.0.1:0", "--state", f"sqlite:///{tmp_path / 's.db'}"],
                            env=env, stderr=subprocess.PIPE, text=True)
    try:
        url = None
        for line in proc.stderr:                                    # wait for the listening line
            if "serve.listening" in line:
                url = json.loads(line)["url"]
                break
        assert url, "the server did not start"
        body = json.dumps(signed_record(5)).encode()
        for token, want in (("tok-123", 200), ("wrong", 401)):
            req = urllib.request.Request(url + "/v1/usage", data=body, method="POST",
                                         headers={"Authorization": f"Bearer {token}"})
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    status = r.status
            except urllib.error.HTTPError as exc:
                status = exc.code
            assert status == want, token
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stderr.close()


def test_stored_records_feed_requested_vs_used_counters():
    from prometheus_client import CollectorRegistry

    from retry_bot.server import make_metrics

    reg = CollectorRegistry()
    m = make_metrics(reg)
    rec = {"job": {"project_path": "g/p"}, "limits": {"memory_request_bytes": 1000, "cpu_request_cores": 2.0},
           "usage": {"wall_seconds": 10.0, "memory_mean_bytes": 250, "memory_peak_bytes": 800,
                     "cpu_user_seconds": 12.0, "cpu_system_seconds": 3.0, "oom_kills": 1}}
    m.observe_record(rec)
    m.observe_record({"job": {}, "usage": {"wall_seconds": 0}})   # nothing measurable: skipped
    get = reg.get_sample_value
    assert get("rightsizer_memory_requested_byte_seconds_total", {"project": "g/p"}) == 10_000
    assert get("rightsizer_memory_used_byte_seconds_total", {"project": "g/p"}) == 2_500
    assert get("rightsizer_memory_peak_byte_seconds_total", {"project": "g/p"}) == 8_000
    assert get("rightsizer_cpu_requested_core_seconds_total", {"project": "g/p"}) == 20.0
    assert get("rightsizer_cpu_used_core_seconds_total", {"project": "g/p"}) == 15.0
    assert get("rightsizer_oom_kills_total", {"project": "g/p"}) == 1


def test_allocation_answers_only_gitlab_job_keywords_even_when_asked_to_explain(server):
    """Spack deep-merges every top-level key into the job (gitlab-mechanics.md §11.6)."""
    for headers in ({}, {"X-Rightsizer-Explain": "1"}):
        status, body = _req(server.url + "/v1/allocation?spec=alpha@1.0%25gcc@12.3.0", headers=headers)
        assert status == 200 and set(json.loads(body)) == {"variables"}
