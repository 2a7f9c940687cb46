"""The state store: one interface over SQLite or PostgreSQL (see docs/state.md).

Everything the live bot must not forget or repeat lives here: jobs seen and
their classification, decisions, lineages (origin job -> re-created jobs),
action intents (written and committed before any GitLab write), usage records,
poll watermarks, the jobs the bot created and follows, the storm brake and the
re-runs it holds, dry-run decisions, the bot's own pipelines, an append-only event journal (``retry-bot history``), and the
leader lease that lets several replicas share one PostgreSQL database.

All SQL is written once (``?`` parameters, :data:`.schema.SUBSTITUTIONS`), every
public method is one transaction, and every write is safe to repeat.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import threading
import time
from typing import Any, Callable, Iterable, Iterator, Mapping

from runner_wrapper.logconfig import get_logger
from runner_wrapper.record import RecordError

from .backends import Backend, Tx
from .errors import LeadershipLost, StateError
from retry_bot.model import Classification, LineageAttempt

from .records import ActionIntent, DryRunDecision, FollowedJob, HeldAction, JobRecord, Lineage
from .schema import LATEST_VERSION, MIGRATIONS
from .usage import usage_row

__all__ = ["Store", "LEASE_NAME"]

log = get_logger("retry_bot.state")

#: The one lease row all replicas of a bot compete for.
LEASE_NAME = "retry-bot"
#: Facts copied into the ``seen`` history event (the full facts stay on the job row).
_SEEN_SUMMARY = ("name", "status", "failure_reason", "exit_code", "ref", "stage", "pipeline_id",
                 "web_url", "runner")
_PAGE = 500


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    return value


def _dump(value: Any, what: str) -> str:
    try:
        return json.dumps(_plain(value), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be plain JSON data (dict, list, str, number, bool, None): {exc}") from exc


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _job_id(value: Any, what: str = "job_id") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} must be a non-negative integer, not {value!r}")
    return value


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string, not {value!r}")
    return value


def _member(row: Mapping[str, Any], job: Mapping[str, Any] | None = None,
            timeout_seconds: float | None = None) -> LineageAttempt:
    """A lineage row; with ``job`` (the ``jobs`` row's facts and classification), what decide() needs too."""
    cls = _load(job.get("classification")) if job else None
    facts = _load(job.get("facts")) if job else None
    cls = cls if isinstance(cls, Mapping) else {}
    facts = facts if isinstance(facts, Mapping) else {}
    finished = facts.get("finished_at")
    return LineageAttempt(
        job_id=int(row["job_id"]), origin_job_id=int(row["origin_job_id"]), attempt=int(row["attempt"]),
        action=row["action"], variables=_load(row["variables"]) or {}, runner_class=row["runner_class"],
        memory_limit_bytes=row["memory_limit_bytes"], memory_peak_bytes=row["memory_peak_bytes"],
        status=row["status"], created_at=row["created_at"], updated_at=row["updated_at"],
        family=cls.get("family") if isinstance(cls.get("family"), str) else None,
        category=cls.get("category") if isinstance(cls.get("category"), str) else None,
        finished_at=finished if isinstance(finished, str) else None, timeout_seconds=timeout_seconds)


def _decided_timeout(decision_text: str | None) -> float | None:
    """The job ``timeout:`` a stored decision gave the job it created (a timeout resize), else ``None``."""
    decision = _load(decision_text)
    t = decision.get("timeout_seconds") if isinstance(decision, Mapping) else None
    return float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0 else None


def _intent(row: Mapping[str, Any], created: bool) -> ActionIntent:
    return ActionIntent(
        intent_id=int(row["intent_id"]), idempotency_key=row["idempotency_key"], job_id=int(row["job_id"]),
        kind=row["kind"], payload=_load(row["payload"]) or {}, status=row["status"],
        result=_load(row["result"]), error=row["error"], retryable=bool(row["retryable"]),
        attempts=int(row["attempts"]), term=None if row["term"] is None else int(row["term"]),
        holder=row["holder"], created_at=float(row["created_at"]), updated_at=float(row["updated_at"]),
        created=created)


def _job(row: Mapping[str, Any]) -> JobRecord:
    return JobRecord(job_id=int(row["job_id"]), project_id=int(row["project_id"]),
                     origin_job_id=int(row["origin_job_id"]), facts=_load(row["facts"]),
                     classification=_load(row["classification"]), decision=_load(row["decision"]),
                     seen_at=float(row["seen_at"]),
                     decided_at=None if row["decided_at"] is None else float(row["decided_at"]))


def _followed(row: Mapping[str, Any]) -> FollowedJob:
    return FollowedJob(job_id=int(row["job_id"]), project_id=int(row["project_id"]),
                       origin_job_id=int(row["origin_job_id"]), kind=row["kind"], project_path=row["project_path"],
                       family=row["family"], category=row["category"], runner_class=row["runner_class"],
                       user=row["user_name"], since=float(row["since"]))


def _usage(row: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(row)
    for k in ("protected",):
        out[k] = None if out[k] is None else bool(out[k])
    for k in ("oom_killed", "trusted"):
        out[k] = bool(out[k])
    out["key_fields"] = _load(out["key_fields"]) or {}
    out["record"] = _load(out.pop("raw"))
    return out


class Store:
    """Durable bot state.  Create with :func:`retry_bot.state.open_store`.

    Thread-safe (one connection, serialized).  Several processes may share one
    SQLite file or one PostgreSQL database.  Every method is one transaction.

    Leader election: a store that has called :meth:`try_acquire_leadership` at
    least once is *fenced*: its writes of bot state (jobs, decisions, lineage,
    actions, watermarks) fail with :class:`LeadershipLost` unless it holds the
    current lease term.  A store that never takes part in an election (a single
    bot, the CLI, the ingest endpoint) writes unfenced.  Usage records and
    reject counters are never fenced (any replica may ingest).
    """

    def __init__(self, backend: Backend, *, clock: Callable[[], float] | None = None,
                 migrate: bool = True) -> None:
        self._b = backend
        #: Leases use an injected clock if given; else PostgreSQL's clock (one clock for
        #: every replica, whatever their hosts' skew) or, on SQLite (one host), time.time.
        self._lease_clock_injected = clock is not None
        self._clock: Callable[[], float] = clock if clock is not None else time.time
        self._mutex = threading.RLock()
        self._elections = False
        self._holder: str | None = None
        self._term: int | None = None
        self._ttl: float = 0.0
        #: When this store took the lease over before it expired (PostgreSQL advisory lock: the
        #: old leader's session is gone), the old lease's expiry: until then the old leader
        #: might, if it is alive and cut off, still be finishing a GitLab write.
        self._inherited_until: float | None = None
        #: Schema version of the database now, and before this open migrated it.
        self.schema_version, self.migrated_from = self._open(migrate)

    # ------------------------------------------------------------------ lifecycle

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self._b.dialect

    @property
    def location(self) -> str:
        """The database (file path or URL without password), for messages."""
        return self._b.location

    @property
    def needs_migration(self) -> bool:
        return self.schema_version < LATEST_VERSION

    def _too_new(self, version: int) -> None:
        if version > LATEST_VERSION:
            raise StateError(
                f"state database {self.location} has schema version {version}, newer than this retry-bot "
                f"understands (up to {LATEST_VERSION}): it was written by a newer retry-bot. Run that newer "
                "version (or later); this one will not touch it and never downgrades a schema. To roll back, "
                "restore a backup taken before the upgrade.")

    def _open(self, migrate: bool) -> tuple[int, int]:
        version = self._b.run(self._b.read_version, write=False)
        self._too_new(version)
        if version == LATEST_VERSION or not migrate:
            return version, version
        backup = self._b.backup_before_migration(version) if version > 0 else None

        def step(tx: Tx) -> int:
            self._b.migration_lock(tx)
            current = self._b.read_version(tx)
            self._too_new(current)
            for migration in MIGRATIONS[current:]:
                for statement in migration.statements:
                    tx.execute(statement)
                if migration.data is not None:
                    migration.data(tx)
                self._b.write_version(tx, migration)
            return current

        before = self._b.run(step, write=True)
        if 0 < before < LATEST_VERSION:
            log.info("state.migrated", location=self.location, from_version=before,
                     to_version=LATEST_VERSION, backup=backup)
        elif before == 0:
            log.debug("state.created", location=self.location, version=LATEST_VERSION)
        return LATEST_VERSION, before

    def _ready(self) -> None:
        if self.schema_version != LATEST_VERSION:
            raise StateError(f"state database {self.location} has schema version {self.schema_version}, "
                             f"this retry-bot needs {LATEST_VERSION}: run 'retry-bot state migrate --url URL'")

    def close(self) -> None:
        """Release leadership if held (a clean shutdown hands over at once), then disconnect."""
        if self._term is not None and self._holder is not None:
            try:
                self.release_leadership(self._holder)
            except StateError:
                pass
        self._b.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _now(self) -> float:
        return float(self._clock())

    def _lease_now(self, tx: Tx) -> float:
        if self._lease_clock_injected or self.dialect != "postgresql":
            return self._now()
        row = tx.one("SELECT EXTRACT(EPOCH FROM clock_timestamp())::float8 AS now")
        assert row is not None
        return float(row["now"])

    def _write(self, fn: Callable[[Tx], Any], *, fenced: bool) -> Any:
        self._ready()

        def body(tx: Tx) -> Any:
            if fenced:
                self._fence(tx)
            return fn(tx)

        return self._b.run(body, write=True)

    def _read(self, fn: Callable[[Tx], Any]) -> Any:
        self._ready()
        return self._b.run(fn, write=False)

    # ------------------------------------------------------------------ helpers inside a transaction

    def _fence(self, tx: Tx) -> None:
        if not self._elections:
            return
        row = tx.one("SELECT holder, term, expires_at FROM leader_lease WHERE name = ? {for_share}",
                     (LEASE_NAME,))
        if self._term is not None and row is not None and row["holder"] == self._holder \
                and int(row["term"]) == self._term:
            return
        now_holder = row["holder"] if row else None
        now_term = int(row["term"]) if row else 0
        mine = f"term {self._term}" if self._term is not None else "no term"
        raise LeadershipLost(
            f"replica {self._holder!r} is not the leader of {self.location} ({mine}; the current term is "
            f"{now_term}, held by {now_holder!r}): it must stop acting; the leader reconciles open intents")

    def _origin(self, tx: Tx, job_id: int) -> int:
        row = tx.one("SELECT origin_job_id FROM lineage WHERE job_id = ?", (job_id,))
        return int(row["origin_job_id"]) if row else job_id

    def _event(self, tx: Tx, job_id: int, kind: str, data: Mapping[str, Any], origin: int | None = None) -> None:
        if origin is None:
            origin = self._origin(tx, job_id)
        tx.execute("INSERT INTO events (at, origin_job_id, job_id, kind, data) VALUES (?, ?, ?, ?, ?)",
                   (self._now(), origin, job_id, kind, _dump(data, "event data")))

    # ------------------------------------------------------------------ jobs and decisions

    def mark_job_seen(self, job_id: int, project_id: int, facts: Mapping[str, Any],
                      classification: Mapping[str, Any]) -> bool:
        """Record a failed job and its classification; ``True`` when the caller must decide it.

        ``False`` once a decision is recorded for the job (it is decided exactly
        once).  A job seen by a run that crashed before :meth:`record_decision`
        returns ``True`` again, so it is never forgotten; the first facts and
        classification are kept.  ``facts`` and ``classification`` may also be
        :class:`retry_bot.model.JobFacts` / ``Classification`` instances.
        """
        job_id = _job_id(job_id)
        project_id = _job_id(project_id, "project_id")
        facts_d = _plain(facts)
        facts_s = _dump(facts_d, "facts")
        # a verdict in its store form (Classification.to_dict: a rule's verdict has no "probability" key)
        cls_d = _plain(classification.to_dict() if isinstance(classification, Classification) else classification)
        cls_s = _dump(cls_d, "classification")

        def fn(tx: Tx) -> bool:
            row = tx.one("SELECT decision FROM jobs WHERE job_id = ?", (job_id,))
            if row is not None:
                return row["decision"] is None
            origin = self._origin(tx, job_id)
            inserted = tx.one(
                "INSERT INTO jobs (job_id, project_id, origin_job_id, facts, classification, seen_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (job_id) DO NOTHING RETURNING job_id",
                (job_id, project_id, origin, facts_s, cls_s, self._now()))
            if inserted is None:  # a concurrent writer won the race
                row = tx.one("SELECT decision FROM jobs WHERE job_id = ?", (job_id,))
                return row is not None and row["decision"] is None
            summary = {k: facts_d[k] for k in _SEEN_SUMMARY if isinstance(facts_d, dict) and k in facts_d}
            self._event(tx, job_id, "seen", {"project_id": project_id, **summary}, origin)
            self._event(tx, job_id, "classified", cls_d if isinstance(cls_d, dict) else {"value": cls_d}, origin)
            return True

        return bool(self._write(fn, fenced=True))

    def record_decision(self, job_id: int, decision: Mapping[str, Any]) -> bool:
        """Store the decision for a seen job; ``False`` (and nothing changes) if one exists already.

        Raises :class:`StateError` when the job was never marked seen.
        """
        job_id = _job_id(job_id)
        dec_d = _plain(decision)
        dec_s = _dump(dec_d, "decision")

        def fn(tx: Tx) -> bool:
            now = self._now()
            updated = tx.one("UPDATE jobs SET decision = ?, decided_at = ? WHERE job_id = ? AND decision IS NULL "
                             "RETURNING job_id", (dec_s, now, job_id))
            if updated is None:
                if tx.one("SELECT job_id FROM jobs WHERE job_id = ?", (job_id,)) is None:
                    raise StateError(f"record_decision: job {job_id} was never marked seen; "
                                     "call mark_job_seen first")
                return False
            self._event(tx, job_id, "decided", dec_d if isinstance(dec_d, dict) else {"value": dec_d})
            return True

        return bool(self._write(fn, fenced=True))

    def get_job(self, job_id: int) -> JobRecord | None:
        """The stored job, or ``None`` if it was never seen."""
        job_id = _job_id(job_id)
        row = self._read(lambda tx: tx.one("SELECT * FROM jobs WHERE job_id = ?", (job_id,)))
        return None if row is None else _job(row)

    def jobs(self, *, since: float | None = None) -> Iterator[JobRecord]:
        """Every seen job (optionally those seen at or after epoch ``since``), by job id, read in pages."""
        last = -1
        while True:
            where = "job_id > ?" + (" AND seen_at >= ?" if since is not None else "")
            params: list[Any] = [last] + ([since] if since is not None else [])
            rows = self._read(lambda tx: tx.execute(
                f"SELECT * FROM jobs WHERE {where} ORDER BY job_id LIMIT {_PAGE}", params))
            for row in rows:
                yield _job(row)
            if len(rows) < _PAGE:
                return
            last = int(rows[-1]["job_id"])

    def family_counts(self) -> dict[str, int]:
        """How many seen jobs were classified into each failure family (``unknown`` when unclassified)."""
        counts: dict[str, int] = {}
        for job in self.jobs():
            fam = (job.classification or {}).get("family") if isinstance(job.classification, Mapping) else None
            key = str(fam or "unknown")
            counts[key] = counts.get(key, 0) + 1
        return counts

    # ------------------------------------------------------------------ lineage

    def origin_of(self, job_id: int) -> int:
        """The origin job of ``job_id``'s lineage (``job_id`` itself when it was never re-created)."""
        job_id = _job_id(job_id)
        return int(self._read(lambda tx: self._origin(tx, job_id)))

    def lineage_for(self, job_id: int) -> Lineage:
        """The lineage ``job_id`` belongs to: the origin (attempt 0) and every re-created job, in order.

        Each attempt carries what :func:`retry_bot.decide.decide` needs, read in one query
        (no per-attempt lookups): its classification and ``finished_at`` (from the job's row,
        once the bot saw it fail) and the timeout in force, which is the ``timeout_seconds``
        of the last decision before it that set one (a timeout resize), else ``None`` (the
        origin's own ``timeout:`` is in its definition, which the poller reads).
        """
        job_id = _job_id(job_id)

        def fn(tx: Tx) -> Lineage:
            origin = self._origin(tx, job_id)
            rows = tx.execute(
                "SELECT l.*, j.facts AS job_facts, j.classification AS job_classification, "
                "j.decision AS job_decision FROM lineage l LEFT JOIN jobs j ON j.job_id = l.job_id "
                "WHERE l.origin_job_id = ? ORDER BY l.attempt", (origin,))
            if not rows:
                job = tx.one("SELECT facts AS job_facts, classification AS job_classification FROM jobs "
                             "WHERE job_id = ?", (origin,))
                rows = [{"job_id": origin, "origin_job_id": origin, "attempt": 0, "action": "origin",
                         "variables": None, "runner_class": None, "memory_limit_bytes": None,
                         "memory_peak_bytes": None, "status": None, "created_at": None, "updated_at": None,
                         **({"job_facts": job["job_facts"], "job_classification": job["job_classification"]}
                            if job else {})}]
            members = []
            timeout: float | None = None
            for r in rows:
                job = {"facts": r.get("job_facts"), "classification": r.get("job_classification")}
                members.append(_member(r, job, timeout))
                timeout = _decided_timeout(r.get("job_decision")) or timeout
            return Lineage(origin_job_id=origin, attempts=tuple(members))

        return self._read(fn)

    def add_lineage_member(self, origin_job_id: int, job_id: int, action: str, variables: Mapping[str, str],
                           runner_class: str | None = None, *, memory_limit_bytes: int | None = None,
                           memory_peak_bytes: int | None = None, status: str | None = "created") -> LineageAttempt:
        """Record that ``job_id`` was created from ``origin_job_id`` by ``action`` (``retry`` or ``resize``).

        ``origin_job_id`` may be any job of the lineage (the member is attached to
        its origin).  Idempotent: adding the same job again returns the stored member.
        """
        origin_arg = _job_id(origin_job_id, "origin_job_id")
        job_id = _job_id(job_id)
        action = _text(action, "action")
        vars_s = _dump({str(k): str(v) for k, v in dict(variables).items()}, "variables")

        def fn(tx: Tx) -> LineageAttempt:
            origin = self._origin(tx, origin_arg)
            existing = tx.one("SELECT * FROM lineage WHERE job_id = ?", (job_id,))
            if existing is not None:
                if int(existing["origin_job_id"]) != origin:
                    raise StateError(f"job {job_id} already belongs to the lineage of job "
                                     f"{existing['origin_job_id']}, not to that of job {origin}")
                return _member(existing)
            if job_id == origin:
                raise StateError(f"job {job_id} cannot be re-created from itself")
            now = self._now()
            tx.execute("INSERT INTO lineage (job_id, origin_job_id, attempt, action, variables, created_at, "
                       "updated_at) VALUES (?, ?, 0, 'origin', ?, ?, ?) ON CONFLICT (job_id) DO NOTHING",
                       (origin, origin, "{}", now, now))
            top = tx.one("SELECT max(attempt) AS top FROM lineage WHERE origin_job_id = ?", (origin,))
            attempt = int(top["top"]) + 1 if top and top["top"] is not None else 1
            row = tx.one(
                "INSERT INTO lineage (job_id, origin_job_id, attempt, action, variables, runner_class, "
                "memory_limit_bytes, memory_peak_bytes, status, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *",
                (job_id, origin, attempt, action, vars_s, runner_class, memory_limit_bytes,
                 memory_peak_bytes, status, now, now))
            assert row is not None
            tx.execute("UPDATE jobs SET origin_job_id = ? WHERE job_id = ?", (origin, job_id))
            self._event(tx, job_id, "lineage_member", {
                "attempt": attempt, "action": action, "variables": _load(vars_s), "runner_class": runner_class,
                "memory_limit_bytes": memory_limit_bytes, "status": status}, origin)
            return _member(row)

        return self._write(fn, fenced=True)

    def update_lineage_member(self, job_id: int, *, status: str | None = None,
                              memory_limit_bytes: int | None = None, memory_peak_bytes: int | None = None,
                              runner_class: str | None = None) -> LineageAttempt:
        """Record what became of an attempt (its status, the peak it reached...).  ``None`` = unchanged.

        A job that is in no lineage yet becomes the origin (attempt 0) of its own.
        """
        job_id = _job_id(job_id)
        changes = {k: v for k, v in (("status", status), ("memory_limit_bytes", memory_limit_bytes),
                                     ("memory_peak_bytes", memory_peak_bytes), ("runner_class", runner_class))
                   if v is not None}

        return self._write(lambda tx: self._update_member(tx, job_id, changes), fenced=True)

    def _update_member(self, tx: Tx, job_id: int, changes: Mapping[str, Any]) -> LineageAttempt:
        now = self._now()
        tx.execute("INSERT INTO lineage (job_id, origin_job_id, attempt, action, variables, created_at, "
                   "updated_at) VALUES (?, ?, 0, 'origin', ?, ?, ?) ON CONFLICT (job_id) DO NOTHING",
                   (job_id, job_id, "{}", now, now))
        if changes:
            sets = ", ".join(f"{k} = ?" for k in changes)  # keys from the fixed tuple of the callers
            tx.execute(f"UPDATE lineage SET {sets}, updated_at = ? WHERE job_id = ?",
                       (*changes.values(), now, job_id))
            self._event(tx, job_id, "lineage_updated", dict(changes))
        row = tx.one("SELECT * FROM lineage WHERE job_id = ?", (job_id,))
        assert row is not None
        return _member(row)

    # ------------------------------------------------------------------ action intents

    def begin_action(self, idempotency_key: str, job_id: int, kind: str,
                     payload: Mapping[str, Any]) -> ActionIntent:
        """Write and commit the intent to make one GitLab write; call *before* the write.

        Returns the new intent (``created=True``: go on and make the write), or the
        existing one for this key (``created=False``): ``completed`` or ``failed``
        means the action is settled, do nothing; ``begun`` means an earlier run may
        have made the write, so read GitLab's state first, then
        :meth:`complete_action` or redo (docs/state.md).  A ``failed`` intent that
        was ``retryable`` is re-opened (``created=True``, ``attempts`` + 1).
        """
        key = _text(idempotency_key, "idempotency_key")
        job_id = _job_id(job_id)
        kind = _text(kind, "kind")
        payload_d = _plain(payload)
        payload_s = _dump(payload_d, "payload")

        def fn(tx: Tx) -> ActionIntent:
            now = self._now()
            row = tx.one(
                "INSERT INTO actions (idempotency_key, job_id, kind, payload, status, term, holder, created_at, "
                "updated_at) VALUES (?, ?, ?, ?, 'begun', ?, ?, ?, ?) "
                "ON CONFLICT (idempotency_key) DO NOTHING RETURNING *",
                (key, job_id, kind, payload_s, self._term, self._holder, now, now))
            if row is not None:
                self._event(tx, job_id, "action_begun", {"intent_id": row["intent_id"], "key": key, "kind": kind,
                                                         "attempt": 1, "payload": payload_d})
                return _intent(row, True)
            row = tx.one("SELECT * FROM actions WHERE idempotency_key = ? {for_update}", (key,))
            assert row is not None
            if int(row["job_id"]) != job_id or row["kind"] != kind:
                raise StateError(f"idempotency key {key!r} already names a {row['kind']} action on job "
                                 f"{row['job_id']}, not a {kind} action on job {job_id}: keys must be unique "
                                 "per action")
            if row["status"] == "failed" and row["retryable"]:
                row = tx.one("UPDATE actions SET status = 'begun', attempts = attempts + 1, error = NULL, "
                             "retryable = 0, result = NULL, payload = ?, term = ?, holder = ?, updated_at = ? "
                             "WHERE intent_id = ? RETURNING *",
                             (payload_s, self._term, self._holder, now, row["intent_id"]))
                assert row is not None
                self._event(tx, job_id, "action_begun", {"intent_id": row["intent_id"], "key": key, "kind": kind,
                                                         "attempt": row["attempts"], "payload": payload_d})
                return _intent(row, True)
            return _intent(row, False)

        return self._write(fn, fenced=True)

    def _settle(self, intent_id: int, status: str, result: Any, error: str | None, retryable: bool) -> ActionIntent:
        intent_id = _job_id(intent_id, "intent_id")

        def fn(tx: Tx) -> ActionIntent:
            row = tx.one("SELECT * FROM actions WHERE intent_id = ? {for_update}", (intent_id,))
            if row is None:
                raise StateError(f"no action intent {intent_id} in {self.location}: pass the intent_id that "
                                 "begin_action returned")
            if row["status"] == "completed":
                if status == "completed":
                    return _intent(row, False)
                raise StateError(f"action intent {intent_id} ({row['kind']} on job {row['job_id']}) is already "
                                 "completed: a completed GitLab write cannot be marked failed")
            if row["status"] == "failed" and status == "completed":
                raise StateError(f"action intent {intent_id} ({row['kind']} on job {row['job_id']}) already failed "
                                 f"({row['error']}); begin it again before completing it")
            now = self._now()
            row = tx.one("UPDATE actions SET status = ?, result = ?, error = ?, retryable = ?, term = ?, holder = ?, "
                         "updated_at = ? WHERE intent_id = ? RETURNING *",
                         (status, None if result is None else _dump(result, "result"), error, retryable,
                          self._term if self._term is not None else row["term"],
                          self._holder if self._holder is not None else row["holder"], now, intent_id))
            assert row is not None
            data: dict[str, Any] = {"intent_id": intent_id, "key": row["idempotency_key"], "kind": row["kind"]}
            if status == "completed":
                data["result"] = _plain(result)
            else:
                data.update(error=error, retryable=retryable)
            self._event(tx, int(row["job_id"]), f"action_{status}", data)
            return _intent(row, False)

        return self._write(fn, fenced=True)

    def complete_action(self, intent_id: int, result: Mapping[str, Any]) -> ActionIntent:
        """Mark the intent's GitLab write as done, with what GitLab answered (e.g. the new job id).

        Idempotent on a completed intent; :class:`StateError` on a failed one.
        """
        return self._settle(intent_id, "completed", dict(result), None, False)

    def fail_action(self, intent_id: int, error: str, retryable: bool) -> ActionIntent:
        """Mark the intent as known *not* done.  ``retryable``: a later :meth:`begin_action` may re-open it."""
        return self._settle(intent_id, "failed", None, _text(error, "error"), bool(retryable))

    def open_intents(self) -> list[ActionIntent]:
        """Intents begun but neither completed nor failed, oldest first (reconcile these at start-up)."""
        rows = self._read(lambda tx: tx.execute("SELECT * FROM actions WHERE status = 'begun' ORDER BY intent_id"))
        return [_intent(r, False) for r in rows]

    def get_action(self, idempotency_key: str) -> ActionIntent | None:
        """The intent stored under ``idempotency_key``, if any."""
        key = _text(idempotency_key, "idempotency_key")
        row = self._read(lambda tx: tx.one("SELECT * FROM actions WHERE idempotency_key = ?", (key,)))
        return None if row is None else _intent(row, False)

    def actions_for(self, job_id: int) -> list[ActionIntent]:
        """Every intent about ``job_id``, oldest first."""
        job_id = _job_id(job_id)
        rows = self._read(lambda tx: tx.execute("SELECT * FROM actions WHERE job_id = ? ORDER BY intent_id",
                                                (job_id,)))
        return [_intent(r, False) for r in rows]

    # ------------------------------------------------------------------ usage records

    def add_usage_record(self, record: Mapping[str, Any], source: str, *, trusted: bool | None = None) -> bool:
        """Store one usage record; ``False`` when the same job run is already stored (ingest is idempotent).

        ``source`` says where it came from (``collector``, ``spool:FILE``, ``trace``).
        ``trusted`` (may train predictions) defaults to: protected ref and exit code 0
        or OOM-killed.  Raises :class:`runner_wrapper.record.RecordError` on a
        malformed record; verifying the signature is the caller's job.
        """
        source = _text(source, "source")
        row = usage_row(record, trusted)
        cols = list(row) + ["source", "ingested_at"]

        def fn(tx: Tx) -> bool:
            vals = [*row.values(), source, self._now()]
            ins = tx.one(f"INSERT INTO usage_records ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)}) "
                         "ON CONFLICT (dedupe_key) DO NOTHING RETURNING record_id", vals)
            return ins is not None

        return bool(self._write(fn, fenced=False))

    def add_usage_records(self, records: Iterable[Mapping[str, Any]], source: str, *,
                          trusted: bool | None = None) -> int:
        """Store many records (a spool file) in few transactions; returns how many were new.

        Every record is parsed before anything is written: a malformed one raises
        :class:`runner_wrapper.record.RecordError` naming its index, and nothing is stored.
        """
        source = _text(source, "source")
        rows: list[dict[str, Any]] = []
        for n, record in enumerate(records):
            try:
                rows.append(usage_row(record, trusted))
            except RecordError as exc:
                raise RecordError(f"record {n}: {exc}") from exc
        added = 0
        for start in range(0, len(rows), _PAGE):
            chunk = rows[start:start + _PAGE]

            def fn(tx: Tx) -> int:
                now = self._now()
                count = 0
                for row in chunk:
                    cols = list(row) + ["source", "ingested_at"]
                    ins = tx.one(f"INSERT INTO usage_records ({', '.join(cols)}) VALUES "
                                 f"({', '.join('?' for _ in cols)}) ON CONFLICT (dedupe_key) DO NOTHING "
                                 "RETURNING record_id", [*row.values(), source, now])
                    count += ins is not None
                return count

            added += int(self._write(fn, fenced=False))
        return added

    def usage_records(self, since: str | None = None, trusted_only: bool = False, *,
                      job_name: str | None = None) -> Iterator[dict[str, Any]]:
        """Stored usage records in ``finished_at`` order (ISO 8601 UTC strings compare in time order).

        Each dict has the columns (``job_id``, ``project_id``, ``project_path``, ``ref``,
        ``protected``, ``job_name``, ``key_fields``, ``memory_peak_bytes``,
        ``memory_mean_bytes``, ``memory_limit_bytes``, ``memory_request_bytes``,
        ``cpu_request_cores``, ``cpu_seconds``, ``cpu_mean_cores``, ``wall_seconds``,
        ``oom_killed``, ``exit_code``, ``started_at``, ``finished_at``, ``trusted``,
        ``source``, ``ingested_at``) and ``record``, the raw record.  Read in pages,
        so memory stays bounded however long the history.
        """
        cursor: tuple[str, int] | None = None
        while True:
            where: list[str] = []
            params: list[Any] = []
            if since is not None:
                where.append("finished_at >= ?")
                params.append(since)
            if trusted_only:
                where.append("trusted = 1")
            if job_name is not None:
                where.append("job_name = ?")
                params.append(job_name)
            if cursor is not None:
                where.append("(finished_at > ? OR (finished_at = ? AND record_id > ?))")
                params += [cursor[0], cursor[0], cursor[1]]
            sql = ("SELECT * FROM usage_records" + (" WHERE " + " AND ".join(where) if where else "")
                   + f" ORDER BY finished_at, record_id LIMIT {_PAGE}")
            rows = self._read(lambda tx: tx.execute(sql, params))
            for r in rows:
                yield _usage(r)
            if len(rows) < _PAGE:
                return
            cursor = (rows[-1]["finished_at"], int(rows[-1]["record_id"]))

    def usage_records_after(self, record_id: int, limit: int = _PAGE) -> list[dict[str, Any]]:
        """Up to ``limit`` stored usage records with ``record_id`` above ``record_id``, in id order.

        The allocation server follows the table with it (each row as :meth:`usage_records`
        gives it, ``record_id`` included, but with the raw record as JSON text in ``raw``).  On PostgreSQL ids are handed out before commit, so a
        reader re-reads a small window below its cursor to catch late commits.
        """
        limit = max(1, min(int(limit), 10_000))
        rows = self._read(lambda tx: tx.execute(
            f"SELECT * FROM usage_records WHERE record_id > ? ORDER BY record_id LIMIT {limit}", (int(record_id),)))
        out = []
        for r in rows:  # as _usage(), but the raw record stays JSON text (``raw``): parsed only if needed
            d = dict(r)
            d["protected"] = None if d["protected"] is None else bool(d["protected"])
            d["oom_killed"], d["trusted"] = bool(d["oom_killed"]), bool(d["trusted"])
            d["key_fields"] = _load(d["key_fields"]) or {}
            out.append(d)
        return out

    def count_rejected(self, source: str, reason: str) -> None:
        """Count one rejected record (bad signature, malformed...) by source and reason."""
        source = _text(source, "source")
        reason = _text(reason, "reason")
        self._write(lambda tx: tx.execute(
            "INSERT INTO rejected_records (source, reason, rejected, last_at) VALUES (?, ?, 1, ?) "
            "ON CONFLICT (source, reason) DO UPDATE SET rejected = rejected_records.rejected + 1, "
            "last_at = excluded.last_at", (source, reason, self._now())), fenced=False)

    def rejected_counts(self) -> dict[tuple[str, str], int]:
        """``{(source, reason): count}`` of every rejected record so far."""
        rows = self._read(lambda tx: tx.execute("SELECT source, reason, rejected FROM rejected_records "
                                                "ORDER BY source, reason"))
        return {(r["source"], r["reason"]): int(r["rejected"]) for r in rows}

    # ------------------------------------------------------------------ followed jobs

    def follow(self, job: FollowedJob) -> bool:
        """Follow a job the bot created until it ends; ``False`` when it is followed already (idempotent)."""
        jid = _job_id(job.job_id)
        pid = _job_id(job.project_id, "project_id")
        origin = _job_id(job.origin_job_id, "origin_job_id")
        kind = _text(job.kind, "kind")
        since = float(job.since) if job.since else None

        def fn(tx: Tx) -> bool:
            row = tx.one(
                "INSERT INTO followed_jobs (job_id, project_id, project_path, origin_job_id, kind, family, category, "
                "runner_class, user_name, since) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (job_id) DO NOTHING RETURNING job_id",
                (jid, pid, job.project_path, origin, kind, job.family, job.category, job.runner_class, job.user,
                 since if since is not None else self._now()))
            return row is not None

        return bool(self._write(fn, fenced=True))

    def followed(self, *, limit: int | None = None, max_age: float | None = None,
                 after: tuple[float, int] | None = None, now: float | None = None) -> list[FollowedJob]:
        """Followed jobs, oldest first (by ``since``, then job id).

        ``max_age``: only those the bot created at most this many seconds before ``now``
        (default: the store's clock; pass the caller's clock that stamped ``since``);
        ``limit`` with ``after`` (the ``(since, job_id)`` of the last one read) pages
        through them.  Nothing is ever dropped silently: a job leaves this table only
        through :meth:`unfollow` or :meth:`expire_followed`.
        """
        where: list[str] = []
        params: list[Any] = []
        if max_age is not None:
            where.append("since >= ?")
            params.append((self._now() if now is None else float(now)) - float(max_age))
        if after is not None:
            where.append("(since > ? OR (since = ? AND job_id > ?))")
            params += [float(after[0]), float(after[0]), int(after[1])]
        sql = ("SELECT * FROM followed_jobs" + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY since, job_id" + (f" LIMIT {max(1, int(limit))}" if limit is not None else ""))
        return [_followed(r) for r in self._read(lambda tx: tx.execute(sql, params))]

    def followed_job(self, job_id: int) -> FollowedJob | None:
        """The followed job ``job_id``, or ``None`` when the bot does not follow it."""
        job_id = _job_id(job_id)
        row = self._read(lambda tx: tx.one("SELECT * FROM followed_jobs WHERE job_id = ?", (job_id,)))
        return None if row is None else _followed(row)

    def unfollow(self, job_id: int, *, status: str | None = None) -> FollowedJob | None:
        """Stop following ``job_id`` (it ended with ``status``, recorded on its lineage member).

        Returns the followed job when *this* call removed it, ``None`` when it was not
        followed (any more): whoever gets it does the follow-up (recovery counted,
        storm brake told) exactly once, whether polling or a webhook saw the end first.
        """
        job_id = _job_id(job_id)

        def fn(tx: Tx) -> FollowedJob | None:
            row = tx.one("DELETE FROM followed_jobs WHERE job_id = ? RETURNING *", (job_id,))
            if row is None:
                return None
            if status is not None:
                self._update_member(tx, job_id, {"status": status})
            return _followed(row)

        return self._write(fn, fenced=True)

    def expire_followed(self, max_age: float, *, now: float | None = None) -> list[FollowedJob]:
        """Stop following the jobs created more than ``max_age`` seconds before ``now``; returns them.

        ``now`` defaults to the store's clock (pass the caller's clock that stamped ``since``).
        The caller logs and counts them: nothing leaves the followed jobs silently.
        """
        cutoff = (self._now() if now is None else float(now)) - float(max_age)
        rows = self._write(lambda tx: tx.execute("DELETE FROM followed_jobs WHERE since < ? RETURNING *",
                                                 (cutoff,)), fenced=True)
        return sorted((_followed(r) for r in rows), key=lambda f: (f.since, f.job_id))

    def followed_count(self) -> int:
        """How many jobs the bot follows (the ``retry_bot_followed_jobs`` gauge)."""
        return int(self._read(lambda tx: tx.one("SELECT count(*) AS n FROM followed_jobs"))["n"])  # type: ignore[index]

    def followed_class_usage(self) -> dict[tuple[str, str | None, str | None], int]:
        """Followed jobs that run on a runner class, counted by ``(runner_class, user, project path)``."""
        rows = self._read(lambda tx: tx.execute(
            "SELECT runner_class, user_name, coalesce(project_path, CAST(project_id AS TEXT)) AS project, "
            "count(*) AS n FROM followed_jobs WHERE runner_class IS NOT NULL AND runner_class <> '' "
            "GROUP BY runner_class, user_name, coalesce(project_path, CAST(project_id AS TEXT))"))
        return {(r["runner_class"], r["user_name"], r["project"]): int(r["n"]) for r in rows}

    # ------------------------------------------------------------------ storm brake and held re-runs

    def storm_categories(self) -> dict[str, dict[str, Any]]:
        """The storm brake's state per category (:class:`retry_bot.storm.CategoryStorm` as a dict)."""
        rows = self._read(lambda tx: tx.execute("SELECT category, state FROM storm_state ORDER BY category"))
        return {r["category"]: _load(r["state"]) or {} for r in rows}

    def save_storm_categories(self, categories: Mapping[str, Mapping[str, Any]]) -> None:
        """Replace the storm brake's state with ``categories`` (category -> state dict); fenced."""
        rows = [(_text(c, "category"), _dump(v, "storm state")) for c, v in categories.items()]

        def fn(tx: Tx) -> None:
            now = self._now()
            for cat, state in rows:
                tx.execute("INSERT INTO storm_state (category, state, updated_at) VALUES (?, ?, ?) "
                           "ON CONFLICT (category) DO UPDATE SET state = excluded.state, "
                           "updated_at = excluded.updated_at", (cat, state, now))
            keep = [c for c, _ in rows]
            if keep:
                tx.execute(f"DELETE FROM storm_state WHERE category NOT IN ({', '.join('?' for _ in keep)})", keep)
            else:
                tx.execute("DELETE FROM storm_state")

        self._write(fn, fenced=True)

    def hold(self, idempotency_key: str, category: str, job_id: int, payload: Mapping[str, Any]) -> bool:
        """Keep a re-run the storm brake holds; ``False`` when it is held already (idempotent)."""
        key = _text(idempotency_key, "idempotency_key")
        category = str(category)
        job_id = _job_id(job_id)
        payload_s = _dump(payload, "payload")
        row = self._write(lambda tx: tx.one(
            "INSERT INTO held_actions (idempotency_key, category, job_id, payload, held_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (idempotency_key) DO NOTHING RETURNING job_id",
            (key, category, job_id, payload_s, self._now())), fenced=True)
        return row is not None

    def held(self, category: str | None = None) -> list[HeldAction]:
        """The held re-runs (of one category), oldest job first."""
        if category is None:
            rows = self._read(lambda tx: tx.execute("SELECT * FROM held_actions ORDER BY category, job_id"))
        else:
            rows = self._read(lambda tx: tx.execute("SELECT * FROM held_actions WHERE category = ? ORDER BY job_id",
                                                    (str(category),)))
        return [HeldAction(idempotency_key=r["idempotency_key"], category=r["category"], job_id=int(r["job_id"]),
                           payload=_load(r["payload"]) or {}, held_at=float(r["held_at"])) for r in rows]

    def held_counts(self) -> dict[str, int]:
        """``{category: held re-runs}``."""
        rows = self._read(lambda tx: tx.execute("SELECT category, count(*) AS n FROM held_actions "
                                                "GROUP BY category ORDER BY category"))
        return {r["category"]: int(r["n"]) for r in rows}

    def release_held(self, keys: Iterable[str]) -> int:
        """Forget held re-runs (their intents were begun); returns how many were still held."""
        keys = [_text(k, "idempotency_key") for k in keys]
        if not keys:
            return 0

        def fn(tx: Tx) -> int:
            n = 0
            for start in range(0, len(keys), _PAGE):
                chunk = keys[start:start + _PAGE]
                n += len(tx.execute(f"DELETE FROM held_actions WHERE idempotency_key IN "
                                    f"({', '.join('?' for _ in chunk)}) RETURNING job_id", chunk))
            return n

        return int(self._write(fn, fenced=True))

    # ------------------------------------------------------------------ dry-run decisions

    def record_dry_run(self, job_id: int, decision: Mapping[str, Any], *, keep: int = 5) -> None:
        """Keep a provisional (dry-run) decision for ``retry-bot history``; the ``keep`` newest per job stay.

        Unlike :meth:`record_decision` the job stays undecided, so a later live run decides it.
        """
        job_id = _job_id(job_id)
        dec_s = _dump(decision, "decision")
        keep = max(1, int(keep))

        def fn(tx: Tx) -> None:
            tx.execute("INSERT INTO dry_run_decisions (job_id, at, decision) VALUES (?, ?, ?)",
                       (job_id, self._now(), dec_s))
            tx.execute(f"DELETE FROM dry_run_decisions WHERE job_id = ? AND decision_id NOT IN (SELECT decision_id "
                       f"FROM dry_run_decisions WHERE job_id = ? ORDER BY decision_id DESC LIMIT {keep})",
                       (job_id, job_id))

        self._write(fn, fenced=True)

    def dry_run_decisions(self, job_ids: Iterable[int]) -> list[DryRunDecision]:
        """The provisional decisions of these jobs, oldest first."""
        ids = sorted({_job_id(j) for j in job_ids})
        if not ids:
            return []
        rows = self._read(lambda tx: tx.execute(
            f"SELECT * FROM dry_run_decisions WHERE job_id IN ({', '.join('?' for _ in ids)}) "
            "ORDER BY at, decision_id", ids))
        return [DryRunDecision(job_id=int(r["job_id"]), at=float(r["at"]), decision=_load(r["decision"]) or {})
                for r in rows]

    # ------------------------------------------------------------------ the bot's own pipelines

    def own_pipeline(self, pipeline_id: int, idempotency_key: str) -> str:
        """Record that the bot created ``pipeline_id`` for intent ``idempotency_key``; returns its owner's key.

        The first claim wins: a pipeline already recorded for another intent keeps it
        (and that key is returned).
        """
        pid = _job_id(pipeline_id, "pipeline_id")
        key = _text(idempotency_key, "idempotency_key")

        def fn(tx: Tx) -> str:
            tx.execute("INSERT INTO bot_pipelines (pipeline_id, idempotency_key, created_at) VALUES (?, ?, ?) "
                       "ON CONFLICT (pipeline_id) DO NOTHING", (pid, key, self._now()))
            row = tx.one("SELECT idempotency_key FROM bot_pipelines WHERE pipeline_id = ?", (pid,))
            assert row is not None
            return str(row["idempotency_key"])

        return str(self._write(fn, fenced=True))

    def pipelines_of(self, idempotency_key: str) -> list[int]:
        """The pipelines recorded for intent ``idempotency_key``, oldest first."""
        key = _text(idempotency_key, "idempotency_key")
        rows = self._read(lambda tx: tx.execute("SELECT pipeline_id FROM bot_pipelines WHERE idempotency_key = ? "
                                                "ORDER BY pipeline_id", (key,)))
        return [int(r["pipeline_id"]) for r in rows]

    def pipeline_owner(self, pipeline_id: int) -> str | None:
        """The intent key the bot created ``pipeline_id`` for, or ``None`` (not the bot's, or not recorded)."""
        pid = _job_id(pipeline_id, "pipeline_id")
        row = self._read(lambda tx: tx.one("SELECT idempotency_key FROM bot_pipelines WHERE pipeline_id = ?", (pid,)))
        return None if row is None else str(row["idempotency_key"])

    def forget_pipelines(self, max_age: float, *, now: float | None = None) -> int:
        """Drop the claims on pipelines created more than ``max_age`` seconds before ``now``; returns how many.

        A claim exists so that a crash between creating a pipeline and recording it cannot
        create a second one (:meth:`own_pipeline`), and so that a look for such a pipeline
        skips the pipelines of other intents.  That look only goes back to its intent's
        start, so a claim is needed while its intent is still ``begun``; a claim of a settled
        intent older than ``max_age`` (the poller uses ``[poll] follow_max_age_hours``)
        serves nothing, and without this the table would grow by one row per resize forever.
        The claims of intents still ``begun`` are kept, however old.
        """
        if not max_age > 0:
            raise StateError(f"forget_pipelines: max_age must be a positive number of seconds, not {max_age!r}")
        cutoff = (self._now() if now is None else float(now)) - float(max_age)
        rows = self._write(lambda tx: tx.execute(
            "DELETE FROM bot_pipelines WHERE created_at < ? AND idempotency_key NOT IN "
            "(SELECT idempotency_key FROM actions WHERE status = 'begun') RETURNING pipeline_id", (cutoff,)),
            fenced=True)
        return len(rows)

    # ------------------------------------------------------------------ rejected records, once each

    def count_rejected_once(self, source: str, reason: str, fingerprint: str) -> bool:
        """Count a rejected record unless the same record (``fingerprint``) was counted for ``source``.

        One transaction (never fenced: any replica may ingest): two ingests of the same
        bad record at the same moment count it once.  ``True`` when counted now.
        """
        source = _text(source, "source")
        reason = _text(reason, "reason")
        fingerprint = _text(fingerprint, "fingerprint")

        def fn(tx: Tx) -> bool:
            now = self._now()
            new = tx.one("INSERT INTO rejected_fingerprints (source, fingerprint, reason, first_at) "
                         "VALUES (?, ?, ?, ?) ON CONFLICT (source, fingerprint) DO NOTHING RETURNING source",
                         (source, fingerprint, reason, now))
            if new is None:
                return False
            tx.execute("INSERT INTO rejected_records (source, reason, rejected, last_at) VALUES (?, ?, 1, ?) "
                       "ON CONFLICT (source, reason) DO UPDATE SET rejected = rejected_records.rejected + 1, "
                       "last_at = excluded.last_at", (source, reason, now))
            return True

        return bool(self._write(fn, fenced=False))

    # ------------------------------------------------------------------ poll watermarks

    def get_watermark(self, scope: str) -> dict[str, Any] | None:
        """The poller's last position for ``scope`` (e.g. ``project:42``), or ``None``."""
        scope = _text(scope, "scope")
        row = self._read(lambda tx: tx.one("SELECT value FROM watermarks WHERE scope = ?", (scope,)))
        return None if row is None else _load(row["value"])

    def set_watermark(self, scope: str, value: Mapping[str, Any]) -> None:
        """Move the poller's position for ``scope`` (fenced: only the leader polls)."""
        scope = _text(scope, "scope")
        value_s = _dump(value, "watermark")
        self._write(lambda tx: tx.execute(
            "INSERT INTO watermarks (scope, value, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT (scope) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            (scope, value_s, self._now())), fenced=True)

    # ------------------------------------------------------------------ history

    def history(self, job_id: int) -> list[dict[str, Any]]:
        """Every event about ``job_id``'s lineage, in the order it happened.

        Each event: ``event_id``, ``at`` (epoch seconds), ``job_id``, ``origin_job_id``,
        ``kind`` (``seen``, ``classified``, ``decided``, ``lineage_member``,
        ``lineage_updated``, ``action_begun``, ``action_completed``, ``action_failed``)
        and ``data``.
        """
        job_id = _job_id(job_id)

        def fn(tx: Tx) -> list[dict[str, Any]]:
            origin = self._origin(tx, job_id)
            return tx.execute("SELECT * FROM events WHERE origin_job_id = ? OR job_id IN "
                              "(SELECT job_id FROM lineage WHERE origin_job_id = ?) ORDER BY event_id",
                              (origin, origin))

        return [{"event_id": int(r["event_id"]), "at": float(r["at"]), "job_id": int(r["job_id"]),
                 "origin_job_id": int(r["origin_job_id"]), "kind": r["kind"], "data": _load(r["data"])}
                for r in self._read(fn)]

    # ------------------------------------------------------------------ leadership

    @property
    def leadership_term(self) -> int | None:
        """This store's lease term while it believes it leads, else ``None``."""
        return self._term

    def try_acquire_leadership(self, holder: str, ttl_seconds: float) -> bool:
        """Become (or stay) the leader for ``ttl_seconds``; ``True`` if this store now leads.

        Takes the lease when it is free, expired, or (PostgreSQL) when its previous
        holder's database session is gone (advisory lock).  Each new leader gets a
        higher term; the writes of any older term are refused (fencing).  Use a
        holder name unique per process (e.g. ``host:pid``).  Call it (or
        :meth:`renew_leadership`) well within ``ttl_seconds``.
        """
        holder = _text(holder, "holder")
        if not isinstance(ttl_seconds, (int, float)) or isinstance(ttl_seconds, bool) or ttl_seconds <= 0:
            raise ValueError(f"ttl_seconds must be a positive number, not {ttl_seconds!r}")
        self._ready()
        with self._mutex:
            self._elections = True
            lock = self._b.leader_lock_try()

            def fn(tx: Tx) -> tuple[int | None, tuple[str | None, int, float] | None]:
                now = self._lease_now(tx)
                tx.execute("INSERT INTO leader_lease (name, holder, term, expires_at) VALUES (?, NULL, 0, 0) "
                           "ON CONFLICT (name) DO NOTHING", (LEASE_NAME,))
                row = tx.one("SELECT holder, term, expires_at FROM leader_lease WHERE name = ? {for_update}",
                             (LEASE_NAME,))
                assert row is not None
                term = int(row["term"])
                if self._term is not None and row["holder"] == holder and term == self._term:
                    tx.execute("UPDATE leader_lease SET expires_at = ? WHERE name = ?", (now + ttl_seconds, LEASE_NAME))
                    return term, None
                unexpired = row["holder"] is not None and float(row["expires_at"]) > now
                if unexpired and lock is not True:
                    return None, None
                tx.execute("UPDATE leader_lease SET holder = ?, term = ?, expires_at = ?, acquired_at = ? "
                           "WHERE name = ?", (holder, term + 1, now + ttl_seconds, now, LEASE_NAME))
                return term + 1, (row["holder"], term, float(row["expires_at"]) if unexpired else 0.0)

            term, previous = self._b.run(fn, write=True)
            if term is None:
                if self._term is not None:
                    log.warning("state.leadership_lost", holder=self._holder, term=self._term)
                self._term = None
                if lock:
                    self._b.leader_lock_release()
                return False
            self._holder, self._term, self._ttl = holder, term, float(ttl_seconds)
            if previous is not None:
                self._inherited_until = previous[2] or None
                log.info("state.leadership_acquired", holder=holder, term=term, previous_holder=previous[0],
                         location=self.location, early_takeover=bool(previous[2]))
            return True

    def ensure_leader(self) -> None:
        """Call right before a GitLab write: renews the lease, or raises :class:`LeadershipLost`.

        The write then starts with a full ttl ahead of it, during which no other
        replica can take over by expiry.  A store outside elections always passes.
        """
        if not self._elections:
            return
        holder = self._holder
        if holder is None or not self.renew_leadership(holder):
            raise LeadershipLost(f"replica {holder!r} is no longer the leader of {self.location}: "
                                 "it must not make this GitLab write; the leader reconciles open intents")

    def reconcile_delay(self, intent: ActionIntent) -> float:
        """Seconds to wait before observing GitLab for ``intent`` (0 almost always).

        Non-zero only for an open intent of an older term just after an *early*
        takeover (PostgreSQL: the old leader's database session vanished before its
        lease ran out).  If that leader is alive but cut off, its GitLab write may
        still land until its lease would have expired; observing before then could
        miss it and duplicate the action.
        """
        until = self._inherited_until
        if until is None or self._term is None or intent.term is None or intent.term >= self._term:
            return 0.0
        now = self._b.run(self._lease_now, write=False)
        return max(0.0, until - now)

    def renew_leadership(self, holder: str) -> bool:
        """Extend this store's lease by its ttl; ``False`` (and the store stops leading) if it was taken over."""
        holder = _text(holder, "holder")
        with self._mutex:
            if self._term is None or self._holder != holder:
                return False
            term = self._term
            self._b.leader_lock_try()  # keep (or regain after a reconnect) the failover lock

            def fn(tx: Tx) -> bool:
                row = tx.one("SELECT holder, term FROM leader_lease WHERE name = ? {for_update}", (LEASE_NAME,))
                if row is None or row["holder"] != holder or int(row["term"]) != term:
                    return False
                tx.execute("UPDATE leader_lease SET expires_at = ? WHERE name = ?",
                           (self._lease_now(tx) + self._ttl, LEASE_NAME))
                return True

            ok = bool(self._b.run(fn, write=True))
            if not ok:
                log.warning("state.leadership_lost", holder=holder, term=term, location=self.location)
                self._term = None
                self._b.leader_lock_release()
            return ok

    def release_leadership(self, holder: str) -> None:
        """Give the lease up at once (clean shutdown), so another replica takes over without waiting."""
        holder = _text(holder, "holder")
        with self._mutex:
            term = self._term
            if term is not None and self._holder == holder:
                self._b.run(lambda tx: tx.execute(
                    "UPDATE leader_lease SET holder = NULL, expires_at = 0 WHERE name = ? AND holder = ? "
                    "AND term = ?", (LEASE_NAME, holder, term)), write=True)
                log.info("state.leadership_released", holder=holder, term=term)
            self._term = None
            self._b.leader_lock_release()

    def leader(self) -> str | None:
        """The holder of an unexpired lease, or ``None``."""
        def fn(tx: Tx) -> str | None:
            row = tx.one("SELECT holder, expires_at FROM leader_lease WHERE name = ?", (LEASE_NAME,))
            if row is None or row["holder"] is None or float(row["expires_at"]) <= self._lease_now(tx):
                return None
            return str(row["holder"])

        return self._read(fn)

    def lease(self) -> dict[str, Any] | None:
        """The lease row: ``holder``, ``term``, ``expires_at``, ``acquired_at`` (``None`` before any election)."""
        row = self._read(lambda tx: tx.one("SELECT holder, term, expires_at, acquired_at FROM leader_lease "
                                           "WHERE name = ?", (LEASE_NAME,)))
        return None if row is None else dict(row)

    # ------------------------------------------------------------------ diagnostics

    def stats(self) -> dict[str, int]:
        """Row counts, for ``retry-bot state check`` and metrics."""
        def fn(tx: Tx) -> dict[str, int]:
            out = {}
            for table in ("jobs", "lineage", "actions", "events", "usage_records", "watermarks", "followed_jobs",
                          "held_actions", "dry_run_decisions", "bot_pipelines"):
                out[table] = int(tx.one(f"SELECT count(*) AS n FROM {table}")["n"])  # type: ignore[index]
            out["open_intents"] = int(tx.one("SELECT count(*) AS n FROM actions WHERE status = 'begun'")["n"])  # type: ignore[index]
            out["rejected_records"] = int(tx.one("SELECT coalesce(sum(rejected), 0) AS n FROM rejected_records")["n"])  # type: ignore[index]
            return out

        return self._read(fn)

    def integrity_problems(self) -> list[str]:
        """Problems a full integrity check finds (SQLite ``PRAGMA integrity_check``); empty when healthy."""
        return self._b.integrity_problems()
