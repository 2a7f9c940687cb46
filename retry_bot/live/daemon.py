"""The long-running bot: wiring, the poll loop, signals, leadership, HTTP.

:class:`Bot` assembles the pieces from a :class:`~retry_bot.live.config.BotConfig`
(GitLab client, state store, policy, taxonomy, actions, poller, metrics);
:func:`serve` runs it until SIGTERM/SIGINT.

Signals:

* **SIGTERM / SIGINT** — graceful stop: the job being handled (and the
  GitLab write in flight) is finished, no new job is started, the leader
  lease is released, and the process exits 0.
* **SIGHUP** — reload the policy file.  A new policy that does not validate
  is rejected with every problem logged; the last good one stays in force.

With ``[webhook] enabled``, GitLab's job events (:mod:`retry_bot.live.webhook`) are
handled as they arrive (:meth:`Bot.handle_events`), open intents are driven
every ``interval_seconds``, and the full poll -- the reconciliation safety net
that finds whatever an event missed -- runs every ``reconcile_interval_seconds``.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable

from retry_bot.live.actions import ActionRunner, ActionSettings
from retry_bot.live.config import BotConfig
from retry_bot.gitlab.client import GitLabApiError, GitLabClient, NotFound
from retry_bot.gitlab.jobdef import GeneratedPipelineSource
from retry_bot.gitlab.pacing import RequestPacer
from retry_bot.live.metrics import BotMetrics
from retry_bot.live.poller import CycleReport, Poller, PollerSettings
from retry_bot.problems import ConfigError
from retry_bot.state import LeadershipLost
from runner_wrapper.logconfig import get_logger, redact_url

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from retry_bot.model import JobFacts
    from retry_bot.policy import Policy
    from retry_bot.state import Store
    from runner_wrapper.record import UsageRecord

__all__ = ["Bot", "HistoryPredictor", "serve"]

log = get_logger("retry_bot.daemon")


class Bot:
    """Everything one bot process needs, built from its configuration.

    Args:
        config: the parsed ``bot.toml``.
        dry_run: overrides ``config.dry_run`` when not ``None``.
        registry: Prometheus registry (a fresh one by default).
        action_settings: settle/child timeouts (tests shorten them).
        clock: epoch seconds (injectable).
    """

    def __init__(self, config: BotConfig, *, dry_run: bool | None = None, registry: CollectorRegistry | None = None,
                 action_settings: ActionSettings | None = None, clock: Callable[[], float] = time.time,
                 store: Store | None = None) -> None:
        from retry_bot.classify import load_taxonomy
        from retry_bot.state import open_store

        self.config = config
        self.clock = clock
        self.dry_run = config.dry_run if dry_run is None else bool(dry_run)
        self.metrics = BotMetrics(registry)
        if not config.leader_enabled:
            self.metrics.is_leader.set(1)  # a single instance is the only actor
        self.policy_path = config.policy_path
        self._policy = self._load_policy()
        self.taxonomy = load_taxonomy(list(config.taxonomy_paths))
        g = config.gitlab
        self.client = GitLabClient(g.url, g.token, retry=g.retry_settings(),
            observer=self.metrics.observe_api_call, clock=clock,
            pacer=RequestPacer(g.max_requests_per_minute or None, wall=clock,
                               on_wait=self.metrics.api_paced_seconds.inc))
        self.store = store if store is not None else open_store(config.state_url, clock=clock)
        settle = max(2 * g.request_timeout_seconds + 1.0, 3.0)
        self.actions = ActionRunner(self.client, self.store, metrics=self.metrics, clock=clock,
                                    settings=replace(action_settings or ActionSettings(settle_seconds=settle),
                                                     write_concurrency=config.poll.write_concurrency))
        p = config.poll
        self.poller = Poller(
            self.client, self.store,
            settings=PollerSettings(projects=p.projects, groups=p.groups, lookback_seconds=p.lookback_seconds,
                                    per_page=p.per_page, max_jobs_per_cycle=p.max_jobs_per_cycle,
                                    group_refresh_cycles=p.group_refresh_cycles,
                                    follow_max_age=p.follow_max_age_seconds, read_concurrency=p.read_concurrency,
                                    trace_tail_bytes=p.trace_tail_bytes, dry_run=self.dry_run,
                                    generated=tuple(GeneratedPipelineSource(s.generator_job, s.artifact_path)
                                                    for s in config.generated)),
            policy=lambda: self._policy, taxonomy=self.taxonomy, signing_keys=config.signing_keys,
            actions=self.actions, metrics=self.metrics, clock=clock,
            predictor=HistoryPredictor(self.store, policy=lambda: self._policy, clock=clock))
        self._stop = threading.Event()
        #: Poll cycles in a row that did no useful work (see :attr:`CycleReport.failed`), for ``/healthz``.
        self.failed_cycles = 0
        #: Why the bot cannot work at all (e.g. GitLab refuses its token); ``run`` exits 1 with it.
        self.fatal: str | None = None
        self._renewed = time.monotonic()
        self._http: Any = None
        self.webhook: Any = None
        if config.webhook.enabled:
            from retry_bot.live.webhook import JobEventQueue, WebhookReceiver

            w = config.webhook
            self.webhook = WebhookReceiver(w.secret, queue=JobEventQueue(w.queue_size), max_body_bytes=w.max_body_bytes,
                                           on_event=lambda outcome: self.metrics.webhook_events.labels(outcome).inc())
        log.info("bot_ready", gitlab=redact_url(g.url), token_source=g.token_source, projects=list(p.projects),
                 groups=list(p.groups), dry_run=self.dry_run, policy=self.policy_path or "<embedded default>",
                 state=getattr(self.store, "location", config.state_url), signing_keys=sorted(config.signing_keys))

    # ------------------------------------------------------------------ policy

    def _load_policy(self) -> Any:
        from retry_bot.policy import default_policy, load_policy

        return load_policy(self.policy_path) if self.policy_path else default_policy()

    @property
    def policy(self) -> Any:
        return self._policy

    def reload_policy(self) -> bool:
        """Reload the policy file; keep the last good policy when the new one is invalid."""
        try:
            new = self._load_policy()
        except ConfigError as exc:
            log.error("policy_reload_rejected", policy=self.policy_path, kept="the last good policy",
                      problems=[str(p) for p in exc.problems])
            return False
        except OSError as exc:
            log.error("policy_reload_rejected", policy=self.policy_path, kept="the last good policy", error=str(exc))
            return False
        self._policy = new
        if self._http is not None and hasattr(self._http, "configure"):
            from retry_bot.predict.sources import clamp_from_policy, settings_from_policy

            self._http.configure(settings_from_policy(new), clamp_from_policy(new))
        log.info("policy_reloaded", policy=self.policy_path or "<embedded default>")
        return True

    # ------------------------------------------------------------------ running

    def stop(self) -> None:
        """Ask the loop to stop after the job (and GitLab write) in flight."""
        self._stop.set()
        if self.webhook is not None:
            self.webhook.queue.wake()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def once(self) -> CycleReport:
        """One poll cycle (``retry-bot once``).

        Between jobs the cycle stops early on SIGTERM, and the leader lease is
        renewed (every third of its duration) so a long cycle never outlives it;
        a replica that lost the lease stops acting at once (its writes are fenced).
        """
        self._renewed = time.monotonic()

        def stop() -> bool:
            if self._stop.is_set():
                return True
            if (self.config.leader_enabled and self.store.leadership_term is not None
                    and time.monotonic() - self._renewed > self.config.leader_lease_seconds / 3):
                self._renewed = time.monotonic()
                try:
                    if not self.store.renew_leadership(self.config.leader_holder):
                        log.warning("leadership_lost_mid_cycle", holder=self.config.leader_holder)
                        self.metrics.is_leader.set(0)
                        return True
                except Exception as exc:  # noqa: BLE001
                    log.error("leadership_renew_failed", error=str(exc))
                    return True
            return False

        report = self.poller.run_cycle(stop=stop)
        self._count_cycle(report.failed)
        self.fatal = report.fatal
        return report

    def _count_cycle(self, failed: bool) -> None:
        self.failed_cycles = self.failed_cycles + 1 if failed else 0

    @property
    def healthy(self) -> bool:
        """False while stopping, or after ``unhealthy_after_failed_cycles`` failed cycles in a row."""
        return not self.stopping and self.failed_cycles < self.config.unhealthy_after_failed_cycles

    def health(self) -> tuple[bool, dict[str, Any]]:
        """``(healthy, details)`` for ``/healthz``."""
        ok = self.healthy
        status = "ok" if ok else ("stopping" if self.stopping else "unhealthy")
        details: dict[str, Any] = {"status": status, "consecutive_failed_cycles": self.failed_cycles,
                                   "unhealthy_after": self.config.unhealthy_after_failed_cycles}
        if self.fatal:
            details["problem"] = self.fatal
        return ok, details

    def _lead(self) -> bool:
        if not self.config.leader_enabled:
            # A single instance is the only actor: it always "leads" (no false alert on the gauge).
            self.metrics.is_leader.set(1)
            return True
        try:
            ok = self.store.try_acquire_leadership(self.config.leader_holder, self.config.leader_lease_seconds)
        except Exception as exc:  # noqa: BLE001 - the store may be briefly unavailable
            log.error("leadership_check_failed", error=str(exc))
            ok = False
        self.metrics.is_leader.set(1 if ok else 0)
        return ok

    def run_forever(self) -> int:
        """Poll every ``interval_seconds`` until :meth:`stop`; only the leader polls.

        Returns the exit code: 0 after :meth:`stop`, 1 when a cycle was fatal (GitLab
        refused the token for every watched project: polling on would only fail).
        """
        interval = self.config.poll.interval_seconds
        reconcile_at = 0.0  # monotonic time of the next full poll (webhooks on)
        while not self._stop.is_set():
            started = time.monotonic()
            full = self.webhook is None or started >= reconcile_at
            if self._lead():
                try:
                    if not full:
                        self.tick()
                        self._wait_for_events(interval - (time.monotonic() - started), reconcile_at)
                        continue
                    reconcile_at = started + self.config.webhook.reconcile_interval_seconds
                    report = self.once()
                    if report.fatal:
                        log.error("stopping_fatal", problem=report.fatal,
                                  note="fix the token, then restart the bot")
                        return 1
                except LeadershipLost as exc:
                    # Deposed mid-cycle (e.g. ensure_leader before a GitLab write): nothing was
                    # written; stand by, the new leader reconciles our open intents.
                    log.warning("leadership_lost", holder=self.config.leader_holder, error=str(exc))
                    self.metrics.is_leader.set(0)
                except Exception as exc:  # noqa: BLE001 - one bad cycle must not kill the daemon
                    self._count_cycle(True)
                    log.exception("poll_cycle_crashed", error=str(exc), consecutive_failed_cycles=self.failed_cycles)
            else:
                log.debug("not_leader", holder=self.config.leader_holder)
            if self.webhook is not None and not self._stop.is_set():
                self._wait_for_events(interval - (time.monotonic() - started), reconcile_at)
                continue
            self._wait_for_cycle(started + interval)
        return 0

    def _wait_for_cycle(self, next_cycle: float) -> None:
        """Sleep until ``next_cycle`` (monotonic), sending scheduled actions when they come due."""
        while not self._stop.is_set():
            now = time.monotonic()
            due = self.poller.next_due()
            wake = next_cycle if due is None else min(next_cycle, now + max(0.0, due - self.poller.clock()))
            if self._stop.wait(max(0.0, wake - now)) or time.monotonic() >= next_cycle:
                return
            try:
                self.poller.run_due(stop=lambda: self._stop.is_set())
            except LeadershipLost as exc:
                log.warning("leadership_lost", holder=self.config.leader_holder, error=str(exc))
                self.metrics.is_leader.set(0)
                return
            except Exception as exc:  # noqa: BLE001 - the next cycle drives the intent anyway
                log.exception("scheduled_actions_failed", error=str(exc))
                return

    # ------------------------------------------------------------------ webhooks

    def _wait_for_events(self, seconds: float, reconcile_at: float) -> None:
        """Until ``seconds`` pass (or the full poll is due), handling job events as they come."""
        deadline = min(time.monotonic() + max(0.0, seconds), reconcile_at)
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self.webhook.queue.wait(min(left, 0.5)) and not self._stop.is_set():
                if not self._lead():
                    # A standby keeps its queue (handled once it leads) and waits out the interval.
                    self._stop.wait(max(0.0, deadline - time.monotonic()))
                    return
                try:
                    self.handle_events()
                except LeadershipLost as exc:
                    log.warning("leadership_lost", holder=self.config.leader_holder, error=str(exc))
                    self.metrics.is_leader.set(0)
                    return

    def tick(self) -> None:
        """Between full polls (webhooks on): handle queued events, drive open intents one step."""
        self.handle_events()
        self.actions.resume_all()

    def handle_events(self, limit: int = 500) -> int:
        """Handle the queued webhook events through the poller's exactly-once paths.

        A **failed** job costs one ``GET /projects/:id/jobs/:id`` (GitLab's state, not
        the event's word: an event may be late, replayed or forged) before
        :meth:`~retry_bot.live.poller.Poller.handle_job`; a job already decided costs nothing.
        A job the bot **created and follows** (retry, play, ``jobRetry``) that ended is
        read the same way and handed to :meth:`~retry_bot.live.poller.Poller.followed_job_changed`,
        which records its end (recovered, failed again) once, whether this event or the
        poll sees it first; a failed one is then also decided like any failed job.  The end
        of a job the bot does not follow costs one state-store lookup.  Events of projects
        the bot does not watch are ignored.  A job that cannot be read now is left to the
        next poll.  Returns the failed jobs handed on to ``handle_job``.
        """
        if self.webhook is None:
            return 0
        events = self.webhook.queue.pop(limit)
        if not events:
            return 0
        watched = {p.id: p for p in (self.poller._projects or self.poller.projects())}
        handled = 0
        self.poller.forget_open_intents()
        with self.poller.write_batch():
            for project_id, job_id, status in events:
                if self._stop.is_set():
                    break
                proj = watched.get(project_id)
                if proj is None:
                    self.metrics.webhook_events.labels("unwatched").inc()
                    log.info("webhook_project_not_watched", project_id=project_id, job_id=job_id,
                             note="the hook is set on a project or group the bot does not poll; ignored")
                    continue
                followed = self.store.followed_job(job_id)
                if followed is None:
                    if status != "failed":
                        continue  # the end of a job the bot did not create: nothing to do
                    rec = self.store.get_job(job_id)
                    if rec is not None and rec.decided or job_id in self.poller._dry_decided:
                        continue
                try:
                    job = self.client.get_job(project_id, job_id)
                    if followed is not None:
                        self.poller.followed_job_changed(followed, job, None)
                    if job.get("status") != "failed":
                        continue
                    rec = self.store.get_job(job_id)
                    if rec is not None and rec.decided or job_id in self.poller._dry_decided:
                        continue
                    out = self.poller.handle_job(proj, job)
                except (GitLabApiError, NotFound) as exc:
                    log.warning("webhook_job_deferred", job_id=job_id, project=proj.path, error=str(exc),
                                note="left to the next full poll")
                    continue
                except LeadershipLost:
                    raise
                except Exception as exc:  # noqa: BLE001 - one odd job must not stop the others
                    log.exception("webhook_job_crashed", job_id=job_id, project=proj.path, error=str(exc),
                                  note="left to the next full poll")
                    continue
                handled += 1
                if out is not None:
                    log.debug("webhook_job_decided", job_id=job_id, decision=out.action)
        return handled

    def start_http(self) -> str | None:
        """Serve /metrics, /healthz (:meth:`health`), /v1/allocation and /v1/usage.

        The same bounded server as ``retry-bot serve`` (:mod:`retry_bot.httpserver`).
        """
        if not self.config.listen:
            return None
        from retry_bot.httpserver import parse_listen
        from retry_bot.predict.sources import clamp_from_policy, settings_from_policy
        from retry_bot.server import AllocationServer

        host, port = parse_listen(self.config.listen)  # validated by load_config
        srv = AllocationServer(store=self.store, tokens=self.config.usage_tokens,
                               signing_keys=self.config.signing_keys, registry=self.metrics.registry,
                               settings=settings_from_policy(self._policy),
                               clamp=clamp_from_policy(self._policy),
                               host=host, port=port, clock=self.clock, health=self.health,
                               post_routes={self.config.webhook.path: self.webhook.handle} if self.webhook else None)
        srv.start()
        self._http = srv
        log.info("http_listening", address=f"{host}:{srv.port}",
                 endpoints=["/metrics", "/healthz", "/v1/allocation", "/v1/usage"]
                 + ([self.config.webhook.path] if self.webhook else []))
        return srv.url

    def close(self) -> None:
        if self.config.leader_enabled:
            try:
                self.store.release_leadership(self.config.leader_holder)
            except Exception:  # noqa: BLE001
                pass
        if self._http is not None:
            self._http.close()
        self.actions.close()
        self.client.close()
        try:
            self.store.close()
        except Exception:  # noqa: BLE001
            pass


class HistoryPredictor:
    """``(facts, record) -> memory bytes``: the usage-history prediction a resize may take.

    :func:`retry_bot.decide.decide` takes the larger of it and the bump rule, then the
    caps.  Only trusted history counts (see :mod:`retry_bot.predict`); without any,
    it has no opinion (``None``).  The history follows the state store incrementally
    (:class:`retry_bot.predict.live.LiveHistory`: new records only, no reload).
    """

    def __init__(self, store: Store, *, policy: Callable[[], Policy] | None = None,
                 clock: Callable[[], float] = time.time, refresh_seconds: float = 300.0) -> None:
        self.store = store
        self.policy = policy
        self.clock = clock
        self.refresh_seconds = refresh_seconds
        self._index: Any = None
        self._loaded = -1e18
        self._settings_for: Any = object()
        self.settings: Any = None
        self.clamp: Any = None
        self._refresh_settings()

    def _refresh_settings(self) -> None:
        """Take ``[prediction]`` and the memory cap from the policy in force (it may be reloaded)."""
        from retry_bot.predict import DEFAULT_SETTINGS
        from retry_bot.predict.sources import clamp_from_policy, settings_from_policy

        pol = self.policy() if self.policy is not None else None
        if pol is self._settings_for:
            return
        self._settings_for = pol
        settings = settings_from_policy(pol) if pol is not None else DEFAULT_SETTINGS
        if settings != self.settings:
            self._index = None  # keys or trust rules may differ: follow the store afresh
        self.settings = settings
        self.clamp = clamp_from_policy(pol)

    def __call__(self, facts: JobFacts, record: UsageRecord | None) -> int | None:
        from retry_bot.predict import extract_key
        from retry_bot.predict.estimator import resize_prediction
        from retry_bot.predict.live import LiveHistory

        self._refresh_settings()
        now = self.clock()
        if self._index is None:
            self._index = LiveHistory(self.store, self.settings)
        self._index.catch_up()
        key = extract_key(self.settings.keys, job_name=facts.name, variables=dict(facts.variables),
                          project=facts.project_path)
        killed = []
        if record is not None and record.oom_killed and record.limits.memory_limit_bytes:
            killed.append(float(record.limits.memory_limit_bytes))
        return self._index.locked(lambda index: resize_prediction(
            index, key, now, killed, self.settings, clamp=self.clamp, ref=facts.ref, protected=facts.protected))


def serve(bot: Bot, *, once: bool = False) -> int:
    """Run ``bot`` in the foreground with signal handling; returns the exit code."""
    previous: dict[int, Any] = {}

    def on_term(signum: int, _frame: Any) -> None:
        log.info("stopping", signal=signal.Signals(signum).name,
                 note="finishing the job and GitLab write in flight, then exiting")
        bot.stop()

    def on_hup(_signum: int, _frame: Any) -> None:
        bot.reload_policy()

    if threading.current_thread() is threading.main_thread():
        for sig, fn in ((signal.SIGTERM, on_term), (signal.SIGINT, on_term), (signal.SIGHUP, on_hup)):
            previous[sig] = signal.signal(sig, fn)
    try:
        bot.start_http()
        if once:
            if bot._lead():
                report = bot.once()
                if report.fatal:
                    print(f"retry-bot: {redact_url(report.fatal)}", file=sys.stderr)
                elif report.errors:
                    print(redact_url(f"retry-bot: the cycle had {len(report.errors)} error(s): "
                                     + "; ".join(report.errors[:5])), file=sys.stderr)
                return 1 if report.errors or report.fatal else 0
            log.warning("not_leader", note="another replica holds the lease; nothing done")
            return 0
        code = bot.run_forever()
        if bot.fatal:
            print(f"retry-bot: {redact_url(bot.fatal)}", file=sys.stderr)
        log.info("stopped", exit_code=code)
        return code
    finally:
        bot.close()
        for sig, fn in previous.items():
            signal.signal(sig, fn)
