"""``retry-bot demo``: the whole system on one machine, in under a minute.

Starts, all on 127.0.0.1 and in a temporary directory:

* the GitLab stand-in (:mod:`standin.gitlab`) with one project whose
  ``.gitlab-ci.yml`` includes the retry-bot template and has three jobs;
* a local runner loop that executes every pending job through
  ``runner-wrapper executor`` (GitLab Runner's custom-executor call sequence,
  :func:`standin.runner.run_job`), with real cgroups where the
  host allows and the psutil fallback elsewhere;
* the retry bot (real python-gitlab over HTTP, a temporary SQLite state, a
  generated signing key shared by the wrapper and the bot).

The three jobs:

``build``    needs about 300 MiB but gets ``KUBERNETES_MEMORY_LIMIT=128Mi``: the
             kernel kills it, the wrapper reports exit 137 and a signed usage
             record; the bot classifies it as OOM from the record, re-creates it
             as a manual job in a child pipeline, plays it with a larger limit,
             and it succeeds.
``compile``  a compile error: left alone.
``fetch``    a DNS failure on its first run: one plain retry, which succeeds.

A timeline is printed; the exit code is 0 only if all three outcomes happened.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from runner_wrapper.logconfig import get_logger

if TYPE_CHECKING:
    from retry_bot.live.daemon import Bot
    from standin.gitlab import StandIn
    from standin.gitlab.cli import FailRules
    from standin.gitlab.state import Job

__all__ = ["run_demo", "DemoResult", "project_ci_yaml", "template_text", "demo_cgroup_dirs", "remove_demo_cgroups",
           "timeline_lines", "TIMELINE_WIDTH"]

#: Width of the printed timeline; longer entries wrap at word boundaries.
TIMELINE_WIDTH = 120

log = get_logger("retry_bot.demo")

TOKEN = "glpat-demo-" + "0" * 12
#: The stand-in's Maintainer (who pushes); the bot has its own Developer token.
ADMIN_TOKEN = "glpat-demo-admin-" + "0" * 6
#: ``main`` is protected as GitLab protects a default branch, except that Developers may merge:
#: a Developer bot may then retry, play and create pipelines on it (G ``lib/gitlab/user_access.rb``).
PROTECTED_MAIN = {"main": {"push": "maintainer", "merge": "developer"}}
#: A script that needs the job's own ``$`` expansion at run time (and survives the resize unchanged).
DOLLAR_LINES = ('mkdir -p "$OUT_DIR" && echo "job ${CI_JOB_NAME} (pid $$) in $OUT_DIR" > "${OUT_DIR}/info"',
                'test "$(cat "$OUT_DIR/info" | cut -d" " -f2)" = "$CI_JOB_NAME"')
KEY_ID = "demo"
#: Where projects keep the template (``include: local``), and its copy inside the package.
TEMPLATE_PATH = "packaging/gitlab-ci/retry-bot.yml"
TEMPLATE_RESOURCE = "retry-bot.yml"
CGROUP_V1_ROOT = "/sys/fs/cgroup"

DEMO_POLICY = """
# The demo's policy: the shipped defaults, with no backoff so it fits in a minute.
version = 1
skip_superseded = true

[families.oom]
action = "resize"
budget = 2
backoff = { initial = "0s" }

[families.infrastructure]
action = "retry"
budget = 1
backoff = { initial = "0s" }

[resize]
ratio = 1.5
min_bump = "256Mi"
granularity = "128Mi"
max_memory = "2Gi"
"""

# Allocates and touches ~300 MiB (every page), so the kernel really charges it.
BIG_BUILD = ("python3 -c \"import sys; b = bytearray(300 * 2**20); "
             "[b.__setitem__(i, 1) for i in range(0, len(b), 4096)]; "
             "print('linked big.so using', len(b) >> 20, 'MiB')\"")


def template_text() -> str:
    """The CI template ``packaging/gitlab-ci/retry-bot.yml``, as shipped inside the package.

    ``retry_bot/gitlab/retry-bot.yml`` is a copy kept byte-identical to the
    repository's file by ``tests/bot_live/test_demo.py``, so the demo also runs
    from an installed wheel.
    """
    try:
        return resources.files("retry_bot.gitlab").joinpath(TEMPLATE_RESOURCE).read_text(encoding="utf-8")
    except (FileNotFoundError, ModuleNotFoundError) as exc:
        raise FileNotFoundError(
            f"the CI template retry_bot/gitlab/{TEMPLATE_RESOURCE} is missing from this installation "
            f"({exc}); reinstall retry-bot (the wheel ships it as package data)") from None


COMPILE_SCRIPT = ("echo 'cc -c main.c'",
                  "echo \"main.c:3:5: error: expected ';' before '}' token\"",
                  "echo 'make: *** [Makefile:2: main.o] Error 1'",
                  "exit 1")


def project_ci_yaml(marker_dir: Path) -> str:
    """The demo project's root ``.gitlab-ci.yml``, written as a project writes it.

    It includes the real template (``include: local``) and makes
    ``!reference [.retry-bot:skip, rules]`` the first rule of every job, exactly
    as ``packaging/gitlab-ci/example.gitlab-ci.yml`` shows.
    """
    flag = marker_dir / "mirror-resolved"
    fetch = ("echo '$ curl -fsS https://mirror.example.org/src.tar.gz'",
             f"if [ ! -e {flag} ]; then touch {flag}; "
             "echo 'curl: (6) Could not resolve host: mirror.example.org'; exit 6; fi",
             "echo 'downloaded src.tar.gz'")

    def job(name: str, script: tuple[str, ...], variables: str = "") -> str:
        lines = "".join(f"    - {json.dumps(x)}\n" for x in script)  # a JSON string is valid YAML
        return (f"{name}:\n"
                "  stage: build\n"
                "  rules:\n"
                "    - !reference [.retry-bot:skip, rules]   # (2) first rule of every job\n"
                "    - when: on_success\n"
                f"{variables}"
                f"  script:\n{lines}\n")

    return ("# demo/app: the two additions for the retry bot are marked (1) and (2)\n"
            "include:\n"
            f"  - local: {TEMPLATE_PATH}   # (1)\n\n"
            "stages: [build, test]\n\n"
            + job("build", ("echo compiling big.cpp", *DOLLAR_LINES, BIG_BUILD),
                  "  variables:\n    KUBERNETES_MEMORY_LIMIT: 128Mi\n    OUT_DIR: out\n")
            + job("compile", COMPILE_SCRIPT)
            + job("fetch", fetch))


def demo_cgroup_dirs(parent: str) -> list[str]:
    """Every directory the runner wrapper may create for ``parent`` (existing or not):
    the cgroup v1 ``memory``/``cpu``/``cpuacct`` hierarchies and the cgroup v2 mount."""
    from runner_wrapper.cgroup.v1 import v1_hierarchies
    from runner_wrapper.cgroup.v2 import find_cgroup2_mount

    roots = list(dict.fromkeys(v1_hierarchies(CGROUP_V1_ROOT).values()))
    v2 = find_cgroup2_mount()
    if v2:
        roots.append(v2)
    return [os.path.join(r, parent) for r in roots]


def remove_demo_cgroups(parent: str) -> list[str]:
    """Remove the demo's parent cgroups (and any job cgroup left below them).

    Returns the directories that could not be removed (a process still in
    them), after logging why; an empty list means nothing is left behind.
    """
    from runner_wrapper.cgroup.base import CgroupError, rmdir_tree

    left: list[str] = []
    for d in demo_cgroup_dirs(parent):
        try:
            rmdir_tree(d)
        except (CgroupError, OSError) as exc:
            log.warning("demo_cgroup_left_behind", path=d, error=str(exc),
                        hint=f"remove it with: rmdir {d} (once its processes ended)")
        if os.path.isdir(d):
            left.append(d)
    return left


@dataclass
class DemoResult:
    ok: bool
    outcomes: dict[str, bool] = field(default_factory=dict)
    seconds: float = 0.0
    timeline: list[str] = field(default_factory=list)
    backend: str = ""
    #: Parent cgroup directories that could not be removed (empty: nothing left behind).
    cgroups_left: list[str] = field(default_factory=list)


def timeline_lines(elapsed: float, who: str, text: str, width: int = TIMELINE_WIDTH) -> list[str]:
    """One timeline entry as printed: ``  12.3s  bot     text``, wrapped at word boundaries to
    ``width`` (continuation lines aligned under the text, its own indent kept); a word longer
    than a line (a URL, a path) is kept whole rather than cut."""
    prefix = f"{elapsed:6.1f}s  {who:<7} "
    indent = " " * (len(prefix) + len(text) - len(text.lstrip(" ")))
    lines = textwrap.wrap(text, width=max(width - len(prefix), 20), subsequent_indent=indent[len(prefix):],
                          break_long_words=False, break_on_hyphens=False) or [""]
    return [prefix + lines[0]] + [" " * len(prefix) + ln for ln in lines[1:]]


class _Timeline:
    def __init__(self, out: TextIO, live: bool) -> None:
        self.t0 = time.monotonic()
        self.lines: list[str] = []
        self.out = out
        self.live = live
        self.lock = threading.Lock()

    def add(self, who: str, text: str) -> None:
        lines = timeline_lines(time.monotonic() - self.t0, who, text)
        with self.lock:
            self.lines.extend(lines)
            if self.live:
                print("\n".join(lines), file=self.out, flush=True)


def _wrapper_config(tmp: Path, parent: str, backend: str) -> Path:
    p = tmp / "wrapper.toml"
    p.write_text(f"""
[cgroup]
backend = "{backend}"
parent = "{parent}"
[signing]
key_env = "RIGHTSIZER_SIGNING_KEY"
key_id = "{KEY_ID}"
[sinks]
spool = "{tmp / 'spool' / 'usage.jsonl'}"
[sampler]
interval = 0.1
[executor]
builds_dir = "{tmp / 'builds'}"
cache_dir = "{tmp / 'cache'}"
state_dir = "{tmp / 'jobs'}"
psutil_enforce_memory = true
""")
    return p


def run_demo(*, out: TextIO = sys.stdout, timeout: float = 90.0, keep: bool = False, live: bool = True,
             workdir: str | None = None, backend: str = "auto", serve: bool = False,
             serving: threading.Event | None = None) -> DemoResult:
    """Run the demo; returns what happened (``ok`` only if all three outcomes happened).

    ``backend`` is the runner wrapper's measurement backend (``auto`` picks real
    cgroups where the host allows; ``psutil`` forces the unprivileged fallback).

    ``serve`` (implies ``keep``): afterwards, stop the in-process bot but keep the stand-in
    and its runners, with the stand-in CLI's control endpoint, until SIGINT/SIGTERM
    (:func:`serve_drill`); ``serving`` is set once they are ready (tests).
    """
    from standin.gitlab.cli import FailRules

    keep = keep or serve
    rules = FailRules()
    from retry_bot.live.actions import ActionSettings
    from retry_bot.live.config import BotConfig, GitLabSettings, PollSettings
    from retry_bot.live.daemon import Bot
    from standin.gitlab import StandIn, collect_artifacts
    from standin.runner import run_job

    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="retry-bot-demo-", dir=workdir))
    key = secrets.token_hex(32)
    cgroup_parent = f"retry-bot-demo-{os.getpid()}"
    wrapper_cfg = _wrapper_config(tmp, cgroup_parent, backend)
    tl = _Timeline(out, live)
    # Jobs are processed asynchronously, as GitLab does (a copy is ``created`` before it is ``manual``).
    standin = StandIn(token=ADMIN_TOKEN, username="demo-admin", processing_delay=0.3)
    bot: Bot | None = None
    result = DemoResult(ok=False)
    try:
        url = standin.start()
        tl.add("gitlab", f"stand-in listening on {url}")
        standin.add_project("demo/app", project_ci_yaml(tmp), files={TEMPLATE_PATH: template_text()},
                            protected_branches=PROTECTED_MAIN)
        standin.add_token(TOKEN, "retry-bot", role="developer")
        tl.add("gitlab", "main is protected (Maintainers push, Developers + Maintainers merge); the bot's token "
                         "is a Developer's")
        names: dict[int, str] = {}

        def on_job(job: Job) -> None:
            if job.spec.is_bridge:
                if job.status in ("success", "failed"):
                    tl.add("gitlab", f"bridge {job.name} -> child pipeline {job.downstream_pipeline_id} ({job.status})")
                return
            label = f"job {job.id} {job.name}" + (" (manual copy)" if job.spec.when == "manual" else "")
            if job.status == "manual" and names.get(job.id) != "manual":
                tl.add("gitlab", f"{label} created in pipeline {job.pipeline_id}, waiting to be played")
            elif job.status == "pending" and job.job_variables:
                v = " ".join(f"{x['key']}={x['value']}" for x in job.job_variables)
                tl.add("gitlab", f"{label} played with {v}")
            elif job.status in ("success", "failed"):
                extra = f", {job.failure_reason}, exit code {job.exit_code}" if job.status == "failed" else ""
                tl.add("gitlab", f"{label} {job.status}{extra}")
            names[job.id] = job.status

        standin.state.job_listeners.append(on_job)

        driver = [sys.executable, "-m", "runner_wrapper", "--config", str(wrapper_cfg), "--log-level", "warning",
                  "executor"]
        backends: list[str] = []

        def execute(payload: dict[str, Any]) -> dict[str, Any]:
            name = payload["job_info"]["name"]
            v = {x["key"]: x["value"] for x in payload.get("variables", [])}
            limit = v.get("KUBERNETES_MEMORY_LIMIT")
            tl.add("runner", f"job {payload['id']} {name}: runner-wrapper executor"
                   + (f" (KUBERNETES_MEMORY_LIMIT={limit})" if limit else ""))
            res = run_job(payload, driver_cmd=driver, workdir=tmp / "runner",
                          extra_env={"RIGHTSIZER_SIGNING_KEY": key}, preparation_retry_interval=0.2)
            text = res.log.decode("utf-8", "replace")
            for ln in text.splitlines():
                if "runner-wrapper: OOM" in ln or "backend" in ln and "runner-wrapper" in ln:
                    tl.add("runner", "  " + ln.strip())
            if "cgroup-v1" in text:
                backends.append("cgroup-v1")
            elif "cgroup-v2" in text:
                backends.append("cgroup-v2")
            project_dir = res.project_dir or tmp / "builds" / payload["job_info"]["project_full_path"]
            return {"status": res.status, "failure_reason": res.failure_reason, "exit_code": res.exit_code,
                    "log": res.log, "artifacts": collect_artifacts(payload, project_dir) if res.status == "success"
                    else None}

        for _ in range(2):  # two concurrent runners, like a small farm
            standin.attach_runner(rules.wrap(execute), poll_interval=0.05)
        policy_path = tmp / "policy.toml"
        policy_path.write_text(DEMO_POLICY)
        cfg = BotConfig(
            gitlab=GitLabSettings(url=url, token=TOKEN, token_source="demo", request_timeout_seconds=10,
                                  max_attempts=3, max_wait_seconds=1, max_total_seconds=20),
            poll=PollSettings(projects=("demo/app",), interval_seconds=0.3, lookback_seconds=3600),
            policy_path=str(policy_path), state_url=f"sqlite:///{tmp / 'state.sqlite3'}",
            signing_keys={KEY_ID: key.encode()}, leader_enabled=False)
        bot = Bot(cfg, action_settings=ActionSettings(settle_seconds=25.0, child_timeout_seconds=timeout))
        tl.add("bot", f"polling demo/app every {cfg.poll.interval_seconds}s (state {tmp / 'state.sqlite3'})")
        pipe = standin.create_pipeline("demo/app")
        tl.add("gitlab", f"pipeline {pipe.id} created on main: build, compile, fetch")

        seen_decisions: set[int] = set()
        seen_events: set[int] = set()

        def report_actions(job_id: int) -> None:
            assert bot is not None
            for ev in bot.store.history(job_id):
                if ev["event_id"] in seen_events or ev["kind"] != "action_completed":
                    continue
                seen_events.add(ev["event_id"])
                d = ev["data"]
                r = d.get("result") or {}
                what = {"create_pipeline": f"created pipeline {r.get('pipeline_id')} carrying a when:manual copy "
                                           f"of job {ev['job_id']} (RETRY_BOT_ORIGIN_JOB_ID)",
                        "play": f"played manual job {r.get('job_id')} with the upgraded variables",
                        "retry": f"retried job {ev['job_id']} -> job {r.get('new_job_id')}",
                        "resize": f"resize of job {ev['job_id']} done -> job {r.get('new_job_id')}",
                        "job_retry": f"jobRetry of job {ev['job_id']} -> job {r.get('new_job_id')}"}.get(
                    str(d.get("kind")), f"{d.get('kind')} done")
                tl.add("bot", what)

        def report_cycle() -> None:
            assert bot is not None
            for jid in list(seen_decisions):
                report_actions(jid)
            for job in standin.jobs("demo/app"):
                if job.id in seen_decisions or job.spec.is_bridge:
                    continue
                rec = bot.store.get_job(job.id)
                if rec is None or not rec.decided:
                    continue
                seen_decisions.add(job.id)
                c, d = rec.classification, rec.decision or {}
                tl.add("bot", f"job {job.id} {job.name}: {c.get('family')}/{c.get('category')} "
                              f"(rule {c.get('rule')}) -> {d.get('action')}")
                tl.add("bot", f"  why: {d.get('reason')}")
                report_actions(job.id)

        deadline = time.monotonic() + timeout
        outcomes: dict[str, bool] = {}
        while time.monotonic() < deadline:
            bot.once()
            report_cycle()
            outcomes = _outcomes(standin, bot)
            if all(outcomes.values()):
                break
            time.sleep(cfg.poll.interval_seconds)
        result.outcomes = outcomes
        result.ok = bool(outcomes) and all(outcomes.values())
        result.backend = backends[-1] if backends else "psutil fallback"
        if serve:
            bot.close()  # the admin runs the real `retry-bot run` against the stand-in from now on
            bot = None
            result.seconds = time.monotonic() - started
            _print_summary(result, out, tmp, keep)
            serve_drill(standin, rules, tmp, url, key, out, serving)
    finally:
        if bot is not None:
            bot.close()
        standin.stop()  # also stops the runner loops (each finishes the job in hand)
        # The wrapper removes each job's cgroup, never the parent it created them in.
        result.cgroups_left = remove_demo_cgroups(cgroup_parent)
        result.seconds = time.monotonic() - started
        result.timeline = tl.lines
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    if not serve:
        _print_summary(result, out, tmp, keep)
    return result


def _print_summary(result: DemoResult, out: TextIO, tmp: Path, keep: bool) -> None:
    print("", file=out)
    print(f"measurement backend: {result.backend}", file=out)
    for d in result.cgroups_left:
        print(f"  cgroup left behind (a process is still in it): {d}", file=out)
    labels = {"oom_recovered": "OOM-killed build re-created with more memory and succeeded",
              "compile_left_alone": "compile error left alone (not retried)",
              "transient_retried_once": "transient network failure retried once, then succeeded"}
    for k, text in labels.items():
        print(f"  [{'ok' if result.outcomes.get(k) else 'MISSING'}] {text}", file=out)
    print(f"demo {'passed' if result.ok else 'FAILED'} in {result.seconds:.1f}s"
          + (f" (files kept in {tmp})" if keep else ""), file=out)


def serve_drill(standin: StandIn, rules: FailRules, tmp: Path, url: str, key: str, out: TextIO,
                serving: threading.Event | None = None) -> None:
    """Keep the stand-in and its runners up, with the control endpoint, until SIGINT/SIGTERM."""
    from standin.gitlab.cli import ControlServer, drill_bot_config, write_info

    cfg = drill_bot_config(tmp, url, standin.token, "demo/app", signing=(KEY_ID, key))
    control = ControlServer(standin, rules, project="demo/app").start()
    info = write_info(tmp / "standin.json", url=url, token=standin.token, project="demo/app",
                      control_url=control.url, control_token=control.token)
    state = f"sqlite:///{tmp / 'state.sqlite3'}"
    s = "python -m standin.gitlab"
    print(f"""
fault drill: the stand-in ({url}) and its runners keep running; Ctrl-C ends them.
  export STANDIN_INFO={info}
  retry-bot run --config {cfg} &                    # the bot, as its own process
  {s} fail --job fetch --preset dns --times 2   # the next 2 fetch jobs lose DNS
  {s} hold --path '/jobs/\\d+/retry$'          # GitLab retries, then holds its answer
  {s} pipeline                                  # a new pipeline: build, compile, fetch
  kill -KILL %1; retry-bot run --config {cfg} &     # SIGKILL the bot mid-action, restart it
  {s} jobs ; {s} check              # nothing doubled (exit 1 if it was)
  retry-bot state check --state {state}
  retry-bot history JOB_ID --state {state}""", file=out, flush=True)
    if serving is not None:
        serving.set()
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        print("drill stopped", file=out, flush=True)
    finally:
        control.close()


def _outcomes(standin: StandIn, bot: Bot) -> dict[str, bool]:
    jobs = [j for j in standin.jobs("demo/app") if not j.spec.is_bridge]
    by = lambda n: [j for j in jobs if j.name == n]  # noqa: E731
    builds = by("build")
    oom = False
    if len(builds) >= 2:
        origin, copies = builds[0], builds[1:]
        rec = bot.store.get_job(origin.id)
        ok_copy = [c for c in copies if c.status == "success" and c.spec.when == "manual"]
        if rec is not None and rec.decided and ok_copy and origin.exit_code == 137:
            played = {v["key"]: v["value"] for v in ok_copy[0].job_variables}
            from runner_wrapper.quantity import parse_memory

            oom = (rec.classification.get("family") == "oom" and "record" in str(rec.classification.get("rule"))
                   and (rec.decision or {}).get("action") == "resize"
                   and parse_memory(played.get("KUBERNETES_MEMORY_LIMIT", "0")) > 128 * 2**20)
    compiles = by("compile")
    crec = bot.store.get_job(compiles[0].id) if compiles else None
    compile_ok = (len(compiles) == 1 and crec is not None and crec.decided
                  and (crec.decision or {}).get("action") == "none"
                  and crec.classification.get("family") == "build_error")
    fetches = by("fetch")
    frec = bot.store.get_job(fetches[0].id) if fetches else None
    fetch_ok = (len(fetches) == 2 and fetches[1].status == "success" and frec is not None
                and (frec.decision or {}).get("action") == "retry")
    return {"oom_recovered": oom, "compile_left_alone": compile_ok, "transient_retried_once": fetch_ok}


def main_exit_code(result: DemoResult) -> int:
    return 0 if result.ok else 1

