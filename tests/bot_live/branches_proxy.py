"""A loopback HTTP proxy in front of the stand-in that adds ``GET /projects/:id/repository/branches/:branch``.

The stand-in does not serve the branches endpoint (docs/standin.md lists its REST
coverage); the bot reads a branch's head commit with it before re-creating a job.
This proxy answers that one endpoint from the stand-in's own state (the project's
``refs``, moved by :meth:`StandIn.set_ci_config`, i.e. a push that may create no
pipeline, like ``[skip ci]``) and forwards every other request unchanged, so the
bot still talks real HTTP, through python-gitlab, to a real server.
"""

from __future__ import annotations

import http.client
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from retry_bot.gitlab.standin import StandIn

_BRANCH = re.compile(r"^/api/v4/projects/([^/]+)/repository/branches/([^/?]+)$")
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection", "upgrade"}


class BranchesProxy:
    """Serve on 127.0.0.1; ``.url`` replaces the stand-in's URL in the bot's configuration."""

    def __init__(self, standin: StandIn) -> None:
        self.standin = standin
        target = urlsplit(standin.url)
        self.target = (target.hostname or "127.0.0.1", int(target.port or 80))
        self.branch_requests: list[str] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
                self.send_response(status)
                for k, v in headers:
                    if k.lower() not in _HOP:
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _serve(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                m = _BRANCH.match(self.path.split("?", 1)[0])
                if self.command == "GET" and m:
                    outer.branch_requests.append(unquote(m.group(2)))
                    status, payload = outer._branch(unquote(m.group(1)), unquote(m.group(2)),
                                                    self.headers.get("PRIVATE-TOKEN"))
                    import json

                    self._answer(status, [("Content-Type", "application/json")], json.dumps(payload).encode())
                    return
                conn = http.client.HTTPConnection(*outer.target, timeout=30)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                    conn.request(self.command, self.path, body=body or None, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                    self._answer(resp.status, resp.getheaders(), data)
                except OSError:
                    self.close_connection = True  # the stand-in dropped it: drop ours too
                finally:
                    conn.close()

            do_GET = do_POST = do_PUT = do_DELETE = _serve

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        daemon=True, name="branches-proxy")
        self._thread.start()

    def _branch(self, project: str, branch: str, token: str | None) -> tuple[int, dict[str, Any]]:
        if token != self.standin.token:
            return 401, {"message": "401 Unauthorized"}
        with self.standin.state.lock:
            try:
                proj = self.standin.state.project(int(project) if project.isdigit() else project)
            except Exception:  # noqa: BLE001 - the stand-in's "no such project"
                return 404, {"message": "404 Project Not Found"}
            sha = proj.refs.get(branch)
        if sha is None:
            return 404, {"message": "404 Branch Not Found"}
        return 200, {"name": branch, "commit": {"id": sha, "short_id": sha[:8]}, "merged": False,
                     "protected": False, "default": branch == proj.default_branch}

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
