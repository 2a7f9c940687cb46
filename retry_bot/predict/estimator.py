"""The estimator: from decayed history to memory/CPU requests and limits.

Model (all figures in :class:`Allocation.figures`):

* **Fallback.** Walk the key's levels, most specific first; use the first
  with at least ``min_samples`` trusted runs, else the most specific level
  with any run (its short history widens the margin), else no history.
* **Weights.** A run observed ``a`` hours before now weighs ``0.5 ** (a /
  half_life_hours)``; ``n`` is the effective sample size (Kish).
* **Request** (memory and CPU): the weighted mean of the runs' *mean* usage
  times ``memory_request_factor`` / ``cpu_request_factor`` - typical use,
  so nodes are packed by what jobs really use.
* **Memory limit** ``exp(centre + z x spread)``: the key's centre and predictive spread
  come from its best centre tracker (:class:`Tracker`: time-decayed means of log peak at
  several half-lives, and the package's means plus the level's learned offset
  (:func:`_track_relative`), each scored on the next run; the winner's RMS error, shrunk toward
  what the package's pooled noise predicts for it, is the spread),
  else the sample statistics (weighted mean and spread of log peak, shrunk toward the key's
  hierarchical prior where ``n`` is small, times ``sqrt(1 + 1/n)``: the pooled spread of its
  package's other keys at that level, shrunk toward the farm's, :func:`sibling_prior` and
  :func:`shrunk_spread`); a bimodal key
  (:func:`upper_mode`) is sized for its upper mode with the within-mode spread.  ``z``
  minimises ``exp(z x spread) + price x P(residual > z)`` over the standardised residuals
  of past runs of the job's variability class (level, history, spread, bimodal, drifting),
  ``price`` = ``oom_cost`` x the fleet's mean peak x the OOM-budget feedback, over
  ``exp(centre)``: a kill costs as much as that many bytes of headroom.  Floors: the recent
  max peak (``recent_max_floor``), the peaks of more specific levels and the job's own ref,
  x (1 + limit_margin).  No limit while the level used has fewer than ``limit_min_runs`` runs
  (``limit_min_runs_other_builds`` for a level not naming the job's version and variants).
* **OOM kills are censored data.** A trusted run killed at ``L`` says only
  "need > L": it never enters the peak statistics, but it puts a floor of
  ``max(L * oom_bump_ratio, L + oom_min_bump_bytes)`` under the limit for
  ``oom_memory_hours``, until a later run above ``L`` shows the need.  More kill evidence
  can only raise the limit.
* **No history**: the job's static size (its own request) or the defaults;
  ``cold_limit`` says what limit: ``none`` (no limit: the job runs under the
  runner's default limit, as without a predictor; its request is the typical
  use of jobs with the same static size, never more than that size), ``learned`` (the
  static size times how far peaks of other jobs with that static size went
  beyond it, and a request scaled the same way) or ``factor`` (request x
  ``cold_limit_factor``).
* **Clamp** to the runner classes' largest memory/CPU and the floors.

Pure: no I/O, no clock (``now`` is an argument), deterministic.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from retry_bot.predict.history import HistoryIndex, LevelHistory, Observation
from retry_bot.predict.keys import JobKey
from retry_bot.predict.settings import DEFAULT_SETTINGS, PredictionSettings

__all__ = ["Allocation", "StaticSize", "Clamp", "estimate", "predict", "predict_for_retry", "resize_prediction",
           "gantry_variables",
           "new_index", "attach", "record_calibration"]

HOUR = 3600.0


@dataclass(frozen=True)
class StaticSize:
    """What the job would get without a predictor (its static mapping / own variables)."""

    memory_request_bytes: float | None = None
    cpu_request_cores: float | None = None
    memory_limit_bytes: float | None = None


@dataclass(frozen=True)
class Clamp:
    """Bounds from the policy's runner classes (``None``: unbounded)."""

    max_memory_bytes: float | None = None
    max_cpu_cores: float | None = None


@dataclass(frozen=True)
class Allocation:
    """A prediction: requests and limits, with the reasoning behind them."""

    memory_request_bytes: int
    memory_limit_bytes: int | None
    cpu_request_cores: float
    cpu_limit_cores: float | None
    #: The key level used, e.g. ``package=hdf5 version=1.14.3``; ``""`` without history.
    key: str = ""
    #: Index of the level in the fallback chain (0 = most specific); ``None`` without history.
    level: int | None = None
    #: Trusted runs behind the figures (successful samples at the level used).
    samples: int = 0
    #: ``history``, ``static``, ``default`` (no history), ``retry`` (after OOM kills).
    source: str = "history"
    #: Explanation figures (bytes, cores, ratios), for ``retry-bot predict`` and logs.
    figures: Mapping[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "memory_request_bytes": self.memory_request_bytes,
            "memory_limit_bytes": self.memory_limit_bytes,
            "cpu_request_cores": self.cpu_request_cores,
            "cpu_limit_cores": self.cpu_limit_cores,
            "key": self.key,
            "level": self.level,
            "samples": self.samples,
            "source": self.source,
            "figures": dict(self.figures),
        }


def gantry_variables(alloc: Allocation) -> dict[str, str]:
    """The ``variables`` object spack-gantry's ``/v1/allocation`` answers (decimal M, millicores)."""

    def mem(n: int) -> str:  # always decimal megabytes, rounded up, as gantry's k8s.py ("9577M")
        return f"{-(-int(n) // 10**6)}M"

    def cpu(c: float) -> str:  # always millicores, rounded up ("11779m")
        return f"{math.ceil(round(c * 1000, 6))}m"

    out = {
        "KUBERNETES_CPU_REQUEST": cpu(alloc.cpu_request_cores),
        "KUBERNETES_MEMORY_REQUEST": mem(alloc.memory_request_bytes),
    }
    if alloc.cpu_limit_cores is not None:
        out["KUBERNETES_CPU_LIMIT"] = cpu(alloc.cpu_limit_cores)
    if alloc.memory_limit_bytes is not None:
        out["KUBERNETES_MEMORY_LIMIT"] = mem(alloc.memory_limit_bytes)
    return out


# ------------------------------------------------------------------ statistics
@dataclass(frozen=True)
class _Stats:
    n: float           # effective sample size
    count: int         # raw number of samples
    mu: float          # weighted mean log peak
    spread: float      # weighted sd of log peak (observed, 0 with one sample)
    recent_max: float  # largest peak among recent runs
    mem_mean: float    # weighted mean of mean memory
    cpu_mean: float | None
    cpu_upper: float | None
    #: The upper mode of a key whose runs fall in two separate groups (:func:`upper_mode`), else ``None``.
    top: "Mode | None" = None


@dataclass(frozen=True)
class Mode:
    """The upper of two modes of a key's log peaks: its mean, the within-mode spread, its runs."""

    mean: float
    spread: float
    runs: int
    low_runs: int


def upper_mode(xs: Sequence[float], settings: PredictionSettings = DEFAULT_SETTINGS) -> Mode | None:
    """The upper mode of log peaks ``xs`` (oldest first) when they fall in two separate groups, else ``None``.

    A bimodal package (a share of its builds need far more: tests, LTO, a parallel link,
    with nothing in the spec telling which) is sized for its upper mode, with the spread
    *within* a mode: a log-normal fitted over both modes would put the limit well above the
    upper one.  Two groups: the widest gap between sorted values is at least
    ``mode_gap`` times the pooled within-group spread (and 0.2 in log), each side has at least
    two runs and a quarter of ``mode_min_runs`` runs in all, and the upper group has runs in
    both the older and the newer half of the window (interleaved: a bimodal key, not a step
    down, which the trackers follow).
    """
    n = len(xs)
    if settings.mode_gap <= 0 or n < settings.mode_min_runs:
        return None
    order = sorted(range(n), key=xs.__getitem__)
    srt = [xs[i] for i in order]
    k = max(range(1, n), key=lambda i: srt[i] - srt[i - 1])
    low, high = srt[:k], srt[k:]
    if len(low) < 2 or len(high) < 2:
        return None
    ml, mh = sum(low) / len(low), sum(high) / len(high)
    ss = sum((x - ml) ** 2 for x in low) + sum((x - mh) ** 2 for x in high)
    within = math.sqrt(ss / max(n - 2, 1))
    gap = srt[k] - srt[k - 1]
    if gap < max(settings.mode_gap * within, 0.2):
        return None
    upper_idx = order[k:]
    half = n // 2
    if not (any(i < half for i in upper_idx) and any(i >= half for i in upper_idx)):
        return None
    return Mode(mean=mh, spread=within, runs=len(high), low_runs=len(low))


def _stats(samples: Sequence[Observation], now: float, settings: PredictionSettings) -> _Stats:
    """Weighted statistics of the samples.

    Weights are relative to the newest sample: every figure is a ratio of
    weighted sums, so a common factor (the age of the newest sample at
    ``now``) cancels, and the result does not depend on ``now``; it is cached
    per level history until a sample is added.
    """
    hl = settings.half_life_hours * HOUR
    ws: list[float] = []
    xs: list[float] = []
    W = W2 = sx = sm = 0.0
    cw = cs = 0.0
    cmax_w = cmax_s = 0.0
    recent_max = 0.0
    newest = max(o.at for o in samples)
    for o in samples:
        w = 0.5 ** (max(0.0, newest - o.at) / hl)
        peak = float(o.memory_peak_bytes or 0.0)
        x = math.log(peak)
        ws.append(w)
        xs.append(x)
        W += w
        W2 += w * w
        sx += w * x
        sm += w * float(o.memory_mean_bytes or peak)
        if o.cpu_mean_cores is not None:
            cw += w
            cs += w * o.cpu_mean_cores
            cmax_w += w
            cmax_s += w * (o.cpu_max_cores if o.cpu_max_cores is not None else o.cpu_mean_cores)
        # "recent": within two half-lives of the newest observation
        if newest - o.at <= 2 * hl:
            recent_max = max(recent_max, peak)
    mu = sx / W
    n = (W * W) / W2 if W2 > 0 else 0.0
    var = sum(w * (x - mu) ** 2 for w, x in zip(ws, xs)) / W
    if n > 1:
        var *= n / (n - 1)  # unbiased for the effective size
    return _Stats(
        n=n, count=len(samples), mu=mu, spread=math.sqrt(max(var, 0.0)), recent_max=recent_max,
        top=upper_mode(xs, settings),
        mem_mean=sm / W, cpu_mean=(cs / cw) if cw > 0 else None,
        cpu_upper=(cmax_s / cmax_w) if cmax_w > 0 else None,
    )


def _level_stats(h: LevelHistory, now: float, settings: PredictionSettings) -> _Stats:
    c = h.cache
    if c is not None and c[0] == settings.half_life_hours:
        return c[1]
    st = _stats(h.samples, now, settings)
    h.cache = (settings.half_life_hours, st)
    return st


def _oom_floor(h: LevelHistory | None, now: float, settings: PredictionSettings) -> float:
    """The floor OOM kills put under the limit: ``max(L x oom_bump_ratio, L + oom_min_bump_bytes)``.

    A kill at ``L`` is censored data ("need > L") and holds only until the need is seen: a
    later run of the level that peaked above ``L`` (typically the killed job's own successful
    retry) resolves it, and from then on the model, which has that peak, decides.
    """
    if h is None or not h.ooms:
        return 0.0
    horizon = settings.oom_memory_hours * HOUR
    floor = 0.0
    for o in h.ooms:
        if now - o.at <= horizon:
            lim = float(o.oom_limit_bytes or 0.0)
            if any(x.at >= o.at and (x.memory_peak_bytes or 0.0) > lim for x in h.samples):
                continue
            floor = max(floor, lim * settings.oom_bump_ratio, lim + settings.oom_min_bump_bytes)
    return floor


def _clamp_mem(v: float, settings: PredictionSettings, clamp: Clamp) -> int:
    v = math.ceil(max(v, float(settings.min_memory_bytes)))
    hi = clamp.max_memory_bytes or (settings.max_memory_bytes or None)
    if hi:
        v = min(v, max(math.floor(hi), 1))
    return int(v)


def _clamp_cpu(v: float, settings: PredictionSettings, clamp: Clamp) -> float:
    v = round(max(v, settings.min_cpu_cores), 3)
    hi = clamp.max_cpu_cores or (settings.max_cpu_cores or None)
    if hi:
        v = min(v, float(hi))
    return v


def _finish(mem_req: float, mem_lim: float | None, cpu_req: float, cpu_lim: float | None,
            settings: PredictionSettings, clamp: Clamp, **kw) -> Allocation:
    mreq = _clamp_mem(mem_req, settings, clamp)
    mlim = None if mem_lim is None else max(_clamp_mem(mem_lim, settings, clamp), mreq)
    if mlim is not None and mreq > mlim:  # pragma: no cover - guarded above
        mreq = mlim
    creq = _clamp_cpu(cpu_req, settings, clamp)
    clim = None if cpu_lim is None else max(_clamp_cpu(cpu_lim, settings, clamp), creq)
    return Allocation(memory_request_bytes=mreq, memory_limit_bytes=mlim, cpu_request_cores=creq,
                      cpu_limit_cores=clim, **kw)


# ------------------------------------------------------------------ predictions
def _choose(levels: Sequence[tuple[int, tuple[str, ...], LevelHistory]], settings: PredictionSettings):
    for entry in levels:
        if len(entry[2].samples) >= settings.min_samples:
            return entry
    for entry in levels:
        if entry[2].samples:
            return entry
    return None


def shrunk_spread(own: float, runs: float, prior: float, weight: float) -> float:
    """The key's spread (sd of log peak) from ``own`` (observed over ``runs`` runs) and a ``prior``.

    Empirical Bayes on the variance: ``runs - 1`` degrees of freedom of the key's own against
    ``weight`` runs' worth of the prior, ``sqrt(((runs-1) own^2 + weight prior^2) / (runs-1+weight))``,
    and never below ``own`` (a few steady runs do not make a key steadier than it was seen to be).
    Tends to ``own`` as runs accrue; grows with ``prior``.
    """
    dof = max(runs - 1.0, 0.0)
    if dof + weight <= 0:
        return own
    return max(own, math.sqrt((dof * own * own + weight * prior * prior) / (dof + weight)))


def sibling_prior(siblings: tuple[float, float] | None, farm_var: float, weight: float) -> float:
    """The spread a key of a package starts from: its siblings' pooled one, shrunk toward the farm's.

    ``siblings`` is ``(decayed sum of squared one-step errors of log peak, decayed weight)`` of the
    package's other keys at the same level (other versions / compilers / variants), ``farm_var``
    the farm-wide pooled variance at that level, ``weight`` how many sibling runs' worth the farm
    figure carries.  Monotone in both.
    """
    ss, w = siblings if siblings is not None else (0.0, 0.0)
    return math.sqrt((ss + weight * farm_var) / (w + weight)) if (w + weight) > 0 else math.sqrt(farm_var)


def _spread(st: _Stats, settings: PredictionSettings, prior: float | None = None) -> float:
    """The spread used: observed, shrunk toward ``prior`` (the hierarchical prior, else
    ``prior_spread``) where history is short, times sqrt(1 + 1/n)."""
    p = settings.prior_spread if prior is None else prior
    s_eff = shrunk_spread(st.spread, st.n, p, settings.prior_weight)
    return max(s_eff, settings.min_spread) * math.sqrt(1.0 + 1.0 / max(st.n, 1e-9))


def _min_runs(level: int, settings: PredictionSettings) -> int:
    """Runs the level used needs before its key gets a limit: ``limit_min_runs``, or
    ``limit_min_runs_other_builds`` for a Spack level that does not name the version and the
    variants (the job's own build never seen: its size is other builds' of the package, which can
    differ by any factor)."""
    names = settings.keys.levels[level]
    if "package" in names and not ("version" in names and "variants" in names):
        return max(settings.limit_min_runs, settings.limit_min_runs_other_builds)
    return settings.limit_min_runs


def _parent(levels: Sequence[tuple[int, tuple[str, ...], LevelHistory]],
            settings: PredictionSettings) -> LevelHistory | None:
    """The package's own level value among ``levels`` (else the least specific one): where siblings pool."""
    names = settings.keys.levels
    for i, _, h in levels:
        if names[i] == ("package",):
            return h
    return levels[-1][2] if levels else None


def _prior(index: HistoryIndex | None, levels: Sequence[tuple[int, tuple[str, ...], LevelHistory]],
           level: int, settings: PredictionSettings) -> float | None:
    """The hierarchical prior spread of the key at ``level``: its package's keys, then the farm's."""
    if index is None or settings.sibling_weight <= 0:
        return None
    farm = index.spread_pool.get(level)
    farm_var = farm[0] / farm[1] if farm and farm[1] >= 1.0 else settings.prior_spread ** 2
    parent = _parent(levels, settings)
    sib = parent.spreads.get(level) if parent is not None and parent.spreads else None
    return sibling_prior(None if sib is None else (sib[0], sib[1]), farm_var, settings.sibling_weight)


def _pool_spread(index: HistoryIndex, levels: Sequence[tuple[int, tuple[str, ...], LevelHistory]],
                 x: float, settings: PredictionSettings) -> None:
    """Add a run's one-step errors (log peak ``x`` against each level's slow mean before it) to the pools.

    The squared error of a mean of ``m`` runs is ``sigma^2 (1 + 1/m)``: each is divided by that
    to estimate the key's own ``sigma^2``, pooled (decayed) per level under the package and farm-wide.
    """
    if settings.sibling_weight <= 0:
        return
    parent = _parent(levels, settings)
    keep_p = 1.0 - 1.0 / settings.sibling_memory_runs
    keep_f = 1.0 - 1.0 / settings.farm_memory_runs
    for i, _, h in levels:
        tr = h.surprise
        if tr is None or tr.at is None:
            continue
        # against the level's best tracker (its slowest before one is scored): the error of the centre
        # the model would use, not of a mean that lags a drifting key
        b = tr.best(settings)
        j = b if b is not None else len(tr.sw) - 1
        m = tr.sw[j]
        if m <= 0:
            continue
        e = max(-2.0, min(2.0, x - tr.sx[j] / m))
        v = e * e / (1.0 + 1.0 / m)
        if parent is not None:
            if parent.spreads is None:
                parent.spreads = {}
            acc = parent.spreads.setdefault(i, [0.0, 0.0])
            acc[0] = acc[0] * keep_p + v
            acc[1] = acc[1] * keep_p + 1.0
        acc = index.spread_pool.setdefault(i, [0.0, 0.0])
        acc[0] = acc[0] * keep_f + v
        acc[1] = acc[1] * keep_f + 1.0


def _static_bucket(nbytes: float) -> int:
    """Static sizes in ~10 % wide buckets (hand-made sizes are round numbers)."""
    return int(round(math.log(max(nbytes, 1.0)) / math.log(1.1)))


def _group(level: int, st: _Stats, h: LevelHistory | None = None,
           settings: PredictionSettings = DEFAULT_SETTINGS, base: Sequence[float] | None = None) -> int:
    """Calibration group: fallback level (exact / near / package-wide), history length, spread."""
    lv = 0 if level == 0 else (1 if level <= 2 else 2)
    if st.count < settings.prior_runs:  # few runs: the spread is mostly the hierarchical prior
        return 300 + lv * 4 + min(st.count, 4) - 1
    if st.top is not None:  # bimodal keys' residuals (against their upper mode) are a class of their own
        return 100 + lv
    sp = 0 if st.spread < 0.07 else (1 if st.spread < 0.14 else (2 if st.spread < 0.28 else 3))
    g = (lv * 2 + (1 if st.count >= 8 else 0)) * 4 + sp
    tr = h.surprise if h is not None else None
    if tr is not None:
        i = tr.best(settings, base)
        if i is not None and _half_life(i, settings) < settings.half_life_hours:
            return 200 + g  # drifting: a faster tracker than the default predicts it better
    return g


class Tracker:
    """One key level's centre trackers, each scored on how well it predicted the next run.

    Autopilot's recommender ensemble, reduced to what a CI key needs (``peers.md`` §8: models
    with different decay rates, the one with the smallest recent loss wins): for each
    half-life of ``tracker_half_lives_hours`` a time-decayed mean of log(peak), and the
    decayed mean of its squared one-step-ahead error (each run judged against the means
    *before* it was added).  A drifting key is followed by a fast tracker, a steady or
    noisy one by a slow one, a key that changed regime switches as soon as the fast tracker
    predicts better; the winner's error is the key's *predictive* spread: noise, lag and
    estimation error together, measured rather than assumed.  O(1) per run and level.
    """

    __slots__ = ("at", "sw", "sx", "err", "n", "rel")

    def __init__(self, k: int) -> None:
        self.at: float | None = None
        self.sw = [0.0] * k
        self.sx = [0.0] * k
        self.err = [0.0] * k
        self.n = 0.0
        #: Package-relative candidates (:func:`_track_relative`): ``[offset weights, offset sums,
        #: decayed squared errors, decayed count]``, ``None`` before the level's first relative run.
        self.rel: list | None = None

    def update(self, x: float, at: float, settings: PredictionSettings) -> None:
        """Score every tracker on ``x`` (the log peak of a run known at ``at``), then add it."""
        hls = settings.tracker_half_lives_hours
        if self.at is not None:
            keep = 1.0 - settings.tracker_rate
            for i in range(len(hls)):
                e = x - self.sx[i] / self.sw[i]
                self.err[i] = self.err[i] * keep + e * e
            self.n = self.n * keep + 1.0
            dt = max(0.0, at - self.at)
        else:
            dt = 0.0
        for i, hl in enumerate(hls):
            d = 0.5 ** (dt / (hl * HOUR))
            self.sw[i] = self.sw[i] * d + 1.0
            self.sx[i] = self.sx[i] * d + x
        self.at = at if self.at is None else max(self.at, at)

    def best(self, settings: PredictionSettings, base: Sequence[float] | None = None) -> int | None:
        """The candidate with the smallest recent mean squared error (``None`` before ``tracker_min_runs``
        were scored): ``i < k`` the level's own tracker ``i``, ``k + i`` its package-relative one
        (``base[i]`` + the level's offset; only with ``base``, the package's base centres)."""
        k = len(self.err)
        best, best_i = math.inf, None
        if self.at is not None and self.n >= settings.tracker_min_runs:
            for i in range(k):
                if self.err[i] / self.n < best:
                    best, best_i = self.err[i] / self.n, i
        rel = self.rel
        if base is not None and rel is not None and rel[3] >= settings.tracker_min_runs:
            for i in range(k):
                if rel[0][i] > 0 and rel[2][i] / rel[3] < best:
                    best, best_i = rel[2][i] / rel[3], k + i
        return best_i

    def centre_scale(self, s_prior: float, settings: PredictionSettings,
                     base: Sequence[float] | None = None, noise: float | None = None) -> tuple[float, float, int] | None:
        """``(centre, predictive spread, candidate)``: the best candidate's centre and its RMS error,
        shrunk by ``tracker_prior`` runs' worth of weight toward what the key's noise says that
        candidate's error should be, ``noise x sqrt(1 + 1/m)`` for a mean of ``m`` (decayed) runs
        (``noise``: the hierarchical prior, its package's pooled spread), else toward ``s_prior``;
        ``None`` if none is ready.  A tracker's own error is measured over a few runs (noisy, and a
        noisy spread makes heavy-tailed residuals: wide limits for everyone); the package's is
        measured over all its builds."""
        i = self.best(settings, base)
        if i is None:
            return None
        w = settings.tracker_prior
        k = len(self.err)
        if i >= k:
            assert base is not None and self.rel is not None
            ow, os_, rerr, rn = self.rel
            m = i - k
            if noise is not None:
                s_prior = noise * math.sqrt(1.0 + 1.0 / ow[m])
            scale = math.sqrt((w * s_prior * s_prior + rerr[m]) / (w + rn))
            return base[m] + os_[m] / ow[m], max(scale, settings.min_spread), i
        if noise is not None:
            s_prior = noise * math.sqrt(1.0 + 1.0 / self.sw[i])
        scale = math.sqrt((w * s_prior * s_prior + self.err[i]) / (w + self.n))
        return self.sx[i] / self.sw[i], max(scale, settings.min_spread), i


def _half_life(candidate: int, settings: PredictionSettings) -> float:
    """The half-life of a :meth:`Tracker.best` candidate (own or package-relative)."""
    hls = settings.tracker_half_lives_hours
    return hls[candidate % len(hls)]


def _base(levels: Sequence[tuple[int, tuple[str, ...], LevelHistory]],
          settings: PredictionSettings) -> list[float] | None:
    """The package's centres (its own level value's trackers, one per half-life: every build of the
    package moves them), ``None`` without them (or when ``package_trackers`` is off)."""
    if not settings.package_trackers or not settings.tracker_half_lives_hours:
        return None
    parent = _parent(levels, settings)
    tr = parent.surprise if parent is not None else None
    if tr is None or tr.at is None:
        return None
    return [tr.sx[i] / tr.sw[i] for i in range(len(tr.sw))]


def _track_relative(levels: Sequence[tuple[int, tuple[str, ...], LevelHistory]], x: float,
                    settings: PredictionSettings, base: Sequence[float]) -> None:
    """Feed a trusted run (log peak ``x``) to the package-relative candidates of its key's levels.

    A package's size moves for all its builds at once (a new dependency, a changed test suite)
    while a build's offset from the package (its variants, compiler, target) stays.  Each level
    value below the package learns, slowly (``tracker_rate / 2`` per run), its offset from the
    package's own trackers (every build of the package moves them, :func:`_base`) at the time of
    each of its runs; ``package centre + offset`` is one more candidate centre of the level,
    scored on its next run like the level's own trackers (:meth:`Tracker.best`): a version or
    variant built rarely follows its package's drift once its offset is known.  The package's
    centres are the plain means of its runs (not offset-corrected: nothing circular to wander).
    Called before the run is added (scored against the centres before it, ``base``: :func:`_base`
    of the same moment); O(levels x half-lives).
    """
    k = len(base)
    parent = _parent(levels, settings)
    keep = 1.0 - settings.tracker_rate
    okeep = 1.0 - settings.tracker_rate / 2.0
    for _, _, h in levels:
        tr = h.surprise
        if h is parent or tr is None:
            continue
        if tr.rel is None:
            tr.rel = [[0.0] * k, [0.0] * k, [0.0] * k, 0.0]
        ow, os_, rerr, _ = tr.rel
        scored = False
        for i in range(k):
            if ow[i] > 0:
                e = x - (base[i] + os_[i] / ow[i])
                rerr[i] = rerr[i] * keep + e * e
                scored = True
            ow[i] = ow[i] * okeep + 1.0
            os_[i] = os_[i] * okeep + (x - base[i])
        if scored:
            tr.rel[3] = tr.rel[3] * keep + 1.0


def _track(h: LevelHistory, obs: Observation, settings: PredictionSettings) -> None:
    """``HistoryIndex.on_sample`` hook: feed a trusted run to the level's trackers."""
    if not obs.memory_peak_bytes or len(settings.tracker_half_lives_hours) == 0:
        return
    if h.surprise is None:
        h.surprise = Tracker(len(settings.tracker_half_lives_hours))
    h.surprise.update(math.log(obs.memory_peak_bytes), obs.at, settings)


def _centre_scale(h: LevelHistory, st: _Stats, settings: PredictionSettings,
                  prior: float | None = None, base: Sequence[float] | None = None) -> tuple[float, float, int]:
    """The level's centre (log bytes) and predictive spread: its best tracker's, else the sample statistics'.

    ``prior`` is the hierarchical prior spread (:func:`_prior`).  The third value is the tracker
    used (``-1``: the sample statistics).
    """
    s_used = _spread(st, settings, prior)
    if st.top is not None:  # bimodal: the upper mode, its spread within the mode (estimation included)
        m = st.top
        k = settings.prior_weight
        within = math.sqrt((st.count * max(m.spread, settings.min_spread) ** 2 + k * settings.min_spread ** 2)
                           / (st.count + k))
        return m.mean, max(within, settings.min_spread) * math.sqrt(1.0 + 1.0 / m.runs), -2
    tr = h.surprise
    if tr is not None:
        got = tr.centre_scale(s_used, settings, base, prior)
        if got is not None:
            return got
    return st.mu, s_used, -1


def record_calibration(index: HistoryIndex, obs: Observation, trusted: bool,
                       settings: PredictionSettings = DEFAULT_SETTINGS) -> None:
    """``HistoryIndex.on_add`` hook: residual of a finished run against the trusted model as it stood.

    The residual is ``(log peak - centre) / spread`` with the centre and predictive spread
    the model would have given just before this run was recorded (and the OOM-budget
    feedback counts the outcome).
    """
    if settings.oom_budget_per_100 > 0:
        index.calibration.note_outcome(obs.is_oom, settings.oom_budget_per_100 / 100.0, settings.oom_budget_gain)
    if obs.is_oom or not obs.memory_peak_bytes:
        return
    levels = index.levels_for(obs.key)
    chosen = _choose(levels, settings)
    pkg = _base(levels, settings)  # the package's centres before this run (it is added after)
    if chosen is not None:
        hist = chosen[2]
        st = _level_stats(hist, obs.at, settings)
        centre, scale, _ = _centre_scale(hist, st, settings, _prior(index, levels, chosen[0], settings), pkg)
        # the run's standardised residual against the model as it stood
        index.calibration.add(trusted, _group(chosen[0], st, hist, settings, pkg),
                              (math.log(obs.memory_peak_bytes) - centre) / scale)
    if trusted:
        _pool_spread(index, levels, math.log(obs.memory_peak_bytes), settings)
        if pkg is not None:
            _track_relative(levels, math.log(obs.memory_peak_bytes), settings, pkg)

    if trusted and obs.static_memory_bytes:
        d = index.static_ratios.setdefault(_static_bucket(obs.static_memory_bytes), deque(maxlen=500))
        d.append((obs.memory_peak_bytes / obs.static_memory_bytes,
                  float(obs.memory_mean_bytes or obs.memory_peak_bytes) / obs.static_memory_bytes,
                  float(obs.duration_s or 1.0)))
        index.calibration.add(True, _STATIC_GROUP - _static_bucket(obs.static_memory_bytes),
                              math.log(obs.memory_peak_bytes / obs.static_memory_bytes), pool=False)


def _typical_ratio(ratios: Sequence[tuple[float, float, float]]) -> float:
    """Mean memory over static size of past runs, weighted by their run time.

    What a request of ``static x ratio`` would have reserved for them is ``sum(static x ratio
    x t)``; their use was ``sum(mean x t)``: this ratio makes the two equal (a plain mean of
    ratios lets a few short runs far above their static size inflate every cold request).
    """
    w = sum(r[2] for r in ratios)
    return sum(r[1] * r[2] for r in ratios) / w if w > 0 else sum(r[1] for r in ratios) / len(ratios)


#: Calibration groups below this hold log(peak / static size) per static size bucket.
_STATIC_GROUP = -1000


def attach(index: HistoryIndex, settings: PredictionSettings = DEFAULT_SETTINGS) -> HistoryIndex:
    """Make ``index`` learn its calibration as observations arrive (returns it)."""
    index.on_add = lambda idx, obs, trusted: record_calibration(idx, obs, trusted, settings)
    index.on_sample = lambda h, obs: _track(h, obs, settings)
    return index


def new_index(settings: PredictionSettings = DEFAULT_SETTINGS) -> HistoryIndex:
    """An empty :class:`HistoryIndex` wired for ``settings`` (calibration on)."""
    return attach(HistoryIndex(settings.keys, settings.max_samples), settings)


def _kill_cost_bytes(index: HistoryIndex | None, settings: PredictionSettings, base: float) -> float:
    """What one OOM kill is worth in bytes of limit: ``oom_cost`` x the fleet's mean peak."""
    unit = index.fleet_mean_peak() if index is not None else None
    factor = math.exp(index.calibration.price_log) if index is not None else 1.0
    return settings.oom_cost * factor * (unit or base)


def _limit_z(index: HistoryIndex | None, trusted: bool, group: int, settings: PredictionSettings,
             centre: float, scale: float) -> tuple[float, str]:
    """How many of the job's spreads its limit sits above its centre (``exp(centre)`` is its typical peak).

    Learned from the standardised residuals of past runs (:meth:`Calibration.best_z`) at the
    price of a kill in units of ``exp(centre)``; before enough exist, ``limit_z`` and the
    ``limit_margin``.  Never below the centre plus ``limit_margin``, never above ``max_margin``
    times the uncalibrated ``limit_z`` limit.
    """
    lo = math.log1p(settings.limit_margin) / scale
    hi = settings.limit_z + math.log(settings.max_margin) / scale
    default = settings.limit_z + math.log1p(settings.limit_margin) / scale
    if index is None:
        return default, "default"
    typical = math.exp(centre)
    price = max(_kill_cost_bytes(index, settings, typical) / max(typical, 1.0), 1e-3)
    price = 1.25 ** round(math.log(price) / math.log(1.25))
    scale_q = 1.05 ** round(math.log(scale) / math.log(1.05))
    z = index.calibration.best_z(trusted, group, price, scale_q, settings.calibration_min)
    if z is None and not trusted:  # untrusted runs not calibrated yet: use the trusted residuals
        z = index.calibration.best_z(True, group, price, scale_q, settings.calibration_min)
    if z is None:
        return default, "default"
    return min(max(z, lo), hi), "learned"


def _ref_floor(ref_levels: Sequence[tuple[int, tuple[str, ...], LevelHistory]], now: float,
               settings: PredictionSettings) -> float:
    """What the job's own (untrusted) ref has shown: its largest peak x margin, its OOM bounds."""
    floor = 0.0
    if not ref_levels:
        return floor
    # the most specific level of the ref's history that has anything
    h = ref_levels[0][2]
    for o in h.samples:
        floor = max(floor, float(o.memory_peak_bytes or 0.0) * (1.0 + settings.limit_margin))
    return max(floor, _oom_floor(h, now, settings))


def estimate(
    levels: Sequence[tuple[int, tuple[str, ...], LevelHistory]],
    level_names: Sequence[tuple[str, ...]],
    now: float,
    settings: PredictionSettings = DEFAULT_SETTINGS,
    static: StaticSize | None = None,
    clamp: Clamp = Clamp(),
    *,
    index: HistoryIndex | None = None,
    trusted: bool = True,
    ref_levels: Sequence[tuple[int, tuple[str, ...], LevelHistory]] = (),
    ref: str | None = None,
) -> Allocation:
    """The allocation from the histories of a key's levels (as :meth:`HistoryIndex.levels_for` gives).

    ``levels`` are most specific first.  ``index`` supplies the learned
    calibration; ``trusted`` says whether the job itself runs on a trusted
    ref; ``ref_levels`` is the ref-scoped history of an untrusted job's own
    ref (it can only raise the limit).  See the module docstring.
    """
    static = static or StaticSize()
    chosen = _choose(levels, settings) if settings.enabled else None
    # The OOM floor comes from the chosen level, or the most specific level with any history.
    oom_source = chosen[2] if chosen is not None else (levels[0][2] if levels and settings.enabled else None)
    floor = _oom_floor(oom_source, now, settings)
    ref_floor = _ref_floor(ref_levels, now, settings) if settings.enabled else 0.0

    if chosen is None:
        mreq = float(static.memory_request_bytes or settings.default_memory_request_bytes)
        creq = static.cpu_request_cores or settings.default_cpu_request_cores
        figures: dict[str, float] = {"oom_floor_bytes": floor, "ref_floor_bytes": ref_floor}
        ratios = None
        if static.memory_request_bytes and index is not None and settings.enabled:
            ratios = index.static_ratios.get(_static_bucket(static.memory_request_bytes))
        if static.memory_limit_bytes:
            mlim: float | None = static.memory_limit_bytes
        elif settings.cold_limit == "none":
            mlim = None
            if ratios is not None and len(ratios) >= settings.min_samples:
                # typical use of jobs with this static size, never above the static size
                scale = min(1.0, _typical_ratio(ratios) * settings.memory_request_factor)
                mreq = mreq * scale
                figures.update({"static_mean_ratio": round(scale, 4), "static_runs": len(ratios)})
        elif settings.cold_limit == "learned" and ratios is not None and len(ratios) >= settings.min_samples:
            # learned: how far peaks of jobs with this static size went beyond it
            price = max(_kill_cost_bytes(index, settings, mreq) / mreq, 1e-3)
            price = 1.25 ** round(math.log(price) / math.log(1.25))
            m = index.calibration.best_margin(  # type: ignore[union-attr]
                True, _STATIC_GROUP - _static_bucket(mreq), price, settings.min_samples)
            q = math.exp(m if m is not None else math.log(settings.cold_limit_factor or 2.0))
            mlim = mreq * q * (1.0 + settings.limit_margin)
            mreq = mreq * _typical_ratio(ratios) * settings.memory_request_factor
            figures.update({"static_peak_ratio_limit": round(q, 4), "static_runs": len(ratios)})
        elif settings.cold_limit_factor > 0:
            mlim = mreq * settings.cold_limit_factor
        else:
            mlim = None
        if mlim is not None:
            mlim = max(mlim, floor, ref_floor)
            mreq = min(mreq, mlim)
        src = "static" if static.memory_request_bytes else "default"
        clim = creq * settings.cpu_limit_factor if settings.cpu_limit_factor > 0 else None
        return _finish(mreq, mlim, creq, clim, settings, clamp, key="", level=None, samples=0,
                       source=src, figures=figures)

    idx, values, hist = chosen
    st = _level_stats(hist, now, settings)
    prior = _prior(index, levels, idx, settings)
    s_used = _spread(st, settings, prior)
    pkg = _base(levels, settings)
    centre, scale, tracker = _centre_scale(hist, st, settings, prior, pkg)
    z, m_src = _limit_z(index, trusted, _group(idx, st, hist, settings, pkg), settings, centre, scale)
    base = math.exp(centre + settings.limit_z * scale)
    upper = math.exp(centre + z * scale)
    margin = math.log(upper / base)
    by_max = st.recent_max * (1.0 + settings.limit_margin) if settings.recent_max_floor else 0.0
    # more specific levels with too little history still count: never below what they saw
    specific = 0.0
    for entry in levels:
        if entry is chosen:
            break
        for o in entry[2].samples:
            specific = max(specific, float(o.memory_peak_bytes or 0.0))
    specific *= 1.0 + settings.limit_margin
    mlim: float | None = max(upper, by_max, specific, floor, ref_floor)
    if st.count < _min_runs(idx, settings):
        # too few runs of the level used: no limit, as without history (the request is still the
        # typical use); the runner's default limit applies
        mlim = None
    mreq = st.mem_mean * settings.memory_request_factor
    if mlim is not None:
        mreq = min(mreq, mlim)
    if st.cpu_mean is not None:
        creq = st.cpu_mean * settings.cpu_request_factor
    else:
        creq = static.cpu_request_cores or settings.default_cpu_request_cores
    clim = None
    if settings.cpu_limit_factor > 0:
        clim = max(st.cpu_upper or creq, creq) * settings.cpu_limit_factor
    names = level_names[idx]
    key = " ".join(f"{n}={v}" for n, v in zip(names, values))
    figures = {
        "effective_samples": round(st.n, 3),
        "mean_log_peak_bytes": round(math.exp(st.mu)),
        "spread_observed": round(st.spread, 4),
        "spread_used": round(s_used, 4),
        "spread_prior": round(prior if prior is not None else settings.prior_spread, 4),
        "centre_bytes": round(math.exp(centre)),
        "predictive_spread": round(scale, 4),
        "tracker_half_life_hours": (_half_life(tracker, settings) if tracker >= 0
                                    else settings.half_life_hours),
        "package_relative": 1.0 if tracker >= len(settings.tracker_half_lives_hours) else 0.0,
        "upper_mode": 1.0 if tracker == -2 else 0.0,
        "limit_z": round(z, 4),
        "base_limit_bytes": round(base),
        "margin": round(math.exp(margin) - 1.0, 4),
        "margin_learned": 1.0 if m_src == "learned" else 0.0,
        "upper_bytes": round(upper),
        "recent_max_peak_bytes": round(st.recent_max),
        "specific_levels_floor_bytes": round(specific),
        "oom_floor_bytes": round(floor),
        "ref_floor_bytes": round(ref_floor),
        "mean_memory_bytes": round(st.mem_mean),
    }
    return _finish(mreq, mlim, creq, clim, settings, clamp, key=key, level=idx, samples=st.count,
                   source="history", figures=figures)


def predict(
    index: HistoryIndex,
    key: JobKey,
    now: float,
    settings: PredictionSettings = DEFAULT_SETTINGS,
    static: StaticSize | None = None,
    clamp: Clamp = Clamp(),
    ref: str | None = None,
    protected: bool | None = None,
) -> Allocation:
    """The allocation for a new job with ``key`` created at ``now`` on ``ref``.

    A job on a ref ``settings`` does not trust also sees its own ref's
    history (which can only raise its limit).
    """
    trusted = ref is None or settings.trusts(ref, protected)
    ref_levels = index.levels_for(key, ref) if (ref and not trusted) else ()
    return estimate(index.levels_for(key), index.keys.levels, now, settings, static, clamp,
                    index=index, trusted=trusted, ref_levels=ref_levels, ref=ref)


def predict_for_retry(
    base: Allocation,
    killed_limits: Sequence[float],
    settings: PredictionSettings = DEFAULT_SETTINGS,
    clamp: Clamp = Clamp(),
) -> Allocation:
    """The predictor's view for attempt ``len(killed_limits) + 1`` after OOM kills at those limits.

    ``base`` is :func:`predict`'s allocation for the job, made at the time the *first*
    attempt was decided (so a retry uses the same history as attempt 1).  All we know about this job's need is that it
    exceeds ``max(killed_limits)``: the limit becomes at least that times
    ``retry_growth ** kills`` (and VPA's bump), the request grows with the
    square root of the limit's growth.  The policy's bump and caps are applied
    on top by the caller (``retry_bot.decide``).
    """
    if not killed_limits:
        return base
    bound = float(max(killed_limits))
    kills = len(killed_limits)
    need = max(_retry_need(base, bound, kills, settings), bound * settings.oom_bump_ratio,
               bound + settings.oom_min_bump_bytes)
    old_lim = float(base.memory_limit_bytes or bound)
    new_lim = max(old_lim, need)
    grow = new_lim / old_lim if old_lim > 0 else 1.0
    mreq = min(base.memory_request_bytes * math.sqrt(grow), new_lim)
    figures = dict(base.figures)
    figures.update({"killed_at_bytes": bound, "kills": kills, "retry_need_bytes": round(need)})
    out = _finish(mreq, new_lim, base.cpu_request_cores, base.cpu_limit_cores, settings, clamp,
                  key=base.key, level=base.level, samples=base.samples, source="retry", figures=figures)
    return out


def _retry_need(base: Allocation, bound: float, kills: int, settings: PredictionSettings) -> float:
    """What a job killed ``kills`` times, at most at ``bound``, needs: the model's conditional quantile.

    With the key's centre ``c`` and predictive spread ``s`` (log-normal), all the kill says is
    ``peak > bound``: the retry gets the limit its peak exceeds with probability ``retry_miss``
    *given* that (``P(X > x | X > bound) = retry_miss``): a job killed far out in its key's tail
    gets little more, one killed at a thin margin (a big job) what its key's spread says.
    Without a model of the key (no history, or the kill far beyond anything it predicts):
    ``bound x retry_growth ** kills``.
    """
    c = base.figures.get("centre_bytes") if base.source == "history" else None
    sp = base.figures.get("predictive_spread")
    fallback = bound * settings.retry_growth ** kills
    if not c or not sp or settings.retry_miss <= 0:
        return fallback
    u_l = (math.log(bound) - math.log(c)) / sp
    tail = 0.5 * math.erfc(u_l / math.sqrt(2.0)) * settings.retry_miss
    if tail < 1e-12:
        return fallback
    from statistics import NormalDist

    return math.exp(math.log(c) + NormalDist().inv_cdf(1.0 - tail) * sp)


def resize_prediction(
    index: HistoryIndex,
    key: JobKey,
    now: float,
    killed_limits: Sequence[float],
    settings: PredictionSettings = DEFAULT_SETTINGS,
    clamp: Clamp = Clamp(),
    ref: str | None = None,
    protected: bool | None = None,
) -> int | None:
    """The ``predicted_memory_bytes`` a resize decision takes (:func:`retry_bot.decide.decide`).

    The limit :func:`predict_for_retry` gives after kills at ``killed_limits``; ``None``
    without trusted history for the key (the policy's bump rule alone decides then).
    Used by the live bot (``retry_bot.live.daemon.HistoryPredictor``) and the replay alike.
    """
    alloc = predict_for_retry(predict(index, key, now, settings, clamp=clamp, ref=ref, protected=protected),
                              killed_limits, settings, clamp)
    if alloc.samples <= 0:
        return None
    return int(alloc.memory_limit_bytes or alloc.memory_request_bytes)
