"""JSON shapes of GitLab's REST entities (``lib/api/entities``), built from the stand-in's state.

Only the fields GitLab really sends, with GitLab's quirks: ``failure_reason``
appears only on failed jobs; REST jobs have no exit code, no ``retried`` and no
``manual`` flag (those are GraphQL-only).  Callers hold the state lock.
"""

from __future__ import annotations

from typing import Any

from standin.gitlab.state import GitLabState, Job, Pipeline, Project, User, iso

__all__ = ["user_json", "project_json", "pipeline_basic", "pipeline_detail", "job_json", "bridge_json",
           "group_json"]


def user_json(state: GitLabState, user: User | None) -> dict[str, Any] | None:
    if user is None:
        return None
    return {"id": user.id, "username": user.username, "name": user.name, "state": "active", "locked": False,
            "avatar_url": None, "web_url": f"{state.base_url}/{user.username}"}


def group_json(state: GitLabState, group_id: int | None) -> dict[str, Any]:
    grp = state.groups.get(group_id) if group_id is not None else None
    if grp is None:
        return {"id": 0, "name": "", "path": "", "kind": "user", "full_path": "", "parent_id": None,
                "web_url": state.base_url}
    return {"id": grp.id, "name": grp.name, "path": grp.full_path.rpartition("/")[2], "kind": "group",
            "full_path": grp.full_path, "parent_id": grp.parent_id, "avatar_url": None,
            "web_url": f"{state.base_url}/groups/{grp.full_path}"}


def project_json(state: GitLabState, proj: Project) -> dict[str, Any]:
    namespace = group_json(state, proj.namespace_id)
    created = min(proj.commit_times.values()) if proj.commit_times else None
    return {
        "id": proj.id, "description": None, "name": proj.name,
        "name_with_namespace": " / ".join(proj.full_path.split("/")),
        "path": proj.name, "path_with_namespace": proj.full_path,
        "created_at": iso(created), "last_activity_at": iso(max(proj.commit_times.values(), default=None)),
        "default_branch": proj.default_branch, "tag_list": [], "topics": [],
        "ssh_url_to_repo": f"git@127.0.0.1:{proj.full_path}.git",
        "http_url_to_repo": f"{state.base_url}/{proj.full_path}.git",
        "web_url": f"{state.base_url}/{proj.full_path}",
        "namespace": namespace, "archived": proj.archived, "visibility": "private",
        "jobs_enabled": True, "builds_access_level": "enabled",
        "ci_config_path": None, "ci_pipeline_variables_minimum_override_role": proj.pipeline_variables_min_role,
    }


def pipeline_basic(state: GitLabState, pipe: Pipeline) -> dict[str, Any]:
    proj = state.projects[pipe.project_id]
    return {
        "id": pipe.id, "iid": pipe.iid, "project_id": pipe.project_id, "sha": pipe.sha, "ref": pipe.ref,
        "status": pipe.status, "source": pipe.source, "created_at": iso(pipe.created_at),
        "updated_at": iso(pipe.updated_at), "web_url": f"{state.base_url}/{proj.full_path}/-/pipelines/{pipe.id}",
        "name": None,
    }


def pipeline_detail(state: GitLabState, pipe: Pipeline) -> dict[str, Any]:
    out = pipeline_basic(state, pipe)
    proj = state.projects[pipe.project_id]
    duration = None
    if pipe.started_at is not None and pipe.finished_at is not None:
        duration = int(pipe.finished_at - pipe.started_at)
    out.update({
        "before_sha": "0" * 40, "tag": False, "yaml_errors": None,
        "user": user_json(state, state.users.get(pipe.user_id) if pipe.user_id else None),
        "started_at": iso(pipe.started_at), "finished_at": iso(pipe.finished_at),
        "committed_at": iso(proj.commit_times.get(pipe.sha)), "duration": duration,
        "queued_duration": None, "coverage": None,
        "detailed_status": {"icon": f"status_{pipe.status}", "text": pipe.status, "label": pipe.status,
                            "group": pipe.status, "has_details": True,
                            "details_path": f"/{proj.full_path}/-/pipelines/{pipe.id}"},
    })
    return out


def _commit_json(state: GitLabState, pipe: Pipeline) -> dict[str, Any]:
    proj = state.projects[pipe.project_id]
    when = iso(proj.commit_times.get(pipe.sha))
    return {"id": pipe.sha, "short_id": pipe.sha[:8], "created_at": when, "parent_ids": [],
            "title": "stand-in commit", "message": "stand-in commit\n", "author_name": "Stand In",
            "author_email": "standin@example.invalid", "authored_date": when, "committer_name": "Stand In",
            "committer_email": "standin@example.invalid", "committed_date": when,
            "web_url": f"{state.base_url}/{proj.full_path}/-/commit/{pipe.sha}"}


def _common(state: GitLabState, job: Job) -> dict[str, Any]:
    pipe = state.pipelines[job.pipeline_id]
    proj = state.projects[job.project_id]
    now = state.clock()
    duration = None
    if job.started_at is not None:
        duration = round((job.finished_at or now) - job.started_at, 3)
    queued = None
    if job.queued_at is not None:
        queued = round((job.started_at or now) - job.queued_at, 3)
    out: dict[str, Any] = {
        "id": job.id, "status": job.status, "stage": job.stage, "name": job.name, "ref": pipe.ref,
        "tag": False, "coverage": None, "allow_failure": job.allow_failure,
        "created_at": iso(job.created_at), "started_at": iso(job.started_at),
        "finished_at": iso(job.finished_at), "erased_at": None, "duration": duration,
        "queued_duration": queued,
        "user": user_json(state, state.users.get(job.user_id) if job.user_id else None),
        "commit": _commit_json(state, pipe),
        "pipeline": pipeline_basic(state, pipe),
        "web_url": f"{state.base_url}/{proj.full_path}/-/jobs/{job.id}",
        "project": {"ci_job_token_scope_enabled": False},
    }
    if job.status == "failed":
        out["failure_reason"] = job.failure_reason or "unknown_failure"
    return out


def job_json(state: GitLabState, job: Job) -> dict[str, Any]:
    """``Entities::Ci::Job`` for a build."""
    out = _common(state, job)
    artifacts = [{"file_type": "archive", "size": sum(len(v) for v in job.artifacts.values()),
                  "filename": "artifacts.zip", "file_format": "zip"}] if job.artifacts else []
    out.update({
        "artifacts_file": {"filename": "artifacts.zip", "size": artifacts[0]["size"]} if artifacts else None,
        "artifacts": artifacts,
        "runner": {k: v for k, v in job.runner.items() if k != "tags"} if job.runner else None,
        "runner_manager": None, "artifacts_expire_at": None, "archived": False,
        "tag_list": job.tag_list,
    })
    if out["artifacts_file"] is None:
        del out["artifacts_file"]
    return out


def bridge_json(state: GitLabState, job: Job) -> dict[str, Any]:
    """``Entities::Ci::Bridge``: a trigger job with its ``downstream_pipeline``."""
    out = _common(state, job)
    child = state.pipelines.get(job.downstream_pipeline_id) if job.downstream_pipeline_id else None
    out["downstream_pipeline"] = pipeline_basic(state, child) if child else None
    return out
