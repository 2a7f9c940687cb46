"""Fault injection: 429 with Retry-After, 5xx, slow answers, dropped connections, before/after the change."""

from __future__ import annotations

import time

import gitlab
import pytest
import requests

from standin.gitlab import Fault, FaultInjector, StandIn

from .conftest import run_first_pending

RETRY_PATH = r"/jobs/\d+/retry$"


def _failed_job(standin: StandIn) -> int:
    standin.create_pipeline("team/app", "main")
    return run_first_pending(standin, "failed", failure_reason="runner_system_failure")


@pytest.mark.slow
def test_rate_limit_is_honoured_by_python_gitlab(standin: StandIn, gl: gitlab.Gitlab) -> None:
    standin.faults.add(kind="rate_limit", path=r"/projects/1$", times=1, retry_after=1)
    started = time.monotonic()
    assert gl.projects.get(1).id == 1
    assert time.monotonic() - started >= 0.9               # slept for Retry-After
    assert [c.status for c in standin.calls] == [429, 200]
    raw = requests.get(f"{standin.url}/api/v4/projects/1", headers={"PRIVATE-TOKEN": standin.token}, timeout=5)
    assert raw.status_code == 200
    standin.faults.add(kind="rate_limit", path=r"/projects/1$", times=1, retry_after=7)
    limited = requests.get(f"{standin.url}/api/v4/projects/1", headers={"PRIVATE-TOKEN": standin.token}, timeout=5)
    assert limited.status_code == 429 and limited.headers["Retry-After"] == "7"
    assert int(limited.headers["RateLimit-Reset"]) >= int(time.time()) + 6
    assert limited.headers["RateLimit-Remaining"] == "0"


def test_rate_limit_without_retry_after_uses_ratelimit_reset(standin: StandIn) -> None:
    standin.faults.add(kind="rate_limit", path="/projects/1$", times=1, retry_after=None, rate_limit_reset=3)
    limited = requests.get(f"{standin.url}/api/v4/projects/1", headers={"PRIVATE-TOKEN": standin.token}, timeout=5)
    assert "Retry-After" not in limited.headers and limited.headers["RateLimit-Reset"]


def test_5xx_before_leaves_state_alone_and_is_retried(standin: StandIn) -> None:
    job_id = _failed_job(standin)
    standin.faults.add(kind="status", status=502, path=RETRY_PATH, method="POST", times=1)
    plain = gitlab.Gitlab(standin.url, private_token=standin.token)
    with pytest.raises(gitlab.GitlabJobRetryError) as err:
        plain.projects.get(1, lazy=True).jobs.get(job_id, lazy=True).retry()
    assert err.value.response_code == 502 and standin.get_job(job_id).retried is False
    standin.faults.add(kind="status", status=503, path=RETRY_PATH, method="POST", times=2)
    patient = gitlab.Gitlab(standin.url, private_token=standin.token, retry_transient_errors=True)
    new = patient.projects.get(1, lazy=True).jobs.get(job_id, lazy=True).retry()
    assert new["id"] != job_id
    assert [c.status for c in standin.calls_matching("POST", RETRY_PATH)] == [502, 503, 503, 201]


def test_dropped_connection_before_the_change(standin: StandIn, gl: gitlab.Gitlab) -> None:
    job_id = _failed_job(standin)
    standin.faults.add(kind="drop", path=RETRY_PATH, times=1)
    with pytest.raises(requests.ConnectionError):
        gl.projects.get(1, lazy=True).jobs.get(job_id, lazy=True).retry()
    assert standin.get_job(job_id).retried is False
    assert standin.calls[-1].status is None and standin.calls[-1].fault == "drop@before"


def test_dropped_answer_after_the_change_means_gitlab_acted(standin: StandIn, gl: gitlab.Gitlab) -> None:
    job_id = _failed_job(standin)
    before = len(standin.jobs())
    standin.faults.add(kind="drop", phase="after", path=RETRY_PATH, times=1)
    with pytest.raises(requests.ConnectionError):
        gl.projects.get(1, lazy=True).jobs.get(job_id, lazy=True).retry()
    assert standin.get_job(job_id).retried is True and len(standin.jobs()) == before + 1
    # reading state first is what tells the bot not to retry again
    newest = gl.projects.get(1, lazy=True).jobs.list(get_all=True)[0]
    assert newest.name == "compile" and newest.status == "pending"


def test_transient_retry_of_python_gitlab_repeats_a_post_whose_answer_was_lost(standin: StandIn) -> None:
    """The hazard the bot must avoid: retry_transient_errors=True re-sends non-idempotent POSTs."""
    job_id = _failed_job(standin)
    standin.faults.add(kind="drop", phase="after", path=RETRY_PATH, times=1)
    naive = gitlab.Gitlab(standin.url, private_token=standin.token, retry_transient_errors=True)
    naive.projects.get(1, lazy=True).jobs.get(job_id, lazy=True).retry()
    compiles = [j for j in standin.jobs("team/app") if j.name == "compile"]
    assert len(compiles) == 3                 # the original, the lost retry, and the duplicate


def test_status_after_the_change(standin: StandIn, gl: gitlab.Gitlab) -> None:
    pipelines = len(standin.pipelines())
    standin.faults.add(kind="status", status=500, phase="after", path=r"/pipeline$", method="POST", times=1)
    with pytest.raises(gitlab.GitlabCreateError) as err:
        gl.projects.get(1, lazy=True).pipelines.create({"ref": "main"})
    assert err.value.response_code == 500 and len(standin.pipelines()) == pipelines + 1


def test_slow_answer_times_out_the_client_but_the_server_acted(standin: StandIn) -> None:
    job_id = _failed_job(standin)
    standin.faults.add(kind="slow", delay=1.0, phase="after", path=RETRY_PATH, times=1)
    impatient = gitlab.Gitlab(standin.url, private_token=standin.token, timeout=0.3)
    with pytest.raises(requests.Timeout):
        impatient.projects.get(1, lazy=True).jobs.get(job_id, lazy=True).retry()
    assert standin.get_job(job_id).retried is True


def test_slow_graphql_and_5xx_graphql(standin: StandIn) -> None:
    standin.faults.add(kind="status", status=503, path="^/api/graphql$", times=1)
    with gitlab.GraphQL(standin.url, token=standin.token, retry_transient_errors=True) as gq:
        assert gq.execute('query { project(fullPath: "team/app") { fullPath } }') == {"project": {"fullPath": "team/app"}}
    assert [c.status for c in standin.calls_matching("POST", "graphql")] == [503, 200]
    standin.faults.add(kind="rate_limit", path="^/api/graphql$", times=1, retry_after=0)
    with gitlab.GraphQL(standin.url, token=standin.token) as gq:
        assert gq.execute('query { project(fullPath: "team/app") { name } }') == {"project": {"name": "app"}}
    assert [c.status for c in standin.calls_matching("POST", "graphql")][-2:] == [429, 200]


def test_plans_skip_and_seeded_probability_are_deterministic() -> None:
    injector = FaultInjector(seed=7)
    scripted = injector.add(Fault(kind="status", path="/a$", skip=1, plan=[True, False, True]))
    hits = [injector.decide("GET", "/a") is scripted for _ in range(6)]
    assert hits == [False, True, False, True, False, False]

    def run(seed: int) -> list[bool]:
        inj = FaultInjector(seed=seed)
        inj.add(kind="drop", path="/b", probability=0.3)
        return [inj.decide("POST", "/b") is not None for _ in range(200)]

    assert run(1) == run(1) and run(1) != run(2)
    assert 40 <= sum(run(1)) <= 80
    limited = FaultInjector()
    limited.add(kind="drop", path="/c", method="POST", times=2)
    assert [limited.decide("POST", "/c") is not None for _ in range(4)] == [True, True, False, False]
    assert limited.decide("GET", "/c") is None


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"kind": "explode"}, "unknown fault kind"),
    ({"kind": "drop", "phase": "during"}, "unknown fault phase"),
    ({"kind": "drop", "probability": 2}, "probability"),
    ({"kind": "status", "status": 200}, "error status"),
])
def test_bad_fault_definitions_are_named(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Fault(**kwargs)  # type: ignore[arg-type]


def test_twenty_percent_failures_with_retrying_client(standin: StandIn) -> None:
    for _ in range(5):
        _failed_job(standin)
    standin.faults.reseed(42)
    standin.faults.add(kind="status", status=503, path="/api/v4/", probability=0.2)
    client = gitlab.Gitlab(standin.url, private_token=standin.token, retry_transient_errors=True)
    project = client.projects.get(1, lazy=True)
    failed = [j.id for j in project.jobs.list(scope=["failed"], pagination="keyset", order_by="id", sort="desc",
                                              per_page=2, iterator=True)]
    assert len(failed) == 5
    faults = [c for c in standin.calls if c.fault]
    assert faults and all(c.status == 503 for c in faults)


@pytest.mark.slow
def test_wait_for_request_sees_a_request_held_by_a_slow_fault(standin: StandIn) -> None:
    import threading

    job_id = _failed_job(standin)
    standin.faults.add(kind="slow", delay=1.0, phase="after", path=RETRY_PATH, times=1)
    client = gitlab.Gitlab(standin.url, private_token=standin.token, timeout=5)
    worker = threading.Thread(target=lambda: client.projects.get(1, lazy=True).jobs.get(job_id, lazy=True).retry())
    worker.start()
    assert standin.wait_for_request("POST", RETRY_PATH, timeout=5)
    assert standin.wait_for(lambda: standin.get_job(job_id).retried, timeout=5)   # acted, answer still held
    assert not standin.calls_matching("POST", RETRY_PATH)                           # not answered yet
    worker.join(10)
    assert [c.status for c in standin.calls_matching("POST", RETRY_PATH)] == [201]
    assert not standin.wait_for_request("POST", RETRY_PATH, count=2, timeout=0.1)


def test_rate_limit_window_answers_429_with_retry_after(standin: StandIn) -> None:
    rate = standin.faults.add_rate_limit(3, r"/jobs$", period=30)
    headers = {"PRIVATE-TOKEN": standin.token}
    answers = [requests.get(f"{standin.url}/api/v4/projects/1/jobs", headers=headers, timeout=5) for _ in range(5)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429, 429]
    assert 1 <= int(answers[3].headers["Retry-After"]) <= 30 and rate.limited == 2
    assert requests.get(f"{standin.url}/api/v4/projects/1", headers=headers, timeout=5).status_code == 200
    short = FaultInjector()
    window = short.add_rate_limit(1, "/x", period=0.2)
    assert short.decide("GET", "/x") is None and short.decide("GET", "/x") is not None
    time.sleep(0.25)
    assert short.decide("GET", "/x") is None and window.limited == 1
