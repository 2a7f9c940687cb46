"""Fixtures: a fresh stand-in per test and python-gitlab clients pointed at it."""

from __future__ import annotations

from typing import Iterator

import gitlab
import pytest

from standin.gitlab import StandIn

# A project shaped like one that includes the retry bot's CI template: normal jobs do not run in
# a pipeline that carries RETRY_BOT_CHILD_YAML; the generator job writes it out as an artifact and
# a bridge turns it into a child pipeline (trigger: include: artifact).
APP_CONFIG = {
    "stages": ["build", "test", "retry-bot"],
    "variables": {"GLOBAL_VAR": "g"},
    ".normal": {"rules": [{"if": "$RETRY_BOT_CHILD_YAML", "when": "never"}, {"when": "on_success"}]},
    "compile": {"extends": ".normal", "stage": "build", "script": ["make -j8"], "tags": ["small"],
                "variables": {"KUBERNETES_MEMORY_LIMIT": "128Mi"}},
    "unit": {"extends": ".normal", "stage": "test", "script": ["make check"]},
    "deploy": {"stage": "test", "script": ["./deploy"], "when": "manual",
               "rules": [{"if": "$RETRY_BOT_CHILD_YAML", "when": "never"}, {"when": "manual", "allow_failure": True}]},
    "retry-bot-generate": {
        "stage": "build", "script": ['printf "%s" "$RETRY_BOT_CHILD_YAML" > retry-bot-child.yml'],
        "artifacts": {"paths": ["retry-bot-child.yml"]}, "rules": [{"if": "$RETRY_BOT_CHILD_YAML"}],
    },
    "retry-bot-child": {
        "stage": "retry-bot", "needs": ["retry-bot-generate"], "rules": [{"if": "$RETRY_BOT_CHILD_YAML"}],
        "trigger": {"include": [{"artifact": "retry-bot-child.yml", "job": "retry-bot-generate"}],
                    "strategy": "depend"},
    },
}

CHILD_YAML = """
compile-upgraded:
  stage: build
  script: [make -j8]
  tags: [large]
  when: manual
  variables:
    RETRY_BOT_ORIGIN_JOB_ID: "1000"
    KUBERNETES_MEMORY_LIMIT: 128Mi
"""


@pytest.fixture
def standin() -> Iterator[StandIn]:
    with StandIn(seed=1234) as server:
        server.add_project("team/app", APP_CONFIG)
        yield server


@pytest.fixture
def gl(standin: StandIn) -> gitlab.Gitlab:
    return gitlab.Gitlab(standin.url, private_token=standin.token, timeout=5)


@pytest.fixture
def gq(standin: StandIn) -> Iterator[gitlab.GraphQL]:
    with gitlab.GraphQL(standin.url, token=standin.token, timeout=5) as client:
        yield client


def run_first_pending(server: StandIn, status: str, **kwargs: object) -> int:
    """Pick the oldest pending job, as any runner would, and finish it; returns its id."""
    job = server.next_pending_job(["small", "large"], start=True)
    assert job is not None, "no pending job"
    server.finish_job(job.id, status, **kwargs)  # type: ignore[arg-type]
    return job.id
