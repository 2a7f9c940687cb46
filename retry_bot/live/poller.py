"""One poll cycle: find newly failed jobs, judge each exactly once, act.

For every watched project (configured, or every project of configured groups):

1. list failed jobs newest first (keyset, ``id desc``, one page of 100 per
   request), stopping at the look-back bound by ``created_at``: job ids are
   assigned at creation, so a long job created before newer ones can fail
   after them, and the largest id seen is no safe stopping point
   (gitlab-mechanics §5).  Child pipelines are in the same project, so their
   jobs are in the same list.  An idle project costs one request.
2. skip what the state store already decided (de-duplication by job id);
3. for each new failed job (oldest first): GraphQL for what REST lacks
   (``exitCode``, ``retried``, ``manualJob``), the trace tail (bounded), the
   signed usage record in it; classify; read the lineage; gather the job's
   context (the reads :func:`~retry_bot.decide.next_read` asks for: newer
   pipelines, the branch head, the job's definition); decide once; record.
4. carry the decision out through :class:`~retry_bot.live.actions.ActionRunner`
   (intent first, exactly once), or only log it in dry-run mode.

Every cycle also drives open intents (resizes waiting for their child
pipeline, backoffs that came due, writes a crash left open) and checks the
jobs the bot created until they finish, which records OOM recoveries.

Everything here is the thin edge between GitLab and the pure core
(:func:`retry_bot.classify.classify`, :func:`retry_bot.decide.decide`).
"""

from __future__ import annotations

import heapq
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from retry_bot.live.actions import ActionRequest, ActionRunner, Outcome, RequestKind
from retry_bot.classify import classify, extract_verified_record, facts_from_job_json
from retry_bot.decide import ClassUsage, Decision, NextRead, decide, next_read, resize_in_place
from retry_bot.gitlab.client import GitLabApiError, GitLabClient, GraphQLSchemaError, NotFound, parse_time
from retry_bot.gitlab.jobdef import (GeneratedPipelineSource, JobDefinition, JobDefinitionError,
                                     fetch_job_definition)
from retry_bot.gitlab.recreate import ChildPipelineSpec, build_child_config, parse_gitlab_duration, pipeline_variables
from retry_bot.model import Classification, JobContext, JobFacts, LineageAttempt, Read
from retry_bot.policy.model import Action
from retry_bot.state import ActionIntent, FollowedJob, LeadershipLost
from retry_bot.storm import StormState, release_times
from runner_wrapper.logconfig import get_logger

if TYPE_CHECKING:
    from retry_bot.classify import Taxonomy
    from retry_bot.live.metrics import BotMetrics
    from retry_bot.policy import Policy
    from retry_bot.state import Store
    from runner_wrapper.record import UsageRecord

__all__ = ["Poller", "PollerSettings", "CycleReport", "JobOutcome", "share_budget"]

log = get_logger("retry_bot.poller")

#: Dry-run decisions kept per job.
DRY_RUN_KEEP = 5
#: Followed jobs read from the state store per page (all of them are followed: no cap).
_FOLLOW_PAGE = 1000
_FINAL = ("success", "failed", "canceled", "skipped")


@dataclass(frozen=True)
class PollerSettings:
    projects: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    lookback_seconds: float = 26 * 3600.0
    per_page: int = 100
    #: New failed jobs decided per cycle, shared across projects (:func:`share_budget`).
    max_jobs_per_cycle: int = 500
    group_refresh_cycles: int = 30
    trace_tail_bytes: int = 256 * 1024
    dry_run: bool = False
    generated: tuple[GeneratedPipelineSource, ...] = ()
    #: Jobs the bot created are followed to their end, or until they are this old (seconds).
    follow_max_age: float = 7 * 86400.0
    #: GitLab reads of the jobs about to be decided (GraphQL details, trace tail) in flight at once.
    #: (Writes: ``ActionSettings.write_concurrency``, through :meth:`Poller.write_batch`.)
    read_concurrency: int = 8


@dataclass(frozen=True)
class JobOutcome:
    job_id: int
    project: str
    web_url: str | None
    family: str
    category: str
    action: str
    reason: str
    acted: str = ""


@dataclass
class CycleReport:
    started: float
    seconds: float = 0.0
    projects: int = 0
    listed: int = 0
    decided: list[JobOutcome] = field(default_factory=list)
    actions: list[Any] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: Watched projects/groups that could be read this cycle, and those GitLab refused (401/403).
    projects_ok: int = 0
    #: Projects/groups that could not be read or polled; those refused with 401/403.
    unavailable: int = 0
    auth_failures: list[str] = field(default_factory=list)
    #: Set when the cycle could not work at all (e.g. the token is refused for every project).
    fatal: str | None = None

    @property
    def failed(self) -> bool:
        """The cycle did no useful work: fatal, or not one watched project could be polled."""
        return self.fatal is not None or (bool(self.errors) and self.projects_ok == 0)


#: HTTP statuses that mean GitLab refused the token itself, or its access to a project.
_AUTH_STATUSES = (401, 403)


def _auth_problem(failures: Sequence[str]) -> str:
    """The message for a cycle where GitLab refused every project (the token is never named)."""
    return ("GitLab refused the bot's token for every watched project and group (" + "; ".join(failures[:5])
            + (f"; and {len(failures) - 5} more" if len(failures) > 5 else "") + "): the token is invalid, "
            "expired or revoked (401), or lacks access to the projects (403). Check [gitlab] token_env / "
            "token_file in bot.toml: the token needs the api scope and at least Developer on each project.")


@dataclass
class _Project:
    id: int
    path: str


class Poller:
    """Polls GitLab and decides failed jobs; one instance per process.

    Args:
        client: the GitLab edge.
        store: the state store (:func:`retry_bot.state.open_store`).
        policy: a callable returning the policy in force (SIGHUP swaps it).
        taxonomy: the classifier's rules.
        signing_keys: key id -> key, to verify usage records.
        actions: carries decisions out.
        predictor: optional ``(facts, record) -> predicted memory bytes``.
    """

    def __init__(self, client: GitLabClient, store: Store, *, settings: PollerSettings,
                 policy: Callable[[], Policy], taxonomy: Taxonomy, signing_keys: Mapping[str, bytes],
                 actions: ActionRunner, metrics: BotMetrics | None = None, clock: Callable[[], float] = time.time,
                 predictor: Callable[[JobFacts, UsageRecord | None], int | None] | None = None) -> None:
        self.client = client
        self.store = store
        self.settings = settings
        self.policy = policy
        self.taxonomy = taxonomy
        self.keys = dict(signing_keys)
        self.actions = actions
        self.metrics = metrics
        self.clock = clock
        self.predictor = predictor
        self._projects: list[_Project] = []
        self._cycles = 0
        self._paths: dict[int, str] = {}
        #: Jobs this process decided in dry-run mode: provisional (not recorded as decided in
        #: the store, so a later live run decides them), but not re-judged every cycle here.
        self._dry_decided: set[int] = set()
        #: The storm brake (retry_bot/storm.py), loaded from the state store each cycle.
        self.storm = StormState()
        #: The due-time scheduler: intents this process began and that wait for their
        #: ``not_before`` (a backoff), as (due, key) in a heap, with the intent as begun.
        self._due: list[tuple[float, str]] = []
        self._scheduled: dict[str, ActionIntent] = {}
        #: The newest pipelines per (project, ref), read once per cycle for the superseded check.
        self._ref_pipelines: dict[tuple[int, str], list[Mapping[str, Any]]] = {}
        #: The open intents' payloads, read once and kept until this poller begins an intent, a
        #: cycle starts or a batch of webhook events is handled (:meth:`forget_open_intents`):
        #: asked for nearly every new failed job (:meth:`_copy_pending`), and a burst may hold
        #: thousands of intents waiting for their backoff.  An entry gone stale (its intent
        #: completed meanwhile) can only defer a job until the next refresh, never judge one early.
        self._open_payloads: list[Mapping[str, Any]] | None = None
        #: The writes of the jobs being decided now, sent by the action runner's write pool.
        self._batch: _WriteBatch | None = None
        actions.on_new_job = self._watch_new_job

    # ------------------------------------------------------------------ projects

    def projects(self, report: CycleReport | None = None) -> list[_Project]:
        """Configured projects plus every project of configured groups (re-listed now and then).

        A configured project that could not be read is tried again every cycle (one
        request) and counted as an error of the cycle in ``report``; 401/403 answers
        also go to ``report.auth_failures``.
        """
        refresh = not self._projects or (self._cycles % max(1, self.settings.group_refresh_cycles)) == 0
        found: dict[int, _Project] = {p.id: p for p in self._projects}
        for ref in self.settings.projects:
            if any(p.path == ref or str(p.id) == ref for p in found.values()):
                continue
            try:
                pj = self.client.get_project(ref)
            except GitLabApiError as exc:
                log.error("project_unavailable", project=ref, status=exc.status, error=str(exc),
                          note="counted as an error of this cycle; tried again next cycle")
                self._note_failure(report, f"project {ref}", exc)
                continue
            found[int(pj["id"])] = _Project(int(pj["id"]), str(pj.get("path_with_namespace") or ref))
        for g in self.settings.groups if refresh else ():
            try:
                for pj in self.client.group_projects(g):
                    if pj.get("archived"):
                        continue
                    found[int(pj["id"])] = _Project(int(pj["id"]), str(pj.get("path_with_namespace")))
            except GitLabApiError as exc:
                log.error("group_unavailable", group=g, status=exc.status, error=str(exc))
                self._note_failure(report, f"group {g}", exc)
        self._projects = sorted(found.values(), key=lambda p: p.id)
        self._paths.update({p.id: p.path for p in self._projects})
        return self._projects

    @staticmethod
    def _note_failure(report: CycleReport | None, what: str, exc: GitLabApiError) -> None:
        if report is None:
            return
        report.errors.append(f"{what}: {exc}")
        report.unavailable += 1
        if exc.status in _AUTH_STATUSES:
            report.auth_failures.append(f"{what}: {exc.status}")

    # ------------------------------------------------------------------ the cycle

    def run_cycle(self, *, stop: Callable[[], bool] = lambda: False) -> CycleReport:
        """One full cycle over every project; ``stop()`` is checked between jobs."""
        t0 = time.monotonic()
        report = CycleReport(started=self.clock())
        self._ref_pipelines = {}
        self.forget_open_intents()
        try:
            projects = self.projects(report)
            report.projects = len(projects)
            if not projects and report.unavailable and len(report.auth_failures) == report.unavailable:
                report.fatal = _auth_problem(report.auth_failures)
            else:
                self._load_storm()
                self._release_unbraked(report)
                self._probe_held(report)
                report.actions.extend(self.run_due())
                report.actions.extend(self._resume_open())
                listed: list[tuple[_Project, list[Mapping[str, Any]]]] = []
                for proj in projects:
                    if stop():
                        break
                    try:
                        listed.append((proj, self.list_new(proj, report)))
                        report.projects_ok += 1
                    except GitLabApiError as exc:
                        self._note_failure(report, f"project {proj.path}", exc)
                        log.error("project_poll_failed", project=proj.path, status=exc.status, error=str(exc))
                with self.write_batch(report):  # the writes go out while the next jobs are decided
                    self.handle_listed(listed, report, stop=stop)
                if projects and report.projects_ok == 0 and report.unavailable \
                        and len(report.auth_failures) == report.unavailable:
                    report.fatal = _auth_problem(report.auth_failures)
                elif not stop():
                    self.follow_watched(report)
            if report.fatal is not None:
                log.error("gitlab_token_rejected", problem=report.fatal)
        finally:
            self._cycles += 1
            report.seconds = time.monotonic() - t0
            if self.metrics is not None:
                self.metrics.poll_duration.observe(report.seconds)
                self.metrics.poll_cycles.labels("error" if report.errors or report.fatal else "ok").inc()
                self.metrics.last_poll.set(self.clock())
        log.info("poll_cycle_done", seconds=round(report.seconds, 3), projects=report.projects,
                 projects_ok=report.projects_ok, listed=report.listed, decided=len(report.decided),
                 errors=len(report.errors), failed=report.failed)
        if report.errors:
            log.warning("poll_cycle_errors", errors=report.errors[:10], more=max(0, len(report.errors) - 10))
        return report

    def poll_project(self, proj: _Project, report: CycleReport, *, stop: Callable[[], bool] = lambda: False) -> None:
        """List and handle one project's new failed jobs (the whole cycle budget for it)."""
        with self.write_batch(report):
            self.handle_listed([(proj, self.list_new(proj, report))], report, stop=stop)

    def list_new(self, proj: _Project, report: CycleReport) -> list[Mapping[str, Any]]:
        """The project's failed jobs not decided yet, newest first, at most the cycle's budget."""
        now = self.clock()
        since = now - self.settings.lookback_seconds
        new: list[Mapping[str, Any]] = []
        top_id = 0
        for job in self.client.iter_failed_jobs(proj.id, per_page=self.settings.per_page):
            report.listed += 1
            created = parse_time(job.get("created_at"))
            if created is not None and created.timestamp() < since:
                break
            jid = int(job["id"])
            top_id = max(top_id, jid)
            rec = self.store.get_job(jid)
            if rec is not None and rec.decided or jid in self._dry_decided:
                continue
            new.append(job)
            if len(new) >= self.settings.max_jobs_per_cycle:
                break
        self._watermark(proj, top_id, now, since)
        return new

    def handle_listed(self, listed: Sequence[tuple[_Project, Sequence[Mapping[str, Any]]]], report: CycleReport, *,
                      stop: Callable[[], bool] = lambda: False) -> None:
        """Handle the listed jobs within the cycle's budget, shared fairly across projects.

        Each project gets its :func:`share_budget` share (oldest first); the projects take
        turns, one job each, so a large backlog neither starves the small projects nor is
        starved by a per-project cap.  The rest waits for the next cycle.
        """
        shares = share_budget([len(new) for _, new in listed], self.settings.max_jobs_per_cycle,
                              start=self._cycles)
        queues = [(proj, sorted(new, key=lambda j: int(j["id"]))[:n]) for (proj, new), n in zip(listed, shares)]
        deferred = sum(len(new) for _, new in listed) - sum(shares)
        if deferred > 0:
            log.info("cycle_budget_reached", budget=self.settings.max_jobs_per_cycle, deferred=deferred,
                     projects=sum(1 for _, new in listed if new), note="the rest is decided next cycle")
        order = [(proj, q[i]) for i in range(max((len(q) for _, q in queues), default=0))
                 for proj, q in queues if i < len(q)]
        width = max(1, self.settings.read_concurrency)
        pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="gitlab-read") if width > 1 else None
        try:
            step = 2 * width
            for start in range(0, len(order), step):
                chunk = order[start:start + step]
                reads = self._prefetch(pool, chunk) if pool is not None and len(chunk) > 1 else {}
                for proj, job in chunk:
                    if stop():
                        return
                    self._handle_one(proj, job, report, reads.get(int(job["id"])))
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)

    # ------------------------------------------------------------------ concurrent writes

    @contextmanager
    def write_batch(self, report: CycleReport | None = None) -> Iterator[None]:
        """Within it, the writes of new decisions go to the action runner's write pool.

        Decisions stay one at a time, in order; each intent is begun (committed) before
        its write is handed on; the runner serializes the writes of one lineage.  On
        exit every write handed on has finished (a stop or a crash of the cycle waits
        for the writes in flight), and ``report``'s outcomes say what became of them.
        A deposed leader's :class:`LeadershipLost` is raised again here.
        """
        if self._batch is not None or self.actions.settings.write_concurrency <= 1:
            yield
            return
        batch = self._batch = _WriteBatch()
        try:
            yield
        finally:
            self._batch = None
            lost = batch.finish(report)
        if lost is not None:
            raise lost

    def _drive_new(self, intent: ActionIntent, req: ActionRequest) -> Outcome:
        """Drive a just-begun intent: in the write pool inside :meth:`write_batch`, else here."""
        batch = self._batch
        if batch is None or req.not_before > self.clock():
            return self.actions.drive(intent)  # a backoff not due yet: no write, nothing to wait for
        batch.add(req, self.actions.submit(intent))
        return Outcome(req.key, "sending", "handed to the write pool")

    def _await_lineage(self, job_id: int) -> None:
        """Before deciding a job, let a write in flight for its lineage finish (it may change the lineage)."""
        batch = self._batch
        if batch is not None and batch.busy():
            batch.wait_lineage(self.store.origin_of(job_id))

    def _prefetch(self, pool: ThreadPoolExecutor, chunk: Sequence[tuple[_Project, Mapping[str, Any]]]
                  ) -> dict[int, dict[str, Any]]:
        """The reads :meth:`handle_job` starts with, for a few jobs at once (bounded by the pool).

        Only reads: each job is still decided one at a time, in order, its intent begun before
        its write (which :meth:`write_batch` may send while the next job is decided), so the
        intent protocol (and exactly-once) is untouched.  An error is kept and raised where
        the read would have been made.
        """
        def call(fn: Callable[..., Any], *args: Any) -> tuple[bool, Any]:
            try:
                return True, fn(*args)
            except Exception as exc:  # noqa: BLE001 - re-raised in handle_job
                return False, exc

        futures = {}
        for proj, job in chunk:
            jid = int(job["id"])
            futures[jid] = {
                "details": pool.submit(call, self.client.job_details, proj.path, jid),
                "tail": pool.submit(call, self.client.trace_tail, proj.id, jid, self.settings.trace_tail_bytes)}
        return {jid: {k: f.result() for k, f in fs.items()} for jid, fs in futures.items()}

    def _handle_one(self, proj: _Project, job: Mapping[str, Any], report: CycleReport,
                    reads: Mapping[str, Any] | None = None) -> None:
        try:
            self._await_lineage(int(job["id"]))
            out = self.handle_job(proj, job, reads)
        except GitLabApiError as exc:
            report.errors.append(f"job {job.get('id')}: {exc}")
            log.error("job_handling_failed", job_url=job.get("web_url"), job_id=job.get("id"), error=str(exc),
                      note="not decided; tried again next cycle")
            return
        except LeadershipLost:
            raise
        except Exception as exc:  # noqa: BLE001 - one odd job must not stop the others
            report.errors.append(f"job {job.get('id')}: {type(exc).__name__}: {exc}")
            log.exception("job_handling_crashed", job_url=job.get("web_url"), job_id=job.get("id"),
                          note="not decided; tried again next cycle")
            return
        if out is not None:
            report.decided.append(out)

    def _watermark(self, proj: _Project, top_id: int, now: float, since: float) -> None:
        # The watermark records how far this project was looked at (for `state check` and
        # restarts); written when it moves, and at least every 5 minutes, not every cycle.
        wm = self.store.get_watermark(f"project:{proj.id}") or {}
        top = max(top_id, int(wm.get("max_job_id", 0)))
        if top != wm.get("max_job_id") or now - float(wm.get("polled_at", 0)) >= 300:
            self.store.set_watermark(f"project:{proj.id}", {
                "max_job_id": top, "polled_at": now, "lookback_from": since, "path": proj.path})

    # ------------------------------------------------------------------ one job

    def handle_job(self, proj: _Project, job: Mapping[str, Any],
                   reads: Mapping[str, Any] | None = None) -> JobOutcome | None:
        """Classify, decide and act on one failed job (exactly once).

        ``reads``: the job's GraphQL details and trace tail read ahead (:meth:`_prefetch`).
        """
        jid = int(job["id"])

        def read(name: str, fn: Callable[[], Any]) -> Any:
            if reads is None or name not in reads:
                return fn()
            ok, value = reads[name]
            if not ok:
                raise value
            return value

        try:
            details = read("details", lambda: self.client.job_details(proj.path, jid))
        except NotFound:
            log.warning("graphql_job_not_found", job_url=job.get("web_url"), job_id=jid,
                        note="deciding without exitCode/retried (does the token see the project in GraphQL?)")
            details = {}
        except GraphQLSchemaError as exc:
            # Not transient: the same query fails on every cycle.  Decide from REST alone
            # (no exit code) rather than leaving the job undecided forever.
            log.error("graphql_schema_mismatch", job_url=job.get("web_url"), job_id=jid, error=str(exc),
                      note="deciding without exitCode/retried/manualJob; run `retry-bot doctor` to see which "
                           "GitLab versions the bot supports")
            details = {}
        pending = self._copy_pending(proj.id, job, manual=bool(details.get("manualJob"))) \
            if self.store.origin_of(jid) == jid else None
        if pending is not None:
            # Most likely the copy an open intent created (its answer lost, its observation not
            # done yet): it joins that lineage when the intent completes; judging it now would
            # start a second lineage with a fresh budget.  Not decided: looked at again next cycle.
            log.info("job_deferred", job_url=job.get("web_url"), job_id=jid, reason=pending)
            return None
        tail = read("tail", lambda: self.client.trace_tail(proj.id, jid, self.settings.trace_tail_bytes))
        facts = facts_from_job_json(job, details, project_id=proj.id, project_path=proj.path)
        # bound to this job: a replayed marker of another job is rejected, never trusted (docs/usage-record.md)
        record, rejected = extract_verified_record(tail, self.keys, job_id=jid, project_id=facts.project_id or None)
        if rejected:
            log.warning("usage_record_rejected", job_url=facts.web_url, reason=rejected)
        if record is not None:
            try:
                self.store.add_usage_record(record.to_dict(), "trace", trusted=True)
            except Exception as exc:  # noqa: BLE001 - history is a bonus, never block a decision
                log.warning("usage_record_not_stored", job_url=facts.web_url, error=str(exc))
        if record is not None and record.job.variables:
            facts = replace(facts, variables={**record.job.variables, **facts.variables})
        classification = classify(facts, tail, self.taxonomy, record)
        must_decide = self.store.mark_job_seen(jid, proj.id, facts.to_dict(), classification.to_dict())
        if not must_decide:
            return None
        if self.metrics is not None:
            self.metrics.jobs_classified.labels(classification.family.value, classification.category).inc()
        self._storm_failure(classification.family.value, classification.category, facts, jid)
        if record is not None and self.store.origin_of(jid) != jid:
            self.store.update_lineage_member(jid, memory_peak_bytes=record.usage.memory_peak_bytes,
                                             status=facts.status)
        policy = self.policy()
        family = classification.family.value
        lineage = self._lineage(jid, facts, classification)
        defn: JobDefinition | None = None
        context = JobContext(retried=bool(details.get("retried")), manual_job=bool(details.get("manualJob")),
                             job_retry_supported=bool(details.get("manualJob")) and self.client.features().job_retry)
        if (family == "timeout" or record is None and family == "oom") and lineage[0].job_id == jid:
            # No usage record (e.g. the Kubernetes executor): the limits in force are the
            # job's YAML variables, which the definition (needed to re-create it anyway) has;
            # for a timeout, its ``timeout:`` is the time limit in force.
            try:
                defn = self._definition(proj, job, facts)
                yaml_vars = {k: str(v) for k, v in defn.variables.items() if not isinstance(v, Mapping)}
                facts = replace(facts, variables={**yaml_vars, **facts.variables})
                lineage = _with_origin_timeout(lineage, parse_gitlab_duration(defn.body.get("timeout")))
            except (JobDefinitionError, ValueError, NotFound) as exc:
                log.info("job_definition_unavailable", job_url=facts.web_url, reason=str(exc))
                # decided by the definition gate, if the decision comes to need the definition
                context = replace(context, definition_error=str(exc), read=context.read | {Read.DEFINITION})
        predicted = None
        if self.predictor is not None:
            try:
                predicted = self.predictor(facts, record)
            except Exception as exc:  # noqa: BLE001
                log.warning("prediction_failed", job_url=facts.web_url, error=str(exc))
        now = datetime.fromtimestamp(self.clock(), tz=timezone.utc)
        usage = self._class_usage()
        inputs = dict(record=record, predicted_memory_bytes=predicted, now=now)
        # The reads the decision depends on, each made only when it does (decide() is the one decider).
        while (need := next_read(facts, classification, lineage, policy, usage, context=context, **inputs)):
            context, defn = self._read_context(need, proj, job, facts, lineage, context, defn)
        decision = decide(facts, classification, lineage, policy, usage, context=context, **inputs)
        dry = self.settings.dry_run or decision.dry_run
        acted = ""
        req = None
        if decision.action != Action.NONE:
            req = self._request(proj, facts, classification, decision, lineage, context, defn)
        intent = None
        gate = None
        if req is not None and not dry:
            gate = self.storm.gate(policy.storm, family, classification.category, self.clock())
            if gate.verdict == "hold":
                self._hold(req, gate.detail)  # kept before the decision: a crash in between re-decides
            else:
                if gate.verdict == "probe":
                    self._save_storm()
                    log.info("storm_probe", job_url=facts.web_url, job_id=jid, category=gate.category,
                             detail=gate.detail)
                intent = self.actions.start(req)  # committed before the decision: a crash in between re-decides
                self.forget_open_intents()
        dec = decision.to_dict()
        dec.update(job_url=facts.web_url, dry_run=dry, classification_rule=classification.rule,
                   evidence=list(classification.evidence)[:5])
        if gate is not None and gate.verdict != "act":
            dec.update(storm=gate.verdict, storm_detail=gate.detail)
        if dry:
            # Provisional: kept for `retry-bot history`, but the job stays undecided in the
            # store, so a later live run decides it (within the policy's max_job_age).
            self._record_dry_run(jid, dec)
            self._dry_decided.add(jid)
        else:
            self.store.record_decision(jid, dec)
        if self.metrics is not None:
            self.metrics.decisions.labels(decision.action.value).inc()
        log.info("job_decided", job_url=facts.web_url, job_id=jid, project=proj.path, job_name=facts.name,
                 family=classification.family.value, category=classification.category,
                 classification_rule=classification.rule, decision=decision.action.value,
                 reason=decision.reason, rule=decision.rule, dry_run=dry,
                 variables=decision.variables or None, runner_class=decision.runner_class)
        if intent is not None:
            outcome = self._drive_new(intent, req)
            acted = outcome.status
            self._schedule(intent, req, outcome)
        elif gate is not None and gate.verdict == "hold":
            acted = "held"
        elif req is not None:
            acted = "dry_run"
            log.info("dry_run_no_write", job_url=facts.web_url, would=req.kind, variables=dict(req.variables))
        return JobOutcome(jid, proj.path, facts.web_url, classification.family.value, classification.category,
                          decision.action.value, decision.reason, acted)

    # ------------------------------------------------------------------ the due-time scheduler

    def _schedule(self, intent: ActionIntent, req: ActionRequest, outcome: Outcome | None) -> None:
        """Keep an intent begun here that waits for its due time (a backoff) in the scheduler."""
        if req.not_before <= self.clock() or (outcome is not None and outcome.status != "waiting"):
            return
        if intent.idempotency_key not in self._scheduled:
            heapq.heappush(self._due, (req.not_before, intent.idempotency_key))
        self._scheduled[intent.idempotency_key] = intent
        self._publish_scheduled()

    def _publish_scheduled(self) -> None:
        if self.metrics is not None and hasattr(self.metrics, "scheduled_actions"):
            self.metrics.scheduled_actions.set(len(self._scheduled))

    def next_due(self) -> float | None:
        """When the next scheduled action is due (clock time), or ``None``."""
        return self._due[0][0] if self._due else None

    def run_due(self, *, stop: Callable[[], bool] = lambda: False) -> list[Outcome]:
        """Send the scheduled actions that are due now, whatever the poll cycle is doing.

        An intent this process began and has not touched since is driven as begun
        (``created``): no read of GitLab first, since no write of it can have been made.
        When the state store shows it changed meanwhile, or the leadership term moved
        (another replica may have driven it), it is driven from the store, which reads
        GitLab before any write (the intent protocol, docs/state.md).
        """
        out: list[Outcome] = []
        now = self.clock()
        while self._due and self._due[0][0] <= now and not stop():
            _, key = heapq.heappop(self._due)
            began = self._scheduled.pop(key, None)
            if began is None:
                continue
            stored = self.store.get_action(key)
            if stored is None or stored.status != "begun":
                continue
            same = (stored.attempts == began.attempts and stored.updated_at == began.updated_at
                    and stored.term == began.term and self.store.leadership_term == began.term)
            out.append(self.actions.drive(began if same else stored))
        self._publish_scheduled()
        return out

    def _resume_open(self) -> list[Outcome]:
        """Drive every open overall intent one step, except those the scheduler holds (not due yet)."""
        out = []
        for intent in self.store.open_intents():
            if intent.idempotency_key.count(":") != 1 or intent.idempotency_key in self._scheduled:
                continue  # a sub-intent (driven by its overall intent), or waiting in the scheduler
            out.append(self.actions.drive(intent))
        return out

    # ------------------------------------------------------------------ the storm brake

    def _load_storm(self) -> None:
        """The brake's state from the state store (another leader may have changed it)."""
        self.storm = StormState.from_dict({"categories": self.store.storm_categories()})
        self._publish_storm()

    def _save_storm(self) -> None:
        self.store.save_storm_categories(self.storm.to_dict()["categories"])
        self._publish_storm()

    def _publish_storm(self) -> None:
        if self.metrics is None or not hasattr(self.metrics, "storm_braked"):
            return
        held = self.store.held_counts()
        for cat in sorted(set(self.storm.categories) | set(held)):
            st = self.storm.categories.get(cat)
            self.metrics.storm_braked.labels(cat).set(1 if st is not None and st.braked else 0)
            self.metrics.storm_held.labels(cat).set(held.get(cat, 0))

    def _storm_failure(self, family: str, category: str, facts: JobFacts, job_id: int) -> None:
        rule = getattr(self.policy(), "storm", None)
        if not self.storm.watches(rule, family):
            return
        # By job: the job is judged again if anything stops it before its decision is recorded
        # (a crash, a failed read, a dry run's restart), and must not be counted twice.
        before = self.storm.to_dict()
        tripped = self.storm.note_failure(rule, family, category, self.clock(), job_id)
        if self.storm.to_dict() != before:
            self._save_storm()
        if tripped:
            st = self.storm.categories[category]
            if self.metrics is not None:
                self.metrics.storm_trips.labels(category).inc()
            log.warning("storm_brake_tripped", category=category, family=family, failures=len(st.failures),
                        window_seconds=rule.window, job_url=facts.web_url,
                        note=f"re-runs of {category} are held ({rule.probes} probes every "
                             f"{rule.probe_interval:.0f}s) until {rule.release_successes} re-run jobs succeed")

    def _hold(self, req: ActionRequest, detail: str) -> None:
        """Keep a held request in the state store (no intent, no budget spent)."""
        self.store.hold(req.key, req.category or "", req.job_id, req.to_payload())
        log.info("storm_job_held", job_url=req.web_url, job_id=req.job_id, category=req.category, action=req.kind,
                 detail=detail, held=self.store.held_counts().get(req.category or "", 0))
        self._publish_storm()

    def _release_unbraked(self, report: CycleReport) -> None:
        """Send the held requests of every category whose brake is off (released, or a crash mid-release)."""
        for cat in self.storm.release_stale(getattr(self.policy(), "storm", None)):
            log.warning("storm_brake_released", category=cat, reason="the policy no longer brakes this category")
            self._save_storm()
        braked = set(self.storm.braked())
        for cat in [c for c, n in self.store.held_counts().items() if n and c not in braked]:
            self._release(cat, report)

    def _probe_held(self, report: CycleReport) -> None:
        """While braked, a probe comes from the held requests when no new failure brought one."""
        rule = getattr(self.policy(), "storm", None)
        changed = False
        for cat in self.storm.braked():
            st = self.storm.categories[cat]
            queue = self.store.held(cat)  # oldest job first
            while queue:
                gate = self.storm.gate(rule, st.family, cat, self.clock())
                if gate.verdict != "probe":
                    break
                held = queue.pop(0)
                req = ActionRequest.from_payload(held.payload)
                intent = self.actions.start(req)  # idempotent by key
                self.forget_open_intents()
                self.store.release_held([held.idempotency_key])
                changed = True
                self._save_storm()
                log.info("storm_probe", job_url=req.web_url, job_id=req.job_id, category=cat, detail=gate.detail,
                         source="held")
                report.actions.append(self.actions.drive(intent))
        if changed:
            self._publish_storm()

    def _release(self, category: str, report: CycleReport | None) -> None:
        held = self.store.held(category)  # oldest job first
        rule = getattr(self.policy(), "storm", None)
        now = self.clock()
        times = release_times(len(held), rule.release_per_minute if rule is not None else 0, now)
        for h, at in zip(held, times):
            payload = h.payload
            req = ActionRequest.from_payload({**payload, "not_before": max(at, float(payload.get("not_before", 0)))})
            intent = self.actions.start(req)  # idempotent by key: a crash mid-release starts nothing twice
            self.forget_open_intents()
            if req.not_before <= now:
                out = self.actions.drive(intent)
                if report is not None:
                    report.actions.append(out)
            else:
                self._schedule(intent, req, None)
        self.store.release_held([h.idempotency_key for h in held])
        if self.metrics is not None and hasattr(self.metrics, "storm_released"):
            self.metrics.storm_released.labels(category).inc(len(held))
        log.warning("storm_held_released", category=category, released=len(held),
                    per_minute=rule.release_per_minute if rule is not None else 0)
        self._publish_storm()

    # ------------------------------------------------------------------ helpers

    def _copy_pending(self, project_id: int, job: Mapping[str, Any], *, manual: bool) -> str | None:
        """Why ``job`` may be the copy an open intent created, or ``None``.

        * a manual job, and an open resize intent re-creates a job of this name in this
          project (the play's answer may still be open);
        * an open retry (REST ``retry`` or GraphQL ``jobRetry``) of an earlier job of this
          name in this pipeline: GitLab puts the retried copy in the job's own pipeline,
          under its name, with a higher id (``Ci::RetryJobService`` clones the build), so a
          copy that failed before the bot learnt its id looks exactly like this.
        """
        jid = int(job["id"])
        pipeline_id = (job.get("pipeline") or {}).get("id")
        if self._open_payloads is None:
            self._open_payloads = [intent.payload or {} for intent in self.store.open_intents()]
        for payload in self._open_payloads:
            if payload.get("project_id") != project_id or payload.get("job_name") != job.get("name"):
                continue
            kind = payload.get("kind")
            if manual and kind == RequestKind.RESIZE and payload.get("job_id") != jid:
                return "a manual job of the same name has a re-creation still in flight"
            if kind in (RequestKind.RETRY, RequestKind.JOB_RETRY) and pipeline_id is not None \
                    and payload.get("pipeline_id") == pipeline_id and int(payload.get("job_id") or 0) < jid:
                return (f"a retry of job {payload.get('job_id')} (same name, same pipeline) is still in flight: "
                        "this job may be its copy")
        return None

    def forget_open_intents(self) -> None:
        """Read the open intents afresh the next time a failed job is checked against them."""
        self._open_payloads = None

    def _record_dry_run(self, jid: int, decision: Mapping[str, Any]) -> None:
        """Keep a dry-run decision where ``retry-bot history`` finds it (the store's dry-run decisions).

        Not :meth:`Store.record_decision`, which would decide the job for good.
        """
        self.store.record_dry_run(jid, decision, keep=DRY_RUN_KEEP)

    def _lineage(self, jid: int, facts: JobFacts, cls: Classification) -> list[LineageAttempt]:
        """The job's lineage for :func:`decide`, as the store keeps it (one read).

        The failed job's own entry takes this classification and ``finished_at`` (the
        store keeps the first ones it saw).  Its memory limit and peak in force come to
        decide() from the usage record itself.
        """
        out = list(self.store.lineage_for(jid).attempts)
        return [replace(a, family=cls.family.value, category=cls.category,
                        finished_at=facts.finished_at or a.finished_at) if a.job_id == jid else a for a in out]

    def _class_usage(self) -> ClassUsage:
        """Jobs the bot started that still run, per runner class (for the policy's caps)."""
        by_user: dict[tuple[str, str], int] = {}
        by_project: dict[tuple[str, str], int] = {}
        usage = dict(self.store.followed_class_usage())
        batch = self._batch
        # Writes in flight count already (their jobs are followed once created): a cap is
        # never exceeded because decisions run ahead of their writes.  One that finishes
        # meanwhile may be counted twice for a moment: stricter, never looser.
        for key, n in (batch.in_flight_classes() if batch is not None else {}).items():
            usage[key] = usage.get(key, 0) + n
        for (rc, user, project), n in usage.items():
            by_user[(rc, user or "")] = by_user.get((rc, user or ""), 0) + n
            by_project[(rc, project or "")] = by_project.get((rc, project or ""), 0) + n
        return ClassUsage(by_user=by_user, by_project=by_project)

    def _read_context(self, need: NextRead, proj: _Project, job: Mapping[str, Any], facts: JobFacts,
                      lineage: Sequence[LineageAttempt], context: JobContext, defn: JobDefinition | None
                      ) -> tuple[JobContext, JobDefinition | None]:
        """Make the read :func:`next_read` asked for; the context with its answer (and the definition)."""
        read = context.read | {need.read}
        if need.read == Read.SUPERSEDED:
            return replace(context, superseded_by=self._superseded(proj, facts), read=read), defn
        if need.read == Read.BRANCH_HEAD:
            try:
                head = self.client.branch_head(proj.id, facts.ref)
            except GitLabApiError as exc:
                log.warning("branch_head_unknown", job_url=facts.web_url, ref=facts.ref, error=str(exc),
                            note="re-creating anyway; the copy carries RETRY_BOT_ORIGIN_SHA")
                head = None
            return replace(context, branch_head=head or None, read=read), defn
        # Read.DEFINITION: the definition, and the copy the decision would create from it.
        try:
            defn = defn or self._definition(proj, job, facts)
            build_child_config(defn, self._child_spec(facts, need.would, lineage))
        except (JobDefinitionError, ValueError, NotFound) as exc:
            return replace(context, definition_error=str(exc), read=read), defn
        return replace(context, read=read), defn

    def _superseded(self, proj: _Project, facts: JobFacts) -> int | None:
        """The newest pipeline on the same ref, at another commit, that is not a child pipeline."""
        if not facts.ref or not facts.pipeline_id:
            return None
        key = (proj.id, facts.ref)
        pipes = self._ref_pipelines.get(key)
        if pipes is None:
            try:
                pipes = self.client.latest_pipelines(proj.id, facts.ref, limit=20)
            except GitLabApiError as exc:
                log.warning("superseded_check_failed", job_url=facts.web_url, error=str(exc))
                return None
            # read once per ref and cycle: the jobs of one big pipeline share it
            self._ref_pipelines[key] = pipes
        newer = [int(p["id"]) for p in pipes if int(p["id"]) > facts.pipeline_id and p.get("sha") != facts.sha
                 and p.get("source") != "parent_pipeline"]
        return max(newer) if newer else None

    @staticmethod
    def _child_spec(facts: JobFacts, decision: Decision, lineage: Sequence[LineageAttempt]) -> ChildPipelineSpec:
        return ChildPipelineSpec(origin_job_id=lineage[0].job_id, origin_pipeline_id=facts.pipeline_id,
                                 failed_job_id=facts.job_id, attempt=decision.attempt,
                                 runner_class=decision.runner_class, tags=tuple(decision.tags),
                                 timeout_seconds=decision.timeout_seconds, origin_sha=facts.sha)

    def _request(self, proj: _Project, facts: JobFacts, cls: Classification, decision: Decision,
                 lineage: Sequence[LineageAttempt], context: JobContext,
                 defn: JobDefinition | None) -> ActionRequest:
        """How the decision is carried out on GitLab (an acting decision; its definition was read if needed)."""
        base = dict(project_id=proj.id, project_path=proj.path, job_id=facts.job_id, job_name=facts.name,
                    pipeline_id=facts.pipeline_id, ref=facts.ref, origin_job_id=lineage[0].job_id,
                    attempt=decision.attempt, web_url=facts.web_url, family=cls.family.value,
                    category=cls.category, runner_class=decision.runner_class,
                    memory_limit_bytes=decision.memory_limit_bytes, user=facts.user,
                    not_before=self.clock() + float(decision.delay_seconds or 0.0))
        if decision.action == Action.RETRY:
            return ActionRequest(kind=RequestKind.RETRY, **base)
        variables = {str(k): str(v) for k, v in decision.variables.items()}
        if resize_in_place(decision, facts, lineage, context):
            return ActionRequest(kind=RequestKind.JOB_RETRY, variables=variables, **base)
        assert defn is not None, "decide() re-creates a job only once its definition was read"
        spec = self._child_spec(facts, decision, lineage)
        text = build_child_config(defn, spec)
        return ActionRequest(kind=RequestKind.RESIZE, variables=variables,
                             pipeline_variables=pipeline_variables(text, spec), **base)

    def _definition(self, proj: _Project, job: Mapping[str, Any], facts: JobFacts) -> JobDefinition:
        # The original pipeline's predefined variables the rules most often test, so the copy
        # keeps the rules:variables / workflow:rules:variables that applied to the job.
        ref = facts.ref or ""
        scope = {"CI_PIPELINE_SOURCE": facts.pipeline_source or "push", "CI_COMMIT_REF_NAME": ref,
                 "CI_COMMIT_SHA": facts.sha or "", "CI_JOB_NAME": facts.name, "CI_PROJECT_PATH": proj.path}
        if facts.protected is not None:
            scope["CI_COMMIT_REF_PROTECTED"] = "true" if facts.protected else "false"
        if job.get("tag"):
            scope["CI_COMMIT_TAG"] = ref
        elif ref:
            scope["CI_COMMIT_BRANCH"] = ref
        return fetch_job_definition(self.client, proj.id, job, pipeline_source=facts.pipeline_source,
                                    generated=self.settings.generated,
                                    parent_pipeline_id=self._parent_pipeline(proj, facts), rule_scope=scope)

    def _parent_pipeline(self, proj: _Project, facts: JobFacts) -> int | None:
        """The parent of a child pipeline: the newest pipeline on the ref whose bridge triggered it."""
        if facts.pipeline_source != "parent_pipeline" or not self.settings.generated:
            return None
        for p in self.client.latest_pipelines(proj.id, facts.ref, limit=10):
            if int(p["id"]) >= facts.pipeline_id or p.get("source") == "parent_pipeline":
                continue
            for b in self.client.pipeline_bridges(proj.id, int(p["id"])):
                if (b.get("downstream_pipeline") or {}).get("id") == facts.pipeline_id:
                    return int(p["id"])
        return None

    # ------------------------------------------------------------------ follow the jobs we created

    def _watch_new_job(self, req: ActionRequest, new_job_id: int) -> None:
        """Follow a job the bot just created (a row of the state store's ``followed_jobs``)."""
        # No cap on the count (issue 15: a cap of 500 silently dropped jobs of a burst);
        # bounded by age in follow_watched.
        new = self.store.follow(FollowedJob(job_id=new_job_id, project_id=req.project_id,
                                            project_path=req.project_path, origin_job_id=req.origin_job_id,
                                            kind=req.kind, family=req.family, category=req.category,
                                            runner_class=req.runner_class, user=req.user, since=self.clock()))
        if new and self.metrics is not None and hasattr(self.metrics, "followed_jobs"):
            self.metrics.followed_jobs.inc()  # counted afresh from the store once per cycle

    def _publish_followed(self) -> None:
        if self.metrics is not None and hasattr(self.metrics, "followed_jobs"):
            self.metrics.followed_jobs.set(self.store.followed_count())

    def follow_watched(self, report: CycleReport) -> None:
        """Check the jobs the bot created; record their end (and OOM recoveries).

        A job still not finished ``follow_max_age`` after the bot created it is no longer
        followed (logged and counted: ``retry_bot_followed_jobs_expired_total``).  Every
        other followed job is read, in pages of the state store, however many there are.
        """
        now = self.clock()
        for w in self.store.expire_followed(self.settings.follow_max_age, now=now):
            log.warning("followed_job_expired", job_id=w.job_id, origin_job_id=w.origin_job_id,
                        project=w.project_path, age_seconds=round(now - w.since),
                        note="not finished within [poll] follow_max_age: no longer followed")
            if self.metrics is not None and hasattr(self.metrics, "followed_expired"):
                self.metrics.followed_expired.inc()
        # The claims on the bot's own pipelines (a crash guard) are kept as long as a followed job.
        # The store stamped them with its own clock, so its clock judges their age.
        forgotten = self.store.forget_pipelines(self.settings.follow_max_age)
        if forgotten:
            log.info("pipeline_claims_forgotten", count=forgotten,
                     note="claims of settled resize intents older than [poll] follow_max_age")
        after: tuple[float, int] | None = None
        while True:
            page = self.store.followed(limit=_FOLLOW_PAGE, after=after)
            if not page:
                break
            after = (page[-1].since, page[-1].job_id)
            width = max(1, min(self.settings.read_concurrency, len(page)))

            def get(w: FollowedJob) -> tuple[bool, Any]:
                try:
                    return True, self.client.get_job(w.project_id, w.job_id)
                except Exception as exc:  # noqa: BLE001 - handled below, in order
                    return False, exc

            if width > 1:
                with ThreadPoolExecutor(max_workers=width, thread_name_prefix="gitlab-read") as pool:
                    results = list(pool.map(get, page))
            else:
                results = [get(w) for w in page]
            for w, (ok, value) in zip(page, results):
                if not ok:
                    if isinstance(value, NotFound):
                        self.store.unfollow(w.job_id)  # deleted in GitLab: nothing left to follow
                        continue
                    if isinstance(value, GitLabApiError):
                        report.errors.append(f"watched job {w.job_id}: {value}")
                        continue
                    raise value
                self.followed_job_changed(w, value, report)
            if len(page) < _FOLLOW_PAGE:
                break
        self._publish_followed()

    def followed_job_changed(self, w: FollowedJob, job: Mapping[str, Any], report: CycleReport | None) -> bool:
        """A followed job as GitLab shows it now (a poll or a webhook event): record its end, once.

        ``job`` is GitLab's answer for the job (never an event's word).  When it has
        ended, :meth:`Store.unfollow` removes it and records its status on the lineage;
        only the caller that removed it counts the OOM recovery and tells the storm
        brake, so a webhook event and a poll that both see the end count it once.
        Returns ``True`` when this call recorded the end.
        """
        status = job.get("status")
        if status not in _FINAL:
            return False
        # The storm brake hears of it before the job is unfollowed: unfollowing first lost the
        # result for good when the process died in between (nothing follows the job again).
        # Told twice (a crash after it, or a poll and a webhook event at once), it counts once.
        now = self.clock()
        cat = w.category
        st = self.storm.categories.get(cat) if cat else None
        if cat and st is not None and st.braked:
            rule = getattr(self.policy(), "storm", None)
            released = self.storm.note_rerun_result(rule, str(w.family or ""), cat, status == "success", now,
                                                    w.job_id)
            self._save_storm()
            if released:
                log.warning("storm_brake_released", category=cat, job_url=job.get("web_url"),
                            reason=f"{rule.release_successes if rule else 1} re-run job(s) of {cat} succeeded")
                self._release(cat, report)
        ended = self.store.unfollow(w.job_id, status=str(status))
        if ended is None:
            return False  # another path (a poll, an event) recorded it already
        if status == "success" and ended.family == "oom" and ended.kind in ("resize", "job_retry"):
            if self.metrics is not None:
                self.metrics.oom_recoveries.inc()
            log.info("oom_recovered", job_url=job.get("web_url"), job_id=ended.job_id,
                     origin_job_id=ended.origin_job_id, runner_class=ended.runner_class)
        else:
            log.info("recreated_job_finished", job_url=job.get("web_url"), job_id=ended.job_id, status=status,
                     origin_job_id=ended.origin_job_id)
        if self.metrics is not None and hasattr(self.metrics, "followed_jobs"):
            self.metrics.followed_jobs.dec()  # counted afresh from the store once per cycle
        return True


class _WriteBatch:
    """The writes handed to the write pool while one batch of jobs is decided (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._futures: list[tuple[ActionRequest, Future[Outcome]]] = []
        self._in_flight: dict[str, ActionRequest] = {}

    def add(self, req: ActionRequest, future: "Future[Outcome]") -> None:
        with self._lock:
            self._futures.append((req, future))
            self._in_flight[req.key] = req

        def done(_f: Any) -> None:
            with self._lock:
                self._in_flight.pop(req.key, None)

        future.add_done_callback(done)

    def busy(self) -> bool:
        with self._lock:
            return bool(self._in_flight)

    def wait_lineage(self, origin: int) -> None:
        with self._lock:
            pending = [f for r, f in self._futures if r.origin_job_id == origin and not f.done()]
        for f in pending:
            try:
                f.result()
            except BaseException:  # noqa: BLE001 - reported by finish()
                pass

    def in_flight_classes(self) -> dict[tuple[str, str | None, str | None], int]:
        out: dict[tuple[str, str | None, str | None], int] = {}
        with self._lock:
            for r in self._in_flight.values():
                if r.runner_class:
                    k = (r.runner_class, r.user, r.project_path)
                    out[k] = out.get(k, 0) + 1
        return out

    def finish(self, report: CycleReport | None) -> BaseException | None:
        """Wait for every write; put their outcomes in ``report``; the ``LeadershipLost`` to raise, if any."""
        lost: BaseException | None = None
        results: dict[int, str] = {}
        for req, f in self._futures:
            try:
                out = f.result()
            except LeadershipLost as exc:
                lost = lost or exc
                results[req.job_id] = "waiting"
                continue
            except Exception as exc:  # noqa: BLE001 - one write's trouble is the cycle's error, not a crash
                log.error("action_write_crashed", key=req.key, job_url=req.web_url, error=f"{type(exc).__name__}: {exc}",
                          note="the intent stays open; it is driven again next cycle")
                if report is not None:
                    report.errors.append(f"action {req.key}: {type(exc).__name__}: {exc}")
                results[req.job_id] = "waiting"
                continue
            results[req.job_id] = out.status
        if report is not None and results:
            report.decided[:] = [replace(o, acted=results[o.job_id]) if o.job_id in results and o.acted == "sending"
                                 else o for o in report.decided]
        return lost


def _with_origin_timeout(lineage: Sequence[LineageAttempt], timeout: float | None) -> list[LineageAttempt]:
    """The lineage with the origin's ``timeout:`` in force wherever the bot set none (a timeout resize sets one)."""
    if timeout is None:
        return list(lineage)
    return [a if a.timeout_seconds is not None else replace(a, timeout_seconds=timeout) for a in lineage]


def share_budget(demands: Sequence[int], budget: int, *, start: int = 0) -> list[int]:
    """Max-min fair shares of ``budget`` jobs among projects wanting ``demands`` jobs.

    Every project with work gets an equal share; what a small project does not need
    goes to the others, so one 2,000-job pipeline takes whatever the rest leave (it is
    not capped per project) and a small project is never starved by it.  When the
    budget is smaller than the number of projects with work, the single jobs go to the
    projects from index ``start`` on (the poller rotates it every cycle).

    >>> share_budget([2000, 3, 0, 10], 100)
    [87, 3, 0, 10]
    """
    shares = [0] * len(demands)
    left = max(0, int(budget))
    n = len(demands)
    active = [(start + k) % n for k in range(n) if demands[(start + k) % n] > 0] if n else []
    while left > 0 and active:
        each = max(1, left // len(active))
        nxt = []
        for i in active:
            if left <= 0:
                break
            give = min(each, demands[i] - shares[i], left)
            shares[i] += give
            left -= give
            if shares[i] < demands[i]:
                nxt.append(i)
        active = nxt
    return shares
