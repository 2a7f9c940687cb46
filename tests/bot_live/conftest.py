"""Fixtures of the live-bot tests (the GitLab stand-in over real HTTP, see ``farm.py``)."""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.bot_live.farm import Farm


@pytest.fixture()
def farm() -> Iterator[Farm]:
    """A started GitLab stand-in with a runner loop and no projects, stopped after the test.

    Builds follow ``farm.behaviours`` (job name -> outcome; jobs without one succeed), which a
    test fills in, or a test module extends by overriding ``farm`` with a fixture of the same
    name that takes this one (see ``test_daemon_cli.py``).
    """
    f = Farm({})
    yield f
    f.close()
