"""Pace requests to GitLab: a token bucket under a configured budget and GitLab's ``RateLimit-*`` headers.

GitLab throttles API requests per user (the bot's token is often shared with
other tools) and answers ``429`` beyond the limit, sometimes with
``Retry-After`` and ``RateLimit-Limit``/``RateLimit-Remaining``/``RateLimit-Reset``
(Unix time), sometimes without (gitlab-mechanics §5; G ``lib/gitlab/rack_attack.rb``
``throttled_response_headers``, ``doc/user/gitlab_com/index.md`` rate limits).
:class:`RequestPacer` keeps the bot under three bounds at once:

1. **the configured budget**: at most ``per_minute`` requests in *any* window of
   ``period`` seconds.  A bucket of ``burst`` tokens refilled at
   ``(per_minute - burst) / period`` per second guarantees it (the worst window
   sees the full bucket plus one period of refill), while letting a short burst
   go out at once;
2. **what GitLab said is left**: after an answer with ``RateLimit-Remaining`` and
   ``RateLimit-Reset``, at most ``remaining`` more requests before ``reset``
   (a lower ``RateLimit-Limit`` also lowers the refill rate);
3. **a 429 blocks only its endpoint**: the ``METHOD /endpoint`` that was refused
   waits for its ``Retry-After`` (else ``RateLimit-Reset``); other endpoints go
   on (GitLab has per-endpoint limits, e.g. the 600/min jobs list, beside the
   global one; a global 429 shows on each endpoint as it is tried).

Pure bookkeeping over an injectable monotonic clock: :meth:`reserve` says how
long a request must wait (0: it may go now, and its token is taken); the caller
sleeps.  Thread-safe.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Mapping

__all__ = ["RequestPacer"]


class RequestPacer:
    """Token bucket + GitLab's rate-limit headers + per-endpoint 429 blocks.

    Args:
        per_minute: the configured budget (requests per ``period``); ``None`` or 0:
            no budget of our own (GitLab's headers and 429s still pace).
        burst: bucket size (default: a twentieth of the budget, at least 1).
        period: the budget's window in seconds (60; tests shorten it).
        clock: monotonic seconds; ``wall``: Unix seconds (to read ``RateLimit-Reset``).
        on_wait: called with every wait (metrics).
    """

    def __init__(self, per_minute: float | None = None, *, burst: int | None = None, period: float = 60.0,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 on_wait: Callable[[float], None] | None = None) -> None:
        if per_minute is not None and per_minute < 0:
            raise ValueError("per_minute must be >= 0")
        if period <= 0:
            raise ValueError("period must be > 0")
        self.budget = float(per_minute) if per_minute else None
        self.period = float(period)
        self._burst_cfg = burst
        self._clock = clock
        self._wall = wall
        self.on_wait = on_wait
        self._lock = threading.Lock()
        self._header_limit: float | None = None
        self._tokens = float(self.burst)
        self._stamp = clock()  # (no skew yet)
        #: GitLab's own count: requests left until ``_server_reset`` (monotonic), from the last headers.
        self._server_left: float | None = None
        self._server_reset = 0.0
        self._blocked: dict[str, float] = {}
        #: Sleeps that did not move ``clock`` (an injected sleep in tests) still count as time passed.
        self._skew = 0.0
        #: Seconds callers were told to wait (for metrics and benchmarks).
        self.waited_seconds = 0.0

    def _now(self) -> float:
        return self._clock() + self._skew

    def slept(self, seconds: float, moved: float) -> None:
        """Note that a caller slept ``seconds`` while ``clock`` moved ``moved``."""
        if seconds > moved:
            with self._lock:
                self._skew += seconds - moved

    # ------------------------------------------------------------------ bookkeeping

    def _effective_budget(self) -> float | None:
        budget = self.budget
        if self._header_limit is not None:
            budget = min(budget, self._header_limit) if budget is not None else self._header_limit
        return budget

    @property
    def burst(self) -> int:
        """Bucket size: as configured, else a twentieth of the budget in force (at least 1, below the budget)."""
        budget = self._effective_budget()
        b = self._burst_cfg if self._burst_cfg is not None else int((budget or 20) // 20)
        if budget is not None:
            b = min(b, int(budget) - 1)
        return max(1, int(b))

    def _rate(self) -> float | None:
        """Tokens per second, or ``None`` when nothing bounds the rate."""
        budget = self._effective_budget()
        if budget is None:
            return None
        return max(budget - self.burst, 1.0) / self.period

    def _refill(self, now: float) -> None:
        rate = self._rate()
        if rate is None:
            self._tokens = float(self.burst)
        else:
            self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * rate)
        self._stamp = now

    def reserve(self, key: str = "") -> float:
        """Take a token for a request to ``key`` (``"GET /projects/:id/jobs"``) and return 0, or
        return the seconds to wait before asking again (nothing taken)."""
        with self._lock:
            now = self._now()
            self._refill(now)
            waits = [self._blocked.get(key, 0.0) - now]
            if self._server_left is not None:
                if now >= self._server_reset:
                    self._server_left = None
                elif self._server_left < 1:
                    waits.append(self._server_reset - now)
            rate = self._rate()
            if rate is not None and self._tokens < 1.0:
                waits.append((1.0 - self._tokens) / rate)
            wait = max(waits)
            if wait > 0:
                return wait
            if rate is not None:
                self._tokens -= 1.0
            if self._server_left is not None:
                self._server_left -= 1
            return 0.0

    def blocked_for(self, key: str) -> float:
        """Seconds ``key`` is still held by a 429 (0 when free)."""
        with self._lock:
            return max(0.0, self._blocked.get(key, 0.0) - self._now())

    def acquire(self, key: str = "", *, sleep: Callable[[float], None] = time.sleep,
                max_wait: float | None = None) -> float:
        """Wait until a request to ``key`` may go; returns the seconds waited.

        With ``max_wait``, gives up (returns ``-wait``, nothing taken) when the next
        wait alone would exceed it: a write prefers to be deferred over stalling the bot.
        """
        waited = 0.0
        while True:
            wait = self.reserve(key)
            if wait <= 0:
                return waited
            if max_wait is not None and wait > max_wait:
                return -wait
            t0 = self._clock()
            sleep(wait)
            self.slept(wait, self._clock() - t0)
            waited += wait
            with self._lock:
                self.waited_seconds += wait
            if self.on_wait is not None:
                self.on_wait(wait)

    def observe(self, headers: Mapping[str, str] | None, *, key: str = "", status: int | None = None,
                hint: float | None = None) -> None:
        """Feed one answer: ``RateLimit-*`` headers, and for a 429 the wait ``hint`` for ``key``."""
        h = {k.lower(): v for k, v in (headers or {}).items()}
        with self._lock:
            now = self._now()
            limit = _number(h.get("ratelimit-limit"))
            if limit is not None and limit >= 1:
                self._refill(now)
                unbounded = self._rate() is None
                self._header_limit = limit
                if unbounded:
                    self._tokens = float(self.burst)  # from "no bound" to a bound: start with a full bucket
            remaining = _number(h.get("ratelimit-remaining"))
            reset = _number(h.get("ratelimit-reset"))
            if remaining is not None and reset is not None:
                until = now + max(0.0, reset - self._wall())
                if until > now:
                    self._server_left = max(0.0, remaining)
                    self._server_reset = until
            if status == 429:
                wait = hint if hint is not None else (
                    max(0.0, reset - self._wall()) if reset is not None else None)
                if wait is not None and wait > 0:
                    self._blocked[key] = max(self._blocked.get(key, 0.0), now + wait)
            if len(self._blocked) > 256:  # bounded: forget expired blocks
                self._blocked = {k: v for k, v in self._blocked.items() if v > now}


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(str(value).strip())
    except ValueError:
        return None
