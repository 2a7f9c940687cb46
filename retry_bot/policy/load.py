"""Read and validate ``policy.toml``: every problem at once, each with its key path and line.

The reader walks the TOML tree once.  Each accessor checks one value (type,
range, quantity, regex...), records a :class:`~retry_bot.problems.Problem` when
it is wrong and falls back to the default, so a single pass reports all
problems; :func:`policy_from_dict` raises one :class:`ConfigError` with the
whole list at the end.  Unknown keys are problems too (a typo such as
``max_memmory`` must not be silently ignored), with a "did you mean" hint.

A rule (``[families.*]``, ``[categories.*]``, ``[[overrides]]``) may set
``min_probability``, a number above 0 and at most 1: act on a verdict only when
the classifier is at least that sure of it.  Only verdicts that carry a
probability (the learned fallback's, rule ``learned:<family>``) are held to it;
a rule's verdict carries none and is unaffected by any floor.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from importlib import resources
from pathlib import Path
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from retry_bot.model import FAMILIES, Family
from retry_bot.policy.model import (
    MAX_BUDGET,
    PIPELINE_SOURCES,
    Action,
    Backoff,
    BeyondTop,
    CpuRule,
    LastAttempt,
    MemoryFormat,
    Override,
    Placement,
    Policy,
    ResizeRule,
    SCALE_REQUEST,
    Rule,
    RuleUpdate,
    RunnerClass,
    SourceRule,
    StormRule,
    TimeRule,
    UnknownLimit,
    VariableNames,
)
from retry_bot.policy.units import DurationError, parse_duration
from retry_bot.problems import ConfigError, Problem, find_line, kind, number_problem
from runner_wrapper.quantity import QuantityError, parse_cpu, parse_memory

__all__ = [
    "load_policy",
    "parse_policy",
    "policy_from_dict",
    "default_policy",
    "default_policy_text",
    "SCHEMA_VERSION",
]

#: The ``version`` key this code reads.
SCHEMA_VERSION = 1
#: File name of the annotated default inside this package (a copy of ``config/policy.toml``).
DEFAULT_POLICY_RESOURCE = "default_policy.toml"

_T = TypeVar("_T")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CATEGORY_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")

_TOP_KEYS = ("version", "dry_run", "skip_superseded", "skip_allow_failure", "max_job_age",
             "max_attempts", "variables", "families", "categories", "resize", "runner_classes",
             "placement", "pipeline_sources", "overrides", "prediction", "storm")
_STORM_KEYS = ("enabled", "families", "window", "trip_failures", "probes", "probe_interval", "release_successes",
               "release_per_minute")
_RULE_KEYS = ("action", "budget", "backoff", "min_probability")
_BACKOFF_KEYS = ("initial", "factor", "max")
_VARIABLE_KEYS = ("memory_limit", "memory_request", "cpu_limit", "cpu_request", "helper_memory_limit",
                  "helper_memory_request", "memory_format", "raise_request")
_RESIZE_KEYS = ("ratio", "min_bump", "granularity", "max_memory", "default_memory", "unknown_limit",
                "helper_default_memory", "helper_max_memory", "beyond_top",
                "last_attempt", "cpu", "time")
_CPU_KEYS = ("ratio", "min_bump", "max_cpus", "default")
_TIME_KEYS = ("ratio", "min_bump", "max", "default")
_CLASS_KEYS = ("name", "tags", "max_memory", "max_cpus", "max_memory_request", "default_memory",
               "expensive", "placement_only", "max_concurrent_per_user", "max_concurrent_per_project")
_PLACEMENT_KEYS = ("project", "job", "runner_class")
_SOURCE_KEYS = ("budget_factor", "max_budget", "allow_expensive")
_OVERRIDE_KEYS = ("project", "job", "ref", "family", "category", "action", "budget", "backoff",
                  "min_probability", "max_memory", "dry_run")


# --------------------------------------------------------------------------- entry points


def load_policy(path: Path | str) -> Policy:
    """Read, parse and validate a policy file.

    Raises :class:`ConfigError` listing every problem (an unreadable file is one problem).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([Problem("", "file not found", source=str(p))]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([Problem("", f"cannot read: {exc}", source=str(p))]) from None
    return parse_policy(text, source=str(p))


def parse_policy(text: str, source: str = "<string>") -> Policy:
    """Parse policy TOML text; raises :class:`ConfigError` with every problem found."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column \d+\)", msg)
        line = int(m.group(1)) if m else None
        raise ConfigError([Problem("", f"not valid TOML: {msg}", line, source)]) from None
    return policy_from_dict(data, source=source, text=text)


def policy_from_dict(data: Mapping[str, Any], source: str = "<dict>", text: str | None = None) -> Policy:
    """Validate an already-parsed TOML document (e.g. a ``[policy]`` table of a bot config).

    ``text``, when given, is the TOML source used to find line numbers.
    """
    reader = _Reader(text, source)
    policy = reader.policy(data)
    if reader.problems:
        # In file order (problems without a line last), as an editor would list them.
        ordered = sorted(reader.problems, key=lambda pr: (pr.line is None, pr.line or 0))
        raise ConfigError(ordered)
    return policy


def default_policy_text() -> str:
    """The annotated default policy shipped with the package (``retry-bot policy init`` writes it)."""
    return resources.files("retry_bot.policy").joinpath(DEFAULT_POLICY_RESOURCE).read_text(encoding="utf-8")


def default_policy() -> Policy:
    """The policy of the annotated default file."""
    return parse_policy(default_policy_text(), source=f"retry_bot/policy/{DEFAULT_POLICY_RESOURCE}")


# --------------------------------------------------------------------------- line numbers


class _Lines:
    """Map key paths (``runner_classes[1].tags``) to line numbers of a TOML text."""

    _HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
    _KEY = re.compile(r"^\s*((?:[A-Za-z0-9_\-]+|\"[^\"]*\"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_\-]+|\"[^\"]*\"|'[^']*'))*)\s*=")
    _INLINE_KEY = re.compile(r"[{,]\s*([A-Za-z0-9_\-]+)\s*=")

    def __init__(self, text: str | None):
        self.text = text
        self.lines: dict[str, int] = {}
        if text:
            self._scan(text)

    @staticmethod
    def _split(dotted: str) -> list[str]:
        parts, cur, quote = [], "", ""
        for ch in dotted:
            if quote:
                if ch == quote:
                    quote = ""
                else:
                    cur += ch
            elif ch in "\"'":
                quote = ch
            elif ch == ".":
                parts.append(cur.strip())
                cur = ""
            else:
                cur += ch
        parts.append(cur.strip())
        return parts

    def _scan(self, text: str) -> None:
        counts: dict[str, int] = {}  # array-of-tables name -> tables seen so far
        table = ""
        in_multiline = False
        for n, line in enumerate(text.splitlines(), start=1):
            if in_multiline:
                if '"""' in line or "'''" in line:
                    in_multiline = False
                continue
            h = self._HEADER.match(line)
            if h:
                names = self._split(h.group(2))
                is_array = h.group(1) == "[["
                plain = indexed = ""
                for j, name in enumerate(names):
                    plain = f"{plain}.{name}" if plain else name
                    indexed = f"{indexed}.{name}" if indexed else name
                    if is_array and j == len(names) - 1:
                        counts[plain] = counts.get(plain, 0) + 1
                        indexed += f"[{counts[plain] - 1}]"
                    elif plain in counts:
                        indexed += f"[{counts[plain] - 1}]"
                table = indexed
                self.lines.setdefault(table, n)
                continue
            k = self._KEY.match(line)
            if k:
                key = ".".join(self._split(k.group(1)))
                path = f"{table}.{key}" if table else key
                self.lines.setdefault(path, n)
                rest = line[k.end():]
                for sub in self._INLINE_KEY.findall(rest):
                    self.lines.setdefault(f"{path}.{sub}", n)
                if rest.count('"""') == 1 or rest.count("'''") == 1:
                    in_multiline = True

    def find(self, path: str) -> int | None:
        """The line of ``path``, else of its closest enclosing table or key; ``None`` without text."""
        if not self.text:
            return None
        p = path
        while p:
            if p in self.lines:
                return self.lines[p]
            if p.endswith("]"):  # an inline array of tables: fall back to its key
                p = re.sub(r"\[\d+\]$", "", p)
                continue
            if "." not in p:
                break
            p = p.rsplit(".", 1)[0]
        return find_line(self.text, path)


# --------------------------------------------------------------------------- the reader


class _Reader:
    def __init__(self, text: str | None, source: str):
        self.source = source
        self.lines = _Lines(text)
        self.problems: list[Problem] = []

    # ---------------------------------------------------------------- plumbing

    def problem(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message, self.lines.find(path), self.source))

    def table(self, value: Any, path: str, allowed: Iterable[str]) -> dict[str, Any]:
        """``value`` as a table; every key not in ``allowed`` is a problem (with a hint)."""
        if not isinstance(value, Mapping):
            self.problem(path, f"must be a table, not {_kind(value)}")
            return {}
        allowed = tuple(allowed)
        for key in value:
            if key not in allowed:
                self.problem(_join(path, key), f"unknown key{_hint(key, allowed)}")
        return dict(value)

    def take(self, table: Mapping[str, Any], key: str, path: str, default: _T,
             convert: Callable[[Any], _T], what: str) -> _T:
        """Convert ``table[key]`` (or return ``default``); a conversion error is a problem."""
        if key not in table:
            return default
        where = _join(path, key)
        try:
            return convert(table[key])
        except (ValueError, TypeError) as exc:
            detail = str(exc) or what
            self.problem(where, detail if isinstance(exc, (QuantityError, DurationError, _Bad)) else f"must be {what}")
            return default

    # ---------------------------------------------------------------- the tree

    def policy(self, data: Mapping[str, Any]) -> Policy:
        top = self.table(data, "", _TOP_KEYS)
        base = Policy()
        version = self.take(top, "version", "", SCHEMA_VERSION, _int(1, 10**6), "an integer")
        if version != SCHEMA_VERSION:
            self.problem("version", f"this retry-bot reads policy version {SCHEMA_VERSION}, not {version}")
        max_age = self.take(top, "max_job_age", "", base.max_job_age, parse_duration, "a duration")
        variables = self.variables(top.get("variables", {}), "variables")
        families = self.families(top.get("families", {}), "families")
        categories = self.categories(top.get("categories", {}), "categories")
        resize = self.resize(top.get("resize", {}), "resize")
        classes = self.runner_classes(top.get("runner_classes", []), "runner_classes")
        placement = self.placements(top.get("placement", []), "placement", classes)
        sources = self.sources(top.get("pipeline_sources", {}), "pipeline_sources")
        overrides = self.overrides(top.get("overrides", []), "overrides")
        prediction = self.prediction(top.get("prediction"), "prediction")
        storm = self.storm(top.get("storm"), "storm")
        policy = Policy(
            dry_run=self.take(top, "dry_run", "", base.dry_run, _bool, "true or false"),
            skip_superseded=self.take(top, "skip_superseded", "", base.skip_superseded, _bool, "true or false"),
            skip_allow_failure=self.take(top, "skip_allow_failure", "", base.skip_allow_failure, _bool,
                                         "true or false"),
            max_job_age=max_age if max_age else None,
            max_attempts=self.take(top, "max_attempts", "", base.max_attempts, _int(1, MAX_BUDGET * 2 + 1),
                                   f"an integer from 1 to {MAX_BUDGET * 2 + 1}"),
            variables=variables,
            families=families,
            categories=categories,
            resize=resize,
            runner_classes=classes,
            placement=placement,
            pipeline_sources=sources,
            overrides=overrides,
            prediction=prediction,
            storm=storm,
        )
        self.cross_checks(policy)
        return policy

    def variables(self, value: Any, path: str) -> VariableNames:
        t = self.table(value, path, _VARIABLE_KEYS)
        d = VariableNames()
        names = {}
        for key in ("memory_limit", "memory_request", "cpu_limit", "cpu_request", "helper_memory_limit",
                    "helper_memory_request"):
            names[key] = self.take(t, key, path, getattr(d, key), _env_name,
                                   'a variable name such as "KUBERNETES_MEMORY_LIMIT", or "" for none')
        v = VariableNames(
            **names,
            memory_format=self.take(t, "memory_format", path, d.memory_format, _enum(MemoryFormat),
                                    "binary, decimal or bytes"),
            raise_request=self.take(t, "raise_request", path, d.raise_request, _raise_request,
                                    'true, false or "scale"'),
        )
        if not v.memory_limit and not v.memory_request:
            self.problem(_join(path, "memory_limit"),
                         "memory_limit and memory_request are both empty: a resize could not set any memory")
        if v.memory_limit and v.memory_limit == v.memory_request:
            self.problem(_join(path, "memory_request"), "must differ from memory_limit")
        if v.cpu_limit and v.cpu_limit == v.cpu_request:
            self.problem(_join(path, "cpu_request"), "must differ from cpu_limit")
        return v

    def backoff(self, value: Any, path: str, default: Backoff) -> Backoff:
        t = self.table(value, path, _BACKOFF_KEYS)
        initial = self.take(t, "initial", path, default.initial, _duration(hi=86400.0), "a duration")
        factor = self.take(t, "factor", path, default.factor, _float(1.0, 10.0), "a number from 1 to 10")
        maximum = self.take(t, "max", path, default.max, _duration(hi=7 * 86400.0), "a duration")
        if maximum < initial:
            self.problem(_join(path, "max"), f"is below initial ({maximum:g}s < {initial:g}s)")
        return Backoff(initial=initial, factor=factor, max=maximum)

    def rule_update(self, t: Mapping[str, Any], path: str, base_backoff: Backoff) -> RuleUpdate:
        """A rule's keys.  ``min_probability`` (above 0, at most 1) holds only verdicts that carry a
        probability (the learned fallback's); a rule's verdict carries none and is never held to it."""
        action = self.take(t, "action", path, None, _enum(Action), "retry, resize or none")
        budget = self.take(t, "budget", path, None, _int(0, MAX_BUDGET), f"an integer from 0 to {MAX_BUDGET}")
        backoff = self.backoff(t["backoff"], _join(path, "backoff"), base_backoff) if "backoff" in t else None
        min_probability = self.take(t, "min_probability", path, None, _float(0.0, 1.0, open_low=True),
                                    "a number above 0 and at most 1")
        return RuleUpdate(action=action, budget=budget, backoff=backoff, min_probability=min_probability)

    def families(self, value: Any, path: str) -> dict[str, Rule]:
        defaults = Policy().families
        t = self.table(value, path, FAMILIES)
        out = dict(defaults)
        for fam, body in t.items():
            if fam not in FAMILIES:
                continue
            where = _join(path, fam)
            rt = self.table(body, where, _RULE_KEYS)
            upd = self.rule_update(rt, where, defaults[fam].backoff)
            out[fam] = upd.apply(defaults[fam])
        return out

    def categories(self, value: Any, path: str) -> dict[str, RuleUpdate]:
        if not isinstance(value, Mapping):
            self.problem(path, f"must be a table, not {_kind(value)}")
            return {}
        out: dict[str, RuleUpdate] = {}
        for cat, body in value.items():
            where = _join(path, cat)
            if not _CATEGORY_NAME.match(cat):
                self.problem(where, "a category name is letters, digits, '_', '-' and '.'")
                continue
            rt = self.table(body, where, _RULE_KEYS)
            upd = self.rule_update(rt, where, Backoff())
            if upd.empty:
                self.problem(where, "sets nothing (give action, budget, backoff or min_probability)")
            out[cat] = upd
        return out

    def _bump(self, t: dict[str, Any], path: str, defaults: Any,
              fields: Mapping[str, tuple[Callable[[Any], Any], str]]) -> dict[str, Any]:
        """The keys of a bump rule (memory, CPU, time): ``ratio`` (one check for all three), then ``fields``."""
        out = {"ratio": self.take(t, "ratio", path, defaults.ratio, _float(1.0, 10.0, open_low=True),
                                  "a number above 1 and at most 10")}
        for key, (conv, what) in fields.items():
            out[key] = self.take(t, key, path, getattr(defaults, key), conv, what)
        return out

    def _not_above(self, rule: Any, path: str, key: str, cap: str) -> None:
        """A rule's default (assumed in force when nothing says) may not exceed its cap."""
        value = getattr(rule, key)
        if value is not None and value > getattr(rule, cap):
            self.problem(_join(path, key), f"is above {cap}")

    def resize(self, value: Any, path: str) -> ResizeRule:
        t = self.table(value, path, _RESIZE_KEYS)
        memory = (_memory(), "a memory quantity")
        r = ResizeRule(
            **self._bump(t, path, ResizeRule(), {
                "min_bump": (_memory(allow_zero=True), "a memory quantity"),
                "granularity": memory, "max_memory": memory, "default_memory": memory,
                "helper_default_memory": memory, "helper_max_memory": memory,
                "unknown_limit": (_enum(UnknownLimit), "max or none"),
                "beyond_top": (_enum(BeyondTop), "cap or stop"),
                "last_attempt": (_enum(LastAttempt), "bump or max")}),
            cpu=self.cpu_rule(t["cpu"], _join(path, "cpu")) if "cpu" in t else None,
            time=self.time_rule(t["time"], _join(path, "time")) if "time" in t else None,
        )
        if r.granularity > r.max_memory:
            self.problem(_join(path, "granularity"), "is larger than max_memory")
        self._not_above(r, path, "default_memory", "max_memory")
        if r.helper_max_memory is not None:
            self._not_above(r, path, "helper_default_memory", "helper_max_memory")
        else:
            self._not_above(r, path, "helper_default_memory", "max_memory")
        return r

    def cpu_rule(self, value: Any, path: str) -> CpuRule:
        t = self.table(value, path, _CPU_KEYS)
        cpus = (_cpu(), "a CPU quantity")
        r = CpuRule(**self._bump(t, path, CpuRule(), {
            "min_bump": (_cpu(allow_zero=True), "a CPU quantity"), "max_cpus": cpus, "default": cpus}))
        self._not_above(r, path, "default", "max_cpus")
        return r

    def time_rule(self, value: Any, path: str) -> TimeRule:
        t = self.table(value, path, _TIME_KEYS)
        minute = (_duration(lo=60.0), "a duration of at least 1m")
        r = TimeRule(**self._bump(t, path, TimeRule(), {
            "min_bump": (parse_duration, "a duration"), "max": minute, "default": minute}))
        self._not_above(r, path, "default", "max")
        return r

    def _array(self, value: Any, path: str) -> list[Any]:
        if isinstance(value, list):
            return value
        self.problem(path, f"must be an array of tables ([[{path}]]), not {_kind(value)}")
        return []

    def runner_classes(self, value: Any, path: str) -> tuple[RunnerClass, ...]:
        out: list[RunnerClass] = []
        seen: set[str] = set()
        prev: tuple[str, int] | None = None
        for i, body in enumerate(self._array(value, path)):
            where = f"{path}[{i}]"
            t = self.table(body, where, _CLASS_KEYS)
            if not t and not isinstance(body, Mapping):
                continue
            ok = True
            name = self.take(t, "name", where, "", _nonempty_str, "a non-empty string")
            if "name" not in t:
                self.problem(where, "needs a name")
                ok = False
            elif name in seen:
                self.problem(_join(where, "name"), f"duplicate runner class {name!r}")
            seen.add(name)
            tags = self.take(t, "tags", where, (), _tags, "a non-empty array of non-empty strings")
            if not tags:
                if "tags" not in t:
                    self.problem(where, "needs tags (the runner tags that route a job to this class)")
                ok = False
            max_memory = self.take(t, "max_memory", where, 0, _memory(), "a memory quantity")
            max_cpus = self.take(t, "max_cpus", where, 0.0, _cpu(), "a CPU quantity")
            for key, v in (("max_memory", max_memory), ("max_cpus", max_cpus)):
                if key not in t:
                    self.problem(where, f"needs {key}")
                if not v:
                    ok = False
            rc = RunnerClass(
                name=name, tags=tags, max_memory=max_memory, max_cpus=max_cpus,
                max_memory_request=self.take(t, "max_memory_request", where, None, _memory(),
                                             "a memory quantity"),
                default_memory=self.take(t, "default_memory", where, None, _memory(), "a memory quantity"),
                expensive=self.take(t, "expensive", where, False, _bool, "true or false"),
                placement_only=self.take(t, "placement_only", where, False, _bool, "true or false"),
                max_concurrent_per_user=self.take(t, "max_concurrent_per_user", where, None, _int(0, 100_000),
                                                  "an integer from 0 to 100000"),
                max_concurrent_per_project=self.take(t, "max_concurrent_per_project", where, None,
                                                     _int(0, 100_000), "an integer from 0 to 100000"),
            )
            if ok:
                for key in ("max_memory_request", "default_memory"):
                    v = getattr(rc, key)
                    if v is not None and v > rc.max_memory:
                        self.problem(_join(where, key), f"is above max_memory of class {name!r}")
                out.append(rc)
            if max_memory:
                if prev is not None and max_memory < prev[1]:
                    self.problem(_join(where, "max_memory"),
                                 f"the ladder must be ordered by max_memory: class {name or i!r} has less than "
                                 f"{prev[0]!r} before it")
                prev = (name or str(i - 1), max_memory)
        return tuple(out)

    def placements(self, value: Any, path: str, classes: tuple[RunnerClass, ...]) -> tuple[Placement, ...]:
        names = [rc.name for rc in classes]
        out: list[Placement] = []
        for i, body in enumerate(self._array(value, path)):
            where = f"{path}[{i}]"
            t = self.table(body, where, _PLACEMENT_KEYS)
            project = self.take(t, "project", where, None, _regex, "a regular expression")
            job = self.take(t, "job", where, None, _regex, "a regular expression")
            if "project" not in t and "job" not in t:
                self.problem(where, "needs a project or job pattern (or both)")
            cls = self.take(t, "runner_class", where, "", _nonempty_str, "a runner class name")
            if "runner_class" not in t:
                self.problem(where, "needs runner_class")
            elif cls and cls not in names:
                self.problem(_join(where, "runner_class"),
                             f"no runner class {cls!r}{_hint(cls, names)}" if names else
                             f"no runner class {cls!r}: [[runner_classes]] is empty")
            out.append(Placement(runner_class=cls, project=project, job=job))
        return tuple(out)

    def sources(self, value: Any, path: str) -> dict[str, SourceRule]:
        t = self.table(value, path, PIPELINE_SOURCES)
        out: dict[str, SourceRule] = {}
        for name, body in t.items():
            if name not in PIPELINE_SOURCES:
                continue
            where = _join(path, name)
            st = self.table(body, where, _SOURCE_KEYS)
            d = SourceRule()
            out[name] = SourceRule(
                budget_factor=self.take(st, "budget_factor", where, d.budget_factor, _float(0.0, 10.0),
                                        "a number from 0 to 10"),
                max_budget=self.take(st, "max_budget", where, d.max_budget, _int(0, MAX_BUDGET),
                                     f"an integer from 0 to {MAX_BUDGET}"),
                allow_expensive=self.take(st, "allow_expensive", where, d.allow_expensive, _bool,
                                          "true or false"),
            )
        return out

    def overrides(self, value: Any, path: str) -> tuple[Override, ...]:
        out: list[Override] = []
        for i, body in enumerate(self._array(value, path)):
            where = f"{path}[{i}]"
            t = self.table(body, where, _OVERRIDE_KEYS)
            fam = self.take(t, "family", where, None, _enum(Family), "a family")
            ov = Override(
                project=self.take(t, "project", where, None, _regex, "a regular expression"),
                job=self.take(t, "job", where, None, _regex, "a regular expression"),
                ref=self.take(t, "ref", where, None, _regex, "a regular expression"),
                family=fam,
                category=self.take(t, "category", where, None, _nonempty_str, "a category name"),
                update=self.rule_update(t, where, Backoff()),
                max_memory=self.take(t, "max_memory", where, None, _memory(), "a memory quantity"),
                dry_run=self.take(t, "dry_run", where, None, _bool, "true or false"),
            )
            if isinstance(body, Mapping) and ov.update.empty and ov.max_memory is None and ov.dry_run is None \
                    and not any(k in t for k in ("action", "budget", "backoff", "min_probability", "max_memory",
                                                 "dry_run")):
                self.problem(where, "changes nothing (give action, budget, backoff, min_probability, max_memory "
                                    "or dry_run)")
            out.append(ov)
        return tuple(out)

    def prediction(self, value: Any, path: str) -> dict[str, Any]:
        """The ``[prediction]`` table belongs to the predictor: validated by it, kept as written."""
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.problem(path, f"must be a table, not {_kind(value)}")
            return {}
        from retry_bot.predict.settings import parse_prediction_settings  # deferred: predict imports policy

        try:
            _, found = parse_prediction_settings(value, path, None)
        except Exception as exc:  # a bug there must not hide the policy's own problems
            self.problem(path, f"cannot be checked: {exc}")
            return dict(value)
        for pr in found:
            self.problem(pr.path or path, pr.message)
        return dict(value)

    def storm(self, value: Any, path: str) -> StormRule | None:
        """The ``[storm]`` table (retry_bot/storm.py); absent or ``enabled = false``: no brake."""
        if value is None:
            return None
        t = self.table(value, path, _STORM_KEYS)
        d = StormRule()
        enabled = self.take(t, "enabled", path, True, _bool, "true or false")
        families = self.take(t, "families", path, d.families, _families, "a list of family names")
        r = StormRule(
            window=self.take(t, "window", path, d.window, _duration(60.0, 86400.0),
                             "a duration from 1m to 1d"),
            trip_failures=self.take(t, "trip_failures", path, d.trip_failures, _int(2, 100000),
                                    "an integer from 2 to 100000"),
            probes=self.take(t, "probes", path, d.probes, _int(1, 1000), "an integer from 1 to 1000"),
            probe_interval=self.take(t, "probe_interval", path, d.probe_interval, _duration(10.0, 86400.0),
                                     "a duration from 10s to 1d"),
            release_successes=self.take(t, "release_successes", path, d.release_successes, _int(1, 1000),
                                        "an integer from 1 to 1000"),
            release_per_minute=self.take(t, "release_per_minute", path, d.release_per_minute, _int(0, 100000),
                                         "an integer from 0 (all at once) to 100000"),
            families=families,
        )
        return r if enabled else None

    # ---------------------------------------------------------------- whole-policy checks

    def cross_checks(self, p: Policy) -> None:
        """Checks across sections, skipped where a value involved already has a problem."""
        bad = {pr.path for pr in self.problems}
        timeout = p.families[Family.TIMEOUT.value]
        uses_timeout_resize = timeout.action == Action.RESIZE or any(
            ov.update.action == Action.RESIZE and ov.family == Family.TIMEOUT for ov in p.overrides)
        if uses_timeout_resize and p.resize.cpu is None and p.resize.time is None:
            self.problem("families.timeout.action",
                         "resize on a timeout needs [resize.cpu] or [resize.time] (memory does not fix a timeout)")
        if p.resize.cpu is not None and p.runner_classes and "resize.cpu.default" not in bad:
            top = max(rc.max_cpus for rc in p.runner_classes)
            if p.resize.cpu.default > top:
                self.problem("resize.cpu.default", "is above every runner class's max_cpus")


# --------------------------------------------------------------------------- converters


#: A memory value without unit below this (1 MiB) is refused as a missing unit.
MIN_BARE_BYTES = 2**20


class _Bad(ValueError):
    """A conversion error whose message is shown as is."""


_kind = kind


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _hint(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _raise_request(v: Any) -> bool | str:
    if v == SCALE_REQUEST or isinstance(v, bool):
        return v
    raise _Bad(f'must be true, false or "{SCALE_REQUEST}", not {v!r}' if isinstance(v, str)
               else f'must be true, false or "{SCALE_REQUEST}", not {_kind(v)}')


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise _Bad(f"must be true or false, not {_kind(v)}")
    return v


def _number(lo: float, hi: float, *, integer: bool = False, open_low: bool = False) -> Callable[[Any], Any]:
    """A converter that accepts a number in ``[lo, hi]`` (``(lo, hi]`` with ``open_low``), else says why."""
    def conv(v: Any) -> Any:
        problem = number_problem(v, integer=integer, low=lo, high=hi, open_low=open_low)
        if problem:
            raise _Bad(problem)
        return int(v) if integer else float(v)
    return conv


def _int(lo: int, hi: int) -> Callable[[Any], int]:
    return _number(lo, hi, integer=True)


def _float(lo: float, hi: float, open_low: bool = False) -> Callable[[Any], float]:
    return _number(lo, hi, open_low=open_low)


def _zero(v: Any) -> bool:
    """``0`` or ``"0"`` (a bump of nothing), never ``false``."""
    return (v == 0 or v == "0") and not isinstance(v, bool)


def _memory(allow_zero: bool = False) -> Callable[[Any], int]:
    def conv(v: Any) -> int:
        if allow_zero and _zero(v):
            return 0
        if isinstance(v, float):
            raise _Bad(f"{v!r}: write memory as a quantity string (\"4Gi\", \"500M\") or whole bytes")
        bare = v if isinstance(v, int) and not isinstance(v, bool) else \
            (int(v.strip()) if isinstance(v, str) and v.strip().isdigit() else None)
        if bare is not None and 0 < bare < MIN_BARE_BYTES:
            # ``max_memory = 12`` is 12 bytes, never what was meant: no build fits in under 1 MiB.
            raise _Bad(f"{v!r} has no unit, so it means {bare} bytes: write the unit, e.g. \"{bare}Gi\" or "
                       f"\"{bare}Mi\" (a number without unit is bytes, and is accepted from 1Mi up)")
        return parse_memory(v)
    return conv


def _cpu(allow_zero: bool = False) -> Callable[[Any], float]:
    def conv(v: Any) -> float:
        return 0.0 if allow_zero and _zero(v) else parse_cpu(v)
    return conv


def _duration(lo: float | None = None, hi: float | None = None) -> Callable[[Any], float]:
    """A duration (``"90s"``, ``"15m"``, seconds) within ``lo``..``hi`` seconds (either may be open)."""
    def conv(v: Any) -> float:
        s = parse_duration(v)
        if lo is not None and hi is not None and not lo <= s <= hi:
            raise _Bad(f"{v!r} is out of range (from {lo:g} to {hi:g} seconds)")
        if hi is not None and s > hi:
            raise _Bad(f"{v!r} is too long (at most {hi:g} seconds)")
        if lo is not None and s < lo:
            raise _Bad(f"{v!r} is too short (at least {lo:g} seconds)")
        return s
    return conv


def _families(v: Any) -> tuple[str, ...]:
    if not isinstance(v, list) or not v or not all(isinstance(x, str) for x in v):
        raise _Bad(f"must be a non-empty list of family names ({', '.join(FAMILIES)})")
    bad = [x for x in v if x not in FAMILIES]
    if bad:
        raise _Bad(f"unknown famil{'y' if len(bad) == 1 else 'ies'} {', '.join(map(repr, bad))} "
                   f"(one of {', '.join(FAMILIES)}){_hint(bad[0], FAMILIES)}")
    return tuple(dict.fromkeys(v))


def _enum(cls: type) -> Callable[[Any], Any]:
    values = [m.value for m in cls]

    def conv(v: Any) -> Any:
        if not isinstance(v, str) or v not in values:
            raise _Bad(f"{v!r} is not one of {', '.join(values)}{_hint(str(v), values)}")
        return cls(v)
    return conv


def _env_name(v: Any) -> str:
    if not isinstance(v, str) or (v and not _ENV_NAME.match(v)):
        raise _Bad(f"{v!r} is not a variable name (letters, digits, '_'; \"\" for none)")
    return v


def _nonempty_str(v: Any) -> str:
    if not isinstance(v, str) or not v.strip():
        raise _Bad(f"must be a non-empty string, not {v!r}")
    return v


def _tags(v: Any) -> tuple[str, ...]:
    if not isinstance(v, list) or not v:
        raise _Bad("must be a non-empty array of tags")
    if not all(isinstance(x, str) and x.strip() for x in v):
        raise _Bad("every tag must be a non-empty string")
    return tuple(v)


def _regex(v: Any) -> re.Pattern[str]:
    if not isinstance(v, str):
        raise _Bad(f"must be a regular expression string, not {_kind(v)}")
    try:
        return re.compile(v)
    except re.error as exc:
        raise _Bad(f"{v!r} is not a valid regular expression: {exc}") from None

