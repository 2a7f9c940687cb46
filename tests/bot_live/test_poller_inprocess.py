"""The poller and the action runner in process, against a fake GitLab client (tests/common/fake_gitlab.py).

The same paths as the end-to-end tests over HTTP (test_live_bot.py, test_faults_and_crash.py), in
milliseconds: a failed OOM job gets a re-creation intent and the writes that carry it out; a build
error gets nothing; a transient failure gets one retry; a crash between the intent and its write,
or between the write and its record, is resumed exactly once.  Only the public entry points are used
(``Poller.run_cycle``, ``ActionRunner``), with a real SQLite state store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest

from retry_bot.live.actions import ActionRequest, ActionRunner, ActionSettings
from retry_bot.classify import load_taxonomy
from retry_bot.gitlab.recreate import ORIGIN_VARIABLE, decode_config
from retry_bot.policy import parse_policy
from retry_bot.live.poller import Poller, PollerSettings
from retry_bot.state import Store, open_store
from runner_wrapper.record import AppliedLimits, HostInfo, JobIdentity, Usage, UsageRecord, encode_marker
from tests.bot_live.farm import KEY, KEY_ID, POLICY, project_config
from tests.common.fake_gitlab import Crash, FakeGitLab, Write

MiB = 2**20
SETTLE = 60.0
PROJECT = "grp/app"
JOBS = {"build": {"stage": "build", "tags": ["small"], "script": ["make"],
                  "variables": {"KUBERNETES_MEMORY_LIMIT": "128Mi"}},
        "fetch": {"stage": "build", "tags": ["small"], "script": ["curl -fsS https://mirror.example.org/x"]}}
DNS_TRACE = (b"$ curl -fsS https://mirror.example.org/pkg.tar.gz\n"
             b"curl: (6) Could not resolve host: mirror.example.org\nERROR: Job failed: exit status 6\n")
COMPILE_TRACE = (b"$ make\nmain.c:3:5: error: expected ';' before '}' token\n"
                 b"make: *** [Makefile:2: main.o] Error 1\nERROR: Job failed: exit status 1\n")


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


class BotProcess:
    """One bot process: a poller and an action runner over the fake GitLab and a state store.

    A new ``BotProcess`` on the same state file is the process restarted after a crash.
    """

    def __init__(self, gitlab: FakeGitLab, state: Path, clock: Clock) -> None:
        self.store: Store = open_store(f"sqlite:///{state}", clock=clock)
        self.actions = ActionRunner(gitlab, self.store, clock=clock, settings=ActionSettings(settle_seconds=SETTLE))
        self.poller = Poller(gitlab, self.store, settings=PollerSettings(projects=(PROJECT,), read_concurrency=1),
                             policy=lambda: POLICY_OBJ, taxonomy=TAXONOMY, signing_keys={KEY_ID: KEY},
                             actions=self.actions, clock=clock)

    def close(self) -> None:
        self.store.close()


POLICY_OBJ = parse_policy(POLICY)
TAXONOMY = load_taxonomy()


@pytest.fixture()
def clock() -> Clock:
    return Clock()


@pytest.fixture()
def gitlab(clock: Clock) -> FakeGitLab:
    g = FakeGitLab(clock)
    g.add_project(PROJECT, project_config(JOBS))
    return g


@pytest.fixture()
def bots(tmp_path: Path, gitlab: FakeGitLab, clock: Clock) -> Iterator[Callable[[], BotProcess]]:
    """Start a bot process (again) on the test's state file; all are closed at the end."""
    started: list[BotProcess] = []

    def start() -> BotProcess:
        b = BotProcess(gitlab, tmp_path / "state.db", clock)
        started.append(b)
        return b

    yield start
    for b in started:
        b.close()


def oom_trace(job: dict, limit: int) -> bytes:
    """The job log of an OOM kill at ``limit``, with the wrapper's signed usage record."""
    p = job["pipeline"]
    rec = UsageRecord(job=JobIdentity(id=job["id"], project_id=p["project_id"], project_path=PROJECT,
                                      pipeline_id=p["id"], name=job["name"], stage=job["stage"]),
                      host=HostInfo(hostname="farm", backend="cgroup-v1"), limits=AppliedLimits(memory_limit_bytes=limit),
                      usage=Usage(wall_seconds=1.0, memory_peak_bytes=limit, oom_kills=1),
                      started_at="2026-11-21T00:00:00Z", finished_at="2026-11-21T00:00:01Z", exit_code=137)
    return (b"c++ -O2 big.cpp\nrunner-wrapper: OOM: the build was killed at its memory limit\n"
            + encode_marker(rec.to_dict(), KEY, KEY_ID).encode() + b"\nERROR: Job failed: exit status 137\n")


def failed_oom_job(gitlab: FakeGitLab) -> dict:
    pid = gitlab.project_id(PROJECT)
    job = gitlab.failed_job(pid, "build", trace=b"", exit_code=137)
    gitlab.traces[job["id"]] = oom_trace(job, 128 * MiB)
    return job


def test_oom_job_gets_a_recreation_intent_then_a_pipeline_and_a_play_with_more_memory(gitlab, bots, clock):
    origin = failed_oom_job(gitlab)
    bot = bots()
    report = bot.poller.run_cycle()
    [out] = report.decided
    assert (out.job_id, out.family, out.action, out.acted) == (origin["id"], "oom", "resize", "waiting"), out
    [intent] = [i for i in bot.store.open_intents() if i.idempotency_key == f"resize:{origin['id']}"]
    assert intent.payload["variables"]["KUBERNETES_MEMORY_LIMIT"] == "384Mi"     # 128Mi + min_bump 256Mi
    [write] = gitlab.writes
    assert write.kind == "create_pipeline" and write.target == "main"
    assert write.variables[ORIGIN_VARIABLE] == str(origin["id"])
    child = decode_config(write.variables["RETRY_BOT_CHILD_CONFIG"])
    assert "build" in child and "manual" in child

    assert bot.poller.run_cycle().decided == []       # the child pipeline is not processed yet: waiting
    assert [w.kind for w in gitlab.writes] == ["create_pipeline"]
    gitlab.process()
    bot.poller.run_cycle()
    [copy] = [j for j in gitlab.jobs_named("build") if j["id"] != origin["id"]]
    assert gitlab.writes[1:] == [Write("play", copy["id"], dict(intent.payload["variables"]))]
    assert gitlab.job_variables[copy["id"]]["KUBERNETES_MEMORY_LIMIT"] == "384Mi"
    assert bot.store.get_action(f"resize:{origin['id']}").status == "completed"
    assert [m.job_id for m in bot.store.lineage_for(origin["id"]).attempts] == [origin["id"], copy["id"]]
    bot.poller.run_cycle()
    assert len(gitlab.writes) == 2                    # nothing more to do


def test_a_settled_resize_s_pipeline_claim_is_forgotten_after_follow_max_age(gitlab, bots, clock):
    origin = failed_oom_job(gitlab)
    bot = bots()
    bot.poller.run_cycle()
    gitlab.process()
    bot.poller.run_cycle()
    assert bot.store.get_action(f"resize:{origin['id']}").status == "completed"
    [pipeline] = bot.store.pipelines_of(f"resize:{origin['id']}:pipeline")
    clock.now += bot.poller.settings.follow_max_age - 60
    bot.poller.run_cycle()
    assert bot.store.pipeline_owner(pipeline) is not None           # younger than follow_max_age: kept
    clock.now += 120
    bot.poller.run_cycle()
    assert bot.store.pipeline_owner(pipeline) is None and bot.store.stats()["bot_pipelines"] == 0
    assert len(gitlab.writes) == 2                                  # forgetting the claim wrote nothing


def test_a_build_error_gets_no_intent_and_no_write(gitlab, bots):
    job = gitlab.failed_job(gitlab.project_id(PROJECT), "build", trace=COMPILE_TRACE, exit_code=1)
    bot = bots()
    [out] = bot.poller.run_cycle().decided
    assert (out.job_id, out.family, out.action, out.acted) == (job["id"], "build_error", "none", ""), out
    assert gitlab.writes == [] and bot.store.open_intents() == []
    assert bot.store.get_job(job["id"]).decided
    assert bot.poller.run_cycle().decided == []       # decided once, never again


def test_a_transient_failure_gets_one_retry(gitlab, bots):
    job = gitlab.failed_job(gitlab.project_id(PROJECT), "fetch", trace=DNS_TRACE, exit_code=6)
    bot = bots()
    [out] = bot.poller.run_cycle().decided
    assert (out.family, out.action, out.acted) == ("infrastructure", "retry", "done"), out
    assert gitlab.writes == [Write("retry", job["id"])]
    [new] = [j for j in gitlab.jobs_named("fetch") if j["id"] != job["id"]]
    assert new["status"] == "pending" and job["id"] in gitlab.retried
    assert bot.store.get_action(f"retry:{job['id']}").status == "completed"
    gitlab.finish(new["id"], "failed")                # the retry fails again: the budget (1) is spent
    gitlab.traces[new["id"]] = DNS_TRACE
    gitlab.exit_codes[new["id"]] = 6
    [again] = bot.poller.run_cycle().decided
    assert again.job_id == new["id"] and again.action == "none", again
    assert gitlab.writes == [Write("retry", job["id"])]


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_crash_around_the_retry_write_is_resumed_exactly_once(gitlab, bots, clock, when):
    """``before``: the intent is committed, the process dies before its write reaches GitLab;
    ``after``: GitLab retried the job, the process died before recording it.  The restarted
    process reads GitLab before writing: one retry in GitLab either way."""
    job = gitlab.failed_job(gitlab.project_id(PROJECT), "fetch", trace=DNS_TRACE, exit_code=6)
    gitlab.crash = ("retry", when)
    with pytest.raises(Crash):
        bots().poller.run_cycle()
    assert len(gitlab.writes) == (1 if when == "after" else 0)

    bot = bots()                                       # the restart
    clock.now += 1
    bot.poller.run_cycle()
    if when == "before":                               # not seen in GitLab; an old write may still land
        assert gitlab.writes == [] and bot.store.open_intents()
        clock.now += SETTLE
        bot.poller.run_cycle()
    assert gitlab.writes == [Write("retry", job["id"])]
    action = bot.store.get_action(f"retry:{job['id']}")
    assert action.status == "completed" and action.result["observed"] is (when == "after")
    [new] = [j for j in gitlab.jobs_named("fetch") if j["id"] != job["id"]]
    assert action.result["new_job_id"] == new["id"]
    clock.now += 10 * SETTLE
    bot.poller.run_cycle()
    bots().poller.run_cycle()                          # and once more after another restart
    assert gitlab.writes == [Write("retry", job["id"])]


@pytest.mark.parametrize("step", ["create_pipeline", "play"])
def test_a_crash_in_a_resize_is_resumed_by_a_new_action_runner_exactly_once(gitlab, bots, clock, step):
    """Through ``ActionRunner`` alone: each of the resize's two writes lands, then the process dies
    before recording it; a new runner on the same store finds it done in GitLab and goes on."""
    origin = failed_oom_job(gitlab)
    req = ActionRequest(kind="resize", project_id=origin["pipeline"]["project_id"], project_path=PROJECT,
                        job_id=origin["id"], job_name="build", pipeline_id=origin["pipeline"]["id"], ref="main",
                        origin_job_id=origin["id"], attempt=2, variables={"KUBERNETES_MEMORY_LIMIT": "384Mi"},
                        family="oom", category="oom_killed",
                        pipeline_variables={"RETRY_BOT_CHILD_CONFIG": _child_config(gitlab, origin),
                                            ORIGIN_VARIABLE: str(origin["id"])})
    first = bots().actions
    intent = first.start(req)
    gitlab.crash = (step, "after")
    with pytest.raises(Crash):
        first.drive(intent)
        gitlab.process()
        first.drive(intent)
    gitlab.process()

    runner = bots().actions                            # the restart
    clock.now += 10 * SETTLE
    for _ in range(3):
        outs = runner.resume_all()
    assert outs == [] or all(o.status == "done" for o in outs)
    assert [w.kind for w in gitlab.writes] == ["create_pipeline", "play"]
    done = runner.store.get_action(req.key)
    assert done.status == "completed"
    [copy] = [j for j in gitlab.jobs_named("build") if j["id"] != origin["id"]]
    assert done.result["new_job_id"] == copy["id"] and copy["status"] == "pending"
    assert gitlab.job_variables[copy["id"]] == {"KUBERNETES_MEMORY_LIMIT": "384Mi"}


def _child_config(gitlab: FakeGitLab, origin: dict) -> str:
    """The bot's own child configuration for ``origin`` (as the poller builds it)."""
    from retry_bot.gitlab.jobdef import find_job
    from retry_bot.gitlab.recreate import ChildPipelineSpec, build_child_config, encode_config

    defn = find_job(gitlab.configs[origin["pipeline"]["sha"]], "build")
    spec = ChildPipelineSpec(origin_job_id=origin["id"], origin_pipeline_id=origin["pipeline"]["id"],
                             failed_job_id=origin["id"], attempt=2, runner_class=None, tags=("small",),
                             timeout_seconds=None, origin_sha=origin["pipeline"]["sha"])
    return encode_config(build_child_config(defn, spec))
