"""The bot's own configuration, ``config/bot.toml``.

Which GitLab, which projects, how often, where the state and the policy live,
where signing keys come from.  Secrets (the GitLab token, signing keys) are
never written in the file itself: they come from an environment variable or a
file, are registered with :func:`runner_wrapper.logconfig.register_secret`,
and never appear in ``repr()`` or logs.

:func:`load_config` reports every problem at once as a
:class:`~retry_bot.problems.ConfigError` with key paths and line numbers.
"""

from __future__ import annotations

import os
import socket
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from retry_bot.problems import ConfigError, Problem, find_line, number_problem
from runner_wrapper.logconfig import get_logger, register_secret

if TYPE_CHECKING:
    from retry_bot.gitlab.client import RetrySettings

log = get_logger("retry_bot.config")

__all__ = ["BotConfig", "GitLabSettings", "PollSettings", "GeneratedSource", "load_config",
           "parse_config", "DEFAULT_CONFIG_PATH"]

DEFAULT_CONFIG_PATH = "config/bot.toml"


@dataclass(frozen=True)
class GitLabSettings:
    url: str
    token: str | None = field(default=None, repr=False)
    token_source: str = ""
    request_timeout_seconds: float = 30.0
    max_attempts: int = 5
    max_wait_seconds: float = 60.0
    max_total_seconds: float = 120.0
    #: The bot's own budget of API requests per minute (0: none; GitLab's RateLimit-* headers still pace).
    max_requests_per_minute: int = 0

    def retry_settings(self) -> RetrySettings:
        """The client's retry bounds from ``[gitlab]`` (the one place they are carried over)."""
        from retry_bot.gitlab.client import RetrySettings

        return RetrySettings(max_attempts=self.max_attempts, max_total_seconds=self.max_total_seconds,
                             max_wait_seconds=self.max_wait_seconds,
                             request_timeout_seconds=self.request_timeout_seconds)


@dataclass(frozen=True)
class WebhookSettings:
    """``[webhook]``: GitLab job events as a faster trigger than polling (off by default)."""

    enabled: bool = False
    #: URL path the receiver answers on (served by the bot's ``[http] listen`` server).
    path: str = "/v1/gitlab/job-events"
    #: The secret GitLab sends as ``X-Gitlab-Token`` (from ``secret_env`` or ``secret_file``).
    secret: str | None = field(default=None, repr=False)
    secret_source: str = ""
    max_body_bytes: int = 256 * 1024
    #: Job ids waiting to be decided at most; beyond it an event is dropped (polling finds the job).
    queue_size: int = 10000
    #: With webhooks on, the full poll (the reconciliation safety net) runs this often.
    reconcile_interval_seconds: float = 900.0
    #: The URL GitLab posts to (behind a proxy it differs from ``[http] listen``); ``retry-bot doctor``
    #: checks that each project's hook points at it ("": hooks are matched by ``path`` only).
    public_url: str = ""


@dataclass(frozen=True)
class PollSettings:
    projects: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    interval_seconds: float = 60.0
    #: Jobs created longer ago than this are never looked at (mechanics §5).
    lookback_seconds: float = 26 * 3600.0
    per_page: int = 100
    #: At most this many new failed jobs are decided per cycle, shared fairly across projects.
    max_jobs_per_cycle: int = 500
    #: Jobs the bot created are followed until they finish, or for this long at most.
    follow_max_age_seconds: float = 7 * 86400.0
    #: GitLab reads in flight at once while deciding.
    read_concurrency: int = 8
    #: GitLab writes in flight at once (two of one job lineage never run at once).
    write_concurrency: int = 4
    #: Re-list the projects of configured groups every N cycles.
    group_refresh_cycles: int = 30
    trace_tail_bytes: int = 256 * 1024


@dataclass(frozen=True)
class GeneratedSource:
    generator_job: str
    artifact_path: str


@dataclass(frozen=True)
class BotConfig:
    gitlab: GitLabSettings
    poll: PollSettings = PollSettings()
    policy_path: str | None = None
    taxonomy_paths: tuple[str, ...] = ()
    state_url: str = "sqlite:///var/lib/retry-bot/state.db"
    dry_run: bool = False
    listen: str = ""
    #: Bearer tokens accepted by ``POST /v1/usage`` (from ``[http] usage_token_env``).
    usage_tokens: tuple[str, ...] = field(default=(), repr=False)
    signing_keys: Mapping[str, bytes] = field(default_factory=dict, repr=False)
    leader_enabled: bool = True
    leader_lease_seconds: float = 30.0
    leader_holder: str = ""
    generated: tuple[GeneratedSource, ...] = ()
    source: str = ""
    #: ``/healthz`` answers 503 after this many failed poll cycles in a row.
    unhealthy_after_failed_cycles: int = 3
    webhook: WebhookSettings = WebhookSettings()


#: The collector/usage bearer token's environment variable (the runner wrapper's name too).
USAGE_TOKEN_ENV = "RIGHTSIZER_COLLECTOR_TOKEN"
#: Its old name, still read (with a warning) when the new one is unset.
DEPRECATED_USAGE_TOKEN_ENV = "RETRY_BOT_USAGE_TOKEN"


def _state_url_problem(url: str) -> str | None:
    """Why ``url`` is not a usable state URL (syntax only: nothing is opened), or ``None``."""
    hint = "use sqlite:////ABSOLUTE/PATH.db or postgresql://USER@HOST:PORT/DB"
    if not url.strip():
        return f"is empty: {hint}"
    if url.startswith(("postgresql://", "postgres://")):
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises on a bad port
        except ValueError as exc:
            return f"is not a valid PostgreSQL URL ({exc}): {hint}"
        if not parts.hostname and "host=" not in parts.query:
            return f"names no PostgreSQL host: {hint}"
        return None
    if url.startswith("sqlite:"):
        rest = url[len("sqlite:"):].lstrip("/").split("?", 1)[0]
        if not rest:
            return f"names no database file: {hint}"
        return None
    if "://" in url:
        from retry_bot.state.backends import redact_url

        return f"unsupported scheme in {redact_url(url)!r}: {hint}"
    return None


def _read_secret(base: Path, env: Mapping[str, str], file: str, env_name: str) -> tuple[str | None, str, str | None]:
    """A secret from ``file`` (relative to ``base``) or else the variable ``env_name``:
    ``(secret or None, where it came from, problem or None)``; registered with the log redactor."""
    secret: str | None = None
    problem: str | None = None
    if file:
        path = _resolve(base, file)
        source = f"file {path}"
        try:
            secret = Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            problem = f"cannot read {path}: {exc.strerror or exc}"
    elif env_name and env.get(env_name):
        secret, source = env[env_name].strip(), f"environment variable {env_name}"
    else:
        source = f"environment variable {env_name} (unset)"
    register_secret(secret)
    return secret or None, source, problem


def _resolve(base: Path, p: str) -> str:
    q = Path(os.path.expanduser(p))
    return str(q if q.is_absolute() else (base / q))


def load_config(path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None,
                require_secrets: bool = True) -> BotConfig:
    """Read and validate ``bot.toml``; relative paths are resolved against its directory.

    ``require_secrets=False`` (e.g. ``retry-bot history``) does not fail on a
    signing key that cannot be read.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([Problem("", f"cannot read {p}: {exc.strerror or exc}", source=str(p))]) from exc
    return parse_config(text, source=str(p), base=p.parent, env=env, require_secrets=require_secrets)


def parse_config(text: str, *, source: str = "<bot.toml>", base: Path | None = None,
                 env: Mapping[str, str] | None = None, require_secrets: bool = True) -> BotConfig:
    """Parse ``bot.toml`` text.  ``env`` defaults to ``os.environ``."""
    env = os.environ if env is None else env
    base = base or Path(".")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([Problem("", f"not valid TOML: {exc}", source=source)]) from exc
    problems: list[Problem] = []

    def bad(path: str, msg: str) -> None:
        problems.append(Problem(path, msg, line=find_line(text, path), source=source))

    def table(name: str) -> dict[str, Any]:
        v = data.get(name, {})
        if not isinstance(v, dict):
            bad(name, "must be a table")
            return {}
        return v

    known_tables = {"gitlab", "poll", "bot", "http", "signing", "leader", "jobdef", "webhook"}
    for k in data:
        if k not in known_tables:
            bad(k, f"unknown section (known: {', '.join(sorted(known_tables))})")

    def get(tbl: dict[str, Any], prefix: str, key: str, typ: type | tuple[type, ...], default: Any,
            *, minimum: float | None = None) -> Any:
        if key not in tbl:
            return default
        v = tbl[key]
        if typ in (int, (int, float)):  # numbers: the policy's check (no bool, nan or inf)
            problem = number_problem(v, integer=typ is int, low=minimum)
            if problem:
                bad(f"{prefix}.{key}", problem)
                return default
            return v
        ok = isinstance(v, typ) and not (isinstance(v, bool) and bool not in (typ if isinstance(typ, tuple) else (typ,)))
        if not ok:
            tn = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
            bad(f"{prefix}.{key}", f"must be {tn}, got {v!r}")
            return default
        return v

    def check_keys(tbl: dict[str, Any], prefix: str, allowed: set[str]) -> None:
        for k in tbl:
            if k not in allowed:
                bad(f"{prefix}.{k}", f"unknown key (known: {', '.join(sorted(allowed))})")

    # [gitlab]
    g = table("gitlab")
    check_keys(g, "gitlab", {"url", "token_env", "token_file", "request_timeout_seconds", "max_attempts",
                             "max_wait_seconds", "max_total_seconds", "token", "max_requests_per_minute"})
    url = get(g, "gitlab", "url", str, "")
    if not url:
        bad("gitlab.url", "is required (e.g. https://gitlab.example.com)")
    elif not url.startswith(("http://", "https://")):
        bad("gitlab.url", f"must start with http:// or https://, got {url!r}")
    if "token" in g:
        bad("gitlab.token", "never put the token in the file: use token_env or token_file")
    token_env = get(g, "gitlab", "token_env", str, "RETRY_BOT_GITLAB_TOKEN")
    token_file = get(g, "gitlab", "token_file", str, "")
    token, token_source, problem = _read_secret(base, env, token_file, token_env)
    if problem:
        bad("gitlab.token_file", problem)
    gd = GitLabSettings(url="")  # the defaults, written once (in the dataclass)
    gs = GitLabSettings(
        url=url.rstrip("/") if url else "",
        token=token or None,
        token_source=token_source,
        request_timeout_seconds=float(get(g, "gitlab", "request_timeout_seconds", (int, float),
                                          gd.request_timeout_seconds, minimum=0.1)),
        max_attempts=int(get(g, "gitlab", "max_attempts", int, gd.max_attempts, minimum=1)),
        max_wait_seconds=float(get(g, "gitlab", "max_wait_seconds", (int, float), gd.max_wait_seconds, minimum=0)),
        max_total_seconds=float(get(g, "gitlab", "max_total_seconds", (int, float), gd.max_total_seconds, minimum=0)),
        max_requests_per_minute=int(get(g, "gitlab", "max_requests_per_minute", int, gd.max_requests_per_minute,
                                        minimum=0)),
    )

    # [poll]
    pl = table("poll")
    check_keys(pl, "poll", {"projects", "groups", "interval_seconds", "lookback_hours", "per_page",
                            "max_jobs_per_cycle", "group_refresh_cycles", "trace_tail_kib", "follow_max_age_hours",
                            "read_concurrency", "write_concurrency"})
    projects = get(pl, "poll", "projects", list, [])
    groups = get(pl, "poll", "groups", list, [])
    for i, pr in enumerate(projects):
        if not isinstance(pr, (str, int)) or isinstance(pr, bool) or (isinstance(pr, str) and not pr.strip()):
            bad(f"poll.projects[{i}]", f"must be a project path or id, got {pr!r}")
    for i, gr in enumerate(groups):
        if not isinstance(gr, (str, int)) or isinstance(gr, bool):
            bad(f"poll.groups[{i}]", f"must be a group path or id, got {gr!r}")
    if not projects and not groups:
        bad("poll.projects", "configure at least one project or group to watch")
    per_page = int(get(pl, "poll", "per_page", int, 100, minimum=1))
    if per_page > 100:
        bad("poll.per_page", "GitLab allows at most 100")
    ps = PollSettings(
        projects=tuple(str(x) for x in projects if isinstance(x, (str, int))),
        groups=tuple(str(x) for x in groups if isinstance(x, (str, int))),
        interval_seconds=float(get(pl, "poll", "interval_seconds", (int, float), 60.0, minimum=0.05)),
        lookback_seconds=float(get(pl, "poll", "lookback_hours", (int, float), 26.0, minimum=0.001)) * 3600,
        per_page=min(per_page, 100),
        max_jobs_per_cycle=int(get(pl, "poll", "max_jobs_per_cycle", int, 500, minimum=1)),
        read_concurrency=int(get(pl, "poll", "read_concurrency", int, 8, minimum=1)),
        write_concurrency=int(get(pl, "poll", "write_concurrency", int, 4, minimum=1)),
        follow_max_age_seconds=float(get(pl, "poll", "follow_max_age_hours", (int, float), 168.0, minimum=1.0)) * 3600,
        group_refresh_cycles=int(get(pl, "poll", "group_refresh_cycles", int, 30, minimum=1)),
        trace_tail_bytes=int(get(pl, "poll", "trace_tail_kib", int, 256, minimum=1)) * 1024,
    )

    # [bot]
    b = table("bot")
    check_keys(b, "bot", {"policy", "taxonomy", "state_url", "dry_run"})
    policy = get(b, "bot", "policy", str, "")
    taxonomy = get(b, "bot", "taxonomy", list, [])
    for i, t in enumerate(taxonomy):
        if not isinstance(t, str):
            bad(f"bot.taxonomy[{i}]", "must be a file path")
    state_url = get(b, "bot", "state_url", str, "sqlite:///var/lib/retry-bot/state.db")
    if state_url.startswith("sqlite:///") and not state_url.startswith("sqlite:////"):
        rel = state_url[len("sqlite:///"):]
        if rel and not rel.startswith("/") and rel != ":memory:":
            state_url = "sqlite:///" + _resolve(base, rel)
    dry_run = bool(get(b, "bot", "dry_run", bool, False))
    state_problem = _state_url_problem(state_url)
    if state_problem:
        bad("bot.state_url", state_problem)
    if policy and require_secrets:
        pp = Path(_resolve(base, policy))
        if not pp.is_file():
            bad("bot.policy", f"policy file {pp} does not exist (or is not a file)")
        else:
            try:
                from retry_bot.policy import load_policy

                load_policy(str(pp))
            except ConfigError as exc:
                for pr in exc.problems:
                    bad("bot.policy", f"{pp}: {pr}")
            except OSError as exc:
                bad("bot.policy", f"cannot read {pp}: {exc.strerror or exc}")

    # [http]
    h = table("http")
    check_keys(h, "http", {"listen", "usage_token_env", "unhealthy_after_failed_cycles"})
    listen = get(h, "http", "listen", str, "")
    usage_env = get(h, "http", "usage_token_env", str, USAGE_TOKEN_ENV)
    usage_value = env.get(usage_env, "") if usage_env else ""
    if not usage_value and usage_env == USAGE_TOKEN_ENV and env.get(DEPRECATED_USAGE_TOKEN_ENV):
        usage_value = env[DEPRECATED_USAGE_TOKEN_ENV]
        log.warning("deprecated_setting", variable=DEPRECATED_USAGE_TOKEN_ENV, use_instead=USAGE_TOKEN_ENV,
                    note="the collector token is read from the old name; rename the environment variable "
                         "(the runner wrapper uses the new one)")
    usage_tokens = tuple(t.strip() for t in usage_value.split(",") if t.strip())
    unhealthy_after = int(get(h, "http", "unhealthy_after_failed_cycles", int, 3, minimum=1))
    for t in usage_tokens:
        register_secret(t)
    if listen:
        from retry_bot.httpserver import ListenError, parse_listen

        try:
            parse_listen(listen)
        except ListenError as exc:
            bad("http.listen", str(exc))

    # [webhook]
    wh = table("webhook")
    check_keys(wh, "webhook", {"enabled", "path", "secret_env", "secret_file", "max_body_kib", "queue_size",
                               "reconcile_interval_seconds", "public_url"})
    wh_enabled = bool(get(wh, "webhook", "enabled", bool, False))
    wh_path = get(wh, "webhook", "path", str, WebhookSettings.path)
    if not wh_path.startswith("/") or wh_path in ("/metrics", "/healthz", "/v1/allocation", "/v1/usage"):
        bad("webhook.path", f"must be a URL path starting with / and not one of the bot's other endpoints, "
                            f"got {wh_path!r}")
    wh_env = get(wh, "webhook", "secret_env", str, "RETRY_BOT_WEBHOOK_SECRET")
    wh_file = get(wh, "webhook", "secret_file", str, "")
    wh_secret, wh_source, problem = _read_secret(base, env, wh_file, wh_env)
    if problem and wh_enabled:
        bad("webhook.secret_file", problem)
    if wh_enabled and not wh_secret and require_secrets:
        bad("webhook.secret_env", f"webhooks are enabled but the secret is missing: set {wh_source.split(' (')[0]}"
                                  " (the Secret token of the GitLab webhook), or secret_file")
    if wh_enabled and not listen:
        bad("webhook.enabled", "webhooks need the bot's HTTP server: set [http] listen")
    wh_public = get(wh, "webhook", "public_url", str, "")
    if wh_public and not wh_public.startswith(("http://", "https://")):
        bad("webhook.public_url", f"must be the URL GitLab posts to (http:// or https://...{wh_path}), "
                                  f"got {wh_public!r}")
    whs = WebhookSettings(
        enabled=wh_enabled, path=wh_path, secret=wh_secret or None, secret_source=wh_source,
        max_body_bytes=int(get(wh, "webhook", "max_body_kib", int, 256, minimum=1)) * 1024,
        queue_size=int(get(wh, "webhook", "queue_size", int, 10000, minimum=1)),
        reconcile_interval_seconds=float(get(wh, "webhook", "reconcile_interval_seconds", (int, float), 900.0,
                                             minimum=0.05)),
        public_url=wh_public,
    )

    # [signing]
    s = table("signing")
    check_keys(s, "signing", {"keys"})
    keys: dict[str, bytes] = {}
    klist = get(s, "signing", "keys", list, [])
    for i, k in enumerate(klist):
        kp = f"signing.keys[{i}]"
        if not isinstance(k, dict):
            bad(kp, "must be a table with id and env or file")
            continue
        kid = k.get("id")
        if not isinstance(kid, str) or not kid:
            bad(f"{kp}.id", "is required")
            continue
        if "env" in k:
            val = env.get(str(k["env"]))
            if val:
                keys[kid] = val.encode("utf-8")
            elif require_secrets:
                bad(f"{kp}.env", f"environment variable {k['env']} is not set")
        elif "file" in k:
            kf = _resolve(base, str(k["file"]))
            try:
                keys[kid] = Path(kf).read_bytes().strip()
            except OSError as exc:
                if require_secrets:
                    bad(f"{kp}.file", f"cannot read {kf}: {exc.strerror or exc}")
        else:
            bad(kp, "needs env or file (the key itself never goes in this file)")
        if kid in keys:
            register_secret(keys[kid])

    # [leader]
    ld = table("leader")
    check_keys(ld, "leader", {"enabled", "lease_seconds", "holder"})
    holder = get(ld, "leader", "holder", str, "") or f"{socket.gethostname()}:{os.getpid()}"

    # [[jobdef.generated]]
    jd = table("jobdef")
    check_keys(jd, "jobdef", {"generated"})
    gen: list[GeneratedSource] = []
    for i, e in enumerate(get(jd, "jobdef", "generated", list, [])):
        if not isinstance(e, dict) or not isinstance(e.get("job"), str) or not isinstance(e.get("artifact"), str):
            bad(f"jobdef.generated[{i}]", "needs job (generator job name) and artifact (path) strings")
            continue
        gen.append(GeneratedSource(e["job"], e["artifact"]))

    if problems:
        raise ConfigError(problems)
    return BotConfig(
        gitlab=gs,
        poll=ps,
        policy_path=_resolve(base, policy) if policy else None,
        taxonomy_paths=tuple(_resolve(base, t) for t in taxonomy if isinstance(t, str)),
        state_url=state_url,
        dry_run=dry_run,
        listen=listen,
        usage_tokens=usage_tokens,
        signing_keys=keys,
        leader_enabled=bool(get(ld, "leader", "enabled", bool, True)),
        leader_lease_seconds=float(get(ld, "leader", "lease_seconds", (int, float), 30.0, minimum=1)),
        leader_holder=holder,
        generated=tuple(gen),
        source=source,
        unhealthy_after_failed_cycles=unhealthy_after,
        webhook=whs,
    )
