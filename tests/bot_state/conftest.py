"""Fixtures: every store test runs against SQLite and against a real PostgreSQL server."""

from __future__ import annotations

import os
from typing import Callable, Iterator

import pytest

from retry_bot.state import Store, open_store

from .pgserver import PgServer  # the pg_server fixture itself is in tests/conftest.py


class FakeClock:
    """A settable clock for leases: ``clock()`` returns ``now``; ``advance(s)`` moves it."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def store_url(backend: str, tmp_path, request: pytest.FixtureRequest) -> str:
    """A URL of an empty database of the parametrized backend (a new file, or a new PG schema)."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path}/state.sqlite3"
    server: PgServer = request.getfixturevalue("pg_server")
    return server.url(schema=server.new_schema())


@pytest.fixture
def open_at(store_url: str, clock: FakeClock) -> Iterator[Callable[..., Store]]:
    """Open stores on the test's database (several: replicas); all are closed at the end."""
    opened: list[Store] = []

    def _open(**kw) -> Store:
        kw.setdefault("clock", clock)
        s = open_store(store_url, **kw)
        opened.append(s)
        return s

    yield _open
    for s in opened:
        try:
            s.close()
        except Exception:
            pass


@pytest.fixture
def store(open_at: Callable[..., Store]) -> Store:
    return open_at()


@pytest.fixture
def child_env() -> dict[str, str]:
    """Environment for child Python processes that import the project."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    return env
