"""structlog, configured once for both programs.

Human-readable key=value lines on a terminal; JSON lines when stderr is not a
TTY or when ``--log-format json`` is given.  Logs always go to **stderr**:
stdout of ``runner-wrapper executor config`` is JSON that GitLab Runner parses,
and stdout of ``run`` is the job log.

Secrets never reach logs: any event key that looks like a credential
(``token``, ``password``, ``secret``, ``key``, ``authorization``...) is
replaced by ``"***"`` before rendering, and so is any string value that
contains a registered secret (see :func:`register_secret`).
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any, MutableMapping

__all__ = ["configure_logging", "get_logger", "register_secret", "redact"]

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


def _redact_processor(_logger: Any, _name: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for k in list(event_dict):
        if _SECRET_KEY_RE.search(k) and event_dict[k] not in (None, "", False):
            event_dict[k] = "***"
        else:
            event_dict[k] = redact(event_dict[k])
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
