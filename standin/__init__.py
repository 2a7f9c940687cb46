"""Stand-ins for the real systems the product talks to, for the demo and the tests.

* :mod:`standin.gitlab`: a stateful GitLab served over real HTTP (REST, GraphQL, CI
  configuration, webhooks), so python-gitlab and the bot run unmodified against it.
* :mod:`standin.runner`: an emulation of gitlab-runner driving a custom executor, stage by
  stage, with the runner's own variable expansion.
* :mod:`standin.demo`: ``retry-bot demo``, the quickstart that wires the two to the product.

It ships in the wheel because ``retry-bot demo`` is the quickstart.  The product imports it only
in ``retry-bot demo`` and, lazily, in ``retry-bot doctor`` (whose dry plan of the bot's pipeline
runs this stand-in's planner, the test oracle of GitLab's pipeline rules).  What both need of
GitLab's CI syntax lives in the product (``retry_bot.gitlab.cisyntax``, ``retry_bot.gitlab.expressions``)
and the stand-in imports it.  Every rule here names its source in GitLab or GitLab Runner, and
``docs/standin.md`` lists where it is more permissive than the real thing.
"""
