"""The storm brake: hold a category's re-runs while it fails at an abnormal rate.

When a runner fleet breaks, every job it takes fails with the same category
(``runner_system_failure``, ``image_pull``...).  Retrying each of them at once
multiplies the load on the broken fleet and spends every job's budget while it
is still broken (issue 15 measured 1,300 retries in a 10-minute outage of 100
jobs a minute, and half the jobs stayed failed after the fleet came back).

Per category of the policy's ``[storm] families`` (:class:`~retry_bot.policy.model.StormRule`):

``clear``
    failures are counted in a sliding ``window``; ``trip_failures`` of them within
    it trip the brake.
``braked``
    re-runs are *held*: the decision is recorded once (exactly-once is kept), the
    action request is kept in the state store, nothing is sent and no budget is
    spent (a lineage's budget counts the jobs the bot created).  ``probes`` re-runs
    are let through every ``probe_interval`` to test the fleet.  Each re-run job of
    the category the bot follows that ends in ``success`` counts towards
    ``release_successes``; reaching it releases the brake.
released
    back to ``clear``; the poller sends the held requests (``release_per_minute``
    of them a minute, through their ``not_before``).

Everything here is pure: the clock is an argument, the state is a plain
dataclass that round-trips through JSON (the poller keeps it in the state store's
``storm_state`` table, the held re-runs in ``held_actions``), and each method says what happened (for logs and metrics).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from retry_bot.policy.model import StormRule

__all__ = ["StormState", "CategoryStorm", "Gate", "release_times"]


@dataclass
class CategoryStorm:
    """One category's brake."""

    #: The newest failure times (at most ``trip_failures`` are kept: enough to know whether they fit a window).
    failures: list[float] = field(default_factory=list)
    #: The failed jobs those times belong to (``0``: not known, state saved before they were kept), so a
    #: job judged again -- after a crash before its decision was recorded, after a read error, after a
    #: dry run's restart -- is not counted twice.  Those kept are enough: a job's first count that
    #: fell off the list was followed by ``trip_failures - 1`` other failures, which trip alone.
    failure_jobs: list[int] = field(default_factory=list)
    #: When the brake tripped; ``None``: clear.
    braked_since: float | None = None
    #: Start of the current probe interval and the probes let through in it.
    probe_started: float = 0.0
    probes_sent: int = 0
    #: Re-run jobs of the category that succeeded since the brake tripped.
    successes: int = 0
    #: Which ones (a result told twice -- after a crash before the job was unfollowed -- counts once).
    success_jobs: list[int] = field(default_factory=list)
    #: Times the brake tripped (for the logs and ``state`` inspection).
    trips: int = 0
    #: The category's family (a policy reload may stop watching it).
    family: str = ""

    @property
    def braked(self) -> bool:
        return self.braked_since is not None


@dataclass(frozen=True)
class Gate:
    """What the brake says about one re-run: ``act`` (clear), ``probe`` (braked, let through) or ``hold``."""

    verdict: str
    category: str
    detail: str = ""


@dataclass
class StormState:
    """Every category's brake; plain data, updated by the pure methods below."""

    categories: dict[str, CategoryStorm] = field(default_factory=dict)

    # ------------------------------------------------------------------ (de)serialisation

    def to_dict(self) -> dict[str, Any]:
        return {"categories": {c: asdict(s) for c, s in sorted(self.categories.items())}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "StormState":
        out = cls()
        for cat, raw in ((data or {}).get("categories") or {}).items():
            if not isinstance(raw, Mapping):
                continue
            known = {k: raw[k] for k in CategoryStorm.__dataclass_fields__ if k in raw}
            known["failures"] = [float(t) for t in known.get("failures") or ()]
            jobs = [int(j) for j in known.get("failure_jobs") or ()][-len(known["failures"]):] \
                if known["failures"] else []
            known["failure_jobs"] = [0] * (len(known["failures"]) - len(jobs)) + jobs
            known["success_jobs"] = [int(j) for j in known.get("success_jobs") or ()]
            out.categories[str(cat)] = CategoryStorm(**known)
        return out

    # ------------------------------------------------------------------ queries

    def braked(self) -> list[str]:
        """Categories whose brake is on."""
        return sorted(c for c, s in self.categories.items() if s.braked)

    def watches(self, rule: StormRule | None, family: str) -> bool:
        return rule is not None and family in rule.families

    # ------------------------------------------------------------------ transitions

    def note_failure(self, rule: StormRule | None, family: str, category: str, now: float,
                     job_id: int = 0) -> bool:
        """Count a new failed job; returns ``True`` when this failure tripped the brake.

        ``job_id`` (``0``: not known) makes it idempotent: a job still among the kept failures is
        not counted again.
        """
        if not self.watches(rule, family):
            return False
        assert rule is not None
        st = self.categories.setdefault(category, CategoryStorm(family=family))
        st.family = family
        if job_id and job_id in st.failure_jobs:
            return False
        jobs = [0] * (len(st.failures) - len(st.failure_jobs)) + st.failure_jobs[-len(st.failures):] \
            if st.failures else []
        kept = [(t, j) for t, j in zip(st.failures, jobs) if t > now - rule.window][-(rule.trip_failures - 1):]
        kept.append((now, int(job_id)))
        st.failures = [t for t, _ in kept]
        st.failure_jobs = [j for _, j in kept]
        if st.braked or len(st.failures) < rule.trip_failures:
            return False
        st.braked_since = now
        st.probe_started = now
        st.probes_sent = 0
        st.successes = 0
        st.success_jobs = []
        st.trips += 1
        return True

    def gate(self, rule: StormRule | None, family: str, category: str, now: float) -> Gate:
        """May a re-run of this category go out now?  A ``probe`` verdict is counted as sent."""
        st = self.categories.get(category)
        if not self.watches(rule, family) or st is None or not st.braked:
            return Gate("act", category)
        assert rule is not None
        if now - st.probe_started >= rule.probe_interval:
            st.probe_started = now
            st.probes_sent = 0
        if st.probes_sent < rule.probes:
            st.probes_sent += 1
            return Gate("probe", category, f"probe {st.probes_sent} of {rule.probes} in this "
                                           f"{rule.probe_interval:.0f}s interval")
        return Gate("hold", category, f"{len(st.failures)} {category} failures within {rule.window:.0f}s; "
                                      f"braked since {st.braked_since:.0f}")

    def note_rerun_result(self, rule: StormRule | None, family: str, category: str, success: bool,
                          now: float, job_id: int = 0) -> bool:
        """A re-run job of the category ended; returns ``True`` when its success released the brake.

        A failed re-run needs nothing here: it is a new failed job, counted by :meth:`note_failure`.
        Without a ``[storm]`` table (the brake turned off by a policy reload) a braked
        category is released by the first result.  ``job_id`` (``0``: not known) makes a
        success told twice count once.
        """
        st = self.categories.get(category)
        if st is None or not st.braked:
            return False
        if rule is None or family not in rule.families:
            self._release(st)
            return True
        if not success or (job_id and job_id in st.success_jobs):
            return False
        st.successes += 1
        if job_id:
            st.success_jobs.append(int(job_id))
        if st.successes < rule.release_successes:
            return False
        self._release(st)
        return True

    def release_stale(self, rule: StormRule | None) -> list[str]:
        """Categories the policy no longer watches are released (a reload turned the brake off)."""
        out = []
        for cat, st in self.categories.items():
            if st.braked and (rule is None or st.family not in rule.families):
                self._release(st)
                out.append(cat)
        return out

    @staticmethod
    def _release(st: CategoryStorm) -> None:
        st.braked_since = None
        st.failures = []
        st.failure_jobs = []
        st.probes_sent = 0
        st.successes = 0
        st.success_jobs = []


def release_times(count: int, per_minute: int, now: float) -> list[float]:
    """When each of ``count`` released requests may go out: all now, or ``per_minute`` a minute."""
    if per_minute <= 0:
        return [now] * count
    return [now + 60.0 * (i // per_minute) for i in range(count)]
