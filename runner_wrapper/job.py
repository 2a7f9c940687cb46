"""The job being run, read from ``JOB_RESPONSE_FILE`` (trusted), never ``CUSTOM_ENV_*``.

GitLab Runner writes the full job payload to ``$TMPDIR/response.json`` before
calling the driver.  Its ``variables`` list (``[{key, value, public, masked,
file, raw}]``) is the job's variables as GitLab resolved them; users cannot
reach into ``id``, ``job_info`` or ``git_info``, whereas ``CUSTOM_ENV_CI_JOB_ID``
can be overridden by a job variable.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Iterable, Mapping

from runner_wrapper.config import DEFAULT_RECORDED_VARIABLES
from runner_wrapper.record import JobIdentity

__all__ = ["JobError", "Job", "load_job", "job_from_payload", "recorded_variables", "DEFAULT_RECORDED_VARIABLES"]


def recorded_variables(variables: Mapping[str, str], masked: Iterable[str],
                       patterns: Iterable[str] = DEFAULT_RECORDED_VARIABLES) -> dict[str, str]:
    """The job variables copied into the usage record: names matching one of ``patterns``
    (``[record] variables`` in wrapper.toml; ``*`` wildcards, case-sensitive), never a masked one."""
    pats = tuple(patterns)
    hidden = set(masked)
    return {k: v for k, v in variables.items()
            if k not in hidden and any(fnmatchcase(k, p) for p in pats)}


class JobError(ValueError):
    """The job payload is missing or malformed; the message says what is wrong."""


@dataclass(frozen=True)
class Job:
    identity: JobIdentity
    #: All job variables, last occurrence wins (as in GitLab Runner).  Masked values included:
    #: never log this mapping.
    variables: dict[str, str] = field(default_factory=dict)
    #: Keys GitLab marked as masked (never copied into records or logs).
    masked: frozenset[str] = frozenset()
    #: ``runner_info.timeout`` in seconds, when given.
    timeout: int | None = None

    @property
    def id(self) -> int:
        return self.identity.id


def load_job(path: str, recorded: Iterable[str] = DEFAULT_RECORDED_VARIABLES) -> Job:
    """Parse ``JOB_RESPONSE_FILE``; raises :class:`JobError` with a clear message.

    ``recorded``: patterns of the variables copied into the record (see :func:`recorded_variables`).
    The job token and masked variable values are registered with the log redactor.
    """
    if not path:
        raise JobError("JOB_RESPONSE_FILE is not set: is this running under GitLab Runner's custom executor?")
    try:
        with open(path, "rb") as fh:
            payload = json.loads(fh.read())
    except FileNotFoundError:
        raise JobError(f"JOB_RESPONSE_FILE {path}: no such file") from None
    except OSError as exc:
        raise JobError(f"JOB_RESPONSE_FILE {path}: cannot read: {exc.strerror}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise JobError(f"JOB_RESPONSE_FILE {path}: not JSON: {exc}") from None
    return job_from_payload(payload, recorded)


def job_url(payload: Mapping[str, Any]) -> str | None:
    """The job's web URL, computed as the runner does (the payload has no such field): gitlab-runner
    ``common/spec/spec.go`` ``JobURL`` = ``strings.TrimSuffix(RepoCleanURL(), ".git") + "/-/jobs/<id>"``,
    where ``RepoCleanURL`` (``helpers/url`` ``CleanURL``) drops the credentials (the job token
    ``gitlab-ci-token:<token>@``), the query and the fragment of ``git_info.repo_url``."""
    from urllib.parse import urlsplit, urlunsplit

    git = payload.get("git_info")
    repo = git.get("repo_url") if isinstance(git, Mapping) else None
    job_id = payload.get("id")
    if not isinstance(repo, str) or not repo or isinstance(job_id, bool) or not isinstance(job_id, int):
        return None
    try:
        parts = urlsplit(repo)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not host:
        return None
    netloc = (f"[{host}]" if ":" in host else host) + (f":{port}" if port else "")
    clean = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    if clean.endswith(".git"):
        clean = clean[:-4]
    return f"{clean}/-/jobs/{job_id}"


def job_from_payload(payload: Any, recorded: Iterable[str] = DEFAULT_RECORDED_VARIABLES) -> Job:
    """Build a :class:`Job` from the runner's job payload (``common/spec/spec.go`` ``Job``).

    Registers the job token (``token``) and every masked variable's value with
    :func:`runner_wrapper.logconfig.register_secret`, so no log line can carry them.
    """
    if not isinstance(payload, Mapping):
        raise JobError("job payload is not a JSON object")
    from runner_wrapper.logconfig import register_secret

    token = payload.get("token")
    if isinstance(token, str):
        register_secret(token)
    job_id = payload.get("id")
    if isinstance(job_id, bool) or not isinstance(job_id, int) or job_id <= 0:
        raise JobError(f"job payload: 'id' must be a positive integer, got {job_id!r}")
    info = payload.get("job_info") or {}
    git = payload.get("git_info") or {}
    if not isinstance(info, Mapping) or not isinstance(git, Mapping):
        raise JobError("job payload: 'job_info' and 'git_info' must be objects")

    variables: dict[str, str] = {}
    masked: set[str] = set()
    raw_vars = payload.get("variables")
    raw_vars = [] if raw_vars is None else raw_vars
    if not isinstance(raw_vars, list):
        raise JobError("job payload: 'variables' must be a list")
    for item in raw_vars:
        if not isinstance(item, Mapping) or not isinstance(item.get("key"), str):
            continue  # one odd entry must not fail the job
        value = item.get("value")
        variables[item["key"]] = "" if value is None else str(value)
        if item.get("masked"):
            masked.add(item["key"])
            register_secret(variables[item["key"]])

    def _int(v: Any) -> int | None:
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    # Only the payload's own fields: a job variable named CI_PIPELINE_ID or
    # CI_COMMIT_REF_PROTECTED could be set by the user.
    protected = git.get("protected") if isinstance(git.get("protected"), bool) else None
    runner_info = payload.get("runner_info") or {}
    identity = JobIdentity(
        id=job_id,
        project_id=_int(info.get("project_id")),
        project_path=info.get("project_full_path") if isinstance(info.get("project_full_path"), str) else None,
        pipeline_id=_int(info.get("pipeline_id")),
        name=info.get("name") if isinstance(info.get("name"), str) else None,
        stage=info.get("stage") if isinstance(info.get("stage"), str) else None,
        ref=git.get("ref") if isinstance(git.get("ref"), str) else None,
        protected=protected,
        url=job_url(payload),
        variables=recorded_variables(variables, masked, recorded),
    )
    timeout = _int(runner_info.get("timeout")) if isinstance(runner_info, Mapping) else None
    return Job(identity=identity, variables=variables, masked=frozenset(masked), timeout=timeout)
