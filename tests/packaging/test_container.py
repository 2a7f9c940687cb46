"""The Containerfile: multi-stage, non-root, and every command it runs or
configures exists (console scripts, sub-commands, extras, copied paths); its
HEALTHCHECK really tells a healthy /healthz from an unhealthy one."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import threading
import tomllib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

from ._paths import CONFIG, PACKAGING, ROOT

CONTAINERFILE = PACKAGING / "container" / "Containerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    buf = ""
    for raw in CONTAINERFILE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if buf and line.startswith("#"):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        word, _, rest = buf.partition(" ")
        out.append((word.upper(), rest.strip()))
        buf = ""
    assert not buf, "dangling continuation line"
    return out


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _final_stage() -> list[tuple[str, str]]:
    ins = instructions()
    last_from = max(i for i, (w, _) in enumerate(ins) if w == "FROM")
    return ins[last_from:]


def test_multi_stage_non_root_image() -> None:
    ins = instructions()
    froms = [a for w, a in ins if w == "FROM"]
    assert len(froms) >= 2, "expected a build stage and a runtime stage"
    final = _final_stage()
    users = [a for w, a in final if w == "USER"]
    assert users, "the runtime stage must switch to a non-root USER"
    uid = users[-1].split(":")[0]
    assert uid not in ("0", "root")
    copies = [a for w, a in final if w == "COPY"]
    assert copies and all(a.startswith("--from=") for a in copies), "the runtime stage copies only build output"


def test_copied_sources_exist_and_are_the_packages() -> None:
    packages = set(_pyproject()["tool"]["setuptools"]["packages"]["find"]["include"])
    copied = set()
    for word, args in instructions():
        if word != "COPY" or args.startswith("--from="):
            continue
        *srcs, _dest = shlex.split(args)
        for src in srcs:
            assert (ROOT / src).exists(), f"COPY {src}: not in the build context (repository root)"
            copied.add(src.rstrip("/"))
    assert "pyproject.toml" in copied
    for pattern in packages:
        assert pattern.rstrip("*") in copied, f"package {pattern} is not copied into the build"


def test_pip_install_uses_real_extras() -> None:
    extras = set(_pyproject()["project"].get("optional-dependencies", {}))
    runs = " ".join(a for w, a in instructions() if w == "RUN")
    used = re.findall(r"\.\[([\w,-]+)\]", runs)
    assert used, "the image should pip install the project"
    for group in used:
        for extra in group.split(","):
            assert extra in extras, f"extra {extra!r} is not in pyproject.toml"
    assert "postgres" in ",".join(used), "the image needs psycopg for the PostgreSQL state store"


def test_entrypoint_and_cmd_are_real_commands() -> None:
    from retry_bot.cli import build_parser

    final = dict((w, a) for w, a in _final_stage())
    entry = json.loads(final["ENTRYPOINT"])
    cmd = json.loads(final["CMD"])
    scripts = _pyproject()["project"]["scripts"]
    assert entry[0] in scripts and scripts[entry[0]] == "retry_bot.cli:main"
    args = build_parser().parse_args(entry[1:] + cmd)
    assert args.command == "run" and callable(args.func)
    assert Path(args.config).name == "bot.toml"
    # Commands run at build time exist too.
    runs = " ".join(a for w, a in instructions() if w == "RUN")
    for name in re.findall(r"/bin/([\w-]+)(?= )", runs):
        if name in ("pip", "python"):
            continue
        assert name in scripts, f"RUN uses {name}, not a console script of the project"


def test_exposed_port_is_the_bot_http_port() -> None:
    from retry_bot.live.config import load_config

    exposed = _exposed()
    cfg = load_config(CONFIG / "bot.toml", env={"RIGHTSIZER_SIGNING_KEY": "k"})
    assert int(cfg.listen.rpartition(":")[2]) in exposed


def _exposed() -> set[int]:
    return {int(p.split("/")[0]) for w, a in instructions() if w == "EXPOSE" for p in a.split()}


def test_image_exposes_the_ports_the_kubernetes_containers_listen_on() -> None:
    import yaml

    from retry_bot.cli import build_parser

    for path in sorted((PACKAGING / "kubernetes").glob("deployment*.yaml")):
        dep = yaml.safe_load(path.read_text(encoding="utf-8"))
        for c in dep["spec"]["template"]["spec"]["containers"]:
            for p in c.get("ports", []):
                assert p["containerPort"] in _exposed(), f"{path.name}: port {p['containerPort']} not EXPOSEd"
            args = build_parser().parse_args(c["args"])
            if getattr(args, "listen", None):
                assert int(args.listen.rpartition(":")[2]) in _exposed(), path.name


def _healthcheck_argv(port: int) -> list[str]:
    hc = dict(_final_stage())["HEALTHCHECK"]
    m = re.search(r"\bCMD\s+(\[.*\])\s*$", hc)
    assert m, hc
    argv = json.loads(m.group(1))
    assert argv[0] == "python"
    code = argv[-1]
    m = re.search(r"http://127\.0\.0\.1:(\d+)/healthz", code)
    assert m, code
    assert int(m.group(1)) in _exposed(), "the health check asks a port the image does not expose"
    return [sys.executable] + argv[1:-1] + [code.replace(f"127.0.0.1:{m.group(1)}", f"127.0.0.1:{port}")]


@pytest.fixture()
def healthz() -> Iterator[dict]:
    state = {"code": 200}

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            code = state["code"] if self.path == "/healthz" else 404
            self.send_response(code)
            self.send_header("Content-Length", "3")
            self.end_headers()
            self.wfile.write(b"ok\n")

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    state["port"] = srv.server_address[1]
    try:
        yield state
    finally:
        srv.shutdown()
        srv.server_close()


def test_healthcheck_passes_on_200_and_fails_on_503(healthz: dict) -> None:
    argv = _healthcheck_argv(healthz["port"])
    assert subprocess.run(argv, capture_output=True, timeout=30).returncode == 0
    healthz["code"] = 503
    assert subprocess.run(argv, capture_output=True, timeout=30).returncode != 0


@pytest.mark.skipif(not (shutil.which("podman") or shutil.which("docker")), reason="no podman or docker client")
def test_image_builds_when_a_container_engine_is_available(tmp_path: Path) -> None:
    engine = shutil.which("podman") or shutil.which("docker")
    info = subprocess.run([engine, "info"], capture_output=True, timeout=30)
    if info.returncode != 0:
        pytest.skip(f"{Path(engine).name} is installed but has no running engine here")
    proc = subprocess.run([engine, "build", "-f", str(CONTAINERFILE), "-t", "gitlab-rightsizer:test", str(ROOT)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
