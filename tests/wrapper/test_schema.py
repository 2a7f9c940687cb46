"""The shipped JSON Schema matches the record that runner_wrapper.record produces."""

import json
from pathlib import Path

import jsonschema
import pytest

import runner_wrapper
from runner_wrapper.record import (
    AppliedLimits, HostInfo, JobIdentity, StageUsage, Usage, UsageRecord, sign_record,
)

SCHEMA_PATH = Path(runner_wrapper.__file__).parent / "usage-record.schema.json"


def sample_record() -> UsageRecord:
    return UsageRecord(
        job=JobIdentity(id=4242, project_id=7, project_path="group/p", pipeline_id=99, name="build", stage="build",
                        ref="main", protected=True, variables={"KUBERNETES_MEMORY_LIMIT": "128Mi"}),
        host=HostInfo(hostname="h", backend="cgroup-v1", kernel="6.18", wrapper_version="0.1.0"),
        limits=AppliedLimits(memory_limit_bytes=128 * 2**20, sources={"memory_limit": "job variable"}),
        usage=Usage(wall_seconds=1.5, memory_peak_bytes=128 * 2**20, memory_mean_bytes=10**7, cpu_user_seconds=0.5,
                    cpu_system_seconds=0.1, cpu_mean_cores=0.4, cpu_max_cores=1.0, oom_kills=1, memory_failcnt=3),
        started_at="2026-11-21T23:00:00Z", finished_at="2026-11-21T23:00:02Z", exit_code=137,
        stages=(StageUsage(name="build_script", attempt=1, wall_seconds=1.0, exit_code=137, oom_kills=1,
                           memory_peak_bytes=128 * 2**20, cpu_seconds=0.6),),
    )


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_record_and_signed_record_validate(validator):
    d = sample_record().to_dict()
    validator.validate(d)
    validator.validate(sign_record(d, b"k" * 16, "farm"))


@pytest.mark.parametrize("mutate", [
    lambda d: d.update(schema="gitlab-rightsizer/usage-record/v0"),
    lambda d: d["job"].pop("id"),
    lambda d: d["usage"].update(memory_peak_bytes="big"),
    lambda d: d["host"].update(backend="docker"),
    lambda d: d["stages"][0].update(attempt=0),
])
def test_schema_rejects_malformed(validator, mutate):
    d = sample_record().to_dict()
    mutate(d)
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(d)
