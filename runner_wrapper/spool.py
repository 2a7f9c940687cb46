"""Re-deliver spooled usage records to the collector (``runner-wrapper spool send``).

``executor cleanup`` appends every final usage record to the spool (JSON Lines,
append-only, ``fsync``-ed) and POSTs it to the collector; when the collector is
down the record stays in the spool only.  :func:`send_spool` walks the spool
from where the last run stopped and POSTs each complete line again, one record
per request (the collector is idempotent: a record it already has is answered
as a duplicate, never stored twice).

Progress lives in a small **sidecar** next to the spool, ``<spool>.sent``: the
byte offset (and line number) up to which every record was acknowledged or
permanently rejected, plus the spool's inode, written atomically (temporary
file, ``fsync``, ``rename``, directory ``fsync``).  An ``flock`` on
``<spool>.sent.lock`` keeps two senders apart.  The spool itself is only ever
read, so jobs may keep appending while a sender runs; a last line without its
newline (a writer mid-append) is left for the next run.

What the collector answers decides what happens to a record:

========================================  ==============================================
2xx                                       delivered (or a duplicate): advance
400 / 413 with a JSON error               rejected for good (malformed, bad signature,
                                          too big): reported with its line number, skipped
401 with a JSON error                     the token is wrong: stop, offset kept
connection error, 5xx, 429                retried (tenacity, bounded); then stop, offset kept
anything else (404, HTML error pages...)  stop, offset kept
========================================  ==============================================

The core (:func:`send_spool`) takes the HTTP edge as a callable
(:data:`Deliver`), so it is tested against any collector; :func:`http_deliver`
is the real one (urllib + tenacity), and the only one: :func:`runner_wrapper.sinks.post_collector`
sends through it.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["Answer", "Deliver", "Rejection", "SendReport", "SidecarError", "SpoolBusy", "Progress",
           "sidecar_path", "read_progress", "write_progress", "send_spool", "http_deliver",
           "CHECKPOINT_EVERY", "run_send"]

#: Write the sidecar after this many records (and at the end): a crash re-sends at most this many
#: records, which the collector answers as duplicates.
CHECKPOINT_EVERY = 64
SIDECAR_SUFFIX = ".sent"
LOCK_SUFFIX = ".sent.lock"


class SidecarError(ValueError):
    """The sidecar exists but cannot be read or understood."""


class SpoolBusy(RuntimeError):
    """Another ``spool send`` holds the lock."""


@dataclass(frozen=True)
class Answer:
    """The collector's final answer to one record.

    ``status`` is the HTTP status, or ``None`` when no answer came (connection
    error after every retry); ``error`` the JSON body's ``error``/``detail`` (or
    the connection error), ``None`` when the body carried no JSON error.
    """

    status: int | None
    error: str | None = None
    duplicate: bool = False


#: POST one record body; returns the final :class:`Answer` (retries already done).
Deliver = Callable[[bytes], Answer]


@dataclass(frozen=True)
class Progress:
    """What the sidecar holds: every record before ``offset`` (line ``line`` + 1) is settled."""

    offset: int = 0
    line: int = 0
    inode: int | None = None


@dataclass(frozen=True)
class Rejection:
    """A record the collector refused for good (skipped)."""

    line: int
    status: int
    error: str
    job_id: Any = None


@dataclass
class SendReport:
    """Outcome of one :func:`send_spool` run."""

    spool: str
    start_offset: int = 0
    offset: int = 0
    line: int = 0
    delivered: int = 0
    duplicates: int = 0
    rejected: list[Rejection] = field(default_factory=list)
    #: complete records from ``offset`` on that were not delivered (dry run: all pending ones)
    pending: int = 0
    #: a last line without its newline was left for next time
    partial_tail: bool = False
    #: why the run stopped early (``None``: it reached the end of the spool)
    stopped: str | None = None
    stopped_line: int | None = None
    restarted: str | None = None
    dry_run: bool = False

    @property
    def up_to_date(self) -> bool:
        return self.stopped is None and self.pending == 0

    def as_dict(self) -> dict[str, Any]:
        return {"spool": self.spool, "up_to_date": self.up_to_date, "dry_run": self.dry_run,
                "start_offset": self.start_offset, "offset": self.offset, "line": self.line,
                "delivered": self.delivered, "duplicates": self.duplicates,
                "rejected": [{"line": r.line, "status": r.status, "error": r.error, "job_id": r.job_id}
                             for r in self.rejected],
                "pending": self.pending, "partial_tail": self.partial_tail, "stopped": self.stopped,
                "stopped_line": self.stopped_line, "restarted": self.restarted}

    def summary(self) -> str:
        """One line for people."""
        if self.dry_run:
            head = f"dry run: {self.pending} record(s) to send from line {self.line + 1}" if self.pending \
                else "dry run: up to date, nothing to send"
        else:
            head = (f"{self.delivered} record(s) delivered, {self.duplicates} already there, "
                    f"{len(self.rejected)} rejected")
            if self.up_to_date:
                head += "; up to date"
            else:
                head += f"; {self.pending} record(s) remain from line {self.line + 1}"
        if self.partial_tail:
            head += "; an incomplete last line was left for the next run"
        return head


def sidecar_path(spool: str) -> str:
    """``<spool>.sent``."""
    return spool + SIDECAR_SUFFIX


def read_progress(path: str) -> Progress:
    """The sidecar's progress; a missing sidecar means nothing was acknowledged yet."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return Progress()
    except OSError as exc:
        raise SidecarError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw)
        offset, line, inode = data["offset"], data.get("line", 0), data.get("inode")
        if not (isinstance(offset, int) and isinstance(line, int) and offset >= 0 and line >= 0
                and (inode is None or isinstance(inode, int))) or isinstance(offset, bool):
            raise ValueError
    except (ValueError, KeyError, TypeError, AttributeError):
        raise SidecarError(f"{path} is not a spool progress file (expected JSON with a byte \"offset\"); "
                           "remove it to re-send the whole spool (the collector answers duplicates)") from None
    return Progress(offset, line, inode)


def write_progress(path: str, progress: Progress) -> None:
    """Replace the sidecar atomically: temporary file, ``fsync``, ``rename``, directory ``fsync``."""
    directory = os.path.dirname(path) or "."
    tmp = f"{path}.tmp.{os.getpid()}"
    body = json.dumps({"offset": progress.offset, "line": progress.line, "inode": progress.inode},
                      sort_keys=True).encode() + b"\n"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
    try:
        try:
            os.write(fd, body)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _lock(spool: str, wait: bool) -> int:
    fd = os.open(spool + LOCK_SUFFIX, os.O_RDWR | os.O_CREAT, 0o640)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise SpoolBusy(f"another 'spool send' is running on {spool} (lock {spool + LOCK_SUFFIX})") from None
        raise
    return fd


def _job_id(line: bytes) -> Any:
    try:
        data = json.loads(line)
        return (data.get("job") or {}).get("id") if isinstance(data, dict) else None
    except (ValueError, AttributeError):
        return None


def send_spool(spool: str, deliver: Deliver | None, *, dry_run: bool = False, wait_for_lock: bool = False,
               checkpoint_every: int = CHECKPOINT_EVERY,
               on_rejected: Callable[[Rejection], None] | None = None) -> SendReport:
    """Send every complete spool record after the sidecar's offset, in order.

    Stops at the first record the collector cannot take now (see the module
    docstring) and keeps the offset before it.  ``dry_run`` only counts what is
    pending (no lock, no request, no sidecar write; ``deliver`` may be ``None``).
    A spool that was replaced (other inode) or truncated below the offset is
    sent again from its start.  Raises :class:`SidecarError`, :class:`SpoolBusy`
    and ``OSError`` (the spool cannot be read).
    """
    side = sidecar_path(spool)
    report = SendReport(spool=spool, dry_run=dry_run)
    if not os.path.exists(spool):
        return report  # nothing spooled yet
    lock_fd = None if dry_run else _lock(spool, wait_for_lock)
    try:
        progress = read_progress(side)
        try:
            f = open(spool, "rb")
        except FileNotFoundError:
            return report  # nothing spooled yet
        with f:
            st = os.fstat(f.fileno())
            size = st.st_size  # snapshot: appends after this wait for the next run
            if progress.inode is not None and progress.inode != st.st_ino:
                report.restarted = "the spool file was replaced"
                progress = Progress(0, 0, st.st_ino)
            elif progress.offset > size:
                report.restarted = "the spool file is shorter than the recorded offset"
                progress = Progress(0, 0, st.st_ino)
            offset, line_no = progress.offset, progress.line
            report.start_offset = offset
            f.seek(offset)
            saved = progress
            since_checkpoint = 0

            def checkpoint() -> None:
                nonlocal saved, since_checkpoint
                now = Progress(offset, line_no, st.st_ino)
                if now != saved:
                    write_progress(side, now)
                    saved = now
                since_checkpoint = 0

            pos = offset  # read position; ``offset`` only moves past settled records
            try:
                while pos < size:
                    raw = f.readline(size - pos)
                    if not raw.endswith(b"\n"):
                        report.partial_tail = True
                        break
                    pos += len(raw)
                    body = raw.strip()
                    settled = report.stopped is None and not dry_run
                    if not body:  # blank line: nothing to deliver
                        if settled:
                            offset, line_no = pos, line_no + 1
                        continue
                    if not settled:
                        report.pending += 1
                        continue
                    assert deliver is not None
                    ans = deliver(body)
                    status = ans.status
                    if status is not None and 200 <= status < 300:
                        if ans.duplicate:
                            report.duplicates += 1
                        else:
                            report.delivered += 1
                    elif status in (400, 413) and ans.error is not None:
                        rej = Rejection(line_no + 1, status, ans.error, _job_id(body))
                        report.rejected.append(rej)
                        if on_rejected:
                            on_rejected(rej)
                    else:
                        report.stopped = _why(ans)
                        report.stopped_line = line_no + 1
                        report.pending += 1
                        continue  # count what remains, without sending it
                    offset, line_no = pos, line_no + 1
                    since_checkpoint += 1
                    if since_checkpoint >= checkpoint_every:
                        checkpoint()
            finally:
                report.offset, report.line = offset, line_no
                if not dry_run:
                    checkpoint()
        return report
    finally:
        if lock_fd is not None:
            os.close(lock_fd)


def _why(ans: Answer) -> str:
    if ans.status is None:
        return f"collector unreachable: {ans.error}"
    if ans.status == 401:
        return "the collector refused the token (HTTP 401): check the token's environment variable"
    if ans.status >= 500 or ans.status == 429:
        return f"the collector is not accepting records (HTTP {ans.status}" + \
            (f": {ans.error})" if ans.error else ")")
    return f"unexpected answer from the collector (HTTP {ans.status}" + (f": {ans.error})" if ans.error else ")")


def http_deliver(url: str, token: str | None, timeout: float = 5.0, attempts: int = 3,
                 wait_initial: float = 0.5, wait_max: float = 4.0,
                 user_agent: str = "runner-wrapper spool-send") -> Deliver:
    """The real edge, and the wrapper's one collector client: POST each record as
    ``application/json`` with ``Authorization: Bearer`` (``executor cleanup`` sends through it too,
    via :func:`runner_wrapper.sinks.post_collector`).

    Connection errors, 5xx and 429 are retried with tenacity (``attempts`` in
    all, exponential back-off); the last answer is returned, never raised.
    """
    import http.client
    import urllib.error
    import urllib.request

    from tenacity import retry, retry_if_result, stop_after_attempt, wait_exponential

    headers = {"Content-Type": "application/json", "User-Agent": user_agent}
    if token:
        headers["Authorization"] = f"Bearer {token}"

    def _retryable(ans: Answer) -> bool:
        return ans.status is None or ans.status >= 500 or ans.status == 429

    @retry(stop=stop_after_attempt(max(1, attempts)), wait=wait_exponential(multiplier=wait_initial, max=wait_max),
           retry=retry_if_result(_retryable), retry_error_callback=lambda state: state.outcome.result())
    def _post(body: bytes) -> Answer:
        req = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return _answer(resp.status, resp.read())
        except urllib.error.HTTPError as exc:
            try:
                payload = exc.read()
            except OSError:
                payload = b""
            return _answer(exc.code, payload)
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
            # HTTPException: a bad port in the URL (InvalidURL), or something that is not HTTP answering
            # (BadStatusLine): no answer, like a refused connection
            reason = getattr(exc, "reason", exc)
            return Answer(None, str(reason) or type(exc).__name__)

    return _post


def _answer(status: int, payload: bytes) -> Answer:
    """Read the collector's JSON answer (``retry_bot.server``: ``stored``/``duplicates`` or ``error``)."""
    try:
        data = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        data = None
    if not isinstance(data, dict):
        return Answer(status, None)
    if 200 <= status < 300:
        return Answer(status, None, duplicate=bool(data.get("duplicates")) and not data.get("stored"))
    error = data.get("error")
    errors = data.get("errors")
    if isinstance(errors, list) and errors:  # ingest rejections: "record: <why>"
        detail = "; ".join(str(e) for e in errors[:3])
    else:
        detail = data.get("detail")
    if error is None and not detail:
        return Answer(status, None)
    text = " ".join(str(p) for p in (error, detail) if p)
    if "max_bytes" in data:
        text += f" (max {data['max_bytes']} bytes)"
    return Answer(status, text[:300])


def run_send(cfg: Any, environ: Any, *, dry_run: bool = False, as_json: bool = False, wait: bool = False,
             out: Any = None, err: Any = None) -> int:
    """``runner-wrapper spool send`` over a loaded :class:`runner_wrapper.config.WrapperConfig`.

    Prints one summary line (or JSON with ``as_json``) on stdout and one line per
    problem on stderr.  Returns 0 when up to date, 1 when records remain
    undelivered, 2 on configuration errors.  The token is never printed.
    """
    import sys

    out = out or sys.stdout
    err = err or sys.stderr

    def problem(msg: str) -> None:
        err.write(f"runner-wrapper: spool send: {msg}\n")
        err.flush()

    sinks = cfg.sinks
    if not sinks.spool:
        problem("[sinks] spool is empty in the configuration: there is no spool to send")
        return 2
    deliver: Deliver | None = None
    if not dry_run:
        if not sinks.collector_url:
            problem("[sinks] collector_url is empty in the configuration: nowhere to send the spool")
            return 2
        token = environ.get(sinks.collector_token_env) or None
        if token is None:
            problem(f"the collector token variable ${sinks.collector_token_env} is not set "
                    "([sinks] collector_token_env)")
            return 2
        from runner_wrapper.logconfig import register_secret

        register_secret(token)
        deliver = http_deliver(sinks.collector_url, token, sinks.collector_timeout, sinks.collector_attempts)

    def rejected(rej: Rejection) -> None:
        job = f" (job {rej.job_id})" if rej.job_id is not None else ""
        problem(f"line {rej.line}{job}: rejected by the collector (HTTP {rej.status}: {rej.error}); skipped")

    try:
        report = send_spool(sinks.spool, deliver, dry_run=dry_run, wait_for_lock=wait, on_rejected=rejected)
    except SidecarError as exc:
        problem(str(exc))
        return 2
    except SpoolBusy as exc:
        problem(f"{exc}; nothing done")
        return 1
    except OSError as exc:
        where = exc.filename or sinks.spool
        problem(f"cannot use {where} (spool {sinks.spool}): {exc.strerror or exc}")
        return 2
    if report.restarted:
        problem(f"{report.restarted}: sending it again from the start (the collector answers duplicates)")
    if report.stopped:
        problem(f"stopped at line {report.stopped_line}: {report.stopped}; "
                f"{report.pending} record(s) left for the next run")
    if as_json:
        out.write(json.dumps(report.as_dict(), sort_keys=True) + "\n")
    else:
        out.write(f"runner-wrapper: spool send: {report.summary()}\n")
    out.flush()
    return 0 if report.up_to_date else 1
