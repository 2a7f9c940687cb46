"""The live bot: the daemon and the edges it drives.

* :mod:`~retry_bot.live.daemon`: the process (leadership, signals, the poll and due-time loops).
* :mod:`~retry_bot.live.poller`: finds failed jobs, gathers their facts, asks :func:`retry_bot.decide.decide`.
* :mod:`~retry_bot.live.actions`: sends the decided writes to GitLab exactly once.
* :mod:`~retry_bot.live.webhook`: the optional job-event receiver (it only enqueues).
* :mod:`~retry_bot.live.config`: ``bot.toml``.
* :mod:`~retry_bot.live.metrics`: the Prometheus metrics.

The decisions themselves are pure and live outside this package (``classify``, ``policy``,
``decide``, ``predict``).
"""
