"""Prometheus metrics of the live bot.

One :class:`BotMetrics` per process, registered on an explicit
:class:`prometheus_client.CollectorRegistry` (so tests and the demo can run
several bots in one process).  The HTTP server (``retry_bot.server``) exposes
the registry on ``/metrics``.

=================================================  =====================================
metric                                             labels
=================================================  =====================================
``retry_bot_jobs_classified_total``                ``family``, ``category``
``retry_bot_decisions_total``                      ``action`` (retry, resize, none)
``retry_bot_actions_total``                        ``kind``, ``outcome``
``retry_bot_oom_recoveries_total``                 (a resized OOM lineage that succeeded)
``retry_bot_gitlab_api_calls_total``               ``api`` (rest, graphql), ``method``, ``endpoint``
``retry_bot_gitlab_api_errors_total``              ``api``, ``status`` (``none``: no answer)
``retry_bot_poll_duration_seconds``                histogram of one cycle
``retry_bot_poll_cycles_total``                    ``outcome``
``retry_bot_last_poll_timestamp_seconds``          gauge
``retry_bot_is_leader``                            gauge
``retry_bot_storm_braked``                         ``category``: 1 while its storm brake is on
``retry_bot_storm_held_jobs``                      ``category``: re-runs held by the brake
``retry_bot_storm_trips_total``                    ``category``
``retry_bot_storm_released_total``                 ``category``: held re-runs sent on release
``retry_bot_followed_jobs``                        jobs the bot created, followed to their end (the store's
                                                   ``followed_jobs``; counted afresh every cycle)
``retry_bot_followed_jobs_expired_total``          followed jobs dropped at ``follow_max_age``
``retry_bot_scheduled_actions``                    open intents waiting for their due time
=================================================  =====================================
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from retry_bot.gitlab.client import ApiCall

__all__ = ["BotMetrics"]


class BotMetrics:
    """The bot's counters and histograms on ``registry``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        add_load_metrics(self)
        self.jobs_classified = Counter("retry_bot_jobs_classified", "Failed jobs classified",
                                       ["family", "category"], registry=r)
        self.decisions = Counter("retry_bot_decisions", "Decisions made", ["action"], registry=r)
        self.actions = Counter("retry_bot_actions", "Actions carried out on GitLab",
                               ["kind", "outcome"], registry=r)
        self.oom_recoveries = Counter("retry_bot_oom_recoveries",
                                      "OOM-killed jobs whose re-created attempt succeeded", registry=r)
        self.api_calls = Counter("retry_bot_gitlab_api_calls", "HTTP requests to GitLab",
                                 ["api", "method", "endpoint"], registry=r)
        self.api_errors = Counter("retry_bot_gitlab_api_errors", "GitLab requests that failed",
                                  ["api", "status"], registry=r)
        self.poll_duration = Histogram("retry_bot_poll_duration_seconds", "Duration of one poll cycle",
                                       buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
                                       registry=r)
        self.poll_cycles = Counter("retry_bot_poll_cycles", "Poll cycles", ["outcome"], registry=r)
        self.last_poll = Gauge("retry_bot_last_poll_timestamp_seconds", "End of the last poll cycle",
                               registry=r)
        self.is_leader = Gauge("retry_bot_is_leader",
                               "1 when this process holds the leader lease (always 1 for a single instance)",
                               registry=r)

        self.storm_braked = Gauge("retry_bot_storm_braked", "1 while the category's storm brake holds its re-runs",
                                  ["category"], registry=r)
        self.storm_held = Gauge("retry_bot_storm_held_jobs", "Re-runs held by the storm brake", ["category"],
                                registry=r)
        self.storm_trips = Counter("retry_bot_storm_trips", "Times the storm brake tripped", ["category"],
                                   registry=r)
        self.storm_released = Counter("retry_bot_storm_released", "Held re-runs sent when the brake released",
                                      ["category"], registry=r)
        self.followed_jobs = Gauge("retry_bot_followed_jobs", "Jobs the bot created and follows to their end",
                                   registry=r)
        self.followed_expired = Counter("retry_bot_followed_jobs_expired",
                                        "Followed jobs dropped unfinished at follow_max_age", registry=r)
        self.scheduled_actions = Gauge("retry_bot_scheduled_actions",
                                       "Open action intents waiting for their due time", registry=r)

    def observe_api_call(self, call: ApiCall) -> None:
        """Observer for :class:`~retry_bot.gitlab.client.GitLabClient`."""
        self.api_calls.labels(call.api, call.method, call.endpoint).inc()
        if call.status is None or call.status >= 400:
            self.api_errors.labels(call.api, "none" if call.status is None else str(call.status)).inc()


# ---------------------------------------------------------------- rate limits and webhooks (issue 15, part B)
#
# ``retry_bot_writes_deferred_total``   ``kind``      writes GitLab did not accept (429): the intent stays open
# ``retry_bot_api_paced_seconds_total``               seconds requests waited for the pacer (budget, RateLimit-*)
# ``retry_bot_webhook_events_total``    ``outcome``   queued, duplicate, dropped, ignored, unauthorized, invalid,
#                                                     too_large, unwatched


def add_load_metrics(metrics: BotMetrics) -> BotMetrics:
    """Register the pacing and webhook metrics on ``metrics`` (its registry); called by ``BotMetrics``."""
    r = metrics.registry
    metrics.writes_deferred = Counter("retry_bot_writes_deferred",  # type: ignore[attr-defined]
                                      "GitLab writes answered 429 until the retries ran out: kept, tried later",
                                      ["kind"], registry=r)
    metrics.api_paced_seconds = Counter("retry_bot_api_paced_seconds",  # type: ignore[attr-defined]
                                        "Seconds GitLab requests waited for the pacer", registry=r)
    metrics.webhook_events = Counter("retry_bot_webhook_events",  # type: ignore[attr-defined]
                                     "GitLab job webhook requests by outcome", ["outcome"], registry=r)
    return metrics
