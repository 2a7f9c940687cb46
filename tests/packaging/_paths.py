"""Paths and small helpers shared by the packaging tests."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "config"
PACKAGING = ROOT / "packaging"
DOCS = ROOT / "docs"

#: The console scripts of this checkout's interpreter (the venv's bin/).
BIN = Path(sys.executable).parent


def script(name: str) -> Path:
    """Path of a console script (``retry-bot``, ``runner-wrapper``) next to the interpreter."""
    return BIN / name


def subprocess_env(**extra: str) -> dict[str, str]:
    """A clean environment for CLI runs: no inherited secrets, JSON logs off a TTY."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RETRY_BOT_", "RIGHTSIZER_", "RUNNER_WRAPPER_", "PG"))}
    env.update(extra)
    return env


CREDENTIALS_DIR = "/run/credentials/retry-bot.service/"


def systemd_bot_toml_in(tmp: Path) -> Path:
    """packaging/systemd/bot.toml installed in ``tmp`` as systemd would see it: the
    credentials it names are stood up in ``tmp/credentials`` (content ``secret-NAME``),
    and config/policy.toml sits next to it.  Returns the bot.toml path."""
    import re

    text = (PACKAGING / "systemd" / "bot.toml").read_text(encoding="utf-8")
    creds = tmp / "credentials"
    creds.mkdir()
    for name in set(re.findall(re.escape(CREDENTIALS_DIR) + r"([\w.-]+)", text)):
        (creds / name).write_text(f"secret-{name}\n", encoding="utf-8")
    etc = tmp / "etc-retry-bot"
    etc.mkdir()
    (etc / "policy.toml").write_text((CONFIG / "policy.toml").read_text(encoding="utf-8"), encoding="utf-8")
    (etc / "bot.toml").write_text(text.replace(CREDENTIALS_DIR, str(creds) + "/"), encoding="utf-8")
    return etc / "bot.toml"
