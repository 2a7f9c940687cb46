"""GraphQL through python-gitlab's ``gitlab.GraphQL`` (gql + httpx), against a real graphql-core schema."""

from __future__ import annotations

import gitlab
import pytest
from gql.transport.exceptions import TransportQueryError

from standin.gitlab import StandIn

from .conftest import CHILD_YAML, run_first_pending

# python-gitlab's GraphQL.execute passes variable_values the way gql 4 deprecates; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:Using variable_values:DeprecationWarning")

JOB_QUERY = """
query($path: ID!, $id: JobID!) {
  project(fullPath: $path) {
    job(id: $id) {
      id name status exitCode retried retryable playable manualJob failureMessage kind
      stage { name }
      manualVariables { nodes { key value } }
      pipeline { id iid ... on Pipeline { status source } }
    }
  }
}
"""

RETRY = """
mutation($id: CiProcessableID!, $variables: [CiVariableInput!]) {
  jobRetry(input: {id: $id, variables: $variables}) {
    job { id status manualVariables { nodes { key value } } }
    errors
  }
}
"""


def _gid(job_id: int) -> str:
    return f"gid://gitlab/Ci::Build/{job_id}"


def _manual_child_job(standin: StandIn) -> int:
    pipe = standin.create_pipeline("team/app", "main", source="api", variables={"RETRY_BOT_CHILD_YAML": CHILD_YAML})
    run_first_pending(standin, "success", artifacts={"retry-bot-child.yml": CHILD_YAML})
    bridge = next(j for j in standin.jobs(pipeline_id=pipe.id) if j.name == "retry-bot-child")
    (manual,) = standin.jobs(pipeline_id=bridge.downstream_pipeline_id)
    return manual.id


def test_job_fields_rest_lacks(standin: StandIn, gq: gitlab.GraphQL) -> None:
    standin.create_pipeline("team/app", "main")
    job_id = run_first_pending(standin, "failed", failure_reason="script_failure", exit_code=137)
    job = gq.execute(JOB_QUERY, variable_values={"path": "team/app", "id": _gid(job_id)})["project"]["job"]
    assert job["id"] == _gid(job_id) and job["status"] == "FAILED" and job["exitCode"] == 137
    assert job["retried"] is False and job["retryable"] is True and job["playable"] is False
    assert job["manualJob"] is False and job["kind"] == "BUILD" and job["stage"] == {"name": "build"}
    assert "script failure" in job["failureMessage"]
    assert job["pipeline"]["source"] == "push" and job["pipeline"]["status"] == "FAILED"
    other = gq.execute(JOB_QUERY, variable_values={"path": "team/app", "id": _gid(999999)})
    assert other == {"project": {"job": None}}


def test_job_retry_on_manual_job_starts_at_once_with_variables(standin: StandIn, gq: gitlab.GraphQL) -> None:
    manual_id = _manual_child_job(standin)
    standin.state.play_job(manual_id, user=standin.user, variables={"KUBERNETES_MEMORY_LIMIT": "512Mi"})
    run_first_pending(standin, "failed", failure_reason="script_failure", exit_code=137)
    answer = gq.execute(RETRY, variable_values={"id": _gid(manual_id), "variables": [
        {"key": "KUBERNETES_MEMORY_LIMIT", "value": "1Gi"}]})["jobRetry"]
    assert answer["errors"] == []
    new = answer["job"]
    assert new["id"] != _gid(manual_id) and new["status"] == "PENDING"
    assert new["manualVariables"]["nodes"] == [{"key": "KUBERNETES_MEMORY_LIMIT", "value": "1Gi"}]
    old = gq.execute(JOB_QUERY, variable_values={"path": "team/app", "id": _gid(manual_id)})["project"]["job"]
    assert old["retried"] is True and old["manualJob"] is True
    assert old["manualVariables"]["nodes"] == [{"key": "KUBERNETES_MEMORY_LIMIT", "value": "512Mi"}]


def test_job_retry_ignores_variables_for_non_manual_jobs(standin: StandIn, gq: gitlab.GraphQL) -> None:
    standin.create_pipeline("team/app", "main")
    job_id = run_first_pending(standin, "failed", failure_reason="script_failure")
    answer = gq.execute(RETRY, variable_values={"id": _gid(job_id), "variables": [{"key": "A", "value": "1"}]})
    new_id = int(answer["jobRetry"]["job"]["id"].rsplit("/", 1)[1])
    assert standin.get_job(new_id).job_variables == []


def test_job_retry_errors_and_play_mutation(standin: StandIn, gq: gitlab.GraphQL) -> None:
    manual_id = _manual_child_job(standin)
    refused = gq.execute(RETRY, variable_values={"id": _gid(manual_id), "variables": []})["jobRetry"]
    assert refused == {"job": None, "errors": ["Job is not retryable"]}
    play = gq.execute("""mutation($id: CiProcessableID!) { jobPlay(input: {id: $id,
        variables: [{key: "MEM", value: "2Gi"}]}) { job { id status } errors } }""",
                      variable_values={"id": _gid(manual_id)})["jobPlay"]
    assert play == {"job": {"id": _gid(manual_id), "status": "PENDING"}, "errors": []}
    with pytest.raises(TransportQueryError, match="not a valid Global ID"):
        gq.execute(RETRY, variable_values={"id": str(manual_id), "variables": []})


def test_pipelines_and_child_pipelines(standin: StandIn, gq: gitlab.GraphQL) -> None:
    _manual_child_job(standin)
    data = gq.execute("""query { project(fullPath: "team/app") {
        pipelines(first: 10) { count nodes { iid source status
          jobs(retried: false) { nodes { name status } }
          downstream { nodes { source jobs { nodes { name status manualJob } } } } } } } }""")
    (parent,) = [p for p in data["project"]["pipelines"]["nodes"] if p["source"] == "api"]
    assert {j["name"] for j in parent["jobs"]["nodes"]} == {"retry-bot-generate", "retry-bot-child"}
    (child,) = parent["downstream"]["nodes"]
    assert child["jobs"]["nodes"] == [{"name": "compile-upgraded", "status": "MANUAL", "manualJob": True}]


def test_bad_token_is_401_and_anonymous_sees_nothing(standin: StandIn) -> None:
    with gitlab.GraphQL(standin.url, token="wrong") as bad:
        # GitLab answers 401 with a GraphQL errors body, so gql raises a query error, not an auth error
        with pytest.raises(TransportQueryError, match="Invalid token"):
            bad.execute('query { project(fullPath: "team/app") { id } }')
    with gitlab.GraphQL(standin.url) as anonymous:
        assert anonymous.execute('query { project(fullPath: "team/app") { id } }') == {"project": None}
