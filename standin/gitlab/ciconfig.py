"""Turn a ``.gitlab-ci.yml`` (as a dict or YAML text) into the jobs of one pipeline.

Pure functions, no state.  The subset of GitLab's CI syntax understood here is
the one the retry bot's template and the tests need (see ``docs/standin.md``):

* top level: ``include`` of ``local`` files (given as ``files``), ``stages``,
  ``variables``, ``default``, ``workflow:rules``, hidden jobs (``.name``),
  ``extends`` (deep-merged) and ``!reference`` tags (resolved, lists flattened),
  so :func:`merged_yaml` shows the expanded jobs, as GitLab's ``merged_yaml`` does;
* jobs: ``stage``, ``script``/``before_script``/``after_script``, ``when``
  (``on_success``, ``manual``, ``always``, ``on_failure``, ``never``; ``delayed``
  is treated as ``on_success``), ``allow_failure`` (bool or ``exit_codes``),
  ``rules`` (``if`` / ``when`` / ``allow_failure`` / ``variables``; ``changes`` and
  ``exists`` always match), ``needs`` (names or ``{job, optional, artifacts}``),
  ``tags``, ``variables``, ``image``, ``timeout``, ``retry``, ``artifacts:paths``,
  ``trigger`` (``include: [{artifact, job}]``, ``strategy: depend``, ``forward``).

``only``/``except``, non-local ``include`` (project, remote, template) and
``parallel`` are not supported: a config using them is rejected with :class:`CiConfigError`
naming the keyword, rather than silently misread.

The stand-in is the test oracle of GitLab's pipeline rules, so it stays independent of the bot's logic:
it shares only the pure reading of GitLab's CI syntax (:mod:`retry_bot.gitlab.cisyntax`: ``!reference``,
``extends``, the global keywords) with the bot's job re-creation, one implementation with its sources.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Mapping

import yaml

from retry_bot.gitlab.cisyntax import (
    GLOBAL_KEYWORDS, CiConfigError, ExtendsResolver, deep_merge, parse_yaml, resolve_references,
)
from retry_bot.gitlab.expressions import ExpressionError, evaluate

__all__ = [
    "CiConfigError",
    "PipelineFiltered",
    "JobSpec",
    "PipelinePlan",
    "load_config",
    "merged_yaml",
    "plan_pipeline",
    "validate_config",
    "DEFAULT_STAGES",
]

DEFAULT_STAGES = (".pre", "build", "test", "deploy", ".post")
_DEFAULT_KEYS = ("image", "services", "before_script", "after_script", "tags", "timeout",
                 "retry", "artifacts", "cache", "interruptible")
_UNSUPPORTED_JOB_KEYS = ("only", "except", "parallel")


class PipelineFiltered(ValueError):
    """``workflow:rules`` or job ``rules`` left nothing to run; GitLab answers 400."""


@dataclass(frozen=True)
class JobSpec:
    """One job (build) or bridge (``trigger:``) as instantiated in a pipeline."""

    name: str
    stage: str
    when: str
    allow_failure: bool
    script: tuple[str, ...] = ()
    before_script: tuple[str, ...] = ()
    after_script: tuple[str, ...] = ()
    needs: tuple[tuple[str, bool], ...] | None = None  # (job name, optional); None = stage ordering
    tags: tuple[str, ...] = ()
    variables: tuple[tuple[str, str], ...] = ()  # global YAML variables, then job and rule variables
    image: str | None = None
    timeout: str | None = None
    artifact_paths: tuple[str, ...] = ()
    trigger: Mapping[str, Any] | None = None
    retry: Mapping[str, Any] | None = None
    allow_failure_exit_codes: tuple[int, ...] = ()
    #: ``interruptible:`` (a newer pipeline on the ref may auto-cancel it), after ``default:``/``inherit:``.
    interruptible: bool = False

    @property
    def is_bridge(self) -> bool:
        return self.trigger is not None


@dataclass(frozen=True)
class PipelinePlan:
    stages: tuple[str, ...]
    jobs: tuple[JobSpec, ...]
    workflow_variables: tuple[tuple[str, str], ...] = field(default=())


_MAX_INCLUDES = 50


def _parse(text: str, where: str) -> dict[str, Any]:
    data = parse_yaml(text, where)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise CiConfigError(f"{where} must be a mapping of keywords and jobs")
    return data


def _includes_of(node: Any) -> list[str]:
    items = node if isinstance(node, list) else [node]
    paths = []
    for item in items:
        if isinstance(item, str) and "://" not in item:
            paths.append(item)
        elif isinstance(item, Mapping) and set(item) <= {"local", "rules"} and "local" in item:
            paths.append(str(item["local"]))
        else:
            raise CiConfigError(f"include {item!r} is not modelled by the stand-in: only 'local' files "
                                "(give them to add_project(files=...))")
    return [p.lstrip("/") for p in paths]


def _with_includes(data: dict[str, Any], files: Mapping[str, str], seen: list[str]) -> dict[str, Any]:
    if "include" not in data:
        return data
    merged: dict[str, Any] = {}
    for path in _includes_of(data["include"]):
        if path in seen or len(seen) >= _MAX_INCLUDES:
            raise CiConfigError(f"include loop or too many includes at {path!r}")
        if path not in files:
            raise CiConfigError(f"Local file `{path}` does not exist!")
        merged = deep_merge(merged, _with_includes(_parse(files[path], path), files, seen + [path]))
    return deep_merge(merged, {k: v for k, v in data.items() if k != "include"})


def load_config(config: Mapping[str, Any] | str, files: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Parse YAML text (or copy a dict), merge ``include: local`` files, expand ``extends``, resolve ``!reference``.

    ``files`` maps repository paths to file contents for ``include: local``.
    """
    data = _parse(config, "CI configuration") if isinstance(config, str) else copy.deepcopy(dict(config))
    data = _with_includes(data, files or {}, [])
    expanded = _expand_extends(data)
    return resolve_references(expanded, expanded.__getitem__)


def _expand_extends(data: dict[str, Any]) -> dict[str, Any]:
    resolve = ExtendsResolver(data)
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in GLOBAL_KEYWORDS or not isinstance(value, Mapping):
            out[key] = value
        else:
            out[key] = resolve(key)
    return out


def merged_yaml(config: Mapping[str, Any] | str, files: Mapping[str, str] | None = None) -> str:
    """The configuration as GitLab's lint API shows it: includes merged, ``extends`` and ``!reference`` expanded."""
    return yaml.safe_dump(load_config(config, files), sort_keys=False, default_flow_style=False)


def _variables_of(node: Any, where: str) -> list[tuple[str, str]]:
    if node is None:
        return []
    if not isinstance(node, Mapping):
        raise CiConfigError(f"{where}: 'variables' must be a mapping")
    out = []
    for key, value in node.items():
        if isinstance(value, Mapping):
            value = value.get("value", "")
        if isinstance(value, bool):
            value = "true" if value else "false"
        out.append((str(key), "" if value is None else str(value)))
    return out


def _str_list(node: Any, where: str) -> tuple[str, ...]:
    if node is None:
        return ()
    if isinstance(node, str):
        return (node,)
    if isinstance(node, list):
        flat: list[str] = []
        for item in node:
            if isinstance(item, list):  # YAML anchors often yield nested lists
                flat.extend(str(x) for x in item)
            else:
                flat.append(str(item))
        return tuple(flat)
    raise CiConfigError(f"{where} must be a string or a list of strings")


def _needs_of(node: Any, where: str) -> tuple[tuple[str, bool], ...] | None:
    if node is None:
        return None
    if not isinstance(node, list):
        raise CiConfigError(f"{where}: 'needs' must be a list")
    out = []
    for item in node:
        if isinstance(item, str):
            out.append((item, False))
        elif isinstance(item, Mapping) and "job" in item:
            out.append((str(item["job"]), bool(item.get("optional", False))))
        else:
            raise CiConfigError(f"{where}: unsupported 'needs' entry {item!r}")
    return tuple(out)


def _rule_matches(rule: Mapping[str, Any], variables: Mapping[str, str], where: str) -> bool:
    if "if" not in rule:
        return True
    try:
        return evaluate(str(rule["if"]), variables)
    except ExpressionError as exc:
        raise CiConfigError(f"{where}: {exc}") from None


def _workflow(data: Mapping[str, Any], variables: Mapping[str, str]) -> list[tuple[str, str]]:
    workflow = data.get("workflow")
    if not workflow or "rules" not in workflow:
        return []
    for rule in workflow["rules"]:
        if _rule_matches(rule, variables, "workflow:rules"):
            if rule.get("when", "always") == "never":
                raise PipelineFiltered("Pipeline filtered out by workflow rules.")
            return _variables_of(rule.get("variables"), "workflow:rules")
    raise PipelineFiltered("Pipeline filtered out by workflow rules.")


def plan_pipeline(config: Mapping[str, Any] | str, variables: Mapping[str, str],
                  files: Mapping[str, str] | None = None) -> PipelinePlan:
    """Instantiate the jobs a pipeline gets, given predefined and pipeline variables.

    ``variables`` are what rules see besides YAML variables: predefined ``CI_*``
    variables and the pipeline variables (which take precedence over YAML ones).
    Raises :class:`PipelineFiltered` when no job remains, like GitLab's 400.
    """
    data = load_config(config, files)
    stages = tuple(_str_list(data.get("stages"), "stages")) or DEFAULT_STAGES[1:4]
    stages = (".pre",) + tuple(s for s in stages if s not in (".pre", ".post")) + (".post",)
    global_vars = _variables_of(data.get("variables"), "variables")
    scope = {**dict(global_vars), **dict(variables)}
    workflow_vars = _workflow(data, scope)
    default = data.get("default") or {}
    if not isinstance(default, Mapping):
        raise CiConfigError("'default' must be a mapping")
    # Legacy top-level keywords act as defaults too (G lib/gitlab/ci/config/entry/root.rb);
    # ``default:`` wins over them.
    legacy = {k: data[k] for k in ("image", "services", "before_script", "after_script", "cache") if k in data}
    default = {**legacy, **default}
    jobs: list[JobSpec] = []
    for name, node in data.items():
        if name in GLOBAL_KEYWORDS or name.startswith(".") or not isinstance(node, Mapping):
            continue
        where = f"job {name!r}"
        for key in _UNSUPPORTED_JOB_KEYS:
            if key in node:
                raise CiConfigError(f"{where}: '{key}' is not supported by the stand-in")
        # ``inherit:`` (G lib/gitlab/ci/config/entry/inherit/default.rb, .../variables.rb): ``default:
        # false`` (or a list of the keys to take) and ``variables: false`` (or a list of names).
        inherit = node.get("inherit") or {}
        if not isinstance(inherit, Mapping):
            raise CiConfigError(f"{where}: 'inherit' must be a mapping")
        inh_default = inherit.get("default", True)
        inh_vars = inherit.get("variables", True)
        for key, value in (("default", inh_default), ("variables", inh_vars)):
            if not isinstance(value, (bool, list)):
                raise CiConfigError(f"{where}: 'inherit:{key}' must be a boolean or a list")
        if "trigger" in node:
            # A bridge takes only the default keys it supports (G lib/gitlab/ci/config/entry/bridge.rb
            # has no image/script/tags...); ``interruptible`` is not one of them either.
            taken: dict[str, Any] = {}
        else:
            taken = {k: default[k] for k in _DEFAULT_KEYS if k in default
                     and (inh_default is True or (isinstance(inh_default, list) and k in inh_default))}
        node = {**taken, **node}
        if "script" not in node and "trigger" not in node:
            raise CiConfigError(f"{where}: needs a 'script' or a 'trigger'")
        stage = str(node.get("stage", "test"))
        if stage not in stages:
            raise CiConfigError(f"{where}: chosen stage {stage!r} does not exist; available stages are {', '.join(stages)}")
        inherited_vars = [(k, v) for k, v in global_vars
                          if inh_vars is True or (isinstance(inh_vars, list) and k in inh_vars)]
        job_vars = inherited_vars + list(workflow_vars) + _variables_of(node.get("variables"), where)
        when = str(node.get("when", "on_success"))
        allow_failure_node = node.get("allow_failure")
        rule_allow_failure = None
        if "rules" in node:
            rule_scope = {**dict(job_vars), **dict(variables)}
            for rule in node["rules"]:
                if not isinstance(rule, Mapping):
                    raise CiConfigError(f"{where}: each rule must be a mapping")
                if _rule_matches(rule, rule_scope, f"{where} rules"):
                    when = str(rule.get("when", when))
                    rule_allow_failure = rule.get("allow_failure")
                    job_vars = job_vars + _variables_of(rule.get("variables"), f"{where} rules")
                    break
            else:
                when = "never"
            if when == "manual" and rule_allow_failure is None and allow_failure_node is None:
                rule_allow_failure = False  # manual inside rules blocks the pipeline
        if when == "never":
            continue
        if when not in ("on_success", "manual", "always", "on_failure", "delayed"):
            raise CiConfigError(f"{where}: unknown 'when: {when}'")
        if when == "delayed":
            when = "on_success"
        exit_codes: tuple[int, ...] = ()
        if rule_allow_failure is not None:
            allow_failure = bool(rule_allow_failure)
        elif isinstance(allow_failure_node, Mapping):
            codes = allow_failure_node.get("exit_codes", [])
            exit_codes = tuple(int(c) for c in ([codes] if isinstance(codes, int) else codes))
            allow_failure = False
        elif allow_failure_node is not None:
            allow_failure = bool(allow_failure_node)
        else:
            allow_failure = when == "manual"
        trigger = node.get("trigger")
        if trigger is not None and not isinstance(trigger, (Mapping, str)):
            raise CiConfigError(f"{where}: 'trigger' must be a mapping or a project path")
        if isinstance(trigger, str):
            trigger = {"project": trigger}
        artifacts = node.get("artifacts") or {}
        image = node.get("image")
        if isinstance(image, Mapping):
            image = image.get("name")
        jobs.append(JobSpec(
            name=name,
            stage=stage,
            when=when,
            allow_failure=allow_failure,
            script=_str_list(node.get("script"), f"{where}: 'script'"),
            before_script=_str_list(node.get("before_script"), f"{where}: 'before_script'"),
            after_script=_str_list(node.get("after_script"), f"{where}: 'after_script'"),
            needs=_needs_of(node.get("needs"), where),
            tags=_str_list(node.get("tags"), f"{where}: 'tags'"),
            variables=tuple(job_vars),
            image=str(image) if image else None,
            timeout=str(node["timeout"]) if node.get("timeout") else None,
            artifact_paths=_str_list(artifacts.get("paths") if isinstance(artifacts, Mapping) else None,
                                     f"{where}: 'artifacts:paths'"),
            trigger=dict(trigger) if trigger is not None else None,
            retry=node.get("retry") if isinstance(node.get("retry"), Mapping) else (
                {"max": int(node["retry"])} if isinstance(node.get("retry"), int) else None),
            allow_failure_exit_codes=exit_codes,
            interruptible=bool(node.get("interruptible", False)),
        ))
    names = {j.name for j in jobs}
    for job in jobs:
        for need, optional in job.needs or ():
            if need not in names and not optional:
                raise CiConfigError(f"job {job.name!r}: 'needs' refers to {need!r}, which is not in the pipeline")
    # G lib/gitlab/ci/pipeline/chain/populate.rb: ``.pre``/``.post`` are left out when deciding
    # whether the pipeline is empty ("as they alone are not considered a complete pipeline",
    # issue 198518, since 12.8): a pipeline whose jobs are all in them is not created.
    if not any(j.stage not in (".pre", ".post") for j in jobs):
        raise PipelineFiltered(
            "Pipeline will not run for the selected trigger. The rules configuration prevented any jobs "
            "from being added to the pipeline.")
    used = [s for s in stages if any(j.stage == s for j in jobs)]
    return PipelinePlan(stages=tuple(used), jobs=tuple(jobs), workflow_variables=tuple(workflow_vars))


def validate_config(config: Mapping[str, Any] | str, files: Mapping[str, str] | None = None) -> None:
    """Raise :class:`CiConfigError` for a configuration no pipeline could be created from.

    Structural checks (stages, keywords, ``extends``, rule syntax) apply to every job; a config
    whose rules filter out every job for a plain push is still valid, as in GitLab's lint.
    """
    try:
        plan_pipeline(config, {"CI_PIPELINE_SOURCE": "push"}, files)
    except PipelineFiltered:
        pass
