"""Errors raised by the state store.

Every error says *what* went wrong, *where* (the database, with any password
removed) and *what to do*.  Callers branch on the class and on
:attr:`StateError.retryable`, never on the message text.
"""

from __future__ import annotations

__all__ = ["StateError", "StateUnavailable", "LeadershipLost"]


class StateError(Exception):
    """The state store cannot do what was asked; the message explains why and what to do.

    ``retryable`` is ``False`` for problems a retry cannot fix (a corrupt file,
    a schema newer than this code, a protocol violation such as completing an
    unknown intent).
    """

    retryable: bool = False

    def __init__(self, message: str, *, retryable: bool | None = None) -> None:
        super().__init__(message)
        if retryable is not None:
            self.retryable = retryable


class StateUnavailable(StateError):
    """The database cannot be reached right now (server down, connection lost, file locked).

    Always retryable: back off and call again; the store reconnects by itself.
    When ``outcome_unknown`` is true the failure happened while committing, so the
    write may or may not have happened; every store operation is safe to repeat.
    """

    retryable = True

    def __init__(self, message: str, *, outcome_unknown: bool = False) -> None:
        super().__init__(message)
        self.outcome_unknown = outcome_unknown


class LeadershipLost(StateError):
    """A replica that is not (or no longer) the leader tried to write bot state.

    Raised by fenced writes (:meth:`Store.begin_action`, :meth:`Store.complete_action`,
    ...) of a store that takes part in leader election when its term is stale.
    The replica must stop acting; the current leader reconciles open intents.
    """

    retryable = False
