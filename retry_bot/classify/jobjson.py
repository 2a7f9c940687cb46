"""GitLab REST job JSON (``GET /projects/:id/jobs/:job_id``) and GraphQL ``CiJob`` -> :class:`JobFacts`.

The one place a job's facts are built from what GitLab says (the poller, ``classify --job-json``).
"""

from __future__ import annotations

from typing import Any, Mapping

from retry_bot.model import JobFacts

__all__ = ["facts_from_job_json", "JobJsonError"]


class JobJsonError(ValueError):
    """The job JSON is not an object or a field has the wrong type."""


def _int(v: Any, where: str, default: int | None = 0) -> int | None:
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise JobJsonError(f"{where}: expected an integer, got {v!r}")
    try:
        return int(v)
    except ValueError:
        raise JobJsonError(f"{where}: expected an integer, got {v!r}") from None


def _str(v: Any, where: str) -> str | None:
    if v is None:
        return None
    if not isinstance(v, (str, int, float)) or isinstance(v, bool):
        raise JobJsonError(f"{where}: expected a string, got {type(v).__name__}")
    return str(v)


def _obj(v: Any, where: str) -> Mapping[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise JobJsonError(f"{where}: expected an object, got {type(v).__name__}")
    return v


def facts_from_job_json(data: Any, graphql: Mapping[str, Any] | None = None, *, project_id: int | None = None,
                        project_path: str | None = None) -> JobFacts:
    """Build job facts from GitLab's REST job JSON (also accepts GraphQL-style ``exitCode``).

    ``graphql``: the job's GraphQL ``CiJob`` fields, for what REST lacks: ``exitCode``
    (used when it is an integer) and ``pipeline.source`` (when REST has none).
    ``project_id`` / ``project_path``: the project the job was listed in (the REST job
    of ``GET /projects/:id/jobs`` names its project only by the pipeline's ``project_id``).

    Unknown fields are ignored; a wrong type raises :class:`JobJsonError` naming the field.
    """
    if not isinstance(data, Mapping):
        raise JobJsonError(f"job JSON must be an object, got {type(data).__name__}")
    gql = graphql or {}
    job_id = _int(data.get("id"), "id")
    assert job_id is not None
    pipeline = _obj(data.get("pipeline"), "pipeline")
    project = _obj(data.get("project"), "project")
    user = _obj(data.get("user"), "user")
    runner = _obj(data.get("runner"), "runner")
    tags = data.get("tag_list") or data.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise JobJsonError("tag_list: expected a list of strings")
    exit_code = data.get("exit_code", data.get("exitCode"))
    if isinstance(gql.get("exitCode"), int) and not isinstance(gql.get("exitCode"), bool):
        exit_code = gql["exitCode"]
    gql_pipeline = gql.get("pipeline") if isinstance(gql.get("pipeline"), Mapping) else {}
    variables = data.get("variables") or {}
    if isinstance(variables, list):  # [{"key": ..., "value": ...}] as in the play API
        variables = {str(v.get("key")): str(v.get("value")) for v in variables if isinstance(v, Mapping)}
    if not isinstance(variables, Mapping):
        raise JobJsonError("variables: expected an object or a list of {key, value}")
    return JobFacts(
        job_id=job_id,
        name=_str(data.get("name"), "name") or "",
        project_id=project_id if project_id is not None else
        _int(pipeline.get("project_id", project.get("id")), "pipeline.project_id") or 0,
        project_path=project_path if project_path is not None else
        _str(project.get("path_with_namespace"), "project.path_with_namespace") or "",
        pipeline_id=_int(pipeline.get("id"), "pipeline.id") or 0,
        stage=_str(data.get("stage"), "stage") or "",
        ref=_str(data.get("ref", pipeline.get("ref")), "ref") or "",
        sha=_str(pipeline.get("sha"), "pipeline.sha"),
        status=_str(data.get("status"), "status") or "failed",
        failure_reason=_str(data.get("failure_reason"), "failure_reason"),
        exit_code=_int(exit_code, "exit_code", default=None),
        tags=tuple(tags),
        runner=_str(runner.get("description"), "runner.description"),
        pipeline_source=_str(pipeline.get("source"), "pipeline.source")
        or _str(gql_pipeline.get("source"), "graphql pipeline.source"),
        protected=data.get("protected") if isinstance(data.get("protected"), bool) else None,
        user=_str(user.get("username"), "user.username"),
        allow_failure=bool(data.get("allow_failure", False)),
        created_at=_str(data.get("created_at"), "created_at"),
        finished_at=_str(data.get("finished_at"), "finished_at"),
        web_url=_str(data.get("web_url"), "web_url"),
        variables={str(k): str(v) for k, v in variables.items()},
    )
