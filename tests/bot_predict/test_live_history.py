"""History at scale: the model follows the store incrementally, never stalls a request, stays bounded."""

from __future__ import annotations

import threading
import time
import urllib.request

import pytest
from prometheus_client import CollectorRegistry

from retry_bot.predict import JobKey, Observation
from retry_bot.predict.history import HistoryIndex
from retry_bot.predict.keys import KeySettings
from retry_bot.predict.live import LiveHistory
from retry_bot.predict.settings import DEFAULT_SETTINGS
from retry_bot.server import AllocationServer
from retry_bot.state import open_store
from tests.bot_predict.conftest import signed_record

KEY = JobKey.of({"package": "alpha", "version": "1.0", "compiler": "gcc@12.3.0", "project": "spack/spack-packages"})


def _records(store, first: int, n: int, peak: int = 2_000_000_000) -> None:
    for i in range(first, first + n):
        store.add_usage_record(signed_record(i, peak=peak, finished=f"2025-01-06T{i % 24:02d}:00:00Z"), "test")


def _follow_incrementally(store) -> None:
    live = LiveHistory(store, DEFAULT_SETTINGS, page=4, overlap=3)
    _records(store, 1, 5)
    assert live.catch_up() == 5
    index = live.index
    assert live.predict(KEY, 1.8e9).samples == 5
    _records(store, 100, 7, peak=4_000_000_000)
    assert live.catch_up() == 7            # only the new ones
    assert live.index is index and live.applied == 12
    assert live.catch_up() == 0            # nothing twice
    assert live.predict(KEY, 1.8e9).samples == 12


def test_new_records_update_the_model_without_a_reload(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    try:
        _follow_incrementally(store)
    finally:
        store.close()


def test_follows_postgresql_too(pg_server):
    store = open_store(pg_server.url(schema=pg_server.new_schema()))
    try:
        _follow_incrementally(store)
    finally:
        store.close()


def test_a_record_committed_late_below_the_cursor_is_still_applied(tmp_path):
    """PostgreSQL hands out ids before commit: id 3 may become visible after id 5 was read."""
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    try:
        _records(store, 1, 5)
        late = store.usage_records_after(0, 10)[2]
        store._write(lambda tx: tx.execute("DELETE FROM usage_records WHERE record_id = ?",   # noqa: SLF001
                                           (late["record_id"],)), fenced=False)
        live = LiveHistory(store, DEFAULT_SETTINGS, page=2, overlap=4)
        assert live.catch_up() == 4
        cols = [k for k in late if k != "record"]
        import json

        vals = [json.dumps(late[k]) if k == "key_fields" else late[k] for k in cols]
        store._write(lambda tx: tx.execute(                                                     # noqa: SLF001
            f"INSERT INTO usage_records ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})", vals),
            fenced=False)
        assert live.catch_up() == 1 and live.applied == 5
    finally:
        store.close()


class _SlowStore:
    """A store whose reads take a while (a big history, a slow database)."""

    def __init__(self, store, delay: float):
        self.store, self.delay = store, delay
        self.reading = threading.Event()

    def __getattr__(self, name):
        return getattr(self.store, name)

    def usage_records(self, *a, **kw):
        self.reading.set()
        time.sleep(self.delay)
        return self.store.usage_records(*a, **kw)

    def usage_records_after(self, *a, **kw):
        self.reading.set()
        time.sleep(self.delay)
        return self.store.usage_records_after(*a, **kw)


@pytest.mark.slow
def test_allocations_do_not_wait_for_a_history_refresh(tmp_path):
    inner = open_store(f"sqlite:///{tmp_path / 's.db'}")
    _records(inner, 1, 3)
    slow = _SlowStore(inner, 3.0)
    srv = AllocationServer(store=slow, registry=CollectorRegistry(), refresh_seconds=0.0,
                           clock=lambda: 1.8e9).start()
    try:
        slow.reading.wait(5)                # the history is being read (in the background)
        t = time.perf_counter()
        with urllib.request.urlopen(srv.url + "/v1/allocation?spec=alpha@1.0%25gcc@12.3.0", timeout=30) as r:
            assert r.status == 200
        assert time.perf_counter() - t < 1.5
    finally:
        srv.close()
        inner.close()


def test_the_index_is_bounded_per_level():
    index = HistoryIndex(KeySettings(), max_samples=3, max_keys=10)
    for i in range(50):
        for j in range(5):
            index.add(Observation(key=JobKey.of({"package": f"p{i}", "version": "1"}), at=i * 10.0 + j,
                                  memory_peak_bytes=1e9), True)
    assert all(len(t) <= 10 for t in index._levels)                     # noqa: SLF001
    assert index.levels_for(JobKey.of({"package": "p49", "version": "1"}))[0][2].samples.maxlen == 3
    assert index.levels_for(JobKey.of({"package": "p0", "version": "1"})) == []   # the oldest went first
