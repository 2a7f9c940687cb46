"""The bot's one HTTP server: bounded against slow and idle clients.

Used by ``retry-bot serve`` and by ``retry-bot run`` (through
:class:`retry_bot.server.AllocationServer`).  The stdlib's ``ThreadingHTTPServer``
gives every connection a thread that blocks on ``recv`` with no timeout, so 300
idle connections hold 300 threads and a stalled upload holds one for ever.  Here:

* **one selector thread** accepts connections and reads each request (request
  line, headers, and a body up to ``max_body`` bytes) without blocking; an idle
  or trickling client costs a socket and a buffer, never a worker;
* a request must arrive whole within ``read_timeout`` seconds of the connection
  being accepted (a *total* deadline, so one byte a second does not extend it);
  after that the client gets ``408 Request Timeout`` and is closed;
* at most ``max_connections`` connections are open at once; a new one beyond the
  cap evicts the incomplete connection that has waited longest (so stalled
  clients cannot lock real ones out), or is answered ``503`` when every open
  connection is a request being answered;
* only **complete** requests reach the **bounded worker pool** (``workers``
  threads), which runs an ordinary :class:`http.server.BaseHTTPRequestHandler`
  subclass on the buffered bytes: one request per connection
  (``Connection: close``), and the response is written with a socket timeout.

A body announced above ``max_body`` is not read: the request goes to the handler
with its headers only, and the handler answers ``413`` (it must check
``Content-Length`` first; reading more than was buffered returns short, never blocks).
"""

from __future__ import annotations

import io
import re
import selectors
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

__all__ = ["BoundedHTTPServer", "RequestHandler", "ListenError", "parse_listen", "DEFAULT_READ_TIMEOUT",
           "DEFAULT_MAX_CONNECTIONS", "DEFAULT_WORKERS", "MAX_HEADER_BYTES"]

DEFAULT_READ_TIMEOUT = 10.0
DEFAULT_MAX_CONNECTIONS = 256
DEFAULT_WORKERS = 8
#: Request line + headers, as http.server's line limit (65536) plus room for the headers.
MAX_HEADER_BYTES = 64 * 1024
_CONTENT_LENGTH = re.compile(rb"^content-length[ \t]*:[ \t]*(\d+)[ \t]*\r?$", re.I | re.M)
_EXPECT_CONTINUE = re.compile(rb"^expect[ \t]*:[ \t]*100-continue[ \t]*\r?$", re.I | re.M)


class ListenError(ValueError):
    """A listen address that is not ``HOST:PORT`` with a port from 0 to 65535."""


def parse_listen(value: str) -> tuple[str, int]:
    """``"HOST:PORT"`` -> ``(host, port)``; ``[::1]:8088`` for IPv6; port 0 means any free port.

    >>> parse_listen("127.0.0.1:8088"), parse_listen("[::1]:0")
    (('127.0.0.1', 8088), ('::1', 0))
    """
    if not isinstance(value, str):
        raise ListenError(f"must be HOST:PORT, got {value!r}")
    host, _, port = value.strip().rpartition(":")
    if not host or not port.isdigit():
        raise ListenError(f"must be HOST:PORT, got {value!r}")
    if not 0 <= int(port) <= 65535:
        raise ListenError(f"port {port} is out of range (0 to 65535) in {value!r}")
    return host.strip("[]"), int(port)


class RequestHandler(BaseHTTPRequestHandler):
    """Base class of the bot's handlers: one buffered request, one response, then close.

    Subclasses implement ``do_GET`` / ``do_POST`` as usual; ``self.rfile`` holds the
    request as the selector thread read it, ``self.wfile`` writes to the socket.
    """

    protocol_version = "HTTP/1.1"
    server_version = "retry-bot"
    sys_version = ""

    def setup(self) -> None:
        sock, data = self.request
        self.connection = sock
        self.rfile = io.BytesIO(data)
        self.wfile = _SocketWriter(sock)

    def handle(self) -> None:
        self.close_connection = True
        self.handle_one_request()

    def handle_expect_100(self) -> bool:
        # The selector thread already sent "100 Continue" when it wanted the body.
        return True

    def send_response(self, code: int, message: str | None = None) -> None:
        super().send_response(code, message)
        if code >= 200:
            self.send_header("Connection", "close")

    def log_message(self, fmt: str, *args: Any) -> None:  # request lines may carry query strings: not logged
        pass

    def finish(self) -> None:
        pass


class _SocketWriter(io.BufferedIOBase):
    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        self._sock.sendall(b)
        with memoryview(b) as view:
            return view.nbytes


@dataclass
class _Conn:
    sock: socket.socket
    addr: Any
    deadline: float
    accepted: float
    buf: bytearray = field(default_factory=bytearray)
    header_end: int = -1
    body_len: int = 0
    continued: bool = False


class BoundedHTTPServer:
    """A selector-read, pool-answered HTTP/1.1 server (see the module docstring).

    Args:
        address: ``(host, port)``; port 0 picks a free port (see :attr:`server_address`).
        handler_class: a :class:`RequestHandler` subclass.
        read_timeout: seconds a connection has to deliver its whole request.
        max_connections: open connections at most (reading or being answered).
        workers: threads answering complete requests.
        max_body: largest body read into memory (a larger one is left to the handler's 413).
    """

    def __init__(self, address: tuple[str, int], handler_class: type[RequestHandler], *,
                 read_timeout: float = DEFAULT_READ_TIMEOUT, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 workers: int = DEFAULT_WORKERS, max_body: int = 1 << 20) -> None:
        if read_timeout <= 0 or max_connections < 1 or workers < 1 or max_body < 0:
            raise ValueError("read_timeout, max_connections and workers must be positive, max_body >= 0")
        self.handler_class = handler_class
        self.read_timeout = float(read_timeout)
        self.max_connections = int(max_connections)
        self.workers = int(workers)
        self.max_body = int(max_body)
        host, port = address
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.socket.bind((host, port))
            self.socket.listen(128)
        except OSError:
            self.socket.close()
            raise
        self.socket.setblocking(False)
        self.server_address = self.socket.getsockname()[:2]
        self._reading: dict[int, _Conn] = {}
        self._answering = 0
        self._count_lock = threading.Lock()
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        self._pool: ThreadPoolExecutor | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        #: Counters for tests and operators: timed_out, evicted, refused, answered.
        self.stats = {"timed_out": 0, "evicted": 0, "refused": 0, "answered": 0}

    # ------------------------------------------------------------------ lifecycle

    def serve_forever(self, poll_interval: float = 0.1) -> None:
        """Accept, read and dispatch until :meth:`shutdown`."""
        self._stop.clear()
        self._stopped.clear()
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="retry-bot-http")
        sel = selectors.DefaultSelector()
        sel.register(self.socket, selectors.EVENT_READ, None)
        sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        try:
            while not self._stop.is_set():
                for key, _ in sel.select(timeout=poll_interval):
                    if key.data is None:
                        self._accept(sel)
                    elif key.data == "wake":
                        try:
                            self._wake_r.recv(4096)
                        except OSError:
                            pass
                    else:
                        self._read(sel, key.data)
                self._expire(sel)
        finally:
            for conn in list(self._reading.values()):
                self._drop(sel, conn)
            sel.close()
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop :meth:`serve_forever` (from another thread) and wait for it."""
        self._stop.set()
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        self._stopped.wait(timeout=10)

    def server_close(self) -> None:
        for s in (self.socket, self._wake_r, self._wake_w):
            try:
                s.close()
            except OSError:
                pass

    @property
    def open_connections(self) -> int:
        with self._count_lock:
            return len(self._reading) + self._answering

    # ------------------------------------------------------------------ the selector thread

    def _accept(self, sel: selectors.BaseSelector) -> None:
        while True:
            try:
                sock, addr = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # e.g. EMFILE: leave it in the backlog, try again on the next loop
                return
            sock.setblocking(False)
            if self.open_connections >= self.max_connections and not self._evict_one(sel):
                self.stats["refused"] += 1
                _reply_and_close(sock, 503, "server busy, try again")
                continue
            now = time.monotonic()
            conn = _Conn(sock, addr, deadline=now + self.read_timeout, accepted=now)
            with self._count_lock:
                self._reading[sock.fileno()] = conn
            sel.register(sock, selectors.EVENT_READ, conn)

    def _evict_one(self, sel: selectors.BaseSelector) -> bool:
        """Close the incomplete connection that has waited longest; False if none."""
        if not self._reading:
            return False
        oldest = min(self._reading.values(), key=lambda c: c.accepted)
        self.stats["evicted"] += 1
        _reply_and_close(oldest.sock, 503, "server busy, try again", close=False)
        self._drop(sel, oldest)
        return True

    def _read(self, sel: selectors.BaseSelector, conn: _Conn) -> None:
        try:
            chunk = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(sel, conn)
            return
        conn.buf += chunk
        if conn.header_end < 0:
            end = conn.buf.find(b"\r\n\r\n")
            sep = 4
            if end < 0:
                end, sep = conn.buf.find(b"\n\n"), 2
            if end < 0:
                if len(conn.buf) > MAX_HEADER_BYTES:
                    _reply_and_close(conn.sock, 431, "request header too large", close=False)
                    self._drop(sel, conn)
                return
            conn.header_end = end + sep
            head = bytes(conn.buf[:conn.header_end])
            m = _CONTENT_LENGTH.search(head)
            conn.body_len = int(m.group(1)) if m else 0
            if conn.body_len > self.max_body:
                conn.body_len = 0  # not read: the handler answers 413 from the header
                del conn.buf[conn.header_end:]
            elif conn.body_len and len(conn.buf) < conn.header_end + conn.body_len \
                    and _EXPECT_CONTINUE.search(head) and not conn.continued:
                conn.continued = True
                try:
                    conn.sock.send(b"HTTP/1.1 100 Continue\r\n\r\n")
                except OSError:
                    pass
        if len(conn.buf) >= conn.header_end + conn.body_len:
            self._dispatch(sel, conn)

    def _dispatch(self, sel: selectors.BaseSelector, conn: _Conn) -> None:
        sel.unregister(conn.sock)
        with self._count_lock:
            self._reading.pop(conn.sock.fileno(), None)
            self._answering += 1
        data = bytes(conn.buf[:conn.header_end + conn.body_len])
        assert self._pool is not None
        self._pool.submit(self._answer, conn.sock, conn.addr, data)

    def _expire(self, sel: selectors.BaseSelector) -> None:
        now = time.monotonic()
        for conn in [c for c in self._reading.values() if c.deadline <= now]:
            self.stats["timed_out"] += 1
            _reply_and_close(conn.sock, 408, "request not received in time", close=False)
            self._drop(sel, conn)

    def _drop(self, sel: selectors.BaseSelector, conn: _Conn) -> None:
        try:
            sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        with self._count_lock:
            self._reading.pop(conn.sock.fileno(), None)
        _close(conn.sock)

    # ------------------------------------------------------------------ workers

    def _answer(self, sock: socket.socket, addr: Any, data: bytes) -> None:
        try:
            sock.setblocking(True)
            sock.settimeout(self.read_timeout)  # a client that does not read its answer is dropped too
            self.handler_class((sock, data), addr, self)  # type: ignore[arg-type]
            self.stats["answered"] += 1
        except Exception:  # noqa: BLE001 - a broken connection must not kill the worker
            pass
        finally:
            _close(sock)
            with self._count_lock:
                self._answering -= 1


def _reply_and_close(sock: socket.socket, status: int, text: str, close: bool = True) -> None:
    """Best effort, non-blocking: a short plain-text answer (the client may be gone or not reading)."""
    import http

    body = (text + "\n").encode()
    head = (f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    try:
        sock.send(head + body)
    except OSError:
        pass
    if close:
        _close(sock)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass
