"""The stand-in's project webhooks: GitLab's job events, sent as GitLab sends them.

``job_hook_payload`` builds the body of a **Job Hook** in the shape of GitLab's
``Gitlab::DataBuilder::Build.build`` (G ``lib/gitlab/data_builder/build.rb``;
documented in ``doc/user/project/integrations/webhook_events.md``, "Job events"):
``object_kind: "build"``, ``build_id``, ``build_name``, ``build_stage``,
``build_status``, ``build_failure_reason`` (``"unknown_failure"`` style enum
names, present for every status), ``pipeline_id``, ``project_id``,
``project_name``, ``retries_count``, ``user``, ``commit``, ``repository``,
``project``, ``runner``, ``environment`` ...

:class:`HookSender` is a job listener (:meth:`StandIn.on_job_change`): every
status change of a matching project's job becomes one POST, with the headers of
G ``app/services/web_hook_service.rb``: ``X-Gitlab-Event: Job Hook``,
``X-Gitlab-Token`` (the hook's secret token), ``X-Gitlab-Event-UUID``,
``X-Gitlab-Webhook-UUID``, ``X-Gitlab-Instance``, ``User-Agent: GitLab/<version>``.
Like GitLab (``WebHookWorker`` in Sidekiq) it sends from a worker, never while
the state changes; it does **not** retry a failed delivery (GitLab does not
either: it counts failures and disables the hook, ``web_hooks/auto_disabling.rb``).
Known gaps (docs/standin.md): no auto-disabling, no hook logs, no group hooks
(a group hook's payload is the same; the receiver cannot tell).

The project hooks *configuration* (``GET``/``POST /projects/:id/hooks``, what
``retry-bot doctor`` reads) is :func:`add_project_hook` and :func:`project_hook_json`:
G ``lib/api/project_hooks.rb`` (``read_web_hook`` to list, ``admin_web_hook`` to
add: both Maintainer, G ``app/policies/project_policy.rb`` ``can?(:admin_project)``),
the body of G ``lib/api/entities/project_hook.rb`` and ``entities/hook.rb``.  The
secret token is stored and never returned ("this will not be returned in the
response").  A hook added this way is configuration only: events are sent by a
:class:`HookSender` (known gap).
"""

from __future__ import annotations

import json
import queue
import threading
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable

from standin.gitlab.state import GitLabState, Job, iso

__all__ = ["job_hook_payload", "HookSender", "Delivery", "add_project_hook", "project_hook_json", "HOOK_EVENTS"]

#: The event switches of a project hook and their defaults for a new hook (G db/structure.sql
#: ``web_hooks``: ``push_events`` DEFAULT true, every other event false).
HOOK_EVENTS = {"push_events": True, "tag_push_events": False, "merge_requests_events": False,
               "repository_update_events": False, "issues_events": False, "confidential_issues_events": False,
               "note_events": False, "confidential_note_events": False, "pipeline_events": False,
               "wiki_page_events": False, "deployment_events": False, "feature_flag_events": False,
               "job_events": False, "releases_events": False, "emoji_events": False,
               "resource_access_token_events": False, "vulnerability_events": False}


def add_project_hook(state: GitLabState, project: int | str, url: str, *, token: str | None = None,
                     enable_ssl_verification: bool = True, name: str = "", description: str = "",
                     alert_status: str = "executable", **events: bool) -> dict[str, Any]:
    """Add a project webhook (``POST /projects/:id/hooks``); returns it as GitLab answers (no token)."""
    unknown = set(events) - set(HOOK_EVENTS)
    if unknown:
        raise ValueError(f"unknown hook events: {sorted(unknown)}")
    with state.lock:
        proj = state.project(project)
        hook_id = 1 + max((h["id"] for p in state.projects.values() for h in p.hooks), default=0)
        hook = {"id": hook_id, "url": url, "name": name, "description": description,
                "created_at": state.clock(), "token": token or "", "enable_ssl_verification": bool(enable_ssl_verification),
                "alert_status": alert_status, "project_id": proj.id,
                **{k: bool(events.get(k, default)) for k, default in HOOK_EVENTS.items()}}
        proj.hooks.append(hook)
        return project_hook_json(hook)


def project_hook_json(hook: dict[str, Any]) -> dict[str, Any]:
    """G ``Entities::ProjectHook`` (< ``Entities::Hook``) as listed: never the token, no url variables
    or custom headers (``with_url_variables: false, with_custom_headers: false``)."""
    return {"id": hook["id"], "url": hook["url"], "name": hook.get("name") or "",
            "description": hook.get("description") or "", "created_at": iso(hook["created_at"]),
            "enable_ssl_verification": hook["enable_ssl_verification"], "alert_status": hook["alert_status"],
            "disabled_until": None, "push_events_branch_filter": None, "branch_filter_strategy": "wildcard",
            "custom_webhook_template": None, "project_id": hook["project_id"],
            **{k: hook[k] for k in HOOK_EVENTS}}


def _duration(start: float | None, end: float | None) -> float | None:
    return round(end - start, 3) if start is not None and end is not None else None


def job_hook_payload(state: GitLabState, job: Job) -> dict[str, Any]:
    """GitLab's job event body for ``job`` (call with the state lock held, or on a settled job)."""
    pipe = state.pipelines[job.pipeline_id]
    proj = state.projects[job.project_id]
    user = state.users.get(job.user_id) if job.user_id else None
    web = f"{state.base_url}/{proj.full_path}"
    retries = 0
    cur = job
    while cur.retry_of is not None and cur.retry_of in state.jobs:  # G Ci::Build#retries_count
        retries += 1
        cur = state.jobs[cur.retry_of]
    namespace = proj.full_path.rpartition("/")[0]
    return {
        "object_kind": "build",
        "ref": pipe.ref,
        "tag": False,
        "before_sha": "0" * 40,
        "sha": pipe.sha,
        "retries_count": retries,
        "build_id": job.id,
        "build_name": job.name,
        "build_stage": job.stage,
        "build_status": job.status,
        "build_created_at": iso(job.created_at),
        "build_started_at": iso(job.started_at),
        "build_finished_at": iso(job.finished_at),
        "build_duration": _duration(job.started_at, job.finished_at),
        "build_queued_duration": _duration(job.queued_at, job.started_at),
        "build_allow_failure": job.allow_failure,
        # Ci::Build#failure_reason is an enum, "unknown_failure" (0) by default: present for every status.
        "build_failure_reason": job.failure_reason or "unknown_failure",
        "pipeline_id": pipe.id,
        "runner": ({"id": job.runner.get("id"), "description": job.runner.get("description", ""),
                    "runner_type": "instance_type", "active": True, "is_shared": True,
                    "tags": list(job.runner.get("tags", []))} if job.runner else None),
        "project_id": proj.id,
        "project_name": " / ".join(proj.full_path.split("/")),
        "user": ({"id": user.id, "name": user.name, "username": user.username, "avatar_url": None,
                  "email": "[REDACTED]"} if user else None),
        "commit": {"id": pipe.id, "name": None, "sha": pipe.sha, "message": "stand-in commit\n",
                   "author_name": "Stand In", "author_email": "standin@example.invalid",
                   "author_url": "mailto:standin@example.invalid", "status": pipe.status,
                   "duration": _duration(pipe.started_at, pipe.finished_at),
                   "started_at": iso(pipe.started_at), "finished_at": iso(pipe.finished_at)},
        "repository": {"name": proj.name, "url": f"git@127.0.0.1:{proj.full_path}.git", "description": None,
                       "homepage": web, "git_http_url": f"{web}.git",
                       "git_ssh_url": f"git@127.0.0.1:{proj.full_path}.git", "visibility_level": 0},
        "project": {"id": proj.id, "name": proj.name, "description": None, "web_url": web, "avatar_url": None,
                    "git_ssh_url": f"git@127.0.0.1:{proj.full_path}.git", "git_http_url": f"{web}.git",
                    "namespace": namespace, "visibility_level": 0, "path_with_namespace": proj.full_path,
                    "default_branch": proj.default_branch, "ci_config_path": None},
        "environment": None,
    }


@dataclass
class Delivery:
    """One hook request and what the receiver answered (``status`` ``None``: no answer)."""

    job_id: int
    build_status: str
    status: int | None
    error: str = ""


@dataclass
class HookSender:
    """A project webhook with "Job events" on: POSTs each job status change to ``url``.

    Args:
        state: the stand-in's state (:attr:`StandIn.state`).
        url: the receiver (``http://127.0.0.1:PORT/v1/gitlab/job-events``).
        secret: the hook's secret token, sent as ``X-Gitlab-Token`` (``None``: no header).
        projects: project ids the hook is set on (empty: every project, like a group/instance hook).
        statuses: only these job statuses are sent (empty: every status, as GitLab does).
    """

    state: GitLabState
    url: str
    secret: str | None = None
    projects: Iterable[int] = ()
    statuses: Iterable[str] = ()
    timeout: float = 10.0
    deliveries: list[Delivery] = field(default_factory=list)
    hook_uuid: str = field(default_factory=lambda: str(uuid.uuid4()))

    def __post_init__(self) -> None:
        self.projects = frozenset(int(p) for p in self.projects)
        self.statuses = frozenset(self.statuses)
        self._queue: queue.Queue[tuple[int, str, bytes] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="standin-webhook", daemon=True)
        self._thread.start()

    def __call__(self, job: Job) -> None:
        """The job listener: runs under the state lock, so it only builds the body and queues it."""
        if self.projects and job.project_id not in self.projects:
            return
        if self.statuses and job.status not in self.statuses:
            return
        if job.spec.is_bridge:
            return  # a bridge is not a build: GitLab sends no job event for it
        body = json.dumps(job_hook_payload(self.state, job)).encode()
        self._queue.put((job.id, job.status, body))

    def send(self, job: Job) -> Delivery:
        """Send one job event now (outside the listener), e.g. a replayed or a late event."""
        with self.state.lock:
            body = json.dumps(job_hook_payload(self.state, job)).encode()
        return self._post(job.id, job.status, body)

    def _headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json", "X-Gitlab-Event": "Job Hook",
             "X-Gitlab-Event-UUID": str(uuid.uuid4()), "X-Gitlab-Webhook-UUID": self.hook_uuid,
             "X-Gitlab-Instance": self.state.base_url, "User-Agent": f"GitLab/{self.state.gitlab_version}"}
        if self.secret is not None:
            h["X-Gitlab-Token"] = self.secret
        return h

    def _post(self, job_id: int, status: str, body: bytes) -> Delivery:
        req = urllib.request.Request(self.url, data=body, headers=self._headers(), method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                d = Delivery(job_id, status, resp.status)
        except urllib.error.HTTPError as exc:
            d = Delivery(job_id, status, exc.code, str(exc))
        except (OSError, urllib.error.URLError) as exc:
            d = Delivery(job_id, status, None, str(exc))
        self.deliveries.append(d)
        return d

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            self._post(*item)
            self._queue.task_done()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued event was delivered (or failed)."""
        done = threading.Event()

        def waiter() -> None:
            self._queue.join()
            done.set()

        threading.Thread(target=waiter, daemon=True).start()
        return done.wait(timeout)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=self.timeout + 1)
