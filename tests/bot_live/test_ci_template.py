"""The CI template and the example root .gitlab-ci.yml that includes it."""

from __future__ import annotations

import yaml

from retry_bot.gitlab.jobdef import GLOBAL_KEYWORDS
from retry_bot.gitlab.recreate import CONFIG_VARIABLE
from tests.bot_live.farm import ROOT

TEMPLATE = ROOT / "packaging" / "gitlab-ci" / "retry-bot.yml"
EXAMPLE = ROOT / "packaging" / "gitlab-ci" / "example.gitlab-ci.yml"


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor("!reference", lambda loader, node: ("!reference", loader.construct_sequence(node)))


def test_template_turns_the_variable_into_a_child_pipeline():
    t = yaml.safe_load(TEMPLATE.read_text())
    assert t[".retry-bot:skip"]["rules"] == [{"if": f"${CONFIG_VARIABLE}", "when": "never"}]
    gen, child = t["retry-bot:generate"], t["retry-bot:child"]
    for job in (gen, child):
        assert job["rules"] == [{"if": f"${CONFIG_VARIABLE}"}]
    path = gen["artifacts"]["paths"][0]
    assert f'"${CONFIG_VARIABLE}" | base64 -d > {path}' in " ".join(gen["script"])   # expansion-proof
    inc = child["trigger"]["include"]
    assert inc == [{"artifact": path, "job": "retry-bot:generate"}]     # one artifact include, no local: mix
    assert child["trigger"]["strategy"] == "depend"
    # the child gets neither the project's YAML variables nor the pipeline variables
    assert child["trigger"]["forward"] == {"yaml_variables": False, "pipeline_variables": False}
    assert child["stage"] not in (".pre", ".post")                    # GitLab refuses all-.pre/.post pipelines
    for job in (gen, child):
        assert job["inherit"] == {"default": False, "variables": False}
    assert gen["interruptible"] is False


def test_example_includes_the_template_and_guards_every_job():
    ex = yaml.load(EXAMPLE.read_text(), Loader=_Loader)
    assert any(str(i.get("local", i.get("file", ""))).endswith("retry-bot.yml") for i in ex["include"])
    jobs = {k: v for k, v in ex.items() if k not in GLOBAL_KEYWORDS and not k.startswith(".")}
    assert jobs
    for name, job in jobs.items():
        assert "only" not in job and "except" not in job, name
        assert job["rules"][0] == ("!reference", [".retry-bot:skip", "rules"]), name
