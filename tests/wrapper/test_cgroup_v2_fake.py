"""cgroup v2 backend on a directory laid out like the kernel's cgroupfs.

This host is hybrid: its cgroup2 mount (/sys/fs/cgroup/unified) offers only the
hugetlb controller, so memory and cpu cannot be used through v2 here and a real
v2 run is skipped (see ``test_real_v2_run``).  The fake tree lets the test play
the kernel: it checks what the backend writes (memory.max, cpu.max,
cgroup.subtree_control, cgroup.kill) and feeds it counter files to parse.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from runner_wrapper.cgroup.detect import probe_v2, select_backend
from runner_wrapper.cgroup.v2 import V2Backend, find_cgroup2_mount
from runner_wrapper.config import CgroupSettings


@pytest.fixture
def fakefs(tmp_path):
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids\n")
    (root / "cgroup.subtree_control").write_text("")
    (root / "cgroup.procs").write_text("")
    return root


def kernel_populates(d):
    """What the kernel would create in a new cgroup directory."""
    (d / "cgroup.controllers").write_text("cpu memory\n")
    (d / "cgroup.subtree_control").write_text("")
    (d / "cgroup.procs").write_text("")
    (d / "cgroup.kill").write_text("")


def test_create_apply_read_kill_remove(fakefs):
    b = V2Backend(str(fakefs), "rightsizer", rmdir=shutil.rmtree)
    job = b.group("job-5")
    job.create()
    assert (fakefs / "cgroup.subtree_control").read_text() == "+memory +cpu"
    kernel_populates(fakefs / "rightsizer")
    kernel_populates(fakefs / "rightsizer" / "job-5")
    job.make_parent_of_stages()
    assert (fakefs / "rightsizer" / "job-5" / "cgroup.subtree_control").read_text() == "+memory +cpu"
    assert job.apply_limits(128 * 2**20, 1.5) == ["memory.max=134217728", "cpu.max=150000 100000"]
    assert (fakefs / "rightsizer" / "job-5" / "memory.max").read_text() == "134217728"
    assert (fakefs / "rightsizer" / "job-5" / "cpu.max").read_text() == "150000 100000"

    stage = b.group("job-5/build_script-1")
    stage.create()
    d = fakefs / "rightsizer" / "job-5" / "build_script-1"
    kernel_populates(d)
    assert stage.attach_files() == [str(d / "cgroup.procs")]
    (d / "memory.peak").write_text("104857600\n")
    (d / "memory.current").write_text("4096\n")
    (d / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n")
    (d / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\nnr_periods 0\n")
    (d / "memory.pressure").write_text("some avg10=0.00 avg60=0.00 avg300=0.00 total=1234\n"
                                       "full avg10=0.00 avg60=0.00 avg300=0.00 total=99\n")
    c = stage.read()
    assert (c.memory_peak_bytes, c.oom_kills, c.cpu_user_seconds, c.cpu_system_seconds, c.memory_failcnt,
            c.memory_pressure_usec, c.cpu_pressure_usec) == (104857600, 1, 2.0, 0.5, 12, 1234, None)
    s = stage.sample()
    assert (s.memory_bytes, s.cpu_seconds) == (4096, 2.5)

    # kill_all: writes cgroup.kill, then SIGKILLs whatever is still listed (a fake fs kills nothing itself).
    sleeper = subprocess.Popen(["sleep", "60"])
    (d / "cgroup.procs").write_text(f"{sleeper.pid}\n")

    def gone_from_procs():
        sleeper.wait(timeout=5)
        (d / "cgroup.procs").write_text("")

    import threading

    threading.Thread(target=gone_from_procs).start()
    assert stage.kill_all(timeout=5) == 1
    assert (d / "cgroup.kill").read_text() == "1"
    assert sleeper.returncode == -9
    job.remove()
    assert not (fakefs / "rightsizer" / "job-5").exists()


def test_missing_memory_peak_is_none_and_sampler_takes_over(fakefs):
    b = V2Backend(str(fakefs), "p", rmdir=shutil.rmtree)
    g = b.group("job-1")
    g.create()
    (fakefs / "p" / "job-1" / "memory.events").write_text("oom_kill 0\n")
    assert g.read().memory_peak_bytes is None  # pre-5.19 kernel: the sampler's max is used instead


def test_detection_prefers_v2_when_memory_is_offered(fakefs, tmp_path):
    settings = CgroupSettings(v2_root=str(fakefs), parent="rightsizer", v1_root=str(tmp_path / "none"))
    ok, why = probe_v2(settings)
    assert ok, why
    assert select_backend(settings).backend.name == "cgroup-v2"
    (fakefs / "cgroup.controllers").write_text("hugetlb\n")
    sel = select_backend(settings)
    assert sel.backend.name == "psutil"
    assert "does not offer the memory controller" in sel.reasons[0]
    with pytest.raises(Exception, match="backend v2 forced"):
        select_backend(CgroupSettings(backend="v2", v2_root=str(fakefs), parent="x"))


def test_real_v2_run():
    mount = find_cgroup2_mount()
    if mount is None:
        pytest.skip("no cgroup2 mount on this host")
    try:
        controllers = open(os.path.join(mount, "cgroup.controllers")).read().split()
    except OSError:
        controllers = []
    if "memory" not in controllers or os.geteuid() != 0:
        pytest.skip(f"the cgroup2 mount {mount} offers only {controllers or 'no controllers'} (hybrid host: "
                    f"memory and cpu are bound to cgroup v1), so a real v2 run is impossible here; "
                    f"the v2 backend is tested on a fake cgroupfs instead")
    b = V2Backend(mount, f"rightsizer-test-{os.getpid()}")
    g = b.group("g")
    g.create()
    try:
        g.apply_limits(64 * 2**20, None)
        import sys

        from runner_wrapper.executor import run_in_group

        ex, c, _s, _l, _g = run_in_group([sys.executable, "-c", "b=bytearray(200*2**20)"], g, dict(os.environ), 0.1)
        assert c.oom_kills >= 1
    finally:
        g.kill_all()
        b.group("").remove()
