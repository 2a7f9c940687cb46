"""The bot's resize asks the usage-history predictor (the same model as /v1/allocation)."""

import dataclasses

from retry_bot.live.daemon import HistoryPredictor
from retry_bot.model import JobFacts
from retry_bot.policy import parse_policy
from retry_bot.state import open_store
from runner_wrapper.record import sign_record
from tests.common.test_record import make_record

MiB = 2**20


def _store_with_runs(peaks_mib, ref="main", name="build"):
    st = open_store("sqlite:///:memory:")
    base = make_record()
    for i, peak in enumerate(peaks_mib):
        rec = dataclasses.replace(
            base, job=dataclasses.replace(base.job, id=100 + i, ref=ref, name=name, protected=(ref == "main")),
            finished_at=f"2026-11-{10 + i}T00:00:00Z", exit_code=0,
            usage=dataclasses.replace(base.usage, oom_kills=0, memory_peak_bytes=peak * MiB,
                                      memory_mean_bytes=peak * MiB // 2))
        assert st.add_usage_record(sign_record(rec.to_dict(), b"k" * 32), "test")
    return st


def _facts(ref="main"):
    return JobFacts(job_id=999, name="build", project_path="g/p", ref=ref, protected=(ref == "main"),
                    variables={"KUBERNETES_MEMORY_LIMIT": "128Mi"})


def test_generic_job_gets_a_prediction_from_trusted_history():
    st = _store_with_runs([300, 310, 290, 305, 300])
    predicted = HistoryPredictor(st, clock=lambda: 1.8e9)(_facts(), None)
    assert predicted is not None and predicted >= 310 * MiB


def test_untrusted_runs_do_not_train_shared_predictions():
    st = _store_with_runs([30_000, 30_000, 30_000], ref="pr-17")
    assert HistoryPredictor(st, clock=lambda: 1.8e9)(_facts(), None) is None


def test_prediction_is_clamped_to_the_policy_cap():
    st = _store_with_runs([3000, 3000, 3000, 3000])
    pol = parse_policy('[resize]\nmax_memory = "1Gi"\ngranularity = "128Mi"\nmin_bump = "128Mi"\n')
    predicted = HistoryPredictor(st, policy=lambda: pol, clock=lambda: 1.8e9)(_facts(), None)
    assert predicted is not None and predicted <= 2**30
