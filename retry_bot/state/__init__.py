"""Durable state of the retry bot: SQLite by default, PostgreSQL for several replicas.

Open a store with :func:`open_store`::

    from retry_bot.state import open_store

    store = open_store("sqlite:///var/lib/retry-bot/state.sqlite3")
    if store.mark_job_seen(job.id, job.project_id, facts, classification):
        store.record_decision(job.id, decision)
        intent = store.begin_action(f"retry:{job.id}", job.id, "retry", {})   # committed first
        new_job = gitlab_retry(job)                                            # then the write
        store.complete_action(intent.intent_id, {"new_job_id": new_job.id})

The protocol for intents left open by a crash, the schema, migrations and
leader election are described in ``docs/state.md``.
"""

from __future__ import annotations

from typing import Callable

from .backends import redact_url
from .errors import LeadershipLost, StateError, StateUnavailable
from .protocol import ActionFailed, perform_once, resume_intent
from .records import (INTENT_STATUSES, ActionIntent, DryRunDecision, FollowedJob, HeldAction, JobRecord,
                      Lineage)
from .schema import LATEST_VERSION
from .store import LEASE_NAME, Store

__all__ = [
    "open_store", "Store", "StateError", "StateUnavailable", "LeadershipLost",
    "ActionIntent", "JobRecord", "Lineage", "INTENT_STATUSES", "FollowedJob", "HeldAction",
    "DryRunDecision",
    "ActionFailed", "perform_once", "resume_intent",
    "LATEST_VERSION", "LEASE_NAME", "STATE_URL_ENV", "DEFAULT_STATE_URL", "redact_url",
]

#: Environment variable the commands read when no ``--url`` is given.
STATE_URL_ENV = "RETRY_BOT_STATE_URL"
#: The embedded default (the systemd unit's StateDirectory).
DEFAULT_STATE_URL = "sqlite:///var/lib/retry-bot/state.sqlite3"


def open_store(url: str, *, clock: Callable[[], float] | None = None, migrate: bool = True,
               busy_timeout: float = 10.0, connect_timeout: float = 5.0) -> Store:
    """Open (and by default migrate) the state store named by ``url``.

    ``url``: ``sqlite:///ABSOLUTE/PATH.sqlite3`` (a plain path works too),
    ``sqlite:///:memory:`` (tests), or ``postgresql://USER[:PASSWORD]@HOST:PORT/DB``
    (any libpq parameter in the query string, e.g. ``?options=-csearch_path%3Dbot``).

    ``clock`` gives epoch seconds for timestamps and lease expiry (inject a fake
    one in tests).  Without it, timestamps use ``time.time`` and PostgreSQL leases
    use the database server's clock, so replicas on hosts with skewed clocks agree.  With ``migrate=False`` an older schema is left as it is
    (``store.needs_migration``) and data operations refuse to run.

    Raises :class:`StateError` when the database is corrupt, is not a state
    database, or has a schema newer than this code (never downgraded), and
    :class:`StateUnavailable` when it cannot be reached (retry later).
    Before migrating an existing SQLite file, a copy is kept as ``PATH.vN.bak``.
    """
    from .backends import open_backend

    backend = open_backend(url, busy_timeout=busy_timeout, connect_timeout=connect_timeout)
    try:
        return Store(backend, clock=clock, migrate=migrate)
    except BaseException:
        backend.close()
        raise
