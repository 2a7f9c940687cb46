"""Kubernetes quantity parsing and formatting (shared by the wrapper and the bot)."""

import pytest
from hypothesis import given, strategies as st

from runner_wrapper.quantity import (
    QuantityError, format_cpu, format_memory, human_bytes, parse_cpu, parse_memory,
)


@pytest.mark.parametrize("text,expected", [
    ("500M", 500_000_000), ("2Gi", 2 * 2**30), ("1.5G", 1_500_000_000), ("2", 2),
    ("128Mi", 128 * 2**20), ("1e3", 1000), ("1E9", 10**9), (" 4Gi ", 4 * 2**30), ("+1k", 1000),
    (".5Gi", 2**29), (4096, 4096),
])
def test_parse_memory(text, expected):
    assert parse_memory(text) == expected


@pytest.mark.parametrize("text,expected", [("750m", 0.75), ("2", 2.0), ("0.5", 0.5), ("1500m", 1.5), (3, 3.0)])
def test_parse_cpu(text, expected):
    assert parse_cpu(text) == pytest.approx(expected)


@pytest.mark.parametrize("bad,fragment", [
    ("lots", "not a Kubernetes quantity"), ("-1", "negative"), ("1e400", "not plausible"),
    ("0", "positive"), ("", "empty"), ("4GB", "did you mean '4G'"), ("2GiB", "did you mean '2Gi'"),
    ("750m", "less than one byte"), ("nan", "not a Kubernetes quantity"), ("1.2.3G", "not a"),
    (float("inf"), "finite"), (True, "not a quantity"), (None, "not a quantity"),
])
def test_parse_memory_rejects_with_clear_message(bad, fragment):
    with pytest.raises(QuantityError, match=fragment.replace("(", r"\(")):
        parse_memory(bad)


@pytest.mark.parametrize("bad", ["1n", "-2", "many", "1e9999"])
def test_parse_cpu_rejects(bad):
    with pytest.raises(QuantityError):
        parse_cpu(bad)


def test_format_roundtrip_examples():
    assert format_memory(4 * 2**30) == "4Gi"
    assert format_memory(4 * 2**30 + 1) == "4097Mi"
    assert format_memory(9_577_000_000, "decimal") == "9577M"
    assert format_memory(16_000_000_000, "decimal") == "16G"
    assert format_memory(123, "bytes") == "123"
    assert format_cpu(0.75) == "750m" and format_cpu(2.0) == "2"
    assert human_bytes(4 * 2**30) == "4.0 GiB" and human_bytes(None) == "n/a"
    with pytest.raises(QuantityError):
        format_memory(1, "furlongs")


@given(st.integers(min_value=1, max_value=2**50), st.sampled_from(["binary", "decimal", "bytes"]))
def test_format_memory_never_rounds_down(n, style):
    assert parse_memory(format_memory(n, style)) >= n


@given(st.floats(min_value=0.001, max_value=10_000, allow_nan=False))
def test_format_cpu_never_rounds_down(c):
    assert parse_cpu(format_cpu(c)) >= c - 1e-9
