"""The storm brake (retry_bot/storm.py) on a simulated clock, and a budget shared across projects."""

from __future__ import annotations

import json

from retry_bot.live.poller import share_budget
from retry_bot.policy.model import StormRule
from retry_bot.storm import StormState, release_times

RULE = StormRule(window=300.0, trip_failures=5, probes=2, probe_interval=120.0, release_successes=2,
                 families=("infrastructure",))
INFRA = "infrastructure"
CAT = "runner_system_failure"


def test_failures_spread_wider_than_the_window_never_trip():
    st = StormState()
    t = 1000.0
    for i in range(50):                       # one every 76 s: at most 4 within any 300 s window
        assert not st.note_failure(RULE, INFRA, CAT, t + 76.0 * i)
        assert st.gate(RULE, INFRA, CAT, t + 76.0 * i).verdict == "act"
    assert st.braked() == []


def test_trip_hold_probe_and_release_on_a_simulated_clock():
    st = StormState()
    now = 5000.0
    tripped = [st.note_failure(RULE, INFRA, CAT, now + i) for i in range(5)]
    assert tripped == [False, False, False, False, True]     # the 5th failure within 300 s trips
    assert st.braked() == [CAT]
    # braked: 2 probes in this interval, then everything is held
    verdicts = [st.gate(RULE, INFRA, CAT, now + 10).verdict for _ in range(5)]
    assert verdicts == ["probe", "probe", "hold", "hold", "hold"]
    # a failed probe is a new failure: no release, and it does not re-trip (already braked)
    assert not st.note_rerun_result(RULE, INFRA, CAT, False, now + 20)
    assert not st.note_failure(RULE, INFRA, CAT, now + 20)
    assert st.gate(RULE, INFRA, CAT, now + 119).verdict == "hold"
    # the next probe interval lets 2 more through
    assert [st.gate(RULE, INFRA, CAT, now + 131).verdict for _ in range(3)] == ["probe", "probe", "hold"]
    # one success is not enough (release_successes = 2), the second releases
    assert not st.note_rerun_result(RULE, INFRA, CAT, True, now + 140)
    assert st.braked() == [CAT]
    assert st.note_rerun_result(RULE, INFRA, CAT, True, now + 150)
    assert st.braked() == []
    assert st.gate(RULE, INFRA, CAT, now + 151).verdict == "act"
    # released: the window starts again from nothing
    assert not any(st.note_failure(RULE, INFRA, CAT, now + 160 + i) for i in range(4))
    assert st.categories[CAT].trips == 1


def test_other_categories_and_unwatched_families_are_not_braked():
    st = StormState()
    for i in range(10):
        st.note_failure(RULE, INFRA, CAT, 100.0 + i)
        st.note_failure(RULE, "oom", "oom_killed", 100.0 + i)         # family not in [storm] families
    assert st.braked() == [CAT]
    assert st.gate(RULE, INFRA, "dns_error", 111).verdict == "act"
    assert st.gate(RULE, "oom", "oom_killed", 111).verdict == "act"
    assert st.gate(None, INFRA, CAT, 111).verdict == "act"             # no [storm] table: no brake


def test_state_round_trips_through_json_and_a_reload_without_storm_releases():
    st = StormState()
    for i in range(5):
        st.note_failure(RULE, INFRA, CAT, 10.0 + i)
    again = StormState.from_dict(json.loads(json.dumps(st.to_dict())))
    assert again.braked() == [CAT] and again.categories[CAT].family == INFRA
    assert again.categories[CAT].failures == st.categories[CAT].failures
    assert again.release_stale(RULE) == []
    assert again.release_stale(None) == [CAT] and again.braked() == []
    assert StormState.from_dict(None).braked() == [] and StormState.from_dict({"categories": {"x": 3}}).braked() == []


def test_failure_memory_is_bounded():
    st = StormState()
    rule = StormRule(window=86400.0, trip_failures=10, probes=1)
    for i in range(10_000):
        st.note_failure(rule, INFRA, CAT, float(i))
    assert len(st.categories[CAT].failures) <= rule.trip_failures


def test_release_is_spread_per_minute():
    assert release_times(3, 0, 100.0) == [100.0, 100.0, 100.0]
    assert release_times(5, 2, 100.0) == [100.0, 100.0, 160.0, 160.0, 220.0]


def test_share_budget_gives_small_projects_their_jobs_and_the_big_one_the_rest():
    assert share_budget([2000, 3, 0, 10], 100) == [87, 3, 0, 10]
    assert share_budget([2000], 500) == [500]                       # no per-project cap below the budget
    assert share_budget([40, 40, 40], 30) == [10, 10, 10]
    assert sum(share_budget([1] * 7, 3)) == 3
    # fewer jobs than projects: the single jobs rotate with ``start``
    assert share_budget([5, 5, 5], 2, start=0) == [1, 1, 0]
    assert share_budget([5, 5, 5], 2, start=1) == [0, 1, 1]
    assert share_budget([], 5) == [] and share_budget([3], 0) == [0]


def test_a_job_counted_again_is_counted_once():
    """A job judged again (a crash before its decision was recorded, a failed read, a dry run's
    restart) is not a second failure: two counts of one job never trip a brake of two."""
    rule = StormRule(window=300.0, trip_failures=2, probes=1, probe_interval=120.0, release_successes=1,
                     families=("infrastructure",))
    st = StormState()
    assert not st.note_failure(rule, INFRA, CAT, 1000.0, job_id=7)
    assert not st.note_failure(rule, INFRA, CAT, 1001.0, job_id=7)
    assert st.braked() == [] and st.categories[CAT].failures == [1000.0]
    assert st.note_failure(rule, INFRA, CAT, 1002.0, job_id=8)          # another job: two failures trip
    # after a round trip through the store too
    again = StormState.from_dict(json.loads(json.dumps(st.to_dict())))
    assert again.categories[CAT].failure_jobs == [7, 8]
    assert not again.note_failure(rule, INFRA, CAT, 1003.0, job_id=8) and again.categories[CAT].trips == 1


def test_a_job_whose_count_fell_off_the_kept_failures_counts_again_only_beside_enough_others():
    st = StormState()
    for i, job in enumerate((1, 2, 3, 4)):
        assert not st.note_failure(RULE, INFRA, CAT, 1000.0 + i, job_id=job)
    assert st.categories[CAT].failure_jobs == [1, 2, 3, 4]
    assert not st.note_failure(RULE, INFRA, CAT, 1010.0, job_id=3)      # still kept: not counted
    assert st.note_failure(RULE, INFRA, CAT, 1011.0, job_id=5)          # five distinct jobs: trips
    assert st.categories[CAT].failure_jobs == [1, 2, 3, 4, 5]


def test_state_saved_before_failure_jobs_were_kept_still_loads_and_counts():
    old = {"categories": {CAT: {"failures": [1000.0, 1001.0], "braked_since": None, "probe_started": 0.0,
                                "probes_sent": 0, "successes": 0, "trips": 0, "family": INFRA}}}
    st = StormState.from_dict(old)
    assert st.categories[CAT].failure_jobs == [0, 0]
    assert not st.note_failure(RULE, INFRA, CAT, 1002.0, job_id=9)
    assert st.categories[CAT].failures == [1000.0, 1001.0, 1002.0]
    assert st.categories[CAT].failure_jobs == [0, 0, 9]


def test_a_success_told_twice_counts_once():
    st = StormState()
    for i in range(5):
        st.note_failure(RULE, INFRA, CAT, 5000.0 + i, job_id=100 + i)
    assert st.braked() == [CAT]
    assert not st.note_rerun_result(RULE, INFRA, CAT, True, 5010.0, job_id=200)
    assert not st.note_rerun_result(RULE, INFRA, CAT, True, 5011.0, job_id=200)   # the same job again
    assert st.categories[CAT].successes == 1 and st.braked() == [CAT]
    assert st.note_rerun_result(RULE, INFRA, CAT, True, 5012.0, job_id=201)       # release_successes = 2
    assert st.braked() == [] and st.categories[CAT].success_jobs == []
