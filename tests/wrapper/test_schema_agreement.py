"""``usage-record.schema.json`` and ``UsageRecord.from_dict`` accept and reject the same records.

The schema is the published contract (docs/usage-record.md); ``from_dict`` is what the retry bot and
the collector actually enforce.  Hypothesis builds valid records, then breaks them the ways a foreign
writer or a hostile build would: fields missing or added, values of the wrong JSON type, negative
numbers, integral floats, bad enums and constants, a malformed signature member.  Both sides must
agree on every one, and ``from_dict`` must refuse with :class:`RecordError` (a clear message), never
with another exception.

Numbers stay finite and within 64 bits: JSON has no NaN or infinity, and the wrapper writes nothing
larger.  ``format: date-time`` is an annotation in JSON Schema 2020-12 (not asserted by default), and
``from_dict`` checks only that the times are strings: both accept any string there.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
from hypothesis import HealthCheck, example, given, settings, strategies as st

import runner_wrapper
from runner_wrapper.record import RecordError, UsageRecord

SCHEMA = json.loads((Path(runner_wrapper.__file__).parent / "usage-record.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)

small_int = st.integers(min_value=0, max_value=2**40)
count = st.integers(min_value=0, max_value=1000)
num = st.one_of(st.integers(min_value=0, max_value=10**6), st.floats(min_value=0, max_value=1e6))
text = st.text(max_size=8)


def opt(s: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(st.none(), s)


def some_of(required: dict[str, st.SearchStrategy], optional: dict[str, st.SearchStrategy]) -> st.SearchStrategy:
    """An object with every ``required`` member and any subset of the ``optional`` ones."""
    return st.fixed_dictionaries(required, optional=optional)


strmap = st.dictionaries(text, text, max_size=3)
job = some_of({"id": st.integers(min_value=1, max_value=2**40)},
              {"project_id": opt(small_int), "project_path": opt(text), "pipeline_id": opt(small_int),
               "name": opt(text), "stage": opt(text), "ref": opt(text), "protected": opt(st.booleans()),
               "url": opt(text), "variables": strmap})
host = some_of({"hostname": text},
               {"runner": opt(text), "backend": st.sampled_from(["cgroup-v2", "cgroup-v1", "psutil"]),
                "approximate": st.booleans(), "kernel": opt(text), "wrapper_version": opt(text)})
limits = some_of({}, {"memory_limit_bytes": opt(small_int), "memory_request_bytes": opt(small_int),
                      "cpu_limit_cores": opt(num), "cpu_request_cores": opt(num), "sources": strmap})
usage = some_of({"wall_seconds": num},
                {"memory_peak_bytes": opt(small_int), "memory_mean_bytes": opt(small_int),
                 "cpu_user_seconds": opt(num), "cpu_system_seconds": opt(num), "cpu_mean_cores": opt(num),
                 "cpu_max_cores": opt(num), "oom_kills": count, "memory_failcnt": opt(small_int),
                 "memory_pressure_usec": opt(small_int), "cpu_pressure_usec": opt(small_int)})
stage = some_of({"name": text, "attempt": st.integers(min_value=1, max_value=5), "wall_seconds": num,
                 "exit_code": opt(st.integers(min_value=-255, max_value=255))},
                {"oom_kills": count, "memory_peak_bytes": opt(small_int), "memory_mean_bytes": opt(small_int),
                 "cpu_seconds": opt(num), "cpu_max_cores": opt(num)})
signature = st.fixed_dictionaries({"alg": st.just("hmac-sha256"), "key_id": text,
                                   "value": st.text("0123456789abcdef", min_size=64, max_size=64)})
record = some_of({"schema": st.just("gitlab-rightsizer/usage-record/v1"), "job": job, "host": host,
                  "limits": limits, "usage": usage, "started_at": text, "finished_at": text},
                 {"exit_code": opt(st.integers(min_value=-2**31, max_value=2**31)),
                  "stages": st.lists(stage, max_size=3), "stages_truncated": st.booleans(), "signature": signature})

#: Any JSON value, as ``json.loads`` returns it (finite numbers only).
json_value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**63, max_value=2**63),
              st.floats(allow_nan=False, allow_infinity=False, min_value=-1e18, max_value=1e18), text),
    lambda inner: st.one_of(st.lists(inner, max_size=2), st.dictionaries(text, inner, max_size=2)), max_leaves=4)
#: Values aimed at the schema's edges: negative and integral-float numbers, a zero id, bad enums and constants.
edge_value = st.sampled_from([-1, -0.5, 0, 1, 0.0, 3.0, 2.5, True, "", "1", None, [], {}, "cgroup-v3", "docker",
                              "hmac-sha1", "gitlab-rightsizer/usage-record/v2", "f" * 63, "F" * 64, "g" * 64])


def _paths(value: Any, at: tuple = ()) -> list[tuple]:
    """Every place in ``value``: object members and array items (the root excluded)."""
    out = []
    if isinstance(value, dict):
        for k, v in value.items():
            out.append(at + (k,))
            out.extend(_paths(v, at + (k,)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.append(at + (i,))
            out.extend(_paths(v, at + (i,)))
    return out


def _containers(value: Any, at: tuple = ()) -> list[tuple]:
    out = [at] if isinstance(value, dict) else []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        out.extend(_containers(v, at + (k,)))
    return out


def _get(value: Any, path: tuple) -> Any:
    for p in path:
        value = value[p]
    return value


@st.composite
def near_valid(draw) -> dict:
    """A valid record with 0 to 3 changes: a member removed, a member added, a value replaced."""
    rec = copy.deepcopy(draw(record))
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        kind = draw(st.sampled_from(["remove", "add", "replace", "edge"]))
        if kind == "add":
            where = draw(st.sampled_from(_containers(rec)))
            _get(rec, where)[draw(st.sampled_from(["extra", "id", "oom_kills", "alg", "x-note"]))] = \
                copy.deepcopy(draw(json_value))
            continue
        paths = _paths(rec)
        path = draw(st.sampled_from(paths))
        parent = _get(rec, path[:-1])
        if kind == "remove":
            if isinstance(parent, dict):
                del parent[path[-1]]
            else:
                parent.pop(path[-1])
        else:
            # a copy: a later change must not alter sampled_from's own [] and {} (hypothesis reuses them)
            parent[path[-1]] = copy.deepcopy(draw(json_value if kind == "replace" else edge_value))
    return rec


def _from_dict_accepts(data: dict) -> bool:
    try:
        UsageRecord.from_dict(data)
    except RecordError:
        return False
    return True   # any other exception fails the test: bad input must get a RecordError


def test_every_generated_valid_record_is_valid_for_both():
    @given(record)
    @settings(max_examples=200, deadline=None)
    def check(rec):
        assert VALIDATOR.is_valid(rec), list(VALIDATOR.iter_errors(rec))[:1]
        assert _from_dict_accepts(rec), rec
    check()


@given(near_valid())
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example({"schema": "gitlab-rightsizer/usage-record/v1", "job": {"id": 1}, "host": {"hostname": "h"},
          "usage": {"wall_seconds": 1}, "started_at": "", "finished_at": ""})                    # no limits
@example({"schema": "gitlab-rightsizer/usage-record/v1", "job": {"id": 1}, "host": {"hostname": "h"},
          "limits": {}, "usage": {"wall_seconds": 1, "memory_peak_bytes": -1}, "started_at": "",
          "finished_at": ""})                                                                   # a negative peak
@example({"schema": "gitlab-rightsizer/usage-record/v1", "job": {"id": 1}, "host": {"hostname": "h"},
          "limits": {}, "usage": {"wall_seconds": 1, "oom_kills": None}, "started_at": "",
          "finished_at": ""})                                                                   # oom_kills null
def test_schema_and_from_dict_accept_and_reject_the_same_records(rec):
    by_schema = VALIDATOR.is_valid(rec)
    by_code = _from_dict_accepts(rec)
    why = next(iter(VALIDATOR.iter_errors(rec)), None)
    assert by_schema == by_code, (f"schema {'accepts' if by_schema else 'rejects'} "
                                  f"({why.message if why else ''}), from_dict "
                                  f"{'accepts' if by_code else 'rejects'}: {json.dumps(rec)[:1500]}")
