"""The runner side: job payloads, the pluggable executor loop, artifacts from a work directory."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Any

import gitlab

from standin.gitlab import StandIn, collect_artifacts

from .conftest import CHILD_YAML


def _vars(payload: dict[str, Any]) -> dict[str, str]:
    """Runner semantics: the last definition of a key wins."""
    return {v["key"]: v["value"] for v in payload["variables"]}


def test_payload_shape(standin: StandIn) -> None:
    pipe = standin.create_pipeline("team/app", "main", variables={"FROM_PIPELINE": "p"})
    job = standin.next_pending_job(["small"], start=True)
    assert job is not None
    payload = standin.job_payload(job.id)
    assert payload["id"] == job.id and payload["token"] == job.token
    assert payload["job_info"] == {**payload["job_info"], "name": "compile", "stage": "build", "pipeline_id": pipe.id,
                                   "project_id": 1, "project_full_path": "team/app"}
    assert payload["git_info"]["ref"] == "main" and payload["git_info"]["sha"] == pipe.sha
    assert payload["steps"][0] == {**payload["steps"][0], "name": "script", "script": ["make -j8"]}
    variables = _vars(payload)
    assert variables["CI_JOB_ID"] == str(job.id) and variables["CI_PIPELINE_SOURCE"] == "push"
    assert variables["KUBERNETES_MEMORY_LIMIT"] == "128Mi" and variables["FROM_PIPELINE"] == "p"
    assert variables["CI_API_V4_URL"] == f"{standin.url}/api/v4"
    token_var = next(v for v in payload["variables"] if v["key"] == "CI_JOB_TOKEN")
    assert token_var["masked"] and not token_var["public"]


def _sh_executor(root: Path):
    """A tiny executor: runs the script lines with /bin/sh in a per-job directory."""

    def execute(payload: dict[str, Any]) -> dict[str, Any]:
        workdir = root / str(payload["id"])
        workdir.mkdir()
        env = {v["key"]: v["value"] for v in payload["variables"]}
        env["PATH"] = "/usr/bin:/bin"
        script = "\n".join(["set -e"] + payload["steps"][0]["script"])
        done = subprocess.run(["/bin/sh", "-c", script], cwd=workdir, env=env, capture_output=True, timeout=30)
        return {"status": "success" if done.returncode == 0 else "failed",
                "failure_reason": None if done.returncode == 0 else "script_failure",
                "exit_code": done.returncode, "log": done.stdout + done.stderr}

    return execute


def test_runner_loop_runs_the_retry_template_end_to_end(standin: StandIn, gl: gitlab.Gitlab) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        standin.attach_runner(_sh_executor(root), tags=["small"], workdir_of=lambda p: root / str(p["id"]))
        project = gl.projects.get("team/app", lazy=True)
        child_yaml = CHILD_YAML.replace("script: [make -j8]", "script: ['echo limit=$KUBERNETES_MEMORY_LIMIT']")
        pipe = project.pipelines.create({"ref": "main", "variables": [
            {"key": "RETRY_BOT_CHILD_YAML", "value": child_yaml}]})
        assert standin.wait_for(lambda: any(j.downstream_pipeline_id for j in standin.jobs(pipeline_id=pipe.id)))
        gen = next(j for j in standin.jobs(pipeline_id=pipe.id) if j.name == "retry-bot-generate")
        assert gen.status == "success" and gen.artifacts["retry-bot-child.yml"] == child_yaml.encode()
        (bridge,) = project.pipelines.get(pipe.id).bridges.list(get_all=True)
        (manual,) = project.pipelines.get(bridge.downstream_pipeline["id"]).jobs.list(get_all=True)
        # the child job wants the `large` tag: the attached runner (tags=[small]) never picks it
        project.jobs.get(manual.id, lazy=True).play(post_data={"job_variables_attributes": [
            {"key": "KUBERNETES_MEMORY_LIMIT", "value": "512Mi"}]})
        standin.attach_runner(_sh_executor(root), tags=["large"])
        assert standin.wait_for(lambda: standin.get_job(manual.id).status in ("success", "failed"))
        assert project.jobs.get(manual.id, lazy=True).trace() == b"limit=512Mi\n"
        assert standin.get_job(manual.id).status == "success"
        assert standin.get_pipeline(pipe.id).status == "success"


def test_executor_exception_fails_the_job_as_system_failure(standin: StandIn) -> None:
    def broken(payload: dict[str, Any]) -> Any:
        raise RuntimeError("driver missing")

    pipe = standin.create_pipeline("team/app", "main")
    standin.attach_runner(broken, tags=["small"])
    compile_job = standin.jobs(pipeline_id=pipe.id)[0]
    assert standin.wait_for(lambda: compile_job.status == "failed")
    assert compile_job.failure_reason == "runner_system_failure" and b"driver missing" in bytes(compile_job.trace)


def test_collect_artifacts_stays_inside_the_workdir(tmp_path: Path) -> None:
    (tmp_path / "out.yml").write_text("x: 1\n")
    (tmp_path.parent / "secret.txt").write_text("no")
    payload = {"artifacts": [{"paths": ["out.yml", "../secret.txt", "missing.txt"]}]}
    assert collect_artifacts(payload, tmp_path) == {"out.yml": b"x: 1\n"}


def test_user_version_and_raw_ci_file(standin: StandIn, gl: gitlab.Gitlab) -> None:
    gl.auth()
    assert gl.user is not None and gl.user.username == "retry-bot"
    assert gl.version()[0].startswith("18.")
    raw = gl.projects.get(1, lazy=True).files.raw(".gitlab-ci.yml", ref="main")
    assert b"compile:" in raw


def test_concurrent_clients_and_runner_keep_state_consistent(standin: StandIn) -> None:
    """Four API clients retrying while a runner loop fails every job: no 5xx, each retry makes one job."""
    import threading

    outcomes = {"status": "failed", "failure_reason": "script_failure", "exit_code": 1, "log": b"boom\n"}
    for _ in range(4):
        standin.create_pipeline("team/app", "main")
    standin.attach_runner(lambda payload: outcomes, tags=["small"], poll_interval=0.005)
    assert standin.wait_for(lambda: all(j.status == "failed" for j in standin.jobs() if j.name == "compile"))
    retried: list[int] = []
    lock = threading.Lock()

    def worker(job_id: int) -> None:
        client = gitlab.Gitlab(standin.url, private_token=standin.token, timeout=10)
        job = client.projects.get(1, lazy=True).jobs.get(job_id, lazy=True)
        for _ in range(5):
            try:
                new = job.retry()
            except gitlab.GitlabJobRetryError:
                continue          # the previous attempt is still pending/running: not retryable yet
            with lock:
                retried.append(new["id"])
            job = client.projects.get(1, lazy=True).jobs.get(new["id"], lazy=True)
            assert standin.wait_for(lambda: standin.get_job(new["id"]).status == "failed", timeout=30)

    threads = [threading.Thread(target=worker, args=(j.id,)) for j in standin.jobs() if j.name == "compile"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(retried) == 20 and len(set(retried)) == 20
    assert all(c.status is not None and c.status < 500 for c in standin.calls)
    assert len([j for j in standin.jobs() if j.name == "compile"]) == 24
