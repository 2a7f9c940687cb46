"""A tiny real HTTP server on 127.0.0.1 for the allocation and collector tests."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


class Recorder:
    def __init__(self, respond: Callable[["BaseHTTPRequestHandler", bytes], tuple[int, object]]) -> None:
        self.respond = respond
        self.requests: list[dict] = []


def serve(respond) -> tuple[ThreadingHTTPServer, Recorder, str]:
    rec = Recorder(respond)

    class H(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else b""
            rec.requests.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                 "body": body})
            status, payload = rec.respond(self, body)
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out on purpose

        do_GET = do_POST = _handle

        def log_message(self, *a) -> None:  # keep test output clean
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, rec, f"http://127.0.0.1:{srv.server_address[1]}"
