"""One collector client (runner_wrapper/spool.py ``http_deliver``) for ``executor cleanup`` and ``spool send``.

``sinks.post_collector`` had its own urllib + tenacity copy, which dropped the collector's reason for
refusing a record.  Neither copy caught ``http.client.HTTPException``: a malformed port in the URL, or
something that is not HTTP answering, escaped as a traceback (``cleanup`` then failed the job as a
system failure instead of keeping the record in the spool; ``spool send`` crashed).
"""

from __future__ import annotations

import json
import socket
import threading

import pytest

from runner_wrapper.sinks import CollectorError, post_collector
from runner_wrapper.spool import http_deliver
from tests.wrapper.httpserver import serve


def test_a_malformed_collector_url_is_a_collector_error_not_a_crash() -> None:
    """``[sinks] collector_url`` is only checked for its scheme: a bad port reaches urllib."""
    with pytest.raises(CollectorError, match="unreachable after 2 attempt"):
        post_collector("http://127.0.0.1:80a/v1/usage", {"x": 1}, None, 0.5, 2, wait_initial=0.01)


def test_a_port_that_does_not_speak_http_is_unreachable_for_both_senders() -> None:
    """Something else listening on the collector's port: ``spool send`` stops, ``cleanup`` keeps the record."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()

    def garbage() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                conn.recv(65536)
                conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")

    thread = threading.Thread(target=garbage, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1/usage"
    try:
        answer = http_deliver(url, None, 1.0, 2, wait_initial=0.01)(b"{}")
        assert answer.status is None and answer.error
        with pytest.raises(CollectorError, match="unreachable after 2 attempt"):
            post_collector(url, {"x": 1}, None, 1.0, 2, wait_initial=0.01)
    finally:
        stop.set()
        thread.join()
        listener.close()


def test_a_refusal_says_why() -> None:
    srv, rec, base = serve(lambda h, b: (400, {"error": "bad signature", "detail": "unknown key_id 'farm'"}))
    try:
        with pytest.raises(CollectorError, match=r"refused the record: HTTP 400: bad signature unknown key_id"):
            post_collector(base + "/v1/usage", {"x": 1}, "tok", 1.0, 3, wait_initial=0.01)
        assert len(rec.requests) == 1  # a refusal is not retried
    finally:
        srv.shutdown()


def test_both_senders_put_the_same_request_on_the_wire() -> None:
    srv, rec, base = serve(lambda h, b: (201, {"stored": 1}))
    try:
        post_collector(base + "/v1/usage", {"b": 2, "a": 1}, "tok", 1.0, 1)
        http_deliver(base + "/v1/usage", "tok", 1.0, 1)(b'{"a":1,"b":2}')
    finally:
        srv.shutdown()
    first, second = rec.requests
    assert first["body"] == second["body"] == json.dumps({"a": 1, "b": 2}, separators=(",", ":")).encode()
    for key in ("Authorization", "Content-Type"):
        assert first["headers"][key] == second["headers"][key]
    assert first["headers"]["User-Agent"] == "runner-wrapper"
    assert second["headers"]["User-Agent"] == "runner-wrapper spool-send"


def test_5xx_then_success_is_retried_by_the_shared_client() -> None:
    answers = [503, 429, 201]
    srv, rec, base = serve(lambda h, b: (answers.pop(0), {}))
    try:
        assert post_collector(base + "/v1/usage", {"x": 1}, None, 1.0, 3, wait_initial=0.01) == 201
    finally:
        srv.shutdown()
    assert len(rec.requests) == 3
