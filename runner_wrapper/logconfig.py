"""structlog, configured once for both programs.

Human-readable key=value lines on a terminal; JSON lines when stderr is not a
TTY or when ``--log-format json`` is given.  Logs always go to **stderr**:
stdout of ``runner-wrapper executor config`` is JSON that GitLab Runner parses,
and stdout of ``run`` is the job log.

Secrets never reach logs: any event key that looks like a credential
(``token``, ``password``, ``secret``, ``key``, ``authorization``...) is
replaced by ``"***"`` before rendering, and so is any string value that
contains a registered secret (see :func:`register_secret`).  Credentials inside
URLs (``https://user:token@host``, ``?password=...``) are masked in every string
value by :func:`redact_url`, the one helper for URLs in logs and messages.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any, MutableMapping

__all__ = ["configure_logging", "get_logger", "register_secret", "redact", "redact_url"]

_SECRET_KEY_RE = re.compile(r"(token|password|passwd|secret|authorization|signing_key|private_key|api_key)", re.I)
_secrets: set[str] = set()
_configured = False


def register_secret(value: str | bytes | None) -> None:
    """Never print this value: it is masked wherever it appears in a log event."""
    if not value:
        return
    s = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    if len(s) >= 4:
        _secrets.add(s)


def redact(value: Any) -> Any:
    """Mask registered secrets inside a string (other types are returned unchanged)."""
    if isinstance(value, str) and _secrets:
        for s in _secrets:
            if s in value:
                value = value.replace(s, "***")
    return value


#: ``scheme://userinfo@``: the userinfo of any URL inside a string (RFC 3986 section 3.2.1).
_URL_USERINFO_RE = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)([^/?#@\s]*)@")
_URL_PASSWORD_RE = re.compile(r"([?&]password=)[^&#\s]*", re.I)


def redact_url(text: str) -> str:
    """``text`` with the credentials of every URL in it masked (safe for logs and messages).

    ``user:secret@`` keeps the user name (``oauth2``, ``gitlab-ci-token``, a database
    role) and masks the password; a user name alone is masked too (GitLab accepts a
    token as the user of an HTTPS URL), except in ``postgres(ql)://`` URLs, where it is
    the role; a ``password=`` query parameter (libpq) is masked.

    >>> redact_url("https://oauth2:glpat-abc@gitlab.example.com/api")
    'https://oauth2:***@gitlab.example.com/api'
    >>> redact_url("see https://glpat-abc@gitlab.example.com and postgresql://bot@db/rs?password=x")
    'see https://***@gitlab.example.com and postgresql://bot@db/rs?password=***'
    """
    if not isinstance(text, str) or ("@" not in text and "password" not in text.lower()):
        return text

    def userinfo(m: re.Match[str]) -> str:
        scheme, info = m.group(1), m.group(2)
        user, colon, _ = info.partition(":")
        if colon:
            return f"{scheme}{user}:***@"
        if scheme.lower().startswith("postgres"):
            return m.group(0)
        return f"{scheme}***@"

    text = _URL_USERINFO_RE.sub(userinfo, text)
    return _URL_PASSWORD_RE.sub(r"\1***", text)


def _redact_processor(_logger: Any, _name: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for k in list(event_dict):
        if _SECRET_KEY_RE.search(k) and event_dict[k] not in (None, "", False):
            event_dict[k] = "***"
        else:
            event_dict[k] = redact_url(redact(event_dict[k]))
    return event_dict


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is *now* (it may be replaced after configuration)."""

    def write(self, s: str) -> int:
        return sys.stderr.write(s)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return bool(getattr(sys.stderr, "isatty", lambda: False)())


def configure_logging(fmt: str = "auto", level: str = "info", stream: Any = None) -> None:
    """Configure structlog.  ``fmt``: ``auto`` (console on a TTY, else JSON), ``console`` or ``json``.

    ``stream`` defaults to the process's current ``sys.stderr``, looked up at each write.
    """
    global _configured
    import structlog

    stream = stream or _CurrentStderr()
    if fmt not in ("auto", "console", "json"):
        raise ValueError(f"unknown log format {fmt!r} (auto, console or json)")
    if fmt == "auto":
        fmt = "console" if getattr(stream, "isatty", lambda: False)() else "json"
    lvl = logging.getLevelName(level.upper())
    if not isinstance(lvl, int):
        raise ValueError(f"unknown log level {level!r}")
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _redact_processor,
        structlog.processors.format_exc_info if fmt == "json" else structlog.dev.set_exc_info,
    ]
    if fmt == "json":
        processors.append(structlog.processors.JSONRenderer(sort_keys=False))
    else:
        processors.append(structlog.dev.ConsoleRenderer(colors=False))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    _configured = True


def get_logger(name: str | None = None, **initial: Any) -> Any:
    """A bound structlog logger; configures a default (``auto``) setup on first use."""
    import structlog

    if not _configured:
        configure_logging()
    log = structlog.get_logger(name) if name else structlog.get_logger()
    return log.bind(**initial) if initial else log
