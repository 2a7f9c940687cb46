"""A stateful GitLab stand-in on loopback: the REST and GraphQL subset the retry bot uses.

python-gitlab (REST and ``gitlab.GraphQL``) talks to it unmodified over real
HTTP.  Tests and ``retry-bot demo`` drive the "runner side" through the Python
control API on :class:`StandIn` and inject faults through ``StandIn.faults``.
See ``docs/standin.md``.
"""

from standin.gitlab.ciconfig import CiConfigError, JobSpec, merged_yaml
from standin.gitlab.faults import Fault, FaultInjector, RateLimit
from standin.gitlab.payload import build_payload, collect_artifacts
from standin.gitlab.server import DEFAULT_TOKEN, Call, RunnerLoop, StandIn
from standin.gitlab.state import (
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
