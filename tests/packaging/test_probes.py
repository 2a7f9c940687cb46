"""The endpoints the packaging probes really exist: start the real ``retry-bot run``
(against the GitLab stand-in, on loopback) and ``retry-bot serve`` with the shipped
configurations, ask ``/healthz`` and ``/metrics`` where the Containerfile's
HEALTHCHECK, the Kubernetes probes and the ServiceMonitor ask, then stop them with
SIGTERM as systemd and the kubelet do, within the units' and pods' stop timeouts."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from ._paths import CONFIG, PACKAGING, script, subprocess_env

pytestmark = pytest.mark.slow  # end to end: outside the fast lane (pytest -m "not slow")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:  # noqa: S310 - loopback only
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


def _wait_healthy(proc: subprocess.Popen, url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"exited {proc.returncode} before answering /healthz:\n{out}\n{err}")
        try:
            if _get(url)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    pytest.fail(f"{url} did not answer 200 within {timeout} s")


def _stop(proc: subprocess.Popen, timeout: float) -> tuple[int, float]:
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"did not stop within {timeout} s of SIGTERM")
    return proc.returncode, time.monotonic() - start


def _probe_path() -> str:
    dep = yaml.safe_load((PACKAGING / "kubernetes" / "deployment.yaml").read_text(encoding="utf-8"))
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    return c["livenessProbe"]["httpGet"]["path"]


@pytest.fixture()
def standin() -> Iterator[object]:
    from standin.gitlab import StandIn

    gl = StandIn()
    gl.start()
    gl.add_project("spack/spack-packages", {"build": {"script": ["make"]}})
    try:
        yield gl
    finally:
        gl.stop()


def test_retry_bot_run_answers_probes_and_stops_on_sigterm(tmp_path: Path, standin) -> None:
    from standin.gitlab import DEFAULT_TOKEN

    port = _free_port()
    text = (CONFIG / "bot.toml").read_text(encoding="utf-8")
    text = re.sub(r'(?m)^url = ".*"$', f'url = "{standin.url}"', text, count=1)
    text = re.sub(r'(?m)^listen = ".*"$', f'listen = "127.0.0.1:{port}"', text, count=1)
    text = re.sub(r'(?m)^state_url = ".*?"', f'state_url = "sqlite:///{tmp_path}/state.db"', text, count=1)
    text = re.sub(r"(?m)^interval_seconds = .*$", "interval_seconds = 0.5", text, count=1)
    (tmp_path / "bot.toml").write_text(text, encoding="utf-8")
    (tmp_path / "policy.toml").write_text((CONFIG / "policy.toml").read_text(encoding="utf-8"), encoding="utf-8")
    env = subprocess_env(RETRY_BOT_GITLAB_TOKEN=DEFAULT_TOKEN, RIGHTSIZER_SIGNING_KEY="k")
    proc = subprocess.Popen([str(script("retry-bot")), "--log-format", "json", "run", "--config",
                             str(tmp_path / "bot.toml"), "--dry-run"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_healthy(proc, base + _probe_path())
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            status, body = _get(base + "/metrics")
            assert status == 200
            if re.search(r"^retry_bot_poll_cycles_total\{.*\} [1-9]", body, re.M):
                break
            time.sleep(0.2)
        else:
            pytest.fail("no poll cycle showed up in /metrics")
        assert re.search(r"^retry_bot_is_leader 1", body, re.M), "the only replica should hold the lease"
        proc.send_signal(signal.SIGHUP)  # systemctl reload: re-read the policy, keep running
        time.sleep(0.5)
        assert proc.poll() is None and _get(base + "/healthz")[0] == 200
    finally:
        if proc.poll() is None:
            code, _ = _stop(proc, timeout=30)
        else:
            code = proc.returncode
        out, err = proc.communicate()
    assert code == 0, err[-3000:]
    assert "policy_reloaded" in err


def test_retry_bot_serve_answers_probes_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = _free_port()
    env = subprocess_env(RIGHTSIZER_SIGNING_KEY="k", RIGHTSIZER_COLLECTOR_TOKEN="t")
    proc = subprocess.Popen([str(script("retry-bot")), "--log-format", "json", "serve",
                             "--listen", f"127.0.0.1:{port}", "--state", f"sqlite:///{tmp_path}/state.db",
                             "--policy", str(CONFIG / "policy.toml"), "--key", "default=RIGHTSIZER_SIGNING_KEY",
                             "--token-env", "RIGHTSIZER_COLLECTOR_TOKEN"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_healthy(proc, base + "/healthz")
        status, body = _get(base + "/metrics")
        assert status == 200 and "rightsizer_http_requests_total" in body
        status, _ = _get(base + "/v1/allocation?job_name=build&project=g/p")
        assert status in (200, 400), status
    finally:
        code, _ = _stop(proc, timeout=30)
        proc.communicate()
    assert code == 0
