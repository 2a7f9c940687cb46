"""One decision path: the replay decides every retry with ``retry_bot.decide.decide`` and the policy.

Each test replays through ``retry-bot simulate --policy`` (the command the admin runs) and checks
a policy rule the live bot applies: the family budget, ``max_attempts``, ``beyond_top``,
``last_attempt``, the runner-class ladder; and that caps come from one function.
"""

from __future__ import annotations

import json
from pathlib import Path

from retry_bot.cli import main as cli_main
from tests.bot_predict.conftest import make_records, write_trace

GB = 1_000_000_000
GIB = 1 << 30

BASE = """
version = 1
max_attempts = {max_attempts}
[variables]
memory_limit = "KUBERNETES_MEMORY_LIMIT"
memory_request = "KUBERNETES_MEMORY_REQUEST"
memory_format = "binary"
raise_request = false
[families.oom]
action = "resize"
budget = {budget}
[resize]
ratio = 1.5
min_bump = "512Mi"
granularity = "256Mi"
max_memory = "{max_memory}"
beyond_top = "{beyond_top}"
last_attempt = "{last_attempt}"
[prediction]
cold_limit = "factor"
cold_limit_factor = 1.5
"""

LADDER = """
[[runner_classes]]
name = "small"
tags = ["small"]
max_memory = "8Gi"
max_cpus = "4"

[[runner_classes]]
name = "large"
tags = ["large"]
max_memory = "24Gi"
max_cpus = "16"
"""


def _replay(tmp_path: Path, peak: float, capsys, n: int = 20, ladder: str = "", **kw) -> dict[int, list[dict]]:
    opts = {"max_attempts": 6, "budget": 3, "max_memory": "96Gi", "beyond_top": "cap", "last_attempt": "bump"}
    opts.update(kw)
    pol = tmp_path / "policy.toml"
    pol.write_text(BASE.format(**opts) + ladder)
    recs = make_records(n, seed=5)
    for i, r in enumerate(recs):   # one package each: no job learns from another's kills
        r["key"]["package"] = f"pkg{i}"
        r["job_name"] = f"pkg{i}@1.0 /abcdefg %gcc@12.3.0 arch=linux-ubuntu22.04-x86_64_v3 E4S"
        r["memory_peak_bytes"] = int(peak)
        r["static_request"]["memory_request_bytes"] = 2 * GB
    trace = write_trace(tmp_path / "t.jsonl", recs)
    out = tmp_path / "alloc.jsonl"
    assert cli_main(["simulate", "--trace", str(trace), "--policy", str(pol), "--allocations", str(out),
                     "--format", "json", "--no-progress"]) == 0
    capsys.readouterr()
    by_job: dict[int, list[dict]] = {}
    for line in out.read_text().splitlines():
        r = json.loads(line)
        by_job.setdefault(r["job_id"], []).append(r)
    return by_job


def test_family_budget_bounds_the_retries(tmp_path, capsys):
    for rows in _replay(tmp_path, 200 * GB, capsys, budget=2).values():
        assert len(rows) == 3   # the origin and two re-runs: the oom budget


def test_max_attempts_bounds_the_lineage(tmp_path, capsys):
    for rows in _replay(tmp_path, 200 * GB, capsys, budget=5, max_attempts=2).values():
        assert len(rows) == 2


def test_beyond_top_stop_gives_up_instead_of_running_at_the_cap(tmp_path, capsys):
    # 3 GB static, limit 1.5 x: killed at 3 GB; the bump needs more than the 8Gi top of the ladder
    capped = _replay(tmp_path, 200 * GB, capsys, max_memory="8Gi", beyond_top="cap")
    stopped = _replay(tmp_path, 200 * GB, capsys, max_memory="8Gi", beyond_top="stop")
    assert all(rows[-1]["memory_limit_bytes"] == 8 * GIB for rows in capped.values())
    assert all(max(r["memory_limit_bytes"] for r in rows) < 8 * GIB for rows in stopped.values())


def test_last_attempt_max_runs_the_last_rerun_at_the_ceiling(tmp_path, capsys):
    for rows in _replay(tmp_path, 200 * GB, capsys, budget=2, last_attempt="max").values():
        assert len(rows) == 3 and rows[-1]["memory_limit_bytes"] == 96 * GIB
        assert rows[1]["memory_limit_bytes"] < 96 * GIB


def test_the_ladder_caps_retries_at_the_top_class(tmp_path, capsys):
    for rows in _replay(tmp_path, 200 * GB, capsys, ladder=LADDER, budget=6, max_attempts=8).values():
        assert max(r["memory_limit_bytes"] for r in rows) == 24 * GIB


def test_a_retry_that_fits_succeeds(tmp_path, capsys):
    for rows in _replay(tmp_path, 4 * GB, capsys).values():
        assert rows[-1]["memory_limit_bytes"] > 4 * GB        # the last attempt ran to the end
        assert all(r["memory_limit_bytes"] < 4 * GB for r in rows[:-1])


def test_caps_come_from_one_function_for_serve_bot_and_replay():
    from retry_bot.policy import parse_policy
    from retry_bot.predict.sources import clamp_from_policy
    from retry_bot.simulate.allocators import PolicyReplay

    pol = parse_policy(BASE.format(max_attempts=6, budget=3, max_memory="96Gi", beyond_top="cap",
                                   last_attempt="bump") + LADDER)
    clamp = clamp_from_policy(pol)
    assert clamp.max_memory_bytes == 24 * GIB and clamp.max_cpu_cores == 16.0
    assert PolicyReplay(pol).clamp == clamp
