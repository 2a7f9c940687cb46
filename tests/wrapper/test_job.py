"""Job identity comes from JOB_RESPONSE_FILE, never from CUSTOM_ENV_*."""

import json

import pytest

from runner_wrapper.job import JobError, job_from_payload, load_job

from .conftest import make_payload


def test_identity_from_payload(tmp_path, monkeypatch):
    p = make_payload(77, variables={"KUBERNETES_MEMORY_LIMIT": "1Gi", "SECRET_TOKEN": "s3cr3t",
                                    "SPACK_JOB_SPEC_PKG_NAME": "zlib"})
    p["variables"].append({"key": "MASKED_MEM", "value": "x", "masked": True})
    f = tmp_path / "response.json"
    f.write_text(json.dumps(p))
    monkeypatch.setenv("CUSTOM_ENV_CI_JOB_ID", "1")  # a user override must not matter
    job = load_job(str(f))
    ident = job.identity
    assert (ident.id, ident.project_id, ident.project_path, ident.pipeline_id, ident.name, ident.ref,
            ident.protected) == (77, 7, "group/p", 99, "build", "main", True)
    assert ident.variables == {"KUBERNETES_MEMORY_LIMIT": "1Gi", "SPACK_JOB_SPEC_PKG_NAME": "zlib"}
    assert job.variables["SECRET_TOKEN"] == "s3cr3t" and "MASKED_MEM" in job.masked
    assert job.timeout == 3600


def test_last_variable_occurrence_wins():
    p = make_payload(1, variables={"KUBERNETES_MEMORY_LIMIT": "1Gi"})
    p["variables"].append({"key": "KUBERNETES_MEMORY_LIMIT", "value": "2Gi"})
    assert job_from_payload(p).variables["KUBERNETES_MEMORY_LIMIT"] == "2Gi"


@pytest.mark.parametrize("payload,fragment", [
    ([], "not a JSON object"),
    ({"id": "12"}, "'id' must be a positive integer"),
    ({"id": 1, "variables": {}}, "'variables' must be a list"),
])
def test_bad_payloads(payload, fragment):
    with pytest.raises(JobError, match=fragment):
        job_from_payload(payload)


def test_missing_or_broken_file(tmp_path):
    with pytest.raises(JobError, match="JOB_RESPONSE_FILE is not set"):
        load_job("")
    with pytest.raises(JobError, match="no such file"):
        load_job(str(tmp_path / "x.json"))
    (tmp_path / "b.json").write_text("{")
    with pytest.raises(JobError, match="not JSON"):
        load_job(str(tmp_path / "b.json"))


def test_recorded_variables_follow_the_configured_patterns_and_never_masked_ones():
    p = make_payload(5, variables={"KUBERNETES_CPU_LIMIT": "2", "SPACK_CI_STACK_NAME": "e4s", "CI_JOB_SIZE": "large",
                                   "SPACK_JOB_SPEC_PKG_NAME": "zlib", "MY_SIZE": "9", "OTHER": "x"})
    p["variables"].append({"key": "MY_SECRET_SIZE", "value": "hidden-1234", "masked": True})
    default = job_from_payload(p).identity.variables
    assert default == {"KUBERNETES_CPU_LIMIT": "2", "SPACK_CI_STACK_NAME": "e4s", "CI_JOB_SIZE": "large",
                       "SPACK_JOB_SPEC_PKG_NAME": "zlib"}
    custom = job_from_payload(p, ("MY_*", "CI_JOB_SIZE")).identity.variables
    assert custom == {"MY_SIZE": "9", "CI_JOB_SIZE": "large"}  # MY_SECRET_SIZE is masked: never recorded
