"""Job keys: what a build *is*, extracted from its name and variables, and the fallback chain.

A :class:`JobKey` is a flat set of named fields (``package``, ``version``,
``variants``, ``compiler``, ``arch``, ``stack`` for Spack; whatever named
groups a regex yields for other farms).  The :class:`KeySettings` list the
fallback *levels*, most specific first: the predictor uses the first level
with enough trusted history, as spack-gantry does with its match-key sets.

Extraction sources, in order (a later source never overrides an earlier one):

1. an explicit mapping (the ``key`` object of a benchmark trace, or a parsed
   ``spec=`` query string);
2. job variables named by ``KeySettings.variables`` (for Spack, the
   ``SPACK_JOB_SPEC_*`` variables the pipeline generator sets);
3. the job name, through ``KeySettings.name_patterns`` (regexes with named
   groups; the first that matches wins).

Everything here is pure.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping

__all__ = [
    "JobKey",
    "KeySettings",
    "SPACK_LEVELS",
    "SPACK_VARIABLES",
    "SPACK_NAME_PATTERNS",
    "GENERIC_LEVELS",
    "GENERIC_NAME_PATTERNS",
    "extract_key",
    "parse_spack_spec",
    "SpecError",
]


class SpecError(ValueError):
    """A Spack spec string could not be parsed."""


@dataclass(frozen=True)
class JobKey:
    """The named fields of one job, e.g. ``package=hdf5 version=1.14.3 ...``.

    ``fields`` is a sorted tuple of ``(name, value)`` pairs so keys hash and
    compare by value.
    """

    fields: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, mapping: Mapping[str, str]) -> "JobKey":
        return cls(tuple(sorted((str(k), str(v)) for k, v in mapping.items() if v is not None)))

    def get(self, name: str) -> str | None:
        for k, v in self.fields:
            if k == name:
                return v
        return None

    def as_dict(self) -> dict[str, str]:
        return dict(self.fields)

    def level_key(self, level: tuple[str, ...]) -> tuple[str, ...] | None:
        """The values of ``level``'s fields, or ``None`` when one is missing."""
        d = dict(self.fields)
        out = []
        for name in level:
            v = d.get(name)
            if v is None:
                return None
            out.append(v)
        return tuple(out)

    def __str__(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.fields) or "(empty)"


#: Spack fallback chain, most specific first (gantry's idea; arch and stack last to go).
SPACK_LEVELS: tuple[tuple[str, ...], ...] = (
    ("package", "version", "variants", "compiler", "arch"),
    ("package", "version", "variants", "compiler"),
    ("package", "version", "variants"),
    ("package", "variants", "compiler"),
    ("package", "version"),
    ("package", "variants"),
    ("package",),
    # Jobs that are not Spack builds (the name pattern's ``job`` fallback) are
    # keyed by project and job name, so the default works on any farm.
    ("project", "job"),
    ("job",),
)

#: Field <- job variable, as Spack's pipeline generator and gantry name them.
SPACK_VARIABLES: Mapping[str, str] = {
    "package": "SPACK_JOB_SPEC_PKG_NAME",
    "version": "SPACK_JOB_SPEC_PKG_VERSION",
    "variants": "SPACK_JOB_SPEC_VARIANTS",
    "compiler_name": "SPACK_JOB_SPEC_COMPILER_NAME",
    "compiler_version": "SPACK_JOB_SPEC_COMPILER_VERSION",
    "arch": "SPACK_JOB_SPEC_ARCH",
    "stack": "SPACK_CI_STACK_NAME",
}

#: Spack CI job names: ``<package>@<version> /<hash> %<compiler> arch=<arch> <stack label>``.
SPACK_NAME_PATTERNS: tuple[str, ...] = (
    r"^(?P<package>[A-Za-z0-9_][\w.+-]*)@(?P<version>\S+)\s+/\w+\s+%(?P<compiler>\S+)"
    r"(?:\s+arch=(?P<arch>\S+))?",
)

#: Non-Spack farms: the job name without a parallel-matrix suffix such as ``3/8``.
GENERIC_NAME_PATTERNS: tuple[str, ...] = (r"^(?P<job>.+?)(?:\s+\d+/\d+)?\s*$",)
GENERIC_LEVELS: tuple[tuple[str, ...], ...] = (("project", "job"), ("job",))


@dataclass(frozen=True)
class KeySettings:
    """How keys are extracted and which fallback levels exist (see ``docs/predictions.md``)."""

    levels: tuple[tuple[str, ...], ...] = SPACK_LEVELS
    variables: Mapping[str, str] = field(default_factory=lambda: dict(SPACK_VARIABLES))
    name_patterns: tuple[str, ...] = SPACK_NAME_PATTERNS + GENERIC_NAME_PATTERNS
    #: Add the GitLab project path as field ``project`` when it is known.
    include_project: bool = True

    def compiled_patterns(self) -> tuple[re.Pattern[str], ...]:
        return _compile(self.name_patterns)


_PATTERN_CACHE: dict[tuple[str, ...], tuple[re.Pattern[str], ...]] = {}


def _compile(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    got = _PATTERN_CACHE.get(patterns)
    if got is None:
        got = tuple(re.compile(p) for p in patterns)
        _PATTERN_CACHE[patterns] = got
    return got


# Spack's own lexical rules (spack ``lib/spack/spack/spec_parser.py``): names, bare and quoted
# values, and the set of characters Spack prints without quotes (``NO_QUOTES_NEEDED``, used by
# ``quote_if_needed`` when ``Spec.format("{variants}")`` prints a variant value).
_NAME = r"[a-zA-Z_0-9][a-zA-Z_0-9\-.]*"
_QUOTED_VALUE = r"'(?:[^']|(?<=\\)')*'" + r'|"(?:[^"]|(?<=\\)")*"'
_NO_QUOTES_NEEDED = re.compile(r"^[a-zA-Z0-9,/_.\-\[\]]+$")
#: One token of a spec's node options after ``<package>@<version>``.  A key-value value stops at
#: ``%`` here (``arch=...%gcc@12``: gantry's format glues the compiler to the arch).
_SPEC_TOKEN = re.compile(
    r"(?P<ws>\s+)"
    r"|(?P<comp>%\s*(?P<cname>[a-zA-Z_0-9][a-zA-Z_0-9\-.]*)(?:@(?P<cver>[^\s%'\"+~]+))?)"
    rf"|(?P<kv>(?P<name>{_NAME}?)(?P<op>:?==?)(?P<val>{_QUOTED_VALUE}|[a-zA-Z_0-9\-+*.,:=^~/\\]*))"
    rf"|(?P<flag>(?:\+\+|~~|--|[+~-])\s*{_NAME})"
)
#: Longest spec accepted: spack-gantry's bound is aiohttp's request-line limit (8190 bytes).
MAX_SPEC_CHARS = 8190


def _unquote(value: str) -> str:
    """Spack's ``strip_quotes_and_unescape``: drop surrounding quotes, unescape escaped quotes."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        q = value[0]
        return value[1:-1].replace("\\" + q, q)
    return value


def _quote_if_needed(value: str) -> str:
    """Spack's ``quote_if_needed``: bare when safe, else single quotes (JSON for values with ``'``)."""
    if _NO_QUOTES_NEEDED.match(value):
        return value
    return json.dumps(value) if "'" in value else f"'{value}'"


def _scan(rest: str, what: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]], str | None]:
    """Tokenize node options: boolean flags, ``name=value`` pairs, the ``%compiler``.

    Raises :class:`SpecError` at the first character Spack's grammar would not accept here.
    """
    flags: list[tuple[str, str]] = []
    pairs: list[tuple[str, str]] = []
    compiler: str | None = None
    pos = 0
    while pos < len(rest):
        m = _SPEC_TOKEN.match(rest, pos)
        if m is None or m.end() == pos:
            raise SpecError(f"{what} has unexpected characters at {rest[pos:pos + 20]!r}")
        pos = m.end()
        if m.group("ws"):
            continue
        if m.group("comp"):
            if compiler is not None:
                raise SpecError(f"{what} names two compilers")
            cv = m.group("cver")
            compiler = f"{m.group('cname')}@{cv}" if cv else m.group("cname")
        elif m.group("kv"):
            if not m.group("name"):
                raise SpecError(f"{what} has a value without a variant name")
            pairs.append((m.group("name"), _unquote(m.group("val"))))
        else:
            tok = m.group("flag")
            sign = "~" if tok[0] in "~-" else "+"
            flags.append((tok.lstrip("+~-").strip(), sign))
    return flags, pairs, compiler


def _canonical(flags: list[tuple[str, str]], pairs: list[tuple[str, str]]) -> str:
    """Canonical variant string: boolean flags sorted (``+on~off``), then ``name=value`` sorted.

    ``:=`` / ``==`` (concrete / propagated) are written ``=``; values are printed as Spack prints
    them (quoted when needed), so a bare ``languages=c,c++`` and Spack's ``languages:='c,c++'``
    are the same configuration.
    """
    flag_s = "".join(f"{sign}{name}" for name, sign in sorted(flags))
    pair_s = sorted(f"{n}={_quote_if_needed(v)}" for n, v in pairs)
    return " ".join(x for x in [flag_s, *pair_s] if x)


@functools.lru_cache(maxsize=65536)
def _norm_variants(v: str) -> str:
    """Canonical variant string of a printed variant list (``SPACK_JOB_SPEC_VARIANTS``, a trace key).

    Raises :class:`SpecError` when the string is not a Spack variant list.  Cached: a farm
    has few distinct variant strings and a year of history repeats them a million times.
    """
    v = v.strip()
    if not v:
        return ""
    flags, pairs, comp = _scan(v, "variant string")
    if comp is not None:
        raise SpecError("variant string names a compiler")
    return _canonical(flags, pairs)


def parse_spack_spec(spec: str) -> dict[str, str]:
    """Parse the spec Spack's dynamic-mapping client sends (``spack ci generate``).

    Spack sends ``{PKG_NAME}@{PKG_VERSION} {VARIANTS} arch={ARCH}%{COMPILER_NAME}@{COMPILER_VERSION}``
    (spack ``lib/spack/spack/ci/common.py``), variants as ``Spec.format("{variants}")`` prints
    them: values quoted where Spack's ``quote_if_needed`` quotes them, two spaces when there are
    none, ``%none@none`` for packages without a compiler.  The order Spack prints a spec in
    (``pkg@ver %compiler +variants arch=...``) is accepted too.  The fields are keyed exactly as
    :func:`extract_key` keys the ``SPACK_JOB_SPEC_*`` variables of the recorded job.  Raises
    :class:`SpecError` naming the problem.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise SpecError("empty spec")
    s = spec.strip()
    if len(s) > MAX_SPEC_CHARS:
        raise SpecError(f"spec longer than {MAX_SPEC_CHARS} characters")
    m = re.match(r"^(?P<package>[A-Za-z0-9_][\w.+-]*)@(?P<version>[^\s%+~'\"]+)(?P<rest>.*)$", s, re.S)
    if not m:
        raise SpecError(f"spec {spec[:80]!r} does not start with <package>@<version>")
    out = {"package": m.group("package"), "version": m.group("version")}
    flags, pairs, compiler = _scan(m.group("rest"), f"spec {spec[:80]!r}")
    variants = []
    for name, value in pairs:
        if name == "arch":
            if "arch" in out:
                raise SpecError(f"spec {spec[:80]!r} names two architectures")
            out["arch"] = value
        else:
            variants.append((name, value))
    if compiler is not None:
        out["compiler"] = compiler
    canon = _canonical(flags, variants)
    if canon:
        out["variants"] = canon
    return out


def extract_key(
    settings: KeySettings,
    *,
    job_name: str | None = None,
    variables: Mapping[str, str] | None = None,
    explicit: Mapping[str, str] | None = None,
    project: str | None = None,
) -> JobKey:
    """Build the :class:`JobKey` of a job from the sources described in the module docstring."""
    out: dict[str, str] = {}
    for k, v in (explicit or {}).items():
        if isinstance(v, str):
            out.setdefault(k, v)
    variables = variables or {}
    for fld, var in settings.variables.items():
        v = variables.get(var)
        if isinstance(v, str) and v.strip():
            out.setdefault(fld, v.strip())
    # Spack splits the compiler in two variables; the key has one field.
    if "compiler" not in out and "compiler_name" in out:
        cv = out.get("compiler_version")
        out["compiler"] = f"{out['compiler_name']}@{cv}" if cv else out["compiler_name"]
    out.pop("compiler_name", None)
    out.pop("compiler_version", None)
    if "variants" in out:
        try:
            out["variants"] = _norm_variants(out["variants"])
        except SpecError:  # not Spack's syntax: keep it, whitespace collapsed
            out["variants"] = " ".join(out["variants"].split())
    if job_name:
        for pat in settings.compiled_patterns():
            m = pat.search(job_name)
            if m:
                for k, v in m.groupdict().items():
                    if v:
                        out.setdefault(k, v)
                break
    if settings.include_project and project:
        out.setdefault("project", project)
    return JobKey.of(out)


def level_keys(key: JobKey, levels: Iterable[tuple[str, ...]]) -> list[tuple[int, tuple[str, ...]]]:
    """``(level index, level values)`` for every level the key fills, most specific first."""
    out = []
    for i, lv in enumerate(levels):
        k = key.level_key(lv)
        if k is not None:
            out.append((i, k))
    return out
