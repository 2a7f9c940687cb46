"""Spack's real dynamic-mapping client: every spec it sends gets 200, keyed like the recorded job.

The specs are printed with Spack's own rules (``tests/bot_predict/spack_specs.py`` cites them):
quoted variant values, ``%none@none``, the double space of an empty variant string, long specs.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry

from retry_bot.predict import KeySettings, SpecError, extract_key, parse_spack_spec
from retry_bot.predict.keys import MAX_SPEC_CHARS
from retry_bot.predict.settings import DEFAULT_SETTINGS
from retry_bot.server import AllocationServer
from retry_bot.state import open_store
from tests.bot_predict.conftest import SIGNING_KEY, signed_record
from tests.bot_predict.spack_specs import BUILDS, job_variables, request_path, spack_spec

IDS = [why for why, _ in BUILDS]


def _get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


@pytest.fixture
def served(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'state.sqlite3'}")
    srv = AllocationServer(store=store, settings=DEFAULT_SETTINGS, tokens=["t"],
                           signing_keys={"default": SIGNING_KEY}, registry=CollectorRegistry(),
                           clock=lambda: 1_736_200_000.0, refresh_seconds=0.0).start()
    yield srv, store
    srv.close()
    store.close()


@pytest.mark.parametrize("build", [b for _, b in BUILDS], ids=IDS)
def test_spec_is_keyed_like_the_jobs_spack_variables(build):
    got = parse_spack_spec(spack_spec(build))
    recorded = extract_key(KeySettings(), variables=job_variables(build))
    assert got == recorded.as_dict()
    assert got["compiler"] == f"{build['compiler_name']}@{build['compiler_version']}"


def test_quoted_and_bare_spellings_of_one_value_are_one_key():
    quoted = parse_spack_spec("gcc@14.2.0 +bootstrap languages:='c,c++,fortran' arch=linux-x%gcc@11.4.0")
    bare = parse_spack_spec("gcc@14.2.0 +bootstrap languages=c,c++,fortran arch=linux-x%gcc@11.4.0")
    assert quoted == bare and quoted["variants"] == "+bootstrap languages='c,c++,fortran'"


@pytest.mark.parametrize("build", [b for _, b in BUILDS], ids=IDS)
def test_every_spack_spec_gets_200_and_only_variables(served, build):
    srv, _ = served
    status, body = _get(srv.url + request_path(build))
    assert status == 200, body
    assert set(body) == {"variables"}


def test_history_recorded_from_spack_variables_answers_the_spack_spec(served):
    srv, store = served
    build = dict(BUILDS[1][1])  # hip, amdgpu_target='gfx90a:xnack-'
    name = f"{build['name']}@{build['version']} /abcdefg %{build['compiler_name']}@{build['compiler_version']}"
    for i in range(5):
        store.add_usage_record(signed_record(200 + i, peak=5_000_000_000, name=name, variables=job_variables(build),
                                             finished=f"2025-01-06T0{i}:00:00Z"), "test")
    assert srv.sync()
    status, body = _get(srv.url + request_path(build).replace("/v1/allocation", "/v1/allocation/explain"))
    assert status == 200
    assert body["explanation"]["samples"] == 5 and body["explanation"]["level"] == 0


def test_specs_beyond_the_bound_and_junk_are_refused_with_a_message():
    with pytest.raises(SpecError, match="longer than"):
        parse_spack_spec("zlib@1.3 " + "+x" * MAX_SPEC_CHARS)
    for bad in ("zlib@1.3 +x; rm -rf /", "zlib@1.3 languages='c,c++", "zlib@1.3 %gcc@12 %clang@17"):
        with pytest.raises(SpecError):
            parse_spack_spec(bad)
