"""What-if replay: run a trace of finished jobs through an allocator, causally.

The replay follows ``TRACE_FORMAT.md`` of the benchmark:

* jobs are taken in trace order (``created_at``); before job J (created at T)
  is allocated, every *event* that happened strictly before T is delivered to
  the allocator: the end of a job that succeeded (its usage becomes visible),
  or an OOM kill at limit L (only "need > L" becomes visible);
* attempt k of a job is OOM-killed iff its peak exceeds its memory limit; a
  killed attempt runs ``duration * peak_at_fraction * L / peak`` seconds, the
  next attempt starts then; the retry is decided with what was known at T
  plus the limits the job was killed at - never its true peak;
* every retry is decided by :func:`retry_bot.decide.decide` with the policy
  (family budget, ``max_attempts``, resize rule, ``beyond_top``,
  ``last_attempt``, the runner-class ladder) and the predictor's figure, as the
  live bot decides it (:class:`PolicyReplay`).

Allocators: :class:`PredictorAllocator` (ours) and the baselines
:class:`GantryAllocator`, :class:`VpaAllocator`, :class:`StaticAllocator`.
Metrics are computed exactly as the benchmark's ``evaluate.py`` does.
"""

from __future__ import annotations

import gzip
import heapq
import io
import json
import math
import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol, Sequence

from retry_bot.predict.estimator import StaticSize, new_index, predict, resize_prediction
from retry_bot.predict.history import Observation, parse_time
from retry_bot.predict.keys import JobKey, KeySettings, extract_key
from retry_bot.predict.settings import DEFAULT_SETTINGS, PredictionSettings

__all__ = [
    "TraceError",
    "TraceJob",
    "AttemptAlloc",
    "PolicyReplay",
    "Allocator",
    "PredictorAllocator",
    "GantryAllocator",
    "VpaAllocator",
    "StaticAllocator",
    "DecayingHistogram",
    "GantryMatch",
    "GANTRY_STEPS",
    "GANTRY_EXPENSIVE_VARIANTS",
    "gantry_variants",
    "SimulationResult",
    "load_trace",
    "read_trace",
    "simulate",
    "compute_metrics",
    "replay_from_policy",
    "make_allocator",
    "BASELINES",
]

GB = 1e9
HOUR = 3600.0
MIB = 1024 * 1024


class TraceError(ValueError):
    """The trace file is unreadable or inconsistent (message names file and line)."""


# ---------------------------------------------------------------------- trace
@dataclass(frozen=True)
class TraceJob:
    """One trace record: what is known before it runs, and its (hidden) usage."""

    job_id: int
    t: float
    project: str
    ref: str
    job_name: str
    key: JobKey
    static: StaticSize
    # usage (never shown to an allocator before the job has finished)
    duration_s: float
    memory_peak_bytes: float
    memory_mean_bytes: float
    peak_at_fraction: float
    cpu_mean_cores: float
    cpu_max_cores: float
    raw_key: Mapping[str, str] = field(default_factory=dict)
    created_at: str = ""

    def killed(self, limit: float | None) -> bool:
        return limit is not None and self.memory_peak_bytes > limit

    def kill_time(self, limit: float) -> float:
        return self.duration_s * self.peak_at_fraction * (limit / self.memory_peak_bytes)


_REQUIRED = ("job_id", "ref", "job_name", "created_at", "duration_s", "memory_peak_bytes",
             "memory_mean_bytes", "peak_at_fraction", "cpu_mean_cores")


def _open_text(path: str):
    if str(path).endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, "r", encoding="utf-8")


def read_trace(path: str) -> Iterator[dict]:
    """Yield the raw records of a JSON Lines (optionally gzip) trace; :class:`TraceError` on bad lines."""
    try:
        with _open_text(path) as fh:
            for lineno, line in enumerate(fh, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise TraceError(f"{path}:{lineno}: invalid JSON: {exc.msg}") from None
                if not isinstance(rec, dict):
                    raise TraceError(f"{path}:{lineno}: not a JSON object")
                rec["_line"] = lineno
                yield rec
    except OSError as exc:
        raise TraceError(f"cannot read trace {path}: {exc.strerror or exc}") from None
    except (EOFError, gzip.BadGzipFile, UnicodeDecodeError) as exc:
        raise TraceError(f"cannot read trace {path}: {exc}") from None


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def load_trace(path: str, keys: KeySettings | None = None) -> list[TraceJob]:
    """Read and check a trace (ordering contract of ``TRACE_FORMAT.md``)."""
    keys = keys or KeySettings()
    jobs: list[TraceJob] = []
    prev_id = prev_t = None
    for rec in read_trace(path):
        where = f"{path}:{rec['_line']}"
        missing = [f for f in _REQUIRED if f not in rec]
        if missing:
            raise TraceError(f"{where}: missing field(s) {', '.join(missing)}")
        t = parse_time(rec["created_at"])
        if t is None:
            raise TraceError(f"{where}: created_at {rec['created_at']!r} is not an ISO-8601 time")
        for f in ("duration_s", "memory_peak_bytes", "memory_mean_bytes", "peak_at_fraction", "cpu_mean_cores"):
            if not _num(rec[f]) or rec[f] < 0:
                raise TraceError(f"{where}: {f} must be a non-negative number, not {rec[f]!r}")
        if rec["memory_peak_bytes"] <= 0 or not 0 < rec["peak_at_fraction"] <= 1:
            raise TraceError(f"{where}: memory_peak_bytes must be > 0 and peak_at_fraction in (0, 1]")
        jid = rec["job_id"]
        if not isinstance(jid, int) or isinstance(jid, bool):
            raise TraceError(f"{where}: job_id must be an integer")
        if prev_id is not None and jid <= prev_id:
            raise TraceError(f"{where}: job_id {jid} is not increasing")
        if prev_t is not None and t < prev_t:
            raise TraceError(f"{where}: created_at goes backwards")
        prev_id, prev_t = jid, t
        raw_key = rec.get("key") if isinstance(rec.get("key"), dict) else {}
        raw_key = {k: v for k, v in raw_key.items() if isinstance(v, str)}
        key = extract_key(keys, job_name=rec["job_name"], explicit=raw_key,
                          variables=rec.get("variables") if isinstance(rec.get("variables"), dict) else None,
                          project=rec.get("project"))
        sr = rec.get("static_request") if isinstance(rec.get("static_request"), dict) else {}
        static = StaticSize(
            memory_request_bytes=float(sr["memory_request_bytes"]) if _num(sr.get("memory_request_bytes")) and sr["memory_request_bytes"] > 0 else None,
            cpu_request_cores=float(sr["cpu_request_cores"]) if _num(sr.get("cpu_request_cores")) and sr["cpu_request_cores"] > 0 else None,
        )
        jobs.append(TraceJob(
            job_id=jid, t=t, project=str(rec.get("project", "")), ref=str(rec["ref"]),
            job_name=str(rec["job_name"]), key=key, static=static,
            duration_s=float(rec["duration_s"]), memory_peak_bytes=float(rec["memory_peak_bytes"]),
            memory_mean_bytes=float(rec["memory_mean_bytes"]),
            peak_at_fraction=float(rec["peak_at_fraction"]), cpu_mean_cores=float(rec["cpu_mean_cores"]),
            cpu_max_cores=float(rec.get("cpu_max_cores", rec["cpu_mean_cores"])),
            raw_key=raw_key, created_at=str(rec["created_at"]),
        ))
    return jobs


# ------------------------------------------------------------------ allocators
@dataclass(frozen=True)
class AttemptAlloc:
    """One attempt's allocation (a row of the allocation file)."""

    memory_request_bytes: int
    memory_limit_bytes: int | None
    cpu_request_cores: float

    def __post_init__(self) -> None:
        if self.memory_limit_bytes is not None and self.memory_limit_bytes < self.memory_request_bytes:
            object.__setattr__(self, "memory_request_bytes", self.memory_limit_bytes)


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

    def __init__(self, policy: Any | None = None):
        if policy is None:
            from retry_bot.policy.load import default_policy

            policy = default_policy()
        from retry_bot.predict.sources import clamp_from_policy

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

    def next_attempt(self, job: "TraceJob", previous: Sequence["AttemptAlloc"], classes: Sequence[str | None],
                     predicted: int | None) -> tuple["AttemptAlloc", str | None] | None:
        """``decide()`` on the last killed attempt: the next attempt and its runner class, or ``None``."""
        from retry_bot.decide import ClassUsage, decide
        from retry_bot.model import Classification, Family, JobFacts, LineageAttempt
        from retry_bot.policy.model import Action

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


# ------------------------------------------------------------------ baselines
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


# ------------------------------------------------------------------ the replay
@dataclass
class SimulationResult:
    """Per-attempt allocations (``rows``, allocation-file dicts) and the metrics."""

    rows: list[dict]
    metrics: dict
    allocator: str
    seconds: float = 0.0


def simulate(
    jobs: Sequence[TraceJob],
    allocator: Allocator,
    progress: Callable[[int, int], None] | None = None,
    max_attempts: int = 20,
) -> SimulationResult:
    """Replay ``jobs`` (trace order) through ``allocator``, causally; see the module docstring."""
    started = time.perf_counter()
    # events: (time, seq, kind, job, limit)
    events: list[tuple[float, int, int, TraceJob, int]] = []
    seq = 0
    rows: list[dict] = []
    attempts_by_job: dict[int, list[AttemptAlloc]] = {}
    n = len(jobs)
    for i, job in enumerate(jobs):
        while events and events[0][0] < job.t:
            at, _, kind, ej, lim = heapq.heappop(events)
            if kind == 0:
                allocator.observe_kill(ej, lim, at)
            else:
                allocator.observe_success(ej, at)
        atts: list[AttemptAlloc] = []
        a = allocator.first(job)
        t = job.t
        while True:
            atts.append(a)
            lim = a.memory_limit_bytes
            if job.killed(lim):
                assert lim is not None
                t += job.kill_time(lim)
                seq += 1
                heapq.heappush(events, (t, seq, 0, job, lim))
                if len(atts) >= max_attempts:
                    break
                nxt = allocator.retry(job, atts)
                if nxt is None:
                    break
                a = nxt
                continue
            t += job.duration_s
            seq += 1
            heapq.heappush(events, (t, seq, 1, job, 0))
            break
        attempts_by_job[job.job_id] = atts
        for k, x in enumerate(atts, 1):
            rows.append({
                "job_id": job.job_id, "attempt": k,
                "memory_request_bytes": int(x.memory_request_bytes),
                "memory_limit_bytes": None if x.memory_limit_bytes is None else int(x.memory_limit_bytes),
                "cpu_request_cores": round(float(x.cpu_request_cores), 6),
            })
        if progress is not None and (i % 500 == 0 or i == n - 1):
            progress(i + 1, n)
    metrics = compute_metrics(jobs, {j: [_as_alloc(r) for r in rs] for j, rs in _group(rows).items()})
    return SimulationResult(rows=rows, metrics=metrics, allocator=getattr(allocator, "name", "?"),
                            seconds=time.perf_counter() - started)


def _group(rows: Iterable[dict]) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for r in rows:
        out.setdefault(r["job_id"], []).append(r)
    return out


def _as_alloc(r: dict) -> AttemptAlloc:
    return AttemptAlloc(r["memory_request_bytes"], r["memory_limit_bytes"], r["cpu_request_cores"])


# ------------------------------------------------------------------ metrics
METRIC_ORDER = (
    "jobs", "attempts", "oom_kills", "oom_kills_per_100_jobs", "jobs_oom_killed",
    "failed_permanently", "mem_avg_over_request", "mem_peak_over_limit",
    "mem_peak_over_request", "peak_over_request_frac", "reserved_mem_gb_hours",
    "wasted_gb_hours_on_killed_attempts", "retry_delay_hours", "cpu_avg_over_request",
    "reserved_cpu_core_hours", "static_reserved_mem_gb_hours", "cost_index",
)


def compute_metrics(jobs: Sequence[TraceJob], allocs: Mapping[int, Sequence[AttemptAlloc]],
                    warmup_frac: float = 0.0) -> dict:
    """The benchmark's metrics (same definitions and order of summation as ``evaluate.py``)."""
    skip = int(len(jobs) * warmup_frac)
    n_jobs = attempts = kills = jobs_killed = failed = 0
    mem_use = mem_res = cpu_use = cpu_res = 0.0
    wasted = delay = 0.0
    peak_sum = limit_sum = 0.0
    peak_t = req_t_ok = 0.0
    ok = over = 0
    static_res = 0.0
    for job in jobs[skip:]:
        n_jobs += 1
        static_res += (job.static.memory_request_bytes or 0.0) * job.duration_s
        killed_any = False
        last_killed = True
        for a in allocs[job.job_id]:
            lim = None if a.memory_limit_bytes is None else float(a.memory_limit_bytes)
            if job.killed(lim):
                assert lim is not None
                rt = job.kill_time(lim)
                mb, killed = 0.5 * lim * rt, True
            else:
                rt, mb, killed = job.duration_s, job.memory_mean_bytes * job.duration_s, False
            attempts += 1
            res = float(a.memory_request_bytes) * rt
            mem_res += res
            mem_use += mb
            cpu_res += float(a.cpu_request_cores) * rt
            cpu_use += job.cpu_mean_cores * rt
            last_killed = killed
            if killed:
                kills += 1
                killed_any = True
                wasted += res
                delay += rt
                continue
            ok += 1
            peak = job.memory_peak_bytes
            peak_t += peak * rt
            req_t_ok += res
            over += peak > a.memory_request_bytes
            if lim is not None:
                peak_sum += peak
                limit_sum += lim
        jobs_killed += killed_any
        failed += last_killed

    def ratio(a: float, b: float) -> float | None:
        return a / b if b > 0 else None

    reserved = mem_res / GB / HOUR
    static_gbh = static_res / GB / HOUR
    return {
        "jobs": n_jobs,
        "attempts": attempts,
        "oom_kills": kills,
        "oom_kills_per_100_jobs": 100.0 * kills / n_jobs if n_jobs else None,
        "jobs_oom_killed": jobs_killed,
        "failed_permanently": failed,
        "mem_avg_over_request": ratio(mem_use, mem_res),
        "mem_peak_over_limit": ratio(peak_sum, limit_sum),
        "mem_peak_over_request": ratio(peak_t, req_t_ok),
        "peak_over_request_frac": ratio(over, ok),
        "reserved_mem_gb_hours": reserved,
        "wasted_gb_hours_on_killed_attempts": wasted / GB / HOUR,
        "retry_delay_hours": delay / HOUR,
        "cpu_avg_over_request": ratio(cpu_use, cpu_res),
        "reserved_cpu_core_hours": cpu_res / HOUR,
        "static_reserved_mem_gb_hours": static_gbh,
        "cost_index": ratio(reserved, static_gbh),
    }


def format_metrics(metrics: Mapping[str, Any], title: str = "") -> str:
    """A two-column table in ``evaluate.py``'s layout."""
    rows = []
    for k in METRIC_ORDER:
        v = metrics.get(k)
        if v is None:
            s = "n/a"
        elif isinstance(v, int):
            s = f"{v:,}"
        elif abs(v) >= 100:
            s = f"{v:,.0f}"
        else:
            s = f"{v:.4f}"
        rows.append((k, s))
    w = max(len(k) for k, _ in rows)
    head = [title, "-" * len(title)] if title else []
    return "\n".join(head + [f"{k:<{w}}  {s:>14}" for k, s in rows])


def write_allocations(path: str, rows: Iterable[dict]) -> int:
    """Write allocation rows as JSON Lines (gzip if ``*.gz``); returns the count."""
    n = 0
    if str(path).endswith(".gz"):
        fh: Any = io.TextIOWrapper(gzip.GzipFile(path, "wb", mtime=0), encoding="utf-8", newline="\n")
    else:
        fh = open(path, "w", encoding="utf-8", newline="\n")
    with fh:
        for r in rows:
            fh.write(json.dumps(r, separators=(",", ":")))
            fh.write("\n")
            n += 1
    return n


# ------------------------------------------------------------------ policy glue
def replay_from_policy(policy: Any | None) -> PolicyReplay:
    """The replay of ``policy`` (``None``: the built-in default policy)."""
    return PolicyReplay(policy)
