"""Test harness: the GitLab stand-in, a runner loop with scripted builds, and the real bot wired to them.

The *builds* are simulated (the runner side is not what these tests are about):
a behaviour function per job name turns the job's variables into an outcome and
a job log carrying a **signed** usage record, as the runner wrapper would write.
The template's ``retry-bot:generate`` job really runs its script with bash and
uploads its artifact, so the child pipeline is made from what the bot sent.
Everything the bot does goes over real HTTP through python-gitlab.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

from retry_bot.live.actions import ActionSettings
from retry_bot.live.config import parse_config
from retry_bot.live.daemon import Bot
from standin.gitlab import StandIn, collect_artifacts
from standin.gitlab.expand import runner_expand
from runner_wrapper.quantity import parse_memory
from runner_wrapper.record import (AppliedLimits, HostInfo, JobIdentity, Usage, UsageRecord, encode_marker)

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "packaging" / "gitlab-ci" / "retry-bot.yml"
KEY = b"farm-signing-key-0123456789"
KEY_ID = "farm"
TOKEN = "glpat-farm-token-abcdef"
MiB = 2**20

POLICY = """
version = 1
skip_superseded = true
max_attempts = 6

[families.oom]
action = "resize"
budget = 3
backoff = { initial = "0s" }

[families.infrastructure]
action = "retry"
budget = 1
backoff = { initial = "0s" }

[resize]
ratio = 1.5
min_bump = "256Mi"
granularity = "128Mi"
max_memory = "4Gi"
beyond_top = "stop"

[[runner_classes]]
name = "small"
tags = ["small"]
max_memory = "512Mi"
max_cpus = "2"

[[runner_classes]]
name = "medium"
tags = ["medium"]
max_memory = "1Gi"
max_cpus = "4"

[[runner_classes]]
name = "large"
tags = ["large"]
max_memory = "2Gi"
max_cpus = "8"
"""


def project_config(jobs: Mapping[str, Mapping[str, Any]], stages: tuple[str, ...] = ("build", "test")) -> dict:
    """A root .gitlab-ci.yml as a project writes it: the template merged in and the skip rule first
    in every job's rules (what example.gitlab-ci.yml shows; the `include: local` + `!reference` form
    itself is exercised by the demo and tests/bot_live/test_demo.py)."""
    cfg: dict[str, Any] = {"stages": list(stages)}
    cfg.update(yaml.safe_load(TEMPLATE.read_text()))
    for name, job in jobs.items():
        j = dict(job)
        j["rules"] = [{"if": "$RETRY_BOT_CHILD_CONFIG", "when": "never"}] + list(j.get("rules", [{"when": "on_success"}]))
        cfg[name] = j
    return cfg


def signed_log(payload: Mapping[str, Any], *, limit: int | None, peak: int, oom: bool, text: str,
               exit_code: int) -> bytes:
    info = payload["job_info"]
    rec = UsageRecord(
        job=JobIdentity(id=int(payload["id"]), project_id=info["project_id"], project_path=info["project_full_path"],
                        pipeline_id=info["pipeline_id"], name=info["name"], stage=info["stage"]),
        host=HostInfo(hostname="farm", backend="cgroup-v1"),
        limits=AppliedLimits(memory_limit_bytes=limit),
        usage=Usage(wall_seconds=1.0, memory_peak_bytes=peak, oom_kills=1 if oom else 0),
        started_at="2026-11-21T00:00:00Z", finished_at="2026-11-21T00:00:01Z", exit_code=exit_code)
    marker = encode_marker(rec.to_dict(), KEY, KEY_ID)
    return (text + "\n" + marker + "\n" + (f"ERROR: Job failed: exit status {exit_code}\n" if exit_code else
                                           "Job succeeded\n")).encode()


def needs_memory(need_mib: int, default_limit: str = "128Mi") -> Callable[[Mapping[str, Any], dict[str, str]], dict]:
    """A build that needs ``need_mib`` MiB: OOM-killed (exit 137, signed record) below that."""
    def run(payload: Mapping[str, Any], v: dict[str, str]) -> dict:
        limit = parse_memory(v.get("KUBERNETES_MEMORY_LIMIT", default_limit))
        if limit < need_mib * MiB:
            return {"status": "failed", "failure_reason": "script_failure", "exit_code": 137,
                    "log": signed_log(payload, limit=limit, peak=limit, oom=True, exit_code=137,
                                      text="c++ -O2 big.cpp\nrunner-wrapper: OOM: the build was killed at its "
                                           "memory limit")}
        return {"status": "success", "log": signed_log(payload, limit=limit, peak=need_mib * MiB, oom=False,
                                                        exit_code=0, text="built")}
    return run


def compile_error(payload: Mapping[str, Any], v: dict[str, str]) -> dict:
    return {"status": "failed", "failure_reason": "script_failure", "exit_code": 1,
            "log": signed_log(payload, limit=None, peak=50 * MiB, oom=False, exit_code=1,
                              text="main.c:3:5: error: expected ';' before '}' token\nmake: *** [Makefile:2: main.o] "
                                   "Error 1")}


def flaky_dns(fail_times: int = 1) -> Callable[[Mapping[str, Any], dict[str, str]], dict]:
    seen: list[int] = []

    def run(payload: Mapping[str, Any], v: dict[str, str]) -> dict:
        seen.append(int(payload["id"]))
        if len(seen) <= fail_times:
            return {"status": "failed", "failure_reason": "script_failure", "exit_code": 6,
                    "log": b"$ curl -fsS https://mirror.example.org/pkg.tar.gz\n"
                           b"curl: (6) Could not resolve host: mirror.example.org\n"
                           b"ERROR: Job failed: exit status 6\n"}
        return {"status": "success", "log": b"downloaded\nJob succeeded\n"}
    return run


def always_ok(payload: Mapping[str, Any], v: dict[str, str]) -> dict:
    return {"status": "success", "log": b"ok\n"}


class Farm:
    """The stand-in plus a runner whose builds follow ``behaviours`` (by job name)."""

    def __init__(self, behaviours: dict[str, Callable[..., dict]], *, runner_tags=("small", "medium", "large"),
                 processing_delay: float = 0.15, **standin_kw: Any):
        self.behaviours = behaviours
        # Jobs leave ``created`` only after ``processing_delay`` (GitLab processes pipelines in a worker).
        self.standin = StandIn(token=TOKEN, processing_delay=processing_delay, **standin_kw)
        self.url = self.standin.start()
        self.runs: list[tuple[int, str, dict[str, str]]] = []
        self.runner = self.standin.attach_runner(self.execute, tags=runner_tags, poll_interval=0.02)

    def execute(self, payload: dict[str, Any]) -> dict:
        name = payload["job_info"]["name"]
        # What the job sees: the runner's expansion of every non-raw variable (R JobVariables.Expand).
        v = runner_expand(payload["variables"])
        self.runs.append((int(payload["id"]), name, v))
        if name == "retry-bot:generate" or self.behaviours.get(name) == "bash":
            with tempfile.TemporaryDirectory() as wd:
                env = {**os.environ, **v}
                script = "\n".join(payload["steps"][0]["script"])
                p = subprocess.run(["bash", "-ec", script], cwd=wd, env=env, capture_output=True, timeout=30)
                return {"status": "success" if p.returncode == 0 else "failed",
                        "failure_reason": None if p.returncode == 0 else "script_failure",
                        "exit_code": p.returncode, "log": p.stdout + p.stderr,
                        "artifacts": collect_artifacts(payload, wd)}
        return self.behaviours.get(name, always_ok)(payload, v)

    def add_project(self, path: str, jobs: Mapping[str, Mapping[str, Any]], **kw: Any):
        return self.standin.add_project(path, project_config(jobs), **kw)

    def close(self) -> None:
        self.standin.stop()


def bot_config_text(url: str, state: Path, policy: Path, projects: list[str], *, interval: float = 0.2,
                    extra: str = "", timeout: float = 2.0, attempts: int = 4, groups: tuple[str, ...] = (),
                    gitlab_extra: str = "") -> str:
    plist = ", ".join(f'"{p}"' for p in projects)
    glist = ", ".join(f'"{g}"' for g in groups)
    return f"""
[gitlab]
url = "{url}"
token_env = "FARM_TOKEN"
request_timeout_seconds = {timeout}
max_attempts = {attempts}
max_wait_seconds = 0.2
max_total_seconds = 10
{gitlab_extra}
[poll]
projects = [{plist}]
groups = [{glist}]
interval_seconds = {interval}
lookback_hours = 1
[bot]
policy = "{policy}"
state_url = "sqlite:///{state}"
[[signing.keys]]
id = "{KEY_ID}"
env = "FARM_KEY"
[leader]
enabled = true
lease_seconds = 5
{extra}
"""


ENV = {"FARM_TOKEN": TOKEN, "FARM_KEY": KEY.decode()}


def make_bot(farm: Farm, tmp: Path, projects: list[str], *, policy: str = POLICY, dry_run: bool | None = None,
             settle: float = 0.5, url: str | None = None, env: Mapping[str, str] | None = None,
             leader: bool = True, **kw: Any) -> Bot:
    """The real bot on ``farm`` (or on ``url``, e.g. a proxy in front of it), state in ``tmp``."""
    pol = tmp / "policy.toml"
    pol.write_text(policy)
    text = bot_config_text(url or farm.url, tmp / "state.db", pol, projects, **kw)
    if not leader:
        text = text.replace("[leader]\nenabled = true", "[leader]\nenabled = false")
    (tmp / "bot.toml").write_text(text)
    cfg = parse_config(text, base=tmp, env={**ENV, **(env or {})})
    return Bot(cfg, dry_run=dry_run, action_settings=ActionSettings(settle_seconds=settle, child_timeout_seconds=60))


def cycle_until(bot: Bot, predicate: Callable[[], bool], *, timeout: float = 20.0, pause: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        bot.once()
        if predicate():
            return True
        time.sleep(pause)
    return predicate()


def fail_five_jobs_in_two_projects(farm: Farm) -> None:
    """``grp/a`` (an OOM at 128Mi, a DNS flake, a compile error) and ``grp/b`` (an OOM needing a medium
    runner, a DNS flake): one pipeline each, run until all five jobs have failed.  ``farm`` must know the
    scripts ``oom``, ``dns``, ``compile``, ``oom2`` and ``dns2``."""
    farm.add_project("grp/a", {"oom": {"stage": "build", "tags": ["small"], "script": ["make"],
                                       "variables": {"KUBERNETES_MEMORY_LIMIT": "128Mi"}},
                               "dns": {"stage": "build", "tags": ["small"], "script": ["curl"]},
                               "compile": {"stage": "build", "tags": ["small"], "script": ["make"]}})
    farm.add_project("grp/b", {"oom2": {"stage": "build", "tags": ["medium"], "script": ["make"],
                                        "variables": {"KUBERNETES_MEMORY_LIMIT": "128Mi"}},
                               "dns2": {"stage": "build", "tags": ["small"], "script": ["curl"]}})
    farm.standin.create_pipeline("grp/a")
    farm.standin.create_pipeline("grp/b")
    assert farm.standin.wait_for(lambda: sum(j.status == "failed" for j in farm.standin.jobs()) == 5)


def oom_project(farm: Farm, path: str = "grp/d", *, pipeline: bool = True) -> None:
    """Project ``path`` with one job ``build`` (128Mi, needs about 300 MiB); with ``pipeline``, run
    a pipeline until ``build`` has failed (OOM-killed)."""
    farm.behaviours["build"] = needs_memory(300)
    farm.add_project(path, {"build": {"stage": "build", "tags": ["small"], "script": ["make"],
                                      "variables": {"KUBERNETES_MEMORY_LIMIT": "128Mi"}}})
    if pipeline:
        farm.standin.create_pipeline(path)
        assert farm.standin.wait_for(lambda: any(j.status == "failed" for j in farm.standin.jobs(path)))


def pipeline_creates(farm: Farm) -> list:
    """The stand-in's calls that created a pipeline (the bot's writes of a re-creation)."""
    return farm.standin.calls_matching("POST", r"/pipeline$")


def metric_sample(bot: Bot, name: str, **labels: str) -> float:
    """A Prometheus sample of the bot's registry (0 when never set)."""
    v = bot.metrics.registry.get_sample_value(name, labels)
    return 0.0 if v is None else v
