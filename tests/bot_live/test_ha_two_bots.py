"""High availability: two real `retry-bot run` processes on one PostgreSQL state and the stand-in.

The leader is SIGKILLed in the middle of a GitLab write (GitLab acted, its answer is
held back); the other replica takes the lease over, observes GitLab, and finishes.
Every failed job gets exactly one action: one pipeline per resized job, one retry per
transient failure, nothing for the compile error.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from standin.gitlab import Fault
from retry_bot.state import open_store
from tests.bot_live.farm import (ENV, POLICY, ROOT, Farm, bot_config_text, compile_error, flaky_dns, needs_memory)

pytestmark = pytest.mark.slow  # end to end: outside the fast lane (pytest -m "not slow")


def _spawn(cfg, log):
    return subprocess.Popen([sys.executable, "-m", "retry_bot", "--log-format", "json", "run", "--config", str(cfg)],
                            env={**os.environ, **ENV, "PYTHONPATH": str(ROOT)}, stdout=log,
                            stderr=subprocess.STDOUT, cwd=str(ROOT))


def test_two_replicas_sigkill_of_the_leader_mid_write_gives_every_job_exactly_one_action(pg_server, tmp_path):
    farm = Farm({"oom1": needs_memory(300), "oom2": needs_memory(300), "dns1": flaky_dns(1),
                 "dns2": flaky_dns(1), "compile": compile_error})
    procs: dict[str, subprocess.Popen] = {}
    logs = {}
    url = pg_server.url(schema=pg_server.new_schema())
    try:
        mem = {"KUBERNETES_MEMORY_LIMIT": "128Mi"}
        farm.add_project("grp/ha", {
            "oom1": {"stage": "build", "tags": ["small"], "script": ["x"], "variables": mem},
            "oom2": {"stage": "build", "tags": ["small"], "script": ["x"], "variables": mem},
            "dns1": {"stage": "build", "tags": ["small"], "script": ["x"]},
            "dns2": {"stage": "build", "tags": ["small"], "script": ["x"]},
            "compile": {"stage": "build", "tags": ["small"], "script": ["x"]}})
        farm.standin.create_pipeline("grp/ha")
        assert farm.standin.wait_for(lambda: sum(j.status == "failed" for j in farm.standin.jobs("grp/ha")) == 5)
        failed = {j.name: j.id for j in farm.standin.jobs("grp/ha")}
        # The first pipeline creation: GitLab creates it, the answer is held for 30 s.
        farm.standin.faults.add(Fault("slow", method="POST", path=r"/pipeline$", phase="after", delay=30, times=1))
        pol = tmp_path / "policy.toml"
        pol.write_text(POLICY)
        for name in ("A", "B"):
            text = bot_config_text(farm.url, tmp_path / "unused.db", pol, ["grp/ha"], interval=0.2, timeout=5.0,
                                   extra=f'holder = "{name}"\n')
            text = text.replace(f'state_url = "sqlite:///{tmp_path / "unused.db"}"', f'state_url = "{url}"')
            text = text.replace("lease_seconds = 5", "lease_seconds = 2")
            (tmp_path / f"{name}.toml").write_text(text)
            logs[name] = open(tmp_path / f"{name}.log", "wb")
            procs[name] = _spawn(tmp_path / f"{name}.toml", logs[name])
        assert farm.standin.wait_for_request("POST", r"/pipeline$", timeout=30), \
            (tmp_path / "A.log").read_text()[-3000:]
        store = open_store(url)
        try:
            leader = store.leader()
            assert leader in ("A", "B"), leader
            assert store.open_intents(), "the leader must be mid-action"
        finally:
            store.close()
        procs[leader].send_signal(signal.SIGKILL)
        procs[leader].wait(10)
        survivor = "B" if leader == "A" else "A"

        def finished() -> bool:
            by_name = {n: [j for j in farm.standin.jobs("grp/ha") if j.name == n] for n in failed}
            if not all(any(j.status == "success" for j in by_name[n]) for n in ("oom1", "oom2", "dns1", "dns2")):
                return False
            st = open_store(url)
            try:
                return not st.open_intents() and all(st.get_job(i) is not None and st.get_job(i).decided
                                                     for i in failed.values())
            finally:
                st.close()
        deadline = time.monotonic() + 25
        while not finished() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert finished(), (tmp_path / f"{survivor}.log").read_text()[-4000:]
        time.sleep(0.8)                                   # a few more cycles: nothing more may happen
        procs[survivor].send_signal(signal.SIGTERM)
        assert procs[survivor].wait(15) == 0

        created = [p for p in farm.standin.pipelines("grp/ha") if p.source == "api"]
        per_origin = {}
        for p in created:
            fid = farm.standin.pipeline_variables(p.id).get("RETRY_BOT_FAILED_JOB_ID")
            per_origin[fid] = per_origin.get(fid, 0) + 1
        assert per_origin == {str(failed["oom1"]): 1, str(failed["oom2"]): 1}, per_origin
        retries = [j for j in farm.standin.jobs("grp/ha") if j.retry_of is not None]
        assert sorted(j.retry_of for j in retries) == sorted([failed["dns1"], failed["dns2"]])
        assert len([j for j in farm.standin.jobs("grp/ha") if j.name == "compile"]) == 1
        plays = farm.standin.calls_matching("POST", r"/play$")
        assert len([c for c in plays if c.status == 200]) == 2
        st = open_store(url)
        try:
            for name in ("oom1", "oom2", "dns1", "dns2", "compile"):
                decided = [e for e in st.history(failed[name]) if e["kind"] == "decided"
                           and e["job_id"] == failed[name]]
                assert len(decided) == 1, (name, decided)
        finally:
            st.close()
        assert b"gitlab_token_rejected" not in (tmp_path / f"{survivor}.log").read_bytes()
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait(5)
        for f in logs.values():
            f.close()
        farm.close()
