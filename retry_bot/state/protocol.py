"""The intent protocol, as a small driver around one GitLab write.

GitLab writes (retry, create pipeline, play) are not idempotent, so the bot:

1. :meth:`Store.begin_action` (committed) *before* the write;
2. makes the write;
3. :meth:`Store.complete_action` with GitLab's answer (or :meth:`Store.fail_action`).

A crash between 1 and 3 leaves an *open* intent.  On the next start (or when a
new leader takes over), the bot must not blindly redo it: it first *observes*
GitLab (was the pipeline for this origin job created? was the manual job
played?) and completes the intent with what it finds; only when GitLab shows
nothing does it make the write again.  :func:`perform_once` and
:func:`resume_intent` implement exactly that, with the GitLab calls passed in.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from .records import ActionIntent
from .store import Store

__all__ = ["ActionFailed", "perform_once", "resume_intent"]

Perform = Callable[[ActionIntent], Mapping[str, Any]]
Observe = Callable[[ActionIntent], "Mapping[str, Any] | None"]


class ActionFailed(Exception):
    """Raised by a ``perform`` callable when GitLab *refused* the write (so it surely did not happen).

    ``retryable``: a later attempt may succeed (e.g. 409 while a pipeline is
    being created); otherwise the intent is settled as failed for good.
    Any other exception leaves the intent open: its outcome is unknown, and the
    next :func:`resume_intent` observes GitLab before acting again.
    """

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


def resume_intent(store: Store, intent: ActionIntent, perform: Perform, observe: Observe, *,
                  sleep: Callable[[float], None] = time.sleep) -> ActionIntent:
    """Drive one intent to a settled state without repeating a write GitLab already has.

    ``observe(intent)`` reads GitLab and returns the result of the write if it
    happened (same shape as ``perform``'s), else ``None``.  It is called whenever
    an earlier run may have made the write (the intent existed, or is a
    re-opened retryable failure), after :meth:`Store.reconcile_delay` when a
    replica took over early.  Right before ``perform``, a leader renews its lease
    (:meth:`Store.ensure_leader`); a deposed one gets :class:`LeadershipLost` and
    writes nothing.
    """
    if intent.status in ("completed", "failed"):
        return intent
    if not intent.created or intent.attempts > 1:
        delay = store.reconcile_delay(intent)
        if delay > 0:
            sleep(delay)
        found = observe(intent)
        if found is not None:
            return store.complete_action(intent.intent_id, dict(found))
    store.ensure_leader()
    try:
        result = perform(intent)
    except ActionFailed as exc:
        return store.fail_action(intent.intent_id, str(exc) or type(exc).__name__, exc.retryable)
    return store.complete_action(intent.intent_id, dict(result))


def perform_once(store: Store, idempotency_key: str, job_id: int, kind: str, payload: Mapping[str, Any], *,
                 perform: Perform, observe: Observe, sleep: Callable[[float], None] = time.sleep) -> ActionIntent:
    """Make the GitLab write named by ``idempotency_key`` at most once, and never forget it.

    Typical key: ``f"resize:{origin_job_id}:{attempt}"`` (one per decision, so a
    crash and restart find the same key).
    """
    intent = store.begin_action(idempotency_key, job_id, kind, payload)
    return resume_intent(store, intent, perform, observe, sleep=sleep)
