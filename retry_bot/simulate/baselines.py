"""The reference allocators the replay compares against: spack-gantry, a VPA recommender, static sizes.

Each follows its source (``peers.md`` §2.3-2.5 and §6); no constant is tuned to a trace.
"""

from __future__ import annotations

import math
import re
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from retry_bot.simulate.trace import AttemptAlloc, TraceJob

if TYPE_CHECKING:  # only the memory ceiling of the policy's replay is read
    from retry_bot.simulate.allocators import PolicyReplay

__all__ = ["GantryAllocator", "VpaAllocator", "StaticAllocator", "DecayingHistogram", "GantryMatch",
           "GANTRY_STEPS", "GANTRY_EXPENSIVE_VARIANTS", "gantry_variants", "BASELINES"]

HOUR = 3600.0
MIB = 1024 * 1024

#: spack-gantry's ``EXPENSIVE_VARIANTS`` (peers.md §2.3).
GANTRY_EXPENSIVE_VARIANTS = ("sycl", "mpi", "rocm", "cuda", "python", "fortran", "openmp", "hdf5")
_FLAG = re.compile(r"([+~])([A-Za-z0-9_][\w.-]*)")

#: gantry's match-key sets, in priority order (peers.md §2.3): the fields, and
#: whether the variants must match exactly (``True``) or through the
#: expensive-variants filter (``False``).
GANTRY_STEPS: tuple[tuple[tuple[str, ...], bool], ...] = (
    (("package", "version", "compiler_name", "compiler_version"), True),
    (("package", "version", "compiler_name", "compiler_version"), False),
    (("package", "compiler_name", "compiler_version"), True),
    (("package", "compiler_name", "compiler_version"), False),
    (("package", "version", "compiler_name"), True),
    (("package", "version", "compiler_name"), False),
    (("package", "compiler_name"), True),
    (("package", "compiler_name"), False),
    (("package", "version"), True),
    (("package", "version"), False),
    (("package",), True),
    (("package",), False),
)


def gantry_variants(variants: str) -> dict[str, Any]:
    """A canonical variant string as gantry's JSON: ``+x`` -> true, ``~x`` -> false, ``k=v`` -> str, ``k=a,b`` -> list."""
    out: dict[str, Any] = {}
    for tok in variants.split():
        if "=" in tok and tok[0] not in "+~":
            k, _, v = tok.partition("=")
            out[k] = tuple(v.split(",")) if "," in v else v
        else:
            for sign, name in _FLAG.findall(tok):
                out[name] = sign == "+"
    return out


@dataclass(frozen=True)
class GantryMatch:
    """What gantry's SQL compares for one job: its fields and the two views of its variants.

    ``sample_view``: the expensive variants the job (as a stored sample) sets, with
    any value; ``query_view``: those it sets to a boolean (a string such as
    ``hdf5=none`` counts as "not set" in a query, and such a sample matches no
    query at the filtered steps, exactly as ``json_extract(...) IS NULL`` does).
    """

    fields: Mapping[str, str]
    variants: str
    sample_view: tuple
    query_view: tuple

    @classmethod
    def of(cls, job: TraceJob) -> "GantryMatch":
        comp = job.key.get("compiler") or ""
        name, _, ver = comp.partition("@")
        fields = {"package": job.key.get("package") or job.key.get("job") or job.job_name,
                  "version": job.key.get("version") or "", "compiler_name": name, "compiler_version": ver}
        var = gantry_variants(job.key.get("variants") or "")
        sample = tuple((v, var[v]) for v in GANTRY_EXPENSIVE_VARIANTS if v in var)
        query = tuple((v, var[v]) for v in GANTRY_EXPENSIVE_VARIANTS if isinstance(var.get(v), bool))
        return cls(fields, job.key.get("variants") or "", sample, query)

    def step_key(self, step: int, as_query: bool) -> tuple:
        names, exact = GANTRY_STEPS[step]
        head = tuple(self.fields[n] for n in names)
        return head + (("=", self.variants) if exact else ("~", self.query_view if as_query else self.sample_view))


class GantryAllocator:
    """spack-gantry's prediction (develop), limit rule (PR #106) and OOM rule (PR #4); peers.md §2.3-2.5.

    * Sample: the last five ``develop`` builds (newest first) matching the first of
      the twelve match-key sets that has at least four; expensive-variants filter
      as gantry's SQL.  Killed builds are not samples.
    * Request: mean of the sample's mean memory / mean CPU (no multiplier, no
      floors: PR #106 removed them), memory rounded to decimal MB as gantry prints it.
    * Limit: the sample's largest peak x 1.2.  No sample: 2 GB / 1 core request, 5 GB limit.
    * OOM: the next attempt gets the killed attempt's limit x 1.2 and, as request,
      the killed attempt's mean memory (``L / 2`` under the trace's linear ramp);
      three bumps at most.  The runner ceiling (``resize.max_memory``) caps the limit.
    """

    name = "gantry"
    IDEAL_SAMPLE = 5
    MEM_LIMIT_BUMP = 1.2
    MEM_BUMP_FACTOR = 1.2
    RETRY_COUNT_LIMIT = 3
    DEFAULT_MEM_REQUEST = 2_000_000_000
    DEFAULT_MEM_LIMIT = 5_000_000_000
    DEFAULT_CPU_REQUEST = 1.0

    def __init__(self, view: PolicyReplay | None = None):
        self.samples: list[dict[tuple, deque]] = [{} for _ in GANTRY_STEPS]
        self.max_memory = view.max_memory if view else None

    def observe_success(self, job: TraceJob, end: float) -> None:
        if job.ref != "develop":
            return
        m = GantryMatch.of(job)
        for i in range(len(GANTRY_STEPS)):
            self.samples[i].setdefault(m.step_key(i, False), deque(maxlen=self.IDEAL_SAMPLE)).append(job)

    def observe_kill(self, job: TraceJob, limit: int, at: float) -> None:
        return None

    def sample(self, job: TraceJob) -> tuple[int, Sequence[TraceJob]] | None:
        """``(step, builds)`` of the first accepted sample, or ``None`` (defaults)."""
        m = GantryMatch.of(job)
        for i in range(len(GANTRY_STEPS)):
            d = self.samples[i].get(m.step_key(i, True))
            if d is not None and len(d) >= self.IDEAL_SAMPLE - 1:
                return i, d
        return None

    def _cap(self, v: float) -> int:
        v = int(math.ceil(v))
        return min(v, self.max_memory) if self.max_memory else v

    def first(self, job: TraceJob) -> AttemptAlloc:
        found = self.sample(job)
        if found is None:
            return AttemptAlloc(self.DEFAULT_MEM_REQUEST, self._cap(self.DEFAULT_MEM_LIMIT), self.DEFAULT_CPU_REQUEST)
        _, d = found
        req = round(sum(j.memory_mean_bytes for j in d) / len(d) / 1e6) * 1_000_000
        lim = round(self.MEM_LIMIT_BUMP * max(j.memory_peak_bytes for j in d) / 1e6) * 1_000_000
        cpu = round(sum(j.cpu_mean_cores for j in d) / len(d), 3)
        return AttemptAlloc(int(req), self._cap(max(lim, req)), max(cpu, 0.001))

    def retry(self, job: TraceJob, previous: Sequence[AttemptAlloc]) -> AttemptAlloc | None:
        if len(previous) > self.RETRY_COUNT_LIMIT:
            return None
        last = previous[-1].memory_limit_bytes or 0
        lim = self._cap(last * self.MEM_BUMP_FACTOR)
        if lim <= last:
            return None
        return AttemptAlloc(int(last / 2), lim, previous[-1].cpu_request_cores)


class DecayingHistogram:
    """VPA's decaying exponential histogram (``util/decaying_histogram.go``, ``histogram.go``).

    Bucket ``i`` starts at ``first * (growth**i - 1) / (growth - 1)`` (5 % growth);
    a sample's weight is multiplied by ``2 ** ((t - ref) / half_life)``, the
    reference moving forward when the exponent would exceed 100.  A percentile is
    the *end* of the bucket where the cumulative weight reaches ``p * total``.
    """

    __slots__ = ("first", "growth", "n_buckets", "half_life", "weights", "ref", "total")

    def __init__(self, first: float, max_value: float, half_life: float, growth: float = 1.05):
        self.first, self.growth, self.half_life = first, growth, half_life
        self.n_buckets = int(math.ceil(math.log(max_value * (growth - 1) / first + 1) / math.log(growth))) + 1
        self.weights: dict[int, float] = {}
        self.ref: float | None = None
        self.total = 0.0

    def bucket(self, v: float) -> int:
        if v < self.first:
            return 0
        b = int(math.floor(math.log(v * (self.growth - 1) / self.first + 1) / math.log(self.growth)))
        return min(b, self.n_buckets - 1)

    def start(self, b: int) -> float:
        return self.first * (self.growth ** b - 1) / (self.growth - 1)

    def _weight(self, w: float, t: float) -> float:
        if self.ref is None:
            self.ref = t
        exp = (t - self.ref) / self.half_life
        if exp > 100:  # maxDecayExponent: shift the reference time forward
            f = 2.0 ** (-exp)
            self.weights = {b: x * f for b, x in self.weights.items()}
            self.total *= f
            self.ref = t
            exp = 0.0
        return w * 2.0 ** exp

    def add(self, v: float, w: float, t: float) -> None:
        ww = self._weight(w, t)
        b = self.bucket(v)
        self.weights[b] = self.weights.get(b, 0.0) + ww
        self.total += ww

    def percentile(self, p: float, extra: Sequence[tuple[float, float]] = ()) -> float:
        """The ``p`` percentile, optionally as if ``extra`` ``(value, time)`` samples (weight 1) were added."""
        weights, total = self.weights, self.total
        if extra:
            weights = dict(weights)
            ref = self.ref if self.ref is not None else extra[0][1]
            for v, t in extra:
                ww = 2.0 ** min((t - ref) / self.half_life, 100.0)
                b = self.bucket(v)
                weights[b] = weights.get(b, 0.0) + ww
                total += ww
        if total <= 0:
            return 0.0
        target, acc = p * total, 0.0
        order = sorted(weights)
        b = order[-1]
        for b in order:
            acc += weights[b]
            if acc >= target:
                break
        return self.start(b + 1) if b < self.n_buckets - 1 else self.start(b)


@dataclass
class _VpaAggregate:
    """One key's aggregate container state: memory peaks, CPU usage, sample count, first sample."""

    memory: DecayingHistogram
    cpu: DecayingHistogram
    first_sample: float
    runs: int = 0
    cpu_samples: float = 0.0  # per-minute CPU samples (``TotalSamplesCount``)


class VpaAllocator:
    """A VPA recommender (``pkg/recommender``, peers.md §6) over gantry's match-key chain.

    * One aggregate per key of every gantry step (trusted ``develop`` runs): a
      decaying histogram (24 h half-life) of each run's memory peak (one peak per
      run, weight 1) and of its CPU (one sample per running minute at its mean,
      weight ``minSampleWeight`` 0.1).  The step used is the first with at
      least four runs, else the most specific with any.
    * Request (target): memory p90 x 1.15, CPU p90 x 1.15, at least 250 MiB / 25 m.
    * Limit (upper bound): memory p95 x 1.15 x (1 + 1/confidence), with
      ``confidence = min(lifespan days, samples / 1440)``; capped by ``resize.max_memory``.
    * OOM (``RecordOOM``): a kill at limit L (usage L) adds the artificial peak
      ``max(1.2 L, L + 100 MiB)``; the next attempt is the recommendation with
      the job's own kills added; three retries.  No history: the static request, no limit.
    """

    name = "vpa"
    HALF_LIFE = 24 * HOUR
    MARGIN = 0.15
    TARGET_P, UPPER_P = 0.9, 0.95
    MIN_MEMORY = 250 * MIB
    MIN_CPU = 0.025
    MIN_SAMPLE_WEIGHT = 0.1
    OOM_RATIO, OOM_MIN_BUMP = 1.2, 100 * MIB
    RETRIES = 3
    ACCEPT_RUNS = 4

    def __init__(self, view: PolicyReplay | None = None):
        self.aggs: list[dict[tuple, _VpaAggregate]] = [{} for _ in GANTRY_STEPS]
        self.max_memory = view.max_memory if view else None

    def _agg(self, i: int, key: tuple, t: float) -> _VpaAggregate:
        a = self.aggs[i].get(key)
        if a is None:
            a = self.aggs[i][key] = _VpaAggregate(DecayingHistogram(1e7, 1e12, self.HALF_LIFE),
                                                  DecayingHistogram(0.01, 1000.0, self.HALF_LIFE), t)
        return a

    @classmethod
    def oom_sample(cls, limit: float) -> float:
        return max(limit * cls.OOM_RATIO, limit + cls.OOM_MIN_BUMP)

    def observe_success(self, job: TraceJob, end: float) -> None:
        if job.ref != "develop":
            return
        m = GantryMatch.of(job)
        minutes = max(job.duration_s / 60.0, 1.0)
        for i in range(len(GANTRY_STEPS)):
            a = self._agg(i, m.step_key(i, False), job.t)
            a.memory.add(job.memory_peak_bytes, 1.0, end)
            a.cpu.add(max(job.cpu_mean_cores, 0.01), self.MIN_SAMPLE_WEIGHT * minutes, end)
            a.cpu_samples += minutes
            a.runs += 1

    def observe_kill(self, job: TraceJob, limit: int, at: float) -> None:
        if job.ref != "develop":
            return
        m = GantryMatch.of(job)
        for i in range(len(GANTRY_STEPS)):
            self._agg(i, m.step_key(i, False), at).memory.add(self.oom_sample(limit), 1.0, at)

    def aggregate(self, job: TraceJob) -> _VpaAggregate | None:
        m = GantryMatch.of(job)
        fallback = None
        for i in range(len(GANTRY_STEPS)):
            a = self.aggs[i].get(m.step_key(i, True))
            if a is None or a.runs == 0:
                continue
            if a.runs >= self.ACCEPT_RUNS:
                return a
            fallback = fallback or a
        return fallback

    def _recommend(self, job: TraceJob, kills: Sequence[tuple[float, float]] = ()) -> AttemptAlloc:
        a = self.aggregate(job)
        if a is None:
            return AttemptAlloc(int(job.static.memory_request_bytes or 2_000_000_000), None,
                                job.static.cpu_request_cores or 1.0)
        extra = [(self.oom_sample(lim), at) for lim, at in kills]
        target = max(a.memory.percentile(self.TARGET_P, extra) * (1 + self.MARGIN), self.MIN_MEMORY)
        upper = max(a.memory.percentile(self.UPPER_P, extra) * (1 + self.MARGIN), self.MIN_MEMORY)
        lifespan_days = max(job.t - a.first_sample, 0.0) / 86400.0
        confidence = min(lifespan_days, a.cpu_samples / 1440.0)
        limit: float | None = upper * (1 + 1 / confidence) if confidence > 0 else None
        if self.max_memory:
            limit = self.max_memory if limit is None else min(limit, self.max_memory)
            target = min(target, self.max_memory)
        cpu = max(a.cpu.percentile(self.TARGET_P) * (1 + self.MARGIN), self.MIN_CPU)
        lim_i = None if limit is None else int(math.ceil(limit))
        return AttemptAlloc(int(math.ceil(target)), lim_i, cpu)

    def first(self, job: TraceJob) -> AttemptAlloc:
        return self._recommend(job)

    def retry(self, job: TraceJob, previous: Sequence[AttemptAlloc]) -> AttemptAlloc | None:
        if len(previous) > self.RETRIES:
            return None
        # The job's own kills (delivered to the aggregates only once they are events) as
        # RecordOOM samples, dated at the job's creation (when each kill happened would tell its peak).
        kills = [(float(p.memory_limit_bytes), job.t) for p in previous if p.memory_limit_bytes is not None]
        return self._recommend(job, kills)


class StaticAllocator:
    """The trace's hand-made static sizes: static request, no limit, never retried."""

    name = "static"

    def observe_success(self, job: TraceJob, end: float) -> None:
        return None

    def observe_kill(self, job: TraceJob, limit: int, at: float) -> None:
        return None

    def first(self, job: TraceJob) -> AttemptAlloc:
        return AttemptAlloc(int(job.static.memory_request_bytes or 2_000_000_000), None,
                            job.static.cpu_request_cores or 1.0)

    def retry(self, job: TraceJob, previous: Sequence[AttemptAlloc]) -> AttemptAlloc | None:
        return None


BASELINES = ("gantry", "vpa", "static")
