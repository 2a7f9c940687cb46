"""A light background sampler: mean memory, mean and maximum CPU cores.

The kernel's own counters (``memory.peak``, ``oom_kill``, CPU totals) are the
truth; sampling only adds what the kernel does not keep: time-weighted means and
the busiest interval's core count.  One sample reads two small files, so even at
the default 0.5 s interval the cost is far below 1 % of a core.

Only samples taken while the measured process is alive count: a reading after it
exited (memory back to ~0, no CPU) would drag the means down, so the sampler asks
``alive()`` after each reading and drops the reading when the process is gone.  A
mean needs at least two in-run readings; with fewer (a run shorter than one
interval) the means are ``None`` -- unknown, never a misleading figure.

The clock is injectable (``clock``) so the arithmetic is testable without sleeping.
"""

from __future__ import annotations

import threading
import time

from runner_wrapper.lean import Record

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing stays out of the per-stage start-up path
    from typing import Callable

    from runner_wrapper.cgroup.base import Sample

__all__ = ["Sampler", "SamplerResult", "Accumulator"]


class SamplerResult(Record):
    """What sampling adds to the kernel's counters (``None`` = unknown: too few in-run samples)."""

    __slots__ = ("samples", "memory_mean_bytes", "memory_max_bytes", "cpu_mean_cores", "cpu_max_cores")
    _fields = __slots__
    _field_defaults: dict[str, object] = {}
    samples: int
    memory_mean_bytes: int | None
    memory_max_bytes: int | None
    cpu_mean_cores: float | None
    cpu_max_cores: float | None


class Accumulator:
    """Pure arithmetic over ``(t, Sample)`` points: time-weighted means and max cores."""

    def __init__(self) -> None:
        self.n = 0
        self._t0: float | None = None
        self._last_t: float | None = None
        self._last_mem: int | None = None
        self._last_cpu: float | None = None
        self._first_cpu: float | None = None
        self._mem_area = 0.0
        self._mem_time = 0.0
        self.mem_max: int | None = None
        self.cores_max: float | None = None

    def add(self, t: float, s: Sample) -> None:
        self.n += 1
        if self._t0 is None:
            self._t0 = t
            self._first_cpu = s.cpu_seconds
        if self._last_t is not None:
            dt = t - self._last_t
            if dt > 0:
                if s.memory_bytes is not None and self._last_mem is not None:
                    self._mem_area += (s.memory_bytes + self._last_mem) / 2 * dt
                    self._mem_time += dt
                if s.cpu_seconds is not None and self._last_cpu is not None and dt >= 0.05:
                    cores = max(0.0, (s.cpu_seconds - self._last_cpu) / dt)
                    self.cores_max = cores if self.cores_max is None else max(self.cores_max, cores)
        if s.memory_bytes is not None:
            self.mem_max = s.memory_bytes if self.mem_max is None else max(self.mem_max, s.memory_bytes)
        self._last_t, self._last_mem = t, s.memory_bytes if s.memory_bytes is not None else self._last_mem
        if s.cpu_seconds is not None:
            self._last_cpu = s.cpu_seconds

    def result(self) -> SamplerResult:
        # Two readings at least (one interval): a single reading is no mean.
        mean_mem = int(self._mem_area / self._mem_time) if self._mem_time > 0 else None
        mean_cores = None
        if self._t0 is not None and self._last_t is not None and self._last_t > self._t0 \
                and self._first_cpu is not None and self._last_cpu is not None:
            mean_cores = max(0.0, (self._last_cpu - self._first_cpu) / (self._last_t - self._t0))
        return SamplerResult(samples=self.n, memory_mean_bytes=mean_mem, memory_max_bytes=self.mem_max,
                             cpu_mean_cores=mean_cores, cpu_max_cores=self.cores_max)


class Sampler:
    """Calls ``read()`` every ``interval`` seconds on a daemon thread until :meth:`stop`.

    ``alive()``, when given, is asked after each reading: a reading finished after
    the measured process exited is dropped (``dropped`` counts them).
    """

    def __init__(self, read: Callable[[], Sample], interval: float,
                 clock: Callable[[], float] = time.monotonic, alive: Callable[[], bool] | None = None) -> None:
        self._read = read
        self._alive = alive
        self.dropped = 0
        self.interval = interval
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.acc = Accumulator()
        self.errors = 0

    def _take(self) -> None:
        try:
            s = self._read()
        except Exception:  # a vanished file between stages must not kill the thread
            self.errors += 1
            return
        t = self._clock()
        if self._alive is not None and not self._alive():
            self.dropped += 1  # the process had exited: this reading is not of the run
            return
        self.acc.add(t, s)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._take()

    def start(self) -> "Sampler":
        """Take a first reading at once (the start of the run), then one per interval."""
        self._take()
        self._thread = threading.Thread(target=self._loop, name="rightsizer-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> SamplerResult:
        """Stop the thread and return the figures (no reading here: the run is over)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        return self.acc.result()
