"""docs/admin-guide.md against the code: every command it tells an admin to
type is a real sub-command with real options, every file it names exists,
every metric it names is exported, its config snippets load, and every error
message in its troubleshooting tables is really printed by the programs."""

from __future__ import annotations

import ast
import functools
import re
import shlex
import tomllib
from pathlib import Path

import pytest
import yaml

from ._paths import DOCS, ROOT

GUIDE = DOCS / "admin-guide.md"


def _text() -> str:
    return GUIDE.read_text(encoding="utf-8")


def code_blocks(lang: str | None = None) -> list[tuple[str, str]]:
    """(language, body) of every fenced block (indented fences inside lists too)."""
    out = []
    for m in re.finditer(r"^( *)```(\w*)\n(.*?)^\1```", _text(), re.M | re.S):
        indent = len(m.group(1))
        body = "\n".join(line[indent:] for line in m.group(3).splitlines())
        if lang is None or m.group(2) == lang:
            out.append((m.group(2), body))
    return out


def shell_commands() -> list[list[str]]:
    """Every simple command in the sh blocks, as argv (env assignments dropped)."""
    cmds = []
    for _, body in code_blocks("sh"):
        body = re.sub(r"\\\n\s*", " ", body)
        for line in body.splitlines():
            line = re.sub(r"\$\([^)]*\)", "X", line)           # $(...) substitutions
            line = re.sub(r"<<<.*$", "", line)                 # here-strings
            line = re.sub(r"(^|\s)#.*$", "", line)             # comments
            for seg in re.split(r"\|\||&&|\||;", line):
                try:
                    argv = shlex.split(seg)
                except ValueError:
                    continue
                while argv and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", argv[0]):
                    argv.pop(0)
                argv = [a for a in argv if not re.fullmatch(r"\d?>.*|<.*", a)]
                if argv:
                    cmds.append(argv)
    return cmds


def _program(argv: list[str]) -> str:
    return Path(argv[0]).name


def test_guide_has_commands_for_both_programs() -> None:
    names = {_program(a) for a in shell_commands()}
    assert {"retry-bot", "runner-wrapper"} <= names


def test_every_retry_bot_command_parses() -> None:
    from retry_bot.cli import build_parser

    parser = build_parser()
    seen = set()
    for argv in shell_commands():
        if _program(argv) != "retry-bot":
            continue
        try:
            args = parser.parse_args(argv[1:])
        except SystemExit:
            pytest.fail(f"not a valid retry-bot command line: {' '.join(argv)}")
        assert callable(getattr(args, "func", None)), " ".join(argv)
        seen.add(args.command)
    # The guide covers the commands an admin needs.
    assert {"run", "once", "policy", "state", "history", "classify"} <= seen, seen


def test_every_runner_wrapper_command_is_real() -> None:
    from runner_wrapper.cli import USAGE

    commands = set(re.findall(r"^  (\w+)", USAGE.split("commands:", 1)[1], re.M))
    stages = set(re.findall(r"^  executor (\w+)", USAGE, re.M))
    assert {"executor", "measure", "doctor"} <= commands and {"config", "run"} <= stages
    seen = set()
    for argv in shell_commands():
        if _program(argv) != "runner-wrapper":
            continue
        rest = argv[1:]
        while rest and rest[0] in ("--config", "--log-format", "--log-level"):
            rest = rest[2:]
        if rest in (["--help"], []):
            continue
        assert rest[0] in commands, " ".join(argv)
        seen.add(rest[0])
        if rest[0] == "executor":
            assert rest[1] in stages, " ".join(argv)
        if rest[0] == "measure":
            opts = rest[1:rest.index("--")] if "--" in rest else rest[1:]
            documented = set(re.findall(r"--[\w-]+", USAGE.split("measure", 1)[1].split("\n  doctor")[0]))
            for o in opts:
                if o.startswith("--"):
                    assert o in documented, f"{' '.join(argv)}: {o} is not a measure option"
            assert "--" in rest and rest[-1] != "--", "measure needs -- CMD"
    assert {"doctor", "measure"} <= seen


def test_runners_custom_snippet_calls_real_executor_stages() -> None:
    from runner_wrapper.cli import USAGE

    stages = set(re.findall(r"^  executor (\w+)", USAGE, re.M))
    snippets = [body for _, body in code_blocks("toml") if "[runners.custom]" in body]
    assert snippets, "the guide should show the [runners.custom] section"
    doc = tomllib.loads(snippets[0])
    (runner,) = doc["runners"]
    assert runner["executor"] == "custom" and runner["builds_dir"] and runner["cache_dir"]
    custom = runner["custom"]
    example = tomllib.loads((ROOT / "packaging" / "runner" / "config.toml.example").read_text(encoding="utf-8"))
    (shipped,) = [r for r in example["runners"] if r.get("executor") == "custom"]
    for stage in ("config", "prepare", "run", "cleanup"):
        args = list(custom[f"{stage}_args"])
        if Path(custom[f"{stage}_exec"]).name.startswith("python"):
            assert args[:3] == ["-I", "-m", "runner_wrapper"], args
            args = args[3:]
        else:
            assert Path(custom[f"{stage}_exec"]).name == "runner-wrapper"
        while args and args[0] in ("--config", "--log-format", "--log-level"):
            args = args[2:]
        assert args == ["executor", stage] and stage in stages
        # The guide shows what packaging/runner/config.toml.example ships.
        assert custom[f"{stage}_exec"] == shipped["custom"][f"{stage}_exec"]
        assert custom[f"{stage}_args"] == shipped["custom"][f"{stage}_args"]


def test_toml_snippets_are_valid() -> None:
    """Wrapper and policy snippets load with their loaders; the rest is at least TOML."""
    from retry_bot.policy import default_policy_text, parse_policy
    from runner_wrapper.config import config_from_mapping

    policy_keys = set(tomllib.loads(default_policy_text())) | {"overrides", "placement", "runner_classes"}
    checked = 0
    for _, body in code_blocks("toml"):
        data = tomllib.loads(body)
        if set(data) <= {"cgroup", "caps", "defaults", "variables", "sampler", "signing", "sinks",
                         "allocation", "executor"}:
            config_from_mapping(data, source="docs/admin-guide.md")
            checked += 1
        elif set(data) <= policy_keys:
            parse_policy(body, source="docs/admin-guide.md")
            checked += 1
    assert checked >= 3


def test_yaml_snippets_are_valid() -> None:
    from .test_gitlab_ci import _GitLabLoader, _schema_view
    from .test_grafana import metric_names

    for _, body in code_blocks("yaml"):
        data = yaml.load(body, Loader=_GitLabLoader)  # noqa: S506 - safe loader subclass
        assert data
        if isinstance(data, dict) and "include" in data:
            from check_jsonschema.builtin_schemas import get_builtin_schema
            import jsonschema

            schema = get_builtin_schema("vendor.gitlab-ci")
            errors = list(jsonschema.validators.validator_for(schema)(schema).iter_errors(_schema_view(data)))
            assert not errors, [e.message for e in errors]
        if isinstance(data, list) and all(isinstance(r, dict) and "alert" in r for r in data):
            for rule in data:
                assert metric_names(rule["expr"]), rule


def test_named_repository_files_exist() -> None:
    missing = []
    for m in re.finditer(r"(?<![\w/.-])((?:config|packaging|docs)/[\w./-]*[\w-])", _text()):
        path = m.group(1)
        if "*" in path:
            continue
        if not (ROOT / path).exists():
            missing.append(path)
    assert not missing, sorted(set(missing))


def test_named_metrics_exist() -> None:
    from prometheus_client.metrics import MetricWrapperBase

    from retry_bot.live.metrics import BotMetrics

    from prometheus_client import CollectorRegistry

    from retry_bot.server import make_metrics

    bot = {v._name for v in vars(BotMetrics()).values() if isinstance(v, MetricWrapperBase)}  # noqa: SLF001
    serve = {v._name for v in vars(make_metrics(CollectorRegistry())).values()  # noqa: SLF001
             if isinstance(v, MetricWrapperBase)}
    sinks = (ROOT / "runner_wrapper" / "sinks.py").read_text(encoding="utf-8")
    wrapper = set(re.findall(r'"(rightsizer_[a-z_]+)"', sinks)) | serve
    named = set(re.findall(r"\b((?:retry_bot|rightsizer)_[a-z_]+[a-z])\b", _text()))
    bases = {re.sub(r"_(total|bucket|sum|count|created)$", "", n) for n in named}
    assert bot <= bases, f"bot metrics the guide does not explain: {sorted(bot - bases)}"
    assert serve <= bases, f"serve metrics the guide does not explain: {sorted(serve - bases)}"
    for name in named:
        base = re.sub(r"_(total|bucket|sum|count|created)$", "", name)
        if name.startswith("retry_bot_"):
            assert base in bot, f"{name} is not a metric of retry_bot.live.metrics.BotMetrics"
        else:
            assert name in wrapper or base in wrapper, \
                f"{name} is not written by runner_wrapper.sinks nor exported by retry-bot serve"


# --------------------------------------------------------------------------- troubleshooting


@functools.lru_cache(maxsize=1)
def _string_literals() -> tuple[frozenset[str], str]:
    """Every string literal of the two packages; f-string fields become NUL.
    Returns (the set of whole literals, all literals joined by NUL)."""
    out: list[str] = []
    for pkg in ("retry_bot", "runner_wrapper"):
        for path in (ROOT / pkg).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    out.append(node.value)
                elif isinstance(node, ast.JoinedStr):
                    out.append("".join(v.value if isinstance(v, ast.Constant) else "\0" for v in node.values))
    return frozenset(out), "\0".join(out)


def _printed(fragment: str) -> bool:
    """``fragment`` is in one literal, or in two literals that are printed together
    (split at one word boundary, each side at least 6 characters)."""
    _, corpus = _string_literals()
    if fragment in corpus:
        return True
    for i, ch in enumerate(fragment):
        if ch == " " and 6 <= i and len(fragment) - i >= 6:
            if fragment[:i + 1] in corpus and fragment[i + 1:] in corpus:
                return True
            if fragment[:i] in corpus and fragment[i:] in corpus:
                return True
    return False


def troubleshooting_entries() -> list[str]:
    section = _text().split("## 9. Troubleshooting", 1)[1]
    entries = []
    for row in re.findall(r"^\| (.+?) \| .+\|$", section, re.M):
        if row.startswith(("Message", "---")):
            continue
        for m in re.finditer(r"`([^`]+)`(\s*\((?:GitLab|GitLab Runner|the kernel)'s answer)?", row):
            if not m.group(2):
                entries.append(m.group(1))
    return entries


def test_troubleshooting_has_entries() -> None:
    assert len(troubleshooting_entries()) >= 30


@pytest.mark.parametrize("message", troubleshooting_entries())
def test_troubleshooting_message_is_printed_by_the_code(message: str) -> None:
    whole, _ = _string_literals()
    if re.fullmatch(r"[a-z_]+(\.[a-z_]+)?", message):  # a structlog event name
        assert message in whole, f"no log event {message!r} in the code"
        return
    # "KEY.PATH: message" is how retry_bot.problems.Problem prints a problem of a file.
    message = re.sub(r"^[a-z_]+(?:\.[a-z_]+|\[<?\w+>?\])+: ", "", message)
    # "<N> process killed" is built apart ("{n} process{'es' if n != 1 else ''} killed").
    assert _printed(" killed") and _printed(" process")
    message = re.sub(r"<N> process(es)? killed", "<KILLED>", message)
    fragments = [f for f in re.split(r"<[A-Z][A-Z _]*>|\.\.\.", message) if len(f.strip()) >= 6]
    assert fragments, message
    for fragment in fragments:
        assert _printed(fragment), f"{fragment!r} (from {message!r}) is not printed by retry_bot or runner_wrapper"


def test_troubleshooting_check_rejects_an_invented_message() -> None:
    """Control: the check above fails on text the programs never print."""
    assert not _printed("the flux capacitor is out of alignment")
    assert _printed("cannot open state database ")


def test_doctor_exit_code_is_what_the_guide_says(tmp_path) -> None:
    """Issue 13: doctor exits 1 on a fresh install (no signing key) while the guide said
    "exit code 1 when the configuration itself is invalid"; a newcomer must know they are blocked."""
    import os
    import subprocess
    import sys

    text = " ".join(_text().split())
    assert "exit code 1 when the configuration itself is invalid" not in text
    assert "**1** at least one `PROBLEM:` line, whatever it is" in text
    assert "`PROBLEM: no signing key configured`" in text
    env = {k: v for k, v in os.environ.items() if k != "RIGHTSIZER_SIGNING_KEY"}
    cfg = ROOT / "config" / "wrapper.toml"

    def doctor(extra_env: dict[str, str], config: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "runner_wrapper", "--config", str(config), "doctor"],
                              capture_output=True, text=True, timeout=60, env={**env, **extra_env})

    fresh = doctor({}, cfg)
    assert "PROBLEM: no signing key configured" in fresh.stdout
    assert fresh.returncode == 1
    keyed = doctor({"RIGHTSIZER_SIGNING_KEY": "k" * 32}, cfg)
    assert "no signing key" not in keyed.stdout
    assert keyed.returncode == (1 if "PROBLEM:" in keyed.stdout else 0)   # 0 exactly when nothing to fix
    bad = tmp_path / "wrapper.toml"
    bad.write_text("[cgroup]\nbogus = 1\n")
    invalid = doctor({"RIGHTSIZER_SIGNING_KEY": "k" * 32}, bad)
    assert invalid.returncode == 1 and "PROBLEM: " in invalid.stdout and "bogus" in invalid.stdout
