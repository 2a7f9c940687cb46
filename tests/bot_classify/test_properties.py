"""Property tests: the classifier never raises, whatever the bytes and facts."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retry_bot.classify import classify, clean_trace, load_taxonomy
from retry_bot.classify.reasons import KNOWN_FAILURE_REASONS
from retry_bot.model import Family, JobFacts

TAX = load_taxonomy()
WORDS = [b"Killed", b"OOMKilled", b"error: ", b"Could not resolve host", b"\r", b"\n", b"\x1b[31m",
         b"section_start:1:x\r", b"exit code 137", b"Job failed", b"FAILED a::b", b"===", b"\x00", b"\xff"]

traces = st.one_of(
    st.binary(max_size=4096),
    st.lists(st.one_of(st.sampled_from(WORDS), st.binary(max_size=64)), max_size=200).map(b"".join),
)
facts_st = st.builds(
    JobFacts,
    job_id=st.integers(min_value=0, max_value=2**40),
    name=st.text(max_size=40),
    stage=st.text(max_size=20),
    status=st.sampled_from(["failed", "canceled", "success", "", "FAILED"]),
    failure_reason=st.one_of(st.none(), st.sampled_from(sorted(KNOWN_FAILURE_REASONS)), st.text(max_size=30)),
    exit_code=st.one_of(st.none(), st.integers(min_value=-1000, max_value=1000)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(facts_st, traces)
def test_classify_never_raises_and_is_deterministic(f, trace):
    c = classify(f, trace, TAX)
    assert isinstance(c.family, Family) and c.category and c.rule
    assert all(isinstance(e, str) for e in c.evidence)
    assert classify(f, trace, TAX) == c


@settings(max_examples=150, deadline=None)
@given(traces)
def test_clean_trace_never_raises(trace):
    out = clean_trace(trace)
    assert isinstance(out, bytes) and len(out) <= len(trace)
    assert b"\r" not in out
