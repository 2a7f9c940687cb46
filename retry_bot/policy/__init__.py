"""Admin-edited retry policies: schema, validation, the effective view, the resize arithmetic.

Typical use::

    from retry_bot.policy import load_policy, policy_to_dict
    policy = load_policy(Path("config/policy.toml"))   # ConfigError lists every problem
    rule = policy.resolve("oom", "oom", project_path="g/p", job_name="build")

The decision itself is :func:`retry_bot.decide.decide`.  The schema is
documented key by key in ``config/policy.toml`` (also shipped in this package
as ``default_policy.toml``) and ``docs/policy.md``.
"""

from retry_bot.policy.dump import policy_to_dict
from retry_bot.policy.load import (
    SCHEMA_VERSION,
    default_policy,
    default_policy_text,
    load_policy,
    parse_policy,
    policy_from_dict,
)
# The data model, whole: every name of its ``__all__`` (listed once, there).
from retry_bot.policy import model as _model
from retry_bot.policy.model import *  # noqa: F403
from retry_bot.policy.resize import (
    format_memory_within,
    memory_need,
    memory_used,
    resize_cpu,
    resize_memory,
    resize_timeout,
    round_up,
)
from retry_bot.policy.units import parse_duration

__all__ = [
    *_model.__all__, "SCHEMA_VERSION",
    "load_policy", "parse_policy", "policy_from_dict", "default_policy", "default_policy_text",
    "policy_to_dict", "resize_memory", "resize_cpu", "resize_timeout", "memory_used", "memory_need", "round_up",
    "format_memory_within", "parse_duration",
]
