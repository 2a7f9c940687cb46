"""The ``/api/v4`` subset: routing, parameters, pagination and GitLab's error bodies.

Each route is ``(method, regex on the raw path, handler)``; a handler takes a
:class:`Request` plus the regex groups (already URL-decoded, so ``group%2Fproj``
works as a project id) and returns a :class:`Response`.
"""

from __future__ import annotations

import base64
import json
import re

import yaml
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import unquote, urlencode

from standin.gitlab import entities
from retry_bot.isotime import parse_iso_time
from standin.gitlab.ciconfig import CiConfigError, PipelineFiltered, load_config, merged_yaml, plan_pipeline
from standin.gitlab.state import (
    JOB_STATUSES,
    ROLES,
    BadRequest,
    Forbidden,
    GitLabState,
    NotFound,
    StandInError,
    User,
    iso,
)

__all__ = ["Request", "Response", "dispatch", "json_response", "error_response"]

# ``GET /version`` answers ``GitLabState.gitlab_version`` (``StandIn(gitlab_version=...)``), which also
# picks the GraphQL schema profile (graphql_api.PROFILES).


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    body: dict[str, Any]
    user: User | None
    state: GitLabState
    token: str | None = None

    def arg(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        if values:
            return values[-1]
        value = self.body.get(name)
        return default if value is None else str(value)

    def array(self, name: str) -> list[str]:
        values = list(self.query.get(name + "[]", [])) + list(self.query.get(name, []))
        body_value = self.body.get(name)
        if isinstance(body_value, list):
            values += [str(v) for v in body_value]
        elif body_value is not None:
            values.append(str(body_value))
        return values

    def flag(self, name: str, default: bool = False) -> bool:
        value = self.arg(name)
        return default if value is None else value.lower() in ("1", "true", "yes", "on")


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


def json_response(status: int, payload: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(status, json.dumps(payload).encode(), "application/json", dict(headers or {}))


def error_response(status: int, message: Any) -> Response:
    return json_response(status, {"message": message})


def _per_page(req: Request) -> int:
    try:
        value = int(req.arg("per_page", "20") or 20)
    except ValueError:
        raise BadRequest("per_page is invalid") from None
    return max(1, min(100, value))


def _link(req: Request, **params: str) -> str:
    query = {k: v for k, v in req.query.items() if k not in ("page", "cursor")}
    query.update({k: [v] for k, v in params.items()})
    pairs = [(k, v) for k, values in query.items() for v in values]
    return f"{req.state.base_url}{req.path}?{urlencode(pairs)}"


def _offset_page(req: Request, items: list[Any], *, with_total: bool) -> tuple[list[Any], dict[str, str]]:
    per_page = _per_page(req)
    try:
        page = max(1, int(req.arg("page", "1") or 1))
    except ValueError:
        raise BadRequest("page is invalid") from None
    start = (page - 1) * per_page
    chunk = items[start:start + per_page]
    has_next = len(items) > start + per_page
    headers = {"X-Page": str(page), "X-Per-Page": str(per_page),
               "X-Next-Page": str(page + 1) if has_next else "", "X-Prev-Page": str(page - 1) if page > 1 else ""}
    links = []
    if page > 1:
        links.append(f'<{_link(req, page=str(page - 1), per_page=str(per_page))}>; rel="prev"')
    if has_next:
        links.append(f'<{_link(req, page=str(page + 1), per_page=str(per_page))}>; rel="next"')
    links.append(f'<{_link(req, page="1", per_page=str(per_page))}>; rel="first"')
    if with_total:
        total_pages = max(1, -(-len(items) // per_page))
        headers["X-Total"] = str(len(items))
        headers["X-Total-Pages"] = str(total_pages)
        links.append(f'<{_link(req, page=str(total_pages), per_page=str(per_page))}>; rel="last"')
    headers["Link"] = ", ".join(links)
    return chunk, headers


def _keyset_jobs(req: Request, jobs: list[Any]) -> tuple[list[Any], dict[str, str]]:
    """GitLab's generic keyset pagination for jobs: ``id desc`` only, cursor in ``Link: rel="next"``."""
    if (req.arg("order_by") or "id") != "id" or (req.arg("sort") or "desc") != "desc":
        raise StandInError("405 Method Not Allowed - Keyset pagination is not yet available for this type of request", 405)
    per_page = _per_page(req)
    cursor = req.arg("cursor")
    if cursor:
        try:
            before = int(json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))["id"])
        except (ValueError, KeyError, TypeError):
            raise BadRequest("400 Bad request - cursor is invalid") from None
        jobs = [j for j in jobs if j.id < before]
    chunk = jobs[:per_page]
    headers = {"X-Per-Page": str(per_page)}
    if len(jobs) > per_page:
        token = base64.urlsafe_b64encode(json.dumps({"id": str(chunk[-1].id), "_kd": "n"}).encode()).decode().rstrip("=")
        headers["Link"] = f'<{_link(req, cursor=token, per_page=str(per_page))}>; rel="next"'
    return chunk, headers


def _parse_time(value: str, name: str) -> float:
    """A ``type: DateTime`` query parameter (G lib/api/ci/pipelines.rb): no offset means UTC (retry_bot/isotime.py)."""
    parsed = parse_iso_time(value)
    if parsed is None:
        raise BadRequest(f"{name} is invalid")
    return parsed.timestamp()


def _require(req: Request, role: str) -> None:
    if req.user is None or ROLES[req.user.role] < ROLES[role]:
        raise Forbidden("403 Forbidden")


def _scopes(req: Request) -> set[str]:
    scopes = set(req.array("scope"))
    bad = scopes - set(JOB_STATUSES)
    if bad:
        raise BadRequest("scope does not have a valid value")
    return scopes


# ------------------------------------------------------------------ handlers
def get_user(req: Request) -> Response:
    """``GET /user`` (python-gitlab's ``gl.auth()``)."""
    body = entities.user_json(req.state, req.user) or {}
    body.update({"is_admin": False, "bot": False, "created_at": None})
    return json_response(200, body)


def get_token_self(req: Request) -> Response:
    """``GET /personal_access_tokens/self`` (G lib/api/personal_access_tokens/self_information_api.rb)."""
    scopes = req.state.token_scopes.get(req.token or "", ["api"])
    return json_response(200, {"id": 1, "name": "retry-bot", "revoked": False, "active": True, "scopes": scopes,
                               "user_id": req.user.id if req.user else None, "expires_at": None})


def get_version(req: Request) -> Response:
    return json_response(200, {"version": f"{req.state.gitlab_version}-standin", "revision": "standin",
                                "enterprise": False})


def get_raw_file(req: Request, project: str, file: str) -> Response:
    """``GET /projects/:id/repository/files/:path/raw?ref=``: ``.gitlab-ci.yml`` and the project's files."""
    proj = req.state.project(project)
    ref = req.arg("ref") or proj.default_branch
    sha = proj.refs.get(ref, ref)
    if sha not in proj.configs:
        raise NotFound("404 Commit Not Found")
    if file != ".gitlab-ci.yml":
        content = proj.files.get(sha, {}).get(file)
        if content is None:
            raise NotFound("404 File Not Found")
        return Response(200, content.encode(), "text/plain")
    config = proj.configs[sha]
    text = config if isinstance(config, str) else yaml.safe_dump(config, sort_keys=False)
    return Response(200, text.encode(), "text/plain")


def get_branch(req: Request, project: str, branch: str) -> Response:
    """``GET /projects/:id/repository/branches/:branch``: the branch and its head commit."""
    proj = req.state.project(project)
    name = unquote(branch)
    sha = proj.refs.get(name)
    if sha is None:
        raise NotFound("404 Branch Not Found")
    return json_response(200, {
        "name": name, "merged": False, "protected": name in proj.protected_branches,
        "default": name == proj.default_branch,
        "developers_can_push": proj.protected_branches.get(name, {}).get("push", "developer") == "developer",
        "developers_can_merge": proj.protected_branches.get(name, {}).get("merge", "developer") == "developer",
        "can_push": req.state.can_update_branch(proj, req.user, name), "web_url": f"{req.state.base_url}/{proj.full_path}/-/tree/{name}",
        "commit": {"id": sha, "short_id": sha[:8], "title": "commit", "message": "commit",
                   "created_at": iso(proj.commit_times.get(sha)), "parent_ids": []},
    })


def get_project(req: Request, project: str) -> Response:
    body = entities.project_json(req.state, req.state.project(project))
    # G lib/api/entities/project.rb: CI settings are exposed only with ``admin_project`` (Maintainer);
    # ``permissions`` (the caller's access level) comes with every authenticated GET /projects/:id.
    if req.user is None or ROLES[req.user.role] < ROLES["maintainer"]:
        body.pop("ci_pipeline_variables_minimum_override_role", None)
    body["permissions"] = {"project_access": {"access_level": ROLES[req.user.role] if req.user else 0,
                                              "notification_level": 3}, "group_access": None}
    return json_response(200, body)


_ACCESS_LEVEL = {"no_one": (0, "No one"), "developer": (30, "Developers + Maintainers"),
                 "maintainer": (40, "Maintainers"), "owner": (50, "Owners"), "guest": (10, "Guests"),
                 "reporter": (20, "Reporters")}


def list_protected_branches(req: Request, project: str) -> Response:
    """``GET /projects/:id/protected_branches`` (G lib/api/protected_branches.rb; Developer+ may read)."""
    _require(req, "developer")
    proj = req.state.project(project)
    out = []
    for i, (name, rule) in enumerate(sorted(proj.protected_branches.items()), start=1):
        def levels(kind: str) -> list[dict[str, Any]]:
            level, desc = _ACCESS_LEVEL[rule[kind]]
            rows = [{"id": i * 10, "access_level": level, "access_level_description": desc, "user_id": None,
                     "group_id": None}]
            for u in rule.get("users", ()):
                user = next((x for x in req.state.users.values() if x.username == u), None)
                if user is not None:
                    rows.append({"id": i * 10 + user.id, "access_level": 40, "access_level_description": u,
                                 "user_id": user.id, "group_id": None})
            return rows
        out.append({"id": i, "name": name, "push_access_levels": levels("push"),
                    "merge_access_levels": levels("merge"), "allow_force_push": False,
                    "code_owner_approval_required": False})
    return json_response(200, out)


def list_project_hooks(req: Request, project: str) -> Response:
    """``GET /projects/:id/hooks`` (G lib/api/project_hooks.rb: ``read_web_hook``, i.e. Maintainer,
    G app/policies/project_policy.rb ``can?(:admin_project)``; G lib/api/entities/project_hook.rb)."""
    from standin.gitlab.hooks import project_hook_json

    _require(req, "maintainer")
    proj = req.state.project(project)
    items, headers = _offset_page(req, [project_hook_json(h) for h in proj.hooks], with_total=True)
    return json_response(200, items, headers)


def add_project_hook(req: Request, project: str) -> Response:
    """``POST /projects/:id/hooks`` (``admin_web_hook``: Maintainer): ``url`` required, ``token`` is
    stored and not returned, event switches as booleans (G lib/api/project_hooks.rb)."""
    from standin.gitlab.hooks import HOOK_EVENTS, add_project_hook as add

    _require(req, "maintainer")
    url = req.arg("url")
    if not url:
        raise BadRequest("url is missing")
    events = {k: req.flag(k, default) for k, default in HOOK_EVENTS.items()}
    hook = add(req.state, project, url, token=req.arg("token"),
               enable_ssl_verification=req.flag("enable_ssl_verification", True),
               name=req.arg("name") or "", description=req.arg("description") or "", **events)
    return json_response(201, hook)


def list_group_projects(req: Request, group: str) -> Response:
    projects = req.state.group_projects(group, include_subgroups=req.flag("include_subgroups"))
    if req.flag("archived") is False and req.arg("archived") is not None:
        projects = [p for p in projects if not p.archived]
    chunk, headers = _offset_page(req, projects, with_total=True)
    return json_response(200, [entities.project_json(req.state, p) for p in chunk], headers)


def list_jobs(req: Request, project: str) -> Response:
    proj = req.state.project(project)
    scopes = _scopes(req)
    jobs = sorted((j for j in req.state.jobs.values() if j.project_id == proj.id and not j.spec.is_bridge),
                  key=lambda j: j.id, reverse=True)
    if scopes:
        jobs = [j for j in jobs if j.status in scopes]
    if req.arg("pagination") == "keyset":
        chunk, headers = _keyset_jobs(req, jobs)
    else:
        chunk, headers = _offset_page(req, jobs, with_total=False)
    return json_response(200, [entities.job_json(req.state, j) for j in chunk], headers)


def _build(req: Request, project: str, job: str) -> Any:
    """``find_build!``: the single-job endpoints see builds only; a bridge id is 404."""
    found = req.state.job(int(job), project)
    if found.spec.is_bridge:
        raise NotFound("404 Not found")
    return found


def get_job(req: Request, project: str, job: str) -> Response:
    return json_response(200, entities.job_json(req.state, _build(req, project, job)))


def get_trace(req: Request, project: str, job: str) -> Response:
    found = _build(req, project, job)
    return Response(200, bytes(found.trace), "text/plain")


def get_artifact(req: Request, project: str, job: str, artifact: str) -> Response:
    found = req.state.job(int(job), project)
    content = found.artifacts.get(artifact)
    if content is None:
        raise NotFound("404 Not Found")
    return Response(200, content, "application/octet-stream")


def retry_job(req: Request, project: str, job: str) -> Response:
    _require(req, "developer")
    req.state.job(int(job), project)
    new = req.state.retry_job(int(job), user=req.user)
    return json_response(201, entities.job_json(req.state, new))


def play_job(req: Request, project: str, job: str) -> Response:
    _require(req, "developer")
    req.state.job(int(job), project)
    variables = req.body.get("job_variables_attributes") or []
    if not isinstance(variables, list):
        raise BadRequest("job_variables_attributes is invalid")
    presented = req.state.play_job(int(job), user=req.user, variables=variables)
    return json_response(200, entities.job_json(req.state, presented))


def cancel_job(req: Request, project: str, job: str) -> Response:
    _require(req, "developer")
    req.state.job(int(job), project)
    found = req.state.cancel_job(int(job), user=req.user)
    return json_response(201, entities.job_json(req.state, found))


def list_pipelines(req: Request, project: str) -> Response:
    proj = req.state.project(project)
    pipes = [p for p in req.state.pipelines.values() if p.project_id == proj.id]
    if req.arg("ref"):
        pipes = [p for p in pipes if p.ref == req.arg("ref")]
    if req.arg("sha"):
        pipes = [p for p in pipes if p.sha == req.arg("sha")]
    if req.arg("status"):
        pipes = [p for p in pipes if p.status == req.arg("status")]
    if req.arg("source"):
        pipes = [p for p in pipes if p.source == req.arg("source")]
    if req.arg("username"):
        uid = next((u.id for u in req.state.users.values() if u.username == req.arg("username")), -1)
        pipes = [p for p in pipes if p.user_id == uid]
    if req.arg("updated_after"):
        after = _parse_time(req.arg("updated_after") or "", "updated_after")
        pipes = [p for p in pipes if p.updated_at > after]
    if req.arg("updated_before"):
        before = _parse_time(req.arg("updated_before") or "", "updated_before")
        pipes = [p for p in pipes if p.updated_at < before]
    scope = req.arg("scope")
    if scope == "running":
        pipes = [p for p in pipes if p.status == "running"]
    elif scope == "pending":
        pipes = [p for p in pipes if p.status == "pending"]
    elif scope == "finished":
        pipes = [p for p in pipes if p.status in ("success", "failed", "canceled", "skipped")]
    order_by = req.arg("order_by") or "id"
    keys: dict[str, Callable[[Any], Any]] = {"id": lambda p: p.id, "status": lambda p: (p.status, p.id),
                                             "ref": lambda p: (p.ref, p.id),
                                             "updated_at": lambda p: (p.updated_at, p.id),
                                             "user_id": lambda p: (p.user_id or 0, p.id)}
    if order_by not in keys:
        raise BadRequest("order_by does not have a valid value")
    sort = req.arg("sort") or "desc"
    if sort not in ("asc", "desc"):
        raise BadRequest("sort does not have a valid value")
    pipes.sort(key=keys[order_by], reverse=sort == "desc")
    chunk, headers = _offset_page(req, pipes, with_total=True)
    return json_response(200, [entities.pipeline_basic(req.state, p) for p in chunk], headers)


def get_pipeline(req: Request, project: str, pipeline: str) -> Response:
    return json_response(200, entities.pipeline_detail(req.state, req.state.pipeline(int(pipeline), project)))


def list_pipeline_jobs(req: Request, project: str, pipeline: str) -> Response:
    pipe = req.state.pipeline(int(pipeline), project)
    scopes = _scopes(req)
    jobs = [j for j in req.state.pipeline_jobs(pipe.id, include_retried=req.flag("include_retried"))
            if not j.spec.is_bridge and (not scopes or j.status in scopes)]
    jobs.sort(key=lambda j: j.id)
    chunk, headers = _offset_page(req, jobs, with_total=True)
    return json_response(200, [entities.job_json(req.state, j) for j in chunk], headers)


def list_pipeline_bridges(req: Request, project: str, pipeline: str) -> Response:
    pipe = req.state.pipeline(int(pipeline), project)
    scopes = _scopes(req)
    jobs = [j for j in req.state.pipeline_jobs(pipe.id, include_retried=False)
            if j.spec.is_bridge and (not scopes or j.status in scopes)]
    jobs.sort(key=lambda j: j.id)
    chunk, headers = _offset_page(req, jobs, with_total=True)
    return json_response(200, [entities.bridge_json(req.state, j) for j in chunk], headers)


def list_pipeline_variables(req: Request, project: str, pipeline: str) -> Response:
    pipe = req.state.pipeline(int(pipeline), project)
    if not req.state.can_read_pipeline_variables(pipe, req.user):
        raise Forbidden("403 Forbidden")
    return json_response(200, [{"key": v["key"], "value": v["value"], "variable_type": v.get("variable_type", "env_var")}
                               for v in pipe.variables])


def create_pipeline(req: Request, project: str) -> Response:
    _require(req, "developer")
    ref = req.arg("ref")
    if not ref:
        raise BadRequest("ref is missing")
    variables = req.body.get("variables") or []
    if not isinstance(variables, list):
        raise BadRequest("variables is invalid")
    if variables:
        try:
            req.state.check_pipeline_variables_allowed(project, req.user)
        except BadRequest as exc:
            return error_response(400, {"base": [exc.message]})
    try:
        pipe = req.state.create_pipeline(project, ref, source="api", variables=variables, user=req.user)
    except NotFound:
        raise
    except BadRequest as exc:
        return error_response(400, {"base": [exc.message]})
    return json_response(201, entities.pipeline_detail(req.state, pipe))


def _lint(req: Request, content: Any, files: dict[str, str]) -> dict[str, Any]:
    """Validate like GitLab's lint: syntax and structure; rules that filter every job are still valid."""
    try:
        text = merged_yaml(content, files)
        try:
            jobs = plan_pipeline(load_config(content, files), {"CI_PIPELINE_SOURCE": "push"}).jobs
        except PipelineFiltered:
            jobs = ()
    except CiConfigError as exc:
        return {"valid": False, "errors": [str(exc)], "warnings": [], "merged_yaml": None, "includes": None}
    result: dict[str, Any] = {"valid": True, "errors": [], "warnings": [], "merged_yaml": text, "includes": []}
    if req.flag("include_jobs"):
        result["jobs"] = [{"name": j.name, "stage": j.stage, "before_script": list(j.before_script),
                           "script": list(j.script), "after_script": list(j.after_script),
                           "tag_list": list(j.tags), "only": None, "except": None,
                           "environment": None, "when": j.when, "allow_failure": j.allow_failure,
                           "needs": [{"name": n} for n, _ in j.needs or ()]} for j in jobs]
    return result


def lint_get(req: Request, project: str) -> Response:
    """``GET /projects/:id/ci/lint?content_ref=SHA`` — the project's config at a commit."""
    proj = req.state.project(project)
    ref = req.arg("content_ref") or req.arg("ref") or proj.default_branch
    sha = proj.refs.get(ref, ref)
    if sha not in proj.configs:
        matches = [s for s in proj.configs if s.startswith(sha)] if len(sha) >= 7 else []
        if len(matches) != 1:
            raise NotFound("404 Commit Not Found")
        sha = matches[0]
    return json_response(200, _lint(req, proj.configs[sha], proj.files.get(sha, {})))


def lint_post(req: Request, project: str) -> Response:
    proj = req.state.project(project)
    content = req.body.get("content")
    if not isinstance(content, str):
        raise BadRequest("content is missing")
    return json_response(200, _lint(req, content, proj.files.get(proj.refs[proj.default_branch], {})))


_P = r"/api/v4/projects/(?P<project>[^/]+)"
ROUTES: list[tuple[str, re.Pattern[str], Callable[..., Response]]] = [
    ("GET", re.compile(r"^/api/v4/user$"), get_user),
    ("GET", re.compile(r"^/api/v4/version$"), get_version),
    ("GET", re.compile(r"^/api/v4/personal_access_tokens/self$"), get_token_self),
    ("GET", re.compile(rf"^{_P}/repository/files/(?P<file>[^/]+)/raw$"), get_raw_file),
    ("GET", re.compile(rf"^{_P}/repository/branches/(?P<branch>[^/]+)$"), get_branch),
    ("GET", re.compile(rf"^{_P}$"), get_project),
    ("GET", re.compile(rf"^{_P}/protected_branches$"), list_protected_branches),
    ("GET", re.compile(rf"^{_P}/hooks$"), list_project_hooks),
    ("POST", re.compile(rf"^{_P}/hooks$"), add_project_hook),
    ("GET", re.compile(r"^/api/v4/groups/(?P<group>[^/]+)/projects$"), list_group_projects),
    ("GET", re.compile(rf"^{_P}/jobs$"), list_jobs),
    ("GET", re.compile(rf"^{_P}/jobs/(?P<job>\d+)$"), get_job),
    ("GET", re.compile(rf"^{_P}/jobs/(?P<job>\d+)/trace$"), get_trace),
    ("GET", re.compile(rf"^{_P}/jobs/(?P<job>\d+)/artifacts/(?P<artifact>.+)$"), get_artifact),
    ("POST", re.compile(rf"^{_P}/jobs/(?P<job>\d+)/retry$"), retry_job),
    ("POST", re.compile(rf"^{_P}/jobs/(?P<job>\d+)/play$"), play_job),
    ("POST", re.compile(rf"^{_P}/jobs/(?P<job>\d+)/cancel$"), cancel_job),
    ("GET", re.compile(rf"^{_P}/pipelines$"), list_pipelines),
    ("GET", re.compile(rf"^{_P}/pipelines/(?P<pipeline>\d+)$"), get_pipeline),
    ("GET", re.compile(rf"^{_P}/pipelines/(?P<pipeline>\d+)/jobs$"), list_pipeline_jobs),
    ("GET", re.compile(rf"^{_P}/pipelines/(?P<pipeline>\d+)/bridges$"), list_pipeline_bridges),
    ("GET", re.compile(rf"^{_P}/pipelines/(?P<pipeline>\d+)/variables$"), list_pipeline_variables),
    ("POST", re.compile(rf"^{_P}/pipeline$"), create_pipeline),
    ("GET", re.compile(rf"^{_P}/ci/lint$"), lint_get),
    ("POST", re.compile(rf"^{_P}/ci/lint$"), lint_post),
]


def dispatch(req: Request) -> Response:
    """Route a request; GitLab's 401/403/404/405 and error bodies included."""
    if req.user is None:
        return error_response(401, "401 Unauthorized")
    scopes = req.state.token_scopes.get(req.token or "", ["api"])
    if req.method != "GET" and "api" not in scopes:
        # G lib/gitlab/auth/auth_finders.rb: read_api allows GET only
        return json_response(403, {"error": "insufficient_scope", "error_description": "The request requires "
                                   "higher privileges than provided by the access token.", "scope": "api"})
    path_matched = False
    for method, regex, handler in ROUTES:
        m = regex.match(req.path)
        if not m:
            continue
        path_matched = True
        if method != req.method:
            continue
        groups = {k: unquote(v) for k, v in m.groupdict().items()}
        try:
            with req.state.lock:
                req.state.tick()
                return handler(req, **groups)
        except StandInError as exc:
            return error_response(exc.status, exc.message)
    if path_matched:
        return error_response(405, "405 Method Not Allowed")
    return json_response(404, {"error": "404 Not Found"})
