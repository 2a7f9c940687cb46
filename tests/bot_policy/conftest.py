"""Fixtures for the policy and decision tests (builders live in helpers.py)."""

import pytest

from tests.bot_policy.helpers import LADDER, policy


@pytest.fixture
def ladder_policy():
    """Three classes: small (8Gi), large (64Gi, requests up to 48Gi), huge (256Gi, expensive, capped)."""
    return policy(LADDER)
