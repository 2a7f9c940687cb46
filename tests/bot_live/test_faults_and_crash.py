"""Exactly-once under failure: 20% of API calls failing (also after GitLab changed state), and
SIGKILL of the real `retry-bot run` process in the middle of an action."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time

import pytest

from standin.gitlab import Fault
from retry_bot.state import StateError, open_store
from tests.bot_live.farm import (ENV, ROOT, Farm, bot_config_text, compile_error, cycle_until,
                                 fail_five_jobs_in_two_projects, flaky_dns, make_bot, needs_memory, POLICY)

pytestmark = pytest.mark.slow  # end to end: outside the fast lane (pytest -m "not slow")


def _by_name(farm, project, name):
    return [j for j in farm.standin.jobs(project) if j.name == name]


def _assert_no_duplicate_writes(farm):
    retries = collections.Counter(j.retry_of for j in farm.standin.jobs() if j.retry_of is not None)
    assert all(n == 1 for n in retries.values()), f"a job was retried more than once: {retries}"
    created = collections.Counter()
    for p in farm.standin.pipelines():
        v = farm.standin.pipeline_variables(p.id)
        if "RETRY_BOT_FAILED_JOB_ID" in v:
            created[v["RETRY_BOT_FAILED_JOB_ID"]] += 1
    assert all(n == 1 for n in created.values()), f"a job was re-created more than once: {created}"
    return retries, created


def test_with_20_percent_of_api_calls_failing_every_job_is_decided_exactly_once(tmp_path):
    farm = Farm({"oom": needs_memory(300), "dns": flaky_dns(1), "compile": compile_error,
                 "oom2": needs_memory(700), "dns2": flaky_dns(1)})
    bot = None
    try:
        fail_five_jobs_in_two_projects(farm)
        f = farm.standin.faults
        f.reseed(int(os.environ.get("FARM_SEED", "4")))
        # after GitLab acted: the answer is lost, replaced by a 502, or arrives too late (the first write's
        # answer always: the random draws below depend on how many requests come first, i.e. on timing,
        # and some interleavings gave no write a lost answer at all)
        f.add(Fault("drop", method="POST", phase="after", plan=[True]))
        f.add(Fault("status", method="POST", phase="after", status=502, probability=0.08))
        f.add(Fault("drop", method="POST", phase="after", probability=0.06))
        f.add(Fault("slow", method="POST", phase="after", delay=2.5, probability=0.04))
        # before GitLab acted
        f.add(Fault("status", phase="before", status=503, probability=0.10))
        f.add(Fault("rate_limit", phase="before", retry_after=0, probability=0.05))
        f.add(Fault("drop", phase="before", probability=0.04))
        bot = make_bot(farm, tmp_path, ["grp/a", "grp/b"], settle=3.0, timeout=2.0, attempts=3)

        def done():
            return (any(j.status == "success" for j in _by_name(farm, "grp/a", "oom"))
                    and any(j.status == "success" for j in _by_name(farm, "grp/b", "oom2"))
                    and any(j.status == "success" for j in _by_name(farm, "grp/a", "dns"))
                    and any(j.status == "success" for j in _by_name(farm, "grp/b", "dns2"))
                    and not bot.store.open_intents()
                    and all(bot.store.get_job(j.id) is not None and bot.store.get_job(j.id).decided
                            for j in farm.standin.jobs() if j.status == "failed" and not j.spec.is_bridge))
        assert cycle_until(bot, done, timeout=75, pause=0.1), [(j.id, j.name, j.status) for j in farm.standin.jobs()]
        calls = farm.standin.calls
        faulted = sum(1 for c in calls if c.fault)
        assert faulted / len(calls) > 0.12, (faulted, len(calls))
        after = [c for c in calls if c.fault and c.fault.endswith("@after") and c.method == "POST"]
        assert after, "no write lost its answer after GitLab acted: the test would prove nothing"
        _assert_no_duplicate_writes(farm)
        for j in farm.standin.jobs():
            if j.status == "failed" and not j.spec.is_bridge:
                decided = [e for e in bot.store.history(j.id) if e["kind"] == "decided" and e["job_id"] == j.id]
                assert len(decided) == 1, (j.id, j.name, decided)
        assert len(_by_name(farm, "grp/a", "compile")) == 1
        assert len(_by_name(farm, "grp/a", "dns")) == 2 and len(_by_name(farm, "grp/b", "dns2")) == 2
    finally:
        if bot is not None:
            bot.close()
        farm.close()


def _spawn(cfg, log):
    env = {**os.environ, **ENV, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "retry_bot", "--log-format", "json", "run", "--config", str(cfg)],
                            env=env, stdout=log, stderr=subprocess.STDOUT, cwd=str(ROOT))


@pytest.mark.parametrize("write", ["retry", "pipeline", "play"])
def test_sigkill_mid_action_then_restart_never_duplicates_the_action(tmp_path, write):
    farm = Farm({"oom": needs_memory(300), "dns": flaky_dns(1)})
    procs = []
    try:
        job = "dns" if write == "retry" else "oom"
        farm.add_project("grp/k", {job: {"stage": "build", "tags": ["small"], "script": ["x"],
                                         "variables": {"KUBERNETES_MEMORY_LIMIT": "128Mi"}}})
        farm.standin.create_pipeline("grp/k")
        assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in farm.standin.jobs()))
        # GitLab performs the write, then the answer hangs: the bot is mid-action when we kill it.
        path = {"retry": r"/jobs/\d+/retry$", "pipeline": r"/pipeline$", "play": r"/jobs/\d+/play$"}[write]
        farm.standin.faults.add(Fault("slow", method="POST", path=path, phase="after", delay=30, times=1))
        pol = tmp_path / "policy.toml"
        pol.write_text(POLICY)
        cfg = tmp_path / "bot.toml"
        cfg.write_text(bot_config_text(farm.url, tmp_path / "state.db", pol, ["grp/k"], interval=0.2, timeout=5.0))
        log = open(tmp_path / "bot.log", "wb")
        procs.append(_spawn(cfg, log))
        assert farm.standin.wait_for(lambda: _write_landed(farm, write), timeout=20), \
            (tmp_path / "bot.log").read_text()[-3000:]
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait(10)
        store = open_store(f"sqlite:///{tmp_path / 'state.db'}")
        assert store.open_intents(), "the kill must leave the action's intent open"
        store.close()
        procs.append(_spawn(cfg, log))         # restart: it must observe GitLab, not write again

        def finished():
            js = [j for j in farm.standin.jobs() if j.name == job]
            if not any(j.status == "success" for j in js):
                return False
            st = open_store(f"sqlite:///{tmp_path / 'state.db'}")
            try:
                return not st.open_intents()
            finally:
                st.close()
        deadline = time.monotonic() + 40
        while not finished() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert finished(), (tmp_path / "bot.log").read_text()[-4000:]
        time.sleep(1.0)                         # a few more cycles: nothing more may happen
        procs[1].send_signal(signal.SIGTERM)
        assert procs[1].wait(15) == 0           # graceful stop
        retries, created = _assert_no_duplicate_writes(farm)
        assert (len(retries) if write == "retry" else len(created)) == 1
        if write == "play":
            copies = [j for j in farm.standin.jobs() if j.name == job and j.spec.when == "manual"]
            assert len(copies) == 1 and copies[0].status == "success" and not retries   # played once, never re-played
        store = open_store(f"sqlite:///{tmp_path / 'state.db'}")
        assert not store.open_intents()
        origin = [j for j in farm.standin.jobs() if j.name == job][0].id
        done = [e for e in store.history(origin) if e["kind"] == "action_completed"]
        assert any((e["data"].get("result") or {}).get("observed") for e in done), done
        store.close()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(5)
        farm.close()


def _write_landed(farm, write):
    if write == "play":
        return any(j.spec.when == "manual" and j.status != "manual" for j in farm.standin.state.jobs.values())
    if write == "retry":
        return any(j.retry_of is not None for j in farm.standin.state.jobs.values())
    return any("RETRY_BOT_FAILED_JOB_ID" in {v["key"] for v in p.variables} for p in farm.standin.state.pipelines.values())


def test_sigterm_finishes_the_write_in_flight_then_exits(tmp_path):
    farm = Farm({"dns": flaky_dns(1)})
    proc = None
    try:
        farm.add_project("grp/t", {"dns": {"stage": "build", "tags": ["small"], "script": ["x"]}})
        farm.standin.create_pipeline("grp/t")
        assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in farm.standin.jobs()))
        # GitLab acts at once but answers only after 2 s (within the bot's 5 s timeout)
        farm.standin.faults.add(Fault("slow", method="POST", path=r"/retry$", phase="after", delay=2.0, times=1))
        pol = tmp_path / "policy.toml"
        pol.write_text(POLICY)
        cfg = tmp_path / "bot.toml"
        cfg.write_text(bot_config_text(farm.url, tmp_path / "state.db", pol, ["grp/t"], interval=0.2, timeout=5.0))
        log = open(tmp_path / "bot.log", "wb")
        proc = _spawn(cfg, log)
        assert farm.standin.wait_for(lambda: _write_landed(farm, "retry"), timeout=20)
        proc.send_signal(signal.SIGTERM)          # mid-write: the answer is still 2 s away
        assert proc.wait(20) == 0
        store = open_store(f"sqlite:///{tmp_path / 'state.db'}")
        try:
            assert not store.open_intents(), "the write in flight must be finished and recorded before exiting"
            origin = [j for j in farm.standin.jobs() if j.name == "dns"][0].id
            done = [e for e in store.history(origin) if e["kind"] == "action_completed"]
            assert len(done) == 1 and done[0]["data"]["result"]["observed"] is False
        finally:
            store.close()
        _assert_no_duplicate_writes(farm)
        assert b'"event": "stopping"' in (tmp_path / "bot.log").read_bytes()
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(5)
        farm.close()


def test_a_failed_copy_of_a_retry_whose_answer_was_lost_waits_for_its_lineage(tmp_path):
    """GitLab retried the job, its answer was lost, and the copy failed before the bot could
    observe the retry (the pipeline's job list failing that cycle): the copy is not judged as a
    new origin with a fresh budget (which re-ran it once more than the policy allows and later
    broke the intent's completion: "job N already belongs to the lineage of job N"); it waits,
    then joins its lineage when the intent completes and is judged there."""
    farm = Farm({"dns": flaky_dns(2)})
    bot = None
    try:
        farm.add_project("grp/c", {"dns": {"stage": "build", "tags": ["small"], "script": ["x"]}})
        farm.standin.create_pipeline("grp/c")
        assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in farm.standin.jobs()))
        (origin,) = [j.id for j in farm.standin.jobs()]
        f = farm.standin.faults
        f.add(Fault("drop", method="POST", path=r"/retry$", phase="after", plan=[True]))  # GitLab acts, no answer
        bot = make_bot(farm, tmp_path, ["grp/c"], settle=60.0)
        bot.once()
        assert farm.standin.wait_for(lambda: any(j.retry_of == origin and j.status == "failed"
                                                 for j in farm.standin.jobs()), timeout=15)
        (copy,) = [j.id for j in farm.standin.jobs() if j.retry_of == origin]
        assert bot.store.open_intents(), "the lost answer must leave the retry's intent open"

        blocked = f.add(Fault("status", method="GET", path=r"/pipelines/\d+/jobs$", status=503))
        bot.once()  # the intent cannot observe the copy; the copy is listed as a new failed job
        rec = bot.store.get_job(copy)
        assert rec is None or not rec.decided, "the copy was judged before its lineage was known"
        assert not any(j.retry_of == copy for j in farm.standin.jobs())
        f.remove(blocked)

        def settled() -> bool:
            rec = bot.store.get_job(copy)
            return not bot.store.open_intents() and rec is not None and rec.decided
        assert cycle_until(bot, settled, timeout=20)
        assert bot.store.origin_of(copy) == origin
        # its lineage's infrastructure budget (1 retry) is spent: the copy is left alone
        assert not any(j.retry_of == copy for j in farm.standin.jobs())
        assert not bot.once().errors
        decided = [e for e in bot.store.history(copy) if e["kind"] == "decided" and e["job_id"] == copy]
        assert len(decided) == 1 and decided[0]["data"]["action"] == "none", decided
    finally:
        if bot is not None:
            bot.close()
        farm.close()


class _Killed(BaseException):
    """The process dying at one store write (BaseException: no ``except Exception`` in the bot stops it)."""


def _one_failed_job(farm, path):
    """A project at ``path`` with one ``dns`` job (the farm's script of that name), run until it failed."""
    farm.add_project(path, {"dns": {"stage": "build", "tags": ["small"], "script": ["x"]}})
    farm.standin.create_pipeline(path)
    assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in farm.standin.jobs()))
    (origin,) = [j.id for j in farm.standin.jobs()]
    return origin


def _cycle_until_killed(bot, cycles=50):
    """Run the bot's cycles until the patched write kills it (the test fails if it never does)."""
    with pytest.raises(_Killed):
        for _ in range(cycles):
            bot.once()
            time.sleep(0.05)


@pytest.mark.parametrize("dies_at", ["add_lineage_member", "complete_action"])
def test_a_crash_between_an_actions_two_closing_writes_loses_no_lineage_member(tmp_path, dies_at):
    """An action closes with two store writes: the new job joins its origin's lineage, the intent
    completes.  Whichever of them the process dies at, the restarted bot ends with the intent
    completed, the copy in the origin's lineage (so the lineage's budget still counts it) and no
    second write on GitLab.  (With the intent closed first, a death before the lineage write lost the
    member for good: the copy was later judged as an origin with a fresh budget.)"""
    farm = Farm({"dns": flaky_dns(2)})
    bots = []
    try:
        origin = _one_failed_job(farm, "grp/e")
        bots.append(make_bot(farm, tmp_path, ["grp/e"]))
        store = bots[0].store
        real = getattr(store, dies_at)

        def dying(*args, **kwargs):
            if dies_at == "complete_action" and not (args[1] or {}).get("new_job_id"):
                return real(*args, **kwargs)  # not the overall intent's closing write
            raise _Killed(dies_at)
        setattr(store, dies_at, dying)
        _cycle_until_killed(bots[0])
        copies = [j for j in farm.standin.jobs() if j.retry_of == origin]
        assert len(copies) == 1, "GitLab must have retried the job before the process died"
        setattr(store, dies_at, real)
        bots.pop().close()

        bots.append(make_bot(farm, tmp_path, ["grp/e"]))       # the restart, on the same state
        bot = bots[0]
        copy = copies[0].id

        def settled() -> bool:
            rec = bot.store.get_job(copy)
            return not bot.store.open_intents() and rec is not None and rec.decided
        assert cycle_until(bot, settled, timeout=20)
        assert bot.store.origin_of(copy) == origin
        assert [a.job_id for a in bot.store.lineage_for(origin).attempts] == [origin, copy]
        # the lineage's infrastructure budget (1 retry) is spent: the failed copy is left alone
        assert not any(j.retry_of == copy for j in farm.standin.jobs())
        _assert_no_duplicate_writes(farm)
        done = [e for e in bot.store.history(origin) if e["kind"] == "action_completed"]
        assert len(done) == 1 and not done[0]["data"]["result"].get("lineage_conflict"), done
    finally:
        for b in bots:
            b.close()
        farm.close()


def test_an_action_whose_new_job_already_heads_another_lineage_still_closes(tmp_path):
    """The defence behind the poller's deferral: when the new job cannot join the origin's lineage
    (the store refuses: it already belongs to another), the intent still completes, recording the
    conflict, instead of failing the same way on every cycle."""
    farm = Farm({"dns": flaky_dns(1)})
    bot = None
    try:
        origin = _one_failed_job(farm, "grp/f")
        bot = make_bot(farm, tmp_path, ["grp/f"])

        def refused(origin_job_id, job_id, *args, **kwargs):
            raise StateError(f"job {job_id} already belongs to the lineage of job {job_id}")
        bot.store.add_lineage_member = refused
        assert cycle_until(bot, lambda: not bot.store.open_intents()
                           and any(j.retry_of == origin for j in farm.standin.jobs()), timeout=20)
        assert not bot.once().errors
        (done,) = [e for e in bot.store.history(origin) if e["kind"] == "action_completed"]
        assert "already belongs" in done["data"]["result"]["lineage_conflict"]
        _assert_no_duplicate_writes(farm)
    finally:
        if bot is not None:
            bot.close()
        farm.close()


def test_a_crash_before_an_actions_new_job_is_followed_loses_no_outcome(tmp_path):
    """The new job is followed (``followed_jobs``: how it ends is recorded in its lineage, counted in
    the runner-class caps and told to the storm brake) before the intent closes.  With the intent
    closed first, a death in between left the job unfollowed for good: nothing follows a job of a
    closed intent again, and its lineage member stayed ``pending``."""
    farm = Farm({"dns": flaky_dns(1)})          # the origin fails (DNS), its retry succeeds
    bots = []
    try:
        origin = _one_failed_job(farm, "grp/g")
        bots.append(make_bot(farm, tmp_path, ["grp/g"]))
        store = bots[0].store
        real = store.follow

        def dying(*args, **kwargs):
            raise _Killed("follow")
        store.follow = dying
        _cycle_until_killed(bots[0])
        store.follow = real
        (copy,) = [j.id for j in farm.standin.jobs() if j.retry_of == origin]
        bots.pop().close()

        bots.append(make_bot(farm, tmp_path, ["grp/g"]))       # the restart, on the same state
        bot = bots[0]

        def recorded() -> bool:
            attempts = bot.store.lineage_for(origin).attempts
            return not bot.store.open_intents() and len(attempts) == 2 and attempts[1].status == "success"
        assert cycle_until(bot, recorded, timeout=20), (copy, bot.store.followed_job(copy),
                                                         bot.store.lineage_for(origin).attempts)
        _assert_no_duplicate_writes(farm)
    finally:
        for b in bots:
            b.close()
        farm.close()


def test_two_resize_pipelines_left_unclaimed_on_one_ref_are_told_apart_by_their_child(tmp_path):
    """Two jobs of one ref (different names) are resized at once; the process dies with both
    pipelines made on GitLab and neither recorded.  After the restart each intent must find *its*
    pipeline: the one whose child pipeline holds a job of its name (pipeline variables cannot be
    read with a Developer token).  Taking "the oldest unclaimed bot pipeline on the ref" swapped
    them: both resizes failed ("child pipeline N has no job named ...") and neither OOM-killed job
    was re-created.  (Two timed-out pipeline writes leave the same state without a crash.)"""
    farm = Farm({"oomA": needs_memory(300), "oomB": needs_memory(300)})
    bots = []
    try:
        job = {"stage": "build", "tags": ["small"], "script": ["make"],
               "variables": {"KUBERNETES_MEMORY_LIMIT": "128Mi"}}
        farm.add_project("grp/r", {"oomA": dict(job), "oomB": dict(job)})
        farm.standin.create_pipeline("grp/r")
        assert farm.standin.wait_for(lambda: sum(j.status == "failed" for j in farm.standin.jobs()) == 2)
        ids = {j.name: j.id for j in farm.standin.jobs()}
        a, b = ids["oomA"], ids["oomB"]
        bots.append(make_bot(farm, tmp_path, ["grp/r"]))
        runner = bots[0].actions
        real_create = runner.client.create_pipeline

        def create(project_id, ref, variables, *args, **kwargs):
            if str(variables.get("RETRY_BOT_FAILED_JOB_ID")) == str(a):
                time.sleep(1.0)          # A's request is still in flight when B's lands
            return real_create(project_id, ref, variables, *args, **kwargs)

        def dying(*args, **kwargs):
            raise _Killed("own_pipeline")    # each writer thread dies before recording its pipeline
        runner.client.create_pipeline = create
        runner.store.own_pipeline = dying
        _cycle_until_killed(bots[0])
        made = {int(farm.standin.pipeline_variables(p.id).get("RETRY_BOT_FAILED_JOB_ID", 0)): p.id
                for p in farm.standin.pipelines() if farm.standin.pipeline_variables(p.id).get("RETRY_BOT_FAILED_JOB_ID")}
        assert set(made) == {a, b} and made[b] < made[a], made   # both made, B's first, neither claimed
        bots.pop().close()

        bots.append(make_bot(farm, tmp_path, ["grp/r"]))       # the restart, on the same state
        bot = bots[0]
        assert cycle_until(bot, lambda: not bot.store.open_intents(), timeout=30)
        outcome = {k: (i.status, i.error) for k in (f"resize:{a}", f"resize:{b}")
                   for i in [bot.store.get_action(k)]}
        assert all(s == "completed" for s, _ in outcome.values()), (
            f"pipelines {made} were made for jobs A={a}, B={b}; after the restart: {outcome}; "
            f"claims: A -> {bot.store.pipelines_of(f'resize:{a}:pipeline')}, "
            f"B -> {bot.store.pipelines_of(f'resize:{b}:pipeline')}")
    finally:
        for b_ in bots:
            b_.close()
        farm.close()


STORM_POLICY = POLICY + """
[storm]
families = ["infrastructure"]
window = "5m"
trip_failures = 2
probes = 1
probe_interval = "2m"
release_successes = 1
release_per_minute = 0
"""


@pytest.mark.parametrize("stopped_by", ["crash", "dry_run_restart"])
def test_one_failed_job_judged_twice_is_one_failure_for_the_storm_brake(tmp_path, stopped_by):
    """The brake counts a failure when the job is judged, before its decision is recorded.  A job
    judged again -- the process died in between, or a dry run (whose decisions stay provisional)
    was restarted -- was counted twice: one failed job tripped a brake set to trip at two."""
    farm = Farm({"dns": flaky_dns(1)})
    bots = []
    try:
        origin = _one_failed_job(farm, "grp/s")
        dry = stopped_by == "dry_run_restart"
        bots.append(make_bot(farm, tmp_path, ["grp/s"], policy=STORM_POLICY, dry_run=dry or None))
        if dry:
            for _ in range(3):
                bots[0].once()
        else:
            def dying(*args, **kwargs):
                raise _Killed("record_decision")
            bots[0].store.record_decision = dying
            _cycle_until_killed(bots[0])
        cats = bots[0].store.storm_categories()
        assert cats and all(len(c["failures"]) == 1 and not c["braked_since"] for c in cats.values()), cats
        bots.pop().close()

        bots.append(make_bot(farm, tmp_path, ["grp/s"], policy=STORM_POLICY, dry_run=dry or None))  # restart
        bot = bots[0]
        if dry:
            for _ in range(3):
                bot.once()
        else:
            assert cycle_until(bot, lambda: (bot.store.get_job(origin) is not None
                                             and bot.store.get_job(origin).decided), timeout=10)
        assert [j.id for j in farm.standin.jobs() if j.status == "failed"] == [origin]
        cats = bot.store.storm_categories()
        assert all(c["trips"] == 0 and not c["braked_since"] and len(c["failures"]) == 1 for c in cats.values()), \
            f"one failed job ({origin}) was counted twice: {cats}"
    finally:
        for b in bots:
            b.close()
        farm.close()


@pytest.mark.parametrize("dies_at", ["unfollow", "save_storm_categories"])
def test_a_crash_while_a_probes_success_is_recorded_still_releases_the_brake(tmp_path, dies_at):
    """A braked category's probe (a re-run the brake let through) succeeds; the process dies at one of
    the two writes that record it (the brake's state, the job leaving ``followed_jobs``).  After the
    restart the brake must be released.  (Unfollowing first lost the success for good: nothing
    follows the job again, and the brake held the category's re-runs on.)"""
    from dataclasses import asdict

    from retry_bot.storm import CategoryStorm
    farm = Farm({"dns": flaky_dns(1)})          # the origin fails (DNS), the probe (its retry) succeeds
    bots = []
    try:
        origin = _one_failed_job(farm, "grp/t")
        seed = open_store(f"sqlite:///{tmp_path / 'state.db'}")   # a fleet outage tripped the brake earlier
        seed.save_storm_categories({"dns_error": asdict(CategoryStorm(
            failures=[time.time() - 10], braked_since=time.time() - 60, probe_started=0.0,
            trips=1, family="infrastructure"))})
        seed.close()
        policy = STORM_POLICY.replace("trip_failures = 2", "trip_failures = 30").replace(
            'probe_interval = "2m"', 'probe_interval = "10m"')
        bots.append(make_bot(farm, tmp_path, ["grp/t"], policy=policy))
        store = bots[0].store
        real = getattr(store, dies_at)

        def dying(*args, **kwargs):
            if dies_at == "unfollow" and (kwargs.get("status") or "") in ("success", "failed"):
                raise _Killed(dies_at)
            if dies_at == "save_storm_categories" and (args[0].get("dns_error") or {}).get("successes", 0) \
                    or dies_at == "save_storm_categories" and (args[0].get("dns_error") or {}).get(
                        "braked_since", 1) is None:
                raise _Killed(dies_at)
            return real(*args, **kwargs)
        setattr(store, dies_at, dying)
        _cycle_until_killed(bots[0], 100)
        (copy,) = [j for j in farm.standin.jobs() if j.retry_of == origin]
        assert copy.status == "success"
        setattr(store, dies_at, real)
        bots.pop().close()

        bots.append(make_bot(farm, tmp_path, ["grp/t"], policy=policy))   # the restart
        bot = bots[0]

        def released() -> bool:
            st = bot.store.storm_categories().get("dns_error") or {}
            return st.get("braked_since") is None and bot.store.followed_job(copy.id) is None
        assert cycle_until(bot, released, timeout=10), (bot.store.storm_categories(),
                                                        bot.store.followed_job(copy.id))
        assert bot.store.storm_categories()["dns_error"]["trips"] == 1
    finally:
        for b in bots:
            b.close()
        farm.close()
