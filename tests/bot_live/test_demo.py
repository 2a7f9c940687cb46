"""`retry-bot demo` end to end: stand-in + local runner through runner-wrapper + the bot."""

from __future__ import annotations

import json
import glob
import io
import os
from pathlib import Path

import pytest

from standin import demo
from standin.demo import run_demo

pytestmark = pytest.mark.slow  # end to end: outside the fast lane (pytest -m "not slow")

ROOT = Path(__file__).resolve().parents[2]


def _demo_cgroups() -> list[str]:
    return sorted(glob.glob(f"/sys/fs/cgroup/*/retry-bot-demo-{os.getpid()}")
                  + glob.glob(f"/sys/fs/cgroup/retry-bot-demo-{os.getpid()}"))


def test_demo_reaches_all_three_outcomes_and_leaves_no_cgroup_behind():
    out = io.StringIO()
    result = run_demo(out=out, timeout=100, live=False)
    text = out.getvalue()
    assert result.ok, text + "\n" + "\n".join(result.timeline)
    assert result.outcomes == {"oom_recovered": True, "compile_left_alone": True, "transient_retried_once": True}
    timeline = "\n".join(result.timeline)
    assert "exit code 137" in timeline and "played with KUBERNETES_MEMORY_LIMIT=" in timeline
    assert "demo passed" in text
    assert result.cgroups_left == [] and _demo_cgroups() == [], "the demo left its parent cgroups behind"


def test_demo_removes_its_parent_cgroups_also_after_a_failure(monkeypatch):
    """A failing run (here: interrupted while starting the bot) still removes the parent cgroups,
    including job cgroups left under them."""
    if os.geteuid() != 0 or not os.access("/sys/fs/cgroup/memory", os.W_OK):
        pytest.skip("needs root and a writable cgroup v1 memory hierarchy")
    parent = f"retry-bot-demo-{os.getpid()}"
    made = []
    for d in demo.demo_cgroup_dirs(parent):
        if os.path.isdir(os.path.dirname(d)):
            os.makedirs(os.path.join(d, "job-1", "build_script-1"), exist_ok=True)  # as the wrapper leaves them
            made.append(d)
    assert made and _demo_cgroups()

    def interrupted(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr("retry_bot.live.daemon.Bot", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_demo(out=io.StringIO(), timeout=10, live=False)
    assert _demo_cgroups() == []


def test_the_packaged_template_is_the_repository_template():
    """The demo reads the template from the package (so it works from a wheel); it must be the real one."""
    shipped = ROOT / "retry_bot" / "gitlab" / "retry-bot.yml"
    assert shipped.read_bytes() == (ROOT / "packaging" / "gitlab-ci" / "retry-bot.yml").read_bytes(), \
        "retry_bot/gitlab/retry-bot.yml must be a copy of packaging/gitlab-ci/retry-bot.yml: cp it over"
    assert demo.template_text() == shipped.read_text()


def test_the_demo_project_includes_the_template_and_references_its_skip_rule():
    """What the demo project's .gitlab-ci.yml does in the stand-in: normal pipelines run the three
    jobs; a pipeline the bot creates (RETRY_BOT_CHILD_CONFIG set) runs only the template's jobs."""
    from standin.gitlab import StandIn

    text = demo.project_ci_yaml(Path("/nonexistent"))
    assert f"local: {demo.TEMPLATE_PATH}" in text and "!reference [.retry-bot:skip, rules]" in text
    with StandIn() as s:
        s.add_project("demo/app", text, files={demo.TEMPLATE_PATH: demo.template_text()})
        push = s.create_pipeline("demo/app")
        assert sorted(j.name for j in s.jobs(pipeline_id=push.id)) == ["build", "compile", "fetch"]
        bot = s.create_pipeline("demo/app", source="api", variables={"RETRY_BOT_CHILD_CONFIG": "{}"})
        assert sorted(j.name for j in s.jobs(pipeline_id=bot.id)) == ["retry-bot:child", "retry-bot:generate"]


def test_the_demo_runs_on_a_protected_main_with_a_developer_bot_and_a_dollar_script(tmp_path):
    from standin import demo

    assert demo.PROTECTED_MAIN["main"] == {"push": "maintainer", "merge": "developer"}
    text = demo.project_ci_yaml(tmp_path)
    for line in demo.DOLLAR_LINES:
        assert json.dumps(line) in text
    assert "$OUT_DIR" in text and "${CI_JOB_NAME}" in text and "$$" in text and "$(cat" in text
