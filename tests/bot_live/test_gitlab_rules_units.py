"""Pure pieces of the GitLab fixes: the 400 hint, validation-error detection, version features."""

from __future__ import annotations

import pytest

from retry_bot.live.actions import pipeline_creation_hint
from retry_bot.gitlab.client import GitLabFeatures, _is_validation_error
from retry_bot.gitlab.recreate import decode_config, encode_config


@pytest.mark.parametrize("message, expected", [
    ("400 {'base': ['Insufficient permissions to set pipeline variables']}", "ci_pipeline_variables_minimum_override_role"),
    ("400 {'base': [\"You do not have sufficient permission to run a pipeline on 'main'. Please select...\"]}",
     "the ref is protected"),
    ("400 {'base': ['Pipeline filtered out by workflow rules.']}", "workflow:rules"),
    ("400 {'base': ['Pipeline will not run for the selected trigger. The rules configuration prevented any jobs "
     "from being added to the pipeline.']}", "no job of the bot's pipeline is in a normal stage"),
    ("400 {'base': ['Insufficient permissions to create a new pipeline']}", "Developer role"),
    ("400 {'base': ['Reference not found']}", "ref no longer exists"),
])
def test_the_400_hint_names_the_cause_gitlab_gave(message, expected):
    assert expected in pipeline_creation_hint(message)


class _Exc:
    def __init__(self, errors, data=None):
        self.errors, self.data = errors, data


def test_validation_errors_are_told_from_execution_errors():
    # graphql-core / graphql-ruby static validation: no data, no path or a path from the operation type
    assert _is_validation_error(_Exc([{"message": "Cannot query field 'source' on type 'PipelineInterface'",
                                       "locations": [{"line": 1, "column": 2}]}]))
    assert _is_validation_error(_Exc([{"message": "Field 'source' doesn't exist on type 'PipelineInterface'",
                                       "path": ["query", "project", "job", "pipeline", "source"],
                                       "extensions": {"code": "undefinedField"}}]))
    # an execution error: data present, a response path
    assert not _is_validation_error(_Exc([{"message": "boom", "path": ["project", "job"]}], data={"project": None}))


@pytest.mark.parametrize("version, exit_code, job_retry, supported", [
    ("15.11.3", False, False, False), ("16.0.0", False, False, True), ("16.4.1-ee", False, True, True),
    ("16.10.0", True, True, True), ("18.6.0", True, True, True), ("nonsense", True, True, True),
])
def test_features_by_version(version, exit_code, job_retry, supported):
    f = GitLabFeatures.from_version(version)
    assert (f.exit_code, f.job_retry, f.supported) == (exit_code, job_retry, supported)
    assert bool(f.missing()) == (not (exit_code and job_retry and supported))


def test_the_encoded_configuration_has_no_dollar_and_round_trips():
    text = '{"j":{"script":["echo $A ${B} $$ $? $(x) \\u00e9"]}}'
    enc = encode_config(text)
    assert "$" not in enc and decode_config(enc) == text
