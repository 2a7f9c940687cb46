"""retry-bot: classify failed GitLab CI jobs and retry only what is worth retrying.

Layout (a pure core and thin edges):

- :mod:`retry_bot.model`: plain data shared by every layer (job facts, families);
- :mod:`retry_bot.classify`: failure taxonomy and classifier (pure);
- :mod:`retry_bot.policy`: admin TOML policies, validation (pure);
- :mod:`retry_bot.decide`: the decision function (pure);
- :mod:`retry_bot.predict`: usage history -> requests and limits (pure);
- :mod:`retry_bot.state`: durable state (SQLite / PostgreSQL edge);
- :mod:`retry_bot.gitlab`: GitLab access (python-gitlab edge) and the GitLab stand-in;
- :mod:`retry_bot.commands`: one module per ``retry-bot`` sub-command.
"""

__version__ = "0.1.0"
