"""A scripted HTTP server on 127.0.0.1 for client tests: each request pops the next answer."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Scripted:
    """Answers in order; each answer is (status, headers, body) or "drop" (close without answering)."""

    def __init__(self) -> None:
        self.answers: list[Any] = []
        self.requests: list[tuple[str, str, bytes]] = []
        self.default: Any = (404, {}, {"message": "404 Not found"})
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def _serve(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                outer.requests.append((self.command, self.path, body))
                ans = outer.answers.pop(0) if outer.answers else outer.default
                if callable(ans):
                    ans = ans(self.command, self.path, body)
                if ans == "drop":
                    self.close_connection = True
                    self.connection.close()
                    return
                status, headers, payload = ans
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _serve

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
