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

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from retry_bot.gitlab.jobdef import JobDefinition

__all__ = [
    "ORIGIN_VARIABLE",
    "CONFIG_VARIABLE",
    "ChildPipelineSpec",
    "build_child_config",
    "pipeline_variables",
    "REMOVED_KEYWORDS",
]

#: Pipeline and job variable naming the job a lineage started from.
ORIGIN_VARIABLE = "RETRY_BOT_ORIGIN_JOB_ID"
#: Pipeline variable carrying the child configuration (read by the CI template).
CONFIG_VARIABLE = "RETRY_BOT_CHILD_CONFIG"

#: Keywords the copy cannot or must not have: it runs alone, in its own child
#: pipeline, only when the bot plays it.
REMOVED_KEYWORDS = (
    "needs", "dependencies", "rules", "only", "except", "when", "start_in", "parallel",
    "extends", "inherit", "environment", "resource_group", "release", "pages", "trigger",
    "manual_confirmation",
)

#: Largest child configuration we put into a pipeline variable.
MAX_CONFIG_BYTES = 60_000


@dataclass(frozen=True)
class ChildPipelineSpec:
    """What the bot needs to create one re-created job."""

    origin_job_id: int
    origin_pipeline_id: int
    failed_job_id: int
    attempt: int
    runner_class: str | None
    tags: Sequence[str]


def build_child_config(defn: JobDefinition, spec: ChildPipelineSpec) -> str:
    """The child pipeline's configuration: one ``when: manual`` copy of the job.

    * ``needs``/``dependencies`` are dropped (the copy has no upstream jobs in
      its pipeline) and listed in ``RETRY_BOT_REMOVED_NEEDS`` for the record;
    * ``rules``/``only``/``except``/``when`` are replaced by ``when: manual``
      with ``allow_failure: false`` so the child pipeline waits for the bot;
    * ``tags`` are those of the chosen runner class (unchanged when the policy
      kept the class);
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
    if spec.tags:
        body["tags"] = list(spec.tags)
    variables: dict[str, Any] = {}
    for k, v in defn.variables.items():
        variables[k] = v
    variables.update(defn.instance_variables)
    variables[ORIGIN_VARIABLE] = str(spec.origin_job_id)
    variables["RETRY_BOT_ORIGIN_PIPELINE_ID"] = str(spec.origin_pipeline_id)
    variables["RETRY_BOT_FAILED_JOB_ID"] = str(spec.failed_job_id)
    variables["RETRY_BOT_ATTEMPT"] = str(spec.attempt)
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

    ``RETRY_BOT_ORIGIN_JOB_ID`` and ``RETRY_BOT_FAILED_JOB_ID`` are how the bot
    finds this pipeline again after a crash or a timeout (``GET
    .../pipelines/:id/variables``), before it would ever create another.
    """
    return {
        CONFIG_VARIABLE: child_config,
        ORIGIN_VARIABLE: str(spec.origin_job_id),
        "RETRY_BOT_FAILED_JOB_ID": str(spec.failed_job_id),
        "RETRY_BOT_ATTEMPT": str(spec.attempt),
    }
