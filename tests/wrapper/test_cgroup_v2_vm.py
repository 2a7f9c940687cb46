"""The real cgroup v2 lane: Debian's stock kernel in a throw-away VM runs tests/wrapper/test_cgroup_v2_real.py.

One VM boot per session (tests/vm/cgroup2-lane.sh, about 6 minutes without KVM); each inner test is
reported here as its own test, with the inner outcome (passed, failed with the inner message, skipped
or xfailed with the inner reason).  Skips with the lane's reason where qemu, vng, busybox or the kernel
package cannot be had.  It runs with ``RIGHTSIZER_VM_LANE=1`` (``.ci/run`` sets it; ``CI=true`` implies
it) and is skipped otherwise, so a developer's ``pytest tests/wrapper`` does not boot a VM unasked.
The figures the kernel measured are printed by ``test_lane_ran_on_a_real_cgroup_v2_kernel`` (pytest -rA shows them)
and kept in ``$RIGHTSIZER_VM_OUT`` when that is set.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # end to end: outside the fast lane (pytest -m "not slow")

REPO = Path(__file__).resolve().parents[2]
LANE = REPO / "tests" / "vm" / "cgroup2-lane.sh"
INNER = Path(__file__).with_name("test_cgroup_v2_real.py")


def inner_tests() -> list[str]:
    """The inner test names, read from the file itself (so a new inner test is reported without edits here)."""
    tree = ast.parse(INNER.read_text())
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]


class Lane:
    def __init__(self, out: Path, rc: int, stderr: str) -> None:
        self.out, self.rc, self.stderr = out, rc, stderr
        self.cases: dict[str, ET.Element] = {}
        junit = out / "junit.xml"
        if junit.exists():
            for tc in ET.parse(junit).getroot().iter("testcase"):
                self.cases[tc.get("name", "")] = tc

    def figures(self) -> list[dict]:
        p = self.out / "figures.jsonl"
        return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []


@pytest.fixture(scope="session")
def lane(tmp_path_factory) -> Lane:
    switch = os.environ.get("RIGHTSIZER_VM_LANE", "1" if os.environ.get("CI") else "0")
    if switch != "1":
        pytest.skip("the cgroup v2 VM lane boots a VM for about 6 minutes, so it runs only with "
                    "RIGHTSIZER_VM_LANE=1 (.ci/run sets it; CI=true implies it)")
    if os.geteuid() != 0:
        pytest.skip("the cgroup v2 VM lane needs root (to fetch and index the kernel package)")
    out = Path(os.environ.get("RIGHTSIZER_VM_OUT") or tmp_path_factory.mktemp("cgroup2-lane"))
    env = {**os.environ, "RIGHTSIZER_VM_PYTHON": sys.executable}
    p = subprocess.run(["bash", str(LANE), str(out)], env=env, capture_output=True, text=True, timeout=1500)
    if p.returncode == 77:
        pytest.skip(f"cgroup v2 VM lane cannot run here: {(out / 'skip-reason').read_text().strip()}")
    lane = Lane(out, p.returncode, p.stderr)
    if not lane.cases:
        pytest.fail(f"the cgroup v2 VM lane produced no results (exit {p.returncode}):\n{p.stderr[-3000:]}")
    return lane


@pytest.mark.cgroup
@pytest.mark.parametrize("name", inner_tests())
def test_in_the_vm(lane: Lane, name: str) -> None:
    tc = lane.cases.get(name)
    if tc is None:
        pytest.fail(f"{name} did not run in the VM (lane exit {lane.rc}); see {lane.out}/pytest.log")
    for child in tc:
        msg = (child.get("message") or "") + "\n" + (child.text or "")[-3000:]
        if child.tag in ("failure", "error"):
            pytest.fail(f"in the VM ({(lane.out / 'guest-kernel').read_text().split()[2]}): {msg}", pytrace=False)
        if child.tag == "skipped":
            if child.get("type") == "pytest.xfail":
                pytest.xfail(f"in the VM: {child.get('message')}")
            pytest.skip(f"in the VM: {child.get('message')}")


@pytest.mark.cgroup
def test_lane_ran_on_a_real_cgroup_v2_kernel(lane: Lane) -> None:
    """The guest really was a cgroup v2 kernel offering memory and cpu, and the figures were recorded."""
    controllers = (lane.out / "guest-controllers").read_text().split()
    assert {"memory", "cpu"} <= set(controllers), controllers
    kernel = (lane.out / "guest-kernel").read_text().split()[2]
    figures = lane.figures()
    seconds = (lane.out / "lane-seconds").read_text().strip()
    print(f"cgroup v2 lane: guest kernel {kernel}, controllers {' '.join(controllers)}, {seconds} s")
    for f in figures:
        print("  " + json.dumps(f))
    assert figures, "no figures recorded in the VM"


def test_lane_says_why_it_cannot_run(tmp_path) -> None:
    """Where a tool is missing the lane exits 77 (skip) with the reason, before any download or boot."""
    env = {**os.environ, "RIGHTSIZER_VM_PYTHON": str(tmp_path / "no-python")}
    p = subprocess.run(["bash", str(LANE), str(tmp_path / "out")], env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 77, p.stderr
    reason = (tmp_path / "out" / "skip-reason").read_text()
    assert reason.startswith(f"no Python at {tmp_path / 'no-python'}"), reason
    assert "cgroup2-lane: SKIP: no Python at" in p.stderr
