"""The GraphQL subset (``POST /api/graphql``), executed by graphql-core against a real schema.

Type, field and argument names are GitLab's (``app/graphql/types/ci/job_type.rb``,
``mutations/ci/job/retry.rb``, ``mutations/ci/job/play.rb``,
``types/ci/variable_input_type.rb``): ``Project.job(id: JobID!)``,
``jobRetry(input: {id: CiProcessableID!, variables: [CiVariableInput!]})``,
``CiJob.exitCode`` / ``retried`` / ``manualVariables`` ...  Status enums are
upper-case (``SUCCESS``), ids are global ids (``gid://gitlab/Ci::Build/1000``).

Version profiles (:data:`PROFILES`): the schema differs between GitLab versions
in ways that break a client (gitlab-mechanics §11.3, the SDL excerpt
``shared/reference/gitlab-graphql-excerpt.graphql``):

* ``current``: ``CiJob.pipeline`` is a ``PipelineInterface`` (fields ``id iid
  path project user commit``); ``source``/``status``/``ref`` need ``... on
  Pipeline`` (G ``app/graphql/types/ci/job_type.rb``, ``pipeline_interface.rb``);
* ``18.0``: ``CiJob.pipeline: Pipeline`` (the GraphQL reference of 17.10-18.0,
  G ``doc/api/graphql/reference/_index.md``);
* ``16.0``, the oldest version the bot supports: no ``CiJob.exitCode`` (added
  in 16.10) and ``jobRetry`` takes a ``CiBuildID`` (``CiProcessableID`` from
  16.4, MR 130222).

A stand-in picks its profile from the GitLab version it claims
(:func:`profile_for_version`); a document that does not validate against the
profile gets graphql-core's validation error with ``data: null``, as GitLab
answers a static validation error (HTTP 200, ``errors``).
"""

from __future__ import annotations

import base64
import re
from typing import Any, Sequence

from graphql import GraphQLError, build_schema, graphql_sync

from standin.gitlab.state import GitLabState, Job, Pipeline, Project, StandInError, User, iso

__all__ = ["SCHEMA_SDL", "PROFILES", "profile_for_version", "schema_for", "execute", "job_gid", "FAILURE_MESSAGES"]

SCHEMA_SDL = """
scalar JobID
scalar CiProcessableID
scalar CiPipelineID
scalar Time
scalar CiBuildID

enum CiJobStatus { CREATED WAITING_FOR_RESOURCE PREPARING WAITING_FOR_CALLBACK PENDING RUNNING SUCCESS FAILED
  CANCELING CANCELED SKIPPED MANUAL SCHEDULED }
enum PipelineStatusEnum { CREATED WAITING_FOR_RESOURCE PREPARING WAITING_FOR_CALLBACK PENDING RUNNING FAILED SUCCESS
  CANCELING CANCELED SKIPPED MANUAL SCHEDULED }
enum CiJobKind { BUILD BRIDGE }
enum CiVariableType { ENV_VAR FILE }

type PageInfo { hasNextPage: Boolean! hasPreviousPage: Boolean! startCursor: String endCursor: String }

type CiStage { id: ID! name: String }

type CiManualVariable { id: ID! key: String value: String raw: Boolean variableType: CiVariableType }
type CiManualVariableConnection { nodes: [CiManualVariable] count: Int! }

type CiRunner { id: ID! description: String shortSha: String }

type CiJob {
  id: JobID
  name: String
  status: CiJobStatus
  stage: CiStage
  kind: CiJobKind!
  @EXIT_CODE@
  retried: Boolean
  retryable: Boolean!
  playable: Boolean!
  canPlayJob: Boolean!
  manualJob: Boolean
  manualVariables: CiManualVariableConnection
  failureMessage: String
  allowFailure: Boolean!
  active: Boolean!
  cancelable: Boolean!
  tags: [String!]
  refName: String
  shortSha: String!
  webPath: String
  createdAt: Time!
  startedAt: Time
  finishedAt: Time
  queuedAt: Time
  duration: Int
  pipeline: @PIPELINE_TYPE@
  downstreamPipeline: Pipeline
  runner: CiRunner
}
type CiJobEdge { cursor: String! node: CiJob }
type CiJobConnection { count: Int! nodes: [CiJob] edges: [CiJobEdge] pageInfo: PageInfo! }

type UserCore { id: ID! username: String! }
type Commit { id: ID! sha: String! }
interface PipelineInterface { id: ID! iid: String! path: String project: Project user: UserCore commit: Commit }

type Pipeline implements PipelineInterface {
  id: ID!
  iid: String!
  user: UserCore
  commit: Commit
  status: PipelineStatusEnum!
  ref: String
  sha: String
  source: String
  createdAt: Time!
  updatedAt: Time!
  startedAt: Time
  finishedAt: Time
  path: String
  active: Boolean!
  project: Project
  jobs(statuses: [CiJobStatus!], retried: Boolean, first: Int, after: String): CiJobConnection
  job(id: JobID, name: String): CiJob
  downstream(first: Int, after: String): PipelineConnection
  upstream: Pipeline
}
type PipelineEdge { cursor: String! node: Pipeline }
type PipelineConnection { count: Int! nodes: [Pipeline] edges: [PipelineEdge] pageInfo: PageInfo! }

type Project {
  id: ID!
  fullPath: ID!
  name: String!
  webUrl: String
  job(id: JobID!): CiJob
  jobs(statuses: [CiJobStatus!], first: Int, after: String): CiJobConnection
  pipeline(id: CiPipelineID, iid: ID): Pipeline
  pipelines(status: PipelineStatusEnum, ref: String, sha: String, source: String, updatedAfter: Time,
            updatedBefore: Time, first: Int, after: String): PipelineConnection
}

input CiVariableInput { key: String! value: String! variableType: CiVariableType }
input JobRetryInput { clientMutationId: String id: @RETRY_ID@! variables: [CiVariableInput!] = [] }
input JobPlayInput { clientMutationId: String id: CiProcessableID! variables: [CiVariableInput!] = [] }
type JobRetryPayload { clientMutationId: String errors: [String!]! job: CiJob }
type JobPlayPayload { clientMutationId: String errors: [String!]! job: CiJob }

type Query { project(fullPath: ID!): Project currentUser: UserCore }
type Mutation {
  jobRetry(input: JobRetryInput!): JobRetryPayload
  jobPlay(input: JobPlayInput!): JobPlayPayload
}
"""

#: Profile name -> the substitutions that make its schema (see the module docstring).
PROFILES: dict[str, dict[str, str]] = {
    "current": {"@PIPELINE_TYPE@": "PipelineInterface", "@EXIT_CODE@": "exitCode: Int",
                "@RETRY_ID@": "CiProcessableID"},
    "18.0": {"@PIPELINE_TYPE@": "Pipeline", "@EXIT_CODE@": "exitCode: Int", "@RETRY_ID@": "CiProcessableID"},
    "16.0": {"@PIPELINE_TYPE@": "Pipeline", "@EXIT_CODE@": "", "@RETRY_ID@": "CiBuildID"},
}
#: The GitLab version each profile stands for (what ``GET /version`` answers).
PROFILE_VERSIONS = {"current": "18.6.0", "18.0": "18.0.0", "16.0": "16.0.0"}


def profile_for_version(version: str) -> str:
    """The schema profile of a GitLab version (``"17.11.2-ee"`` -> ``"18.0"``).

    ``PipelineInterface`` is taken to arrive after 18.0 (the 17.10-18.0 reference
    still shows ``Pipeline``; the exact release is a documented gap).
    """
    m = re.match(r"^(\d+)\.(\d+)", version or "")
    if not m:
        return "current"
    v = (int(m.group(1)), int(m.group(2)))
    if v < (16, 10):
        return "16.0"
    if v <= (18, 0):
        return "18.0"
    return "current"


_SCHEMAS: dict[str, Any] = {}


def schema_for(profile: str) -> Any:
    """The graphql-core schema of one profile (built once)."""
    if profile not in PROFILES:
        raise ValueError(f"unknown GraphQL profile {profile!r}; one of {', '.join(PROFILES)}")
    if profile not in _SCHEMAS:
        sdl = SCHEMA_SDL
        for k, v in PROFILES[profile].items():
            sdl = sdl.replace(k, v)
        schema = build_schema(sdl)
        # Every PipelineInterface the stand-in serves is a Pipeline (GitLab's other implementation,
        # the CI "pipeline" of a commit status, is not modelled).
        schema.type_map["PipelineInterface"].resolve_type = lambda value, info, type_: "Pipeline"
        _SCHEMAS[profile] = schema
    return _SCHEMAS[profile]

# ``Gitlab::Ci::Status::Build::Failed.reasons`` (the common ones); others fall back to unknown_failure's.
FAILURE_MESSAGES = {
    "unknown_failure": "There is an unknown failure, please try again",
    "script_failure": "There has been a script failure. Check the job log for more information",
    "api_failure": "There has been an API failure, please try again",
    "stuck_or_timeout_failure": "There has been a timeout failure or the job got stuck. Check your timeout limits or try again",
    "runner_system_failure": "There has been a runner system failure, please try again",
    "missing_dependency_failure": "There has been a missing dependency failure",
    "runner_unsupported": "Your runner is outdated, please upgrade your runner",
    "job_execution_timeout": "The script exceeded the maximum execution time set for the job",
    "scheduler_failure": "The scheduler failed to assign job to the runner, please try again or contact system administrator",
    "data_integrity_failure": "There has been a structural integrity problem detected, please contact system administrator",
    "no_matching_runner": "No matching runner available",
    "downstream_pipeline_creation_failed": "The downstream pipeline could not be created",
}

_GID_RE = re.compile(r"^gid://gitlab/(Ci::Build|Ci::Bridge|Ci::Processable|CommitStatus)/(\d+)$")


def job_gid(job: Job) -> str:
    return f"gid://gitlab/{'Ci::Bridge' if job.spec.is_bridge else 'Ci::Build'}/{job.id}"


def _job_id(gid: Any) -> int:
    m = _GID_RE.match(str(gid))
    if not m:
        raise GraphQLError(f'"{gid}" is not a valid Global ID')
    return int(m.group(2))


def _cursor(i: int) -> str:
    return base64.b64encode(str(i).encode()).decode()


def _connection(items: Sequence[Any], first: int | None, after: str | None) -> dict[str, Any]:
    start = 0
    if after:
        try:
            start = int(base64.b64decode(after).decode()) + 1
        except ValueError:
            raise GraphQLError(f"invalid cursor {after!r}") from None
    limit = min(first if first is not None else 100, 100)
    chunk = list(items[start:start + limit])
    edges = [{"cursor": _cursor(start + i), "node": node} for i, node in enumerate(chunk)]
    return {
        "count": len(items), "nodes": chunk, "edges": edges,
        "pageInfo": {"hasNextPage": start + limit < len(items), "hasPreviousPage": start > 0,
                     "startCursor": edges[0]["cursor"] if edges else None,
                     "endCursor": edges[-1]["cursor"] if edges else None},
    }


class _Ctx:
    def __init__(self, state: GitLabState, user: User | None) -> None:
        self.state = state
        self.user = user


class GJob:
    """Resolvers for ``CiJob``; graphql-core's default resolver calls these methods."""

    def __init__(self, ctx: _Ctx, job: Job) -> None:
        self._ctx, self._job = ctx, job
        j = job
        state = ctx.state
        proj = state.projects[j.project_id]
        pipe = state.pipelines[j.pipeline_id]
        self.id = job_gid(j)
        self.name = j.name
        self.status = j.status.upper()
        self.stage = {"id": f"gid://gitlab/Ci::Stage/{pipe.id * 100 + pipe.stages.index(j.stage)}", "name": j.stage}
        self.kind = "BRIDGE" if j.spec.is_bridge else "BUILD"
        self.exitCode = j.exit_code
        self.retried = j.retried
        self.retryable = j.retryable
        self.playable = j.playable
        self.canPlayJob = j.playable
        self.manualJob = j.manual
        self.failureMessage = (FAILURE_MESSAGES.get(j.failure_reason or "", FAILURE_MESSAGES["unknown_failure"])
                               if j.status == "failed" else None)
        self.allowFailure = j.allow_failure
        self.active = j.status in ("created", "pending", "running", "waiting_for_resource", "preparing")
        self.cancelable = self.active or j.status == "scheduled"
        self.tags = j.tag_list
        self.refName = pipe.ref
        self.shortSha = pipe.sha[:8]
        self.webPath = f"/{proj.full_path}/-/jobs/{j.id}"
        self.createdAt = iso(j.created_at)
        self.startedAt = iso(j.started_at)
        self.finishedAt = iso(j.finished_at)
        self.queuedAt = iso(j.queued_at)
        self.duration = int(j.finished_at - j.started_at) if j.finished_at and j.started_at else None
        self.runner = ({"id": f"gid://gitlab/Ci::Runner/{j.runner.get('id', 1)}",
                        "description": j.runner.get("description"), "shortSha": "standin"} if j.runner else None)
        self.manualVariables = {
            "nodes": [{"id": f"gid://gitlab/Ci::JobVariable/{j.id * 100 + i}", "key": v["key"], "value": v["value"],
                       "raw": False, "variableType": v.get("variable_type", "env_var").upper()}
                      for i, v in enumerate(j.job_variables)],
            "count": len(j.job_variables),
        } if j.manual else {"nodes": [], "count": 0}

    def pipeline(self, info: Any) -> "GPipeline":
        return GPipeline(self._ctx, self._ctx.state.pipelines[self._job.pipeline_id])

    def downstreamPipeline(self, info: Any) -> GPipeline | None:
        pid = self._job.downstream_pipeline_id
        return GPipeline(self._ctx, self._ctx.state.pipelines[pid]) if pid else None


def _status_filter(jobs: list[Job], statuses: Sequence[str] | None) -> list[Job]:
    if not statuses:
        return jobs
    wanted = {s.lower() for s in statuses}
    return [j for j in jobs if j.status in wanted]


class GPipeline:
    def __init__(self, ctx: _Ctx, pipe: Pipeline) -> None:
        self._ctx, self._pipe = ctx, pipe
        proj = ctx.state.projects[pipe.project_id]
        self.id = f"gid://gitlab/Ci::Pipeline/{pipe.id}"
        self.iid = str(pipe.iid)
        self.status = pipe.status.upper()
        self.ref, self.sha, self.source = pipe.ref, pipe.sha, pipe.source
        self.createdAt, self.updatedAt = iso(pipe.created_at), iso(pipe.updated_at)
        self.startedAt, self.finishedAt = iso(pipe.started_at), iso(pipe.finished_at)
        self.path = f"/{proj.full_path}/-/pipelines/{pipe.id}"
        self.active = pipe.status in ("created", "pending", "running", "waiting_for_resource", "preparing")
        self.commit = {"id": f"gid://gitlab/CommitPresenter/{pipe.sha}", "sha": pipe.sha}
        owner = ctx.state.users.get(pipe.user_id) if pipe.user_id else None
        self.user = {"id": f"gid://gitlab/User/{owner.id}", "username": owner.username} if owner else None

    def project(self, info: Any) -> "GProject":
        return GProject(self._ctx, self._ctx.state.projects[self._pipe.project_id])

    def jobs(self, info: Any, statuses: Sequence[str] | None = None, retried: bool | None = None,
             first: int | None = None, after: str | None = None) -> dict[str, Any]:
        jobs = self._ctx.state.pipeline_jobs(self._pipe.id, include_retried=True)
        if retried is not None:
            jobs = [j for j in jobs if j.retried == retried]
        jobs = _status_filter(jobs, statuses)
        return _connection([GJob(self._ctx, j) for j in jobs], first, after)

    def job(self, info: Any, id: Any = None, name: str | None = None) -> GJob | None:
        for j in reversed(self._ctx.state.pipeline_jobs(self._pipe.id)):
            if (id is not None and j.id == _job_id(id)) or (name is not None and j.name == name and not j.retried):
                return GJob(self._ctx, j)
        return None

    def downstream(self, info: Any, first: int | None = None, after: str | None = None) -> dict[str, Any]:
        state = self._ctx.state
        bridges = [state.jobs[j] for j in self._pipe.job_ids if state.jobs[j].downstream_pipeline_id]
        children = [GPipeline(self._ctx, state.pipelines[b.downstream_pipeline_id])  # type: ignore[index]
                    for b in bridges]
        return _connection(children, first, after)

    def upstream(self, info: Any) -> GPipeline | None:
        if self._pipe.parent_bridge_id is None:
            return None
        bridge = self._ctx.state.jobs[self._pipe.parent_bridge_id]
        return GPipeline(self._ctx, self._ctx.state.pipelines[bridge.pipeline_id])


class GProject:
    def __init__(self, ctx: _Ctx, proj: Project) -> None:
        self._ctx, self._proj = ctx, proj
        self.id = f"gid://gitlab/Project/{proj.id}"
        self.fullPath = proj.full_path
        self.name = proj.name
        self.webUrl = f"{ctx.state.base_url}/{proj.full_path}"

    def job(self, info: Any, id: Any) -> GJob | None:
        job = self._ctx.state.jobs.get(_job_id(id))
        if job is None or job.project_id != self._proj.id:
            return None
        return GJob(self._ctx, job)

    def jobs(self, info: Any, statuses: Sequence[str] | None = None, first: int | None = None,
             after: str | None = None) -> dict[str, Any]:
        jobs = sorted((j for j in self._ctx.state.jobs.values()
                       if j.project_id == self._proj.id and not j.spec.is_bridge),
                      key=lambda j: j.id, reverse=True)
        return _connection([GJob(self._ctx, j) for j in _status_filter(jobs, statuses)], first, after)

    def pipeline(self, info: Any, id: Any = None, iid: Any = None) -> GPipeline | None:
        for pipe in self._ctx.state.pipelines.values():
            if pipe.project_id != self._proj.id:
                continue
            if (id is not None and str(id) == f"gid://gitlab/Ci::Pipeline/{pipe.id}") or (
                    iid is not None and str(iid) == str(pipe.iid)):
                return GPipeline(self._ctx, pipe)
        return None

    def pipelines(self, info: Any, status: str | None = None, ref: str | None = None, sha: str | None = None,
                  source: str | None = None, updatedAfter: str | None = None, updatedBefore: str | None = None,
                  first: int | None = None, after: str | None = None) -> dict[str, Any]:
        from standin.gitlab.rest import _parse_time

        pipes = sorted((p for p in self._ctx.state.pipelines.values() if p.project_id == self._proj.id),
                       key=lambda p: p.id, reverse=True)
        if status:
            pipes = [p for p in pipes if p.status == status.lower()]
        if ref:
            pipes = [p for p in pipes if p.ref == ref]
        if sha:
            pipes = [p for p in pipes if p.sha == sha]
        if source:
            pipes = [p for p in pipes if p.source == source]
        try:
            if updatedAfter:
                pipes = [p for p in pipes if p.updated_at > _parse_time(updatedAfter, "updatedAfter")]
            if updatedBefore:
                pipes = [p for p in pipes if p.updated_at < _parse_time(updatedBefore, "updatedBefore")]
        except StandInError as exc:
            raise GraphQLError(exc.message) from None
        return _connection([GPipeline(self._ctx, p) for p in pipes], first, after)


class _Root:
    def __init__(self, ctx: _Ctx) -> None:
        self._ctx = ctx

    def currentUser(self, info: Any) -> dict[str, Any] | None:
        u = self._ctx.user
        return {"id": f"gid://gitlab/User/{u.id}", "username": u.username} if u else None

    def project(self, info: Any, fullPath: str) -> GProject | None:
        if self._ctx.user is None:
            return None      # all stand-in projects are private: anonymous users see nothing
        try:
            return GProject(self._ctx, self._ctx.state.project(fullPath))
        except StandInError:
            return None

    def _mutate(self, input: dict[str, Any], play: bool) -> dict[str, Any]:
        ctx = self._ctx
        out: dict[str, Any] = {"clientMutationId": input.get("clientMutationId"), "errors": [], "job": None}
        job = ctx.state.jobs.get(_job_id(input["id"]))
        if job is None or ctx.user is None:
            raise GraphQLError("The resource that you are attempting to access does not exist or you don't "
                               "have permission to perform this action")
        try:
            # G app/policies/ci/build_policy.rb (protected_ref): no update_build -> authorized_find! fails
            ctx.state.check_can_update_ref(job, ctx.user)
        except StandInError:
            raise GraphQLError("The resource that you are attempting to access does not exist or you don't "
                               "have permission to perform this action") from None
        variables = [{"key": v["key"], "value": v["value"],
                      "variable_type": (v.get("variableType") or "ENV_VAR").lower()} for v in input.get("variables") or []]
        try:
            if play:
                result = ctx.state.play_job(job.id, user=ctx.user, variables=variables)
            else:
                if variables and job.manual and not ctx.state.can_set_variables(ctx.state.projects[job.project_id], ctx.user):
                    raise StandInError("Insufficient permissions to set pipeline variables")
                result = ctx.state.retry_job(job.id, user=ctx.user, variables=variables)
        except StandInError as exc:
            out["errors"] = [exc.message.split(" - ", 1)[-1]]
            return out
        out["job"] = GJob(ctx, result)
        return out

    def jobRetry(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        return self._mutate(input, play=False)

    def jobPlay(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        return self._mutate(input, play=True)


def execute(state: GitLabState, user: User | None, query: str, variables: dict[str, Any] | None,
            operation_name: str | None) -> dict[str, Any]:
    """Run one GraphQL request under the state lock; returns the ``{"data", "errors"}`` body."""
    ctx = _Ctx(state, user)
    with state.lock:
        state.tick()
        result = graphql_sync(schema_for(state.graphql_profile), query, root_value=_Root(ctx), variable_values=variables,
                              operation_name=operation_name)
    body: dict[str, Any] = {"data": result.data}
    if result.errors:
        body["errors"] = [err.formatted for err in result.errors]
    return body
