"""wrapper.toml: the shipped annotated file loads; mistakes name the key."""

from pathlib import Path

import pytest

from runner_wrapper.config import (
    ConfigError, WrapperConfig, config_from_json, config_from_mapping, config_to_json, load_config,
)

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "wrapper.toml"


def test_shipped_file_loads_with_documented_defaults():
    cfg = load_config(str(SHIPPED))
    d = WrapperConfig()
    assert cfg.source == str(SHIPPED)
    assert cfg.cgroup == d.cgroup
    assert cfg.variables == d.variables and cfg.variables.memory_limit == "KUBERNETES_MEMORY_LIMIT"
    assert cfg.limits == d.limits
    assert cfg.signing == d.signing and cfg.sinks == d.sinks and cfg.allocation == d.allocation
    assert cfg.executor == d.executor
    assert cfg.sampler_interval == 0.5


def test_missing_default_file_means_defaults_but_missing_explicit_file_is_an_error(tmp_path):
    assert load_config(None, environ={}).source in (None, "/etc/gitlab-rightsizer/wrapper.toml")
    with pytest.raises(ConfigError, match="not found"):
        load_config(str(tmp_path / "nope.toml"))


@pytest.mark.parametrize("data,fragment", [
    ({"cgroup": {"backend": "v3"}}, "backend = 'v3'"),
    ({"cgroup": {"parent": "../etc"}}, "parent"),
    ({"caps": {"memory": "lots"}}, r"\[caps\] memory"),
    ({"defaults": {"cpu_limit": "-1"}}, r"\[defaults\] cpu_limit"),
    ({"sampler": {"interval": 0}}, "at least"),
    ({"sinks": {"colector_url": "x"}}, "unknown key"),
    ({"sinkz": {}}, "unknown table"),
    ({"allocation": {"url": "ftp://x"}}, "http"),
    ({"executor": {"shell": []}}, "shell"),
])
def test_bad_values_name_the_problem(data, fragment):
    with pytest.raises(ConfigError, match=fragment):
        config_from_mapping(data)


def test_invalid_toml_is_a_clear_error(tmp_path):
    p = tmp_path / "w.toml"
    p.write_text("[cgroup\nparent=")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(str(p))


def test_signing_key_from_env_wins_over_file():
    cfg = config_from_mapping({"signing": {"key": "file-key", "key_env": "K"}})
    assert cfg.signing.resolve_key({"K": "env-key"}) == b"env-key"
    assert cfg.signing.resolve_key({}) == b"file-key"
    assert config_from_mapping({}).signing.resolve_key({}) is None


def test_json_handover_roundtrips_and_never_carries_a_literal_key():
    cfg = config_from_mapping({"caps": {"memory": "8Gi"}, "executor": {"shell": ["bash", "-l"],
                                                                        "job_env": {"A": "b"}}}, source="/x.toml")
    assert config_from_json(config_to_json(cfg)) == cfg
    assert config_to_json(config_from_mapping({"signing": {"key": "literal"}})) is None
    with pytest.raises(ConfigError, match="not a configuration this wrapper wrote"):
        config_from_json('{"cgroup": {}}')


def test_every_problem_is_reported_not_only_the_first():
    with pytest.raises(ConfigError) as info:
        config_from_mapping({"nope": {}, "caps": {"memory": "lots"}, "sampler": {"interval": "fast"},
                             "executor": {"shell": [], "typo": 1}}, source="/etc/w.toml")
    problems = info.value.problems
    assert len(problems) == 5, problems
    assert problems[0].startswith("/etc/w.toml: unknown table [nope]")
    assert any("[caps] memory" in p and "lots" in p for p in problems)
    assert any("[sampler] interval = 'fast': expected a number" in p for p in problems)
    assert any("[executor] shell" in p for p in problems) and any("unknown key(s): typo" in p for p in problems)
    assert str(info.value) == "\n".join(problems)


def test_recorded_variables_are_configurable_and_roundtrip():
    d = config_from_mapping({})
    assert d.record.variables == ("KUBERNETES_CPU_REQUEST", "KUBERNETES_CPU_LIMIT", "KUBERNETES_MEMORY_REQUEST",
                                  "KUBERNETES_MEMORY_LIMIT", "SPACK_JOB_SPEC_*", "SPACK_CI_STACK_NAME", "CI_JOB_SIZE")
    cfg = config_from_mapping({"record": {"variables": ["CI_JOB_SIZE", "MY_*"]}}, source="/x.toml")
    assert cfg.record.variables == ("CI_JOB_SIZE", "MY_*")
    assert config_from_json(config_to_json(cfg)) == cfg
    with pytest.raises(ConfigError, match=r"\[record\] variables: expected a list"):
        config_from_mapping({"record": {"variables": "CI_JOB_SIZE"}})
    assert load_config(str(SHIPPED)).record == d.record  # the shipped file documents the default


def test_shipped_runner_snippet_leaves_the_wrapper_its_grace_period():
    """The runner SIGKILLs the driver at graceful_kill_timeout (gitlab-runner helpers/process/killer.go):
    the wrapper's own grace must end first, or a canceled stage is never recorded."""
    import tomllib

    snippet = tomllib.loads((SHIPPED.parents[1] / "packaging" / "runner" / "config.toml.example").read_text())
    runner = snippet["runners"][0]
    assert runner["custom"]["graceful_kill_timeout"] >= load_config(str(SHIPPED)).executor.kill_grace_seconds + 5
    assert load_config(str(SHIPPED)).executor.builds_dir_is_shared is True
