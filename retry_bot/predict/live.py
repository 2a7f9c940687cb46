"""History kept up to date incrementally: the allocation server's model of a year of usage records.

:class:`LiveHistory` follows the state store's ``usage_records`` table by ``record_id``
(:meth:`retry_bot.state.Store.usage_records_after`): every new record updates the model
(:meth:`HistoryIndex.add`, which also feeds the calibration and the OOM-budget feedback);
there is no full reload.  Two locks keep allocations fast while records stream in:

* ``_io`` serializes readers of the store (one catch-up at a time); it is never held by an
  allocation request that would have to wait: a request catches up inline only when nobody
  else is (and then for at most ``inline_pages`` pages), else it answers from the model as it is;
* ``_model`` guards the index; it is held for ``lock_chunk`` adds or one prediction, never
  across I/O, so a request waits at most a few milliseconds.

Memory is bounded: the index keeps at most ``max_samples`` runs per key level and
``max_keys`` values per level, the calibration is bounded, and rows are read a page at a time.

On PostgreSQL, ids are assigned before commit, so a transaction can commit after a later
id was read; each catch-up re-reads ``overlap`` ids below its cursor and skips the ids it
has applied.
"""

from __future__ import annotations

import gc
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable

from retry_bot.predict.estimator import Allocation, Clamp, StaticSize, new_index, predict
from retry_bot.predict.history import HistoryIndex
from retry_bot.predict.keys import JobKey
from retry_bot.predict.settings import DEFAULT_SETTINGS, PredictionSettings

if TYPE_CHECKING:
    from retry_bot.state import Store

__all__ = ["LiveHistory"]


class LiveHistory:
    """A :class:`HistoryIndex` that follows a store (see the module docstring)."""

    def __init__(self, store: Store, settings: PredictionSettings = DEFAULT_SETTINGS, *, page: int = 500,
                 overlap: int = 256, inline_pages: int = 2, lock_chunk: int = 50):
        self.store = store
        self.settings = settings
        self.page = page
        self.overlap = overlap
        self.inline_pages = inline_pages
        self.lock_chunk = lock_chunk
        self._since_freeze = 0
        self.index: HistoryIndex = new_index(settings)
        self.cursor = 0
        self.applied = 0
        self._recent: deque[int] = deque(maxlen=4 * overlap)
        self._recent_set: set[int] = set()
        self._io = threading.Lock()
        self._model = threading.Lock()

    # ------------------------------------------------------------------ following the store
    def catch_up(self, max_pages: int | None = None, *, wait: bool = True) -> int:
        """Apply new records (all, or at most ``max_pages`` pages); returns how many were applied.

        ``wait=False``: return 0 at once when another thread is catching up.
        """
        if not self._io.acquire(blocking=wait):
            return 0
        try:
            return self._catch_up(max_pages)
        finally:
            self._io.release()

    def _catch_up(self, max_pages: int | None) -> int:
        from retry_bot.predict.sources import observation_from_row

        total = pages = 0
        after = max(0, self.cursor - self.overlap)
        while max_pages is None or pages < max_pages:
            rows = self.store.usage_records_after(after, self.page)
            pages += 1
            if not rows:
                break
            batch = []
            for row in rows:
                rid = int(row["record_id"])
                after = max(after, rid)
                if rid in self._recent_set or rid <= self.cursor - self.overlap:
                    continue
                self._remember(rid)
                got = observation_from_row(row, self.settings)
                if got is not None:
                    batch.append(got)
            for i in range(0, len(batch), self.lock_chunk):
                with self._model:   # a few milliseconds at most: requests interleave
                    for obs, trusted in batch[i:i + self.lock_chunk]:
                        self.index.add(obs, trusted)
                self.applied += len(batch[i:i + self.lock_chunk])
                time.sleep(0.0005)   # let request threads have the interpreter between chunks
            total += len(batch)
            self.cursor = max(self.cursor, after)
            self._since_freeze += len(batch)
            if self._since_freeze >= 20_000:
                # The model is millions of long-lived, acyclic objects: keep the cyclic collector
                # from re-scanning them (a full collection of a year of history stalls for
                # seconds).  Reference counting still frees whatever the model drops.
                gc.freeze()
                self._since_freeze = 0
            if len(rows) < self.page:
                break
        return total

    def _remember(self, rid: int) -> None:
        if len(self._recent) == self._recent.maxlen:
            self._recent_set.discard(self._recent[0])
        self._recent.append(rid)
        self._recent_set.add(rid)

    # ------------------------------------------------------------------ answering
    def predict(self, key: JobKey, now: float, clamp: Clamp = Clamp(), ref: str | None = None,
                static: StaticSize | None = None, protected: bool | None = None) -> Allocation:
        """The allocation from the model as it stands (no I/O)."""
        with self._model:
            return predict(self.index, key, now, self.settings, static, clamp, ref, protected)

    def locked(self, fn: Callable[[HistoryIndex], Any]) -> Any:
        """Run ``fn(index)`` with the model lock held (for callers that need the index itself)."""
        with self._model:
            return fn(self.index)
