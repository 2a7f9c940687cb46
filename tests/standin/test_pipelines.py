"""Pipeline processing through the control API: stages, manual jobs, retry, child pipelines."""

from __future__ import annotations

import pytest

from standin.gitlab import BadRequest, Forbidden, StandIn

from .conftest import CHILD_YAML, run_first_pending


def _statuses(server: StandIn, pipeline_id: int) -> dict[str, str]:
    return {j.name: j.status for j in server.jobs(pipeline_id=pipeline_id) if not j.retried}


def test_stages_run_in_order_and_manual_jobs_wait(standin: StandIn) -> None:
    pipe = standin.create_pipeline("team/app", "main")
    assert _statuses(standin, pipe.id) == {"compile": "pending", "unit": "created", "deploy": "created"}
    assert standin.get_pipeline(pipe.id).status == "pending"
    run_first_pending(standin, "success")
    assert _statuses(standin, pipe.id) == {"compile": "success", "unit": "pending", "deploy": "manual"}
    run_first_pending(standin, "success")
    # plain `when: manual` is allow_failure: true, so it does not hold the pipeline
    assert standin.get_pipeline(pipe.id).status == "success"


def test_failure_skips_later_stages_and_retry_resets_them(standin: StandIn) -> None:
    pipe = standin.create_pipeline("team/app", "main")
    failed = run_first_pending(standin, "failed", failure_reason="script_failure", exit_code=137)
    assert _statuses(standin, pipe.id) == {"compile": "failed", "unit": "skipped", "deploy": "skipped"}
    assert standin.get_pipeline(pipe.id).status == "failed"
    new = standin.retry_job(failed)
    assert new.id != failed and new.status == "pending"
    assert standin.get_job(failed).retried is True
    assert dict(new.spec.variables)["KUBERNETES_MEMORY_LIMIT"] == "128Mi"  # retry keeps the variables
    assert _statuses(standin, pipe.id)["unit"] == "created"
    run_first_pending(standin, "success")
    assert _statuses(standin, pipe.id) == {"compile": "success", "unit": "pending", "deploy": "manual"}


def test_only_finished_jobs_are_retryable(standin: StandIn) -> None:
    pipe = standin.create_pipeline("team/app", "main")
    job = standin.jobs(pipeline_id=pipe.id)[0]
    with pytest.raises(Forbidden, match="Job is not retryable"):
        standin.retry_job(job.id)


def test_runner_side_checks_the_state_machine(standin: StandIn) -> None:
    pipe = standin.create_pipeline("team/app", "main")
    unit = next(j for j in standin.jobs(pipeline_id=pipe.id) if j.name == "unit")
    with pytest.raises(BadRequest, match="not pending"):
        standin.start_job(unit.id)
    compile_job = standin.next_pending_job(["small"])
    assert compile_job is not None and compile_job.name == "compile"
    assert standin.next_pending_job([]) is None          # tagged job, runner without the tag
    with pytest.raises(BadRequest, match="not running"):
        standin.finish_job(compile_job.id, "success")
    with pytest.raises(ValueError, match="success, failed or canceled"):
        standin.finish_job(compile_job.id, "ok")


def test_unknown_ref_is_refused(standin: StandIn) -> None:
    with pytest.raises(BadRequest, match="Reference not found"):
        standin.create_pipeline("team/app", "nope")


def _retry_pipeline(standin: StandIn) -> tuple[int, int]:
    pipe = standin.create_pipeline("team/app", "main", source="api", variables={"RETRY_BOT_CHILD_YAML": CHILD_YAML})
    gen = standin.next_pending_job(start=True)
    assert gen is not None and gen.name == "retry-bot-generate"
    standin.finish_job(gen.id, "success", artifacts={"retry-bot-child.yml": standin.pipeline_variables(pipe.id)["RETRY_BOT_CHILD_YAML"]})
    return pipe.id, gen.id


def test_trigger_include_artifact_creates_a_child_pipeline(standin: StandIn) -> None:
    parent_id, _ = _retry_pipeline(standin)
    bridge = next(j for j in standin.jobs(pipeline_id=parent_id) if j.name == "retry-bot-child")
    assert bridge.downstream_pipeline_id is not None
    child = standin.get_pipeline(bridge.downstream_pipeline_id)
    assert child.source == "parent_pipeline" and child.parent_bridge_id == bridge.id
    (manual,) = standin.jobs(pipeline_id=child.id)
    assert manual.name == "compile-upgraded" and manual.status == "manual" and manual.manual
    # a child with only an allow-failure manual job is "skipped"; depend mirrors it on the bridge
    assert child.status == "skipped" and bridge.status == "skipped"
    standin.state.play_job(manual.id, user=standin.user, variables=[{"key": "KUBERNETES_MEMORY_LIMIT", "value": "512Mi"}])
    assert child.status == "pending" and bridge.status == "running"
    assert standin.get_pipeline(parent_id).status == "running"
    job = standin.next_pending_job(["large"], start=True)
    assert job is not None and job.id == manual.id
    standin.finish_job(job.id, "success")
    assert child.status == "success" and bridge.status == "success"
    assert standin.get_pipeline(parent_id).status == "success"


def test_missing_artifact_fails_the_bridge(standin: StandIn) -> None:
    pipe = standin.create_pipeline("team/app", "main", variables={"RETRY_BOT_CHILD_YAML": CHILD_YAML})
    run_first_pending(standin, "success")  # generator "forgets" to write the artifact
    bridge = next(j for j in standin.jobs(pipeline_id=pipe.id) if j.name == "retry-bot-child")
    assert bridge.status == "failed" and bridge.failure_reason == "downstream_pipeline_creation_failed"
    assert b"has no artifact" in bytes(bridge.trace)


def test_play_semantics(standin: StandIn) -> None:
    parent_id, gen_id = _retry_pipeline(standin)
    bridge = next(j for j in standin.jobs(pipeline_id=parent_id) if j.name == "retry-bot-child")
    (manual,) = standin.jobs(pipeline_id=bridge.downstream_pipeline_id)
    with pytest.raises(BadRequest, match="Unplayable Job"):
        standin.state.play_job(gen_id, user=standin.user)           # not a manual job
    played = standin.state.play_job(manual.id, user=standin.user, variables={"MEM": "1Gi"})
    assert played.id == manual.id and played.status == "pending" and played.job_variables[0]["value"] == "1Gi"
    with pytest.raises(BadRequest, match="Unplayable Job"):
        standin.state.play_job(manual.id, user=standin.user)        # pending: neither manual nor retryable
    run_first_pending(standin, "failed", failure_reason="script_failure", exit_code=137)
    # the pitfall: playing an already-run manual job retries it WITHOUT the new variables
    presented = standin.state.play_job(manual.id, user=standin.user, variables={"MEM": "2Gi"})
    assert presented.id == manual.id and presented.retried
    newest = standin.jobs(pipeline_id=bridge.downstream_pipeline_id)[-1]
    assert newest.id != manual.id and newest.status == "pending"
    assert newest.job_variables == [{"key": "MEM", "value": "1Gi", "variable_type": "env_var"}]
    # retry with variables (GraphQL jobRetry) on a manual job: starts at once with the new values
    run_first_pending(standin, "failed", failure_reason="script_failure", exit_code=137)
    again = standin.state.retry_job(newest.id, user=standin.user, variables={"MEM": "4Gi"})
    assert again.status == "pending" and again.job_variables[0]["value"] == "4Gi"


def test_variables_permission_setting(standin: StandIn) -> None:
    standin.add_project("team/locked", {"j": {"script": ["x"], "when": "manual"}},
                        pipeline_variables_min_role="no_one_allowed")
    pipe = standin.create_pipeline("team/locked", "main")
    (job,) = standin.jobs(pipeline_id=pipe.id)
    with pytest.raises(Forbidden):
        standin.state.play_job(job.id, user=standin.user, variables={"A": "1"})
    assert standin.state.play_job(job.id, user=standin.user).status == "pending"


def test_cancel_running_job(standin: StandIn) -> None:
    pipe = standin.create_pipeline("team/app", "main")
    job = standin.next_pending_job(["small"], start=True)
    assert job is not None
    standin.cancel_job(job.id)
    standin.finish_job(job.id, "success", trace=b"late")   # the runner's late update does not resurrect it
    assert standin.get_job(job.id).status == "canceled"
    assert standin.get_pipeline(pipe.id).status == "canceled"
