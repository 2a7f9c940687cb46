"""Call the real driver (``python -m runner_wrapper executor ...``) with a runner-like environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class JobDir:
    tmpdir: Path
    env: dict[str, str]
    config: Path

    @property
    def exit_code_file(self) -> Path:
        return self.tmpdir / "build_exit_code"

    def script(self, name: str, body: str) -> Path:
        p = self.tmpdir / name
        p.write_text("set -eo pipefail\n" + body + "\n")
        p.chmod(0o700)
        return p

    def cmd(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "runner_wrapper", "--config", str(self.config), "executor", *args]

    def call(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(self.cmd(*args), env=self.env, cwd=self.tmpdir, capture_output=True, timeout=timeout)

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(self.cmd(*args), env=self.env, cwd=self.tmpdir, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, process_group=0)


def job_dir(tmp_path: Path, config: Path, payload: dict, build_failure: int = 7, system_failure: int = 9,
            key: str | None = "sig-key-for-tests") -> JobDir:
    """Unusual exit codes on purpose: the driver must read them, never assume 1 and 2."""
    tmp = tmp_path / "custom-executor-job"
    tmp.mkdir(exist_ok=True)
    (tmp / "response.json").write_text(json.dumps(payload))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUSTOM_ENV_", "RIGHTSIZER_"))}
    env.update(TMPDIR=str(tmp), BUILD_FAILURE_EXIT_CODE=str(build_failure),
               SYSTEM_FAILURE_EXIT_CODE=str(system_failure), BUILD_EXIT_CODE_FILE=str(tmp / "build_exit_code"),
               JOB_RESPONSE_FILE=str(tmp / "response.json"))
    for v in payload.get("variables", []):
        env[f"CUSTOM_ENV_{v['key']}"] = v["value"]
    if key:
        env["RIGHTSIZER_SIGNING_KEY"] = key
    return JobDir(tmp, env, config)
