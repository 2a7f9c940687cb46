"""systemd units: ``systemd-analyze verify`` accepts them (unknown keys are
failures, except those a file marks as needing a newer systemd than this
host's), ``systemd-analyze security`` rates the bot's sandbox, and the
hardening the admin guide promises is really in the unit."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ._paths import CONFIG, PACKAGING, script, systemd_bot_toml_in

SYSTEMD = PACKAGING / "systemd"
BOT_UNIT = SYSTEMD / "retry-bot.service"
SERVE_UNIT = SYSTEMD / "retry-bot-serve.service"
BOT_UNITS = [BOT_UNIT, SERVE_UNIT]
DROPINS = SYSTEMD / "gitlab-runner.service.d"
INSTALL_PREFIX = "/opt/gitlab-rightsizer/.venv/bin/"


def parse_unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """A unit file as {section: {key: [values...]}} (keys repeat in systemd units)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        while line.endswith("\\") and i + 1 < len(lines):  # continuation lines
            i += 1
            line = line[:-1] + " " + lines[i].strip()
        i += 1
        if not line or line.startswith(("#", ";")):
            continue
        m = re.fullmatch(r"\[([^\]]+)\]", line)
        if m:
            current = sections.setdefault(m.group(1), {})
            continue
        assert current is not None, f"{path.name}: key outside a section: {line}"
        assert "=" in line, f"{path.name}: not KEY=VALUE: {line}"
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def _systemd_version() -> int | None:
    exe = shutil.which("systemd-analyze")
    if not exe:
        return None
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
    m = re.search(r"systemd (\d+)", out)
    return int(m.group(1)) if m else None


def _newer_keys(path: Path) -> dict[str, int]:
    """Keys a file declares as needing a newer systemd: ``# requires systemd >= N: Key, Key``."""
    out: dict[str, int] = {}
    for m in re.finditer(r"^#\s*requires systemd >= (\d+):\s*(.+)$", path.read_text(encoding="utf-8"), re.M):
        for key in re.split(r"[,\s]+", m.group(2).strip()):
            if key:
                out[key] = int(m.group(1))
    return out


def _verify(units: list[Path], unit_path: Path) -> str:
    env = dict(os.environ, SYSTEMD_UNIT_PATH=f"{unit_path}:", SYSTEMD_LOG_LEVEL="info")
    proc = subprocess.run(["systemd-analyze", "verify", "--man=no", *map(str, units)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=unit_path)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text
    return text


def _unexpected_warnings(text: str, allowed: dict[str, int], version: int) -> list[str]:
    bad = []
    for line in text.splitlines():
        m = re.search(r"Unknown key '([^']+)'|Unknown section '([^']+)'|Failed to parse|Invalid|not valid|"
                      r"is not executable|Unknown lvalue|Unknown assignment", line)
        if not m:
            continue
        key = m.group(1)
        if key and key in allowed and allowed[key] > version:
            continue  # declared as needing a newer systemd than this host's
        bad.append(line)
    return bad


needs_systemd = pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                                   reason="systemd-analyze is not installed on this host")


@needs_systemd
@pytest.mark.parametrize("unit", BOT_UNITS, ids=lambda p: p.name)
def test_bot_unit_verifies(tmp_path: Path, unit: Path) -> None:
    """verify checks every key and that ExecStart*= binaries exist: point them at this venv."""
    version = _systemd_version() or 0
    text = unit.read_text(encoding="utf-8")
    assert INSTALL_PREFIX in text
    bindir = str(script("retry-bot").parent) + "/"
    (tmp_path / unit.name).write_text(text.replace(INSTALL_PREFIX, bindir), encoding="utf-8")
    out = _verify([tmp_path / unit.name], tmp_path)
    bad = _unexpected_warnings(out, _newer_keys(unit), version)
    assert not bad, "\n".join(bad)


@needs_systemd
def test_runner_slice_and_dropins_verify(tmp_path: Path) -> None:
    """The slice and every drop-in, applied to a stand-in gitlab-runner.service."""
    version = _systemd_version() or 0
    (tmp_path / "gitlab-runner.service").write_text(
        "[Unit]\nDescription=GitLab Runner (stand-in for the package's unit)\n"
        "[Service]\nExecStart=/bin/sh -c 'exec sleep infinity'\n", encoding="utf-8")
    shutil.copy(SYSTEMD / "gitlab-runner.slice", tmp_path / "gitlab-runner.slice")
    shutil.copytree(DROPINS, tmp_path / "gitlab-runner.service.d")
    out = _verify([tmp_path / "gitlab-runner.service", tmp_path / "gitlab-runner.slice"], tmp_path)
    allowed: dict[str, int] = {}
    for f in DROPINS.glob("*.conf"):
        allowed.update(_newer_keys(f))
    bad = _unexpected_warnings(out, allowed, version)
    assert not bad, "\n".join(bad)


@needs_systemd
def test_verify_would_catch_a_misspelt_key(tmp_path: Path) -> None:
    """Control: the same check fails on a unit with a typo."""
    version = _systemd_version() or 0
    text = BOT_UNIT.read_text(encoding="utf-8").replace("ProtectSystem=strict", "ProtectSytem=strict")
    bindir = str(script("retry-bot").parent) + "/"
    (tmp_path / "retry-bot.service").write_text(text.replace(INSTALL_PREFIX, bindir), encoding="utf-8")
    out = _verify([tmp_path / "retry-bot.service"], tmp_path)
    assert _unexpected_warnings(out, {}, version)


@needs_systemd
@pytest.mark.parametrize("unit", BOT_UNITS, ids=lambda p: p.name)
def test_bot_unit_security_exposure_is_low(tmp_path: Path, unit: Path) -> None:
    """``systemd-analyze security`` (offline) rates the sandbox; 'OK' is below 4.0 on its 0-10 scale."""
    version = _systemd_version() or 0
    if version < 250:
        pytest.skip(f"systemd {version} has no 'security --offline'")
    shutil.copy(unit, tmp_path / unit.name)
    proc = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--no-pager",
                           str(tmp_path / unit.name)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    m = re.search(r"Overall exposure level for \S+: ([\d.]+)", proc.stdout + proc.stderr)
    assert m, proc.stdout + proc.stderr
    assert float(m.group(1)) <= 2.0, proc.stdout


# --------------------------------------------------------------------------- content


def _service(unit: Path) -> dict[str, list[str]]:
    return parse_unit(unit)["Service"]


def _parse_retry_bot(cmdline: str):
    """argv of an Exec*= line parsed by retry-bot's own parser (SystemExit = not a real command)."""
    from retry_bot.cli import build_parser

    argv = cmdline.split()
    assert argv[0] == INSTALL_PREFIX + "retry-bot", argv[0]
    try:
        return build_parser().parse_args(argv[1:])
    except SystemExit:
        pytest.fail(f"not a valid retry-bot command line: {cmdline}")


@pytest.mark.parametrize("unit", BOT_UNITS, ids=lambda p: p.name)
def test_bot_unit_hardening(unit: Path) -> None:
    u = parse_unit(unit)
    svc = u["Service"]

    def one(key: str) -> str:
        assert key in svc, f"[Service] lacks {key}="
        return svc[key][-1]

    assert one("DynamicUser") == "yes"
    assert one("User") == "retry-bot", "both units share one named dynamic user (and the state directory)"
    assert one("ProtectSystem") == "strict"
    assert one("NoNewPrivileges") == "yes"
    assert one("StateDirectory") == "retry-bot"
    assert one("ConfigurationDirectory") == "retry-bot"
    assert one("Restart") == "on-failure"
    assert one("ProtectHome") == "yes"
    assert one("PrivateTmp") == "yes"
    assert one("CapabilityBoundingSet") == ""
    assert one("MemoryMax") and one("TasksMax")
    assert "LoadCredential" in svc or "EnvironmentFile" in svc
    assert u["Install"]["WantedBy"] == ["multi-user.target"]


def test_bot_unit_commands_are_real() -> None:
    svc = _service(BOT_UNIT)
    run = _parse_retry_bot(svc["ExecStart"][-1])
    assert run.command == "run" and run.config == "%E/retry-bot/bot.toml"
    pre = _parse_retry_bot(svc["ExecStartPre"][-1])
    assert pre.command == "policy" and callable(pre.func)
    # SIGHUP reloads the policy (the bot's documented reload signal).
    assert "-HUP" in svc["ExecReload"][-1]


def test_serve_unit_matches_the_bot_unit(tmp_path: Path) -> None:
    """Same state database, same policy, a signing key the unit really loads."""
    from retry_bot.live.config import load_config

    svc = _service(SERVE_UNIT)
    serve = _parse_retry_bot(svc["ExecStart"][-1])
    assert serve.command == "serve"
    cfg = load_config(systemd_bot_toml_in(tmp_path), env={})
    assert serve.state == cfg.state_url, "serve and the bot must share one state database"
    assert serve.policy == "%E/retry-bot/policy.toml"
    creds = {c.split(":", 1)[0] for c in svc.get("LoadCredential", [])}
    for spec in serve.key_file:
        kid, _, path = spec.partition("=")
        assert kid in cfg.signing_keys, f"key id {kid} is not one of bot.toml's"
        assert path.startswith("%d/") and path[3:] in creds, f"{path}: not a credential of the unit"
    # Not the bot's own /metrics port.
    assert serve.listen.rpartition(":")[2] != cfg.listen.rpartition(":")[2]


@pytest.mark.parametrize("unit", BOT_UNITS, ids=lambda p: p.name)
def test_bot_unit_secrets_are_not_in_the_environment(unit: Path) -> None:
    svc = _service(unit)
    for value in svc.get("Environment", []):
        assert not re.search(r"(TOKEN|KEY|PASSWORD)=(?!%d/)\S", value, re.I), value


def test_runner_dropin_delegates_into_the_slice() -> None:
    slice_name = "gitlab-runner.slice"
    assert (SYSTEMD / slice_name).is_file()
    delegate = parse_unit(DROPINS / "50-rightsizer-delegate.conf")["Service"]
    assert delegate["Delegate"] == ["yes"]
    assert delegate["Slice"] == [slice_name]
    sl = parse_unit(SYSTEMD / slice_name)["Slice"]
    assert sl["MemoryAccounting"] == ["yes"] and "MemoryMax" in sl
    sub = parse_unit(DROPINS / "60-rightsizer-subgroup.conf")["Service"]
    assert sub["DelegateSubgroup"] == ["supervisor"]


def test_legacy_subgroup_script_moves_the_runner_into_a_leaf(tmp_path: Path) -> None:
    """Run the ExecStartPost= shell of the systemd < 254 drop-in against a fake cgroupfs."""
    svc = parse_unit(DROPINS / "60-rightsizer-subgroup-legacy.conf")["Service"]
    (cmd,) = svc["ExecStartPost"]
    m = re.fullmatch(r"/bin/sh -ec '(.*)'", cmd)
    assert m, cmd
    body = m.group(1)
    # What systemd does before exec: $MAINPID is substituted, $$ becomes $.
    pid = "4242"
    body = body.replace("$MAINPID", pid).replace("$$", "$")
    fake_cg = tmp_path / "cgroupfs"
    fake_proc = tmp_path / "proc"
    service_cg = "/gitlab-runner.slice/gitlab-runner.service"
    (fake_cg / service_cg.lstrip("/")).mkdir(parents=True)
    (fake_proc / pid).mkdir(parents=True)
    (fake_proc / pid / "cgroup").write_text(f"0::{service_cg}\n", encoding="utf-8")
    body = body.replace("/sys/fs/cgroup", str(fake_cg)).replace("/proc/", str(fake_proc) + "/")
    subprocess.run(["/bin/sh", "-ec", body], check=True, timeout=30)
    procs = fake_cg / service_cg.lstrip("/") / "supervisor" / "cgroup.procs"
    assert procs.read_text(encoding="utf-8").strip() == pid
    # Already in the leaf (DelegateSubgroup= did it): nothing happens.
    (fake_proc / pid / "cgroup").write_text(f"0::{service_cg}/supervisor\n", encoding="utf-8")
    subprocess.run(["/bin/sh", "-ec", body], check=True, timeout=30)
    assert not (fake_cg / service_cg.lstrip("/") / "supervisor" / "supervisor").exists()


def test_bot_unit_stop_timeout_outlasts_one_gitlab_call(tmp_path: Path) -> None:
    """SIGTERM lets the call in flight finish: TimeoutStopSec > [gitlab] max_total_seconds."""
    from retry_bot.live.config import load_config

    svc = parse_unit(BOT_UNIT)["Service"]
    value = svc["TimeoutStopSec"][-1]
    m = re.fullmatch(r"(\d+)\s*(s|min)?", value)
    assert m, value
    seconds = int(m.group(1)) * (60 if m.group(2) == "min" else 1)
    cfg = load_config(systemd_bot_toml_in(tmp_path), env={})
    assert seconds > cfg.gitlab.max_total_seconds


_MDWE_LAUNCHER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(65, 1, 0, 0, 0) != 0:   # PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN (Linux 6.3+)
    sys.exit(77)
os.execv(sys.argv[1], sys.argv[1:])
"""

_BOT_IMPORTS = r"""
import mmap
try:
    mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
except OSError:
    pass
else:
    raise SystemExit("MDWE is not in force")
import ctypes
assert ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 7)() == 7
import gitlab, gql, structlog, tenacity, prometheus_client
import retry_bot.cli, retry_bot.live.daemon, retry_bot.live.poller, retry_bot.server, retry_bot.state
try:
    import psycopg
    psycopg.Connection
except ImportError:
    pass
print("ok")
"""


@pytest.mark.slow
def test_bot_code_runs_with_memory_deny_write_execute(tmp_path: Path) -> None:
    """MemoryDenyWriteExecute=yes must not break the interpreter or a dependency (ctypes
    callbacks, psycopg): run the bot's imports, and `policy check`, under the kernel's
    equivalent prctl (PR_SET_MDWE, inherited across exec)."""
    for unit in BOT_UNITS:
        assert _service(unit)["MemoryDenyWriteExecute"] == ["yes"], unit.name
    launcher = tmp_path / "mdwe.py"
    launcher.write_text(_MDWE_LAUNCHER, encoding="utf-8")
    proc = subprocess.run([sys.executable, str(launcher), sys.executable, "-c", _BOT_IMPORTS],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode == 77:
        pytest.skip("the kernel has no PR_SET_MDWE (Linux < 6.3)")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr
    proc = subprocess.run([sys.executable, str(launcher), str(script("retry-bot")), "policy", "check",
                           str(CONFIG / "policy.toml")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
