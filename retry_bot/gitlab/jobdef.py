"""Extract one job's definition from a CI configuration.

A failed job is re-created from the configuration that produced it:

* for an ordinary pipeline, the project's **merged** CI configuration at the
  pipeline's SHA (``GET /projects/:id/ci/lint?content_ref=SHA&include_merged_yaml=true``):
  includes, ``extends`` and ``!reference`` are already resolved by GitLab;
* for a **generated child pipeline** (Spack's ``generate`` job writes the child
  configuration as an artifact), the configured artifact of the generating job
  in the parent pipeline.

The parsing half (:func:`find_job`) is pure and works on YAML text; the
fetching half (:func:`fetch_job_definition`) is the thin edge over
:class:`~retry_bot.gitlab.client.GitLabClient`.

GitLab's CI syntax (``!reference`` tags, the ``extends`` merge and its limits, the global keywords)
is read by :mod:`retry_bot.gitlab.cisyntax`, which the stand-in's pipeline builder uses too (one
implementation, cited to GitLab's source); ``rules:if`` by the stand-in's expression evaluator.
This module only picks one job out of a configuration.
"""

from __future__ import annotations

import copy
import fnmatch
import itertools
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from retry_bot.gitlab.cisyntax import (
    GLOBAL_KEYWORDS, CiConfigError, ExtendsResolver, parse_yaml, resolve_references,
)

if TYPE_CHECKING:
    from retry_bot.gitlab.client import GitLabClient

__all__ = [
    "JobDefinition",
    "GeneratedPipelineSource",
    "JobDefinitionError",
    "find_job",
    "fetch_job_definition",
    "GLOBAL_KEYWORDS",
]

#: Keys of ``default:`` (and their legacy top-level twins) that a job inherits.
DEFAULT_KEYS = ("after_script", "artifacts", "before_script", "cache", "hooks", "id_tokens", "image",
                "interruptible", "retry", "services", "tags", "timeout")

_PARALLEL_NAME = re.compile(r"^(?P<base>.+?) (?P<index>\d+)/(?P<total>\d+)$")
_MATRIX_NAME = re.compile(r"^(?P<base>.+?): \[(?P<values>.*)\]$")


class JobDefinitionError(ValueError):
    """The job's definition cannot be found or is not usable."""


@dataclass(frozen=True)
class JobDefinition:
    """One job's own keywords plus what it inherits, ready to be copied.

    ``body`` is the job's mapping with ``default:`` and global keywords
    inlined (respecting ``inherit:``) and ``extends`` resolved; ``variables``
    are the job's effective YAML variables (global ones merged in), and
    ``instance_variables`` the ones that pin a ``parallel`` instance
    (``CI_NODE_INDEX``/``CI_NODE_TOTAL`` or the matrix values).
    """

    name: str
    base_name: str
    body: Mapping[str, Any]
    variables: Mapping[str, Any] = field(default_factory=dict)
    instance_variables: Mapping[str, str] = field(default_factory=dict)
    source: str = "merged_yaml"


@dataclass(frozen=True)
class GeneratedPipelineSource:
    """Where a generated child pipeline's configuration lives: an artifact of a job."""

    #: Name (or fnmatch pattern) of the generating job in the parent pipeline.
    generator_job: str
    #: Path of the configuration file inside the generator's artifacts.
    artifact_path: str


def _load(text: str) -> dict[str, Any]:
    try:
        doc = parse_yaml(text, "CI configuration")
    except CiConfigError as exc:
        raise JobDefinitionError(str(exc)) from exc
    if not isinstance(doc, dict):
        raise JobDefinitionError("CI configuration is not a mapping of jobs")
    return doc


def _job_body(doc: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The job with ``extends`` merged and ``!reference`` tags resolved, as GitLab expands it.

    A merged configuration has both done already (the merge is idempotent); a generated child
    configuration (an artifact) may still use them.  Only this job's chain is resolved: a Spack
    child pipeline has thousands of jobs.
    """
    resolver = ExtendsResolver(doc)

    def top(key: str) -> Any:
        value = doc[key]  # KeyError: the reference is reported as not found
        return resolver(key) if isinstance(value, Mapping) and key not in GLOBAL_KEYWORDS else value

    try:
        return resolve_references(resolver(name), top)
    except CiConfigError as exc:
        raise JobDefinitionError(f"job {name!r}: {exc}") from exc


def _matrix_instances(matrix: Any) -> list[dict[str, str]]:
    """Every variable combination of ``parallel: matrix:``, in GitLab's order."""
    out: list[dict[str, str]] = []
    if not isinstance(matrix, list):
        return out
    for entry in matrix:
        if not isinstance(entry, Mapping):
            continue
        keys = list(entry)
        values = [v if isinstance(v, list) else [v] for v in entry.values()]
        for combo in itertools.product(*values):
            out.append({k: str(v) for k, v in zip(keys, combo)})
    return out


def _var_value(v: Any) -> Any:
    return v.get("value", "") if isinstance(v, Mapping) else v


def _rule_variables(rules: Any, scope: Mapping[str, str], where: str) -> dict[str, Any]:
    """The ``variables:`` of the first rule of ``rules`` that matches ``scope`` (GitLab: first match wins).

    ``rules:changes``/``exists`` count as matching (always true for API pipelines, mechanics
    §11.1); an ``if`` this evaluator cannot read inlines nothing (logged by the caller's reason).
    """
    # Deferred: ``rules:if`` is read by the stand-in's evaluator, and importing it loads the stand-in package.
    from retry_bot.gitlab.expressions import ExpressionError, evaluate

    if not isinstance(rules, list):
        return {}
    for rule in rules:
        if not isinstance(rule, Mapping):
            continue
        cond = rule.get("if")
        try:
            hit = True if cond is None else evaluate(str(cond), scope)
        except ExpressionError:
            return {}
        if hit:
            if rule.get("when") == "never":
                return {}
            rv = rule.get("variables")
            return {str(k): _var_value(v) for k, v in rv.items()} if isinstance(rv, Mapping) else {}
    return {}


def find_job(config_text: str, job_name: str, *, source: str = "merged_yaml",
             rule_scope: Mapping[str, str] | None = None) -> JobDefinition:
    """Find ``job_name`` in a CI configuration and return its self-contained definition.

    Handles ``parallel: N`` instance names (``build 2/4``) and
    ``parallel: matrix`` names (``build: [linux, amd64]``), ``extends``
    (normally already resolved in a merged configuration), ``default:``,
    legacy global keywords and ``inherit:``.

    ``rule_scope`` (the original pipeline's predefined variables: source, ref...)
    selects the ``rules:`` entry and the ``workflow:rules`` entry that applied to the
    job; their ``variables:`` are inlined, because the copy has no ``rules`` (a copy
    that dropped them would lose those variables).  Precedence as in GitLab: global <
    workflow rule < job < job rule variables.

    Raises:
        JobDefinitionError: the configuration has no such job, or is malformed.
    """
    doc = _load(config_text)
    base = job_name
    instance: dict[str, str] = {}
    if job_name not in doc:
        m = _PARALLEL_NAME.match(job_name)
        mm = _MATRIX_NAME.match(job_name)
        if m and isinstance(doc.get(m.group("base")), Mapping):
            base = m.group("base")
            instance = {"CI_NODE_INDEX": m.group("index"), "CI_NODE_TOTAL": m.group("total")}
        elif mm and isinstance(doc.get(mm.group("base")), Mapping):
            base = mm.group("base")
            wanted = [v.strip() for v in mm.group("values").split(",")]
            par = doc[base].get("parallel")
            matrix = par.get("matrix") if isinstance(par, Mapping) else None
            for combo in _matrix_instances(matrix):
                if list(combo.values()) == wanted:
                    instance = combo
                    break
            else:
                raise JobDefinitionError(f"job {job_name!r}: no parallel:matrix entry gives these values")
        else:
            raise JobDefinitionError(f"job {job_name!r} is not in the CI configuration ({source})")
    if base in GLOBAL_KEYWORDS or base.startswith("."):
        raise JobDefinitionError(f"{base!r} is not a job")
    body = _job_body(doc, base)
    if "trigger" in body:
        raise JobDefinitionError(f"job {job_name!r} is a trigger (bridge) job, not a build job")
    if "script" not in body and "run" not in body:
        raise JobDefinitionError(f"job {job_name!r} has no script")

    inherit = body.get("inherit") if isinstance(body.get("inherit"), Mapping) else {}
    inh_default = inherit.get("default", True)
    inh_vars = inherit.get("variables", True)

    defaults: dict[str, Any] = {}
    for k in DEFAULT_KEYS:  # legacy top-level keywords first, ``default:`` wins
        if k in doc and k not in ("tags", "retry", "timeout", "interruptible", "artifacts", "hooks", "id_tokens"):
            defaults[k] = doc[k]
    if isinstance(doc.get("default"), Mapping):
        defaults.update({k: v for k, v in doc["default"].items() if k in DEFAULT_KEYS})
    for k, v in defaults.items():
        allowed = inh_default is True or (isinstance(inh_default, list) and k in inh_default)
        if allowed and k not in body:
            body[k] = copy.deepcopy(v)

    variables: dict[str, Any] = {}
    gvars = doc.get("variables") if isinstance(doc.get("variables"), Mapping) else {}
    for k, v in gvars.items():
        if inh_vars is True or (isinstance(inh_vars, list) and k in inh_vars):
            variables[str(k)] = _var_value(v)
    if rule_scope is not None:
        wf = doc.get("workflow") if isinstance(doc.get("workflow"), Mapping) else {}
        scope = {**{k: str(_var_value(v)) for k, v in variables.items()}, **rule_scope}
        variables.update(_rule_variables(wf.get("rules"), scope, "workflow:rules"))
    jvars = body.get("variables") if isinstance(body.get("variables"), Mapping) else {}
    for k, v in jvars.items():
        variables[str(k)] = v
    if rule_scope is not None:
        scope = {**{k: str(_var_value(v)) for k, v in variables.items()}, **rule_scope}
        variables.update(_rule_variables(body.get("rules"), scope, f"job {job_name!r} rules"))
    return JobDefinition(name=job_name, base_name=base, body=body, variables=variables,
                         instance_variables=instance, source=source)


# --------------------------------------------------------------------------- the edge


def _matches(name: str, pattern: str) -> bool:
    return name == pattern or fnmatch.fnmatchcase(name, pattern)


def fetch_job_definition(client: GitLabClient, project: int | str, job: Mapping[str, Any], *,
                         pipeline_source: str | None = None,
                         generated: Sequence[GeneratedPipelineSource] = (),
                         parent_pipeline_id: int | None = None,
                         rule_scope: Mapping[str, str] | None = None) -> JobDefinition:
    """Fetch and extract the definition of the failed ``job`` (REST job JSON).

    For a child pipeline (``pipeline_source == "parent_pipeline"``) with a
    configured generator, the configuration comes from the generator job's
    artifact in the parent pipeline; otherwise from the merged CI
    configuration at the pipeline's SHA.
    """
    name = str(job.get("name") or "")
    pipeline = job.get("pipeline") or {}
    sha = pipeline.get("sha") or (job.get("commit") or {}).get("id")
    errors: list[str] = []
    if pipeline_source == "parent_pipeline" and generated and parent_pipeline_id:
        jobs = client.pipeline_jobs(project, parent_pipeline_id)
        for src in generated:
            gens = [j for j in jobs if _matches(str(j.get("name", "")), src.generator_job)
                    and j.get("status") == "success"]
            for gen in sorted(gens, key=lambda j: -int(j.get("id", 0))):
                try:
                    raw = client.job_artifact(project, int(gen["id"]), src.artifact_path)
                    return find_job(raw.decode("utf-8", "replace"), name,
                                    source=f"artifact {src.artifact_path} of job {gen['id']}", rule_scope=rule_scope)
                except JobDefinitionError as exc:
                    errors.append(str(exc))
                except Exception as exc:  # noqa: BLE001 - report and try the next source
                    errors.append(f"artifact {src.artifact_path} of job {gen.get('id')}: {exc}")
    if not sha:
        raise JobDefinitionError(f"job {name!r}: its pipeline has no SHA")
    try:
        merged = client.merged_ci_yaml(project, sha)
        return find_job(merged, name, source=f"merged CI configuration at {str(sha)[:12]}", rule_scope=rule_scope)
    except JobDefinitionError as exc:
        errors.append(str(exc))
    raise JobDefinitionError("; ".join(errors))
