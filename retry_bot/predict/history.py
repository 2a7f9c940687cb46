"""Usage history: trusted observations of finished (or OOM-killed) runs, indexed by key level.

An observation is either a *sample* (a run that finished: its peak, mean
memory, CPU) or an *OOM bound* (a run killed at limit L: all we know is that
it needed more than L; censored data, never a sample of the peak).

:class:`HistoryIndex` keeps, for every fallback level of every key it has
seen, the most recent ``max_samples`` samples and OOM bounds, oldest first.
It is an in-memory structure; the state store (or a trace) fills it.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from retry_bot.isotime import parse_iso_time
from retry_bot.predict.keys import JobKey, KeySettings, extract_key

if TYPE_CHECKING:
    from runner_wrapper.record import UsageRecord

__all__ = ["Observation", "HistoryIndex", "LevelHistory", "Calibration", "observation_from_record", "parse_time"]


@dataclass(frozen=True)
class Observation:
    """One trusted run, as the predictor sees it.

    ``at`` is when it became known (POSIX seconds): the end of a successful
    run, or the moment of an OOM kill.  For an OOM bound only
    ``oom_limit_bytes`` is meaningful.
    """

    key: JobKey
    at: float
    memory_peak_bytes: float | None = None
    memory_mean_bytes: float | None = None
    cpu_mean_cores: float | None = None
    cpu_max_cores: float | None = None
    duration_s: float | None = None
    #: Set for an OOM kill: the run needed more than this.
    oom_limit_bytes: float | None = None
    job_id: int | None = None
    #: The GitLab ref of the run (for ref-scoped evidence of untrusted runs).
    ref: str | None = None
    #: The memory request the job would have had without a predictor (its static size), if known.
    static_memory_bytes: float | None = None

    @property
    def is_oom(self) -> bool:
        return self.oom_limit_bytes is not None


class LevelHistory:
    """Samples and OOM bounds of one level value (e.g. ``package=hdf5 version=1.14.3``)."""

    __slots__ = ("samples", "ooms", "cache", "surprise", "spreads")

    def __init__(self, max_samples: int):
        self.samples: deque[Observation] = deque(maxlen=max_samples)
        self.ooms: deque[Observation] = deque(maxlen=max_samples)
        #: Statistics of ``samples`` computed by the estimator (dropped when a sample is added).
        self.cache: Any = None
        #: The estimator's online centre trackers of this level value
        #: (:class:`retry_bot.predict.estimator.Tracker`), ``None`` before its first sample.
        self.surprise: Any = None
        #: On a package's own level value: the pooled predictive spread of its keys, per fallback
        #: level (``{level: [decayed sum of squared errors, decayed weight]}``), ``None`` before any
        #: (the estimator's hierarchical prior for keys with few runs).
        self.spreads: Any = None


class Calibration:
    """Residuals of past predictions, to learn how wide the limit must be.

    For each run that finished, the standardised residual ``(log peak - centre) / spread``
    against the trusted model *as it stood just before the run was recorded* is kept, per
    group (trusted / untrusted run; the variability class, see the estimator).
    :meth:`best_z` turns a group's residuals into the limit that balances headroom
    against OOM kills: it is
    learned from how surprising builds have really been, not fitted to one
    farm.  Bounded buffers; each value is clipped, so one run (or one pull
    request) moves a margin by at most one rank.
    """

    CLIP = 8.0
    #: Bounds of the OOM-budget feedback on the price of a kill (a factor of 1/50 .. 50).
    PRICE_LOG_BOUND = math.log(50.0)

    def __init__(self, size: int = 2000):
        self.size = size
        #: log of the factor the OOM-budget feedback applies to the price of a kill.
        self.price_log = 0.0
        self.kills = 0
        self.outcomes = 0
        self._sorted: dict[tuple[bool, int], list[float]] = {}
        self._fifo: dict[tuple[bool, int], deque[float]] = {}
        self._version: dict[tuple[bool, int], int] = {}
        self._cache: dict[Any, tuple[int, float]] = {}
        self._adds_to: dict[tuple[bool, int], int] = {}

    def add(self, trusted: bool, level: int, residual: float, pool: bool = True) -> None:
        import bisect

        r = max(-self.CLIP, min(self.CLIP, residual))
        for group in ((trusted, level), (trusted, -1)) if pool else ((trusted, level),):
            srt = self._sorted.setdefault(group, [])
            fifo = self._fifo.setdefault(group, deque())
            if len(fifo) >= self.size:
                old = fifo.popleft()
                del srt[bisect.bisect_left(srt, old)]
            fifo.append(r)
            bisect.insort(srt, r)
            # the cached margin is refreshed every 20 additions to a young group, every 200 after
            self._adds_to[group] = self._adds_to.get(group, 0) + 1
            if self._adds_to[group] % (20 if len(fifo) < 400 else 200) == 0 or len(fifo) < 20:
                self._version[group] = self._version.get(group, 0) + 1

    def best_z(self, trusted: bool, level: int, price: float, scale: float, min_count: int) -> float | None:
        """The standardised limit z minimising ``exp(z * scale) + price * P(residual > z)`` (cached).

        The group holds standardised residuals ``(log peak - centre) / spread`` of past runs;
        ``scale`` is the job's own spread and ``price`` the cost of a kill in units of its
        centre: a steady key (small spread) or a large job gets a z its tail allows, a noisy
        key or a small job a wider one (the Lagrangian of the OOM budget, per job).
        """
        return self._argmin(trusted, level, price, scale, min_count, start=0.5)

    def best_margin(self, trusted: bool, level: int, price: float, min_count: int) -> float | None:
        """The log-margin m minimising ``exp(m) + price * P(residual > m)`` (cached per group).

        ``price`` is the cost of one OOM kill in units of the job's base limit:
        groups whose surprises are rare get a thin margin, groups with heavy
        tails accept a few more kills rather than a huge margin for everyone.
        """
        return self._argmin(trusted, level, price, 1.0, min_count, start=0.75)

    def _argmin(self, trusted: bool, level: int, price: float, scale: float, min_count: int, *,
                start: float) -> float | None:
        """The residual r (from the ``start`` quantile up) minimising ``exp(r * scale) + price * P(residual > r)``.

        The key's level group first, then the pooled group (``-1``) when the level has fewer than
        ``min_count`` residuals; cached per group until the group's version moves.
        """
        for group in ((trusted, level), (trusted, -1)) if level >= 0 else ((trusted, level),):
            srt = self._sorted.get(group)
            if not srt or len(srt) < min_count:
                continue
            ck = (group, price, scale, start)
            cached = self._cache.get(ck)
            if cached is not None and cached[0] == self._version.get(group, 0):
                return cached[1]
            n = len(srt)
            best, best_r = math.inf, srt[-1]
            exp = math.exp
            for k in range(int(n * start), n):
                r = srt[k]
                cost = exp(r * scale) + price * (n - 1 - k) / n
                if cost < best:
                    best, best_r = cost, r
            if len(self._cache) > 200_000:
                self._cache.clear()
            self._cache[ck] = (self._version.get(group, 0), best_r)
            return best_r
        return None

    def note_outcome(self, killed: bool, budget_rate: float, gain: float) -> None:
        """OOM-budget feedback: a kill raises the price of kills, a finished job lowers it.

        Stochastic approximation of ``P(kill per job) = budget_rate``: the log price moves by
        ``gain * (1 - budget_rate)`` per kill and ``-gain * budget_rate`` per finished job, so it
        stops moving when kills come at the budgeted rate.
        """
        self.outcomes += 1
        self.kills += killed
        step = gain * ((1.0 - budget_rate) if killed else -budget_rate)
        self.price_log = max(-self.PRICE_LOG_BOUND, min(self.PRICE_LOG_BOUND, self.price_log + step))

    def count(self, trusted: bool, level: int = -1) -> int:
        return len(self._sorted.get((trusted, level), ()))

    def quantile(self, trusted: bool, level: int, q: float, min_count: int) -> float | None:
        """The ``q`` quantile of the group's residuals (level, else all levels), ``None`` if too few."""
        for group in ((trusted, level), (trusted, -1)):
            srt = self._sorted.get(group)
            if srt and len(srt) >= min_count:
                i = min(len(srt) - 1, max(0, int(math.ceil(q * len(srt))) - 1))
                return srt[i]
        return None


class HistoryIndex:
    """Observations indexed by every fallback level of their key.

    Trusted observations train the model.  Untrusted ones (pull requests)
    never do: they are kept only under their own ref, where they can *raise*
    the allocation of later jobs of the same ref (a pull request that needs
    more memory gets it on its next push), never lower anything, and never
    touch another ref's allocation.
    """

    def __init__(self, keys: KeySettings, max_samples: int = 24, max_refs: int = 4096, max_keys: int = 100_000):
        self.keys = keys
        self.max_samples = max_samples
        self.max_refs = max_refs
        #: At most this many values per fallback level (the least recently updated go first):
        #: with ``max_samples`` and the bounded calibration, the index's memory is bounded
        #: however long the history.
        self.max_keys = max_keys
        self._levels: list[dict[tuple[str, ...], LevelHistory]] = [{} for _ in keys.levels]
        self._refs: "OrderedDict[str, list[dict[tuple[str, ...], LevelHistory]]]" = OrderedDict()
        self.calibration = Calibration()
        #: The farm-wide pooled predictive spread per fallback level, the same as
        #: :attr:`LevelHistory.spreads` over every package (the estimator's prior of last resort).
        self.spread_pool: dict[int, list[float]] = {}
        self._lk_cache: dict[JobKey, list[tuple[int, tuple[str, ...]]]] = {}
        #: The last trusted peaks of the whole fleet (their mean is the unit of ``oom_cost``).
        self._fleet: deque[float] = deque(maxlen=2000)
        self._fleet_sum = 0.0
        #: Trusted runs' (peak / static request, mean / static request, run time), per static size: how
        #: hand-made sizes relate to real use, for jobs without any history of their own.
        self.static_ratios: dict[int, deque[tuple[float, float, float]]] = {}
        #: Optional hook ``(obs, trusted) -> None`` called before an observation is stored
        #: (the estimator uses it to record calibration residuals).
        self.on_add: Any = None
        #: Optional hook ``(level history, obs) -> None`` called for each level a trusted
        #: sample is stored under, before it is (the estimator's centre trackers).
        self.on_sample: Any = None
        self.count = 0

    def add(self, obs: Observation, trusted: bool = True) -> None:
        """Record an observation: under every level of its key if trusted, else under its ref only."""
        if obs.is_oom:
            if not obs.oom_limit_bytes or obs.oom_limit_bytes <= 0:
                return
        elif not obs.memory_peak_bytes or obs.memory_peak_bytes <= 0:
            return
        if self.on_add is not None:
            self.on_add(self, obs, trusted)
        self.count += 1
        if trusted:
            tables = self._levels
            if not obs.is_oom:
                if len(self._fleet) == self._fleet.maxlen:
                    self._fleet_sum -= self._fleet[0]
                self._fleet.append(float(obs.memory_peak_bytes or 0.0))
                self._fleet_sum += float(obs.memory_peak_bytes or 0.0)
        else:
            if not obs.ref:
                return
            tables = self._refs.get(obs.ref)
            if tables is None:
                tables = self._refs[obs.ref] = [{} for _ in self.keys.levels]
                while len(self._refs) > self.max_refs:
                    self._refs.popitem(last=False)
            else:
                self._refs.move_to_end(obs.ref)
        for i, lk in self._level_keys(obs.key):
            table = tables[i]
            h = table.pop(lk, None)
            if h is None:
                h = LevelHistory(self.max_samples)
                if len(table) >= self.max_keys:
                    del table[next(iter(table))]   # the least recently updated value of this level
            table[lk] = h
            if obs.is_oom:
                h.ooms.append(obs)
            else:
                if trusted and self.on_sample is not None:
                    self.on_sample(h, obs)
                h.samples.append(obs)
                h.cache = None
                if h.ooms:
                    # a run above a kill's limit, after it, shows the need the kill bounded: that kill
                    # is resolved for good (kept, it would floor the limit again once this run left
                    # the max_samples window)
                    peak = float(obs.memory_peak_bytes or 0.0)
                    if any(o.at <= obs.at and float(o.oom_limit_bytes or 0.0) < peak for o in h.ooms):
                        h.ooms = deque((o for o in h.ooms if not (o.at <= obs.at
                                                                  and float(o.oom_limit_bytes or 0.0) < peak)),
                                       maxlen=h.ooms.maxlen)

    def extend(self, observations: Iterable[tuple[Observation, bool]]) -> None:
        """Add ``(observation, trusted)`` pairs in time order."""
        for o, trusted in sorted(observations, key=lambda p: p[0].at):
            self.add(o, trusted)

    def fleet_mean_peak(self) -> float | None:
        """Mean peak of the last (up to 2000) trusted runs of any key; ``None`` before any."""
        return self._fleet_sum / len(self._fleet) if self._fleet else None

    def levels_for(self, key: JobKey, ref: str | None = None) -> list[tuple[int, tuple[str, ...], LevelHistory]]:
        """``(level index, level values, history)`` for each level with any history, most specific first.

        With ``ref``: the untrusted, ref-scoped history of that ref instead.
        """
        if ref is None:
            tables = self._levels
        else:
            tables = self._refs.get(ref)
            if tables is None:
                return []
        out = []
        for i, lk in self._level_keys(key):
            h = tables[i].get(lk)
            if h is not None:
                out.append((i, lk, h))
        return out

    def _level_keys(self, key: JobKey) -> list[tuple[int, tuple[str, ...]]]:
        got = self._lk_cache.get(key)
        if got is None:
            got = []
            for i, level in enumerate(self.keys.levels):
                lk = key.level_key(level)
                if lk is not None:
                    got.append((i, lk))
            if len(self._lk_cache) > 200_000:
                self._lk_cache.clear()
            self._lk_cache[key] = got
        return got


def parse_time(value: Any) -> float | None:
    """ISO-8601 (``Z`` or offset) or POSIX seconds -> POSIX seconds; ``None`` when unusable."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    d = parse_iso_time(value)
    return None if d is None else d.timestamp()


def observation_from_record(record: UsageRecord | Mapping[str, Any], keys: KeySettings) -> Observation | None:
    """Turn a :class:`runner_wrapper.record.UsageRecord` (or its dict) into an observation.

    An OOM-killed record becomes an OOM bound at the memory limit in force
    (no bound is known without a limit: returns ``None``); a successful one a
    sample.  Returns ``None`` when the record has no usable figures.
    """
    from runner_wrapper.record import UsageRecord

    rec = record if isinstance(record, UsageRecord) else UsageRecord.from_dict(record)
    at = parse_time(rec.finished_at)
    if at is None:
        return None
    key = extract_key(keys, job_name=rec.job.name, variables=rec.job.variables or {},
                      project=rec.job.project_path)
    u = rec.usage
    if rec.oom_killed:
        lim = rec.limits.memory_limit_bytes
        if not lim:
            return None
        return Observation(key=key, at=at, oom_limit_bytes=float(lim), job_id=rec.job.id, ref=rec.job.ref)
    if rec.exit_code not in (0, None):
        return None
    if not u.memory_peak_bytes:
        return None
    mean = u.memory_mean_bytes if u.memory_mean_bytes else u.memory_peak_bytes
    cpu_mean = u.cpu_mean_cores
    if cpu_mean is None and u.wall_seconds and (u.cpu_user_seconds is not None):
        cpu_mean = ((u.cpu_user_seconds or 0.0) + (u.cpu_system_seconds or 0.0)) / u.wall_seconds
    return Observation(key=key, at=at, memory_peak_bytes=float(u.memory_peak_bytes),
                       memory_mean_bytes=float(mean), cpu_mean_cores=cpu_mean,
                       cpu_max_cores=u.cpu_max_cores, duration_s=u.wall_seconds, job_id=rec.job.id,
                       ref=rec.job.ref)


def record_ref(record: UsageRecord | Mapping[str, Any]) -> tuple[str | None, bool | None]:
    """``(ref, protected)`` of a usage record or its dict."""
    if isinstance(record, Mapping):
        job = record.get("job") or {}
        return job.get("ref"), job.get("protected")
    return record.job.ref, record.job.protected
