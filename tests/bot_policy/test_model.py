"""One model per concept (issue 14): the job's facts, from GitLab and through the state store."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from retry_bot.classify import facts_from_job_json
from retry_bot.model import Classification, Family, JobFacts

TEXT = st.text(max_size=12)
OPT_TEXT = st.none() | TEXT

facts_st = st.builds(
    JobFacts, job_id=st.integers(0, 2**40), name=TEXT, project_id=st.integers(0, 10**6), project_path=TEXT,
    pipeline_id=st.integers(0, 10**9), stage=TEXT, ref=TEXT, sha=OPT_TEXT, status=TEXT, failure_reason=OPT_TEXT,
    exit_code=st.none() | st.integers(0, 255), tags=st.lists(TEXT, max_size=3).map(tuple), runner=OPT_TEXT,
    pipeline_source=OPT_TEXT, protected=st.none() | st.booleans(), user=OPT_TEXT, allow_failure=st.booleans(),
    created_at=OPT_TEXT, finished_at=OPT_TEXT, web_url=OPT_TEXT,
    variables=st.dictionaries(TEXT, TEXT, max_size=3))


@settings(max_examples=200, deadline=None)
@given(facts_st)
def test_facts_survive_the_state_store_form(f):
    """The store's ``jobs.facts`` column is ``JobFacts.to_dict()`` as JSON; ``from_dict`` gives the facts back."""
    assert JobFacts.from_dict(json.loads(json.dumps(f.to_dict()))) == f


def test_an_older_facts_row_still_loads():
    f = JobFacts.from_dict({"job_id": 7, "name": "build", "tags": ["a"], "retired_field": 1})
    assert f == JobFacts(job_id=7, name="build", tags=("a",))


def test_one_function_builds_the_facts_from_rest_and_graphql():
    rest = {"id": 5, "name": "build", "ref": "main", "status": "failed", "failure_reason": "script_failure",
            "tag_list": ["small"], "pipeline": {"id": 9, "project_id": 3, "sha": "abc", "source": None},
            "user": {"username": "alice"}, "web_url": "http://g/j/5"}
    graphql = {"exitCode": 137, "retried": False, "manualJob": False, "pipeline": {"source": "push"}}
    f = facts_from_job_json(rest, graphql, project_id=3, project_path="grp/p")
    assert (f.job_id, f.exit_code, f.pipeline_source, f.project_path, f.project_id) == (5, 137, "push", "grp/p", 3)
    assert f.tags == ("small",) and f.sha == "abc" and f.user == "alice"
    # REST's own source wins; a GraphQL exitCode that is not an integer is no exit code
    f = facts_from_job_json({**rest, "pipeline": {**rest["pipeline"], "source": "web"}}, {"exitCode": None})
    assert f.pipeline_source == "web" and f.exit_code is None and f.project_id == 3


def test_classification_dict_is_what_the_store_keeps():
    c = Classification(category="oom", family=Family.OOM, rule="r", evidence=tuple(str(i) for i in range(12)))
    d = c.to_dict()
    assert d == {"family": "oom", "category": "oom", "rule": "r", "evidence": [str(i) for i in range(10)],
                 "confidence": "strong"}
    assert c.probability is None and "probability" not in d  # a rule's verdict is stored as it always was


def test_a_learned_verdict_keeps_its_probability_in_the_store_s_form():
    c = Classification(category="learned_oom", family=Family.OOM, rule="learned:oom", evidence=("p=0.93",),
                       confidence="weak", probability=0.93)
    d = c.to_dict()
    assert d == {"family": "oom", "category": "learned_oom", "rule": "learned:oom", "evidence": ["p=0.93"],
                 "confidence": "weak", "probability": 0.93}
    assert json.loads(json.dumps(d))["probability"] == 0.93
