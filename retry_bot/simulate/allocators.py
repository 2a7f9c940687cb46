"""The allocators the replay drives, and the live bot's decision path for retries.

:class:`Allocator` is the protocol :func:`retry_bot.simulate.replay.simulate` drives;
:class:`PredictorAllocator` is ours (:func:`retry_bot.predict.predict` for a first attempt,
every retry through :func:`retry_bot.decide.decide` by :class:`PolicyReplay`);
:func:`make_allocator` also builds the baselines of :mod:`retry_bot.simulate.baselines`.
"""

from __future__ import annotations

from typing import Protocol, Sequence

from retry_bot.decide import ClassUsage, decide
from retry_bot.model import Classification, Family, JobFacts, LineageAttempt
from retry_bot.policy.load import default_policy
from retry_bot.policy.model import Action, Policy
from retry_bot.predict.estimator import new_index, predict, resize_prediction
from retry_bot.predict.history import Observation
from retry_bot.predict.settings import DEFAULT_SETTINGS, PredictionSettings
from retry_bot.predict.sources import clamp_from_policy
from retry_bot.simulate.baselines import BASELINES, GantryAllocator, StaticAllocator, VpaAllocator
from retry_bot.simulate.trace import AttemptAlloc, TraceJob

__all__ = ["Allocator", "PolicyReplay", "PredictorAllocator", "make_allocator", "replay_from_policy", "BASELINES"]


class PolicyReplay:
    """The live bot's decision path for a replayed OOM kill: :func:`retry_bot.decide.decide`.

    Every retry of a killed attempt is decided by ``decide()`` with the policy's rule
    for the ``oom`` family (budget, ``max_attempts``), its resize rule (ratio,
    ``min_bump``, granularity, ``beyond_top``, ``last_attempt``), the runner-class
    ladder and the variable names, and the predictor's figure as
    ``predicted_memory_bytes`` (:func:`retry_bot.predict.estimator.resize_prediction`,
    as the live bot's ``HistoryPredictor``).  The predictor's caps are
    :func:`retry_bot.predict.sources.clamp_from_policy` (as ``serve`` and the live
    ``/v1/allocation``).

    What the replay cannot know is fixed: no concurrency in the runner classes (caps
    never bind), no backoff wait, the job's first attempt runs on the lowest class its
    limit fits (a right-sized pipeline's placement).
    """

    def __init__(self, policy: Policy | None = None):
        if policy is None:
            policy = default_policy()
        self.policy = policy
        self.clamp = clamp_from_policy(policy)

    @property
    def max_memory(self) -> int | None:
        """The largest memory any job may get (``resize.max_memory`` and the top of the ladder)."""
        v = self.clamp.max_memory_bytes
        return None if v is None else int(v)

    def start_class(self, limit: int | None) -> str | None:
        """The lowest runner class open to any job whose memory holds ``limit`` (else the top open one)."""
        open_ = [rc for rc in self.policy.runner_classes if not rc.placement_only and not rc.expensive]
        if not open_:
            return None
        for rc in open_:
            if limit is None or rc.max_memory >= limit:
                return rc.name
        return open_[-1].name

    def next_attempt(self, job: TraceJob, previous: Sequence[AttemptAlloc], classes: Sequence[str | None],
                     predicted: int | None) -> tuple[AttemptAlloc, str | None] | None:
        """``decide()`` on the last killed attempt: the next attempt and its runner class, or ``None``."""
        names = self.policy.variables
        lineage = [
            LineageAttempt(job_id=job.job_id * 100 + k, action="origin" if k == 0 else "resize",
                           family="oom", category="oom", memory_limit_bytes=p.memory_limit_bytes,
                           memory_request_bytes=int(p.memory_request_bytes),
                           # the cgroup's peak when the OOM killer fired is the limit (all the replay knows)
                           memory_peak_bytes=p.memory_limit_bytes, runner_class=classes[k])
            for k, p in enumerate(previous)
        ]
        last = previous[-1]
        variables = {}
        if names.memory_limit and last.memory_limit_bytes is not None:
            variables[names.memory_limit] = str(int(last.memory_limit_bytes))
        if names.memory_request:
            variables[names.memory_request] = str(int(last.memory_request_bytes))
        facts = JobFacts(job_id=lineage[-1].job_id, name=job.job_name, project_path=job.project, ref=job.ref,
                         failure_reason="script_failure", exit_code=137, variables=variables)
        verdict = Classification(category="oom", family=Family.OOM, rule="usage_record.oom_kill")
        d = decide(facts, verdict, lineage, self.policy, ClassUsage(), predicted_memory_bytes=predicted)
        if d.action != Action.RESIZE:
            return None
        limit = d.memory_limit_bytes if d.memory_limit_bytes is not None else d.memory_request_bytes
        if limit is None:  # pragma: no cover - a memory resize always sets one of them
            return None
        request = d.memory_request_bytes if d.memory_request_bytes is not None else last.memory_request_bytes
        return AttemptAlloc(int(min(request, limit)), int(limit), last.cpu_request_cores), d.runner_class


class Allocator(Protocol):
    """An online allocator: told about events in time order, asked for attempts."""

    name: str

    def observe_success(self, job: TraceJob, end: float) -> None: ...

    def observe_kill(self, job: TraceJob, limit: int, at: float) -> None: ...

    def first(self, job: TraceJob) -> AttemptAlloc: ...

    def retry(self, job: TraceJob, previous: Sequence[AttemptAlloc]) -> AttemptAlloc | None: ...


def _obs_success(job: TraceJob, end: float) -> Observation:
    return Observation(key=job.key, at=end, memory_peak_bytes=job.memory_peak_bytes,
                       memory_mean_bytes=job.memory_mean_bytes, cpu_mean_cores=job.cpu_mean_cores,
                       cpu_max_cores=job.cpu_max_cores, duration_s=job.duration_s, job_id=job.job_id,
                       ref=job.ref, static_memory_bytes=job.static.memory_request_bytes)


class PredictorAllocator:
    """Ours: :func:`retry_bot.predict.predict` for attempt 1; every retry through ``decide()`` (:class:`PolicyReplay`)."""

    name = "predictor"

    def __init__(self, settings: PredictionSettings = DEFAULT_SETTINGS, replay: PolicyReplay | None = None):
        self.settings = settings
        self.replay = replay if replay is not None else PolicyReplay()
        self.index = new_index(settings)
        self.clamp = self.replay.clamp
        self._classes: dict[int, list[str | None]] = {}

    def _trusted(self, job: TraceJob) -> bool:
        return self.settings.trusts(job.ref)

    def observe_success(self, job: TraceJob, end: float) -> None:
        self.index.add(_obs_success(job, end), self._trusted(job))

    def observe_kill(self, job: TraceJob, limit: int, at: float) -> None:
        self.index.add(Observation(key=job.key, at=at, oom_limit_bytes=float(limit), job_id=job.job_id,
                                   ref=job.ref), self._trusted(job))

    def first(self, job: TraceJob) -> AttemptAlloc:
        a = predict(self.index, job.key, job.t, self.settings, job.static, self.clamp, job.ref)
        self._classes[job.job_id] = [self.replay.start_class(a.memory_limit_bytes)]
        return AttemptAlloc(a.memory_request_bytes, a.memory_limit_bytes, a.cpu_request_cores)

    def retry(self, job: TraceJob, previous: Sequence[AttemptAlloc]) -> AttemptAlloc | None:
        killed = previous[-1].memory_limit_bytes
        if killed is None:
            return None
        # the live bot's HistoryPredictor: the history as of the job's creation, the kill it was told of
        predicted = resize_prediction(self.index, job.key, job.t, [float(killed)], self.settings, self.clamp,
                                      job.ref)
        classes = self._classes.setdefault(job.job_id, [None])
        got = self.replay.next_attempt(job, previous, classes, predicted)
        if got is None:
            self._classes.pop(job.job_id, None)
            return None
        nxt, rc = got
        classes.append(rc)
        return nxt



def make_allocator(name: str | None, settings: PredictionSettings = DEFAULT_SETTINGS,
                   view: PolicyReplay | None = None) -> Allocator:
    """``None``/``"predictor"`` -> ours; else one of :data:`BASELINES`."""
    if name in (None, "", "predictor", "ours"):
        return PredictorAllocator(settings, view)
    if name == "gantry":
        return GantryAllocator(view)
    if name == "vpa":
        return VpaAllocator(view)
    if name == "static":
        return StaticAllocator()
    raise ValueError(f"unknown baseline {name!r} (choose from {', '.join(BASELINES)})")



def replay_from_policy(policy: Policy | None) -> PolicyReplay:
    """The replay of ``policy`` (``None``: the built-in default policy)."""
    return PolicyReplay(policy)
