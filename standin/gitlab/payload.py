"""What GitLab Runner receives for a job (``POST /api/v4/jobs/request`` answer), built from the stand-in.

The shape follows GitLab Runner's ``common.JobResponse``: ``id``, ``token``,
``allow_git_fetch``, ``job_info``, ``git_info``, ``runner_info``, ``variables``
(``[{key, value, public, masked, file?}]``), ``steps``, ``image``, ``artifacts``,
``dependencies`` and ``features``.  Variables are listed from lowest to highest
precedence (predefined, YAML global and job variables, pipeline variables,
manual-job variables) and the runner takes the last definition of a key.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

from standin.gitlab.state import GitLabState

__all__ = ["build_payload", "collect_artifacts", "payload_variables"]

_TIMEOUT_RE = re.compile(r"(?:(\d+)\s*h)?\s*(?:(\d+)\s*m(?:in)?)?\s*(?:(\d+)\s*s)?$")


def _timeout_seconds(value: str | None, default: int = 3600) -> int:
    if not value:
        return default
    m = _TIMEOUT_RE.match(value.strip().replace("hours", "h").replace("hour", "h").replace("minutes", "m"))
    if not m or not any(m.groups()):
        return default
    h, mnt, s = (int(g) if g else 0 for g in m.groups())
    return h * 3600 + mnt * 60 + s


def payload_variables(state: GitLabState, job_id: int) -> list[dict[str, Any]]:
    """The job's variables as the runner sees them (lowest precedence first)."""
    with state.lock:
        job = state.job(job_id)
        pipe = state.pipelines[job.pipeline_id]
        out: list[dict[str, Any]] = []
        for key, value in state.predefined_variables(pipe, job):
            out.append({"key": key, "value": value, "public": key != "CI_JOB_TOKEN",
                        "masked": key == "CI_JOB_TOKEN"})
        for key, value in job.spec.variables:
            out.append({"key": key, "value": value, "public": True, "masked": False})
        # Project CI/CD variables rank above YAML variables and below pipeline/manual ones
        # (G doc/ci/variables/index.md, "CI/CD variable precedence").
        for var in state.projects[pipe.project_id].ci_variables:
            out.append({"key": var["key"], "value": var["value"], "public": False,
                        "masked": bool(var.get("masked")), "raw": bool(var.get("raw"))})
        for var in pipe.variables + job.job_variables:
            item = {"key": var["key"], "value": var["value"], "public": False, "masked": False}
            if var.get("variable_type") == "file":
                item["file"] = True
            out.append(item)
        return out


def build_payload(state: GitLabState, job_id: int) -> dict[str, Any]:
    """The runner's job payload for ``job_id`` (a build, normally ``running`` or ``pending``)."""
    with state.lock:
        job = state.job(job_id)
        pipe = state.pipelines[job.pipeline_id]
        proj = state.projects[job.project_id]
        timeout = _timeout_seconds(job.spec.timeout)
        steps: list[dict[str, Any]] = [{
            "name": "script", "script": list(job.spec.before_script) + list(job.spec.script),
            "timeout": timeout, "when": "on_success", "allow_failure": False,
        }]
        if job.spec.after_script:
            steps.append({"name": "after_script", "script": list(job.spec.after_script), "timeout": 300,
                          "when": "always", "allow_failure": True})
        dependencies = []
        for other in state.latest_jobs(pipe):
            if other.artifacts and other.id != job.id and pipe.stages.index(other.stage) < pipe.stages.index(job.stage):
                dependencies.append({"id": other.id, "name": other.name, "token": other.token,
                                     "artifacts_file": {"filename": "artifacts.zip",
                                                        "size": sum(len(v) for v in other.artifacts.values())}})
        return {
            "id": job.id,
            "token": job.token,
            "allow_git_fetch": True,
            "job_info": {
                "id": job.id, "name": job.name, "stage": job.stage, "project_id": proj.id,
                "project_name": proj.name, "project_full_path": proj.full_path,
                "pipeline_id": pipe.id, "time_in_queue_seconds": 0, "project_jobs_running_on_instance_runners_count": 0,
            },
            "git_info": {
                "repo_url": f"{state.base_url}/{proj.full_path}.git", "ref": pipe.ref, "sha": pipe.sha,
                "before_sha": "0" * 40, "ref_type": "branch",
                "refspecs": [f"+refs/heads/{pipe.ref}:refs/remotes/origin/{pipe.ref}"], "depth": 20,
                "protected": pipe.ref == proj.default_branch,
            },
            "runner_info": {"timeout": timeout, "runner_session_url": None},
            "variables": payload_variables(state, job_id),
            "steps": steps,
            "image": {"name": job.spec.image} if job.spec.image else None,
            "services": [],
            "artifacts": ([{"name": "artifacts", "untracked": False, "paths": list(job.spec.artifact_paths),
                            "when": "on_success", "artifact_type": "archive", "artifact_format": "zip",
                            "expire_in": None}] if job.spec.artifact_paths else []),
            "cache": [],
            "credentials": [],
            "dependencies": dependencies,
            "features": {"trace_sections": True, "failure_reasons": ["script_failure", "runner_system_failure",
                                                                     "job_execution_timeout", "unknown_failure"]},
        }


def collect_artifacts(payload: Mapping[str, Any], workdir: str | Path) -> dict[str, bytes]:
    """Read the files a job declared under ``artifacts:paths`` from its work directory (no globbing)."""
    root = Path(workdir).resolve()
    out: dict[str, bytes] = {}
    for entry in payload.get("artifacts") or []:
        for rel in entry.get("paths") or []:
            path = (root / rel).resolve()
            if root in path.parents and path.is_file():
                out[rel] = path.read_bytes()
    return out
