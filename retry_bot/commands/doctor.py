"""``retry-bot doctor --config bot.toml``: can the bot do on this GitLab what its policy asks?

For the GitLab and each watched project it reads what the bot depends on and
says what will work and what will fail, with the fix for each:

* the GitLab version, and the features it has or lacks (gitlab-mechanics §11.3);
* the token's scopes and its role on each project;
* protected branches, and whether the token can push or merge to them
  (retry, play, ``jobRetry`` and the resize pipeline need it there, §11.2);
* ``ci_pipeline_variables_minimum_override_role`` (the resize pipeline passes variables);
* whether the project includes the current CI template, and whether its
  ``stages:`` and ``workflow:rules`` let the bot's pipeline run (a dry plan of
  an ``api`` pipeline with ``RETRY_BOT_CHILD_CONFIG`` set, §11.1);
* with ``[webhook] enabled``: the project's webhook (``GET /projects/:id/hooks``,
  Maintainer only): one points at the bot, has job events on, SSL verification,
  is not disabled by GitLab; its secret token cannot be checked (GitLab never
  returns it).

Exit codes: 0 everything the policy needs is possible; 1 something it needs
will fail; 2 the configuration or GitLab could not be read at all.

The reads are the thin edge (:func:`gather`); the verdicts are plain functions
over :class:`ProjectFacts` (:func:`evaluate_gitlab`, :func:`evaluate_project`).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:
    from retry_bot.live.config import BotConfig
    from retry_bot.gitlab.client import GitLabClient
    from retry_bot.policy import Policy

__all__ = ["register", "handle", "Check", "ProjectFacts", "PolicyNeeds", "evaluate_gitlab", "evaluate_project",
           "evaluate_webhook", "gather", "needs_of"]

#: GitLab access levels (G lib/gitlab/access.rb).
DEVELOPER, MAINTAINER = 30, 40
_ROLE_LEVEL = {"guest": 10, "planner": 15, "reporter": 20, "developer": 30, "maintainer": 40, "owner": 50,
               "no_one_allowed": 1000}
TEMPLATE_JOBS = ("retry-bot:generate", "retry-bot:child")


@dataclass(frozen=True)
class Check:
    """One verdict: ``ok``, ``warn`` (works, degraded or unverified) or ``fail`` (will not work)."""

    scope: str           # "gitlab" or the project path
    what: str
    status: str
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class PolicyNeeds:
    """What the policy will ask GitLab for."""

    retry: bool = False
    resize: bool = False


def needs_of(policy: Policy) -> PolicyNeeds:
    """Which writes a policy can lead to (families, categories and overrides)."""
    actions = {str(getattr(r.action, "value", r.action)) for r in policy.families.values()}
    for upd in list(policy.categories.values()) + [o.update for o in getattr(policy, "overrides", ())]:
        a = getattr(upd, "action", None)
        if a is not None:
            actions.add(str(getattr(a, "value", a)))
    return PolicyNeeds(retry="retry" in actions, resize="resize" in actions)


@dataclass(frozen=True)
class ProjectFacts:
    """What GitLab told us about one project (``None``: could not be read)."""

    path: str
    error: str | None = None
    access_level: int | None = None
    user_id: int | None = None
    default_branch: str = "main"
    #: name (may be a wildcard) -> (push levels, merge levels, ids of users allowed by name)
    protected: Mapping[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = field(default_factory=dict)
    variables_min_role: str | None = None
    merged_yaml: str | None = None
    lint_error: str | None = None
    protected_error: str | None = None
    #: ``GET /projects/:id/hooks`` (``None``: not read, or refused: ``hooks_error``/``hooks_status``).
    hooks: tuple[Mapping[str, Any], ...] | None = None
    hooks_error: str | None = None
    hooks_status: int | None = None


def _level_ok(levels: Sequence[int], access: int) -> bool:
    return any(0 < lvl <= access for lvl in levels)


def evaluate_gitlab(version: str, scopes: Sequence[str] | None, needs: PolicyNeeds) -> list[Check]:
    """Version and token checks (pure)."""
    from retry_bot.gitlab.client import MIN_SUPPORTED_VERSION, GitLabFeatures

    out = []
    feats = GitLabFeatures.from_version(version)
    minimum = ".".join(map(str, MIN_SUPPORTED_VERSION))
    if not feats.supported:
        out.append(Check("gitlab", "version", "fail", f"GitLab {version} is older than {minimum}",
                         f"upgrade GitLab to {minimum} or newer (16.10+ for exit codes)"))
    else:
        missing = feats.missing()
        out.append(Check("gitlab", "version", "warn" if missing else "ok",
                         f"GitLab {version}" + (": " + "; ".join(missing) if missing else
                                                ": exit codes, jobRetry(variables:) and PipelineInterface handled"),
                         "upgrade to 16.10 or newer for every feature" if missing else ""))
    if scopes is None:
        out.append(Check("gitlab", "token scopes", "warn", "could not read the token's scopes "
                         "(GET /personal_access_tokens/self)", "make sure the token has the api scope"))
    elif "api" not in scopes:
        writes = needs.retry or needs.resize
        out.append(Check("gitlab", "token scopes", "fail" if writes else "warn",
                         f"the token's scopes are {', '.join(scopes) or 'none'}: without api it can read but "
                         "not retry, play or create pipelines", "create the token with the api scope"))
    else:
        out.append(Check("gitlab", "token scopes", "ok", f"scopes: {', '.join(scopes)}"))
    return out


def _plan_bot_pipeline(merged_yaml: str, branch: str) -> tuple[list[tuple[str, str]] | None, str]:
    """Which jobs an ``api`` pipeline with ``RETRY_BOT_CHILD_CONFIG`` would get, or why none.

    Uses the stand-in's CI planner (``standin.gitlab.ciconfig``: workflow:rules, rules, stages,
    the ``.pre``/``.post`` rule), on the merged YAML GitLab returned: the one place the product
    imports the stand-in besides ``retry-bot demo``, lazily, because that planner is our tested
    transcription of GitLab's pipeline rules and a second copy would drift from it.
    """
    from standin.gitlab.ciconfig import CiConfigError, PipelineFiltered, plan_pipeline

    scope = {"CI_PIPELINE_SOURCE": "api", "RETRY_BOT_CHILD_CONFIG": "e30=", "CI_COMMIT_BRANCH": branch,
             "CI_COMMIT_REF_NAME": branch, "CI_DEFAULT_BRANCH": branch, "CI_COMMIT_REF_PROTECTED": "true"}
    try:
        plan = plan_pipeline(merged_yaml, scope)
    except PipelineFiltered as exc:
        return None, str(exc)
    except CiConfigError as exc:
        if "does not exist" in str(exc):
            return None, str(exc)
        return None, f"unverified: {exc}"
    return [(j.name, j.stage) for j in plan.jobs], ""


def evaluate_project(f: ProjectFacts, needs: PolicyNeeds) -> list[Check]:
    """The verdicts for one project (pure)."""
    out: list[Check] = []
    p = f.path
    if f.error is not None:
        return [Check(p, "access", "fail", f.error, "give the bot's token access to the project (Developer or higher)")]
    writes = needs.retry or needs.resize
    level = f.access_level or 0
    if level < DEVELOPER:
        out.append(Check(p, "role", "fail" if writes else "warn",
                         f"the token's role gives access level {level}: retry, play and pipelines need Developer (30)",
                         "add the bot's user to the project as Developer (Maintainer to also read CI settings)"))
    else:
        out.append(Check(p, "role", "ok", f"access level {level}"))
    # protected branches: the default branch always matters; wildcards too
    if f.protected_error is not None:
        out.append(Check(p, "protected branches", "warn", f"cannot read protected branches: {f.protected_error}",
                         "give the token Developer or higher so it can read them"))
    for name, (push, merge, users) in sorted(f.protected.items()):
        allowed = (f.user_id is not None and f.user_id in users) or _level_ok(push, level) or _level_ok(merge, level)
        applies = "default branch" if fnmatch.fnmatchcase(f.default_branch, name) else "protected branch"
        if allowed:
            out.append(Check(p, f"protected {name}", "ok", f"{applies} {name}: the token may push or merge"))
        else:
            out.append(Check(p, f"protected {name}", "fail" if writes else "warn",
                             f"{applies} {name} is protected and the token may neither push nor merge to it: GitLab "
                             "refuses retry, play, jobRetry and the resize pipeline for jobs on it",
                             f"Settings > Repository > Protected branches > {name}: allow the bot's user (or "
                             "Developers + Maintainers) to merge or push"))
    if needs.resize:
        role = f.variables_min_role
        if role is None:
            out.append(Check(p, "pipeline variables", "warn" if level < MAINTAINER else "fail",
                             "ci_pipeline_variables_minimum_override_role is not visible to this token "
                             "(GitLab shows it to Maintainers)",
                             "ask a Maintainer to check Settings > CI/CD > Variables: the minimum role to use "
                             "pipeline variables must be the bot's role or lower"))
        elif _ROLE_LEVEL.get(role, 1000) > level:
            out.append(Check(p, "pipeline variables", "fail",
                             f"ci_pipeline_variables_minimum_override_role is {role}: the bot's resize pipeline "
                             "passes variables and would get 400 'Insufficient permissions to set pipeline variables'",
                             "Settings > CI/CD > Variables: set the minimum role to use pipeline variables to the "
                             "bot's role (Developer) or lower"))
        else:
            out.append(Check(p, "pipeline variables", "ok", f"minimum role {role}"))
        out += _template_checks(f)
    return out


def evaluate_webhook(f: ProjectFacts, path: str, public_url: str = "", *, groups: bool = False) -> list[Check]:
    """The verdicts on the project's webhook for the bot (pure).

    ``path`` is ``[webhook] path``; ``public_url`` the URL GitLab should post to (``""``:
    any hook URL ending with ``path`` matches); ``groups``: the bot watches groups, whose
    group hooks (not read here) may cover the project.
    """
    p = f.path
    what = "webhook"
    if f.hooks is None:
        if f.hooks_status == 403:
            return [Check(p, what, "warn", "cannot read the project's webhooks: GET /projects/:id/hooks needs the "
                          "Maintainer role (G project_hooks.rb, read_web_hook), and the bot's token is below it",
                          "check by hand in Settings > Webhooks (a hook to the bot's URL with Job events, a secret "
                          "token and SSL verification), or run doctor with a Maintainer token")]
        return [Check(p, what, "warn", f"cannot read the project's webhooks: {f.hooks_error}",
                      "check by hand in Settings > Webhooks")]
    want = public_url.rstrip("/")
    mine = [h for h in f.hooks if (str(h.get("url") or "").rstrip("/") == want if want
                                   else str(h.get("url") or "").split("?", 1)[0].rstrip("/").endswith(path.rstrip("/")))]
    add = (f"Settings > Webhooks > Add new webhook: URL {want or 'https://<the bot>' + path}, Secret token = the "
           "bot's webhook secret, trigger Job events, SSL verification on (or POST /projects/:id/hooks with "
           "url, token, job_events=true)")
    if not mine:
        others = ", ".join(str(h.get("url")) for h in f.hooks[:3]) or "none"
        if groups:
            return [Check(p, what, "warn", f"no project webhook points at the bot (project hooks: {others}); a group "
                          "webhook may cover it (not read: group hooks need the Owner role)",
                          f"check Group > Settings > Webhooks, or add a project hook: {add}")]
        return [Check(p, what, "fail", f"no webhook points at the bot (project hooks: {others}): its job events "
                      "never arrive, failures wait for the reconciliation poll", add)]
    out: list[Check] = []
    for h in mine:
        hid = f"hook {h.get('id')} ({h.get('url')})"
        status = str(h.get("alert_status") or "executable")
        if status != "executable":
            out.append(Check(p, what, "fail", f"{hid} is {status}: GitLab disabled it after failed deliveries "
                             "(G web_hooks/auto_disabling.rb)", "Settings > Webhooks: re-enable the hook, and check "
                             "the bot answers (its /healthz, `retry_bot_webhook_events_total`)"))
        if not h.get("job_events"):
            out.append(Check(p, what, "fail", f"{hid} has Job events off: no job event reaches the bot",
                             "Settings > Webhooks > edit the hook: tick Job events (or PUT .../hooks/:id "
                             "job_events=true)"))
        url = str(h.get("url") or "")
        if url.startswith("http://"):
            out.append(Check(p, what, "warn", f"{hid} is plain http: the secret token travels in clear",
                             "put a TLS-terminating proxy in front of the bot and use its https:// URL"))
        elif not h.get("enable_ssl_verification", True):
            out.append(Check(p, what, "warn", f"{hid} has SSL verification off: anyone on the path could pose as "
                             "the bot", "Settings > Webhooks > edit the hook: enable SSL verification"))
        out.append(Check(p, "webhook token", "warn", f"{hid}: GitLab never returns a hook's secret token, so doctor "
                         "cannot check that it is set and equals the bot's secret",
                         "Settings > Webhooks > Test > Job events: the bot answers 200; a 401 "
                         "(retry_bot_webhook_events_total{outcome=\"unauthorized\"}) means the token differs"))
        if not any(c.status != "ok" for c in out if c.what == what):
            out.insert(0, Check(p, what, "ok", f"{hid}: job events on, SSL verification on, enabled"))
    return out


def _template_checks(f: ProjectFacts) -> list[Check]:
    p = f.path
    if f.merged_yaml is None:
        return [Check(p, "CI template", "fail", f"could not read the CI configuration: {f.lint_error}",
                      "make .gitlab-ci.yml valid (CI/CD > Editor > Validate); no pipeline can be created from it")]
    import yaml

    try:
        doc = yaml.safe_load(f.merged_yaml) or {}
    except yaml.YAMLError as exc:
        return [Check(p, "CI template", "warn", f"merged_yaml is not readable: {exc}")]
    missing = [j for j in TEMPLATE_JOBS if j not in doc]
    if missing:
        return [Check(p, "CI template", "fail", f"the CI configuration has no {', '.join(missing)}: the bot's resize "
                      "pipeline would have no jobs", "include packaging/gitlab-ci/retry-bot.yml in .gitlab-ci.yml")]
    out = []
    script = " ".join(str(s) for s in (doc["retry-bot:generate"] or {}).get("script") or [])
    child = doc["retry-bot:child"] or {}
    if "base64 -d" not in script or child.get("stage", "test") in (".pre", ".post"):
        out.append(Check(p, "CI template", "fail", "the included template is an old version (configuration not "
                         "base64-decoded, or both jobs in .pre/.post): the copy would be corrupted by variable "
                         "expansion or the pipeline refused", "include the current packaging/gitlab-ci/retry-bot.yml"))
    else:
        out.append(Check(p, "CI template", "ok", "the current template is included"))
    jobs, why = _plan_bot_pipeline(f.merged_yaml, f.default_branch)
    if jobs is None and why.startswith("unverified"):
        out.append(Check(p, "bot pipeline", "warn", f"could not simulate the bot's pipeline ({why})",
                         "check by hand that an api pipeline with RETRY_BOT_CHILD_CONFIG runs the two template jobs"))
    elif jobs is None:
        fix = ("add `- if: $RETRY_BOT_CHILD_CONFIG` as the first entry of workflow:rules" if "workflow" in why
               else "make sure retry-bot:child's stage is in `stages:` and its rules match")
        out.append(Check(p, "bot pipeline", "fail", f"GitLab would refuse the bot's pipeline: {why}", fix))
    else:
        names = {n for n, _ in jobs}
        extra = sorted(names - set(TEMPLATE_JOBS))
        if set(TEMPLATE_JOBS) - names:
            out.append(Check(p, "bot pipeline", "fail", f"the bot's pipeline would lack "
                             f"{', '.join(sorted(set(TEMPLATE_JOBS) - names))} (rules or stages)",
                             "do not override the template jobs' rules; keep their stage in `stages:`"))
        elif extra:
            out.append(Check(p, "bot pipeline", "warn", f"your jobs {', '.join(extra[:5])} would also run in the bot's "
                             "pipeline", "make `- !reference [.retry-bot:skip, rules]` the first rule of each job"))
        else:
            out.append(Check(p, "bot pipeline", "ok", "an api pipeline with RETRY_BOT_CHILD_CONFIG runs only "
                             + " and ".join(f"{n} ({s})" for n, s in jobs)))
    return out


# --------------------------------------------------------------------------- the edge


def gather(client: GitLabClient, project: str, user_id: int | None, *, hooks: bool = False) -> ProjectFacts:
    """Read one project's facts through :class:`~retry_bot.gitlab.client.GitLabClient` (``hooks``: its webhooks too)."""
    from retry_bot.gitlab.client import GitLabApiError

    try:
        pj = client.get_project(project)
    except GitLabApiError as exc:
        return ProjectFacts(project, error=f"cannot read the project: {exc}")
    perms = pj.get("permissions") or {}
    levels = [int((perms.get(k) or {}).get("access_level") or 0) for k in ("project_access", "group_access")]
    path = str(pj.get("path_with_namespace") or project)
    protected: dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = {}
    try:
        rows = client.gl.http_get(f"/projects/{pj['id']}/protected_branches")
        for r in rows or []:
            def lv(kind: str) -> tuple[int, ...]:
                return tuple(int(a.get("access_level") or 0) for a in r.get(kind) or () if not a.get("user_id"))
            users = tuple(int(a["user_id"]) for a in
                          (r.get("push_access_levels") or []) + (r.get("merge_access_levels") or []) if a.get("user_id"))
            protected[str(r["name"])] = (lv("push_access_levels"), lv("merge_access_levels"), users)
    except Exception as exc:  # noqa: BLE001 - reported as a check, never a traceback
        protected_error = str(exc)
    else:
        protected_error = None
    merged, lint_error = None, None
    try:
        merged = client.merged_ci_yaml(pj["id"], str(pj.get("default_branch") or "main"))
    except GitLabApiError as exc:
        lint_error = str(exc)
    hook_rows: tuple[Mapping[str, Any], ...] | None = None
    hooks_error: str | None = None
    hooks_status: int | None = None
    if hooks:
        try:
            hook_rows = tuple(client.gl.http_list(f"/projects/{pj['id']}/hooks", get_all=True))
        except Exception as exc:  # noqa: BLE001 - reported as a check, never a traceback
            hooks_status = getattr(exc, "response_code", None)
            hooks_error = str(exc)
    return ProjectFacts(path, access_level=max(levels), user_id=user_id,
                        default_branch=str(pj.get("default_branch") or "main"), protected=protected,
                        variables_min_role=pj.get("ci_pipeline_variables_minimum_override_role"),
                        merged_yaml=merged, lint_error=lint_error, protected_error=protected_error,
                        hooks=hook_rows, hooks_error=hooks_error, hooks_status=hooks_status)


def run_doctor(config: BotConfig, policy: Policy, client: GitLabClient) -> list[Check]:
    """Every check for one bot configuration."""
    from retry_bot.gitlab.client import GitLabApiError

    needs = needs_of(policy)
    try:
        version = client.version()
    except GitLabApiError as exc:
        return [Check("gitlab", "connection", "fail", f"cannot read GitLab's version: {exc}",
                      "check [gitlab] url and the token (token_env / token_file)")]
    try:
        scopes = list(client.gl.http_get("/personal_access_tokens/self").get("scopes") or [])
    except Exception:  # noqa: BLE001 - older GitLab, or a token type without it
        scopes = None
    checks = evaluate_gitlab(version, scopes, needs)
    try:
        user_id: int | None = int(client.current_user()["id"])
    except (GitLabApiError, KeyError, TypeError, ValueError):
        user_id = None
    projects = list(config.poll.projects)
    for g in config.poll.groups:
        try:
            projects += [str(p["path_with_namespace"]) for p in client.group_projects(g)]
        except GitLabApiError as exc:
            checks.append(Check(g, "group", "fail", f"cannot list the group's projects: {exc}",
                                "give the token access to the group"))
    wh = getattr(config, "webhook", None)
    hooks = bool(wh is not None and wh.enabled)
    for project in dict.fromkeys(projects):
        facts = gather(client, project, user_id, hooks=hooks)
        checks += evaluate_project(facts, needs)
        if hooks and facts.error is None:
            checks += evaluate_webhook(facts, wh.path, wh.public_url, groups=bool(config.poll.groups))
    return checks


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("doctor", help="check that GitLab lets the bot do what its policy needs",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=None, help="bot.toml (default: config/bot.toml)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from retry_bot.live.config import DEFAULT_CONFIG_PATH, ConfigError, load_config
    from retry_bot.gitlab.client import GitLabClient
    from retry_bot.policy import default_policy, load_policy

    try:
        cfg = load_config(args.config or DEFAULT_CONFIG_PATH, require_secrets=False)
        policy = load_policy(cfg.policy_path) if cfg.policy_path else default_policy()
    except ConfigError as exc:
        print(f"retry-bot doctor: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a policy error is reported, never a traceback
        print(f"retry-bot doctor: cannot load the policy: {exc}", file=sys.stderr)
        return 2
    g = cfg.gitlab
    client = GitLabClient(g.url, g.token, retry=g.retry_settings())
    try:
        checks = run_doctor(cfg, policy, client)
    finally:
        client.close()
    failed = any(c.status == "fail" for c in checks)
    if args.format == "json":
        print(json.dumps({"ok": not failed, "checks": [asdict(c) for c in checks]}, indent=2))
    else:
        for c in checks:
            print(f"{c.status.upper():4}  {c.scope}: {c.what}: {c.detail}")
            if c.fix and c.status != "ok":
                print(f"      fix: {c.fix}")
        print("everything the policy needs is possible" if not failed else
              "some things the policy needs will fail (FAIL above)")
    return 1 if failed else 0
