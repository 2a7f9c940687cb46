"""Every example configuration shipped in ``config/`` and ``packaging/`` loads
with the project's own loaders, so the files the admin guide tells people to
copy cannot drift from the code that reads them.

Each loader is also fed a deliberately broken copy, to show that it really
validates (a loader that accepts anything would make these tests worthless).
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from ._paths import CONFIG, PACKAGING, ROOT, script, subprocess_env, systemd_bot_toml_in

BOT_ENV = {"RETRY_BOT_GITLAB_TOKEN": "glpat-test-token", "RIGHTSIZER_SIGNING_KEY": "test-signing-key"}


# --------------------------------------------------------------------------- policy


def test_config_policy_loads_with_load_policy() -> None:
    from retry_bot.policy import load_policy

    policy = load_policy(CONFIG / "policy.toml")
    assert policy is not None


def test_policy_loader_rejects_a_broken_policy(tmp_path: Path) -> None:
    from retry_bot.policy import load_policy
    from retry_bot.problems import ConfigError

    text = (CONFIG / "policy.toml").read_text(encoding="utf-8")
    broken = tmp_path / "policy.toml"
    broken.write_text(text + "\nno_such_policy_key = 1\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_policy(broken)
    assert "no_such_policy_key" in str(err.value)


def test_retry_bot_policy_check_cli_accepts_config_policy() -> None:
    """The exact command the admin guide and the systemd unit (ExecStartPre) run."""
    proc = subprocess.run([str(script("retry-bot")), "policy", "check", str(CONFIG / "policy.toml")],
                          capture_output=True, text=True, timeout=60, env=subprocess_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- taxonomy


def test_config_taxonomy_loads_with_load_taxonomy() -> None:
    from retry_bot.classify import load_taxonomy

    taxonomy = load_taxonomy([CONFIG / "taxonomy.toml"])
    assert taxonomy is not None


def test_taxonomy_loader_rejects_a_bad_regex(tmp_path: Path) -> None:
    from retry_bot.classify import load_taxonomy
    from retry_bot.problems import ConfigError

    text = (CONFIG / "taxonomy.toml").read_text(encoding="utf-8")
    bad = tmp_path / "taxonomy.toml"
    bad.write_text(text + '''
[[rule]]
name = "packaging-test-broken"
stage = "diagnostic"
category = "dns_error"
family = "infrastructure"
description = "A rule whose regular expression does not compile."
patterns = ['(unbalanced']
''', encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_taxonomy([bad])
    assert "invalid regular expression" in str(err.value)
    assert "packaging-test-broken" in str(err.value)


# --------------------------------------------------------------------------- bot.toml


def _load_bot(path: Path, env: dict[str, str] | None = None):
    from retry_bot.live.config import load_config

    return load_config(path, env=dict(BOT_ENV if env is None else env))


def test_config_bot_toml_loads_and_its_policy_exists() -> None:
    from retry_bot.policy import load_policy

    cfg = _load_bot(CONFIG / "bot.toml")
    assert cfg.gitlab.url.startswith("https://")
    assert cfg.gitlab.token == BOT_ENV["RETRY_BOT_GITLAB_TOKEN"]
    assert cfg.policy_path is not None
    load_policy(cfg.policy_path)
    assert cfg.state_url.startswith(("sqlite:///", "postgresql://"))


def test_bot_loader_rejects_a_typo(tmp_path: Path) -> None:
    from retry_bot.problems import ConfigError

    text = (CONFIG / "bot.toml").read_text(encoding="utf-8").replace("interval_seconds", "interval_secs", 1)
    bad = tmp_path / "bot.toml"
    bad.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        _load_bot(bad)
    assert "interval_secs" in str(err.value)


def test_systemd_bot_toml_loads_with_credentials_and_matches_the_unit(tmp_path: Path) -> None:
    """packaging/systemd/bot.toml reads the files the unit's LoadCredential= provides."""
    unit = (PACKAGING / "systemd" / "retry-bot.service").read_text(encoding="utf-8")
    creds = dict(re.findall(r"^LoadCredential=([^:\n]+):(\S+)$", unit, re.M))
    assert {"gitlab-token", "signing-key"} <= set(creds), creds
    credentials_dir = "/run/credentials/retry-bot.service/"
    text = (PACKAGING / "systemd" / "bot.toml").read_text(encoding="utf-8")
    referenced = set(re.findall(re.escape(credentials_dir) + r"([\w.-]+)", text))
    assert referenced, "bot.toml should read its secrets from the credentials directory"
    assert referenced <= set(creds), f"bot.toml reads {referenced}, the unit loads {set(creds)}"
    cfg = _load_bot(systemd_bot_toml_in(tmp_path), env={})
    assert cfg.gitlab.token == "secret-gitlab-token"
    assert cfg.signing_keys == {"default": b"secret-signing-key"}
    assert cfg.policy_path == str(tmp_path / "etc-retry-bot" / "policy.toml")
    # The SQLite state lives in the unit's StateDirectory=.
    state_dir = re.search(r"^StateDirectory=(\S+)$", unit, re.M).group(1)
    if cfg.state_url.startswith("sqlite:"):
        assert cfg.state_url.startswith(f"sqlite:////var/lib/{state_dir}/"), cfg.state_url
    listen_port = cfg.listen.rpartition(":")[2]
    assert listen_port.isdigit()


# --------------------------------------------------------------------------- wrapper.toml


def test_config_wrapper_toml_loads_with_the_wrapper_loader() -> None:
    from runner_wrapper.config import load_config

    cfg = load_config(str(CONFIG / "wrapper.toml"), environ={})
    assert cfg.source == str(CONFIG / "wrapper.toml")
    assert cfg.variables.memory_limit == "KUBERNETES_MEMORY_LIMIT"


def test_wrapper_loader_rejects_a_typo(tmp_path: Path) -> None:
    from runner_wrapper.config import ConfigError, load_config

    text = (CONFIG / "wrapper.toml").read_text(encoding="utf-8").replace("stale_after_seconds", "stale_after_secs", 1)
    bad = tmp_path / "wrapper.toml"
    bad.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(str(bad), environ={})
    assert "stale_after_secs" in str(err.value)


def _load_with_any_loader(path: Path) -> list[str]:
    """Try every loader of the project on ``path``; [] when one accepts it, else each one's complaint."""
    from retry_bot.classify import load_taxonomy
    from retry_bot.live.config import load_config as load_bot
    from retry_bot.policy import load_policy
    from runner_wrapper.config import load_config as load_wrapper

    errors = []
    for name, load in (("policy", lambda: load_policy(path)), ("taxonomy", lambda: load_taxonomy([path])),
                       ("bot", lambda: load_bot(path, env=dict(BOT_ENV))),
                       ("wrapper", lambda: load_wrapper(str(path), environ={}))):
        try:
            load()
            return []
        except Exception as exc:  # noqa: BLE001 - collect every loader's verdict
            errors.append(f"{name}: {str(exc).splitlines()[0][:200]}")
    return errors


def test_every_toml_under_config_and_packaging_loads() -> None:
    """Files with a dedicated test above are checked there; any other example TOML
    (added later) must still be accepted by one of the project's loaders."""
    covered = {
        CONFIG / "policy.toml", CONFIG / "taxonomy.toml", CONFIG / "bot.toml", CONFIG / "wrapper.toml",
        PACKAGING / "systemd" / "bot.toml", PACKAGING / "runner" / "config.toml.example",
    }
    found = {p for p in list(CONFIG.rglob("*.toml")) + list(PACKAGING.rglob("*.toml"))
             + list(PACKAGING.rglob("*.toml.example"))}
    missing = sorted(str(p.relative_to(ROOT)) for p in covered - found)
    assert not missing, f"shipped examples missing: {missing}"
    problems = {}
    for p in sorted(found - covered):
        errors = _load_with_any_loader(p)
        if errors:
            problems[str(p.relative_to(ROOT))] = errors
    assert not problems, f"example configs no loader accepts: {problems}"
    for p in found:
        tomllib.loads(p.read_text(encoding="utf-8"))  # at least valid TOML


def test_any_loader_check_rejects_a_file_no_loader_accepts(tmp_path: Path) -> None:
    bad = tmp_path / "mystery.toml"
    bad.write_text('[nobody]\nknows = "this table"\n', encoding="utf-8")
    assert len(_load_with_any_loader(bad)) == 4


# --------------------------------------------------------------------------- runner config.toml


RUNNER_EXAMPLE = PACKAGING / "runner" / "config.toml.example"
GLOBAL_WRAPPER_OPTIONS = ("--config", "--log-format", "--log-level")


def _runner_custom() -> tuple[dict, dict]:
    assert RUNNER_EXAMPLE.is_file(), f"{RUNNER_EXAMPLE.relative_to(ROOT)} is missing (the wrapper's deliverable)"
    doc = tomllib.loads(RUNNER_EXAMPLE.read_text(encoding="utf-8"))
    runners = [r for r in doc.get("runners", []) if r.get("executor") == "custom"]
    assert runners, "no [[runners]] entry with executor = \"custom\""
    runner = runners[0]
    assert "custom" in runner, "[runners.custom] is missing"
    return runner, runner["custom"]


def _split_wrapper_args(args: list[str]) -> tuple[list[str], list[str]]:
    """(global options, command words) of a runner-wrapper argument list."""
    opts: list[str] = []
    rest = list(args)
    while rest and rest[0].split("=", 1)[0] in GLOBAL_WRAPPER_OPTIONS:
        opt = rest.pop(0)
        opts.append(opt)
        if "=" not in opt:
            opts.append(rest.pop(0))
    return opts, rest


def test_runner_example_calls_real_runner_wrapper_subcommands() -> None:
    from runner_wrapper.cli import USAGE

    stages = set(re.findall(r"^  executor (\w+)", USAGE, re.M))
    runner, custom = _runner_custom()
    assert runner.get("builds_dir") and runner.get("cache_dir"), "the custom executor needs builds_dir and cache_dir"
    assert custom.get("run_exec"), "run_exec is the only required key"
    for stage in ("config", "prepare", "run", "cleanup"):
        exe = custom.get(f"{stage}_exec")
        assert exe, f"{stage}_exec is not set"
        args = list(custom.get(f"{stage}_args", []))
        if Path(exe).name.startswith("python"):
            # the interpreter launch: `python -I -m runner_wrapper ...` (isolated, no console-script import)
            assert args[:3] == ["-I", "-m", "runner_wrapper"], f"{stage}: {exe} {args}"
            args = args[3:]
        else:
            assert Path(exe).name == "runner-wrapper", exe
        _opts, words = _split_wrapper_args(args)
        assert words == ["executor", stage], f"{stage}_args = {custom.get(f'{stage}_args')}"
        assert stage in stages, f"runner-wrapper has no 'executor {stage}'"


def test_runner_example_config_exec_really_runs(tmp_path: Path) -> None:
    """Run config_exec + config_args as GitLab Runner would, with this venv's runner-wrapper
    and the example wrapper.toml (forced to the psutil backend: no cgroup is touched)."""
    import json

    runner, custom = _runner_custom()
    wrapper = tmp_path / "wrapper.toml"
    text = (CONFIG / "wrapper.toml").read_text(encoding="utf-8")
    wrapper.write_text(re.sub(r'(?m)^backend = "\w+"', 'backend = "psutil"', text), encoding="utf-8")
    opts, words = _split_wrapper_args(list(custom.get("config_args", [])))
    if "--config" in opts:
        opts[opts.index("--config") + 1] = str(wrapper)
    opts = [f"--config={wrapper}" if o.startswith("--config=") else o for o in opts]
    env = subprocess_env(BUILD_FAILURE_EXIT_CODE="1", SYSTEM_FAILURE_EXIT_CODE="2", TMPDIR=str(tmp_path),
                         BUILD_EXIT_CODE_FILE=str(tmp_path / "build_exit_code"),
                         RUNNER_WRAPPER_CONFIG=str(wrapper))
    proc = subprocess.run([str(script("runner-wrapper")), *opts, *words], capture_output=True, text=True,
                          timeout=60, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert out["driver"]["name"]
    # The runner's and the wrapper's directories must agree (GitLab uses the driver's answer).
    assert out["builds_dir"] == runner["builds_dir"], (out["builds_dir"], runner["builds_dir"])
    assert out["cache_dir"] == runner["cache_dir"], (out["cache_dir"], runner["cache_dir"])
