"""Fault injection for the stand-in's HTTP layer: 5xx, 429, slow answers and dropped connections.

A :class:`Fault` matches requests by method and a regular expression searched in
the path (``/api/v4/projects/1/jobs/1000/play``, ``/api/graphql``).  Whether a
matching request is hit is decided by, in order: ``skip`` (let the first N
matching requests through), ``plan`` (a scripted sequence of booleans, one per
matching request after ``skip``; requests past its end are not hit), else
``probability`` (drawn from the injector's seeded RNG, so runs are
reproducible).  ``times`` bounds how often the fault fires in total.

``phase="after"`` applies the fault **after** the request changed state, e.g. the
retry was done but the answer is lost (``drop``), replaced by a 502 (``status``)
or delayed beyond the client's timeout (``slow``): the client cannot tell
whether GitLab acted, which is what the bot's exactly-once logic must survive.
``phase="before"`` faults do not touch state, except ``slow``, which delays and
then serves the request normally (a real server keeps working after the client
gave up).
"""

from __future__ import annotations

import math
import random
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Literal, Sequence

__all__ = ["Fault", "FaultInjector", "FaultKind", "FaultPhase", "RateLimit"]

FaultKind = Literal["status", "rate_limit", "slow", "drop"]
FaultPhase = Literal["before", "after"]


@dataclass
class Fault:
    """One fault rule.  Mutable counters (``seen``, ``fired``) are kept by the injector."""

    kind: FaultKind
    path: str = ".*"
    method: str | None = None
    phase: FaultPhase = "before"
    probability: float = 1.0
    plan: Sequence[bool] | None = None
    skip: int = 0
    times: int | None = None
    status: int = 503
    retry_after: int | None = 1
    rate_limit_reset: int | None = None
    delay: float = 5.0
    #: ``RateLimit-Limit`` of a 429 (G ``lib/gitlab/rack_attack.rb``: the throttle's limit per period).
    limit: int = 600
    seen: int = field(default=0, init=False)
    fired: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.kind not in ("status", "rate_limit", "slow", "drop"):
            raise ValueError(f"unknown fault kind {self.kind!r}")
        if self.phase not in ("before", "after"):
            raise ValueError(f"unknown fault phase {self.phase!r}")
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError("probability must be within 0..1")
        if self.kind == "status" and not 400 <= self.status <= 599:
            raise ValueError("a status fault needs an HTTP error status (400-599)")
        self._regex = re.compile(self.path)

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method.upper() == method.upper()) and bool(self._regex.search(path))

    @property
    def label(self) -> str:
        what = {"status": str(self.status), "rate_limit": "429", "slow": f"slow{self.delay:g}s", "drop": "drop"}[self.kind]
        return f"{what}@{self.phase}"


@dataclass
class RateLimit:
    """A real limit, like GitLab's ``project_jobs_api_rate_limit`` (600/min): a sliding window of
    ``period`` seconds over matching requests; beyond ``limit`` the answer is 429 with a
    ``Retry-After`` telling when the oldest request leaves the window."""

    limit: int
    path: str = ".*"
    method: str | None = None
    period: float = 60.0
    limited: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.limit < 1 or self.period <= 0:
            raise ValueError("a rate limit needs limit >= 1 and period > 0")
        self._regex = re.compile(self.path)
        self._window: deque[float] = deque()

    def check(self, method: str, path: str, now: float) -> int | None:
        """Seconds to wait if this request is over the limit, else ``None`` (and count it)."""
        if (self.method is not None and self.method.upper() != method.upper()) or not self._regex.search(path):
            return None
        while self._window and self._window[0] <= now - self.period:
            self._window.popleft()
        if len(self._window) >= self.limit:
            self.limited += 1
            return max(1, math.ceil(self._window[0] + self.period - now))
        self._window.append(now)
        return None


class FaultInjector:
    """Holds the active faults; :meth:`decide` is called once per request, thread-safely."""

    def __init__(self, seed: int | None = 0) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._limits: list[RateLimit] = []
        self._rng = random.Random(seed)

    def reseed(self, seed: int | None) -> None:
        with self._lock:
            self._rng = random.Random(seed)

    def add(self, fault: Fault | None = None, /, **kwargs: object) -> Fault:
        """Add a fault (``add(Fault(...))`` or ``add(kind="drop", path=r"/retry$", ...)``); returns it."""
        if fault is None:
            fault = Fault(**kwargs)  # type: ignore[arg-type]
        with self._lock:
            self._faults.append(fault)
        return fault

    def remove(self, fault: Fault) -> None:
        with self._lock:
            self._faults = [f for f in self._faults if f is not fault]

    def add_rate_limit(self, limit: int, path: str = ".*", *, method: str | None = None,
                       period: float = 60.0) -> RateLimit:
        """Enforce ``limit`` requests per ``period`` seconds on matching requests (answers 429)."""
        rate = RateLimit(limit, path, method, period)
        with self._lock:
            self._limits.append(rate)
        return rate

    def clear(self) -> None:
        """Remove all faults and rate limits."""
        with self._lock:
            self._faults.clear()
            self._limits.clear()

    @property
    def faults(self) -> list[Fault]:
        with self._lock:
            return list(self._faults)

    def decide(self, method: str, path: str) -> Fault | None:
        """The first fault that fires for this request (a rate limit first), or ``None``."""
        with self._lock:
            now = time.monotonic()
            for rate in self._limits:
                wait = rate.check(method, path, now)
                if wait is not None:
                    return Fault(kind="rate_limit", path=rate.path, retry_after=wait, limit=rate.limit)
            for fault in self._faults:
                if not fault.matches(method, path):
                    continue
                if fault.times is not None and fault.fired >= fault.times:
                    continue
                index = fault.seen
                fault.seen += 1
                if index < fault.skip:
                    continue
                if fault.plan is not None:
                    pos = index - fault.skip
                    hit = pos < len(fault.plan) and bool(fault.plan[pos])
                else:
                    hit = fault.probability >= 1.0 or self._rng.random() < fault.probability
                if hit:
                    fault.fired += 1
                    return fault
            return None
