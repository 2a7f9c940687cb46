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
