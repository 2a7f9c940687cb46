"""Fixtures shared by every test directory."""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.bot_state.pgserver import PgServer, find_bindir


#: Fixtures that start servers: a test using one is end to end.
_SERVER_FIXTURES = ("pg_server", "farm")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that starts a server is ``slow``, outside the fast lane (``pytest -m "not slow"``): one using
    the PostgreSQL server (``pg_server``, or the ``postgres`` marker of the store tests' PostgreSQL
    parameter) or the stand-in with a runner loop (``farm``, tests/bot_live/conftest.py), also in test
    files that do not say ``slow`` themselves."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if any(f in names for f in _SERVER_FIXTURES) or item.get_closest_marker("postgres") is not None:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One throwaway PostgreSQL server on 127.0.0.1 for the whole run (Debian's binaries).

    Skips with the reason when the binaries are missing; tests isolate themselves with
    ``server.new_schema()`` / ``server.url(schema=...)``.
    """
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin "
                    "(install Debian's 'postgresql' package; .ci/run does)")
    try:
        server = PgServer(bindir)
    except RuntimeError as exc:
        pytest.skip(str(exc))
    try:
        server.init()
        server.start()
    except Exception:
        server.destroy()
        raise
    yield server
    server.destroy()


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """The URL of a new, empty schema on the session's PostgreSQL server: one per test.

    Several stores opened on the same URL share the database, as replicas do.
    """
    return pg_server.url(schema=pg_server.new_schema())
