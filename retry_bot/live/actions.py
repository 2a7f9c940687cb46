"""Carry decisions out on GitLab, exactly once, surviving timeouts and crashes.

Every GitLab write is wrapped in an **intent** in the state store, committed
before the write and settled after it (:mod:`retry_bot.state`).  An intent
that is still open when we look at it again (a crash, a timeout, a dropped
answer, a 5xx after GitLab changed state) is never blindly repeated: GitLab's
state is read first, and the write is made again only when GitLab shows it did
not happen *and* enough time has passed for an in-flight request to have
landed (``settle_seconds``).

Actions:

``retry``
    ``POST /jobs/:id/retry``.  Observed through GraphQL ``retried`` and the
    pipeline's jobs (the newest job of the same name).
``job_retry``
    GraphQL ``jobRetry(variables:)`` on a bot-created manual job that already
    ran (a later attempt of a resize lineage; the new job starts at once).
``resize``
    Re-create a non-manual job with new variables, in two writes, each its
    own intent under the overall one:

    1. ``<key>:pipeline`` — ``POST /projects/:id/pipeline`` on the job's ref
       with ``RETRY_BOT_CHILD_CONFIG`` (a ``when: manual`` copy of the job) and
       ``RETRY_BOT_ORIGIN_JOB_ID`` / ``RETRY_BOT_FAILED_JOB_ID``.  The new
       pipeline's id is kept in the state store (the sub-intent's result and the
       ``bot_pipelines`` table, :meth:`Store.own_pipeline`).  After a crash between the write and its
       record, the pipeline is found among the bot user's own ``api`` pipelines on
       the ref that no other intent claims -- without reading pipeline variables,
       which needs Maintainer (G ``pipeline_policy.rb``, ``read_pipeline_variable``).
    2. the CI template turns the variable into a child pipeline; the bot waits
       (across poll cycles) for the manual copy to reach ``manual`` (child jobs
       start ``created`` and are processed asynchronously; playing earlier gets
       400 "Unplayable Job"), then ``<key>:play`` — ``POST /jobs/:id/play`` with
       ``job_variables_attributes``.  Observed through the job's status: a played
       job has left ``created``/``manual`` (it is ``pending`` or later).

The overall intent completes when the job runs with the new variables; the
new job joins the lineage in the state store.

A refused write is not a failed action.  When GitLab answers a write only with
429s (or the connection never opened) until the client's retries run out, the
client raises :class:`~retry_bot.gitlab.client.WriteNotSent`: GitLab did
nothing.  The intent stays open and is driven again after a backoff
(``refused_backoff_seconds``, doubling up to ``refused_backoff_max_seconds``,
never sooner than GitLab's ``Retry-After``) through the same path as any open
intent: GitLab's state is read before the write is repeated.  Because this
process knows that none of its writes of that intent reached GitLab, it need
not wait ``settle_seconds`` before the repeat (an intent inherited from another
process still does).  Only a definite refusal -- a 4xx other than 429 and 408,
or GraphQL ``errors`` -- fails the action, with GitLab's reason recorded.

Leader fencing.  The state store fences its own writes by leadership term, but
GitLab knows nothing of terms, so two more rules apply (docs/state.md, the same
ones :func:`retry_bot.state.perform_once` applies):

* right before each GitLab write, :meth:`Store.ensure_leader` renews the lease
  or raises :class:`~retry_bot.state.LeadershipLost` (propagated: a deposed
  replica writes nothing and stops acting);
* an open intent inherited from an earlier leader after an *early* takeover is
  not observed before :meth:`Store.reconcile_delay` has passed (until the old
  lease would have expired): an old leader that is cut off from the database
  but still alive may have a write in flight until then.  The intent simply
  waits (``Outcome.status == "waiting"``) and is driven again on a later cycle.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from retry_bot.gitlab.client import (AmbiguousWrite, GitLabApiError, GitLabClient, GraphQLSchemaError, WriteNotSent,
                                     WriteRejected, parse_time)
from retry_bot.policy.model import Action
from retry_bot.state import ActionIntent, LeadershipLost, StateError
from runner_wrapper.logconfig import get_logger

if TYPE_CHECKING:
    from retry_bot.live.metrics import BotMetrics
    from retry_bot.state import Store

__all__ = ["ActionRequest", "ActionRunner", "ActionSettings", "Outcome", "RequestKind", "TEMPLATE_BRIDGE",
           "pipeline_creation_hint"]

log = get_logger("retry_bot.actions")

#: The bridge job of ``packaging/gitlab-ci/retry-bot.yml``.
TEMPLATE_BRIDGE = "retry-bot:child"
_FINAL = ("success", "failed", "canceled", "skipped")
#: A job in one of these was not played (yet): ``created`` is not processed yet (mechanics §11.1).
_NOT_PLAYED = ("created", "manual", "scheduled", "waiting_for_resource")


class _Undecided:
    """:meth:`ActionRunner._find_pipeline`'s answer while a candidate cannot be told apart yet."""


_UNDECIDED = _Undecided()


def _template_bridge(bridges: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The bridge of the CI template that makes the child pipeline (or any bridge that made one)."""
    return next((b for b in bridges if b.get("name") == TEMPLATE_BRIDGE), None) or \
        next((b for b in bridges if b.get("downstream_pipeline")), None)


def _child_of(bridges: list[Mapping[str, Any]]) -> int | None:
    """The id of the child pipeline the template's bridge made, if it made one yet."""
    bridge = _template_bridge(bridges)
    child = ((bridge or {}).get("downstream_pipeline") or {}).get("id")
    return int(child) if child else None


def pipeline_creation_hint(message: str) -> str:
    """What a 400 from ``POST /projects/:id/pipeline`` means, from GitLab's own message."""
    m = message.lower()
    if "insufficient permissions to set pipeline variables" in m:
        return ("the bot's token may not pass pipeline variables: set the project's "
                "ci_pipeline_variables_minimum_override_role (Settings > CI/CD > Variables) to the token's role "
                "or lower")
    if "sufficient permission to run a pipeline on" in m:
        return ("the ref is protected and the bot's token may neither push nor merge to it: allow its user "
                "(or role) to push or merge in Settings > Repository > Protected branches")
    if "insufficient permissions to create a new pipeline" in m:
        return "the bot's token needs the Developer role (or higher) on the project"
    if "filtered out by workflow rules" in m:
        return ("the project's workflow:rules drop the bot's api pipeline: add `- if: $RETRY_BOT_CHILD_CONFIG` "
                "as the first workflow rule")
    if "will not run for the selected trigger" in m or "no stages / jobs" in m:
        return ("no job of the bot's pipeline is in a normal stage: include packaging/gitlab-ci/retry-bot.yml "
                "(current version, retry-bot:child in stage `test`) and make sure the project's `stages:` "
                "contains `test` (or override the stage of retry-bot:child)")
    if "chosen stage" in m and "does not exist" in m:
        return ("a stage of the template is not in the project's `stages:`: add `test`, or override the stage "
                "of retry-bot:child")
    if "reference not found" in m:
        return "the job's ref no longer exists (branch deleted)"
    return "see `retry-bot doctor --config bot.toml` for what the project needs"


@dataclass(frozen=True)
class ActionSettings:
    #: An open write is trusted as "not made" only this long after it could last have been sent.
    settle_seconds: float = 75.0
    #: Give up waiting for the child pipeline's manual job after this long.
    child_timeout_seconds: float = 3600.0
    #: First wait before a write GitLab did not accept (429) is tried again; doubles each time.
    refused_backoff_seconds: float = 15.0
    #: The longest such wait.
    refused_backoff_max_seconds: float = 600.0
    #: Writes in flight at once (:meth:`ActionRunner.submit`); two of one lineage never overlap.
    write_concurrency: int = 4


class RequestKind(StrEnum):
    """How a decision's :class:`~retry_bot.policy.model.Action` is carried out on GitLab (see above).

    ``Action.RETRY`` is a ``retry``; ``Action.RESIZE`` is a ``job_retry`` when the job
    can be re-run in place (:func:`retry_bot.decide.resize_in_place`), else a ``resize``.
    """

    RETRY = Action.RETRY.value
    JOB_RETRY = "job_retry"
    RESIZE = Action.RESIZE.value

    @property
    def action(self) -> Action:
        """The decision's action it carries out (what the new job's lineage entry says it was)."""
        return Action.RETRY if self is RequestKind.RETRY else Action.RESIZE


@dataclass(frozen=True)
class ActionRequest:
    """Everything needed to carry one decision out; stored as the intent's payload."""

    kind: RequestKind
    project_id: int
    project_path: str
    job_id: int
    job_name: str
    pipeline_id: int
    ref: str
    origin_job_id: int
    attempt: int
    variables: Mapping[str, str] = field(default_factory=dict)
    runner_class: str | None = None
    memory_limit_bytes: int | None = None
    web_url: str | None = None
    family: str | None = None
    category: str | None = None
    not_before: float = 0.0
    #: For ``resize``: the compact child configuration and the pipeline variables.
    pipeline_variables: Mapping[str, str] = field(default_factory=dict)
    #: The failed job's user (GitLab username): the job the action creates counts towards the
    #: runner class's ``max_concurrent_per_user`` for this user, not for the bot's.
    user: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.kind, RequestKind) and self.kind in tuple(RequestKind):
            object.__setattr__(self, "kind", RequestKind(self.kind))  # a stored payload's string

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.job_id}"

    def to_payload(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_payload(cls, data: Mapping[str, Any]) -> "ActionRequest":
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class Outcome:
    """What happened to one action in this pass."""

    key: str
    status: str  # done | waiting | failed | dry_run (| sending: handed to the write pool, see Poller.write_batch)
    detail: str = ""
    new_job_id: int | None = None


class ActionRunner:
    """Drives action intents to completion; call :meth:`start` for a new decision and
    :meth:`resume_all` every cycle (it also finishes what a crashed run left open).

    Thread-safe.  :meth:`drive` may run in several threads (:meth:`submit` sends writes
    ``write_concurrency`` at a time): the steps of one **lineage** (the intents whose
    requests share an ``origin_job_id``) are serialized by a lock per lineage, so two
    writes for one job or lineage never run at once, and an intent another thread
    drove meanwhile is read again from the state store before it is driven (a settled
    one is never driven again).  The per-process bookkeeping (writes sent, refused,
    deferred; pipelines found) is guarded by one lock.  Each intent is still begun
    (committed) by :meth:`start` before any write of it.
    """

    def __init__(self, client: GitLabClient, store: Store, *, settings: ActionSettings = ActionSettings(),
                 metrics: BotMetrics | None = None, clock: Callable[[], float] = time.time,
                 on_new_job: Callable[[ActionRequest, int], None] | None = None) -> None:
        self.client = client
        self.store = store
        self.settings = settings
        self.metrics = metrics
        self.clock = clock
        self.on_new_job = on_new_job
        #: Pipeline ids found in this process (also rediscovered from GitLab after a restart).
        self._pipelines: dict[str, int] = {}
        #: Writes this process knows it made (so a fresh intent needs no observation).
        self._sent: dict[str, float] = {}
        #: Write intents begun by this process none of whose writes reached GitLab (all
        #: refused with 429 or never connected): nothing is in flight, no settle wait.
        self._unsent: set[str] = set()
        #: Overall intent key -> (refusals in a row, not before) for writes GitLab refused.
        self._deferred: dict[str, tuple[int, float]] = {}
        #: Guards the bookkeeping above (and the lineage locks' table).
        self._books = threading.Lock()
        #: Lineage key -> [lock, users]: the steps of one lineage run one at a time.
        self._lineages: dict[int, list[Any]] = {}
        #: Overall intent keys this process drove (so a stale copy is read again first).
        self._driven: set[str] = set()
        #: The write pool and its slots, made at the first :meth:`submit` (from the settings then).
        self._pool: ThreadPoolExecutor | None = None
        self._slots: threading.BoundedSemaphore | None = None

    # ------------------------------------------------------------------ entry points

    def start(self, req: ActionRequest) -> ActionIntent:
        """Write the overall intent (committed before any GitLab write)."""
        try:
            return self.store.begin_action(req.key, req.job_id, req.kind, req.to_payload())
        except LeadershipLost:
            raise
        except StateError:
            existing = self.store.get_action(req.key)
            if existing is None:
                raise
            return existing

    def resume_all(self, *, only_due: bool = True) -> list[Outcome]:
        """Drive every open overall intent one step further."""
        out = []
        for intent in self.store.open_intents():
            if intent.idempotency_key.count(":") != 1:
                continue  # a sub-intent: driven by its overall intent
            out.append(self.drive(intent, only_due=only_due))
        return out

    # ------------------------------------------------------------------ concurrency

    @staticmethod
    def lineage_key(intent: ActionIntent) -> int:
        """The lineage an intent's writes belong to (its request's origin job)."""
        payload = intent.payload or {}
        origin = payload.get("origin_job_id")
        return int(origin) if isinstance(origin, int) and not isinstance(origin, bool) else int(intent.job_id)

    @contextmanager
    def lineage_lock(self, lineage: int) -> Iterator[None]:
        """Hold the lock of one lineage (re-entrant for the thread that holds it)."""
        with self._books:
            entry = self._lineages.setdefault(lineage, [threading.RLock(), 0])
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._books:
                entry[1] -= 1
                if entry[1] == 0:
                    self._lineages.pop(lineage, None)

    def submit(self, intent: ActionIntent, *, only_due: bool = True) -> "Future[Outcome]":
        """Drive ``intent`` in the write pool; blocks while ``write_concurrency`` writes are in flight.

        The intent must be begun already (:meth:`start`): it is committed before the write.
        The future's result is :meth:`drive`'s outcome (or its exception, e.g.
        :class:`~retry_bot.state.LeadershipLost`).
        """
        with self._books:
            if self._pool is None or self._slots is None:
                width = max(1, int(self.settings.write_concurrency))
                self._slots = threading.BoundedSemaphore(width)
                self._pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="gitlab-write")
            pool, slots = self._pool, self._slots
        slots.acquire()
        try:
            future = pool.submit(self.drive, intent, only_due=only_due)
        except BaseException:
            slots.release()
            raise
        future.add_done_callback(lambda _f: slots.release())
        return future

    def close(self) -> None:
        """Wait for the writes in flight, then stop the write pool."""
        with self._books:
            pool, self._pool, self._slots = self._pool, None, None
        if pool is not None:
            pool.shutdown(wait=True)

    def drive(self, intent: ActionIntent, *, only_due: bool = True) -> Outcome:
        """One step of one overall intent; never raises for GitLab trouble (it waits or fails).

        Raises :class:`~retry_bot.state.LeadershipLost` when this replica was deposed: it
        made no GitLab write, and must stop acting (the new leader continues the intent).
        Safe to call from several threads: one lineage's steps run one at a time.
        """
        with self.lineage_lock(self.lineage_key(intent)):
            key = intent.idempotency_key
            with self._books:
                again = key in self._driven
                self._driven.add(key)
                if len(self._driven) > 1_000_000:  # bounded (a long-lived process): then start afresh
                    self._driven.clear()
            if again:
                # Another step of it ran (maybe in another thread): the store has the truth.
                stored = self.store.get_action(key)
                if stored is not None and (stored.status != intent.status or stored.attempts != intent.attempts
                                           or stored.updated_at != intent.updated_at):
                    intent = stored
            return self._drive(intent, only_due=only_due)

    def _drive(self, intent: ActionIntent, *, only_due: bool) -> Outcome:
        req = ActionRequest.from_payload(intent.payload)
        if intent.status != "begun":
            return Outcome(req.key, "done" if intent.status == "completed" else "failed",
                           str(intent.error or ""), (intent.result or {}).get("new_job_id"))
        if only_due and req.not_before > self.clock():
            return Outcome(req.key, "waiting", f"backoff until {req.not_before:.0f}")
        with self._books:
            deferred = self._deferred.get(req.key)
        if only_due and deferred is not None and deferred[1] > self.clock():
            return Outcome(req.key, "waiting", f"GitLab refused the write (429): trying again at {deferred[1]:.0f}")
        # Sub-intents are begun after their overall intent by the same (or a later)
        # leader, so the overall intent's term is the oldest: one check covers them all.
        inherited = self.store.reconcile_delay(intent)
        if inherited > 0:
            log.info("action_inherited_waiting", key=req.key, job_url=req.web_url, seconds=round(inherited, 1),
                     previous_holder=intent.holder, previous_term=intent.term,
                     note="an earlier leader's write may still land; GitLab is observed once its lease ran out")
            return Outcome(req.key, "waiting", f"inherited from {intent.holder!r} (term {intent.term}): observing "
                                               f"GitLab in {inherited:.1f}s, once its lease ran out")
        try:
            if req.kind in (RequestKind.RETRY, RequestKind.JOB_RETRY):
                res = self._single(intent, req, req.kind)
            elif req.kind == RequestKind.RESIZE:
                res = self._resize(intent, req)
            else:
                self.store.fail_action(intent.intent_id, f"unknown action kind {req.kind!r}", False)
                return Outcome(req.key, "failed", f"unknown action kind {req.kind!r}")
        except GitLabApiError as exc:
            # Reads failed for good this cycle: leave the intent open, try next cycle.
            log.warning("action_deferred", key=req.key, job_url=req.web_url, error=str(exc))
            res = Outcome(req.key, "waiting", str(exc))
        if self.metrics is not None and res.status in ("done", "failed"):
            self.metrics.actions.labels(req.kind, res.status).inc()
        return res

    # ------------------------------------------------------------------ plain retry and jobRetry

    def _settled(self, intent: ActionIntent) -> bool:
        with self._books:
            if intent.idempotency_key in self._unsent:
                return True  # every write of it was refused before GitLab acted: nothing can still land
            last = max(intent.updated_at, self._sent.get(intent.idempotency_key, 0.0))
        return self.clock() - last >= self.settings.settle_seconds

    def _was_sent(self, key: str) -> bool:
        with self._books:
            return key in self._sent

    def _maybe_sent(self, key: str) -> None:
        """A write of ``key`` may have reached GitLab (no answer): it may still land."""
        with self._books:
            self._unsent.discard(key)

    def _sending(self, intent: ActionIntent, fresh: bool) -> None:
        """Bookkeeping right before a write of ``intent``."""
        key = intent.idempotency_key
        with self._books:
            if fresh:
                self._unsent.add(key)  # until a write of it may have reached GitLab
            self._sent[key] = self.clock()

    def _not_sent(self, intent: ActionIntent, req: ActionRequest, exc: WriteNotSent, step: str) -> Outcome:
        """GitLab did not act on the write (429s): keep the intent, try again after a backoff."""
        with self._books:
            n, _ = self._deferred.get(req.key, (0, 0.0))
            wait = min(self.settings.refused_backoff_seconds * (2 ** n), self.settings.refused_backoff_max_seconds)
            wait = max(wait, exc.retry_after or 0.0)
            due = self.clock() + wait
            self._deferred[req.key] = (n + 1, due)
            if len(self._deferred) > 10000:  # bounded; a forgotten entry only means no backoff for it
                self._deferred.pop(next(iter(self._deferred)))
        if self.metrics is not None and hasattr(self.metrics, "writes_deferred"):
            self.metrics.writes_deferred.labels(req.kind).inc()
        log.warning("action_write_deferred", key=req.key, job_url=req.web_url, step=step, refusals=n + 1,
                    retry_in_seconds=round(wait, 1), error=str(exc),
                    note="GitLab did not act (rate limited); the intent stays open and is tried again")
        return Outcome(req.key, "waiting", f"GitLab did not accept the write yet ({exc}); again in {wait:.0f}s")

    def _sent_ok(self, intent: ActionIntent, req: ActionRequest) -> None:
        with self._books:
            self._deferred.pop(req.key, None)
            self._unsent.discard(intent.idempotency_key)

    def _single(self, intent: ActionIntent, req: ActionRequest, kind: RequestKind) -> Outcome:
        fresh = intent.created and intent.attempts == 1 and not self._was_sent(intent.idempotency_key)
        if not fresh:
            found = self._observe_retried(req)
            if found is not None:
                return self._finish(intent, req, found, observed=True)
            if not self._settled(intent):
                return Outcome(req.key, "waiting", "an earlier write may still land; waiting before redoing it")
        self.store.ensure_leader()  # renews the lease, or LeadershipLost: a deposed replica writes nothing
        self._sending(intent, fresh)
        try:
            if kind == RequestKind.RETRY:
                new = self.client.retry_job(req.project_id, req.job_id)
                new_id = int(new["id"])
            else:
                new_id = int(self.client.job_retry_with_variables(req.job_id, req.variables)["id"])
        except WriteNotSent as exc:
            return self._not_sent(intent, req, exc, kind)
        except WriteRejected as exc:
            self.store.fail_action(intent.intent_id, str(exc), False)
            log.warning("action_failed", key=req.key, job_url=req.web_url, action=kind, reason=str(exc))
            return Outcome(req.key, "failed", str(exc))
        except (AmbiguousWrite, GitLabApiError) as exc:
            self._maybe_sent(intent.idempotency_key)
            log.warning("action_outcome_unknown", key=req.key, job_url=req.web_url, action=kind, error=str(exc))
            return Outcome(req.key, "waiting", f"outcome unknown: {exc}")
        self._sent_ok(intent, req)
        return self._finish(intent, req, new_id, observed=False)

    def _observe_retried(self, req: ActionRequest) -> int | None:
        """The job GitLab created by retrying ``req.job_id``, if it did."""
        try:
            details = self.client.job_details(req.project_path, req.job_id)
        except GraphQLSchemaError:
            details = {"retried": True}  # unknown: the pipeline's jobs below tell
        if not details.get("retried"):
            return None
        jobs = self.client.pipeline_jobs(req.project_id, req.pipeline_id, include_retried=True)
        later = sorted(int(j["id"]) for j in jobs if j.get("name") == req.job_name and int(j["id"]) > req.job_id)
        return later[0] if later else None

    def _finish(self, intent: ActionIntent, req: ActionRequest, new_job_id: int, *, observed: bool,
                extra: Mapping[str, Any] | None = None) -> Outcome:
        result = {"new_job_id": new_job_id, "observed": observed, **(extra or {})}
        # The new job joins its lineage *before* the intent closes: a crash between the
        # store writes leaves the intent open, the next cycle observes the same job on GitLab
        # and adds it again (idempotent).  The other order lost the member for good: the
        # intent was closed, and the copy would later be judged as an origin with a fresh
        # budget.
        try:
            self.store.add_lineage_member(
                req.origin_job_id, new_job_id, req.kind.action.value, dict(req.variables),
                req.runner_class, memory_limit_bytes=req.memory_limit_bytes, status="pending")
        except StateError as exc:
            # The new job already heads (or belongs to) another lineage: it was judged before
            # this intent could claim it (the poller defers such copies, so this is a defence).
            # Close the intent anyway -- an intent that can never complete would be driven,
            # and fail, every cycle -- and say so loudly.
            log.error("action_lineage_conflict", key=req.key, job_url=req.web_url, job_id=req.job_id,
                      new_job_id=new_job_id, origin_job_id=req.origin_job_id, error=str(exc))
            result["lineage_conflict"] = str(exc)
        # Followed before the intent closes too (following is idempotent): once the intent is
        # closed nothing would follow the job again, and how it ends would never be recorded.
        if self.on_new_job is not None:
            self.on_new_job(req, new_job_id)
        self.store.complete_action(intent.intent_id, result)
        log.info("action_done", key=req.key, action=req.kind, job_url=req.web_url, job_id=req.job_id,
                 new_job_id=new_job_id, observed=observed, family=req.family, category=req.category,
                 variables=dict(req.variables), runner_class=req.runner_class)
        return Outcome(req.key, "done", "found already done on GitLab" if observed else "", new_job_id)

    # ------------------------------------------------------------------ resize: pipeline, child, play

    def _sub(self, intent: ActionIntent, suffix: str, kind: str, payload: Mapping[str, Any]) -> ActionIntent:
        return self.store.begin_action(f"{intent.idempotency_key}:{suffix}", intent.job_id, kind, payload)

    def _resize(self, intent: ActionIntent, req: ActionRequest) -> Outcome:
        # 1. the pipeline that carries the child configuration
        pipe_intent = self._sub(intent, "pipeline", "create_pipeline",
                                {"project_id": req.project_id, "ref": req.ref, "failed_job_id": req.job_id,
                                 "origin_job_id": req.origin_job_id})
        if pipe_intent.status == "failed":
            self.store.fail_action(intent.intent_id, f"creating the pipeline failed: {pipe_intent.error}", False)
            return Outcome(req.key, "failed", str(pipe_intent.error))
        pipeline_id: int | None
        if pipe_intent.status == "completed":
            pipeline_id = int((pipe_intent.result or {})["pipeline_id"])
        else:
            pipeline_id = self._create_pipeline_once(pipe_intent, req)
            if pipeline_id is None:
                st = self.store.get_action(pipe_intent.idempotency_key)
                if st is not None and st.status == "failed":
                    self.store.fail_action(intent.intent_id, f"creating the pipeline failed: {st.error}", False)
                    return Outcome(req.key, "failed", str(st.error))
                return Outcome(req.key, "waiting", "pipeline creation outcome unknown")

        # 2. the manual copy in the child pipeline
        job = self._find_manual_copy(req, pipeline_id)
        if isinstance(job, str):
            if job.startswith("failed:"):
                self.store.fail_action(intent.intent_id, job[7:].strip(), False)
                log.warning("action_failed", key=req.key, job_url=req.web_url, reason=job[7:].strip())
                return Outcome(req.key, "failed", job[7:].strip())
            age = self.clock() - intent.created_at
            if age > self.settings.child_timeout_seconds:
                msg = f"the child pipeline's manual job did not appear within {age:.0f}s ({job})"
                self.store.fail_action(intent.intent_id, msg, False)
                return Outcome(req.key, "failed", msg)
            return Outcome(req.key, "waiting", job)

        # 3. play it with the upgraded variables
        manual_id = int(job["id"])
        play_intent = self._sub(intent, "play", "play", {"project_id": req.project_id, "job_id": manual_id,
                                                        "variables": dict(req.variables)})
        if play_intent.status == "completed":
            return self._finish(intent, req, manual_id, observed=True, extra={"pipeline_id": pipeline_id})
        if play_intent.status == "failed":
            self.store.fail_action(intent.intent_id, f"playing job {manual_id} failed: {play_intent.error}", False)
            return Outcome(req.key, "failed", str(play_intent.error))
        fresh = play_intent.created and play_intent.attempts == 1
        status = job.get("status")
        if not fresh or self._was_sent(play_intent.idempotency_key):
            if status not in _NOT_PLAYED and status not in ("canceled", "skipped"):
                self.store.complete_action(play_intent.intent_id, {"job_id": manual_id, "observed": True})
                return self._finish(intent, req, manual_id, observed=True, extra={"pipeline_id": pipeline_id})
            # still created/manual: our play did not happen (a played job leaves ``manual`` at once)
        if status in ("canceled", "skipped"):
            msg = f"the manual copy {manual_id} was {status} before it was played (auto-cancel or a person)"
            self.store.fail_action(play_intent.intent_id, msg, False)
            self.store.fail_action(intent.intent_id, msg, False)
            return Outcome(req.key, "failed", msg)
        if status != "manual":
            # ``created``: the child pipeline is not processed yet; playing now gets 400 "Unplayable Job"
            return Outcome(req.key, "waiting", f"the manual copy {manual_id} is {status}, not manual yet")
        self.store.ensure_leader()
        self._sending(play_intent, fresh)
        try:
            self.client.play_job(req.project_id, manual_id, req.variables)
        except WriteNotSent as exc:
            return self._not_sent(play_intent, req, exc, "play")
        except WriteRejected as exc:
            self.store.fail_action(play_intent.intent_id, str(exc), False)
            self.store.fail_action(intent.intent_id, f"playing job {manual_id} was refused: {exc}", False)
            log.warning("action_failed", key=req.key, job_url=req.web_url, reason=str(exc))
            return Outcome(req.key, "failed", str(exc))
        except (AmbiguousWrite, GitLabApiError) as exc:
            self._maybe_sent(play_intent.idempotency_key)
            log.warning("action_outcome_unknown", key=req.key, step="play", job_id=manual_id, error=str(exc))
            return Outcome(req.key, "waiting", f"play outcome unknown: {exc}")
        self._sent_ok(play_intent, req)
        self.store.complete_action(play_intent.intent_id, {"job_id": manual_id, "observed": False})
        return self._finish(intent, req, manual_id, observed=False, extra={"pipeline_id": pipeline_id})

    def _create_pipeline_once(self, pipe_intent: ActionIntent, req: ActionRequest) -> int | None:
        key = pipe_intent.idempotency_key
        fresh = pipe_intent.created and pipe_intent.attempts == 1 and not self._was_sent(key)
        if not fresh:
            with self._books:
                known = self._pipelines.get(key)
            found = known or self._find_pipeline(req, since=pipe_intent.created_at)
            if found is _UNDECIDED:
                return None  # a pipeline of ours may be it: wait until its child pipeline shows
            if found is not None:
                self._claim_pipeline(found, key)
                self.store.complete_action(pipe_intent.intent_id, {"pipeline_id": found, "observed": True})
                with self._books:
                    self._pipelines[key] = found
                return found
            if not self._settled(pipe_intent):
                return None
        self.store.ensure_leader()
        self._sending(pipe_intent, fresh)
        try:
            pipe = self.client.create_pipeline(req.project_id, req.ref, req.pipeline_variables)
        except WriteNotSent as exc:
            self._not_sent(pipe_intent, req, exc, "create_pipeline")
            return None
        except WriteRejected as exc:
            hint = ""
            if exc.status == 400:
                hint = f" ({pipeline_creation_hint(str(exc))})"
            elif exc.status == 403:
                hint = " (the bot's token needs the Developer role (or higher) and the api scope)"
            self.store.fail_action(pipe_intent.intent_id, f"{exc}{hint}", False)
            log.warning("action_failed", key=req.key, step="create_pipeline", job_url=req.web_url,
                        reason=f"{exc}{hint}")
            return None
        except (AmbiguousWrite, GitLabApiError) as exc:
            self._maybe_sent(key)
            log.warning("action_outcome_unknown", key=req.key, step="create_pipeline", error=str(exc))
            return None
        self._sent_ok(pipe_intent, req)
        pid = int(pipe["id"])
        self._claim_pipeline(pid, key)
        self.store.complete_action(pipe_intent.intent_id, {"pipeline_id": pid, "observed": False,
                                                           "web_url": pipe.get("web_url")})
        with self._books:
            self._pipelines[key] = pid
        log.info("resize_pipeline_created", key=req.key, pipeline_id=pid, job_url=req.web_url,
                 origin_job_id=req.origin_job_id)
        return pid

    def _claim_pipeline(self, pipeline_id: int, key: str) -> None:
        """Record in the state store that ``pipeline_id`` is the bot's, made for intent ``key``."""
        self.store.own_pipeline(pipeline_id, key)

    def _bot_username(self) -> str | None:
        if not hasattr(self, "_username"):  # a race only reads the user twice
            try:
                self._username: str | None = str(self.client.current_user().get("username") or "") or None
            except GitLabApiError as exc:
                log.warning("bot_user_unknown", error=str(exc))
                return None
        return self._username

    def _find_pipeline(self, req: ActionRequest, *, since: float) -> int | _Undecided | None:
        """The pipeline an earlier run created for ``req`` but did not record, if any.

        Candidates are the bot user's own ``api`` pipelines on the ref, created since the
        intent began, that no other intent claims in the state store and that hold the
        template's jobs.  Pipeline variables are not read (that needs Maintainer, or being
        the triggerer, G ``app/policies/ci/pipeline_policy.rb``): a Developer token works.
        Jobs of different names on one ref may be resized at the same time, so a candidate
        is ``req``'s only when its child pipeline holds a job of ``req.job_name`` (one resize
        per job name and ref is in flight at a time, see ``Poller._copy_pending``); the oldest
        such is taken.  :data:`_UNDECIDED` when a candidate's child pipeline is not created
        yet (it cannot be told apart: the caller waits rather than write again); a candidate
        whose bridge ended without a child is taken last (resizing then fails with the reason).
        """
        key = f"{req.key}:pipeline"
        mine = self.store.pipelines_of(key)
        if mine:
            return min(mine)  # recorded before a crash that came before the intent was completed
        username = self._bot_username()
        if username is None:
            return None
        found: int | None = None
        orphan: int | None = None
        undecided = False
        for p in self.client.latest_pipelines(req.project_id, req.ref, source="api", limit=20, username=username):
            created = parse_time(p.get("created_at"))
            if created is not None and created.timestamp() < since - 120:
                break
            pid = int(p["id"])
            if (self.store.pipeline_owner(pid) or key) != key:
                continue  # another intent's pipeline
            bridges = self.client.pipeline_bridges(req.project_id, pid)
            names = {j.get("name") for j in self.client.pipeline_jobs(req.project_id, pid)} | {
                b.get("name") for b in bridges}
            if TEMPLATE_BRIDGE not in names and "retry-bot:generate" not in names:
                continue
            child = _child_of(bridges)
            if child is None:
                if any(b.get("status") in _FINAL for b in bridges) or \
                        self.client.pipeline(req.project_id, pid).get("status") in _FINAL:
                    orphan = pid  # ended without a child: nobody's copy will appear there
                else:
                    undecided = True  # whose it is shows once its child pipeline exists
                continue
            if any(j.get("name") == req.job_name
                   for j in self.client.pipeline_jobs(req.project_id, child, include_retried=True)):
                found = pid  # keep going: the oldest one is ours
        if found is not None:
            return found
        return _UNDECIDED if undecided else orphan

    def _find_manual_copy(self, req: ActionRequest, pipeline_id: int) -> Mapping[str, Any] | str:
        """The manual copy in the child pipeline, or why it is not there (yet)."""
        bridges = self.client.pipeline_bridges(req.project_id, pipeline_id)
        bridge = _template_bridge(bridges)
        if bridge is None:
            pipe = self.client.pipeline(req.project_id, pipeline_id)
            if pipe.get("status") in _FINAL:
                return (f"failed: pipeline {pipeline_id} ended {pipe.get('status')} without a child pipeline "
                        "(is packaging/gitlab-ci/retry-bot.yml included?)")
            return f"pipeline {pipeline_id} is {pipe.get('status')}; the child pipeline is not created yet"
        child = (bridge.get("downstream_pipeline") or {}).get("id")
        if not child:
            if bridge.get("status") in _FINAL:
                return f"failed: the bridge {bridge.get('name')} ended {bridge.get('status')} without a child pipeline"
            return f"bridge {bridge.get('name')} is {bridge.get('status')}"
        jobs = self.client.pipeline_jobs(req.project_id, int(child), include_retried=True)
        same = [j for j in jobs if j.get("name") == req.job_name]
        if not same:
            return f"failed: child pipeline {child} has no job named {req.job_name!r}"
        return sorted(same, key=lambda j: int(j["id"]))[0]


