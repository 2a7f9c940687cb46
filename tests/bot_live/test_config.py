"""bot.toml: the shipped example loads, problems are all reported, secrets never printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from retry_bot.live.config import load_config, parse_config
from retry_bot.problems import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_example_loads():
    cfg = load_config(ROOT / "config" / "bot.toml", env={"RETRY_BOT_GITLAB_TOKEN": "glpat-xyz123",
                                                         "RIGHTSIZER_SIGNING_KEY": "k" * 32})
    assert cfg.gitlab.url.startswith("https://")
    assert cfg.gitlab.token == "glpat-xyz123"
    assert "glpat-xyz123" not in repr(cfg)
    assert cfg.poll.projects or cfg.poll.groups
    assert cfg.policy_path and Path(cfg.policy_path).name == "policy.toml"
    assert cfg.signing_keys and "k" * 32 not in repr(cfg)


def test_every_problem_is_reported_with_its_path():
    text = """
[gitlab]
url = "gitlab.example.com"
token = "oops"
[poll]
per_page = 500
interval_seconds = "often"
[bogus]
"""
    with pytest.raises(ConfigError) as ei:
        parse_config(text, env={})
    msg = str(ei.value)
    for path in ("gitlab.url", "gitlab.token", "poll.per_page", "poll.interval_seconds", "bogus", "poll.projects"):
        assert path in msg
    assert "oops" not in msg


def test_token_from_file_and_relative_paths(tmp_path):
    (tmp_path / "tok").write_text("glpat-file\n")
    (tmp_path / "p.toml").write_text("version = 1\n")
    cfg = parse_config('[gitlab]\nurl="http://127.0.0.1:1"\ntoken_file="tok"\n[poll]\nprojects=["a/b", 3]\n'
                       '[bot]\nstate_url="sqlite:///state.db"\npolicy="p.toml"\n', base=tmp_path, env={})
    assert cfg.gitlab.token == "glpat-file"
    assert cfg.state_url == f"sqlite:///{tmp_path}/state.db"
    assert cfg.poll.projects == ("a/b", "3")


def test_invalid_toml_is_one_clear_problem():
    with pytest.raises(ConfigError, match="not valid TOML"):
        parse_config("[gitlab\n", env={})


def test_bad_state_url_and_missing_policy_are_reported_with_the_other_problems(tmp_path):
    text = """
[gitlab]
url = "gitlab.example.com"
[poll]
projects = ["a/b"]
per_page = 500
[bot]
policy = "missing-policy.toml"
state_url = "mysql://bot:s3cret@db/state"
"""
    with pytest.raises(ConfigError) as ei:
        parse_config(text, base=tmp_path, env={})
    paths = [p.path for p in ei.value.problems]
    for path in ("gitlab.url", "poll.per_page", "bot.policy", "bot.state_url"):
        assert path in paths, paths
    msg = str(ei.value)
    assert "missing-policy.toml" in msg and "does not exist" in msg
    assert "unsupported scheme" in msg and "s3cret" not in msg
    # an empty state URL and an invalid policy file, too (the policy's own key paths are kept)
    (tmp_path / "bad.toml").write_text('version = 1\n[resize]\nratio = "big"\n')
    with pytest.raises(ConfigError) as ei:
        parse_config('[gitlab]\nurl="http://x"\n[poll]\nprojects=["a/b"]\n[bot]\npolicy="bad.toml"\nstate_url=""\n',
                     base=tmp_path, env={})
    msg = str(ei.value)
    assert "bot.state_url" in msg and "is empty" in msg
    assert "bot.policy" in msg and "resize.ratio" in msg


def test_collector_token_default_name_and_deprecated_fallback(tmp_path, capsys):
    (tmp_path / "p.toml").write_text("version = 1\n")
    base = '[gitlab]\nurl="http://x"\n[poll]\nprojects=["a/b"]\n[bot]\npolicy="p.toml"\n'
    cfg = parse_config(base, base=tmp_path, env={"RIGHTSIZER_COLLECTOR_TOKEN": "tok-new,tok-2"})
    assert cfg.usage_tokens == ("tok-new", "tok-2")
    cfg = parse_config(base, base=tmp_path, env={"RETRY_BOT_USAGE_TOKEN": "tok-old"})
    assert cfg.usage_tokens == ("tok-old",)          # deprecated name still read (with a warning)
    cfg = parse_config(base, base=tmp_path, env={"RETRY_BOT_USAGE_TOKEN": "tok-old",
                                                 "RIGHTSIZER_COLLECTOR_TOKEN": "tok-new"})
    assert cfg.usage_tokens == ("tok-new",)
    shipped = (ROOT / "config" / "bot.toml").read_text()
    assert 'usage_token_env = "RIGHTSIZER_COLLECTOR_TOKEN"' in shipped
