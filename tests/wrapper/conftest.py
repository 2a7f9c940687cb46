"""Fixtures for the runner wrapper tests: a private cgroup parent per test, configs, payloads."""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import pytest

V1_ROOT = "/sys/fs/cgroup"
_counter = itertools.count()


def v1_usable() -> str | None:
    """Why real cgroup v1 tests cannot run here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root to create cgroups"
    mem = os.path.join(V1_ROOT, "memory")
    if not os.path.isfile(os.path.join(mem, "memory.limit_in_bytes")):
        return "no cgroup v1 memory hierarchy at /sys/fs/cgroup/memory"
    if not os.access(mem, os.W_OK):
        return "cgroup v1 memory hierarchy not writable"
    return None


def _rm_parent(name: str) -> None:
    from runner_wrapper.cgroup.base import kill_pids_until_empty, tree_pids

    for ctrl in ("memory", "cpu", "cpuacct"):
        top = os.path.join(V1_ROOT, ctrl, name)
        if not os.path.isdir(top):
            continue

        kill_pids_until_empty(lambda top=top: tree_pids(top), 5)
        for root, dirs, _files in sorted(os.walk(top, topdown=False), key=lambda t: -len(t[0])):
            try:
                os.rmdir(root)
            except OSError:
                pass


@pytest.fixture
def cg_parent():
    """A fresh parent cgroup name (relative), removed with everything below it afterwards."""
    why = v1_usable()
    if why:
        pytest.skip(why)
    name = f"rightsizer-test-{os.getpid()}-{next(_counter)}"
    yield name
    _rm_parent(name)


def write_config(tmp_path: Path, parent: str = "rightsizer-test", backend: str = "auto", extra: str = "") -> Path:
    state = tmp_path / "state"
    p = tmp_path / "wrapper.toml"
    p.write_text(f"""
[cgroup]
backend = "{backend}"
parent = "{parent}"
stale_after_seconds = 3600

[sampler]
interval = 0.05

[executor]
state_dir = "{state}"
builds_dir = "{tmp_path / 'builds'}"
cache_dir = "{tmp_path / 'cache'}"

[sinks]
spool = "{tmp_path / 'spool' / 'usage.jsonl'}"
textfile = "{tmp_path / 'textfile' / 'rightsizer.prom'}"
{extra}
""")
    return p


@pytest.fixture
def driver_cmd_for():
    def make(config: Path) -> list[str]:
        return [sys.executable, "-m", "runner_wrapper", "--config", str(config), "executor"]

    return make


def make_payload(job_id: int = 4242, script: list[str] | None = None, variables: dict[str, str] | None = None,
                 extra_steps: list[dict] | None = None, after: list[str] | None = None, name: str = "build") -> dict:
    vars_ = [{"key": "CI_JOB_ID", "value": str(job_id), "public": True, "masked": False}]
    for k, v in (variables or {}).items():
        vars_.append({"key": k, "value": v, "public": True, "masked": False})
    steps = [{"name": "script", "script": script or ["echo hello"], "when": "on_success", "allow_failure": False}]
    steps += extra_steps or []
    if after:
        steps.append({"name": "after_script", "script": after, "when": "always"})
    return {
        "id": job_id, "token": "job-token-xyz",
        "job_info": {"name": name, "stage": "build", "project_id": 7, "project_name": "p",
                     "project_full_path": "group/p", "pipeline_id": 99},
        "git_info": {"repo_url": "https://example.invalid/group/p.git", "ref": "main", "sha": "0" * 40,
                     "protected": True},
        "runner_info": {"timeout": 3600},
        "variables": vars_,
        "steps": steps,
    }
