#!/usr/bin/env python3
"""Copy config/policy.toml into configmap.yaml's ``policy.toml`` entry (the last key).

Run from anywhere after editing config/policy.toml; tests/packaging checks that
the two are identical.  The ``bot.toml`` entry is left as it is (it differs from
config/bot.toml on purpose: PostgreSQL, listen address, secrets from the Pod).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFIGMAP = HERE / "configmap.yaml"
POLICY = HERE.parent.parent / "config" / "policy.toml"
KEY_LINE = "  policy.toml: |\n"


def render(configmap_text: str, policy_text: str) -> str:
    head, sep, _ = configmap_text.partition(KEY_LINE)
    if not sep:
        raise SystemExit(f"{CONFIGMAP}: no line {KEY_LINE.strip()!r}")
    body = "".join(("    " + line) if line.strip() else "\n" for line in policy_text.splitlines(keepends=True))
    if not body.endswith("\n"):
        body += "\n"
    return head + KEY_LINE + body


def main() -> int:
    old = CONFIGMAP.read_text(encoding="utf-8")
    new = render(old, POLICY.read_text(encoding="utf-8"))
    if new != old:
        CONFIGMAP.write_text(new, encoding="utf-8")
        print(f"updated {CONFIGMAP}")
    else:
        print(f"{CONFIGMAP} already up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
