"""The stand-in's in-memory GitLab: projects, pipelines, jobs and their state machine.

Everything is guarded by one re-entrant lock (:attr:`GitLabState.lock`); the
HTTP layer and the Python control API both go through the methods below, so a
request and a test's ``finish_job`` never interleave half-way.

GitLab semantics modelled (see ``docs/standin.md`` for sources):

* job ids are global, pipeline ids global with a per-project ``iid``;
* a pipeline's jobs are processed by stage (or by ``needs``): ``created`` ->
  ``pending`` / ``manual`` / ``skipped``; bridges create their child pipeline
  from an artifact of a job of the same pipeline;
* retry (201) clones the job into a **new** job, the old one gets ``retried``;
  only ``success``/``failed``/``canceled`` jobs are retryable; a retried manual
  job starts at once (``pending``) and takes the new variables, a retried
  non-manual job keeps its variables;
* play (200) works only on playable manual jobs: a job in ``manual`` keeps its
  id, goes to ``pending`` and takes ``job_variables_attributes``; a manual job
  that already ran falls back to a retry **without** the variables and the
  **old** job is returned (GitLab's pitfall);
* pipeline status is GitLab's composite status (allow-failure failures count
  as success with warnings, allow-failure manual jobs are ignored).
"""

from __future__ import annotations

import hashlib
import itertools
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Mapping, Sequence

import yaml

from standin.gitlab.ciconfig import (
    CiConfigError,
    JobSpec,
    PipelineFiltered,
    plan_pipeline,
    validate_config,
)

__all__ = [
    "StandInError", "NotFound", "Forbidden", "BadRequest",
    "User", "Group", "Project", "Pipeline", "Job", "GitLabState",
    "ACTIVE_STATUSES", "COMPLETED_STATUSES", "ROLES", "iso",
]

ACTIVE_STATUSES = frozenset({"created", "waiting_for_resource", "preparing", "pending", "running", "canceling"})
COMPLETED_STATUSES = frozenset({"success", "failed", "canceled", "skipped"})
JOB_STATUSES = ("created", "waiting_for_resource", "preparing", "waiting_for_callback", "pending", "running",
                "success", "failed", "canceling", "canceled", "skipped", "manual", "scheduled")
ROLES = {"guest": 10, "reporter": 20, "developer": 30, "maintainer": 40, "owner": 50}
PIPELINE_SOURCES = ("push", "web", "trigger", "schedule", "api", "external", "pipeline", "chat",
                    "merge_request_event", "external_pull_request_event", "parent_pipeline",
                    "ondemand_dast_scan", "ondemand_dast_validation", "security_orchestration_policy")


class StandInError(Exception):
    """A request GitLab would refuse; ``status`` and ``message`` map to the REST answer."""

    status = 400

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class NotFound(StandInError):
    """GitLab's 404, raised by the stand-in (the server side): its own on purpose, not the client's
    :class:`retry_bot.gitlab.client.NotFound`, so the oracle never shares an error path with the bot it tests."""

    status = 404


class Forbidden(StandInError):
    status = 403


class BadRequest(StandInError):
    status = 400


def iso(ts: float | None) -> str | None:
    """GitLab's timestamp format: ``2026-11-21T23:19:01.123Z``."""
    if ts is None:
        return None
    dt = datetime.fromtimestamp(ts, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


@dataclass
class User:
    id: int
    username: str
    name: str
    role: str = "maintainer"


@dataclass
class Group:
    id: int
    full_path: str
    name: str
    parent_id: int | None


@dataclass
class Project:
    id: int
    full_path: str
    name: str
    namespace_id: int | None
    default_branch: str
    refs: dict[str, str] = field(default_factory=dict)           # branch -> head sha
    configs: dict[str, Any] = field(default_factory=dict)        # sha -> CI config (dict or YAML)
    files: dict[str, dict[str, str]] = field(default_factory=dict)  # sha -> {path: text} for include: local
    commit_times: dict[str, float] = field(default_factory=dict)
    pipeline_variables_min_role: str = "developer"
    archived: bool = False
    next_iid: int = 1
    #: Protected branches: name -> {"push": level, "merge": level, "users": [usernames allowed]}; a level
    #: is a role name or ``"no_one"`` (G app/models/protected_branch.rb, push/merge access levels).
    protected_branches: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Project CI/CD variables (Settings > CI/CD): ``[{key, value, masked, raw}]``.
    ci_variables: list[dict[str, Any]] = field(default_factory=list)
    #: ``auto_cancel_pending_pipelines`` (on by default, G app/models/project_ci_cd_setting.rb).
    auto_cancel_pending_pipelines: bool = True
    #: Project webhooks (Settings > Webhooks), as :func:`standin.hooks.add_project_hook` keeps them
    #: (the secret token included: GitLab stores it and never returns it).
    hooks: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Pipeline:
    id: int
    iid: int
    project_id: int
    ref: str
    sha: str
    source: str
    variables: list[dict[str, str]]
    created_at: float
    updated_at: float
    user_id: int | None
    status: str = "created"
    started_at: float | None = None
    finished_at: float | None = None
    parent_bridge_id: int | None = None
    stages: tuple[str, ...] = ()
    job_ids: list[int] = field(default_factory=list)
    #: Jobs stay ``created`` until then: GitLab processes a new pipeline in a worker (PipelineProcessWorker).
    process_after: float = 0.0


@dataclass
class Job:
    id: int
    pipeline_id: int
    project_id: int
    spec: JobSpec
    created_at: float
    user_id: int | None
    status: str = "created"
    queued_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    runner: dict[str, Any] | None = None
    failure_reason: str | None = None
    exit_code: int | None = None
    trace: bytearray = field(default_factory=bytearray)
    artifacts: dict[str, bytes] = field(default_factory=dict)
    job_variables: list[dict[str, str]] = field(default_factory=list)   # manual-job variables
    retried: bool = False
    retry_of: int | None = None
    token: str = field(default_factory=lambda: "glcbt-" + secrets.token_hex(12))
    downstream_pipeline_id: int | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def stage(self) -> str:
        return self.spec.stage

    @property
    def kind(self) -> str:
        return "bridge" if self.spec.is_bridge else "build"

    @property
    def manual(self) -> bool:
        """GitLab's ``action?``: the job is ``when: manual``."""
        return self.spec.when == "manual"

    @property
    def tag_list(self) -> list[str]:
        return list(self.spec.tags)

    @property
    def allow_failure(self) -> bool:
        if self.spec.allow_failure:
            return True
        return self.exit_code is not None and self.exit_code in self.spec.allow_failure_exit_codes

    @property
    def retryable(self) -> bool:
        return self.status in ("success", "failed", "canceled")

    @property
    def playable(self) -> bool:
        return self.manual and (self.status in ("manual", "scheduled") or self.retryable)


class GitLabState:
    """All projects, pipelines and jobs of one stand-in, behind one lock."""

    def __init__(self, *, base_url: str = "http://127.0.0.1", clock: Callable[[], float] = time.time,
                 gitlab_version: str = "18.6.0", processing_delay: float = 0.0) -> None:
        self.lock = threading.RLock()
        #: Seconds before a new pipeline's jobs leave ``created`` (GitLab's PipelineProcessWorker runs
        #: asynchronously, G app/workers/ci/initial_pipeline_process_worker.rb); 0 processes at once.
        self.processing_delay = processing_delay
        #: What ``GET /version`` claims; it also picks the GraphQL schema profile.
        self.gitlab_version = gitlab_version
        self.clock = clock
        self.base_url = base_url
        self.users: dict[int, User] = {}
        self.tokens: dict[str, int] = {}
        #: Scopes of each token (``api`` unless told otherwise).
        self.token_scopes: dict[str, list[str]] = {}
        self.groups: dict[int, Group] = {}
        self.projects: dict[int, Project] = {}
        self.pipelines: dict[int, Pipeline] = {}
        self.jobs: dict[int, Job] = {}
        self._user_ids = itertools.count(1)
        self._group_ids = itertools.count(1)
        self._project_ids = itertools.count(1)
        self._pipeline_ids = itertools.count(100)
        self._job_ids = itertools.count(1000)
        self._commit_counter = itertools.count(1)
        self.job_listeners: list[Callable[[Job], None]] = []

    @property
    def graphql_profile(self) -> str:
        """The GraphQL schema profile of :attr:`gitlab_version` (``graphql_api.PROFILES``)."""
        from standin.gitlab.graphql_api import profile_for_version

        return profile_for_version(self.gitlab_version)

    # ----------------------------------------------------------------- users
    def add_user(self, username: str, token: str, role: str = "maintainer",
                 scopes: Sequence[str] = ("api",)) -> User:
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; one of {', '.join(ROLES)}")
        with self.lock:
            self.token_scopes[token] = list(scopes)
            user = User(next(self._user_ids), username, username.replace("-", " ").title(), role)
            self.users[user.id] = user
            self.tokens[token] = user.id
            return user

    def user_for_token(self, token: str | None) -> User | None:
        if not token:
            return None
        with self.lock:
            uid = self.tokens.get(token)
            return self.users.get(uid) if uid is not None else None

    # --------------------------------------------------------------- projects
    def _ensure_groups(self, namespace: str) -> int | None:
        if not namespace:
            return None
        parent: int | None = None
        parts = namespace.split("/")
        for i in range(len(parts)):
            path = "/".join(parts[: i + 1])
            found = next((g for g in self.groups.values() if g.full_path == path), None)
            if found is None:
                found = Group(next(self._group_ids), path, parts[i], parent)
                self.groups[found.id] = found
            parent = found.id
        return parent

    def add_project(self, path: str, ci_config: Mapping[str, Any] | str, *, default_branch: str = "main",
                    pipeline_variables_min_role: str = "developer", files: Mapping[str, str] | None = None,
                    protected_branches: Mapping[str, Mapping[str, Any]] | None = None) -> Project:
        """Create ``group/sub/name`` (groups are created on the way) with a CI config on its default branch.

        ``files`` are other repository files (``{path: text}``) for ``include: local``.
        ``protected_branches`` defaults to GitLab's default branch protection: the default
        branch protected, push and merge for Maintainers (G lib/gitlab/access/branch_protection.rb,
        "fully protected"); pass ``{}`` for none.
        """
        if pipeline_variables_min_role not in (*ROLES, "no_one_allowed"):
            raise ValueError(f"unknown pipeline_variables_min_role {pipeline_variables_min_role!r}")
        validate_config(ci_config, files)  # fail early, with the config's own message
        with self.lock:
            if any(p.full_path == path for p in self.projects.values()):
                raise ValueError(f"project {path!r} already exists")
            namespace, _, name = path.rpartition("/")
            project = Project(next(self._project_ids), path, name, self._ensure_groups(namespace), default_branch,
                              pipeline_variables_min_role=pipeline_variables_min_role)
            if protected_branches is None:
                protected_branches = {default_branch: {"push": "maintainer", "merge": "maintainer"}}
            for branch, levels in protected_branches.items():
                self.protect_branch(project, branch, **levels)
            self.projects[project.id] = project
            self.set_ci_config(project.id, ci_config, ref=default_branch, files=files or {})
            return project

    def set_ci_config(self, project: int | str, ci_config: Mapping[str, Any] | str, *, ref: str | None = None,
                      files: Mapping[str, str] | None = None) -> str:
        """Commit a new CI configuration on ``ref`` (default branch by default); returns the new sha.

        ``files`` replaces the other repository files; ``None`` keeps those of the ref's (or the
        default branch's) current commit.  Raises
        :class:`~standin.gitlab.ciconfig.CiConfigError` for an invalid configuration.
        """
        with self.lock:
            proj = self.project(project)
            ref = ref or proj.default_branch
            if files is None:
                base = proj.refs.get(ref) or proj.refs.get(proj.default_branch)
                files = proj.files.get(base, {}) if base else {}
            validate_config(ci_config, files)
            text = ci_config if isinstance(ci_config, str) else yaml.safe_dump(dict(ci_config), sort_keys=True)
            sha = hashlib.sha1(f"{proj.id}:{ref}:{next(self._commit_counter)}:{text}".encode()).hexdigest()
            proj.configs[sha] = ci_config
            proj.files[sha] = dict(files)
            proj.commit_times[sha] = self.clock()
            proj.refs[ref] = sha
            return sha

    def protect_branch(self, project: Project | int | str, branch: str, *, push: str = "maintainer",
                       merge: str = "maintainer", users: Sequence[str] = ()) -> None:
        """Protect ``branch``: who may push and merge (a role, or ``"no_one"``), plus named users."""
        for level in (push, merge):
            if level not in (*ROLES, "no_one"):
                raise ValueError(f"unknown access level {level!r}; a role or 'no_one'")
        with self.lock:
            proj = project if isinstance(project, Project) else self.project(project)
            proj.protected_branches[branch] = {"push": push, "merge": merge, "users": list(users)}

    def is_protected(self, proj: Project, ref: str) -> bool:
        return ref in proj.protected_branches

    def can_update_branch(self, proj: Project, user: User | None, ref: str) -> bool:
        """``Gitlab::UserAccess#can_update_branch?`` (G lib/gitlab/user_access.rb): Developer on an
        unprotected branch; on a protected one, push *or* merge rights (or being a named user)."""
        if user is None or ROLES[user.role] < ROLES["developer"]:
            return False
        rule = proj.protected_branches.get(ref)
        if rule is None:
            return True
        if user.username in rule.get("users", ()):
            return True
        return any(level != "no_one" and ROLES[user.role] >= ROLES[level] for level in (rule["push"], rule["merge"]))

    def check_can_update_ref(self, job_or_pipe: "Job | Pipeline", user: User | None) -> None:
        """G app/policies/ci/build_policy.rb ``protected_ref``: on a protected ref, retry/play/``jobRetry``
        need push or merge rights to it (403 otherwise)."""
        pipe = job_or_pipe if isinstance(job_or_pipe, Pipeline) else self.pipelines[job_or_pipe.pipeline_id]
        proj = self.projects[pipe.project_id]
        if user is not None and not self.can_update_branch(proj, user, pipe.ref):
            raise Forbidden("403 Forbidden")

    def can_read_pipeline_variables(self, pipe: "Pipeline", user: User | None) -> bool:
        """G app/policies/ci/pipeline_policy.rb ``read_pipeline_variable``: ``admin_pipeline`` (Maintainer),
        or the pipeline's own triggerer who may update it."""
        if user is None:
            return False
        if ROLES[user.role] >= ROLES["maintainer"]:
            return True
        return pipe.user_id == user.id and self.can_update_branch(self.projects[pipe.project_id], user, pipe.ref)

    def project(self, ref: int | str) -> Project:
        """Look a project up by id or full path (as the REST ``:id`` does)."""
        with self.lock:
            if isinstance(ref, int) or (isinstance(ref, str) and ref.isdigit()):
                proj = self.projects.get(int(ref))
            else:
                proj = next((p for p in self.projects.values() if p.full_path == ref), None)
            if proj is None:
                raise NotFound("404 Project Not Found")
            return proj

    def group(self, ref: int | str) -> Group:
        with self.lock:
            if isinstance(ref, int) or ref.isdigit():
                grp = self.groups.get(int(ref))
            else:
                grp = next((g for g in self.groups.values() if g.full_path == ref), None)
            if grp is None:
                raise NotFound("404 Group Not Found")
            return grp

    def group_projects(self, group: int | str, include_subgroups: bool = False) -> list[Project]:
        with self.lock:
            grp = self.group(group)
            ids = {grp.id}
            if include_subgroups:
                ids |= {g.id for g in self.groups.values() if g.full_path.startswith(grp.full_path + "/")}
            return sorted((p for p in self.projects.values() if p.namespace_id in ids), key=lambda p: p.id)

    # -------------------------------------------------------------- lookups
    def job(self, job_id: int, project: int | str | None = None) -> Job:
        with self.lock:
            job = self.jobs.get(int(job_id))
            if job is None or (project is not None and job.project_id != self.project(project).id):
                raise NotFound("404 Not found")
            return job

    def pipeline(self, pipeline_id: int, project: int | str | None = None) -> Pipeline:
        with self.lock:
            pipe = self.pipelines.get(int(pipeline_id))
            if pipe is None or (project is not None and pipe.project_id != self.project(project).id):
                raise NotFound("404 Not found")
            return pipe

    def pipeline_jobs(self, pipeline_id: int, *, include_retried: bool = True) -> list[Job]:
        with self.lock:
            pipe = self.pipeline(pipeline_id)
            return [self.jobs[j] for j in pipe.job_ids if include_retried or not self.jobs[j].retried]

    def _touch(self, pipe: Pipeline) -> None:
        pipe.updated_at = self.clock()

    # ------------------------------------------------------------- variables
    def predefined_variables(self, pipe: Pipeline, job: Job | None = None) -> list[tuple[str, str]]:
        """GitLab's predefined ``CI_*`` variables for rules evaluation and runner payloads."""
        proj = self.projects[pipe.project_id]
        namespace = proj.full_path.rpartition("/")[0]
        web = f"{self.base_url}/{proj.full_path}"
        out = [
            ("CI", "true"), ("GITLAB_CI", "true"),
            ("CI_SERVER_URL", self.base_url), ("CI_API_V4_URL", f"{self.base_url}/api/v4"),
            ("CI_API_GRAPHQL_URL", f"{self.base_url}/api/graphql"),
            ("CI_PROJECT_ID", str(proj.id)), ("CI_PROJECT_PATH", proj.full_path),
            ("CI_PROJECT_NAME", proj.name), ("CI_PROJECT_NAMESPACE", namespace),
            ("CI_PROJECT_URL", web), ("CI_DEFAULT_BRANCH", proj.default_branch),
            ("CI_PIPELINE_ID", str(pipe.id)), ("CI_PIPELINE_IID", str(pipe.iid)),
            ("CI_PIPELINE_SOURCE", pipe.source), ("CI_PIPELINE_URL", f"{web}/-/pipelines/{pipe.id}"),
            ("CI_COMMIT_SHA", pipe.sha), ("CI_COMMIT_SHORT_SHA", pipe.sha[:8]),
            ("CI_COMMIT_REF_NAME", pipe.ref), ("CI_COMMIT_REF_SLUG", pipe.ref.lower().replace("/", "-")),
            ("CI_COMMIT_BRANCH", pipe.ref), ("CI_COMMIT_REF_PROTECTED", "true" if pipe.ref in proj.protected_branches else "false"),
        ]
        if job is not None:
            out += [
                ("CI_JOB_ID", str(job.id)), ("CI_JOB_NAME", job.name), ("CI_JOB_STAGE", job.stage),
                ("CI_JOB_URL", f"{web}/-/jobs/{job.id}"), ("CI_JOB_TOKEN", job.token),
            ]
            if job.manual:
                out.append(("CI_JOB_MANUAL", "true"))
            if job.runner:
                out.append(("CI_RUNNER_TAGS", ",".join(job.runner.get("tags", []))))
        return out

    # -------------------------------------------------------------- pipelines
    def create_pipeline(self, project: int | str, ref: str | None = None, *, source: str = "push",
                        variables: Iterable[Mapping[str, str]] | Mapping[str, str] | None = None,
                        user: User | None = None, config: Mapping[str, Any] | str | None = None,
                        sha: str | None = None, parent_bridge: Job | None = None) -> Pipeline:
        """Create a pipeline from the project's CI config at ``ref`` (or from ``config`` for child pipelines).

        Raises :class:`BadRequest` with GitLab's messages for an unknown ref, a filtered pipeline or
        an invalid configuration (the REST layer answers 400 with ``{"message": {"base": [...]}}``).
        """
        if source not in PIPELINE_SOURCES:
            raise ValueError(f"unknown pipeline source {source!r}")
        var_list = _variable_list(variables)
        with self.lock:
            proj = self.project(project)
            ref = ref or proj.default_branch
            if sha is None:
                if ref not in proj.refs:
                    raise BadRequest("Reference not found")
                sha = proj.refs[ref]
            if user is not None and parent_bridge is None and not self.can_update_branch(proj, user, ref):
                # G lib/gitlab/ci/pipeline/chain/validate/abilities.rb (allowed_to_write_ref?)
                raise BadRequest(f"You do not have sufficient permission to run a pipeline on '{ref}'. Please "
                                 "select a different branch or contact your administrator for assistance.")
            if config is None:
                config = proj.configs[sha]
            now = self.clock()
            pipe = Pipeline(next(self._pipeline_ids), proj.next_iid, proj.id, ref, sha, source, var_list,
                            now, now, user.id if user else None,
                            parent_bridge_id=parent_bridge.id if parent_bridge else None)
            scope = dict(self.predefined_variables(pipe))
            scope.update((v["key"], v["value"]) for v in var_list)
            try:
                plan = plan_pipeline(config, scope, proj.files.get(sha))
            except (PipelineFiltered, CiConfigError) as exc:
                raise BadRequest(str(exc)) from None
            proj.next_iid += 1
            pipe.stages = plan.stages
            self.pipelines[pipe.id] = pipe
            for spec in plan.jobs:
                job = Job(next(self._job_ids), pipe.id, proj.id, spec, now, pipe.user_id)
                self.jobs[job.id] = job
                pipe.job_ids.append(job.id)
            pipe.process_after = now + self.processing_delay
            if parent_bridge is None:
                self._auto_cancel_redundant(pipe)
            self._process(pipe)
            return pipe

    def tick(self) -> None:
        """Run the pipeline processing that came due (the stand-in's PipelineProcessWorker)."""
        with self.lock:
            now = self.clock()
            for pipe in list(self.pipelines.values()):
                if pipe.process_after and pipe.process_after <= now:
                    pipe.process_after = 0.0
                    self._process(pipe)

    def _hierarchy(self, pipe: Pipeline) -> list[Pipeline]:
        out = [pipe]
        for jid in pipe.job_ids:
            child = self.jobs[jid].downstream_pipeline_id
            if child is not None:
                out += self._hierarchy(self.pipelines[child])
        return out

    def _auto_cancel_redundant(self, new: Pipeline) -> None:
        """G app/services/ci/pipeline_creation/cancel_redundant_pipelines_service.rb (``conservative``):
        older alive pipelines on the same ref, at another commit than the ref's head, are canceled with
        their child pipelines -- unless a job that is not ``interruptible`` has started in them."""
        proj = self.projects[new.project_id]
        if not proj.auto_cancel_pending_pipelines:
            return
        head = proj.refs.get(new.ref)
        for old in list(self.pipelines.values()):
            if (old.project_id != new.project_id or old.id >= new.id or old.ref != new.ref
                    or old.parent_bridge_id is not None or old.sha == head
                    or old.status not in ACTIVE_STATUSES | {"scheduled", "manual"}):
                continue
            tree = self._hierarchy(old)
            jobs = [self.jobs[j] for p in tree for j in p.job_ids]
            if any(j.started_at is not None and not j.spec.interruptible and not j.spec.is_bridge for j in jobs):
                continue
            for j in jobs:
                # Ci::HasStatus cancelable statuses: a ``manual`` job is not canceled.
                if j.status in ("created", "waiting_for_resource", "preparing", "pending", "running", "scheduled"):
                    j.status = "canceled"
                    j.finished_at = self.clock()
                    self._notify(j)
            for p in tree:
                self._refresh_status(p)

    def pipeline_variables(self, pipeline_id: int) -> list[dict[str, str]]:
        with self.lock:
            return [dict(v) for v in self.pipeline(pipeline_id).variables]

    # ---------------------------------------------------------------- actions
    def can_set_variables(self, proj: Project, user: User | None) -> bool:
        """Whether ``user`` satisfies the project's ``ci_pipeline_variables_minimum_override_role``."""
        if proj.pipeline_variables_min_role == "no_one_allowed":
            return False
        return user is not None and ROLES[user.role] >= ROLES[proj.pipeline_variables_min_role]

    def check_pipeline_variables_allowed(self, project: int | str, user: User | None) -> None:
        with self.lock:
            if not self.can_set_variables(self.project(project), user):
                raise BadRequest("Insufficient permissions to set pipeline variables")

    def retry_job(self, job_id: int, *, user: User | None = None,
                  variables: Iterable[Mapping[str, str]] | None = None) -> Job:
        """``RetryJobService``: clone into a new job; the new job is returned."""
        with self.lock:
            old = self.job(job_id)
            self.check_can_update_ref(old, user)
            if not old.retryable:
                raise Forbidden("403 Forbidden - Job is not retryable")
            return self._clone(old, user=user, variables=_variable_list(variables) if variables else None)

    def _clone(self, old: Job, *, user: User | None, variables: list[dict[str, str]] | None) -> Job:
        pipe = self.pipelines[old.pipeline_id]
        now = self.clock()
        new_vars = variables if (old.manual and variables) else [dict(v) for v in old.job_variables]
        new = Job(next(self._job_ids), old.pipeline_id, old.project_id, old.spec, now,
                  user.id if user else old.user_id, job_variables=new_vars, retry_of=old.id)
        old.retried = True
        self.jobs[new.id] = new
        pipe.job_ids.append(new.id)
        self._reset_skipped_after(pipe, old)
        if new.spec.is_bridge:
            self._enqueue(pipe, new)
        else:
            new.status = "pending"          # a retried manual job starts at once (enqueue_if_actionable)
            new.queued_at = now
            self._notify(new)
        pipe.finished_at = None
        self._process(pipe)
        return new

    def play_job(self, job_id: int, *, user: User | None = None,
                 variables: Iterable[Mapping[str, str]] | None = None) -> Job:
        """``PlayBuildService``: returns the job GitLab's API presents (the *old* one on the fallback)."""
        var_list = _variable_list(variables) if variables else []
        with self.lock:
            job = self.job(job_id)
            self.check_can_update_ref(job, user)
            if not job.playable:
                # G lib/api/ci/jobs.rb: ``bad_request!("Unplayable Job")`` -- a job still ``created``
                # (not processed yet) is not playable either.
                raise BadRequest("400 Bad request - Unplayable Job")
            proj = self.projects[job.project_id]
            if var_list and not self.can_set_variables(proj, user):
                raise Forbidden("403 Forbidden")
            if job.status in ("manual", "scheduled"):
                job.status = "pending"
                job.queued_at = self.clock()
                job.job_variables = var_list
                if user is not None:
                    job.user_id = user.id
                pipe = self.pipelines[job.pipeline_id]
                pipe.finished_at = None
                self._notify(job)
                self._process(pipe)
                return job
            # GitLab pitfall: an already-run manual job cannot be enqueued again; PlayBuildService
            # falls back to RetryJobService.execute(build) WITHOUT the variables, and the API then
            # presents the OLD job.
            self._clone(job, user=user, variables=None)
            return job

    def cancel_job(self, job_id: int, *, user: User | None = None) -> Job:
        with self.lock:
            job = self.job(job_id)
            self.check_can_update_ref(job, user)   # build_policy.rb: protected_ref prevents update_build
            if job.status in ACTIVE_STATUSES or job.status in ("scheduled", "waiting_for_callback"):
                now = self.clock()
                job.status = "canceled"
                job.finished_at = now
                self._notify(job)
                self._process(self.pipelines[job.pipeline_id])
            return job

    # ----------------------------------------------------------- runner side
    def next_pending_job(self, tags: Iterable[str] | None = None, *, run_untagged: bool = True,
                         start: bool = False, runner: Mapping[str, Any] | None = None) -> Job | None:
        """The oldest ``pending`` build a runner with ``tags`` would pick (``start=True`` claims it)."""
        tagset = set(tags or ())
        with self.lock:
            self.tick()
            for job in sorted(self.jobs.values(), key=lambda j: (j.queued_at or 0, j.id)):
                if job.status != "pending" or job.spec.is_bridge:
                    continue
                if not job.spec.tags and not run_untagged:
                    continue
                if set(job.spec.tags) <= tagset:
                    if start:
                        self.start_job(job.id, runner=runner, tags=sorted(tagset))
                    return job
            return None

    def start_job(self, job_id: int, *, runner: Mapping[str, Any] | None = None,
                  tags: Sequence[str] = ()) -> Job:
        with self.lock:
            job = self.job(job_id)
            if job.status != "pending":
                raise BadRequest(f"job {job_id} is {job.status}, not pending; a runner cannot pick it")
            now = self.clock()
            job.status = "running"
            job.started_at = now
            job.runner = dict(runner) if runner else {
                "id": 1, "description": "stand-in local runner", "ip_address": "127.0.0.1", "active": True,
                "paused": False, "is_shared": True, "runner_type": "instance_type", "name": "gitlab-runner",
                "online": True, "status": "online", "tags": list(tags),
            }
            pipe = self.pipelines[job.pipeline_id]
            if pipe.started_at is None:
                pipe.started_at = now
            self._notify(job)
            self._process(pipe)
            return job

    def append_trace(self, job_id: int, data: bytes) -> None:
        with self.lock:
            self.job(job_id).trace.extend(data)

    def finish_job(self, job_id: int, status: str, *, failure_reason: str | None = None,
                   exit_code: int | None = None, trace: bytes | None = None,
                   artifacts: Mapping[str, bytes | str] | None = None) -> Job:
        """What the runner's final job update does: status, ``failure_reason``, exit code, log, artifacts.

        A job canceled meanwhile stays ``canceled`` (its log and artifacts are still kept).
        """
        if status not in ("success", "failed", "canceled"):
            raise ValueError(f"a job finishes as success, failed or canceled, not {status!r}")
        with self.lock:
            job = self.job(job_id)
            if trace is not None:
                job.trace = bytearray(trace)
            for path, content in (artifacts or {}).items():
                job.artifacts[path] = content.encode() if isinstance(content, str) else bytes(content)
            if job.status == "canceled":
                return job
            if job.status != "running":
                raise BadRequest(f"job {job_id} is {job.status}, not running; start it first")
            job.status = status
            job.finished_at = self.clock()
            job.exit_code = exit_code
            job.failure_reason = (failure_reason or "unknown_failure") if status == "failed" else None
            self._notify(job)
            self._process(self.pipelines[job.pipeline_id])
            return job

    def _notify(self, job: Job) -> None:
        self._touch(self.pipelines[job.pipeline_id])
        for listener in list(self.job_listeners):
            listener(job)

    # ------------------------------------------------------------- processing
    def latest_jobs(self, pipe: Pipeline) -> list[Job]:
        """The pipeline's jobs that were not retried (what GitLab shows), in creation order."""
        return [self.jobs[j] for j in pipe.job_ids if not self.jobs[j].retried]

    def _reset_skipped_after(self, pipe: Pipeline, job: Job) -> None:
        stage_index = pipe.stages.index(job.stage)
        for other in self.latest_jobs(pipe):
            if other.status != "skipped":
                continue
            needs = [n for n, _ in other.spec.needs] if other.spec.needs is not None else None
            if (needs is not None and job.name in needs) or (needs is None and pipe.stages.index(other.stage) > stage_index):
                other.status = "created"

    @staticmethod
    def _outcome(job: Job, dag: bool) -> str:
        """``ok``, ``failed`` or ``wait`` for a job as a prerequisite of another."""
        if job.status in ("success", "skipped"):
            return "ok"
        if job.status == "failed":
            return "ok" if job.allow_failure else "failed"
        if job.status == "canceled":
            return "failed"
        if job.status == "manual":
            return "ok" if (job.allow_failure and not dag) else "wait"
        return "wait"

    def _process(self, pipe: Pipeline) -> None:
        """``ProcessPipelineService``: move ``created`` jobs on until nothing changes; refresh statuses."""
        if pipe.process_after and self.clock() < pipe.process_after:
            self._refresh_status(pipe)
            return  # not processed yet: every job is still ``created``
        changed = True
        while changed:
            changed = False
            latest = self.latest_jobs(pipe)
            by_name = {j.name: j for j in latest}
            for job in latest:
                if job.status != "created":
                    continue
                if job.spec.needs is not None:
                    prereqs = [by_name[n] for n, _ in job.spec.needs if n in by_name]
                    dag = True
                else:
                    idx = pipe.stages.index(job.stage)
                    prereqs = [j for j in latest if pipe.stages.index(j.stage) < idx]
                    dag = False
                outcomes = {self._outcome(p, dag) for p in prereqs}
                if "wait" in outcomes:
                    continue
                failed = "failed" in outcomes
                when = job.spec.when
                if (when == "on_failure") != failed and when != "always":
                    job.status = "skipped"
                elif when == "manual":
                    job.status = "manual"
                    self._notify(job)
                else:
                    self._enqueue(pipe, job)
                self._touch(pipe)
                changed = True
        self._refresh_status(pipe)

    def _enqueue(self, pipe: Pipeline, job: Job) -> None:
        now = self.clock()
        job.queued_at = now
        if not job.spec.is_bridge:
            job.status = "pending"
            self._notify(job)
            return
        job.status = "running"
        job.started_at = now
        try:
            child_config = self._child_config(pipe, job)
            child = self.create_pipeline(pipe.project_id, pipe.ref, source="parent_pipeline",
                                         variables=self._forwarded_variables(pipe, job), config=child_config,
                                         sha=pipe.sha, parent_bridge=job,
                                         user=self.users.get(job.user_id) if job.user_id else None)
        except StandInError as exc:
            job.status = "failed"
            job.finished_at = now
            job.failure_reason = "downstream_pipeline_creation_failed"
            job.trace = bytearray(f"Downstream pipeline creation failed: {exc.message}\n".encode())
            return
        job.downstream_pipeline_id = child.id
        if not self._depends(job):
            job.status = "success"
            job.finished_at = now
        else:
            self._mirror_child(job, child)

    def _child_config(self, pipe: Pipeline, bridge: Job) -> Any:
        trigger = bridge.spec.trigger or {}
        if "project" in trigger:
            raise BadRequest("multi-project triggers are not modelled by the stand-in")
        include = trigger.get("include")
        includes = include if isinstance(include, list) else [include]
        if len(includes) == 1 and isinstance(includes[0], (str, Mapping)) and (
                isinstance(includes[0], str) or "local" in includes[0]):
            path = (includes[0] if isinstance(includes[0], str) else str(includes[0]["local"])).lstrip("/")
            files = self.projects[pipe.project_id].files.get(pipe.sha, {})
            if path not in files:
                raise BadRequest(f"Local file `{path}` does not exist!")
            return files[path]
        if len(includes) != 1 or not isinstance(includes[0], Mapping) or "artifact" not in includes[0]:
            raise BadRequest("the stand-in models 'trigger: include:' with one '{artifact, job}' or 'local' entry only")
        artifact, source_name = includes[0]["artifact"], includes[0].get("job")
        source = next((j for j in self.latest_jobs(pipe) if j.name == source_name), None)
        if source is None or artifact not in source.artifacts:
            raise BadRequest(f"Job `{source_name}` has no artifact `{artifact}`")
        return source.artifacts[artifact].decode("utf-8", "replace")

    def _forwarded_variables(self, pipe: Pipeline, bridge: Job) -> list[dict[str, str]]:
        forward = (bridge.spec.trigger or {}).get("forward") or {}
        out: list[dict[str, str]] = []
        if forward.get("yaml_variables", True):
            out += [{"key": k, "value": v, "variable_type": "env_var"} for k, v in bridge.spec.variables]
        if forward.get("pipeline_variables", False):
            out += [dict(v) for v in pipe.variables]
        return out

    @staticmethod
    def _depends(bridge: Job) -> bool:
        return (bridge.spec.trigger or {}).get("strategy") == "depend"

    def _mirror_child(self, bridge: Job, child: Pipeline) -> None:
        status = child.status
        mirrored = status if status in ("success", "failed", "canceled", "skipped", "manual") else "running"
        if mirrored != bridge.status:
            bridge.status = mirrored
            bridge.finished_at = self.clock() if mirrored in COMPLETED_STATUSES else None
            bridge.failure_reason = "unknown_failure" if mirrored == "failed" else None

    def _refresh_status(self, pipe: Pipeline) -> None:
        new = composite_status(self.latest_jobs(pipe))
        if new != pipe.status:
            pipe.status = new
            self._touch(pipe)
            pipe.finished_at = self.clock() if new in COMPLETED_STATUSES else None
            if pipe.parent_bridge_id is not None:
                bridge = self.jobs[pipe.parent_bridge_id]
                if self._depends(bridge) and not bridge.retried:
                    self._mirror_child(bridge, pipe)
                    self._process(self.pipelines[bridge.pipeline_id])


def composite_status(jobs: Sequence[Job]) -> str:
    """``Gitlab::Ci::Status::Composite#status`` for the latest jobs of a pipeline."""
    if not jobs:
        return "skipped"
    keys: set[str] = set()
    for job in jobs:
        if job.allow_failure and job.status in ("manual", "canceled"):
            keys.add("ignored")
        elif job.allow_failure and job.status == "failed":
            keys.add("success_with_warnings")
        else:
            keys.add(job.status)

    def only(*allowed: str) -> bool:
        return keys <= set(allowed)

    if only("skipped", "ignored"):
        return "skipped"
    if only("success", "skipped", "success_with_warnings", "ignored"):
        return "success"
    if only("created", "success_with_warnings", "ignored"):
        return "created"
    if only("canceled", "success", "skipped", "success_with_warnings", "ignored"):
        return "canceled"
    if only("pending", "created", "skipped", "success_with_warnings", "ignored"):
        return "pending"
    if keys & {"running", "pending"}:
        return "running"
    if "manual" in keys:
        return "manual"
    if "scheduled" in keys:
        return "scheduled"
    if "created" in keys:
        return "running"
    return "failed"


def _variable_list(variables: Iterable[Mapping[str, str]] | Mapping[str, str] | None) -> list[dict[str, str]]:
    """Normalise ``{K: V}`` or ``[{key, value[, variable_type]}]`` into GitLab's list form."""
    if not variables:
        return []
    if isinstance(variables, Mapping):
        return [{"key": str(k), "value": str(v), "variable_type": "env_var"} for k, v in variables.items()]
    out = []
    for item in variables:
        if not isinstance(item, Mapping) or "key" not in item:
            raise BadRequest("variables must be a list of {key, value} objects")
        out.append({"key": str(item["key"]), "value": str(item.get("value", "")),
                    "variable_type": str(item.get("variable_type", "env_var"))})
    return out
