"""A throwaway PostgreSQL cluster from Debian's server binaries, on 127.0.0.1 and a free port.

Root cannot run ``postgres``; as root the cluster belongs to the ``postgres``
system user (created by Debian's package) and commands run through ``runuser``.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid


def find_bindir() -> str | None:
    """Newest ``/usr/lib/postgresql/*/bin`` with ``initdb`` and ``pg_ctl``, else ``None``."""
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(d.split("/")[-2]) if
                  d.split("/")[-2].isdigit() else 0)
    for d in reversed(dirs):
        if os.access(os.path.join(d, "initdb"), os.X_OK) and os.access(os.path.join(d, "pg_ctl"), os.X_OK):
            return d
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    def __init__(self, bindir: str) -> None:
        self.bindir = bindir
        self.run_as: str | None = None
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError as exc:
                raise RuntimeError("running as root and there is no 'postgres' user to run the server") from exc
            self.run_as = "postgres"
        self.dir = tempfile.mkdtemp(prefix="retry-bot-pg-")
        if self.run_as:
            shutil.chown(self.dir, self.run_as, self.run_as)
        self.data = os.path.join(self.dir, "data")
        self.logfile = os.path.join(self.dir, "server.log")
        self.port = _free_port()

    def _cmd(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        cmd = list(args)
        if self.run_as:
            cmd = ["runuser", "-u", self.run_as, "--", *cmd]
        return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=timeout)

    def init(self) -> None:
        self._cmd(os.path.join(self.bindir, "initdb"), "-D", self.data, "-U", "postgres", "--auth=trust",
                  "-E", "UTF8", "--no-sync", "--locale=C")

    def start(self) -> None:
        opts = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c full_page_writes=off -c max_connections=60 "
                "-c shared_buffers=16MB")
        r = self._cmd(os.path.join(self.bindir, "pg_ctl"), "-D", self.data, "-o", opts, "-l", self.logfile,
                      "-w", "-t", "30", "start", check=False)
        if r.returncode != 0:
            log = open(self.logfile).read()[-2000:] if os.path.exists(self.logfile) else ""
            raise RuntimeError(f"pg_ctl start failed: {r.stdout}{r.stderr}\n{log}")

    def stop(self, mode: str = "fast") -> None:
        self._cmd(os.path.join(self.bindir, "pg_ctl"), "-D", self.data, "-m", mode, "-w", "stop", check=False)

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, dbname: str = "postgres", schema: str | None = None) -> str:
        base = f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"
        return base + (f"?options=-csearch_path%3D{schema}" if schema else "")

    def new_schema(self) -> str:
        """A fresh, empty schema; a store URL with it as search_path is an isolated database."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {name}")
        return name
