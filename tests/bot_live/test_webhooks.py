"""Issue 15, part B: GitLab job webhooks as a trigger, deciding through the same exactly-once path.

The stand-in sends GitLab's real job-event body and headers (:mod:`standin.gitlab.hooks`);
the receiver authenticates ``X-Gitlab-Token``, bounds the body and the queue, and only enqueues.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import pytest

from retry_bot.live.config import parse_config
from standin.gitlab.hooks import HookSender, job_hook_payload
from retry_bot.problems import ConfigError
from retry_bot.live.webhook import JobEventQueue, WebhookReceiver, parse_job_event
from tests.bot_live.farm import (ENV, POLICY, Farm, bot_config_text, compile_error, cycle_until, flaky_dns, make_bot,
                                 needs_memory)

pytestmark = pytest.mark.slow  # end to end: outside the fast lane (pytest -m "not slow")

SECRET = "hook-secret-0123456789abcdef"
WEBHOOK = """
[http]
listen = "127.0.0.1:0"
[webhook]
enabled = true
secret_env = "FARM_HOOK_SECRET"
reconcile_interval_seconds = 3600
queue_size = 100
"""


class Headers(dict):
    def get(self, key, default=None):  # case-insensitive like http.client's message
        for k, v in self.items():
            if k.lower() == key.lower():
                return v
        return default


def _call(rcv, headers, body: bytes):
    h = Headers({"Content-Length": str(len(body)), **headers})
    return rcv.handle(h, lambda n: body[:n])


def _event(status="failed", job_id=7, project_id=3, **kw):
    return json.dumps({"object_kind": "build", "build_id": job_id, "project_id": project_id,
                       "build_status": status, "build_failure_reason": "script_failure", **kw}).encode()


# ------------------------------------------------------------------------ the receiver


def test_receiver_authenticates_bounds_and_only_enqueues(capsys):
    rcv = WebhookReceiver(SECRET, queue=JobEventQueue(2), max_body_bytes=1000)
    job = {"X-Gitlab-Event": "Job Hook", "X-Gitlab-Token": SECRET}
    assert _call(rcv, {"X-Gitlab-Event": "Job Hook"}, _event())[0] == 401                     # no token
    assert _call(rcv, {**job, "X-Gitlab-Token": "wrong-token-xyz"}, _event())[0] == 401       # wrong token
    assert _call(rcv, {**job, "X-Gitlab-Token": SECRET[:-1]}, _event())[0] == 401             # a prefix
    read = []
    status, _ = rcv.handle(Headers({**job, "Content-Length": "5000"}), lambda n: read.append(n) or b"")
    assert status == 413 and read == []                                                     # not read at all
    assert _call(rcv, job, b"{not json")[0] == 400
    assert _call(rcv, job, json.dumps({"object_kind": "pipeline"}).encode())[0] == 400
    assert _call(rcv, {**job, "X-Gitlab-Event": "Pipeline Hook"}, b"{}") == (200, {"ignored": "event 'Pipeline Hook' is not a Job Hook"})
    assert _call(rcv, job, _event(status="running"))[0] == 200 and len(rcv.queue) == 0        # only failures
    assert _call(rcv, job, _event(job_id=7)) == (200, {"queued": 7})
    assert _call(rcv, job, _event(job_id=7)) == (200, {"duplicate": 7})                       # de-duplicated
    assert _call(rcv, job, _event(job_id=8)) == (200, {"queued": 8})
    assert _call(rcv, job, _event(job_id=9)) == (200, {"dropped": 9})                         # full: polling finds it
    assert rcv.queue.pop() == [(3, 7, "failed"), (3, 8, "failed")] and rcv.queue.dropped == 1
    out = capsys.readouterr()
    assert SECRET not in out.out + out.err and "wrong-token-xyz" not in out.out + out.err


def test_the_ends_of_jobs_are_queued_and_a_failure_pushes_one_out_when_full():
    rcv = WebhookReceiver(SECRET, queue=JobEventQueue(2))
    job = {"X-Gitlab-Event": "Job Hook", "X-Gitlab-Token": SECRET}
    for status in ("pending", "running", "created", "manual"):
        assert "ignored" in _call(rcv, job, _event(status=status, job_id=1))[1]
    assert _call(rcv, job, _event(status="success", job_id=1)) == (200, {"queued": 1})
    assert _call(rcv, job, _event(status="canceled", job_id=2)) == (200, {"queued": 2})
    assert _call(rcv, job, _event(status="success", job_id=3)) == (200, {"dropped": 3})    # full of ends
    assert _call(rcv, job, _event(status="failed", job_id=4)) == (200, {"queued": 4})      # pushes job 1 out
    assert _call(rcv, job, _event(status="failed", job_id=5)) == (200, {"queued": 5})      # pushes job 2 out
    assert _call(rcv, job, _event(status="failed", job_id=6)) == (200, {"dropped": 6})     # only failures left
    assert rcv.queue.pop() == [(3, 4, "failed"), (3, 5, "failed")] and rcv.queue.dropped == 4


def test_receiver_without_a_secret_refuses_everything():
    rcv = WebhookReceiver(None)
    assert _call(rcv, {"X-Gitlab-Event": "Job Hook", "X-Gitlab-Token": ""}, _event())[0] == 401


def test_config_requires_a_secret_and_the_http_server(tmp_path):
    pol = tmp_path / "p.toml"
    pol.write_text("version = 1\n")
    base = bot_config_text("http://127.0.0.1:1", tmp_path / "s.db", pol, ["g/p"])
    with pytest.raises(ConfigError, match="secret is missing"):
        parse_config(base + WEBHOOK, env=ENV)
    with pytest.raises(ConfigError, match=r"set \[http\] listen"):
        parse_config(base + WEBHOOK.replace('listen = "127.0.0.1:0"', ""), env={**ENV, "FARM_HOOK_SECRET": "s"})
    cfg = parse_config(base + WEBHOOK, env={**ENV, "FARM_HOOK_SECRET": SECRET})
    assert cfg.webhook.enabled and cfg.webhook.secret == SECRET and SECRET not in repr(cfg)
    assert not parse_config(base, env=ENV).webhook.enabled      # off by default


# ------------------------------------------------------------------------ the stand-in's payload


def test_standin_sends_gitlabs_job_event_shape(tmp_path):
    farm = Farm({"c": compile_error})
    try:
        farm.add_project("grp/w", {"c": {"stage": "build", "tags": ["small"], "script": ["make"]}})
        farm.standin.create_pipeline("grp/w")
        assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in farm.standin.jobs()))
        job = next(j for j in farm.standin.jobs() if j.status == "failed")
        with farm.standin.state.lock:
            body = job_hook_payload(farm.standin.state, job)
        # G lib/gitlab/data_builder/build.rb
        for key in ("object_kind", "ref", "tag", "before_sha", "sha", "retries_count", "build_id", "build_name",
                    "build_stage", "build_status", "build_created_at", "build_started_at", "build_finished_at",
                    "build_duration", "build_queued_duration", "build_allow_failure", "build_failure_reason",
                    "pipeline_id", "runner", "project_id", "project_name", "user", "commit", "repository",
                    "project", "environment"):
            assert key in body, key
        assert body["object_kind"] == "build" and body["build_id"] == job.id and body["build_status"] == "failed"
        assert body["build_failure_reason"] == "script_failure" and body["project"]["path_with_namespace"] == "grp/w"
        event = parse_job_event(json.dumps(body).encode())
        assert (event.project_id, event.job_id, event.status) == (job.project_id, job.id, "failed")
    finally:
        farm.close()


# ------------------------------------------------------------------------ the bot


def _hook_bot(farm, tmp_path, projects, **kw):
    return make_bot(farm, tmp_path, projects, extra=WEBHOOK, env={"FARM_HOOK_SECRET": SECRET}, **kw)


def test_a_job_event_is_decided_without_polling_and_exactly_once(tmp_path):
    farm = Farm({"dns": flaky_dns(1), "c": compile_error})
    bot = sender = None
    try:
        farm.add_project("grp/h", {"dns": {"stage": "build", "tags": ["small"], "script": ["curl"]},
                                   "c": {"stage": "build", "tags": ["small"], "script": ["make"]}})
        farm.add_project("grp/other", {"c": {"stage": "build", "tags": ["small"], "script": ["make"]}})
        bot = _hook_bot(farm, tmp_path, ["grp/h"])
        url = bot.start_http()
        bot.poller.projects()   # what the bot watches (a full poll would do it)
        sender = HookSender(farm.standin.state, url + "/v1/gitlab/job-events", secret=SECRET)
        farm.standin.on_job_change(sender)
        farm.standin.reset_calls()
        farm.standin.create_pipeline("grp/h")
        farm.standin.create_pipeline("grp/other")
        assert farm.standin.wait_for(lambda: sum(j.status == "failed" for j in farm.standin.jobs()) == 3)
        assert sender.flush()
        assert all(d.status == 200 for d in sender.deliveries), sender.deliveries
        assert bot.handle_events() == 2          # grp/other is not watched: ignored
        failed = [j for j in farm.standin.jobs("grp/h") if j.status == "failed"]
        assert all(bot.store.get_job(j.id).decided for j in failed)
        assert farm.standin.wait_for(lambda: any(j.status == "success" for j in farm.standin.jobs("grp/h")
                                                 if j.name == "dns"))
        paths = [c.path for c in farm.standin.calls]
        assert not any(p.endswith("/jobs") for p in paths), "decided from the events, no jobs list polled"
        # A replayed event (GitLab's "Resend", or a forged copy) decides nothing twice.
        bad = next(j for j in failed if j.name == "dns")
        assert sender.send(bad).status == 200
        assert bot.handle_events() == 0
        decided = [e for e in bot.store.history(bad.id) if e["kind"] == "decided" and e["job_id"] == bad.id]
        assert len(decided) == 1
        assert len([j for j in farm.standin.jobs("grp/h") if j.name == "dns"]) == 2
        # A forged token is refused by the HTTP server, and nothing is queued.  (The stand-in delivers its job
        # events from a thread: the retried job's own later events may still be arriving, so they are delivered
        # and handled first; otherwise one of them could sit in the queue when it is checked.)
        assert sender.flush()
        bot.handle_events()
        req = urllib.request.Request(url + "/v1/gitlab/job-events", data=_event(job_id=bad.id), method="POST",
                                     headers={"X-Gitlab-Event": "Job Hook", "X-Gitlab-Token": "nope"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=5)
        assert err.value.code == 401 and len(bot.webhook.queue) == 0
        metrics = urllib.request.urlopen(url + "/metrics", timeout=5).read().decode()
        assert 'retry_bot_webhook_events_total{outcome="unauthorized"} 1.0' in metrics
        assert 'retry_bot_webhook_events_total{outcome="unwatched"} 1.0' in metrics
    finally:
        if sender is not None:
            sender.close()
        if bot is not None:
            bot.close()
        farm.close()


def test_run_forever_reacts_to_events_between_reconciliation_polls(tmp_path):
    """`retry-bot run` with webhooks: one full poll at start, then events only (the next full
    poll is an hour away); a job that fails later is decided within seconds."""
    farm = Farm({"c": compile_error})
    bot = sender = None
    try:
        farm.add_project("grp/r", {"c": {"stage": "build", "tags": ["small"], "script": ["make"]}})
        bot = _hook_bot(farm, tmp_path, ["grp/r"], interval=0.2)
        url = bot.start_http()
        sender = HookSender(farm.standin.state, url + "/v1/gitlab/job-events", secret=SECRET, statuses=("failed",))
        farm.standin.on_job_change(sender)
        t = threading.Thread(target=bot.run_forever, daemon=True)
        t.start()
        assert farm.standin.wait_for(lambda: bot.metrics.poll_cycles.labels("ok")._value.get() >= 1, timeout=10)
        farm.standin.create_pipeline("grp/r")
        assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in farm.standin.jobs()))
        job = next(j for j in farm.standin.jobs() if j.status == "failed")
        started = time.monotonic()
        assert farm.standin.wait_for(lambda: (bot.store.get_job(job.id) or None) is not None
                                     and bot.store.get_job(job.id).decided, timeout=10)
        assert time.monotonic() - started < 5
        assert bot.metrics.poll_cycles.labels("ok")._value.get() == 1, "no second full poll was needed"
        bot.stop()
        t.join(10)
        assert not t.is_alive()
    finally:
        if sender is not None:
            sender.close()
        if bot is not None:
            bot.stop()
            bot.close()
        farm.close()


# ------------------------------------------------------------------------ events of the jobs the bot created


def test_the_end_of_a_created_job_comes_by_event_and_counts_once(tmp_path):
    """A job the bot created (a resize's played copy, a retry) that ends is recorded from its job
    event, without a poll, through the same once-only path as polling: an OOM recovery is counted
    once whether the event or the poll sees it first, and a re-run that fails again is decided."""
    farm = Farm({"oom": needs_memory(300)}, runner_tags=("small", "medium"))
    bot = sender = None
    system_failure = b"ERROR: Job failed (system failure): prepare environment: connection refused\n"

    def run_large(status: str) -> int:
        """The ``large`` runner is a person here: it runs the one pending ``large`` job now."""
        job = farm.standin.next_pending_job(["large"], run_untagged=False, start=True)
        assert job is not None
        farm.standin.finish_job(job.id, status, None if status == "success" else "runner_system_failure",
                             trace=system_failure if status == "failed" else b"ok\n")
        return job.id

    try:
        farm.add_project("grp/f", {"oom": {"stage": "build", "tags": ["small"], "script": ["make"],
                                           "variables": {"KUBERNETES_MEMORY_LIMIT": "128Mi"}},
                                   "dns": {"stage": "build", "tags": ["large"], "script": ["curl"]}})
        bot = _hook_bot(farm, tmp_path, ["grp/f"], policy=POLICY_TWO_RETRIES)
        url = bot.start_http()
        sender = HookSender(farm.standin.state, url + "/v1/gitlab/job-events", secret=SECRET)
        farm.standin.on_job_change(sender)   # every status change, as GitLab sends them
        farm.standin.create_pipeline("grp/f")
        assert farm.standin.wait_for(lambda: any(j.status == "pending" for j in farm.standin.jobs() if j.name == "dns"))
        run_large("failed")
        assert farm.standin.wait_for(lambda: sum(j.status == "failed" for j in farm.standin.jobs()) == 2)
        # The bot decides both by polling and carries the resize out over a few cycles; here the
        # poll does not follow the created jobs, so only their events can record their ends.
        poll_follow, bot.poller.follow_watched = bot.poller.follow_watched, lambda report: None
        assert cycle_until(bot, lambda: bot.store.followed_count() == 2 and not bot.store.open_intents(),
                           timeout=30)
        followed = {f.kind: f for f in bot.store.followed()}
        copy, retry = followed["resize"], followed["retry"]
        assert run_large("failed") == retry.job_id      # the retry fails again
        assert farm.standin.wait_for(lambda: farm.standin.get_job(copy.job_id).status == "success", timeout=20)
        bot.poller.follow_watched = poll_follow
        assert sender.flush()
        farm.standin.reset_calls()
        assert bot.handle_events() == 1                       # the retry that failed again is decided
        assert bot.metrics.oom_recoveries._value.get() == 1   # the copy's success, from its event
        assert bot.store.followed_job(copy.job_id) is None and bot.store.followed_job(retry.job_id) is None
        assert bot.store.lineage_for(copy.job_id).latest.status == "success"
        lin = bot.store.lineage_for(retry.job_id)
        assert [m.status for m in lin.attempts if m.job_id == retry.job_id] == ["failed"]
        assert bot.store.get_job(retry.job_id).decided        # failed again: decided like any failure
        assert len([f for f in bot.store.followed() if f.origin_job_id == retry.origin_job_id]) == 1
        paths = [c.path for c in farm.standin.calls]
        assert not any(p.endswith("/jobs") for p in paths), "no jobs list polled"
        # The poll that follows created jobs, and a replayed event, find nothing left to record.
        assert sender.send(farm.standin.get_job(copy.job_id)).status == 200
        bot.handle_events()
        bot.once()
        assert bot.metrics.oom_recoveries._value.get() == 1
        events = [e for e in bot.store.history(copy.job_id) if e["kind"] == "lineage_updated"
                  and e["job_id"] == copy.job_id and (e["data"] or {}).get("status") == "success"]
        assert len(events) == 1
    finally:
        if sender is not None:
            sender.close()
        if bot is not None:
            bot.close()
        farm.close()


POLICY_TWO_RETRIES = POLICY.replace(
    '[families.infrastructure]\naction = "retry"\nbudget = 1', '[families.infrastructure]\naction = "retry"\nbudget = 2')
