"""The allocation endpoint client against a real HTTP server on 127.0.0.1."""

import time
import urllib.parse

import pytest

from runner_wrapper.allocation import build_spec, fetch_allocation

from .httpserver import serve


def test_spec_from_spack_variables_else_job_name():
    v = {"SPACK_JOB_SPEC_PKG_NAME": "py-torch", "SPACK_JOB_SPEC_PKG_VERSION": "2.3.1",
         "SPACK_JOB_SPEC_VARIANTS": "+cuda~mkl", "SPACK_JOB_SPEC_ARCH": "linux-ubuntu22.04-x86_64_v3",
         "SPACK_JOB_SPEC_COMPILER_NAME": "gcc", "SPACK_JOB_SPEC_COMPILER_VERSION": "12.3.0"}
    assert build_spec(v, "job") == "py-torch@2.3.1 +cuda~mkl arch=linux-ubuntu22.04-x86_64_v3%gcc@12.3.0"
    assert build_spec({"SPACK_JOB_SPEC_PKG_NAME": "zlib"}, "job") == "zlib"
    assert build_spec({}, "compile-docs") == "compile-docs"


def test_request_shape_and_answer():
    srv, rec, base = serve(lambda h, b: (200, {"variables": {"KUBERNETES_MEMORY_REQUEST": "2000M",
                                                               "KUBERNETES_MEMORY_LIMIT": "3G",
                                                               "OTHER": "ignored"}}))
    try:
        a = fetch_allocation(base + "/v1/allocation", "zlib@1.3 +pic", "build zlib", "spack/spack", "develop",
                             "tok-123", 2.0)
    finally:
        srv.shutdown()
    assert a.variables == {"KUBERNETES_MEMORY_REQUEST": "2000M", "KUBERNETES_MEMORY_LIMIT": "3G"}
    req = rec.requests[0]
    path, _, query = req["path"].partition("?")
    assert path == "/v1/allocation"
    q = urllib.parse.parse_qs(query)
    assert q == {"spec": ["zlib@1.3 +pic"], "job_name": ["build zlib"], "project": ["spack/spack"], "ref": ["develop"]}
    assert req["headers"]["Authorization"] == "Bearer tok-123"


@pytest.mark.slow
def test_failures_give_reasons_not_exceptions():
    srv, _rec, base = serve(lambda h, b: (500, {"error": "boom"}))
    try:
        assert "HTTP 500" in fetch_allocation(base, "x", "x", None, None, None, 1.0).reason
    finally:
        srv.shutdown()
    srv, _rec, base = serve(lambda h, b: (200, b"not json"))
    try:
        r = fetch_allocation(base, "x", "x", None, None, None, 1.0)
        assert r.variables is None and "invalid JSON" in r.reason
    finally:
        srv.shutdown()

    def slow(h, b):
        time.sleep(1.0)
        return 200, {"variables": {"KUBERNETES_MEMORY_LIMIT": "1G"}}

    srv, _rec, base = serve(slow)
    try:
        t = time.monotonic()
        r = fetch_allocation(base, "x", "x", None, None, None, 0.2)
        assert r.variables is None and "unreachable" in r.reason and time.monotonic() - t < 0.9
    finally:
        srv.shutdown()
    # Nothing listening: refused.
    r = fetch_allocation("http://127.0.0.1:9/v1/allocation", "x", "x", None, None, None, 0.5)
    assert r.variables is None and "unreachable" in r.reason
