"""An in-memory fake of the :class:`~retry_bot.gitlab.client.GitLabClient` methods the poller and the
action runner call: for fast, in-process tests of ``Poller.run_cycle`` and ``ActionRunner``.

The end-to-end tests (tests/bot_live/) run the same code over real HTTP against the GitLab stand-in;
this fake replaces the client object itself, so a test takes milliseconds, and can stop the "process"
at an exact point (:attr:`FakeGitLab.crash`).  It keeps GitLab's rules that those code paths depend on,
each with its source (``G`` = gitlab-org/gitlab, ``mechanics`` = /work/shared/reference/gitlab-mechanics.md),
and is at least as strict as GitLab there; what it does not model raises, so a test cannot pass by
relying on a rule the fake lacks:

* failed jobs are listed newest id first, retried jobs included (``GET /projects/:id/jobs?scope[]=failed``,
  G ``lib/api/ci/jobs.rb`` lists ``project.builds``; mechanics §2.1);
* pipeline jobs hide retried jobs unless ``include_retried`` (G ``lib/api/ci/pipelines.rb``, ``latest``);
* retry: only a job in ``success``/``failed``/``canceled`` may be retried, else 403 "Job is not
  retryable"; the answer is the **new** job, of the same name in the same pipeline; the old one becomes
  ``retried`` (G ``Ci::Build#retryable?``, ``Ci::RetryJobService``; mechanics §2.5);
* play: 400 "Unplayable Job" unless the job is a manual job in ``manual`` (a ``created`` job is not
  processed yet, mechanics §11.1; playing one that already ran drops the variables, mechanics §2.6, so
  the fake refuses it rather than model that bug); the same job id is enqueued with the variables
  (G ``Ci::PlayBuildService``, ``EnqueueJobService``);
* ``POST /projects/:id/pipeline`` makes an ``api`` pipeline by the token's user on the ref's head
  (400 "Reference not found" for an unknown ref, 400 "Pipeline will not run..." when the project's
  configuration lacks the template's jobs); the CI template's bridge ``retry-bot:child`` turns
  ``RETRY_BOT_CHILD_CONFIG`` (base64, decoded by ``retry-bot:generate``) into a child pipeline holding the
  ``when: manual`` copy, **asynchronously**:
  the child appears, with its job in ``manual``, only when the test calls :meth:`FakeGitLab.process`
  (G ``PipelineProcessWorker``; mechanics §3.2, §11.1);
* GraphQL ``CiJob``: ``exitCode``, ``retried``, ``manualJob`` and the pipeline's ``source``
  (mechanics §2.2, §11.3).
"""

from __future__ import annotations

import base64
import copy
import itertools
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterator, Mapping

import yaml

from retry_bot.gitlab.client import GitLabFeatures, NotFound, WriteRejected

__all__ = ["FakeGitLab", "Crash", "Write"]

#: The CI template's bridge job (packaging/gitlab-ci/retry-bot.yml).
BRIDGE = "retry-bot:child"
GENERATOR = "retry-bot:generate"
CHILD_CONFIG_VARIABLE = "RETRY_BOT_CHILD_CONFIG"


class Crash(BaseException):
    """The bot's process dies here (a BaseException: no ``except Exception`` of the bot catches it)."""


@dataclass(frozen=True)
class Write:
    """One write GitLab acted on: ``kind`` (retry | play | create_pipeline | job_retry) and its target."""

    kind: str
    target: int | str
    variables: Mapping[str, str] = field(default_factory=dict)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class FakeGitLab:
    """GitLab as the poller and the action runner see it through ``GitLabClient``.

    Args:
        clock: the test's clock (job and pipeline ``created_at``).
        username: the token's user (``current_user``, the user of the pipelines it creates).
        version: the GitLab version (``features()``).
    """

    def __init__(self, clock: Callable[[], float], *, username: str = "retry-bot", version: str = "17.9.0") -> None:
        self.clock = clock
        self.username = username
        self.version = version
        self._ids = itertools.count(1000)
        self.projects: dict[int, dict[str, Any]] = {}
        self.jobs: dict[int, dict[str, Any]] = {}
        self.pipelines: dict[int, dict[str, Any]] = {}
        self.bridges: dict[int, list[dict[str, Any]]] = {}
        self.traces: dict[int, bytes] = {}
        self.exit_codes: dict[int, int | None] = {}
        self.manual: set[int] = set()            # jobs defined ``when: manual``
        self.retried: set[int] = set()
        self.job_variables: dict[int, dict[str, str]] = {}
        self.pipeline_vars: dict[int, dict[str, str]] = {}
        self.branches: dict[tuple[int, str], str] = {}
        self.configs: dict[str, str] = {}        # sha -> merged CI YAML
        self.writes: list[Write] = []
        self.reads: list[str] = []
        #: ``(kind, when)``: the next write of ``kind`` raises :class:`Crash`, ``"before"`` GitLab acts
        #: (nothing happened) or ``"after"`` (GitLab acted; the answer never reached the bot).
        self.crash: tuple[str, str] | None = None
        self._unprocessed: list[int] = []         # pipelines whose child pipeline is not created yet

    # ------------------------------------------------------------------ set-up (the test's side)

    def add_project(self, path: str, config: Mapping[str, Any], *, ref: str = "main") -> int:
        """A project whose ``ref`` points at a commit with CI configuration ``config`` (merged YAML)."""
        pid = next(self._ids)
        self.projects[pid] = {"id": pid, "path_with_namespace": path, "archived": False}
        self.push(pid, config, ref=ref)
        return pid

    def push(self, project_id: int, config: Mapping[str, Any], *, ref: str = "main") -> str:
        """A new commit on ``ref`` (no pipeline: a ``[skip ci]`` push); returns its sha."""
        sha = f"{next(self._ids):040x}"
        self.configs[sha] = yaml.safe_dump(dict(config), sort_keys=False)
        self.branches[(project_id, ref)] = sha
        return sha

    def failed_job(self, project_id: int, name: str, *, trace: bytes, exit_code: int | None,
                   failure_reason: str = "script_failure", stage: str = "build", ref: str = "main",
                   source: str = "push", tags: tuple[str, ...] = ("small",)) -> dict[str, Any]:
        """A pipeline on ``ref``'s head with one job ``name`` that failed with ``trace``."""
        pipe = self._pipeline(project_id, ref, source=source, user="dev", status="failed")
        job = self._job(pipe, name, stage=stage, status="failed", tags=tags)
        job.update(failure_reason=failure_reason, started_at=job["created_at"], finished_at=_iso(self.clock()))
        self.traces[job["id"]] = trace
        self.exit_codes[job["id"]] = exit_code
        return copy.deepcopy(job)

    def finish(self, job_id: int, status: str) -> None:
        """A job the runner ran ends with ``status``."""
        self.jobs[job_id]["status"] = status
        self.jobs[job_id]["finished_at"] = _iso(self.clock())

    def process(self) -> None:
        """GitLab's pipeline worker: creates the child pipelines of the bridges made since the last call."""
        todo, self._unprocessed = self._unprocessed, []
        for pid in todo:
            parent = self.pipelines[pid]
            # retry-bot:generate runs `printf '%s' "$RETRY_BOT_CHILD_CONFIG" | base64 -d` (the template)
            text = base64.b64decode(self.pipeline_vars[pid][CHILD_CONFIG_VARIABLE], validate=True).decode()
            for j in self.jobs.values():
                if j["pipeline"]["id"] == pid and j["name"] == GENERATOR:
                    self.finish(j["id"], "success")
            bridge = next(b for b in self.bridges[pid] if b["name"] == BRIDGE)
            child = self._pipeline(parent["project_id"], parent["ref"], source="parent_pipeline",
                                   user=self.username, status="manual", sha=parent["sha"])
            for name, body in (yaml.safe_load(text) or {}).items():
                if not isinstance(body, Mapping) or "script" not in body:
                    continue
                if body.get("when") != "manual":
                    raise NotImplementedError(f"the fake models only when: manual copies, not job {name!r}")
                job = self._job(child, name, stage=str(body.get("stage", "test")), status="manual",
                                tags=tuple(body.get("tags") or ()))
                self.manual.add(job["id"])
            bridge.update(status="success", downstream_pipeline={"id": child["id"], "status": "manual"})

    def project_id(self, path: str) -> int:
        return int(self._project(path)["id"])

    def jobs_named(self, name: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(j) for _, j in sorted(self.jobs.items()) if j["name"] == name]

    # ------------------------------------------------------------------ internals

    def _pipeline(self, project_id: int, ref: str, *, source: str, user: str, status: str,
                  sha: str | None = None) -> dict[str, Any]:
        pid = next(self._ids)
        pipe = {"id": pid, "project_id": project_id, "ref": ref, "sha": sha or self.branches[(project_id, ref)],
                "status": status, "source": source, "created_at": _iso(self.clock()), "user": {"username": user},
                "web_url": f"https://gitlab.example/p/{project_id}/-/pipelines/{pid}"}
        self.pipelines[pid] = pipe
        self.bridges[pid] = []
        self.pipeline_vars[pid] = {}
        return pipe

    def _job(self, pipe: Mapping[str, Any], name: str, *, stage: str, status: str,
             tags: tuple[str, ...]) -> dict[str, Any]:
        jid = next(self._ids)
        job = {"id": jid, "name": name, "stage": stage, "status": status, "ref": pipe["ref"], "tag": False,
               "created_at": _iso(self.clock()), "started_at": None, "finished_at": None, "failure_reason": None,
               "allow_failure": False, "tag_list": list(tags), "user": {"username": pipe["user"]["username"]},
               "web_url": f"https://gitlab.example/p/{pipe['project_id']}/-/jobs/{jid}",
               "pipeline": {k: pipe[k] for k in ("id", "project_id", "ref", "sha", "status", "source")}}
        self.jobs[jid] = job
        return job

    def _project(self, project: int | str) -> dict[str, Any]:
        for p in self.projects.values():
            if project in (p["id"], str(p["id"]), p["path_with_namespace"]):
                return p
        raise NotFound("404 Project Not Found", status=404, what=f"project {project}")

    def _get_job(self, project: int | str, job_id: int) -> dict[str, Any]:
        pid = self._project(project)["id"]
        job = self.jobs.get(int(job_id))
        if job is None or job["pipeline"]["project_id"] != pid:
            raise NotFound("404 Job Not Found", status=404, what=f"get job {job_id}")
        return job

    def _write(self, kind: str, target: int | str, variables: Mapping[str, str], act: Callable[[], Any]) -> Any:
        crash, self.crash = (self.crash, None) if self.crash and self.crash[0] == kind else (None, self.crash)
        if crash and crash[1] == "before":
            raise Crash(f"the bot died before its {kind} reached GitLab")
        result = act()
        self.writes.append(Write(kind, target, dict(variables)))
        if crash:
            raise Crash(f"the bot died after GitLab acted on its {kind}")
        return result

    # ------------------------------------------------------------------ GitLabClient: reads

    def features(self) -> GitLabFeatures:
        return GitLabFeatures.from_version(self.version)

    def current_user(self) -> dict[str, Any]:
        return {"username": self.username}

    def get_project(self, project: int | str) -> dict[str, Any]:
        self.reads.append("get_project")
        return copy.deepcopy(self._project(project))

    def group_projects(self, group: int | str, *, include_subgroups: bool = True) -> list[dict[str, Any]]:
        raise NotImplementedError("the fake has no groups: configure projects, or use the stand-in")

    def iter_failed_jobs(self, project: int | str, *, per_page: int = 100) -> Iterator[dict[str, Any]]:
        self.reads.append("iter_failed_jobs")
        pid = self._project(project)["id"]
        rows = [j for j in self.jobs.values() if j["pipeline"]["project_id"] == pid and j["status"] == "failed"]
        return iter([copy.deepcopy(j) for j in sorted(rows, key=lambda j: -j["id"])])

    def get_job(self, project: int | str, job_id: int) -> dict[str, Any]:
        self.reads.append("get_job")
        return copy.deepcopy(self._get_job(project, job_id))

    def trace_tail(self, project: int | str, job_id: int, max_bytes: int = 256 * 1024) -> bytes:
        self.reads.append("trace_tail")
        self._get_job(project, job_id)
        return self.traces.get(int(job_id), b"")[-max_bytes:] if max_bytes else b""

    def job_details(self, project_path: str, job_id: int) -> dict[str, Any]:
        self.reads.append("job_details")
        job = self._get_job(project_path, job_id)
        jid = int(job_id)
        return {"id": f"gid://gitlab/Ci::Build/{jid}", "status": job["status"].upper(),
                "exitCode": self.exit_codes.get(jid), "retried": jid in self.retried, "manualJob": jid in self.manual,
                "pipeline": {"source": job["pipeline"]["source"]}}

    def pipeline(self, project: int | str, pipeline_id: int) -> dict[str, Any]:
        pid = self._project(project)["id"]
        pipe = self.pipelines.get(int(pipeline_id))
        if pipe is None or pipe["project_id"] != pid:
            raise NotFound("404 Not found", status=404, what=f"get pipeline {pipeline_id}")
        return copy.deepcopy(pipe)

    def latest_pipelines(self, project: int | str, ref: str, *, source: str | None = None, limit: int = 20,
                         username: str | None = None) -> list[dict[str, Any]]:
        pid = self._project(project)["id"]
        rows = [p for p in self.pipelines.values() if p["project_id"] == pid and p["ref"] == ref
                and (source is None or p["source"] == source)
                and (username is None or p["user"]["username"] == username)]
        return [copy.deepcopy(p) for p in sorted(rows, key=lambda p: -p["id"])[:limit]]

    def branch_head(self, project: int | str, ref: str) -> str | None:
        return self.branches.get((self._project(project)["id"], ref))

    def pipeline_jobs(self, project: int | str, pipeline_id: int, *,
                      include_retried: bool = False) -> list[dict[str, Any]]:
        self.pipeline(project, pipeline_id)
        return [copy.deepcopy(j) for _, j in sorted(self.jobs.items()) if j["pipeline"]["id"] == int(pipeline_id)
                and (include_retried or j["id"] not in self.retried)]

    def pipeline_bridges(self, project: int | str, pipeline_id: int) -> list[dict[str, Any]]:
        self.pipeline(project, pipeline_id)
        return copy.deepcopy(self.bridges[int(pipeline_id)])

    def merged_ci_yaml(self, project: int | str, sha: str) -> str:
        self._project(project)
        if sha not in self.configs:
            raise NotFound("404 Commit Not Found", status=404, what=f"ci lint at {sha[:12]}")
        return self.configs[sha]

    def job_artifact(self, project: int | str, job_id: int, artifact_path: str) -> bytes:
        raise NotImplementedError("the fake has no artifacts (generated child pipelines): use the stand-in")

    # ------------------------------------------------------------------ GitLabClient: writes

    def retry_job(self, project: int | str, job_id: int) -> dict[str, Any]:
        old = self._get_job(project, job_id)
        if old["status"] not in ("success", "failed", "canceled") or old["id"] in self.retried:
            raise WriteRejected("403 Forbidden - Job is not retryable", status=403, what=f"retry job {job_id}")

        def act() -> dict[str, Any]:
            pipe = self.pipelines[old["pipeline"]["id"]]
            new = self._job(pipe, old["name"], stage=old["stage"], status="pending", tags=tuple(old["tag_list"]))
            self.retried.add(old["id"])
            if old["id"] in self.manual:
                self.manual.add(new["id"])
            return copy.deepcopy(new)

        return self._write("retry", int(job_id), {}, act)

    def play_job(self, project: int | str, job_id: int, variables: Mapping[str, str]) -> dict[str, Any]:
        job = self._get_job(project, job_id)
        if job["id"] not in self.manual or job["status"] != "manual":
            raise WriteRejected("400 Bad request - Unplayable Job", status=400, what=f"play job {job_id}")

        def act() -> dict[str, Any]:
            job["status"] = "pending"
            self.job_variables[job["id"]] = {str(k): str(v) for k, v in variables.items()}
            return copy.deepcopy(job)

        return self._write("play", int(job_id), variables, act)

    def job_retry_with_variables(self, job_id: int, variables: Mapping[str, str]) -> dict[str, Any]:
        old = self.jobs.get(int(job_id))
        if old is None or old["id"] not in self.manual or old["status"] not in ("success", "failed", "canceled"):
            raise WriteRejected("Job is not retryable", what=f"graphql jobRetry {job_id}")

        def act() -> dict[str, Any]:
            pipe = self.pipelines[old["pipeline"]["id"]]
            new = self._job(pipe, old["name"], stage=old["stage"], status="pending", tags=tuple(old["tag_list"]))
            self.retried.add(old["id"])
            self.manual.add(new["id"])
            self.job_variables[new["id"]] = {str(k): str(v) for k, v in variables.items()}
            return {"id": new["id"], "status": "PENDING"}

        return self._write("job_retry", int(job_id), variables, act)

    def create_pipeline(self, project: int | str, ref: str, variables: Mapping[str, str]) -> dict[str, Any]:
        pid = self._project(project)["id"]
        if (pid, ref) not in self.branches:
            raise WriteRejected("400 Bad request - Reference not found", status=400, what=f"create pipeline on {ref}")
        if CHILD_CONFIG_VARIABLE not in variables:
            raise NotImplementedError("the fake models only the bot's own pipelines (with RETRY_BOT_CHILD_CONFIG)")
        head = yaml.safe_load(self.configs[self.branches[(pid, ref)]]) or {}
        if BRIDGE not in head or GENERATOR not in head:
            # only the template's jobs match $RETRY_BOT_CHILD_CONFIG: without them the pipeline is empty
            # (G lib/gitlab/ci/pipeline/chain/populate.rb; mechanics §11.1)
            raise WriteRejected("400 Bad request - Pipeline will not run for the selected trigger. The rules "
                                "configuration prevented any jobs from being added to the pipeline.",
                                status=400, what=f"create pipeline on {ref}")

        def act() -> dict[str, Any]:
            pipe = self._pipeline(pid, ref, source="api", user=self.username, status="running")
            self.pipeline_vars[pipe["id"]] = {str(k): str(v) for k, v in variables.items()}
            self._job(pipe, GENERATOR, stage=".pre", status="pending", tags=())
            self.bridges[pipe["id"]].append({"id": next(self._ids), "name": BRIDGE, "status": "created",
                                             "downstream_pipeline": None})
            self._unprocessed.append(pipe["id"])
            return copy.deepcopy(pipe)

        return self._write("create_pipeline", ref, variables, act)
