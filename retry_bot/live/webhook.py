"""GitLab job webhooks: a faster trigger than polling, never a second way to decide.

GitLab sends a **Job Hook** (``X-Gitlab-Event: Job Hook``, body ``object_kind:
"build"``) every time a job changes status (G ``lib/gitlab/data_builder/build.rb``;
``doc/user/project/integrations/webhook_events.md``, "Job events").  The receiver:

* **authenticates** it by the webhook's *Secret token*, which GitLab sends in
  ``X-Gitlab-Token``; compared in constant time (:func:`hmac.compare_digest`);
  the secret comes from the environment or a file and is never logged;
* is **bounded**: a body above ``max_body_bytes`` is answered 413 unread (the
  bot's :class:`~retry_bot.httpserver.BoundedHTTPServer` does not read it), and
  the queue holds at most ``queue_size`` job ids;
* is **fast**: it parses the JSON, keeps ``(project_id, build_id, build_status)``
  of a job that *ended* (``failed``, ``success``, ``canceled``, ``skipped``) and
  answers 200; GitLab counts a slow answer as a failure and
  disables hooks that keep failing (G ``doc/user/project/integrations/webhooks.md``,
  "Auto-disabled webhooks"; ``app/models/concerns/web_hooks/auto_disabling.rb``),
  so anything that is not an authentication or format problem is answered 200
  (other events and statuses: ``ignored``; a full queue: ``dropped``, and the
  next poll finds the job);
* only **enqueues**: deciding stays in the poller's exactly-once path
  (:meth:`retry_bot.live.daemon.Bot.handle_events` reads the job from GitLab and hands a
  failed one to :meth:`retry_bot.live.poller.Poller.handle_job`, which the state store
  makes idempotent; a job the bot created and follows goes to
  :meth:`retry_bot.live.poller.Poller.followed_job_changed`, which records its end once).
  Events of jobs that ended otherwise cost the bot one state-store lookup and no API
  call unless it follows the job.  A forged or replayed event can at most make the
  bot look at a job it would have polled anyway.

The queue de-duplicates by job id (the newest status wins): GitLab may send several
events for one job (and the same event again when a person presses "Resend").  When
it is full, a failure pushes out the oldest queued event of a job that did not fail
(its end is also found by the poll that follows created jobs); a failure is dropped
only when the whole queue holds failures.
"""

from __future__ import annotations

import hmac
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from runner_wrapper.logconfig import get_logger, register_secret

__all__ = ["JobEvent", "JobEventQueue", "WebhookReceiver", "parse_job_event", "EventRejected", "ENDED"]

log = get_logger("retry_bot.webhook")

#: GitLab's header naming the event (G ``app/services/web_hook_service.rb``, ``X-Gitlab-Event``).
JOB_HOOK = "Job Hook"
#: Job statuses that end a job (G ``Ci::HasStatus::COMPLETED_STATUSES``, without ``manual``):
#: the bot decides a ``failed`` one and records the end of a job it follows.
ENDED = ("failed", "success", "canceled", "skipped")


@dataclass(frozen=True)
class JobEvent:
    """What the bot keeps of one job event."""

    project_id: int
    job_id: int
    status: str
    failure_reason: str | None = None


class EventRejected(ValueError):
    """A request that is not a usable job event; ``status`` is the HTTP answer."""

    def __init__(self, status: int, message: str):
        self.status = status
        super().__init__(message)


def parse_job_event(body: bytes) -> JobEvent:
    """The job event in ``body`` (GitLab's job hook JSON), or :class:`EventRejected` (400)."""
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EventRejected(400, f"body is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise EventRejected(400, "body is not a JSON object")
    if data.get("object_kind") != "build":
        raise EventRejected(400, f"object_kind is {data.get('object_kind')!r}, not 'build'")
    try:
        job_id = int(data["build_id"])
        project_id = int(data["project_id"])
    except (KeyError, TypeError, ValueError) as exc:
        raise EventRejected(400, "build_id and project_id must be integers") from exc
    if job_id <= 0 or project_id <= 0 or isinstance(data.get("build_id"), bool):
        raise EventRejected(400, "build_id and project_id must be positive")
    reason = data.get("build_failure_reason")
    return JobEvent(project_id, job_id, str(data.get("build_status") or ""),
                    str(reason) if isinstance(reason, str) else None)


class JobEventQueue:
    """Bounded, de-duplicated FIFO of ``(project_id, job_id, status)``; thread-safe."""

    def __init__(self, maxsize: int = 10000) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be >= 1")
        self.maxsize = maxsize
        self._items: OrderedDict[int, tuple[int, str]] = OrderedDict()  # job id -> (project id, status)
        self._cond = threading.Condition()
        #: Events dropped because the queue was full (polling finds those jobs).
        self.dropped = 0

    def put(self, project_id: int, job_id: int, status: str = "failed") -> str:
        """``queued``, ``duplicate`` (already waiting; the status is updated) or ``dropped`` (full)."""
        with self._cond:
            if job_id in self._items:
                self._items[job_id] = (project_id, status)
                return "duplicate"
            if len(self._items) >= self.maxsize:
                victim = next((j for j, (_, st) in self._items.items() if st != "failed"), None) \
                    if status == "failed" else None
                self.dropped += 1
                if victim is None:
                    return "dropped"
                del self._items[victim]  # a failure is worth more than the end of another job
            self._items[job_id] = (project_id, status)
            self._cond.notify_all()
            return "queued"

    def pop(self, limit: int | None = None) -> list[tuple[int, int, str]]:
        """Up to ``limit`` ``(project_id, job_id, status)``, oldest first."""
        with self._cond:
            out = []
            while self._items and (limit is None or len(out) < limit):
                jid, (pid, status) = self._items.popitem(last=False)
                out.append((pid, jid, status))
            return out

    def wait(self, timeout: float) -> bool:
        """Block until something is queued (True) or ``timeout`` passes (False)."""
        with self._cond:
            if self._items:
                return True
            self._cond.wait(timeout)
            return bool(self._items)

    def wake(self) -> None:
        """Release a :meth:`wait` (e.g. on shutdown)."""
        with self._cond:
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)


class WebhookReceiver:
    """Checks, parses and enqueues GitLab job events (see the module docstring).

    Args:
        secret: the webhook's secret token (``None``: every request is refused).
        queue: where failed jobs go.
        max_body_bytes: larger bodies are refused with 413 unread.
        on_event: called with the outcome label of each request (metrics).
    """

    def __init__(self, secret: str | None, *, queue: JobEventQueue | None = None, max_body_bytes: int = 256 * 1024,
                 on_event: Callable[[str], None] | None = None) -> None:
        self._secret = secret.encode("utf-8") if secret else None
        register_secret(secret)
        self.queue = queue if queue is not None else JobEventQueue()
        self.max_body_bytes = int(max_body_bytes)
        self.on_event = on_event

    def authorized(self, token: str | None) -> bool:
        """Constant-time comparison of ``X-Gitlab-Token`` with the secret."""
        if self._secret is None or token is None:
            return False
        return hmac.compare_digest(token.encode("utf-8", "surrogateescape"), self._secret)

    def handle(self, headers: Mapping[str, str] | Any, read_body: Callable[[int], bytes]) -> tuple[int, dict[str, Any]]:
        """One request: ``headers`` (case-insensitive ``get``) and a reader of the body -> (status, JSON answer)."""
        status, answer, outcome = self._handle(headers, read_body)
        if self.on_event is not None:
            try:
                self.on_event(outcome)
            except Exception:  # noqa: BLE001 - metrics must never break the answer
                pass
        return status, answer

    def _handle(self, headers: Any, read_body: Callable[[int], bytes]) -> tuple[int, dict[str, Any], str]:
        if not self.authorized(headers.get("X-Gitlab-Token")):
            # Never log the token received: it may be a real secret sent to the wrong place.
            log.warning("webhook_unauthorized", note="X-Gitlab-Token missing or not the configured secret")
            return 401, {"error": "unauthorized", "detail": "X-Gitlab-Token does not match the webhook secret"}, \
                "unauthorized"
        try:
            length = int(headers.get("Content-Length") or "")
        except ValueError:
            return 411, {"error": "Content-Length required"}, "invalid"
        if length < 0 or length > self.max_body_bytes:
            return 413, {"error": "body too large", "max_bytes": self.max_body_bytes}, "too_large"
        event_name = headers.get("X-Gitlab-Event") or ""
        if event_name != JOB_HOOK:
            # Another event the hook was set up for: acknowledged, not used (a 4xx would count
            # towards GitLab disabling the hook).
            return 200, {"ignored": f"event {event_name!r} is not a {JOB_HOOK}"}, "ignored"
        try:
            event = parse_job_event(read_body(length))
        except EventRejected as exc:
            log.warning("webhook_invalid", error=str(exc))
            return exc.status, {"error": "invalid job event", "detail": str(exc)}, "invalid"
        if event.status not in ENDED:
            return 200, {"ignored": f"job {event.job_id} is {event.status or 'of unknown status'}"}, "ignored"
        outcome = self.queue.put(event.project_id, event.job_id, event.status)
        if outcome == "dropped":
            log.warning("webhook_queue_full", job_id=event.job_id, project_id=event.project_id,
                        queue_size=self.queue.maxsize, note="dropped; the next full poll finds the job")
        else:
            log.debug("webhook_job_event", job_id=event.job_id, project_id=event.project_id, outcome=outcome,
                      failure_reason=event.failure_reason)
        return 200, {outcome: event.job_id}, outcome
