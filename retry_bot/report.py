"""``retry-bot report``: one self-contained HTML page (inline SVG, no external assets).

What an admin would rather look at than read:

* requested vs used memory per package (Spack spec) or per job name over
  time (those that reserve the most), with limits, peaks (brown ring), OOM
  kills (red x) and recoveries (green circle);
* reserved vs used memory per day for the whole fleet;
* OOM kills and recoveries in numbers;
* the failure taxonomy by family (from the state store's classified jobs).

:func:`collect_from_trace` (replays a trace through the predictor) and
:func:`collect_from_store` (usage records and classifications) build a
:class:`ReportData`; :func:`render_html` turns it into the page (pure).
"""

from __future__ import annotations

import datetime as _dt
import html
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:
    from retry_bot.model import LineageAttempt
    from retry_bot.state import Store

__all__ = ["Point", "ReportData", "ReportError", "collect_from_trace", "collect_from_store", "render_html",
           "render_png", "find_chromium", "output_format"]

GB = 1e9
#: Every series has its own colour: peak used (brown) is not an OOM kill (red).
COLORS = {"request": "#1f77b4", "used": "#ff7f0e", "peak": "#8c564b", "limit": "#7f7f7f",
          "kill": "#d62728", "recovery": "#2ca02c", "static": "#9467bd"}
FAMILY_COLORS = {"oom": "#d62728", "timeout": "#ff7f0e", "infrastructure": "#1f77b4",
                 "build_error": "#8c564b", "config_error": "#e377c2", "canceled": "#7f7f7f",
                 "unknown": "#bcbd22"}


@dataclass(frozen=True)
class Point:
    """One job (its final attempt) of one package."""

    t: float
    request: float
    used_mean: float | None
    used_peak: float | None
    limit: float | None
    kills: Sequence[tuple[float, float]] = ()  # (time, limit) of each OOM kill
    recovered: bool = False
    failed: bool = False
    static_request: float | None = None
    job_id: int | None = None


@dataclass
class ReportData:
    title: str
    source: str
    packages: dict[str, list[Point]] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    families: dict[str, int] = field(default_factory=dict)
    families_note: str = ""
    #: What the charts are drawn per: "package" when every name is a Spack package, else "job".
    unit: str = "package"


def _unit(sources: Sequence[str]) -> str:
    """``package`` when every drawn name came from a Spack spec, else ``job``."""
    return "package" if sources and all(s == "package" for s in sources) else "job"


def _name_of(key: Any, fallback: str | None) -> tuple[str, str]:
    """``(name, source)``: the package of a Spack job, else its job name."""
    if key.get("package"):
        return str(key.get("package")), "package"
    return key.get("job") or fallback or "?", "job"


# ------------------------------------------------------------------ collection
def collect_from_trace(path: str, policy_path: str | None = None, top: int = 8) -> ReportData:
    """Replay ``path`` through the predictor (and the policy's resize rule) and gather the page's data."""
    from retry_bot.predict.sources import load_policy_and_settings
    from retry_bot.simulate.allocators import make_allocator, replay_from_policy
    from retry_bot.simulate.replay import simulate
    from retry_bot.simulate.trace import load_trace

    policy, settings = load_policy_and_settings(policy_path)
    jobs = load_trace(path, settings.keys)
    res = simulate(jobs, make_allocator(None, settings, replay_from_policy(policy)))
    by_job: dict[int, list[dict]] = defaultdict(list)
    for r in res.rows:
        by_job[r["job_id"]].append(r)
    packages: dict[str, list[Point]] = defaultdict(list)
    reserved: Counter[str] = Counter()
    source_of: dict[str, str] = {}
    recovered = failed = 0
    for job in jobs:
        rows = by_job[job.job_id]
        t = job.t
        kills = []
        for r in rows:
            lim = r["memory_limit_bytes"]
            if job.killed(lim):
                t += job.kill_time(lim)
                kills.append((t, float(lim)))
        last = rows[-1]
        ok = not job.killed(last["memory_limit_bytes"])
        recovered += bool(kills) and ok
        failed += not ok
        pkg, source_of[pkg] = _name_of(job.key, job.job_name)
        reserved[pkg] += last["memory_request_bytes"] * job.duration_s
        packages[pkg].append(Point(
            t=job.t, request=float(last["memory_request_bytes"]),
            used_mean=job.memory_mean_bytes if ok else None, used_peak=job.memory_peak_bytes if ok else None,
            limit=None if last["memory_limit_bytes"] is None else float(last["memory_limit_bytes"]),
            kills=tuple(kills), recovered=bool(kills) and ok, failed=not ok,
            static_request=job.static.memory_request_bytes))
    chosen = [p for p, _ in reserved.most_common(top)]
    m = res.metrics
    summary = {
        "jobs": m["jobs"], "OOM kills": m["oom_kills"], "jobs recovered after a kill": recovered,
        "jobs failed for memory": failed,
        "memory avg/request": m["mem_avg_over_request"], "memory peak/limit": m["mem_peak_over_limit"],
        "CPU avg/request": m["cpu_avg_over_request"],
        "reserved GB-hours": m["reserved_mem_gb_hours"],
        "static sizes GB-hours": m["static_reserved_mem_gb_hours"], "cost index": m["cost_index"],
    }
    return ReportData(
        title="Memory right-sizing: what-if replay", source=f"trace {path} (replayed through the predictor)",
        packages={p: packages[p] for p in chosen}, summary=summary,
        families={"oom": m["jobs_oom_killed"]},
        families_note="A trace records only memory: the OOM family counts jobs with at least one kill. "
                      "Run the report against the state store to see every family.",
        unit=_unit([source_of[p] for p in chosen]))


def collect_from_store(store: Store, top: int = 8) -> ReportData:
    """Gather the page's data from a :class:`retry_bot.state.Store`.

    OOM kills and recoveries come from two places, merged by job id: the usage
    records (``oom_killed``) and the bot's own tables, through the store's
    public API (``jobs()``: every failed job the bot classified; ``lineage_for``:
    what it re-created and how each attempt ended).  A kill is counted once per
    job; a *recovery* is a lineage with a killed attempt followed by a
    re-created attempt (``retry`` or ``resize``) whose status is ``success``,
    counted once per lineage.  The bot stores usage records only for the failed
    jobs it reads, so the successful copy is usually known from the lineage alone.
    """
    from retry_bot.predict.history import parse_time
    from retry_bot.predict.keys import KeySettings, extract_key

    keys = KeySettings()
    packages: dict[str, list[Point]] = defaultdict(list)
    reserved: Counter[str] = Counter()
    records = 0
    killed: set[int] = set()
    with_record: set[int] = set()

    source_of: dict[str, str] = {}

    def package_of(name: str | None, variables: Mapping[str, Any] | None) -> str:
        key = extract_key(keys, job_name=name, variables={str(k): str(v) for k, v in (variables or {}).items()})
        drawn, source_of[drawn] = _name_of(key, name)
        return drawn

    for row in store.usage_records():
        records += 1
        rec = row.get("record") or {}
        job = rec.get("job") or {}
        pkg = package_of(row.get("job_name"), job.get("variables"))
        t = parse_time(row.get("finished_at")) or 0.0
        req = row.get("memory_request_bytes") or row.get("memory_limit_bytes") or 0
        oom = bool(row.get("oom_killed"))
        jid = row.get("job_id")
        if isinstance(jid, int):
            with_record.add(jid)
            if oom:
                killed.add(jid)
        lim = row.get("memory_limit_bytes")
        wall = row.get("wall_seconds") or 0.0
        reserved[pkg] += float(req or 0) * float(wall or 0)
        packages[pkg].append(Point(
            t=t, request=float(req or 0), used_mean=None if oom else row.get("memory_mean_bytes"),
            used_peak=None if oom else row.get("memory_peak_bytes"), limit=None if lim is None else float(lim),
            kills=((t, float(lim)),) if (oom and lim) else (), failed=oom, job_id=jid if isinstance(jid, int) else None))

    # The bot's tables: OOM-classified failed jobs, and the lineages they belong to.
    oom_jobs: dict[int, Any] = {}
    lineage_note = ""
    try:
        for job in store.jobs():
            cls = job.classification if isinstance(job.classification, Mapping) else {}
            if str(cls.get("family") or "") == "oom":
                oom_jobs[job.job_id] = job
                killed.add(job.job_id)
    except Exception as exc:  # noqa: BLE001 - a picture without this part is still useful
        lineage_note = f"could not read the bot's jobs: {exc}"
    recovered_lineages: set[int] = set()
    recovered_jobs: dict[int, Any] = {}
    seen_origins: set[int] = set()
    for jid in sorted(killed):
        try:
            lin = store.lineage_for(jid)
        except Exception as exc:  # noqa: BLE001
            lineage_note = f"could not read lineages: {exc}"
            break
        if lin.origin_job_id in seen_origins:
            continue
        seen_origins.add(lin.origin_job_id)
        first_kill = min((m.attempt for m in lin.attempts if m.job_id in killed), default=None)
        if first_kill is None:
            continue
        for m in lin.attempts:
            if m.attempt > first_kill and m.action in ("retry", "resize") and m.status == "success":
                recovered_lineages.add(lin.origin_job_id)
                recovered_jobs[m.job_id] = m
                break
    # Kills and recoveries the usage records do not show still get a mark on the chart.
    for jid, job in oom_jobs.items():
        if jid in with_record:
            continue
        facts = job.facts if isinstance(job.facts, Mapping) else {}
        variables = facts.get("variables") or {}
        member = _member_of(store, jid)
        lim = member.memory_limit_bytes if member is not None else None
        lim = lim or _quantity(variables.get("KUBERNETES_MEMORY_LIMIT"))
        req = _quantity(variables.get("KUBERNETES_MEMORY_REQUEST")) or lim or 0
        t = parse_time(facts.get("finished_at")) or float(job.seen_at or 0.0)
        packages[package_of(facts.get("name"), variables)].append(Point(
            t=t, request=float(req), used_mean=None, used_peak=None, limit=None if lim is None else float(lim),
            kills=((t, float(lim)),) if lim else (), failed=True, job_id=jid))
    for jid, m in recovered_jobs.items():
        pts = [p for pts in packages.values() for p in pts if p.job_id == jid]
        if pts:
            continue
        origin = oom_jobs.get(m.origin_job_id)
        facts = origin.facts if origin is not None and isinstance(origin.facts, Mapping) else {}
        variables = {**(facts.get("variables") or {}), **dict(m.variables or {})}
        lim = m.memory_limit_bytes or _quantity(variables.get("KUBERNETES_MEMORY_LIMIT"))
        req = _quantity(variables.get("KUBERNETES_MEMORY_REQUEST")) or lim or 0
        packages[package_of(facts.get("name"), variables)].append(Point(
            t=float(m.updated_at or m.created_at or 0.0), request=float(req), used_mean=None, used_peak=None,
            limit=None if lim is None else float(lim), job_id=jid))
    for name, pts in packages.items():
        pts.sort(key=lambda p: p.t)
        packages[name] = [Point(**{**p.__dict__, "recovered": True}) if p.job_id in recovered_jobs else p
                          for p in pts]
        if name not in reserved:
            reserved[name] = 0.0
    families, note = _store_families(store)
    chosen = [p for p, _ in reserved.most_common(top)] or list(packages)[:top]
    return ReportData(
        title="Memory right-sizing: usage history", source=f"state store {getattr(store, 'location', '')}",
        packages={p: packages[p] for p in chosen},
        summary={"usage records": records, "OOM kills": len(killed),
                 "recoveries (re-created job succeeded)": len(recovered_lineages)},
        families=families, families_note=" ".join(x for x in (note, lineage_note) if x),
        unit=_unit([source_of.get(p, "job") for p in chosen]))


def _member_of(store: Store, job_id: int) -> LineageAttempt | None:
    try:
        lin = store.lineage_for(job_id)
    except Exception:  # noqa: BLE001
        return None
    return next((m for m in lin.attempts if m.job_id == job_id), None)


def _quantity(value: Any) -> float | None:
    from runner_wrapper.quantity import QuantityError, parse_memory

    if value in (None, ""):
        return None
    try:
        return float(parse_memory(str(value)))
    except (QuantityError, ValueError, TypeError):
        return None


def _store_families(store: Store) -> tuple[dict[str, int], str]:
    try:
        counts = dict(store.family_counts())
    except Exception as exc:  # noqa: BLE001 - a picture without this part is still useful
        return {}, f"could not read the classifications: {exc}"
    return counts, "" if counts else "No classified job in the state store yet."


# ------------------------------------------------------------------ rendering
def _fmt_time(t: float, fmt: str = "%Y-%m-%d") -> str:
    return _dt.datetime.fromtimestamp(t, tz=_dt.timezone.utc).strftime(fmt)


def _axis_labels(t0: float, t1: float) -> list[str]:
    """Labels for both ends of a time axis: dates, with the time of day when the span is under
    two days, and one label when both ends read the same (a short history)."""
    fmt = "%Y-%m-%d" if t1 - t0 >= 2 * 86400 else "%Y-%m-%d %H:%M"
    a, b = _fmt_time(t0, fmt), _fmt_time(t1, fmt)
    return [a] if a == b else [a, b]


def _nice_max(v: float) -> float:
    if v <= 0:
        return 1.0
    exp = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if m * exp >= v:
            return m * exp
    return 10 * exp  # pragma: no cover


def _package_svg(name: str, pts: Sequence[Point], w: int = 460, h: int = 220) -> str:
    pad_l, pad_r, pad_t, pad_b = 62, 10, 22, 28
    t0 = min(p.t for p in pts)
    t1 = max(max(p.t for p in pts), max((k[0] for p in pts for k in p.kills), default=t0))
    if t1 <= t0:
        t1 = t0 + 1
    ymax = _nice_max(max([p.request for p in pts] + [p.used_peak or 0 for p in pts]
                         + [p.limit or 0 for p in pts] + [k[1] for p in pts for k in p.kills]) / GB)

    def x(t: float) -> float:
        return pad_l + (w - pad_l - pad_r) * (t - t0) / (t1 - t0)

    def y(v: float) -> float:
        return h - pad_b - (h - pad_t - pad_b) * (v / GB) / ymax

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
           f'aria-label="memory of {html.escape(name)} over time">',
           f'<text x="{pad_l}" y="15" font-size="13" font-weight="bold">{html.escape(name)}</text>']
    for i in range(5):
        v = ymax * i / 4
        yy = y(v * GB)
        out.append(f'<line x1="{pad_l}" x2="{w - pad_r}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{pad_l - 4}" y="{yy + 4:.1f}" font-size="10" text-anchor="end">{v:g} GB</text>')
    labels = _axis_labels(t0, max(max(p.t for p in pts), max((k[0] for p in pts for k in p.kills), default=t0)))
    out.append(f'<text x="{pad_l}" y="{h - 8}" font-size="10">{labels[0]}</text>')
    if len(labels) > 1:
        out.append(f'<text x="{w - pad_r}" y="{h - 8}" font-size="10" text-anchor="end">{labels[1]}</text>')

    def path(vals: list[tuple[float, float]], color: str, dash: str = "") -> None:
        if len(vals) < 1:
            return
        d = " ".join(f"{'M' if i == 0 else 'L'}{x(t):.1f},{y(v):.1f}" for i, (t, v) in enumerate(vals))
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<path d="{d}" fill="none" stroke="{color}" stroke-width="1.5"{extra}/>')

    path([(p.t, p.request) for p in pts], COLORS["request"])
    path([(p.t, p.limit) for p in pts if p.limit], COLORS["limit"], "4,3")
    for p in pts:
        if p.used_mean:
            out.append(f'<circle cx="{x(p.t):.1f}" cy="{y(p.used_mean):.1f}" r="2" fill="{COLORS["used"]}"/>')
        if p.used_peak:
            out.append(f'<circle cx="{x(p.t):.1f}" cy="{y(p.used_peak):.1f}" r="1.6" fill="none" '
                       f'stroke="{COLORS["peak"]}" stroke-width="0.8"/>')
        for kt, kl in p.kills:
            cx, cy = x(kt), y(kl)
            out.append(f'<path d="M{cx - 4:.1f},{cy - 4:.1f}L{cx + 4:.1f},{cy + 4:.1f}M{cx - 4:.1f},{cy + 4:.1f}'
                       f'L{cx + 4:.1f},{cy - 4:.1f}" stroke="{COLORS["kill"]}" stroke-width="2"><title>OOM kill at '
                       f'{kl / GB:.2f} GB</title></path>')
        if p.recovered:
            out.append(f'<circle cx="{x(p.t):.1f}" cy="{y(p.limit or p.request):.1f}" r="5" fill="none" '
                       f'stroke="{COLORS["recovery"]}" stroke-width="2"><title>recovered</title></circle>')
    out.append("</svg>")
    return "".join(out)


def _bars_svg(counts: Mapping[str, int], w: int = 460) -> str:
    items = sorted(counts.items(), key=lambda kv: -kv[1])
    if not items:
        return "<p>No data.</p>"
    bar_h, gap, pad_l = 18, 6, 110
    h = len(items) * (bar_h + gap) + 10
    top = max(v for _, v in items) or 1
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
           'aria-label="failures by family">']
    for i, (fam, v) in enumerate(items):
        yy = 5 + i * (bar_h + gap)
        bw = (w - pad_l - 60) * v / top
        color = FAMILY_COLORS.get(fam, "#17becf")
        out.append(f'<text x="{pad_l - 6}" y="{yy + 13}" font-size="12" text-anchor="end">{html.escape(fam)}</text>')
        out.append(f'<rect x="{pad_l}" y="{yy}" width="{bw:.1f}" height="{bar_h}" fill="{color}"/>')
        out.append(f'<text x="{pad_l + bw + 4:.1f}" y="{yy + 13}" font-size="12">{v:,}</text>')
    out.append("</svg>")
    return "".join(out)


def _fleet_svg(packages: Mapping[str, Sequence[Point]], w: int = 940, h: int = 200) -> str:
    days: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for pts in packages.values():
        for p in pts:
            d = int(p.t // 86400)
            days[d][0] += p.request / GB
            days[d][1] += (p.used_mean or 0) / GB
            days[d][2] += (p.static_request or 0) / GB
    if not days:
        return ""
    ds = sorted(days)
    ymax = _nice_max(max(max(v) for v in days.values()))
    pad_l, pad_b, pad_t = 48, 24, 10
    bw = (w - pad_l - 10) / max(len(ds), 1)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
           'aria-label="requested and used memory per day">']
    for i in range(5):
        v = ymax * i / 4
        yy = h - pad_b - (h - pad_b - pad_t) * v / ymax
        out.append(f'<line x1="{pad_l}" x2="{w - 10}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{pad_l - 4}" y="{yy + 4:.1f}" font-size="10" text-anchor="end">{v:g}</text>')
    for i, d in enumerate(ds):
        req, used, static = days[d]
        x0 = pad_l + i * bw
        for j, (v, c) in enumerate(((static, COLORS["static"]), (req, COLORS["request"]), (used, COLORS["used"]))):
            if v <= 0:
                continue
            bh = (h - pad_b - pad_t) * v / ymax
            out.append(f'<rect x="{x0 + j * bw / 3:.1f}" y="{h - pad_b - bh:.1f}" width="{max(bw / 3 - 0.5, 0.5):.1f}" '
                       f'height="{bh:.1f}" fill="{c}"/>')
    out.append(f'<text x="{pad_l}" y="{h - 6}" font-size="10">{_fmt_time(ds[0] * 86400)}</text>')
    if ds[-1] != ds[0]:  # one day of history: one date, not the same one twice
        out.append(f'<text x="{w - 10}" y="{h - 6}" font-size="10" text-anchor="end">'
                   f'{_fmt_time(ds[-1] * 86400)}</text>')
    out.append("</svg>")
    return "".join(out)


def _legend() -> str:
    items = [("request", "requested memory (line)"), ("used", "mean used (dot)"), ("peak", "peak used (ring)"),
             ("limit", "limit (dashed)"), ("kill", "OOM kill (x)"), ("recovery", "recovered (circle)")]
    return " ".join(f'<span class="lg"><span class="sw" style="background:{COLORS[k]}"></span>{html.escape(t)}</span>'
                    for k, t in items)


def render_html(data: ReportData) -> str:
    """The report as one HTML document (inline CSS and SVG only)."""
    rows = []
    for k, v in data.summary.items():
        s = f"{v:,.3f}" if isinstance(v, float) and abs(v) < 100 else (f"{v:,.0f}" if isinstance(v, (int, float)) else html.escape(str(v)))
        rows.append(f"<tr><th>{html.escape(k)}</th><td>{s}</td></tr>")
    charts = "".join(f'<div class="chart">{_package_svg(name, pts)}</div>'
                     for name, pts in data.packages.items() if pts)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(data.title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 24px; color: #222; max-width: 980px; }}
h1 {{ font-size: 22px; }} h2 {{ font-size: 17px; margin-top: 28px; }}
table {{ border-collapse: collapse; }} th, td {{ padding: 3px 12px; border-bottom: 1px solid #ddd; text-align: left; }}
td {{ text-align: right; font-variant-numeric: tabular-nums; }}
.grid {{ display: flex; flex-wrap: wrap; gap: 12px; }} .chart {{ border: 1px solid #ddd; padding: 4px; }}
.lg {{ margin-right: 14px; font-size: 12px; }} .sw {{ display: inline-block; width: 10px; height: 10px; margin-right: 4px; }}
.note {{ color: #666; font-size: 13px; }}
</style></head><body>
<h1>{html.escape(data.title)}</h1>
<p class="note">Source: {html.escape(data.source)}</p>
<h2>Summary</h2>
<table>{''.join(rows)}</table>
<h2>Requested vs used memory per {data.unit} over time</h2>
<p>{_legend()}</p>
<div class="grid">{charts or '<p>No usage history yet.</p>'}</div>
<h2>Per day, {data.unit}s above: static sizes, requested, used (GB, summed over jobs)</h2>
<p><span class="lg"><span class="sw" style="background:{COLORS['static']}"></span>static size</span>
<span class="lg"><span class="sw" style="background:{COLORS['request']}"></span>requested</span>
<span class="lg"><span class="sw" style="background:{COLORS['used']}"></span>mean used</span></p>
{_fleet_svg(data.packages)}
<h2>Failures by family</h2>
{_bars_svg(data.families)}
<p class="note">{html.escape(data.families_note)}</p>
</body></html>
"""


# ------------------------------------------------------------------ PNG (headless Chromium)
class ReportError(Exception):
    """The report cannot be written in the asked format (message says why and what to do).

    ``status``: the command's exit status (2: bad request or missing tool, 1: cannot write).
    """

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


#: Where :func:`find_chromium` looks, in order (then ``$PATH``).
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
OUTPUT_FORMATS = {".html": "html", ".htm": "html", ".png": "png"}


def output_format(path: str) -> str:
    """``html`` or ``png`` from the file name's extension; :class:`ReportError` for anything else."""
    import os

    ext = os.path.splitext(path)[1].lower()
    fmt = OUTPUT_FORMATS.get(ext)
    if fmt is None:
        raise ReportError(f"--out {path}: unsupported extension {ext or '(none)'!r}; "
                          "use report.html (or report.png with chromium installed)")
    return fmt


def find_chromium(explicit: str | None = None) -> str | None:
    """The headless browser to render PNGs with: ``explicit`` if given (and executable), else the usual places."""
    import os
    import shutil

    if explicit is not None:
        return explicit if os.path.isfile(explicit) and os.access(explicit, os.X_OK) else None
    for c in CHROMIUM_CANDIDATES:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def page_height(data: ReportData) -> int:
    """A window height (CSS px) that fits the whole page: the screenshot is cut at the window."""
    charts = sum(1 for pts in data.packages.values() if pts)
    return int(420 + 30 * len(data.summary) + 226 * math.ceil(charts / 2) + 300
               + 24 * max(len(data.families), 1) + 120)


def render_png(data: ReportData, out: str, chromium: str, *, width: int = 1024, timeout: float = 60.0) -> None:
    """Write the report as a PNG screenshot taken by headless ``chromium`` (no network, throwaway profile).

    Raises :class:`ReportError` when the browser fails, times out or writes no PNG.
    """
    import os
    import pathlib
    import shutil
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="retry-bot-report-") as tmp:
        page = pathlib.Path(tmp, "report.html")
        page.write_text(render_html(data), encoding="utf-8")
        shot = pathlib.Path(tmp, "report.png")
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--no-first-run", "--hide-scrollbars",
               f"--user-data-dir={tmp}/profile", f"--screenshot={shot}",
               f"--window-size={width},{page_height(data)}", page.as_uri()]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                  env={**os.environ, "HOME": tmp})
        except subprocess.TimeoutExpired:
            raise ReportError(f"{chromium} did not render the PNG within {timeout:.0f} s; "
                              "use --out report.html") from None
        except OSError as exc:
            raise ReportError(f"cannot run {chromium}: {exc.strerror or exc}; use --out report.html") from None
        data_ok = shot.exists() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        if proc.returncode != 0 or not data_ok:
            tail = " ".join((proc.stderr or "").strip().splitlines()[-2:])[:300]
            raise ReportError(f"{chromium} failed to render the PNG (exit {proc.returncode}): {tail}; "
                              "use --out report.html")
        try:
            shutil.copyfile(shot, out)
        except OSError as exc:
            raise ReportError(f"cannot write {out}: {exc.strerror or exc}", status=1) from None
