"""The one configuration error of both programs: ``wrapper.toml``, and the bot's policy, taxonomy and bot config.

Shared with the bot (``retry_bot.problems`` re-exports it, with its ``Problem`` and ``find_line``),
as :mod:`runner_wrapper.quantity` is.  Imports nothing, so the wrapper's configuration path stays lean.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing here would cost the wrapper an import
    from typing import Any, Iterable

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """One or more problems in a configuration file; ``str()`` lists them all, one a line.

    ``problems`` keeps each problem as given: :class:`retry_bot.problems.Problem` (key path, message,
    line) from the bot's validators, one line of text from ``wrapper.toml``'s.  A single string is
    one problem.
    """

    def __init__(self, problems: str | Iterable[Any]) -> None:
        self.problems: list[Any] = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(str(p) for p in self.problems) or "invalid configuration")
