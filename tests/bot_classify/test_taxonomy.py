"""Loading, validating, extending and overriding the taxonomy (rules are data)."""

from __future__ import annotations

from pathlib import Path

import pytest

from retry_bot.classify import classify, compile_pattern, load_taxonomy, taxonomy_from_text
from retry_bot.classify.reasons import KNOWN_FAILURE_REASONS
from retry_bot.model import FAMILIES
from retry_bot.problems import ConfigError

from .conftest import facts

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_copy_is_identical_to_config():
    shipped = (ROOT / "retry_bot" / "classify" / "taxonomy.toml").read_text("utf-8")
    assert shipped == (ROOT / "config" / "taxonomy.toml").read_text("utf-8"), \
        "retry_bot/classify/taxonomy.toml must be a copy of config/taxonomy.toml"


def test_default_loads_documented_and_complete(taxonomy):
    names = [r.name for r in taxonomy.rules]
    assert len(names) == len(set(names)) and len(names) > 40
    assert all(r.description for r in taxonomy.rules)
    assert {r.family.value for r in taxonomy.rules} == set(FAMILIES)
    assert [s.name for s in taxonomy.stages][:2] == ["record", "reason"]
    assert all(taxonomy.default_action(f) in ("retry", "resize", "none") for f in FAMILIES)


@pytest.mark.parametrize("reason", sorted(KNOWN_FAILURE_REASONS))
def test_every_failure_reason_is_covered_by_a_rule(taxonomy, reason):
    """Old and split names alike: no failure reason falls through to the catch-all."""
    c = classify(facts(failure_reason=reason), b"", taxonomy)
    assert c.rule != "fallback", reason


BAD = """
schema = 1
stage_order = ["only", "ghost"]
[stages.only]
resolve = "sometimes"

[[rule]]
name = "bad-regex"
stage = "only"
category = "x"
family = "oom"
description = "broken"
patterns = ['Killed(']

[[rule]]
name = "bad-family"
stage = "only"
category = "x"
family = "memory"
description = "unknown family"
failure_reasons = ["script_failure"]

[[rule]]
name = "no-description"
stage = "nowhere"
category = "x"
family = "oom"
exit_codes = [137]

[[rule]]
name = "catastrophic"
stage = "only"
category = "x"
family = "oom"
description = "nested repeats"
patterns = ['(a+)+b end']

[[rule]]
name = "no-literal"
stage = "only"
category = "x"
family = "oom"
description = "nothing to pre-filter on"
patterns = ['\\d+ \\w+']
"""


def test_every_problem_is_reported_with_path_and_line():
    with pytest.raises(ConfigError) as ei:
        taxonomy_from_text(BAD, "bad.toml")
    probs = ei.value.problems
    text = str(ei.value)
    by_path = {p.path: p for p in probs}
    assert "rule[0](bad-regex).patterns[0]" in by_path and "invalid regular expression" in text
    assert by_path["rule[1](bad-family).family"].line == BAD.splitlines().index('family = "memory"') + 1
    assert "rule[2](no-description).description" in by_path
    assert "rule[2](no-description).stage" in by_path
    assert "nests a repeat" in by_path["rule[3](catastrophic).patterns[0]"].message
    assert "literal" in by_path["rule[4](no-literal).patterns[0]"].message
    assert "stages.only.resolve" in by_path
    assert any("ghost" in p.message for p in probs)
    assert all(p.source == "bad.toml" for p in probs)
    assert all(p.line for p in probs if p.path.startswith("rule["))


def test_invalid_toml_reports_line(tmp_path):
    f = tmp_path / "t.toml"
    f.write_text("[[rule]]\nname = 'x'\nname = 'y'\n")
    with pytest.raises(ConfigError) as ei:
        load_taxonomy([f])
    assert ei.value.problems[0].line == 3 and str(f) in str(ei.value)


def test_missing_file_is_a_problem_not_a_traceback(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_taxonomy([tmp_path / "nope.toml"])


def test_admin_file_adds_overrides_disables_and_reorders(tmp_path, taxonomy):
    site = tmp_path / "site.toml"
    site.write_text("""
stage_order = ["record", "reason", "runner_verdict", "test_verdict", "oom_signature", "runner_cause", "runner",
               "diagnostic", "exit_code", "transient_cause", "kill_signal", "generic", "structure", "reason_fallback", "site"]

[stages.site]
resolve = "first"
description = "site rules, last"

[[rule]]
name = "licence-server-down"
stage = "diagnostic"
priority = 1
category = "licence_server"
family = "infrastructure"
description = "Our compiler's licence server is flaky."
patterns = ['FlexNet Licensing error']

[[rule]]
name = "make-killed"
enabled = false

[[rule]]
name = "dns-error"
family = "config_error"
category = "dns_misconfigured"
""")
    t = load_taxonomy([site])
    assert t.rule("make-killed") is None and taxonomy.rule("make-killed") is not None
    c = classify(facts(), b"compiling\nFlexNet Licensing error:-15,10\n", t)
    assert (c.rule, c.family.value, c.category) == ("licence-server-down", "infrastructure", "licence_server")
    # merged override keeps the patterns, changes the verdict
    c = classify(facts(), b"curl: (6) Could not resolve host: x\n", t)
    assert (c.rule, c.family.value, c.category) == ("dns-error", "config_error", "dns_misconfigured")
    # precedence changed: exit_code now after diagnostic
    trace = b"fatal: unable to access 'https://x/': Could not resolve host: x\nERROR: Job failed: exit code 137\n"
    assert classify(facts(), trace, taxonomy).category == "killed"
    assert classify(facts(), trace, t).category == "dns_misconfigured"
    assert t.sources[-1] == str(site)


def test_needles_are_derived_and_required():
    p, err = compile_pattern(r"50[0234] (?:Bad Gateway|Service Unavailable)")
    assert err is None and set(p.needles) == {b"Bad Gateway", b"Service Unavailable"}
    p, err = compile_pattern(r"could not resolve host", ignore_case=True)
    assert p.needles == (b"could not resolve host",)
    p, err = compile_pattern(r"^={3,} \d+ failed")
    assert err is None and p.needles in ((b" failed",), (b"=== ",))
    assert compile_pattern(r"x\ny")[1] and "spans lines" in compile_pattern(r"x\ny")[1]


def test_a_site_order_written_for_an_older_release_says_where_the_new_stage_goes(tmp_path, taxonomy):
    """``kill_signal`` came with the seventh pass: a site ``stage_order`` without it is refused with
    a message that says where the shipped order puts it, not just that it is missing."""
    old = [s.name for s in taxonomy.stages if s.name != "kill_signal"]
    site = tmp_path / "site.toml"
    site.write_text(f"stage_order = {old!r}\n")
    with pytest.raises(ConfigError) as ei:
        load_taxonomy([site])
    shipped = [s.name for s in taxonomy.stages]
    before = shipped[shipped.index("kill_signal") - 1]
    assert (f"stage 'kill_signal' is defined but missing from stage_order "
            f"(the shipped order puts it right after {before!r})") in str(ei.value)
