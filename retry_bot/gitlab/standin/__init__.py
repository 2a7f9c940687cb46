"""A stateful GitLab stand-in on loopback: the REST and GraphQL subset the retry bot uses.

python-gitlab (REST and ``gitlab.GraphQL``) talks to it unmodified over real
HTTP.  Tests and ``retry-bot demo`` drive the "runner side" through the Python
control API on :class:`StandIn` and inject faults through ``StandIn.faults``.
See ``docs/standin.md``.
"""

from retry_bot.gitlab.standin.ciconfig import CiConfigError, JobSpec, merged_yaml
from retry_bot.gitlab.standin.faults import Fault, FaultInjector, RateLimit
from retry_bot.gitlab.standin.payload import build_payload, collect_artifacts
from retry_bot.gitlab.standin.server import DEFAULT_TOKEN, Call, RunnerLoop, StandIn
from retry_bot.gitlab.standin.state import (
    BadRequest,
    Forbidden,
    GitLabState,
    Job,
    NotFound,
    Pipeline,
    Project,
    StandInError,
    User,
)

__all__ = [
    "StandIn", "Call", "RunnerLoop", "DEFAULT_TOKEN",
    "Fault", "FaultInjector", "RateLimit",
    "GitLabState", "Job", "Pipeline", "Project", "User",
    "StandInError", "NotFound", "Forbidden", "BadRequest",
    "CiConfigError", "JobSpec", "merged_yaml",
    "build_payload", "collect_artifacts",
]
