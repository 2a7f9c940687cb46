"""Specs as Spack's ``spack ci generate`` sends them to a dynamic-mapping endpoint.

Printing follows Spack's own code (spack ``lib/spack/spack/spec_parser.py``: ``NO_QUOTES_NEEDED``
and ``quote_if_needed``; ``lib/spack/spack/variant.py``: ``VariantMap.__str__`` prints boolean
variants first, concatenated and sorted, then ``name=value`` pairs sorted, multi-valued concrete
variants with ``:=``; ``lib/spack/spack/ci/common.py``: the request is
``GET <endpoint>?spec=<urllib.parse.quote(spec)>`` with spec
``{PKG_NAME}@{PKG_VERSION} {VARIANTS} arch={ARCH}%{COMPILER_NAME}@{COMPILER_VERSION}``, and the
same ``format()`` calls give the job's ``SPACK_JOB_SPEC_*`` variables).  See
``/work/shared/reference/gitlab-mechanics.md`` §11.6.

The builds are real: package names, versions and variant names/values from Spack's package
recipes (``spack/spack-packages``: gcc's ``languages``, hip/rocm ``amdgpu_target`` values such as
``gfx90a:xnack-``, py-torch's ``cuda_arch``, trilinos' long variant list, ...) as they appear in
the E4S / ML / RADIUSS CI stacks.
"""

from __future__ import annotations

import json
import re
from urllib.parse import quote

NO_QUOTES_NEEDED = re.compile(r"^[a-zA-Z0-9,/_.\-\[\]]+$")   # spack spec_parser.py


def quote_if_needed(value: str) -> str:   # spack spec_parser.py
    if NO_QUOTES_NEEDED.match(value):
        return value
    return json.dumps(value) if "'" in value else f"'{value}'"


def format_variants(variants: dict) -> str:
    """``Spec.format("{variants}")``: bools first (sorted, concatenated), then sorted key=value."""
    bools = "".join(("+" if v else "~") + k for k, v in sorted(variants.items()) if isinstance(v, bool))
    kvs = []
    for k, v in sorted(variants.items()):
        if isinstance(v, bool):
            continue
        if isinstance(v, tuple):   # multi-valued, concrete: name:=v1,v2
            kvs.append(f"{k}:={quote_if_needed(','.join(v))}")
        else:
            kvs.append(f"{k}={quote_if_needed(v)}")
    return " ".join(x for x in [bools, " ".join(kvs)] if x)


def spack_spec(build: dict) -> str:
    """The spec string of ``generate_ir`` (two spaces when the variant string is empty)."""
    return (f"{build['name']}@{build['version']} {format_variants(build['variants'])} "
            f"arch={build['arch']}%{build['compiler_name']}@{build['compiler_version']}")


def job_variables(build: dict) -> dict[str, str]:
    """The ``SPACK_JOB_SPEC_*`` variables the same generator sets on the job."""
    return {
        "SPACK_JOB_SPEC_PKG_NAME": build["name"],
        "SPACK_JOB_SPEC_PKG_VERSION": build["version"],
        "SPACK_JOB_SPEC_COMPILER_NAME": build["compiler_name"],
        "SPACK_JOB_SPEC_COMPILER_VERSION": build["compiler_version"],
        "SPACK_JOB_SPEC_ARCH": build["arch"],
        "SPACK_JOB_SPEC_VARIANTS": format_variants(build["variants"]),
    }


def request_path(build: dict) -> str:
    return "/v1/allocation?spec=" + quote(spack_spec(build))


X86 = "linux-ubuntu22.04-x86_64_v3"
ARM = "linux-ubuntu22.04-neoverse_v1"


def _b(name, version, variants, compiler=("gcc", "11.4.0"), arch=X86):
    return {"name": name, "version": version, "variants": variants, "arch": arch,
            "compiler_name": compiler[0], "compiler_version": compiler[1]}


_TRILINOS = {  # trilinos' recipe has ~100 variants; E4S builds print all of them
    **{v: (v in {"amesos2", "belos", "ifpack2", "kokkos", "muelu", "nox", "stratimikos", "tpetra",
                 "zoltan", "zoltan2", "mpi", "shared", "openmp"})
       for v in ["adelus", "adios2", "amesos", "amesos2", "anasazi", "aztec", "basker", "belos",
                 "boost", "chaco", "complex", "cuda", "cuda_rdc", "debug", "dtk", "epetra", "epetraext",
                 "epetraextbtf", "epetraextexperimental", "epetraextgraphreorderings", "exodus",
                 "explicit_template_instantiation", "float", "fortran", "gtest", "hdf5", "hypre",
                 "ifpack", "ifpack2", "intrepid", "intrepid2", "ipo", "isorropia", "kokkos", "ml",
                 "minitensor", "mpi", "muelu", "mumps", "nox", "openmp", "panzer", "phalanx",
                 "piro", "python", "rocm", "rocm_rdc", "rol", "rythmos", "sacado", "scorec",
                 "shards", "shared", "shylu", "stk", "stokhos", "stratimikos", "strumpack",
                 "suite-sparse", "superlu", "superlu-dist", "teko", "tempus", "test", "thyra",
                 "tpetra", "trilinoscouplings", "wrapper", "x11", "zoltan", "zoltan2"]},
    "build_system": "cmake", "build_type": "Release", "cxxstd": "17", "generator": "make",
    "gotype": "long_long",
}

#: One entry per build; ``why`` says which Spack behaviour it exercises.
BUILDS: list[tuple[str, dict]] = [
    ("quoted multi-valued concrete variant", _b("gcc", "14.2.0", {
        "binutils": False, "bootstrap": True, "graphite": False, "mold": False, "nvptx": False,
        "piclibs": False, "profiled": False, "strip": False, "build_system": "autotools",
        "build_type": "RelWithDebInfo", "languages": ("c", "c++", "fortran")})),
    ("quoted value with a colon", _b("hip", "6.2.4", {
        "asan": False, "cuda": False, "rocm": True, "build_system": "cmake", "build_type": "Release",
        "generator": "make", "amdgpu_target": "gfx90a:xnack-"})),
    ("quoted multi-valued amdgpu_target", _b("rocblas", "6.2.4", {
        "tensile": True, "build_system": "cmake", "build_type": "Release", "generator": "make",
        "amdgpu_target": ("gfx90a:xnack+", "gfx90a:xnack-")})),
    ("bare values", _b("py-torch", "2.5.1", {
        "cuda": True, "rocm": False, "mpi": True, "distributed": True, "build_system": "python_pip",
        "cuda_arch": "80"})),
    ("package without a compiler", _b("ca-certificates-mozilla", "2023-05-30",
                                      {"build_system": "generic"}, compiler=("none", "none"))),
    ("empty variant string (two spaces)", _b("gmake", "4.4.1", {}, compiler=("none", "none"))),
    ("patch hashes", _b("hdf5", "1.14.5", {
        "cxx": False, "fortran": True, "hl": True, "ipo": False, "java": False, "map": False,
        "mpi": True, "shared": True, "subfiling": False, "szip": False, "threadsafe": False,
        "tools": True, "api": "default", "build_system": "cmake", "build_type": "Release",
        "generator": "make", "patches": ("82088c8", "f42732a")})),
    ("value containing a single quote (JSON-quoted)", _b("py-numpy", "2.1.2", {
        "build_system": "python_pip", "ldflags": "-Wl,-rpath,'$ORIGIN'"})),
    ("other arch and compiler", _b("kokkos", "4.4.01", {
        "aggressive_vectorization": False, "cuda": False, "debug": False, "openmp": True,
        "rocm": False, "serial": True, "shared": True, "build_system": "cmake",
        "build_type": "Release", "cxxstd": "17", "generator": "ninja"},
        compiler=("oneapi", "2024.2.1"), arch=ARM)),
    ("long spec (trilinos)", _b("trilinos", "16.0.0", _TRILINOS)),
    ("very long spec (many patches)", _b("openfoam", "2312", {
        "int64": False, "kahip": False, "metis": False, "mgridgen": False, "paraview": False,
        "scotch": True, "source": True, "spdp": False, "vtk": False, "zoltan": False,
        "build_system": "generic",
        "patches": tuple(f"{i:07x}" for i in range(0, 600 * 4099, 4099))})),
]
