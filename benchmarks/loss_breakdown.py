#!/usr/bin/env python3
"""Where peak/limit is lost: a farm's limit bytes above an oracle's, split by cause.

    .venv/bin/python benchmarks/loss_breakdown.py [--seed 2 --mix noisy] [--seed 7 --mix noisy] ...
        [--policy POLICY.toml] [--jobs N] [--centres] [--bounds]

Generated farms only (``benchmarks/tracegen.py``): the generator tells the oracle each job's true
distribution of log(peak) (its centre, its noise sd, the upper mode of a bimodal package).  The
**oracle** limits the same jobs as the predictor did (those whose first attempt had a limit), with
one byte price of a kill ``lam`` for all of them (the Lagrangian: each job's limit minimises
``L + lam x P(peak > L)`` under its true distribution), ``lam`` chosen so that its expected kills
equal the kills the predictor really had.  Every successful first attempt with a limit then splits
its excess ``L - L_oracle`` in steps, each the change of the limit when one figure goes from the
truth to the estimate (so they add up exactly):

* ``centre``: the estimated centre instead of the true one (drift lag, estimation noise);
* ``spread``: the estimated predictive spread instead of the true noise, at the oracle's ``z``;
* ``z``: the learned ``z`` instead of the oracle's (the kill price, the residual classes, bounds);
* ``floors``: what the floors (kill bounds, more specific levels, the job's own ref) added above that;
* bimodal packages (truly bimodal or sized for an upper mode) are one row, not split.

``spread`` is mostly not an over-estimate: the columns ``rms c err`` (the estimated centre's error),
``rms sd`` (the true noise), ``needed`` (``sqrt(noise^2 + c err^2)``, what a predictive spread must
cover) and ``rms est`` (the predictive spread used) show whether the estimate matches what is needed;
``z*`` / ``z`` are the oracle's and our mean ``z``.  The header line also gives an oracle that knows
the centres and noise but not the upper modes (every job sized as a log-normal, kills counted
under the truth).

Rows are key classes: ``few runs`` (the level used has fewer than ``prior_runs`` runs: spread mostly
borrowed), ``bimodal``, ``drifting`` (a tracker faster than ``half_life_hours`` won), ``steady``.
``retries`` is the successful retry attempts (not in the oracle: it has its own kills, priced).
Kills are first attempts killed per 100 jobs of the class.

``--centres`` (sixth pass) splits the centre error of the "steady" and "drifting" rows instead: for
every such job, every candidate centre of the level used (the level's own trackers, its
package-relative ones) and a *shadow* of the same linear recursions fed with the runs' true
centres, so each candidate's error splits exactly into ``lag`` (the shadow minus the true centre
now: the level moved since the runs it holds: drift, swing, regime jump, or builds of unlike size
mixed at a package-wide level) and ``sampling`` (the estimate minus the shadow: the weighted mean of
the runs' noise); by the generator's type of the package (``static``, ``drift``, ``swing``, ``regime``
after its jump), the level used, the effective runs of the candidate used (Kish, of its weights),
the candidate chosen, and what the error would have been with the slowest or the week tracker
always, or the best candidate in hindsight (per key, fixed; per prediction).

``--bounds`` replays the farm with oracle substitutions in the predictor itself (the rest of the
machinery unchanged: spreads, residual classes, kill budget) and prints peak/limit and kills: the
true centre for unimodal keys (all of them, half the error, only at the exact level, only at
levels that name neither variants nor compiler), the true centre and noise, and a perfect
change-point correction (at the regime change every tracker of a package that jumps shifted by
its true jump): the most any centre estimate, or any change-point detector, could give; and the
estimated centre with the spread the true noise predicts for a mean of the candidate's runs
(``noise x sqrt(1 + 1/m)``, as the tracker's package prior: lag not counted).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
from collections import defaultdict
from dataclasses import dataclass
from statistics import NormalDist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tracegen  # noqa: E402

import retry_bot.predict.estimator as estimator  # noqa: E402
from retry_bot.predict.estimator import predict  # noqa: E402
from retry_bot.predict.sources import load_policy_and_settings  # noqa: E402
from retry_bot.simulate.allocators import PredictorAllocator, replay_from_policy  # noqa: E402
from retry_bot.simulate.replay import simulate  # noqa: E402
from retry_bot.simulate.trace import load_trace  # noqa: E402

DEFAULT_POLICY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "config", "policy.toml")
_N = NormalDist()


def _q(u: float) -> float:
    return 0.5 * math.erfc(u / math.sqrt(2.0))


class RecordingAllocator(PredictorAllocator):
    """Ours, keeping each first attempt's :class:`~retry_bot.predict.estimator.Allocation` (its figures)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.firsts: dict[int, object] = {}

    def first(self, job):
        self.firsts[job.job_id] = predict(self.index, job.key, job.t, self.settings, job.static, self.clamp,
                                          job.ref)
        return super().first(job)


def _oracle_p(tr: tuple[float, float, float, float], x: float) -> float:
    """P(log peak > x) under the true distribution ``tr``."""
    mu, s, p, h = tr
    return (1 - p) * _q((x - mu) / s) + p * _q((x - mu - h) / s)


def oracle_limits(truth: dict, ids: list[int], kills: float,
                  blind_modes: bool = False) -> tuple[dict[int, float], float]:
    """Each job's log limit minimising ``L + lam P(peak > L)`` with ``lam`` set for ``kills`` expected kills.

    ``blind_modes``: the oracle knows each job's centre and noise but not the upper mode of a bimodal
    package (it sizes every job as a log-normal; its kills are still counted under the truth).
    """
    uni = [(j, truth[j][0], truth[j][1]) for j in ids if blind_modes or not truth[j][2]]
    bim = []
    for j in ids:
        mu, s, p, h = truth[j]
        if p and not blind_modes:
            grid = [mu + k * 0.02 for k in range(int((h + 5 * s) / 0.02) + 1)]
            bim.append((j, [(x, (1 - p) * _q((x - mu) / s) + p * _q((x - mu - h) / s)) for x in grid]))
    c0 = math.log(math.sqrt(2 * math.pi))

    def solve(log_lam: float) -> tuple[dict[int, float], float]:
        out, exp_k = {}, 0.0
        for j, mu, s in uni:
            a = log_lam - mu - math.log(s) - c0   # s e^(mu + z s) = lam phi(z)  <=>  z^2/2 + s z = a
            z = max(0.0, -s + math.sqrt(max(s * s + 2 * a, 0.0)))
            out[j] = mu + z * s
            exp_k += _oracle_p(truth[j], out[j]) if blind_modes else _q(z)
        lam = math.exp(log_lam)
        for j, pts in bim:
            x, pk = min(pts, key=lambda t: math.exp(t[0]) + lam * t[1])
            out[j] = x
            exp_k += pk
        return out, exp_k

    lo, hi = 0.0, 40.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if solve(mid)[1] > kills:
            lo = mid
        else:
            hi = mid
    return solve(hi)[0], math.exp(hi)


@dataclass
class _Farm:
    """One generated farm as the reports need it: the shipped policy and its settings, the
    generator's universe and packages, each job's true distribution, and the loaded trace."""
    policy: object
    settings: object
    mix: object
    truth: dict[int, tuple[float, float, float, float]]
    pkgs: dict
    trace: list
    regime_t: float


def _farm(seed: int, mix_name: str, policy_path: str, jobs: int | None, path: str) -> _Farm:
    """Generate farm ``seed`` (mix ``mix_name``) into ``path`` with its truth, and load it."""
    policy, settings = load_policy_and_settings(policy_path)
    mix = tracegen.universe(seed, mix_name, jobs)
    truth: dict[int, tuple[float, float, float, float]] = {}
    # the generator's packages (the same draws as generate()'s first ones): their dynamics
    pkgs = {p.name: p for p in tracegen._universe(random.Random(seed), mix)}
    tracegen.write(path, tracegen.generate(seed, mix, truth=truth))
    trace = load_trace(path, settings.keys)
    regime_t = min(j.t for j in trace) + mix.regime_at * mix.days * 86400.0
    return _Farm(policy, settings, mix, truth, pkgs, trace, regime_t)


def breakdown(seed: int, mix_name: str, policy_path: str, jobs: int | None, tmp: str) -> str:
    farm = _farm(seed, mix_name, policy_path, jobs, os.path.join(tmp, f"b{seed}.jsonl"))
    policy, settings, truth, trace = farm.policy, farm.settings, farm.truth, farm.trace
    alloc = RecordingAllocator(settings, replay_from_policy(policy))
    res = simulate(trace, alloc)
    by_job: dict[int, list[dict]] = {}
    for r in res.rows:
        by_job.setdefault(r["job_id"], []).append(r)
    jobs_by_id = {j.job_id: j for j in trace}
    limited = [j for j, rs in by_job.items() if rs[0]["memory_limit_bytes"] is not None]
    kills_all = sum(1 for j, rs in by_job.items() for r in rs if r["memory_limit_bytes"] is not None
                    and jobs_by_id[j].memory_peak_bytes > r["memory_limit_bytes"])
    olog, lam = oracle_limits(truth, limited, kills_all)
    blog, _ = oracle_limits(truth, limited, kills_all, blind_modes=True)

    def peak_and_limit(log_limits: dict) -> tuple[float, float]:
        """Sums of peak and limit over the limited jobs an oracle's limits let finish (its kills
        are not scored, as ours are not: evaluate.py's peak/limit is over successful attempts)."""
        peaks = lims = 0.0
        for j in limited:
            lim = math.exp(log_limits[j])
            if jobs_by_id[j].memory_peak_bytes <= lim:
                peaks += jobs_by_id[j].memory_peak_bytes
                lims += lim
        return peaks, lims

    b_peak, b_lim = peak_and_limit(blog)
    o_peak, o_lim = peak_and_limit(olog)
    hl_default = settings.half_life_hours
    rows: dict[str, dict[str, float]] = {}

    def row(name: str) -> dict[str, float]:
        return rows.setdefault(name, {"jobs": 0, "kills": 0, "peak": 0.0, "lim": 0.0, "olim": 0.0,
                                      "centre": 0.0, "spread": 0.0, "z": 0.0, "floors": 0.0,
                                      "n_est": 0, "ce2": 0.0, "s2": 0.0, "sh2": 0.0, "zs": 0.0, "zh": 0.0, "okills": 0.0})
    pk_all = lim_all = 0.0
    for j in limited:
        job = jobs_by_id[j]
        a = alloc.firsts[j]
        f = a.figures
        mu, s, p, h = truth[j]
        if p or f.get("upper_mode"):
            cls = "bimodal"
        elif a.samples < settings.prior_runs:
            cls = "few runs"
        elif f.get("tracker_half_life_hours", hl_default) < hl_default:
            cls = "drifting"
        else:
            cls = "steady"
        rw = row(cls)
        rw["jobs"] += 1
        rw["okills"] += _oracle_p(truth[j], olog[j])
        L = float(by_job[j][0]["memory_limit_bytes"])
        if job.memory_peak_bytes > L:
            rw["kills"] += 1
            continue
        rw["peak"] += job.memory_peak_bytes
        rw["lim"] += L
        L0 = math.exp(olog[j])
        rw["olim"] += L0
        if cls == "bimodal":   # not split: its true distribution is not a log-normal
            continue
        if not f.get("centre_bytes"):
            rw["floors"] += L - L0
            continue
        z_star = (olog[j] - mu) / s
        c_hat, s_hat, z = math.log(f["centre_bytes"]), f["predictive_spread"], f["limit_z"]
        rw["n_est"] += 1
        rw["ce2"] += (c_hat - mu) ** 2
        rw["s2"] += s * s
        rw["sh2"] += s_hat * s_hat
        rw["zs"] += z_star
        rw["zh"] += z
        L1 = math.exp(c_hat + z_star * s)
        L2 = math.exp(c_hat + z_star * s_hat)
        L3 = math.exp(c_hat + z * s_hat)
        rw["centre"] += L1 - L0
        rw["spread"] += L2 - L1
        rw["z"] += L3 - L2
        rw["floors"] += L - L3
    for j, rs in by_job.items():
        job = jobs_by_id[j]
        for r in rs:
            if r["memory_limit_bytes"] is not None and job.memory_peak_bytes <= r["memory_limit_bytes"]:
                pk_all += job.memory_peak_bytes
                lim_all += r["memory_limit_bytes"]
                if r["attempt"] > 1:
                    rw = row("retries")
                    rw["jobs"] += 1
                    rw["peak"] += job.memory_peak_bytes
                    rw["lim"] += r["memory_limit_bytes"]
                    rw["olim"] += job.memory_peak_bytes / (o_peak / o_lim)
    n = len(trace)
    tot_excess = sum(r["lim"] - r["olim"] for r in rows.values())
    m = res.metrics
    lines = [f"seed={seed} mix={mix_name}: {n:,} jobs, kills/100 {m['oom_kills_per_100_jobs']:.2f} "
             f"(budget {settings.oom_budget_per_100}), peak/limit {m['mem_peak_over_limit']:.3f}; oracle on the same "
             f"{len(limited):,} limited jobs at the same kills: {o_peak / o_lim:.3f} (price {lam / 1e9:.1f} GB/kill); "
             f"excess over the oracle {tot_excess / lim_all:.1%} of the limit bytes; an oracle blind to "
             f"upper modes (log-normal sizing, same kills): {b_peak / b_lim:.3f}",
             f"{'class':<10}{'jobs':>7}{'kills/100':>10}{'oracle':>7}{'peak/lim':>9}{'oracle':>8}{'lim share':>10}"
             f"{'excess':>8}{'centre':>8}{'spread':>8}{'z':>8}{'floors':>8}"
             f"{'rms c err':>10}{'rms sd':>8}{'needed':>8}{'rms est':>8}{'z*':>6}{'z':>6}"]
    for name in ("steady", "drifting", "few runs", "bimodal", "retries"):
        r = rows.get(name)
        if not r or not r["lim"]:
            continue
        ex = r["lim"] - r["olim"]
        pct = (lambda v: f"{v / tot_excess:>8.0%}") if tot_excess else (lambda v: f"{'-':>8}")
        lines.append(f"{name:<10}{int(r['jobs']):>7}{100 * r['kills'] / max(r['jobs'], 1):>10.2f}"
                     f"{100 * r['okills'] / max(r['jobs'], 1):>7.2f}"
                     f"{r['peak'] / r['lim']:>9.3f}{r['peak'] / r['olim']:>8.3f}{r['lim'] / lim_all:>10.1%}"
                     + pct(ex) + ("".join(pct(r[k]) for k in ("centre", "spread", "z", "floors"))
                                  if r["n_est"] else f"{'(not split)':>32}")
                     + (f"{math.sqrt(r['ce2'] / r['n_est']):>10.3f}{math.sqrt(r['s2'] / r['n_est']):>8.3f}"
                        f"{math.sqrt((r['s2'] + r['ce2']) / r['n_est']):>8.3f}{math.sqrt(r['sh2'] / r['n_est']):>8.3f}"
                        f"{r['zs'] / r['n_est']:>6.2f}{r['zh'] / r['n_est']:>6.2f}" if r["n_est"] else ""))
    return "\n".join(lines)


# ------------------------------------------------------------------ --centres (sixth pass)
HOUR = 3600.0


class _Shadow:
    """A level's tracker recursions (same weights) fed with its runs' true centres; also the sum of
    squared weights (the effective runs of each tracker)."""

    def __init__(self, k: int) -> None:
        self.at: float | None = None
        self.sw = [0.0] * k
        self.sw2 = [0.0] * k
        self.sx = [0.0] * k
        self.ros: list[float] | None = None   # package-relative offsets (weights: the real ones)

    def update(self, mu: float, at: float, hls) -> None:
        dt = 0.0 if self.at is None else max(0.0, at - self.at)
        for i, hl in enumerate(hls):
            d = 0.5 ** (dt / (hl * HOUR))
            self.sw[i] = self.sw[i] * d + 1.0
            self.sw2[i] = self.sw2[i] * d * d + 1.0
            self.sx[i] = self.sx[i] * d + mu
        self.at = at if self.at is None else max(self.at, at)


def _package_type(p, t: float, regime_t: float) -> str:
    if p.p_high:
        return "bimodal"
    if p.regime and t >= regime_t:
        return "regime"
    return "swing" if p.swing_amp else ("drift" if p.drift else "static")


def _rms(v) -> float:
    v = list(v)
    return math.sqrt(sum(x * x for x in v) / len(v)) if v else float("nan")


def centre_split(seed: int, mix_name: str, policy_path: str, jobs: int | None, tmp: str) -> str:
    """The ``--centres`` report of one farm (see the module docstring)."""
    farm = _farm(seed, mix_name, policy_path, jobs, os.path.join(tmp, f"c{seed}.jsonl"))
    policy, settings, truth, pkgs, trace, regime_t = (farm.policy, farm.settings, farm.truth, farm.pkgs,
                                                      farm.trace, farm.regime_t)
    hls = settings.tracker_half_lives_hours
    k = len(hls)
    jobs_by_id = {j.job_id: j for j in trace}
    alloc = PredictorAllocator(settings, replay_from_policy(policy))
    idx = alloc.index
    shadows: dict[int, _Shadow] = {}
    keep_alive: list = []
    cur: dict[str, float | None] = {"mu": None}
    on_add, on_sample = idx.on_add, idx.on_sample

    def add_hook(index, obs, trusted):
        cur["mu"] = truth[obs.job_id][0] if obs.job_id in truth else None
        on_add(index, obs, trusted)

    def sample_hook(h, obs):
        on_sample(h, obs)
        sh = shadows.get(id(h))
        if sh is None:
            sh = shadows[id(h)] = _Shadow(k)
            keep_alive.append(h)   # ids stay unique
        sh.update(cur["mu"], obs.at, hls)

    idx.on_add, idx.on_sample = add_hook, sample_hook
    real_rel = estimator._track_relative

    def rel_hook(levels, x, st, base):
        real_rel(levels, x, st, base)
        parent = estimator._parent(levels, st)
        psh = shadows.get(id(parent)) if parent is not None else None
        if psh is None:
            return
        sbase = [psh.sx[i] / psh.sw[i] for i in range(k)]
        okeep = 1.0 - st.tracker_rate / 2.0
        for _, _, h in levels:
            sh = shadows.get(id(h))
            if h is parent or h.surprise is None or sh is None:
                continue
            if sh.ros is None:
                sh.ros = [0.0] * k
            for i in range(k):
                sh.ros[i] = sh.ros[i] * okeep + (cur["mu"] - sbase[i])

    recs: dict[int, dict] = {}
    real_first = alloc.first

    def first(job):
        a = predict(idx, job.key, job.t, settings, job.static, alloc.clamp, job.ref)
        if a.level is not None and a.figures.get("centre_bytes"):
            levels = idx.levels_for(job.key)
            h = next(e[2] for e in levels if e[0] == a.level)
            tr, sh = h.surprise, shadows.get(id(h))
            base = estimator._base(levels, settings)
            parent = estimator._parent(levels, settings)
            psh = shadows.get(id(parent)) if parent is not None else None
            if tr is not None and sh is not None and tr.at is not None:
                rel = srel = None
                if base is not None and tr.rel is not None and sh.ros is not None and psh is not None \
                        and all(w > 0 for w in tr.rel[0]):
                    rel = [base[i] + tr.rel[1][i] / tr.rel[0][i] for i in range(k)]
                    srel = [psh.sx[i] / psh.sw[i] + sh.ros[i] / tr.rel[0][i] for i in range(k)]
                recs[job.job_id] = dict(
                    level=a.level, count=a.samples, best=tr.best(settings, base), c=math.log(a.figures["centre_bytes"]),
                    hl=a.figures["tracker_half_life_hours"], up=a.figures["upper_mode"], key=id(h),
                    own=[tr.sx[i] / tr.sw[i] for i in range(k)], sown=[sh.sx[i] / sh.sw[i] for i in range(k)],
                    neff=[sh.sw[i] ** 2 / sh.sw2[i] for i in range(k)], rel=rel, srel=srel)
        return real_first(job)

    alloc.first = first
    estimator._track_relative = rel_hook
    try:
        res = simulate(trace, alloc)
    finally:
        estimator._track_relative = real_rel
    by_job: dict[int, list[dict]] = defaultdict(list)
    for r in res.rows:
        by_job[r["job_id"]].append(r)
    rows = []
    for j, rs in by_job.items():
        job, lim = jobs_by_id[j], rs[0]["memory_limit_bytes"]
        mu, s, p, _ = truth[j]
        rec = recs.get(j)
        if lim is None or job.memory_peak_bytes > lim or rec is None or p or rec["up"] \
                or rec["count"] < settings.prior_runs or rec["best"] is None:
            continue
        b = rec["best"]
        if b < k:
            cand, shadow = rec["own"][b], rec["sown"][b]
        elif rec["rel"] is not None:
            cand, shadow = rec["rel"][b - k], rec["srel"][b - k]
        else:
            continue
        cands = list(rec["own"]) + (list(rec["rel"]) if rec["rel"] else [None] * k)
        pk = pkgs.get(job.key.get("package") or "")
        rows.append(dict(
            cls="drifting" if rec["hl"] < settings.half_life_hours else "steady",
            typ=_package_type(pk, job.t, regime_t) if pk is not None else "?",
            lv="0 exact" if rec["level"] == 0 else ("1-2 near" if rec["level"] <= 2 else "3+ wider"),
            level=rec["level"], err=rec["c"] - mu, lag=shadow - mu, samp=cand - shadow, s=s,
            neff=rec["neff"][b % k], cand=("own " if b < k else "rel ") + f"{hls[b % k]:g}h",
            cands=cands, mu=mu, key=rec["key"]))
    m = res.metrics
    out = [f"seed={seed} mix={mix_name}: peak/limit {m['mem_peak_over_limit']:.3f}, kills/100 "
           f"{m['oom_kills_per_100_jobs']:.2f}; centre error (log) of successful limited first attempts of "
           f"unimodal keys with >= {settings.prior_runs} runs"]
    for name in ("steady", "drifting"):
        R = [r for r in rows if r["cls"] == name]
        if not R:
            continue
        tot = sum(r["err"] ** 2 for r in R) or 1.0
        noise = _rms(r["s"] for r in R)
        err = _rms(r["err"] for r in R)
        out.append(f"{name}: {len(R):,} jobs, rms error {err:.3f} = lag {_rms(r['lag'] for r in R):.3f} (+) "
                   f"sampling {_rms(r['samp'] for r in R):.3f} (noise / sqrt(effective runs): "
                   f"{_rms(r['s'] / math.sqrt(r['neff']) for r in R):.3f}); noise {noise:.3f}: as a mean of "
                   f"{(noise / err) ** 2:.1f} runs")
        out.append(f"  {'':<24}{'jobs':>8}{'share':>7}{'rms err':>9}{'of err^2':>9}{'lag':>7}{'sampl.':>8}"
                   f"{'noise':>7}{'eff. runs':>10}")
        for label, keyf in (("type", lambda r: r["typ"]), ("level", lambda r: r["lv"]),
                            ("effective runs", lambda r: "a <5" if r["neff"] < 5 else "b 5-10" if r["neff"] < 10
                             else "c 10-20" if r["neff"] < 20 else "d 20+"),
                            ("candidate", lambda r: r["cand"])):
            g: dict[str, list[dict]] = defaultdict(list)
            for r in R:
                g[keyf(r)].append(r)
            for kk in sorted(g):
                G = g[kk]
                out.append(f"  {label + ' ' + kk:<24}{len(G):>8}{len(G) / len(R):>7.1%}{_rms(r['err'] for r in G):>9.3f}"
                           f"{sum(r['err'] ** 2 for r in G) / tot:>9.1%}{_rms(r['lag'] for r in G):>7.3f}"
                           f"{_rms(r['samp'] for r in G):>8.3f}{_rms(r['s'] for r in G):>7.3f}"
                           f"{sum(r['neff'] for r in G) / len(G):>10.1f}")

        def always(ci: int, fallback: int) -> float:
            return _rms((r["cands"][ci] if r["cands"][ci] is not None else r["cands"][fallback]) - r["mu"] for r in R)
        per_key: list[float] = []
        groups: dict[int, list[dict]] = defaultdict(list)
        for r in R:
            groups[r["key"]].append(r)
        for G in groups.values():
            options = [[g["cands"][ci] - g["mu"] for g in G] for ci in range(2 * k)
                       if all(g["cands"][ci] is not None for g in G)]
            per_key.extend(min(options, key=lambda v: sum(x * x for x in v)))
        best_each = _rms(min((c - r["mu"] for c in r["cands"] if c is not None), key=abs) for r in R)
        out.append(f"  rms error with: the candidate chosen {err:.3f}; always the slowest own tracker "
                   f"{always(k - 1, k - 1):.3f}, the slowest package-relative {always(2 * k - 1, k - 1):.3f}, "
                   f"the week's own {always(min(2, k - 1), k - 1):.3f}; in hindsight the best fixed candidate per key "
                   f"{_rms(per_key):.3f}, the best per prediction {best_each:.3f}")
    return "\n".join(out)


# ------------------------------------------------------------------ --bounds (sixth pass)
def _bounded_replay(trace, policy, settings, truth, mode: str, pkgs, regime_t: float) -> dict:
    """Replay with one oracle substitution (``mode``); the predictor's own code otherwise."""
    alloc = PredictorAllocator(settings, replay_from_policy(policy))
    idx = alloc.index
    cur: dict = {"j": None, "lv": None, "shifted": False}
    real_cs, real_choose = estimator._centre_scale, estimator._choose

    def choose(levels, st):
        e = real_choose(levels, st)
        cur["lv"] = e[0] if e is not None else None
        return e

    def centre_scale(h, st, s, prior=None, base=None):
        c, sc, t = real_cs(h, st, s, prior, base)
        j = cur["j"]
        if j is None or t == -2 or truth[j][2]:
            return c, sc, t
        mu, noise, lv = truth[j][0], truth[j][1], cur["lv"]
        names = settings.keys.levels[lv] if lv is not None else ()
        if mode == "centre" or (mode == "centre, exact level" and lv == 0) or \
                (mode == "centre, package-wide levels" and "variants" not in names and "compiler" not in names):
            return mu, sc, t
        if mode == "half the centre error":
            return 0.5 * (c + mu), sc, t
        if mode == "centre and noise":
            return mu, max(noise, settings.min_spread), t
        if mode == "noise" and t >= 0 and h.surprise is not None:
            k = len(h.surprise.sw)
            m = h.surprise.sw[t] if t < k else h.surprise.rel[0][t - k]
            return c, max(noise * math.sqrt(1.0 + 1.0 / max(m, 1e-9)), settings.min_spread), t
        return c, sc, t

    def shift(t: float) -> None:   # the perfect change-point correction, once, at the regime change
        if mode != "jumps" or cur["shifted"] or t < regime_t:
            return
        cur["shifted"] = True
        for li, table in enumerate(idx._levels):
            names = settings.keys.levels[li]
            if "package" not in names:
                continue
            pi = names.index("package")
            for lk, h in table.items():
                p = pkgs.get(lk[pi])
                if p is not None and p.regime and h.surprise is not None:
                    for i in range(len(h.surprise.sw)):
                        h.surprise.sx[i] += p.regime * h.surprise.sw[i]

    real_add, real_first, real_retry = idx.add, alloc.first, alloc.retry

    def add(obs, trusted=True):
        shift(obs.at)
        cur["j"] = obs.job_id
        try:
            return real_add(obs, trusted)
        finally:
            cur["j"] = None

    def with_job(fn):
        def call(job, *a):
            shift(job.t)
            cur["j"] = job.job_id
            try:
                return fn(job, *a)
            finally:
                cur["j"] = None
        return call

    idx.add, alloc.first, alloc.retry = add, with_job(real_first), with_job(real_retry)
    estimator._centre_scale, estimator._choose = centre_scale, choose
    try:
        return simulate(trace, alloc).metrics
    finally:
        estimator._centre_scale, estimator._choose = real_cs, real_choose


BOUNDS = ("as is", "jumps", "centre, package-wide levels", "centre, exact level", "half the centre error",
          "centre", "centre and noise", "noise")


def bounds(seed: int, mix_name: str, policy_path: str, jobs: int | None, tmp: str) -> str:
    """The ``--bounds`` report of one farm (see the module docstring)."""
    farm = _farm(seed, mix_name, policy_path, jobs, os.path.join(tmp, f"o{seed}.jsonl"))
    policy, settings, truth, pkgs, trace, regime_t = (farm.policy, farm.settings, farm.truth, farm.pkgs,
                                                      farm.trace, farm.regime_t)
    out = [f"seed={seed} mix={mix_name}: peak/limit (kills/100) with the oracle's ..."]
    for mode in BOUNDS:
        m = _bounded_replay(trace, policy, settings, truth, mode, pkgs, regime_t)
        out.append(f"  {mode:<30} {m['mem_peak_over_limit']:.3f} ({m['oom_kills_per_100_jobs']:.2f})")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, action="append", help="farm seed (repeat; default: 2 7 8)")
    ap.add_argument("--mix", action="append", help="its mix (repeat, in the same order)")
    ap.add_argument("--policy", default=DEFAULT_POLICY)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--centres", action="store_true", help="split the centre error instead (sixth pass)")
    ap.add_argument("--bounds", action="store_true", help="oracle substitutions: what better centres could give")
    args = ap.parse_args(argv)
    seeds = args.seed or [2, 7, 8]
    mixes = args.mix or (["noisy", "noisy", "drifting"] if not args.seed else None)
    if mixes is None or len(mixes) != len(seeds):
        ap.error("give one --mix per --seed")
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        for seed, mix in zip(seeds, mixes):
            report = centre_split if args.centres else (bounds if args.bounds else breakdown)
            print(report(seed, mix, args.policy, args.jobs, d))
            print()
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
