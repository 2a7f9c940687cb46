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
* the retry rule and budget are the policy's (``retry_bot.policy``), on top
  of the predictor's view (:func:`retry_bot.predict.predict_for_retry`): the
  same code path as the live bot's ``resize``.

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
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol, Sequence

from retry_bot.predict.estimator import Clamp, StaticSize, new_index, predict, predict_for_retry
from retry_bot.predict.history import Observation, parse_time
from retry_bot.predict.keys import JobKey, KeySettings, extract_key
from retry_bot.predict.settings import DEFAULT_SETTINGS, PredictionSettings

__all__ = [
    "TraceError",
    "TraceJob",
    "AttemptAlloc",
    "ResizeView",
    "Allocator",
    "PredictorAllocator",
    "GantryAllocator",
    "VpaAllocator",
    "StaticAllocator",
    "SimulationResult",
    "load_trace",
    "read_trace",
    "simulate",
    "compute_metrics",
    "resize_view_from_policy",
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


@dataclass(frozen=True)
class ResizeView:
    """What the replay needs from the policy: the OOM retry budget, the bump rule and the caps."""

    budget: int = 3
    ratio: float = 1.2
    min_bump: int = 100 * MIB
    granularity: int = 0
    max_memory: int | None = None
    max_cpus: float | None = None
    #: Optional policy function ``(limit_in_force, predicted) -> new limit or None``.
    resize: Callable[[int, int | None], int | None] | None = None

    def next_limit(self, limit: int, predicted: int | None) -> int | None:
        """The policy's resize of ``limit`` (the limit the job was killed at), on top of ``predicted``.

        ``None`` when the cap does not allow more than ``limit``.
        """
        if self.resize is not None:
            return self.resize(limit, predicted)
        need = max(limit * self.ratio, limit + self.min_bump, float(predicted or 0))
        if self.granularity > 0:
            need = math.ceil(need / self.granularity) * self.granularity
        if self.max_memory is not None:
            need = min(need, self.max_memory)
        need = int(math.ceil(need))
        return need if need > limit else None


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
    """Ours: :func:`retry_bot.predict.predict` for attempt 1, then ``predict_for_retry`` + the policy's resize."""

    name = "predictor"

    def __init__(self, settings: PredictionSettings = DEFAULT_SETTINGS, view: ResizeView = ResizeView()):
        self.settings = settings
        self.view = view
        self.index = new_index(settings)
        self.clamp = Clamp(view.max_memory, view.max_cpus)
        self._now: dict[int, float] = {}

    def _trusted(self, job: TraceJob) -> bool:
        return self.settings.trusts(job.ref)

    def observe_success(self, job: TraceJob, end: float) -> None:
        self.index.add(_obs_success(job, end), self._trusted(job))

    def observe_kill(self, job: TraceJob, limit: int, at: float) -> None:
        self.index.add(Observation(key=job.key, at=at, oom_limit_bytes=float(limit), job_id=job.job_id,
                                   ref=job.ref), self._trusted(job))

    def first(self, job: TraceJob) -> AttemptAlloc:
        a = predict(self.index, job.key, job.t, self.settings, job.static, self.clamp, job.ref)
        return AttemptAlloc(a.memory_request_bytes, a.memory_limit_bytes, a.cpu_request_cores)

    def retry(self, job: TraceJob, previous: Sequence[AttemptAlloc]) -> AttemptAlloc | None:
        if len(previous) > self.view.budget:
            return None
        killed = [p.memory_limit_bytes for p in previous if p.memory_limit_bytes is not None]
        a = predict_for_retry(self.index, job.key, job.t, killed, self.settings, job.static, self.clamp,
                              job.ref)
        lim = self.view.next_limit(int(killed[-1]), a.memory_limit_bytes)
        if lim is None:
            return None
        return AttemptAlloc(min(a.memory_request_bytes, lim), lim, a.cpu_request_cores)


# ------------------------------------------------------------------ baselines
_GANTRY_LEVELS: tuple[tuple[str, ...], ...] = (
    ("package", "variants", "version", "compiler"),
    ("package", "version", "compiler"),
    ("package", "variants", "compiler"),
    ("package", "compiler"),
    ("package", "variants", "version"),
    ("package", "version"),
    ("package", "variants"),
    ("package",),
)


class GantryAllocator:
    """spack-gantry: request = mean of the last five trusted builds' means, limit = 1.2 x their max peak.

    Fallback chain of match keys as gantry's (its expensive-variant filter
    approximated by dropping the variants); a sample needs >= 4 builds; no
    history: 2 GB request / 5 GB limit, 1 CPU.  OOM: three retries, each x1.2.
    """

    name = "gantry"

    def __init__(self, view: ResizeView | None = None):
        self.hist: list[dict[tuple[str, ...], deque]] = [{} for _ in _GANTRY_LEVELS]
        self.max_memory = view.max_memory if view else None

    def observe_success(self, job: TraceJob, end: float) -> None:
        if job.ref != "develop":
            return
        for i, lv in enumerate(_GANTRY_LEVELS):
            k = job.key.level_key(lv)
            if k is not None:
                self.hist[i].setdefault(k, deque(maxlen=5)).append(job)

    def observe_kill(self, job: TraceJob, limit: int, at: float) -> None:
        return None

    def first(self, job: TraceJob) -> AttemptAlloc:
        for i, lv in enumerate(_GANTRY_LEVELS):
            k = job.key.level_key(lv)
            d = self.hist[i].get(k) if k is not None else None
            if d is not None and len(d) >= 4:
                req = sum(j.memory_mean_bytes for j in d) / len(d)
                lim = 1.2 * max(j.memory_peak_bytes for j in d)
                cpu = sum(j.cpu_mean_cores for j in d) / len(d)
                return AttemptAlloc(int(req), int(max(lim, req)), max(cpu, 0.001))
        return AttemptAlloc(2_000_000_000, 5_000_000_000, 1.0)

    def retry(self, job: TraceJob, previous: Sequence[AttemptAlloc]) -> AttemptAlloc | None:
        if len(previous) > 3:
            return None
        last = previous[-1]
        lim = int(math.ceil((last.memory_limit_bytes or 0) * 1.2))
        if self.max_memory:
            lim = min(lim, self.max_memory)
        if lim <= (last.memory_limit_bytes or 0):
            return None
        return AttemptAlloc(last.memory_request_bytes, lim, last.cpu_request_cores)


class _DecayingHistogram:
    """VPA's decaying histogram: exponential buckets (5 % growth), weights x 2^((t - ref)/half_life)."""

    __slots__ = ("weights", "ref", "total")
    START, GROWTH = 1e7, 1.05

    def __init__(self, ref: float):
        self.weights: dict[int, float] = {}
        self.ref = ref
        self.total = 0.0

    def _bucket(self, v: float) -> int:
        if v <= self.START:
            return 0
        return int(math.log(v / self.START) / math.log(self.GROWTH)) + 1

    def _end(self, b: int) -> float:
        return self.START * self.GROWTH ** b

    def add(self, v: float, w: float, t: float, half_life: float) -> None:
        exp = (t - self.ref) / half_life
        if exp > 100:  # shift the reference forward (maxDecayExponent)
            f = 2.0 ** (-exp)
            self.weights = {b: x * f for b, x in self.weights.items()}
            self.total *= f
            self.ref = t
            exp = 0.0
        ww = w * 2.0 ** exp
        b = self._bucket(v)
        self.weights[b] = self.weights.get(b, 0.0) + ww
        self.total += ww

    def percentile(self, p: float) -> float:
        target = p * self.total
        acc = 0.0
        for b in sorted(self.weights):
            acc += self.weights[b]
            if acc >= target:
                return self._end(b)
        return self._end(max(self.weights))


class VpaAllocator:
    """VPA-style: per key, decaying histograms (24 h half-life) of peaks and CPU; target p90 x 1.15.

    Request = limit = the memory target; CPU request = p90 of CPU x 1.15.
    An OOM kill at L adds an artificial peak max(1.2 L, L + 100 MiB) and the
    retry gets that (three retries).  No history: the static request, no limit.
    """

    name = "vpa"
    HALF_LIFE = 24 * HOUR

    def __init__(self, view: ResizeView | None = None):
        self.mem: dict[JobKey, _DecayingHistogram] = {}
        self.cpu: dict[JobKey, _DecayingHistogram] = {}
        self.max_memory = view.max_memory if view else None

    def _k(self, job: TraceJob) -> JobKey:
        return job.key

    def observe_success(self, job: TraceJob, end: float) -> None:
        if job.ref != "develop":
            return
        k = self._k(job)
        self.mem.setdefault(k, _DecayingHistogram(end)).add(job.memory_peak_bytes, 1.0, end, self.HALF_LIFE)
        self.cpu.setdefault(k, _DecayingHistogram(end)).add(max(job.cpu_mean_cores, 0.01) * 1e7, 1.0, end, self.HALF_LIFE)

    def observe_kill(self, job: TraceJob, limit: int, at: float) -> None:
        if job.ref != "develop":
            return
        bump = max(limit * 1.2, limit + 100 * MIB)
        self.mem.setdefault(self._k(job), _DecayingHistogram(at)).add(bump, 1.0, at, self.HALF_LIFE)

    def first(self, job: TraceJob) -> AttemptAlloc:
        k = self._k(job)
        h = self.mem.get(k)
        cpu_h = self.cpu.get(k)
        cpu = (cpu_h.percentile(0.9) / 1e7 * 1.15) if cpu_h else (job.static.cpu_request_cores or 1.0)
        if h is None:
            req = int(job.static.memory_request_bytes or 2_000_000_000)
            return AttemptAlloc(req, None, cpu)
        target = int(max(h.percentile(0.9) * 1.15, 250e6))
        if self.max_memory:
            target = min(target, self.max_memory)
        return AttemptAlloc(target, target, cpu)

    def retry(self, job: TraceJob, previous: Sequence[AttemptAlloc]) -> AttemptAlloc | None:
        if len(previous) > 3:
            return None
        last = previous[-1]
        lim = int(math.ceil(max((last.memory_limit_bytes or 0) * 1.2, (last.memory_limit_bytes or 0) + 100 * MIB)))
        if self.max_memory:
            lim = min(lim, self.max_memory)
        if lim <= (last.memory_limit_bytes or 0):
            return None
        return AttemptAlloc(lim, lim, last.cpu_request_cores)


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
                   view: ResizeView = ResizeView()) -> Allocator:
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
def resize_view_from_policy(policy: Any | None) -> ResizeView:
    """The one place that reads ``retry_bot.policy``: OOM budget, bump rule and caps.

    Works with the policy model's ``Policy`` (``resolve``, ``resize``,
    ``memory_cap``, ``runner_classes``); ``None`` gives VPA's rule with a
    budget of 3 and no cap.
    """
    if policy is None:
        return ResizeView()
    budget = 3
    try:
        resolved = policy.resolve("oom", "oom")
        rule = resolved.rule
        budget = int(rule.budget) if str(getattr(rule.action, "value", rule.action)) == "resize" else 0
    except Exception:  # pragma: no cover - a policy model without resolve()
        resolved = None
    rz = getattr(policy, "resize", None)
    cap = None
    try:
        cap = int(policy.memory_cap())
    except Exception:  # pragma: no cover
        cap = getattr(rz, "max_memory", None)
    if resolved is not None and getattr(resolved, "max_memory", None):
        cap = min(cap, resolved.max_memory) if cap else resolved.max_memory
    classes = getattr(policy, "runner_classes", ()) or ()
    max_cpus = max((float(rc.max_cpus) for rc in classes), default=None)
    resize_fn = None
    try:
        from retry_bot.policy.resize import resize_memory

        def resize_fn(limit: int, predicted: int | None, _rule=rz, _cap=cap) -> int | None:
            new = resize_memory(int(limit), _rule, cap=_cap, predicted_bytes=predicted)
            return new if new > limit else None
    except ImportError:  # pragma: no cover - fall back to the same rule, reimplemented
        resize_fn = None
    return ResizeView(
        resize=resize_fn,
        budget=budget,
        ratio=float(getattr(rz, "ratio", 1.2)),
        min_bump=int(getattr(rz, "min_bump", 100 * MIB)),
        granularity=int(getattr(rz, "granularity", 0) or 0),
        max_memory=cap,
        max_cpus=max_cpus,
    )
