"""The bot's one HTTP server under slow-loris clients, over real loopback sockets (issue 13)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry

from retry_bot.httpserver import ListenError, parse_listen
from retry_bot.server import AllocationServer

TOKEN = "collector-token-xyz"


def _get(url: str, timeout: float = 5.0) -> tuple[int, bytes, float]:
    started = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read(), time.monotonic() - started
    except urllib.error.HTTPError as e:
        return e.code, e.read(), time.monotonic() - started


def _connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    return s


def _slow_clients(port: int, idle: int, header: int, upload: int) -> list[socket.socket]:
    """Idle connections, half-sent request headers, and uploads stalled mid-body."""
    socks = []
    for _ in range(idle):
        socks.append(_connect(port))
    for _ in range(header):
        s = _connect(port)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        socks.append(s)
    for _ in range(upload):
        s = _connect(port)
        s.sendall(b"POST /v1/usage HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode()
                  + b"\r\nContent-Length: 50000\r\n\r\n{\"schema\": ")
        socks.append(s)
    return socks


@pytest.fixture
def make_server():
    servers = []

    def make(**kw):
        srv = AllocationServer(tokens=[TOKEN], registry=CollectorRegistry(), **kw).start()
        servers.append(srv)
        return srv

    yield make
    for srv in servers:
        srv.close()


def test_slow_loris_does_not_delay_a_real_client_nor_hold_threads(make_server):
    srv = make_server()
    baseline = threading.active_count()
    socks = _slow_clients(srv.port, idle=60, header=30, upload=30)
    try:
        time.sleep(0.3)
        # Every slow client is held by the selector, not by a thread of its own (the stdlib
        # ThreadingHTTPServer had one thread per connection: 120 more here).
        assert threading.active_count() <= baseline + 10
        for _ in range(3):
            status, body, took = _get(srv.url + "/healthz")
            assert status == 200 and json.loads(body)["status"] == "ok"
            assert took < 1.0
        status, _, took = _get(srv.url + "/v1/allocation?spec=zlib@1.3")
        assert status == 200 and took < 1.0
    finally:
        for s in socks:
            s.close()


@pytest.mark.slow
def test_idle_and_stalled_clients_get_408_after_the_read_deadline(make_server):
    srv = make_server(read_timeout=0.5)
    idle, header, upload = _slow_clients(srv.port, idle=1, header=1, upload=1)
    try:
        for s in (idle, header, upload):
            s.settimeout(5)
            started = time.monotonic()
            answer = s.recv(4096)
            # A total deadline from accept: the stalled upload is not kept for ever.
            assert answer.startswith(b"HTTP/1.1 408"), answer
            assert time.monotonic() - started < 3
        # The 408 goes out just before the server drops the connection: give it that moment.
        deadline = time.monotonic() + 2
        while srv.httpd.open_connections and time.monotonic() < deadline:
            time.sleep(0.01)
        assert srv.httpd.open_connections == 0
    finally:
        for s in (idle, header, upload):
            s.close()


@pytest.mark.slow
def test_trickling_client_cannot_extend_its_deadline(make_server):
    srv = make_server(read_timeout=0.6)
    s = _connect(srv.port)
    try:
        started = time.monotonic()
        s.settimeout(0.2)
        answer = b""
        for ch in b"GET /healthz HTTP/1.1\r\nHost: trickle\r\nX-Pad: " + b"a" * 100:
            try:
                s.sendall(bytes([ch]))
            except OSError:
                break
            try:
                answer = s.recv(4096)
                break
            except socket.timeout:
                continue
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert time.monotonic() - started < 2.5
    finally:
        s.close()


def test_connection_cap_evicts_the_longest_waiting_so_real_clients_get_in(make_server):
    srv = make_server(max_connections=20, read_timeout=30)
    socks = _slow_clients(srv.port, idle=40, header=0, upload=0)
    try:
        time.sleep(0.3)
        assert srv.httpd.open_connections <= 20
        status, _, took = _get(srv.url + "/healthz")
        assert status == 200 and took < 1.0
        assert srv.httpd.stats["evicted"] >= 20
    finally:
        for s in socks:
            s.close()


def test_body_above_the_bound_is_refused_without_reading_it(make_server):
    srv = make_server(max_body=1024)
    s = _connect(srv.port)
    try:
        s.sendall(b"POST /v1/usage HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode()
                  + b"\r\nContent-Length: 10000000\r\n\r\n")
        started = time.monotonic()
        answer = s.recv(4096)
        assert answer.startswith(b"HTTP/1.1 413") and time.monotonic() - started < 1.0
    finally:
        s.close()


def test_health_hook_answers_503_when_unhealthy(make_server):
    srv = make_server(health=lambda: (False, {"status": "unhealthy", "consecutive_failed_cycles": 3}))
    status, body, _ = _get(srv.url + "/healthz")
    assert status == 503 and json.loads(body)["consecutive_failed_cycles"] == 3


@pytest.mark.parametrize("value, message", [
    ("0.0.0.0:99999", "port 99999 is out of range"),
    ("8088", "must be HOST:PORT"),
    ("host:", "must be HOST:PORT"),
])
def test_parse_listen_names_the_problem(value, message):
    with pytest.raises(ListenError, match=message):
        parse_listen(value)


@pytest.mark.slow
@pytest.mark.parametrize("argv, message", [
    (["--listen", "0.0.0.0:99999"], "--listen 0.0.0.0:99999: port 99999 is out of range (0 to 65535)"),
    (["--listen", "nonsense"], "--listen nonsense: must be HOST:PORT"),
    (["--max-body", "-5"], "--max-body -5: -5 is out of range (must be from 1 to 1073741824)"),
    (["--max-body", "1MB"], "--max-body 1MB: must be a whole number"),
    (["--workers", "0"], "--workers 0: 0 is out of range"),
    (["--read-timeout", "nan"], "--read-timeout nan: must be a number of seconds"),
])
def test_serve_validates_its_options(argv, message):
    # A real process: the old code crashed with a traceback on --listen 0.0.0.0:99999.
    r = subprocess.run([sys.executable, "-m", "retry_bot", "serve", *argv], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr
    assert "Traceback" not in r.stderr
