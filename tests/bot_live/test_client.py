"""GitLabClient: bounded tenacity retries, 429 hints, writes never blindly repeated, keyset paging."""

from __future__ import annotations

import json

import pytest

from retry_bot.gitlab.client import (AmbiguousWrite, CallCounter, GitLabApiError, GitLabClient, NotFound,
                                     RetrySettings, WriteRejected, _retry_hint)
from tests.bot_live.scripted_http import Scripted


@pytest.fixture()
def srv():
    s = Scripted()
    yield s
    s.close()


def make(srv, **kw):
    sleeps: list[float] = []
    counter = CallCounter()
    c = GitLabClient(srv.url, "glpat-SECRET-token", retry=RetrySettings(max_attempts=4, backoff_base_seconds=0.01,
                                                                         request_timeout_seconds=5, **kw),
                     observer=counter, sleep=sleeps.append, clock=lambda: 1000.0)
    return c, sleeps, counter


def test_read_retries_5xx_then_succeeds(srv):
    srv.answers = [(502, {}, {"message": "bad gateway"}), (500, {}, {}), (200, {}, {"id": 7, "name": "build"})]
    c, sleeps, counter = make(srv)
    assert c.get_job(1, 7)["name"] == "build"
    assert len(sleeps) == 2 and counter.total == 3 and counter.errors == 2


def test_read_gives_up_after_bounded_attempts(srv):
    srv.default = (503, {}, {"message": "down"})
    c, sleeps, counter = make(srv)
    with pytest.raises(GitLabApiError, match="gave up after 4 attempts"):
        c.get_job(1, 7)
    assert counter.total == 4 and len(sleeps) == 3


def test_429_honours_retry_after_and_ratelimit_reset(srv):
    srv.answers = [(429, {"Retry-After": "7"}, {}), (429, {"RateLimit-Reset": "1003"}, {}), (200, {}, {"id": 1})]
    c, sleeps, _ = make(srv)
    c.get_job(1, 1)
    assert sleeps == [7.0, 3.0]


def test_retry_after_is_capped_and_http_date_understood():
    assert _retry_hint({"Retry-After": "Thu, 01 Jan 1970 00:16:50 GMT"}, 1000.0) == 10.0
    assert _retry_hint({"retry-after": "junk"}, 0) is None
    assert _retry_hint({}, 0) is None


def test_429_wait_is_capped(srv):
    srv.answers = [(429, {"Retry-After": "3600"}, {}), (200, {}, {"id": 1})]
    c, sleeps, _ = make(srv, max_wait_seconds=2.0)
    c.get_job(1, 1)
    assert sleeps == [2.0]


def test_write_5xx_is_ambiguous_and_not_repeated(srv):
    srv.answers = [(500, {}, {"message": "boom"})]
    c, sleeps, counter = make(srv)
    with pytest.raises(AmbiguousWrite):
        c.retry_job(1, 5)
    assert counter.total == 1 and sleeps == []


def test_write_dropped_connection_is_ambiguous(srv):
    srv.answers = ["drop"]
    c, _, counter = make(srv)
    with pytest.raises(AmbiguousWrite):
        c.create_pipeline(1, "main", {"A": "1"})
    assert len(srv.requests) == 1


def test_write_429_is_retried_because_gitlab_did_not_act(srv):
    srv.answers = [(429, {"Retry-After": "1"}, {}), (201, {}, {"id": 99})]
    c, sleeps, _ = make(srv)
    assert c.retry_job(1, 5)["id"] == 99
    assert sleeps == [1.0]


def test_write_4xx_is_rejected(srv):
    srv.answers = [(400, {}, {"message": "400 Unplayable Job"})]
    c, _, _ = make(srv)
    with pytest.raises(WriteRejected, match="Unplayable"):
        c.play_job(1, 5, {"KUBERNETES_MEMORY_LIMIT": "1Gi"})


def test_play_sends_job_variables_attributes_as_json_body(srv):
    srv.answers = [(200, {}, {"id": 5, "status": "pending"})]
    c, _, _ = make(srv)
    c.play_job(1, 5, {"KUBERNETES_MEMORY_LIMIT": "1Gi"})
    method, path, body = srv.requests[0]
    assert method == "POST" and path == "/api/v4/projects/1/jobs/5/play"
    assert json.loads(body) == {"job_variables_attributes": [{"key": "KUBERNETES_MEMORY_LIMIT", "value": "1Gi"}]}


def test_not_found(srv):
    c, _, _ = make(srv)
    with pytest.raises(NotFound):
        c.get_job(1, 5)


def test_keyset_pagination_follows_link_and_stops_lazily(srv):
    def page1(m, p, b):
        assert "pagination=keyset" in p and "scope%5B%5D=failed" in p and "sort=desc" in p
        return (200, {"Link": f'<{srv.url}/api/v4/projects/1/jobs?id_before=5&pagination=keyset>; rel="next"'},
                [{"id": 9}, {"id": 7}])
    srv.answers = [page1, (200, {}, [{"id": 3}])]
    c, _, counter = make(srv)
    it = c.iter_failed_jobs(1, per_page=2)
    assert next(it)["id"] == 9
    assert counter.total == 1          # lazily: the second page is not fetched yet
    assert [j["id"] for j in it] == [7, 3]
    assert counter.total == 2


def test_trace_tail_is_bounded(srv):
    srv.answers = [(200, {}, b"x" * 100_000 + b"THE END")]
    c, _, _ = make(srv)
    tail = c.trace_tail(1, 5, max_bytes=1000)
    assert len(tail) == 1000 and tail.endswith(b"THE END")
