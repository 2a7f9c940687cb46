"""``python -m standin.gitlab``: a standalone server, and clear refusals of bad configs."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from standin.gitlab import CiConfigError, StandIn


def test_bad_config_is_refused_with_its_reason(tmp_path: Path) -> None:
    bad = tmp_path / "ci.yml"
    bad.write_text("a:\n  stage: nope\n  script: [x]\n")
    done = subprocess.run([sys.executable, "-m", "standin.gitlab", "--ci-config", str(bad)],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "stage 'nope' does not exist" in done.stderr
    assert "Traceback" not in done.stderr
    with StandIn() as server, pytest.raises(CiConfigError, match="needs a 'script'"):
        server.add_project("x/y", {"j": {"image": "alpine"}})


def test_standalone_server_serves_until_sigterm(tmp_path: Path) -> None:
    config = tmp_path / "ci.yml"
    config.write_text("build:\n  script: [make]\n")
    proc = subprocess.Popen([sys.executable, "-m", "standin.gitlab", "--ci-config", str(config),
                             "--token", "t0k"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        fields = dict(part.split("=", 1) for part in proc.stdout.readline().split())
        assert fields["token"] == "t0k" and fields["url"].startswith("http://127.0.0.1:")
        answer = requests.get(f"{fields['url']}/api/v4/projects/team%2Fapp", headers={"PRIVATE-TOKEN": "t0k"}, timeout=5)
        assert answer.json()["path_with_namespace"] == "team/app"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
