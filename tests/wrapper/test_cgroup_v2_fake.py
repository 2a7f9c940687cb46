"""cgroup v2 backend on a fake cgroupfs that plays the kernel's rules (tests/wrapper/fake_cgroup_v2.py).

This host is hybrid: its cgroup2 mount offers no memory controller, so the real
kernel is exercised in a VM instead (tests/wrapper/test_cgroup_v2_vm.py runs
tests/wrapper/test_cgroup_v2_real.py under Debian's 6.1 kernel).  Here the fake
kernel refuses what the real one refuses (controller files only where the parent
enabled them, EBUSY for internal processes, no file creation, no memory.peak or
cgroup.kill at the root) and lets the test feed counter files to parse.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from runner_wrapper.cgroup.base import CgroupError
from runner_wrapper.cgroup.detect import probe_v2, select_backend
from runner_wrapper.cgroup.v2 import V2Backend
from runner_wrapper.config import CgroupSettings
from tests.wrapper.fake_cgroup_v2 import FakeCgroup2


@pytest.fixture
def kernel(tmp_path):
    """The kernel's side of a fresh cgroup2 mount (tests/wrapper/fake_cgroup_v2.py)."""
    return FakeCgroup2(tmp_path / "cgroup")


@pytest.fixture
def fakefs(kernel):
    return kernel.root


def backend(kernel, parent):
    return V2Backend(str(kernel.root), parent, rmdir=kernel.rmdir, mkdir=kernel.mkdir, write=kernel.write)


def test_create_apply_read_kill_remove(kernel):
    fakefs = kernel.root
    b = backend(kernel, "rightsizer")
    job = b.group("job-5")
    job.create()
    # Each level enabled its children's controllers before the child was made (cgroup-v2.rst).
    assert kernel.writes[:2] == [("cgroup.subtree_control", "+memory +cpu"),
                                 ("rightsizer/cgroup.subtree_control", "+memory +cpu")]
    assert (fakefs / "cgroup.subtree_control").read_text() == "cpu memory\n"
    job.make_parent_of_stages()
    assert (fakefs / "rightsizer" / "job-5" / "cgroup.subtree_control").read_text() == "cpu memory\n"
    assert job.apply_limits(128 * 2**20, 1.5) == ["memory.max=134217728", "memory.swap.max=0",
                                                  "cpu.max=150000 100000"]
    assert (fakefs / "rightsizer" / "job-5" / "memory.max").read_text() == "134217728\n"
    assert (fakefs / "rightsizer" / "job-5" / "cpu.max").read_text() == "150000 100000\n"

    stage = b.group("job-5/build_script-1")
    stage.create()
    d = fakefs / "rightsizer" / "job-5" / "build_script-1"
    assert stage.attach_files() == [str(d / "cgroup.procs")]
    kernel.set_counters(
        d, memory_peak="104857600\n", memory_current="4096\n",
        memory_events="low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n",
        cpu_stat="usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\nnr_periods 0\n",
        memory_pressure="some avg10=0.00 avg60=0.00 avg300=0.00 total=1234\n"
                        "full avg10=0.00 avg60=0.00 avg300=0.00 total=99\n")
    c = stage.read()
    assert (c.memory_peak_bytes, c.oom_kills, c.cpu_user_seconds, c.cpu_system_seconds, c.memory_failcnt,
            c.memory_pressure_usec, c.cpu_pressure_usec) == (104857600, 1, 2.0, 0.5, 12, 1234, 0)
    s = stage.sample()
    assert (s.memory_bytes, s.cpu_seconds) == (4096, 2.5)

    # kill_all writes cgroup.kill; the fake kernel SIGKILLs what cgroup.procs lists, as the real one does.
    sleeper = subprocess.Popen(["sleep", "60"])
    stage.add_pid(sleeper.pid)
    with pytest.raises(CgroupError, match="Device or resource busy"):
        job.add_pid(sleeper.pid)  # no internal processes: the job cgroup enables controllers for its stages
    assert stage.kill_all(timeout=5) == 1
    assert ("rightsizer/job-5/build_script-1/cgroup.kill", "1") in kernel.writes
    assert sleeper.wait(timeout=5) == -9
    job.remove()
    assert not (fakefs / "rightsizer" / "job-5").exists()


def test_first_group_under_a_new_parent_is_born_with_memory_and_cpu_files(kernel):
    """The first build's peak was null: the parent's subtree_control was enabled only after its child existed."""
    g = backend(kernel, "gitlab-rightsizer/builds").group("measure-1")
    g.create()
    d = kernel.root / "gitlab-rightsizer" / "builds" / "measure-1"
    for name in ("memory.peak", "memory.current", "memory.max", "memory.events", "cpu.max"):
        assert (d / name).exists(), name
    assert g.read().memory_peak_bytes == 0  # a number, not None
    assert g.apply_limits(64 * 2**20, None)[0] == "memory.max=67108864"


def test_existing_parent_without_controllers_is_fixed_before_the_child(kernel):
    """A parent made earlier (an older wrapper, an admin's mkdir) gets +memory +cpu before the job's child."""
    kernel.write(str(kernel.root / "cgroup.subtree_control"), "+memory +cpu")
    kernel.mkdir(str(kernel.root / "rightsizer"))
    assert (kernel.root / "rightsizer" / "cgroup.subtree_control").read_text() == ""
    g = backend(kernel, "rightsizer").group("job-1")
    g.create()
    assert (kernel.root / "rightsizer" / "job-1" / "memory.peak").exists()


def test_limit_without_the_controller_names_the_cause(kernel):
    (kernel.root / "cgroup.controllers").write_text("cpu\n")  # memory not offered
    g = backend(kernel, "p").group("job-1")
    g.create()
    with pytest.raises(CgroupError, match=r"memory.max does not exist: the memory controller is not enabled"):
        g.apply_limits(2**20, None)


def test_parent_holding_processes_cannot_delegate(kernel):
    """A delegated parent that still holds the runner (no DelegateSubgroup=) answers EBUSY, with the file named."""
    kernel.write(str(kernel.root / "cgroup.subtree_control"), "+memory +cpu")
    svc = kernel.root / "runner.service"
    kernel.mkdir(str(svc))
    kernel.write(str(svc / "cgroup.procs"), str(os.getpid()))
    with pytest.raises(CgroupError, match=r"runner.service/cgroup.subtree_control: Device or resource busy"):
        backend(kernel, "runner.service").group("job-1").create()


def test_doctor_probes_a_child_not_the_root(kernel):
    """The root has no memory.peak or cgroup.kill; a child has both (gitlab-mechanics.md §11.5)."""
    assert not (kernel.root / "memory.peak").exists() and not (kernel.root / "cgroup.kill").exists()
    b = backend(kernel, "gitlab-rightsizer")
    d = b.describe()
    assert (d["memory_peak_file"], d["cgroup_kill"], d["psi"]) == ("memory.peak", True, True)
    assert d["probe"]["probe_cgroup"] == str(kernel.root / f"rightsizer-probe-{os.getpid()}")
    assert [p.name for p in kernel.root.iterdir() if p.is_dir()] == []  # probe removed, no parent created


def test_doctor_says_why_it_could_not_probe(kernel):
    def refuse(path):
        raise PermissionError(13, "Permission denied", path)

    b = V2Backend(str(kernel.root), "p", rmdir=kernel.rmdir, mkdir=refuse, write=kernel.write)
    d = b.describe()
    assert d["memory_peak_file"].startswith("unknown (no probe cgroup: cannot create cgroup ")
    assert d["memory_peak_file"].endswith(": Permission denied)")
    assert d["cgroup_kill"] is None


def test_missing_memory_peak_is_none_and_sampler_takes_over(kernel):
    b = backend(kernel, "p")
    g = b.group("job-1")
    g.create()
    os.unlink(kernel.root / "p" / "job-1" / "memory.peak")  # pre-5.19 kernel
    assert g.read().memory_peak_bytes is None  # the sampler's max is used instead


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
