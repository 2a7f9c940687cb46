#!/usr/bin/env python3
"""Where peak/limit is lost: a farm's limit bytes above an oracle's, split by cause.

    .venv/bin/python benchmarks/loss_breakdown.py [--seed 2 --mix noisy] [--seed 7 --mix noisy] ...
        [--policy POLICY.toml] [--jobs N]

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
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from statistics import NormalDist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tracegen  # noqa: E402

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


def breakdown(seed: int, mix_name: str, policy_path: str, jobs: int | None, tmp: str) -> str:
    policy, settings = load_policy_and_settings(policy_path)
    mix = tracegen.universe(seed, mix_name, jobs)
    truth: dict[int, tuple[float, float, float, float]] = {}
    path = os.path.join(tmp, f"b{seed}.jsonl")
    tracegen.write(path, tracegen.generate(seed, mix, truth=truth))
    trace = load_trace(path, settings.keys)
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, action="append", help="farm seed (repeat; default: 2 7 8)")
    ap.add_argument("--mix", action="append", help="its mix (repeat, in the same order)")
    ap.add_argument("--policy", default=DEFAULT_POLICY)
    ap.add_argument("--jobs", type=int, default=None)
    args = ap.parse_args(argv)
    seeds = args.seed or [2, 7, 8]
    mixes = args.mix or (["noisy", "noisy", "drifting"] if not args.seed else None)
    if mixes is None or len(mixes) != len(seeds):
        ap.error("give one --mix per --seed")
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        for seed, mix in zip(seeds, mixes):
            print(breakdown(seed, mix, args.policy, args.jobs, d))
            print()
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
