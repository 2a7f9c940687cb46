"""The two database edges of the state store: SQLite (embedded default) and PostgreSQL.

A backend knows how to connect, run one transaction (a function of a
:class:`Tx`), translate driver errors into :mod:`retry_bot.state.errors`,
read and write the schema version, and (PostgreSQL only) hold an advisory lock
that speeds up leader failover.  All SQL lives in :mod:`.schema` and
:mod:`.store`, written once for both dialects.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import urllib.parse
from typing import Any, Callable, Protocol, Sequence, TypeVar

from runner_wrapper.logconfig import get_logger, redact_url, register_secret

from .errors import StateError, StateUnavailable
from .schema import Migration, render

__all__ = ["Tx", "Backend", "SQLiteBackend", "PostgresBackend", "open_backend", "redact_url"]

T = TypeVar("T")
log = get_logger("retry_bot.state")

#: ``PRAGMA application_id`` of a state file ("RBST"), so a foreign SQLite file is refused.
SQLITE_APPLICATION_ID = 0x52425354
#: First key of the PostgreSQL advisory locks (second key: hash of the current schema).
_PG_LEADER_LOCK = 0x52425301
_PG_MIGRATION_LOCK = 0x52425302


class Tx(Protocol):
    """One open transaction.  SQL uses ``?`` parameters and :data:`.schema.SUBSTITUTIONS`."""

    dialect: str

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Run one statement; returns its rows (empty for statements without rows)."""

    def one(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        """Run one statement; returns its first row or ``None``."""


class Backend(Protocol):
    dialect: str
    #: Where the data lives, safe to print (no password).
    location: str

    def run(self, fn: Callable[[Tx], T], *, write: bool) -> T: ...
    def read_version(self, tx: Tx) -> int: ...
    def write_version(self, tx: Tx, migration: Migration) -> None: ...
    def migration_lock(self, tx: Tx) -> None: ...
    def leader_lock_try(self) -> bool | None: ...
    def leader_lock_release(self) -> None: ...
    def integrity_problems(self) -> list[str]: ...
    def backup_before_migration(self, version: int) -> str | None: ...
    def close(self) -> None: ...


def _params(params: Sequence[Any]) -> tuple[Any, ...]:
    # Booleans are stored as INTEGER 0/1 on both backends.
    return tuple(int(p) if isinstance(p, bool) else p for p in params)


def open_backend(url: str, *, busy_timeout: float = 10.0, connect_timeout: float = 5.0) -> Backend:
    """Open the backend named by a state URL (see :func:`retry_bot.state.open_store`)."""
    if not isinstance(url, str) or not url.strip():
        raise StateError("empty state URL: use sqlite:///ABSOLUTE/PATH.sqlite3, sqlite:///:memory: "
                         "or postgresql://USER@HOST:PORT/DB")
    url = url.strip()
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresBackend(url, connect_timeout=connect_timeout)
    if url.startswith("sqlite:"):
        rest = url[len("sqlite:"):]
        if rest.startswith("//"):
            rest = rest[2:]
        rest = urllib.parse.unquote(rest.split("?", 1)[0])
        if rest in ("/:memory:", ":memory:"):
            return SQLiteBackend(":memory:", busy_timeout=busy_timeout)
        if not rest or rest == "/":
            raise StateError(f"state URL {url!r} names no file: use sqlite:///ABSOLUTE/PATH.sqlite3")
        if rest.startswith("/"):
            rest = "/" + rest.lstrip("/")
        return SQLiteBackend(os.path.abspath(rest), busy_timeout=busy_timeout)
    if "://" not in url:
        return SQLiteBackend(os.path.abspath(url), busy_timeout=busy_timeout)
    raise StateError(f"unsupported state URL {redact_url(url)!r}: use sqlite:///ABSOLUTE/PATH.sqlite3, "
                     "sqlite:///:memory: or postgresql://USER@HOST:PORT/DB")


# --------------------------------------------------------------------------- SQLite


class _SQLiteTx:
    dialect = "sqlite"

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        cur = self._conn.execute(render(sql, "sqlite"), _params(params))
        return [dict(r) for r in cur.fetchall()]

    def one(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        rows = self.execute(sql, params)
        return rows[0] if rows else None


class SQLiteBackend:
    """One SQLite file in WAL mode, shared safely by threads (a lock) and processes (busy_timeout).

    Write transactions are ``BEGIN IMMEDIATE`` (one writer at a time, waiting up to
    ``busy_timeout`` seconds for another process); ``synchronous=FULL`` so an intent
    is on disk before the GitLab write it announces.
    """

    dialect = "sqlite"
    #: Files up to this size get a ``PRAGMA quick_check`` on open (larger: ``state check``).
    QUICK_CHECK_MAX_BYTES = 64 * 1024 * 1024

    def __init__(self, path: str, *, busy_timeout: float = 10.0) -> None:
        self.path = path
        self.location = path if path != ":memory:" else "sqlite in-memory database"
        self.busy_timeout = busy_timeout
        self._mutex = threading.RLock()
        if path != ":memory:":
            parent = os.path.dirname(path) or "."
            if not os.path.isdir(parent):
                raise StateError(f"cannot open state database {path}: directory {parent} does not exist; "
                                 "create the bot's state directory or fix the state URL")
        try:
            self._conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None,
                                         check_same_thread=False)
        except sqlite3.Error as exc:
            raise StateError(f"cannot open state database {path}: {exc}; check the path and its permissions") from exc
        self._conn.row_factory = sqlite3.Row
        try:
            self._probe()
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            # Refuse another application's database before changing anything in it (WAL mode).
            self.run(self.read_version, write=False)
            if path != ":memory:":
                mode = self._wal()
                if str(mode).lower() != "wal":
                    log.warning("state.sqlite_no_wal", path=path, journal_mode=mode)
            self._conn.execute("PRAGMA synchronous = FULL")
        except sqlite3.Error as exc:
            self._conn.close()
            raise self._translate(exc) from exc
        except StateError:
            self._conn.close()
            raise

    def _wal(self) -> str:
        """Put the database in WAL mode (a no-op when it is already), waiting out other openers.

        Changing the journal mode takes an exclusive lock without calling SQLite's busy handler,
        so replicas opening one file at the same moment got "database is locked" at once; a file
        already in WAL mode is left alone, and a busy one is tried again until ``busy_timeout``.
        """
        deadline = time.monotonic() + self.busy_timeout
        while True:
            try:
                mode = str(self._conn.execute("PRAGMA journal_mode").fetchone()[0])
                if mode.lower() == "wal":
                    return mode
                return str(self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            except sqlite3.OperationalError as exc:
                low = str(exc).lower()
                if ("locked" not in low and "busy" not in low) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)

    def _probe(self) -> None:
        """Fail early, with a clear message, on a file that is not a healthy SQLite database."""
        self._conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        if self.path != ":memory:" and os.path.getsize(self.path) <= self.QUICK_CHECK_MAX_BYTES:
            rows = [r[0] for r in self._conn.execute("PRAGMA quick_check(20)").fetchall()]
            if rows != ["ok"]:
                raise self._corrupt("; ".join(str(r) for r in rows[:5]))

    def _corrupt(self, detail: str) -> StateError:
        return StateError(
            f"state database {self.location} is corrupt or is not a SQLite file ({detail}). "
            "It was left untouched. Stop the bot, move the file aside, then restore the latest backup "
            "('retry-bot state backup' makes one) or let the bot start with a fresh file; "
            "'retry-bot state check --url sqlite:///PATH' shows what is wrong.")

    def _translate(self, exc: sqlite3.Error) -> StateError:
        msg = str(exc)
        low = msg.lower()
        if isinstance(exc, sqlite3.OperationalError) and ("locked" in low or "busy" in low):
            return StateUnavailable(
                f"state database {self.location} stayed locked by another process for more than "
                f"{self.busy_timeout:g} s ({msg}); retry later, and check for a stuck process holding it")
        if "malformed" in low or "not a database" in low or "corrupt" in low:
            return self._corrupt(msg)
        if "readonly" in low or "unable to open" in low or "disk i/o" in low or "full" in low:
            return StateError(f"state database {self.location}: {msg}; check the file's permissions, "
                              "its directory and the free disk space", retryable=True)
        return StateError(f"state database {self.location}: {msg}")

    def run(self, fn: Callable[[Tx], T], *, write: bool) -> T:
        with self._mutex:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN DEFERRED")
                try:
                    result = fn(_SQLiteTx(conn))
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        try:
                            conn.execute("ROLLBACK")
                        except sqlite3.Error:
                            pass
                    raise
                return result
            except sqlite3.Error as exc:
                raise self._translate(exc) from exc

    def read_version(self, tx: Tx) -> int:
        version = int(tx.one("PRAGMA user_version")["user_version"])  # type: ignore[index]
        app_id = int(tx.one("PRAGMA application_id")["application_id"])  # type: ignore[index]
        if app_id not in (0, SQLITE_APPLICATION_ID):
            raise StateError(f"{self.location} is a SQLite database of another application "
                             f"(application_id {app_id:#x}), not a retry-bot state file; fix the state URL")
        if version == 0:
            tables = [r["name"] for r in tx.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
            if tables:
                raise StateError(f"{self.location} holds tables ({', '.join(sorted(tables)[:5])}) but no "
                                 "retry-bot schema version: it is not a retry-bot state file; fix the state URL")
        return version

    def write_version(self, tx: Tx, migration: Migration) -> None:
        # PRAGMA takes no parameters; both values are integers from our own code.
        tx.execute(f"PRAGMA user_version = {int(migration.version)}")
        tx.execute(f"PRAGMA application_id = {SQLITE_APPLICATION_ID}")

    def migration_lock(self, tx: Tx) -> None:
        """Nothing to do: BEGIN IMMEDIATE already excludes other writers."""

    def leader_lock_try(self) -> bool | None:
        return None

    def leader_lock_release(self) -> None:
        return None

    def integrity_problems(self) -> list[str]:
        with self._mutex:
            try:
                rows = [str(r[0]) for r in self._conn.execute("PRAGMA integrity_check(100)").fetchall()]
            except sqlite3.Error as exc:
                return [str(exc)]
        return [] if rows == ["ok"] else rows

    def backup_to(self, dest: str) -> None:
        """A consistent online copy of the database to ``dest`` (SQLite backup API)."""
        with self._mutex:
            try:
                target = sqlite3.connect(dest)
                try:
                    self._conn.backup(target)
                finally:
                    target.close()
            except sqlite3.Error as exc:
                raise StateError(f"backup of {self.location} to {dest} failed: {exc}") from exc

    def backup_before_migration(self, version: int) -> str | None:
        if self.path == ":memory:":
            return None
        dest = f"{self.path}.v{version}.bak"
        self.backup_to(dest)
        return dest

    def close(self) -> None:
        with self._mutex:
            self._conn.close()


# --------------------------------------------------------------------------- PostgreSQL


class _PgTx:
    dialect = "postgresql"

    def __init__(self, cur: Any) -> None:
        self._cur = cur

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        self._cur.execute(render(sql, "postgresql"), _params(params))
        return list(self._cur.fetchall()) if self._cur.description else []

    def one(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        rows = self.execute(sql, params)
        return rows[0] if rows else None


class PostgresBackend:
    """A PostgreSQL database through psycopg 3, one connection per store (plus one for the leader lock).

    Transactions run at READ COMMITTED; the intent protocol relies on unique
    constraints with ``INSERT ... ON CONFLICT`` and on row locks of the lease row,
    not on serializable isolation.  A transaction that fails because the
    connection was lost before it committed is re-run once on a new connection;
    otherwise :class:`StateUnavailable` is raised and the next call reconnects.
    """

    dialect = "postgresql"

    def __init__(self, url: str, *, connect_timeout: float = 5.0) -> None:
        try:
            import psycopg
            from psycopg.rows import dict_row
        except ImportError as exc:  # pragma: no cover - psycopg is optional third-party (the postgres extra): guarded on purpose
            raise StateError("a postgresql:// state URL needs psycopg 3: install "
                             "'gitlab-rightsizer[postgres]'") from exc
        self._psycopg = psycopg
        self._dict_row = dict_row
        self._url = url
        self.location = redact_url(url)
        try:
            register_secret(urllib.parse.urlsplit(url).password)
        except ValueError:
            pass
        self.connect_timeout = connect_timeout
        self._mutex = threading.RLock()
        self._conn: Any = None
        self._lock_conn: Any = None
        self._lock_held = False
        self._connection()

    def _connect(self) -> Any:
        try:
            conn = self._psycopg.connect(
                self._url, autocommit=True, row_factory=self._dict_row,
                connect_timeout=max(1, int(self.connect_timeout)), application_name="retry-bot",
                keepalives=1, keepalives_idle=10, keepalives_interval=5, keepalives_count=3)
            conn.execute("SET lock_timeout = '10s'")
            conn.execute("SET statement_timeout = '60s'")
            return conn
        except self._psycopg.OperationalError as exc:
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StateUnavailable(f"cannot connect to the PostgreSQL state database {self.location}: "
                                   f"{detail}; retry later (the store reconnects by itself)") from exc
        except self._psycopg.Error as exc:
            raise StateError(f"PostgreSQL state database {self.location}: {exc}") from exc

    def _connection(self) -> Any:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._drop()
            self._conn = self._connect()
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
        self._conn = None

    def run(self, fn: Callable[[Tx], T], *, write: bool) -> T:
        psycopg = self._psycopg
        with self._mutex:
            for attempt in range(3):
                conn = self._connection()
                body_done = False
                try:
                    with conn.transaction():
                        with conn.cursor() as cur:
                            result = fn(_PgTx(cur))
                        body_done = True
                    return result
                except StateError:
                    raise
                except psycopg.errors.TransactionRollback:
                    if attempt < 2 and not body_done:
                        continue
                    raise StateUnavailable(f"PostgreSQL state database {self.location}: transaction kept "
                                           "conflicting with another one; retry")
                except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                    broken = conn.closed or conn.broken
                    if broken:
                        self._drop()
                    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                    if body_done:
                        raise StateUnavailable(
                            f"lost the PostgreSQL state database {self.location} while committing ({detail}): "
                            "the write may or may not have happened; repeat the operation (every store "
                            "operation is safe to repeat)", outcome_unknown=True) from exc
                    if broken and attempt == 0:
                        log.warning("state.reconnect", location=self.location, error=detail)
                        continue
                    raise StateUnavailable(f"PostgreSQL state database {self.location} is unavailable "
                                           f"({detail}); retry later (the store reconnects by itself)") from exc
                except psycopg.Error as exc:
                    raise StateError(f"PostgreSQL state database {self.location}: {exc}") from exc
            raise AssertionError("unreachable")  # pragma: no cover

    def read_version(self, tx: Tx) -> int:
        # Plain queries on pg_class (not to_regclass, whose catalog cache may predate the
        # migration lock): each statement sees what concurrent migrators committed.
        row = tx.one("SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                     "WHERE n.nspname = current_schema() AND c.relname = 'schema_version') AS has_version, "
                     "EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                     "WHERE n.nspname = current_schema() AND c.relname = 'jobs') AS has_jobs")
        assert row is not None
        if not row["has_version"]:
            if row["has_jobs"]:
                raise StateError(f"{self.location} has a 'jobs' table but no schema_version table: it is "
                                 "not a retry-bot state database (or its schema_version table was dropped); "
                                 "fix the state URL or restore a backup")
            return 0
        v = tx.one("SELECT max(version) AS v FROM schema_version")
        return int(v["v"]) if v and v["v"] is not None else 0

    def write_version(self, tx: Tx, migration: Migration) -> None:
        tx.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, "
                   "description TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
        tx.execute("INSERT INTO schema_version (version, description) VALUES (?, ?)",
                   (migration.version, migration.description))

    def migration_lock(self, tx: Tx) -> None:
        tx.execute("SELECT pg_advisory_xact_lock(?, hashtext(current_schema()))", (_PG_MIGRATION_LOCK,))

    def leader_lock_try(self) -> bool | None:
        """Try the session advisory lock on a dedicated connection; ``False`` when held elsewhere.

        The lock dies with its holder's connection (process killed, host gone),
        so a standby can take over at once instead of waiting for the lease to
        expire.  It only speeds up failover: safety comes from the lease term.
        """
        psycopg = self._psycopg
        with self._mutex:
            try:
                if self._lock_held:
                    try:
                        self._lock_conn.execute("SELECT 1")
                        return True
                    except psycopg.Error:  # session gone (server restarted): the lock went with it
                        self._close_lock_conn()
                if self._lock_conn is None or self._lock_conn.closed or self._lock_conn.broken:
                    self._lock_held = False
                    self._lock_conn = self._connect()
                row = self._lock_conn.execute(
                    "SELECT pg_try_advisory_lock(%s, hashtext(current_schema())) AS ok",
                    (_PG_LEADER_LOCK,)).fetchone()
                self._lock_held = bool(row["ok"])
                return self._lock_held
            except (StateError, psycopg.Error):
                self._close_lock_conn()
                return False

    def leader_lock_release(self) -> None:
        with self._mutex:
            self._close_lock_conn()

    def _close_lock_conn(self) -> None:
        held, self._lock_held = self._lock_held, False
        if self._lock_conn is not None:
            try:
                if held and not self._lock_conn.closed and not self._lock_conn.broken:
                    # Unlock before closing: closing ends the session, but the server releases
                    # the lock only when its backend process has finished, a moment after
                    # close() returns.  A standby trying the lock in that moment would take
                    # the lease without it, and this replica could then pre-empt that live
                    # leader with a lock it got back at once.
                    self._lock_conn.execute("SELECT pg_advisory_unlock(%s, hashtext(current_schema()))",
                                            (_PG_LEADER_LOCK,))
            except Exception:
                pass
            try:
                self._lock_conn.close()  # ends the session: releases the advisory lock
            except Exception:
                pass
        self._lock_conn = None

    def integrity_problems(self) -> list[str]:
        return []

    def backup_before_migration(self, version: int) -> str | None:
        return None  # PostgreSQL DDL is transactional; back up with pg_dump (docs/state.md)

    def close(self) -> None:
        with self._mutex:
            self._close_lock_conn()
            self._drop()
