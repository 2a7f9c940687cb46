"""The what-if replay: causality, the OOM model, metrics equal to evaluate.py's, baselines, the CLI."""

from __future__ import annotations

import os

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from dataclasses import replace

from retry_bot.predict.settings import DEFAULT_SETTINGS

from retry_bot.cli import main as cli_main
from retry_bot.simulate.allocators import BASELINES, PolicyReplay, make_allocator
from retry_bot.simulate.metrics import compute_metrics
from retry_bot.simulate.replay import simulate
from retry_bot.simulate.trace import AttemptAlloc, load_trace
from tests.bot_predict.conftest import make_records, write_trace

# shared/ sits beside the repository (a clone in CI, /work/main here); RIGHTSIZER_BENCH_DIR overrides.
BENCH = Path(os.environ.get("RIGHTSIZER_BENCH_DIR") or Path(__file__).resolve().parents[3] / "shared" / "bench")


def _run(path, name=None):
    return simulate(load_trace(str(path)), make_allocator(name))


def _by_job(rows):
    out = {}
    for r in rows:
        out.setdefault(r["job_id"], []).append(r)
    return out


def test_future_jobs_do_not_change_earlier_allocations(tmp_path):
    recs = make_records(400, seed=3)
    full = _by_job(_run(write_trace(tmp_path / "full.jsonl", recs)).rows)
    half = _by_job(_run(write_trace(tmp_path / "half.jsonl", recs[:200])).rows)
    assert all(half[j] == full[j] for j in half)


def test_a_killed_job_reveals_only_the_bound(tmp_path):
    recs = make_records(400, seed=5)
    res = _run(write_trace(tmp_path / "a.jsonl", recs))
    full = _by_job(res.rows)
    retried = [j for j, rows in full.items() if len(rows) >= 2]
    assert retried, "the synthetic trace should produce at least one OOM kill"
    j = retried[0]
    i = j - 1
    cut = [dict(r) for r in recs[: i + 1]]
    cut_b = [dict(r) for r in cut]
    cut_b[-1]["memory_peak_bytes"] = int(cut_b[-1]["memory_peak_bytes"] * 1.7)
    a = _by_job(_run(write_trace(tmp_path / "b.jsonl", cut)).rows)[j][:2]
    b = _by_job(_run(write_trace(tmp_path / "c.jsonl", cut_b)).rows)[j][:2]
    assert a == b


def test_usage_of_running_jobs_is_invisible(tmp_path):
    recs = make_records(200, seed=7)
    base = _by_job(_run(write_trace(tmp_path / "a.jsonl", recs)).rows)
    # make job 150 run very long: its usage must not be seen by anything created before it ends
    changed = [dict(r) for r in recs]
    changed[149]["duration_s"] = 1e7
    changed[149]["memory_peak_bytes"] *= 3
    changed[149]["memory_mean_bytes"] *= 3
    got = _by_job(_run(write_trace(tmp_path / "b.jsonl", changed)).rows)
    for j in range(1, 150):
        assert got[j] == base[j]


def test_oom_model_and_attempt_rows(tmp_path):
    res = _run(write_trace(tmp_path / "a.jsonl", make_records(300, seed=9)))
    jobs = {j.job_id: j for j in load_trace(str(tmp_path / "a.jsonl"))}
    for jid, rows in _by_job(res.rows).items():
        assert [r["attempt"] for r in rows] == list(range(1, len(rows) + 1))
        for r in rows[:-1]:
            assert jobs[jid].killed(r["memory_limit_bytes"])          # only killed attempts are followed
        for r in rows:
            assert r["memory_limit_bytes"] is None or r["memory_limit_bytes"] >= r["memory_request_bytes"] > 0
    assert res.metrics["failed_permanently"] == 0


@pytest.mark.skipif(not (BENCH / "evaluate.py").exists(), reason="benchmark tools not present")
def test_metrics_equal_evaluate_py(tmp_path):
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("bench_evaluate", BENCH / "evaluate.py")
        ev = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(ev)
        import alloc_common
    finally:
        sys.path.remove(str(BENCH))
    path = write_trace(tmp_path / "a.jsonl", make_records(300, seed=11))
    for name in (None, "gantry", "vpa", "static"):
        res = _run(path, name)
        out = tmp_path / "alloc.jsonl"
        out.write_text("".join(json.dumps(r) + "\n" for r in res.rows))
        trace = alloc_common.load_trace(str(path))
        allocs, errors = alloc_common.load_allocations(str(out), trace)
        assert errors == []
        theirs = ev.compute_metrics(trace, allocs)
        for k, v in theirs.items():
            if v is None:
                assert res.metrics[k] is None, k
            else:
                assert res.metrics[k] == pytest.approx(v, rel=1e-12, abs=1e-12), k


def test_compute_metrics_by_hand():
    recs = make_records(1, seed=1)
    recs[0].update(memory_peak_bytes=4_000_000_000, memory_mean_bytes=1_000_000_000, duration_s=100.0,
                   peak_at_fraction=0.5, cpu_mean_cores=2.0)
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        job = load_trace(str(write_trace(Path(d) / "t.jsonl", recs)))[0]
    allocs = {1: [AttemptAlloc(1_000_000_000, 2_000_000_000, 1.0), AttemptAlloc(2_000_000_000, 5_000_000_000, 2.0)]}
    m = compute_metrics([job], allocs)
    # attempt 1 killed after 100 * 0.5 * 2/4 = 25 s; attempt 2 runs 100 s
    assert m["oom_kills"] == 1 and m["failed_permanently"] == 0
    assert m["mem_avg_over_request"] == pytest.approx((0.5 * 2e9 * 25 + 1e9 * 100) / (1e9 * 25 + 2e9 * 100))
    assert m["mem_peak_over_limit"] == pytest.approx(4e9 / 5e9)
    assert m["cpu_avg_over_request"] == pytest.approx((2 * 25 + 2 * 100) / (1 * 25 + 2 * 100))


@pytest.mark.parametrize("name", BASELINES)
def test_baselines_replay(tmp_path, name):
    res = _run(write_trace(tmp_path / "a.jsonl", make_records(200, seed=2)), name)
    assert res.metrics["jobs"] == 200 and res.allocator == name


def test_budget_and_cap_bound_the_retries(tmp_path):
    recs = make_records(50, seed=4)
    for r in recs:
        r["memory_peak_bytes"] = 50_000_000_000          # far above the cap
    jobs = load_trace(str(write_trace(tmp_path / "a.jsonl", recs)))
    settings = replace(DEFAULT_SETTINGS, cold_limit="factor")      # every attempt has a limit
    from retry_bot.policy import parse_policy

    pol = parse_policy('version = 1\n[families.oom]\naction = "resize"\nbudget = 2\n'
                       '[resize]\nmax_memory = "20G"\n')
    res = simulate(jobs, make_allocator(None, settings, PolicyReplay(pol)))
    for rows in _by_job(res.rows).values():
        assert len(rows) <= 3
        assert all((r["memory_limit_bytes"] or 0) <= 20_000_000_000 for r in rows)
    assert res.metrics["failed_permanently"] == 50


def test_cli_writes_a_valid_allocation_file(tmp_path, capsys):
    path = write_trace(tmp_path / "a.jsonl", make_records(120, seed=8))
    out = tmp_path / "out.jsonl"
    assert cli_main(["simulate", "--trace", str(path), "--allocations", str(out), "--format", "json"]) == 0
    m = json.loads(capsys.readouterr().out)
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert m["attempts"] == len(rows) and m["jobs"] == 120
    assert set(rows[0]) == {"job_id", "attempt", "memory_request_bytes", "memory_limit_bytes", "cpu_request_cores"}


def test_cli_text_summary_explains_every_label(tmp_path, capsys):
    from retry_bot.simulate.metrics import METRIC_ORDER

    path = write_trace(tmp_path / "a.jsonl", make_records(30, seed=3))
    assert cli_main(["simulate", "--trace", str(path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    summary, _, legend = out.partition("legend")
    labels = [line.split()[0] for line in summary.splitlines()[2:] if line.strip()]
    assert set(METRIC_ORDER) <= set(labels)
    for label in labels:  # every label printed has its one-line meaning
        assert re.search(rf"^  {label} +\S", legend, re.M), label
    assert "share of successful attempts whose peak passed their request" in legend
    assert cli_main(["simulate", "--trace", str(path), "--no-progress", "--no-legend"]) == 0
    assert "legend" not in capsys.readouterr().out


def test_cli_bad_trace_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"job_id": 1}\nnot json\n')
    assert cli_main(["simulate", "--trace", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl:1" in err and "missing field" in err and "Traceback" not in err


@pytest.mark.slow
@pytest.mark.skipif(not (BENCH / "causality_check.py").exists(), reason="benchmark tools not present")
@pytest.mark.parametrize("baseline", [None, "gantry", "vpa"])
def test_official_causality_check_on_a_small_trace(tmp_path, baseline):
    path = write_trace(tmp_path / "a.jsonl", make_records(300, seed=13))
    cmd = f"{sys.executable} -m retry_bot --log-level error simulate --trace {{trace}} --allocations {{out}}"
    if baseline:
        cmd += f" --baseline {baseline}"
    p = subprocess.run([sys.executable, str(BENCH / "causality_check.py"), "--cmd", cmd, "--trace", str(path),
                        "--inflight-cuts", "1", "--n-perturb", "5", "--max-confirm", "2"],
                       capture_output=True, text=True, cwd=str(Path(__file__).resolve().parents[2]), timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "verdict: PASS" in p.stdout


def test_progress_bar_output():
    import io
    from retry_bot.commands.simulate import _progress_bar

    buf = io.StringIO()
    show = _progress_bar(buf)
    show(50, 100)
    show(100, 100)
    text = buf.getvalue()
    assert "50/100 jobs" in text and "100/100 jobs" in text and text.endswith("\n")
