"""Sampler arithmetic (pure, injected clock) and the thread's life cycle."""

import time

from runner_wrapper.cgroup.base import Sample
from runner_wrapper.sampler import Accumulator, Sampler


def test_time_weighted_means_and_max_cores():
    acc = Accumulator()
    # 1 s at 100 MB rising to 300 MB, then 1 s flat at 300 MB; CPU 0 -> 2 s -> 2.5 s.
    acc.add(0.0, Sample(100, 0.0))
    acc.add(1.0, Sample(300, 2.0))
    acc.add(2.0, Sample(300, 2.5))
    r = acc.result()
    assert r.memory_mean_bytes == 250  # (200*1 + 300*1) / 2
    assert r.memory_max_bytes == 300
    assert r.cpu_max_cores == 2.0
    assert r.cpu_mean_cores == 1.25
    assert r.samples == 3


def test_missing_readings_are_tolerated():
    acc = Accumulator()
    acc.add(0.0, Sample(None, None))
    acc.add(1.0, Sample(10, 1.0))
    r = acc.result()
    assert r.memory_max_bytes == 10 and r.cpu_max_cores is None


def test_thread_samples_and_survives_read_errors():
    calls = []

    def read():
        calls.append(1)
        if len(calls) == 2:
            raise FileNotFoundError("gone")
        return Sample(len(calls), float(len(calls)))

    s = Sampler(read, 0.01).start()
    time.sleep(0.1)
    r = s.stop()
    assert s.errors == 1 and r.samples >= 3 and r.memory_max_bytes == len(calls)


def test_a_single_reading_is_no_mean():
    acc = Accumulator()
    acc.add(0.0, Sample(100 * 2**20, 1.0))
    r = acc.result()
    assert r.samples == 1 and r.memory_max_bytes == 100 * 2**20
    assert r.memory_mean_bytes is None and r.cpu_mean_cores is None and r.cpu_max_cores is None


def test_readings_after_the_process_exited_are_dropped():
    """A reading finished after the measured process exited (memory ~0) must not count."""
    alive = [True]
    values = iter([100, 100, 0, 0, 0, 0, 0, 0, 0, 0])

    def read():
        v = next(values, 0)
        if v == 0:
            alive[0] = False  # the process has exited by the time memory reads 0
        return Sample(v, 0.0)

    clock = iter(float(i) for i in range(100))
    s = Sampler(read, 0.005, clock=lambda: next(clock), alive=lambda: alive[0]).start()
    time.sleep(0.1)
    r = s.stop()
    assert s.dropped >= 1 and r.samples == 2
    assert r.memory_mean_bytes == 100 and r.memory_max_bytes == 100


def test_stop_takes_no_reading_after_the_run():
    calls = []
    s = Sampler(lambda: calls.append(1) or Sample(5, 0.0), 10.0).start()
    r = s.stop()
    assert len(calls) == 1 and r.samples == 1 and r.memory_mean_bytes is None
