"""Build the compact child-pipeline definition that re-creates a failed job.

GitLab cannot retry a non-manual job with new variables (mechanics §2.7).  The
bot therefore creates a pipeline on the same ref whose variables carry a tiny
child-pipeline configuration: a copy of the failed job as ``when: manual``, on
the tags of the runner class the policy chose.  The project's CI template
(``packaging/gitlab-ci/retry-bot.yml``) writes that configuration to a file
and triggers it as a child pipeline (``trigger: include: artifact``); the bot
then plays the manual copy with the upgraded variables.

This module is pure: :func:`build_child_config` maps a
:class:`~retry_bot.gitlab.jobdef.JobDefinition` to the YAML text, and
:func:`pipeline_variables` to the variables of the ``POST /pipeline`` call.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from retry_bot.gitlab.jobdef import JobDefinition

__all__ = [
    "ORIGIN_VARIABLE",
    "CONFIG_VARIABLE",
    "ORIGIN_SHA_VARIABLE",
    "ChildPipelineSpec",
    "build_child_config",
    "pipeline_variables",
    "REMOVED_KEYWORDS",
    "format_gitlab_duration",
    "parse_gitlab_duration",
    "encode_config",
    "decode_config",
]

#: Pipeline and job variable naming the job a lineage started from.
ORIGIN_VARIABLE = "RETRY_BOT_ORIGIN_JOB_ID"
#: Job variable of a re-created job: the commit the failed job built.
ORIGIN_SHA_VARIABLE = "RETRY_BOT_ORIGIN_SHA"
#: Pipeline variable carrying the child configuration (read by the CI template).
CONFIG_VARIABLE = "RETRY_BOT_CHILD_CONFIG"

#: Keywords the copy cannot or must not have: it runs alone, in its own child
#: pipeline, only when the bot plays it.
REMOVED_KEYWORDS = (
    "needs", "dependencies", "rules", "only", "except", "when", "start_in", "parallel",
    "extends", "inherit", "environment", "resource_group", "release", "pages", "trigger",
    "manual_confirmation",
)

#: Largest child configuration we put into a pipeline variable (before base64).
MAX_CONFIG_BYTES = 45_000


def encode_config(text: str) -> str:
    """The child configuration as it travels in ``RETRY_BOT_CHILD_CONFIG``: base64 (RFC 4648).

    The runner expands every non-raw variable with Go's ``os.Expand`` (R
    ``common/variables.go``, ``JobVariables.Expand``; ``POST /pipeline`` has no ``raw``
    flag, G ``lib/api/ci/helpers/pipelines_helpers.rb``): ``$NAME`` and ``${NAME}`` are
    substituted (``$CI_JOB_TOKEN`` included), ``$$`` becomes ``$`` and ``$?`` vanishes.
    The base64 alphabet has no ``$``, so the template's ``base64 -d`` gets the exact bytes.
    """
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def decode_config(value: str) -> str:
    """Inverse of :func:`encode_config` (what the template's ``base64 -d`` does)."""
    return base64.b64decode(value.encode("ascii"), validate=True).decode("utf-8")


@dataclass(frozen=True)
class ChildPipelineSpec:
    """What the bot needs to create one re-created job."""

    origin_job_id: int
    origin_pipeline_id: int
    failed_job_id: int
    attempt: int
    runner_class: str | None
    tags: Sequence[str]
    #: The copy's job timeout (``timeout:``), from the decision (``[resize.time]``); ``None`` keeps the job's.
    timeout_seconds: float | None = None
    #: The failed job's commit: the copy gets ``RETRY_BOT_ORIGIN_SHA`` (the pipeline is created on the
    #: ref, whose head may have moved on; a project can ``git checkout $RETRY_BOT_ORIGIN_SHA``).
    origin_sha: str | None = None


def build_child_config(defn: JobDefinition, spec: ChildPipelineSpec) -> str:
    """The child pipeline's configuration: one ``when: manual`` copy of the job.

    * ``needs``/``dependencies`` are dropped (the copy has no upstream jobs in
      its pipeline) and listed in ``RETRY_BOT_REMOVED_NEEDS`` for the record;
    * ``rules``/``only``/``except``/``when`` are replaced by ``when: manual``
      with ``allow_failure: false`` so the child pipeline waits for the bot;
    * ``tags`` are those of the chosen runner class (unchanged when the policy
      kept the class);
    * ``timeout`` is ``spec.timeout_seconds`` when the decision raised it (a
      timeout resize), written as GitLab writes durations (``1h 30m``);
      otherwise the job's own ``timeout:`` (if any) is kept;
    * variables: the job's effective YAML variables, the ``parallel`` instance
      variables, and ``RETRY_BOT_ORIGIN_JOB_ID`` and friends.  The *upgraded*
      resource variables are **not** here: the bot passes them when it plays
      the job, so they take precedence over YAML (mechanics §2.8).

    The result is JSON (a subset of YAML) with sorted keys: compact, and the
    same job always gives the same text.
    """
    body = {k: v for k, v in defn.body.items() if k not in REMOVED_KEYWORDS}
    removed_needs = _needs_names(defn.body.get("needs")) + [
        str(d) for d in (defn.body.get("dependencies") or []) if isinstance(d, str)]
    stage = str(body.get("stage") or "test")
    if stage in (".pre", ".post"):
        stage = "test"
    body["stage"] = stage
    body["when"] = "manual"
    body["allow_failure"] = False
    body["needs"] = []
    # A newer pipeline on the ref must not auto-cancel the copy (G cancel_redundant_pipelines_service.rb).
    body["interruptible"] = False
    if spec.tags:
        body["tags"] = list(spec.tags)
    if spec.timeout_seconds is not None:
        body["timeout"] = format_gitlab_duration(spec.timeout_seconds)
    variables: dict[str, Any] = {}
    for k, v in defn.variables.items():
        variables[k] = v
    variables.update(defn.instance_variables)
    variables[ORIGIN_VARIABLE] = str(spec.origin_job_id)
    variables["RETRY_BOT_ORIGIN_PIPELINE_ID"] = str(spec.origin_pipeline_id)
    variables["RETRY_BOT_FAILED_JOB_ID"] = str(spec.failed_job_id)
    variables["RETRY_BOT_ATTEMPT"] = str(spec.attempt)
    if spec.origin_sha:
        variables[ORIGIN_SHA_VARIABLE] = spec.origin_sha
    if spec.runner_class:
        variables["RETRY_BOT_RUNNER_CLASS"] = spec.runner_class
    if removed_needs:
        variables["RETRY_BOT_REMOVED_NEEDS"] = ",".join(sorted(set(removed_needs)))
    body["variables"] = variables
    config = {"stages": [stage], defn.name: body}
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    if len(text.encode("utf-8")) > MAX_CONFIG_BYTES:
        raise ValueError(f"the child configuration of job {defn.name!r} is {len(text)} bytes, "
                         f"more than {MAX_CONFIG_BYTES}; it cannot travel in a pipeline variable")
    return text


_UNIT_SECONDS = {"s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
                 "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
                 "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
                 "d": 86400, "day": 86400, "days": 86400, "w": 604800, "week": 604800, "weeks": 604800}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)")


def format_gitlab_duration(seconds: float) -> str:
    """``5400`` -> ``"1h 30m"``: a job ``timeout:`` as GitLab writes it (whole seconds, rounded up).

    GitLab parses ``timeout:`` with ChronicDuration; hours, minutes and seconds
    are understood by every version (and by the stand-in).
    """
    if seconds <= 0:
        raise ValueError(f"a job timeout must be positive, not {seconds!r}")
    total = int(-(-seconds // 1))
    h, rest = divmod(total, 3600)
    m, sec = divmod(rest, 60)
    parts = [f"{h}h" if h else "", f"{m}m" if m else "", f"{sec}s" if sec else ""]
    return " ".join(p for p in parts if p)


def parse_gitlab_duration(value: Any) -> float | None:
    """A job ``timeout:`` (``"1h 30m"``, ``"90 minutes"``, ``"3600"``, ``3600``) in seconds, ``None`` if unreadable.

    A bare number is seconds, as in ChronicDuration.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if value > 0 else None
    text = str(value).strip().lower().replace(",", " ").replace(" and ", " ")
    if not text:
        return None
    total, pos = 0.0, 0
    for m in _DURATION_PART.finditer(text):
        if text[pos:m.start()].strip():
            return None
        unit = m.group(2) or "s"
        if unit not in _UNIT_SECONDS:
            return None
        total += float(m.group(1)) * _UNIT_SECONDS[unit]
        pos = m.end()
    if text[pos:].strip() or total <= 0:
        return None
    return total


def _needs_names(needs: Any) -> list[str]:
    out: list[str] = []
    for n in needs or []:
        if isinstance(n, str):
            out.append(n)
        elif isinstance(n, Mapping) and isinstance(n.get("job"), str):
            out.append(n["job"])
    return out


def pipeline_variables(child_config: str, spec: ChildPipelineSpec) -> dict[str, str]:
    """Variables of the ``POST /projects/:id/pipeline`` call that re-creates the job.

    The configuration travels base64-encoded (:func:`encode_config`): the runner's
    variable expansion cannot touch it.  ``RETRY_BOT_ORIGIN_JOB_ID`` and
    ``RETRY_BOT_FAILED_JOB_ID`` are for people reading the pipeline; the bot finds its
    own pipelines from the ids in its state store, without reading pipeline variables
    (that needs Maintainer, G ``pipeline_policy.rb``).
    """
    return {
        CONFIG_VARIABLE: encode_config(child_config),
        ORIGIN_VARIABLE: str(spec.origin_job_id),
        "RETRY_BOT_FAILED_JOB_ID": str(spec.failed_job_id),
        "RETRY_BOT_ATTEMPT": str(spec.attempt),
        **({ORIGIN_SHA_VARIABLE: spec.origin_sha} if spec.origin_sha else {}),
    }
