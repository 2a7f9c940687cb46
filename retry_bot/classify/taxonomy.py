"""The failure taxonomy: ordered, documented rules loaded from TOML.

The shipped default is ``retry_bot/classify/taxonomy.toml`` (a copy of
``config/taxonomy.toml``, kept identical by a test).  Admins extend or override
it with further files, applied in order:

* a ``[[rule]]`` whose ``name`` is new is added;
* a ``[[rule]]`` whose ``name`` already exists is merged key by key over the
  earlier one (``{name = "killed-bare", enabled = false}`` disables a rule,
  ``{name = "...", stage = "diagnostic"}`` moves it);
* ``[stages.NAME]`` tables add or change stages; ``stage_order`` replaces the
  precedence of stages;
* ``[families.NAME]`` changes a family's description and suggested action;
* ``[fallback]`` changes the verdict when nothing matches; ``[learned]`` turns the learned
  fallback on or off and sets how sure it must be (``min_probability``).

Every problem in every file is collected and raised at once as a
:class:`~retry_bot.problems.ConfigError`, each with its key path and line.

Patterns are matched against single lines of the cleaned trace (ANSI colours,
GitLab section markers and carriage-return overwrites removed).  Each pattern
(each top-level alternative) must contain a literal of at least
:data:`MIN_NEEDLE` characters: the classifier looks for that literal first
(a fast substring search from the end of the trace) and runs the regular
expression only on the lines that contain it, which keeps classification of
a 256 KiB tail in the millisecond range and immune to pathological input.
"""

from __future__ import annotations

import dataclasses
import re
import re._constants as sre_constants  # type: ignore[import-not-found]
import re._parser as sre_parse  # type: ignore[import-not-found]
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from retry_bot.model import FAMILIES, Family
from retry_bot.policy.model import Action
from retry_bot.problems import ConfigError, Problem, find_line

__all__ = [
    "MIN_NEEDLE",
    "ACTIONS",
    "RESOLVE_MODES",
    "Pattern",
    "RecordCondition",
    "Rule",
    "Stage",
    "FamilyInfo",
    "Taxonomy",
    "load_taxonomy",
    "default_taxonomy_text",
]

#: Shortest literal a pattern must contain (see the module docstring).
MIN_NEEDLE = 3
#: Suggested default actions per family (the policy decides for real): the policy's actions.
ACTIONS: tuple[str, ...] = tuple(a.value for a in Action)
#: How a stage chooses among its matching rules.
RESOLVE_MODES = ("first", "last")

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.\-]*$")
_RULE_KEYS = {
    "name", "category", "family", "description", "stage", "priority", "confidence", "enabled",
    "ignore_case", "failure_reasons", "statuses", "exit_codes", "patterns", "record", "job_name",
    "job_stage", "notes", "keywords", "sections", "corroborated_by", "last_command", "outside_cgroup",
}
_CONDITION_KEYS = ("failure_reasons", "statuses", "exit_codes", "patterns", "record", "job_name", "job_stage",
                   "sections", "last_command")
_RECORD_KEYS = {"oom_kills_at_least", "oom_kills_at_most", "peak_to_limit_at_least"}
_TOP_KEYS = {"schema", "stage_order", "stages", "families", "fallback", "learned", "rule", "description"}


@dataclass(frozen=True)
class Pattern:
    """One compiled trace pattern and the literals that must appear for it to match."""

    source: str
    regex: re.Pattern[bytes]
    #: Literals (lower-cased when ``ignore_case``); every match contains one of them.
    needles: tuple[bytes, ...]
    ignore_case: bool


@dataclass(frozen=True)
class RecordCondition:
    """Conditions on a verified usage record (all given ones must hold)."""

    oom_kills_at_least: int | None = None
    oom_kills_at_most: int | None = None
    #: ``usage.memory_peak_bytes / limits.memory_limit_bytes`` at least this.
    peak_to_limit_at_least: float | None = None


@dataclass(frozen=True)
class Rule:
    """One classification rule: every condition it has must hold for it to match."""

    name: str
    category: str
    family: Family
    description: str
    stage: str
    priority: int = 100
    confidence: str = "strong"
    enabled: bool = True
    ignore_case: bool = False
    failure_reasons: frozenset[str] | None = None
    statuses: frozenset[str] | None = None
    exit_codes: frozenset[int] | None = None
    patterns: tuple[Pattern, ...] = ()
    record: RecordCondition | None = None
    job_name: re.Pattern[str] | None = None
    job_stage: re.Pattern[str] | None = None
    #: Where the rule came from (file name), for ``--format json`` and docs.
    origin: str = ""
    #: True when the admin gave explicit pre-filter ``keywords``.
    keywords: bool = False
    #: The runner section the failure happened in must be one of these (see ``structure.py``).
    sections: frozenset[str] | None = None
    #: At least one of these must also match somewhere in the stage's window (any line).
    corroborated_by: tuple[Pattern, ...] = ()
    #: Regex on the last ``$ command`` the script echoed.
    last_command: re.Pattern[str] | None = None
    #: OOM evidence from a cgroup the runner wrapper does not measure (docker-in-docker, buildkit,
    #: services, the helper container): a verified record saying "no OOM" does not contradict it.
    outside_cgroup: bool = False


@dataclass(frozen=True)
class Stage:
    name: str
    description: str
    #: ``first``: the first matching rule (by priority) wins; ``last``: the rule
    #: whose match is latest in the trace wins (ties by priority).
    resolve: str = "first"
    #: Search only the last N bytes of the tail (0: all of it).
    scan_bytes: int = 0


@dataclass(frozen=True)
class FamilyInfo:
    name: Family
    description: str
    #: Suggested default action, used only when no policy is available.
    default_action: Action


@dataclass(frozen=True)
class Taxonomy:
    """The effective, validated taxonomy: stages in precedence order and their rules."""

    stages: tuple[Stage, ...]
    #: Enabled rules per stage name, sorted by (priority, load order).
    rules_by_stage: Mapping[str, tuple[Rule, ...]]
    families: Mapping[Family, FamilyInfo]
    fallback_category: str = "unclassified"
    fallback_family: Family = Family.UNKNOWN
    #: The learned fallback (``[learned]``): whether it may replace an ``unknown`` verdict, and how
    #: sure it must be (see :mod:`retry_bot.classify.learned`).
    learned_enabled: bool = True
    learned_min_probability: float = 0.6
    sources: tuple[str, ...] = ()
    #: Per-stage search plans compiled by the classifier on first use (not part of the value).
    compiled: dict[str, Any] = dataclasses.field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def rules(self) -> tuple[Rule, ...]:
        """Every enabled rule in evaluation order."""
        return tuple(r for s in self.stages for r in self.rules_by_stage.get(s.name, ()))

    def rule(self, name: str) -> Rule | None:
        return next((r for r in self.rules if r.name == name), None)

    def categories(self) -> dict[str, Family]:
        """Every category the taxonomy can produce, with its family."""
        out = {r.category: r.family for r in self.rules}
        out.setdefault(self.fallback_category, self.fallback_family)
        return out

    def default_action(self, family: Family | str) -> Action:
        info = self.families.get(Family(family))
        return info.default_action if info else Action.NONE


# --------------------------------------------------------------------------- loading


def default_taxonomy_text() -> str:
    """The shipped default taxonomy (TOML text)."""
    return resources.files("retry_bot.classify").joinpath("taxonomy.toml").read_text("utf-8")


@dataclass
class _Doc:
    source: str
    text: str
    data: dict[str, Any]


def load_taxonomy(paths: Sequence[Path | str] = (), *, include_default: bool = True) -> Taxonomy:
    """Load the default taxonomy and apply the admin files in ``paths`` in order.

    Raises :class:`~retry_bot.problems.ConfigError` listing every problem
    (file, line, key path, message); never a bare traceback.
    """
    problems: list[Problem] = []
    docs: list[_Doc] = []
    if include_default:
        docs.append(_parse("<default taxonomy>", default_taxonomy_text(), problems))
    for p in paths:
        path = Path(p)
        try:
            text = path.read_text("utf-8")
        except FileNotFoundError:
            problems.append(Problem("", "file not found", source=str(path)))
            continue
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(Problem("", f"cannot read: {exc}", source=str(path)))
            continue
        docs.append(_parse(str(path), text, problems))
    if problems:
        raise ConfigError(problems)
    return _build([d for d in docs if d.data is not None], problems)


def taxonomy_from_text(text: str, source: str = "<text>", *, include_default: bool = False) -> Taxonomy:
    """Load a taxonomy from TOML text (tests and tools); same rules as :func:`load_taxonomy`."""
    problems: list[Problem] = []
    docs = []
    if include_default:
        docs.append(_parse("<default taxonomy>", default_taxonomy_text(), problems))
    docs.append(_parse(source, text, problems))
    if problems:
        raise ConfigError(problems)
    return _build(docs, problems)


def _parse(source: str, text: str, problems: list[Problem]) -> _Doc:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        problems.append(Problem("", f"invalid TOML: {exc}", line=int(m.group(1)) if m else None, source=source))
        data = {}
    return _Doc(source, text, data)


def _rule_line(doc: _Doc, index: int, key: str | None = None) -> int | None:
    """Line of the ``index``-th ``[[rule]]`` header (or of ``key`` inside it)."""
    headers = [i for i, ln in enumerate(doc.text.splitlines()) if re.match(r"^\s*\[\[\s*rule\s*\]\]", ln)]
    if index >= len(headers):
        return None
    start = headers[index]
    if key is None:
        return start + 1
    end = headers[index + 1] if index + 1 < len(headers) else len(doc.text.splitlines())
    keyre = re.compile(r"^\s*\"?" + re.escape(key) + r"\"?\s*=")
    lines = doc.text.splitlines()
    for i in range(start, end):
        if keyre.match(lines[i]):
            return i + 1
    return start + 1


def _build(docs: list[_Doc], problems: list[Problem]) -> Taxonomy:
    stage_defs: dict[str, dict[str, Any]] = {}
    stage_order: list[str] = []
    stage_order_where: tuple[_Doc, int | None] | None = None
    shipped_order: list[str] = []  # the first file's order (the shipped taxonomy's), for hints
    families: dict[Family, FamilyInfo] = {
        Family(f): FamilyInfo(Family(f), "", Action.NONE) for f in FAMILIES
    }
    fallback = {"category": "unclassified", "family": "unknown"}
    learned: dict[str, Any] = {"enabled": True, "min_probability": 0.6}
    # name -> (merged raw rule, doc of last change, index in that doc, load order)
    raw_rules: dict[str, tuple[dict[str, Any], _Doc, int, int]] = {}
    order = 0

    for doc in docs:
        d = doc.data
        for k in d:
            if k not in _TOP_KEYS:
                problems.append(Problem(k, f"unknown top-level key (expected one of {sorted(_TOP_KEYS)})",
                                        find_line(doc.text, k), doc.source))
        schema = d.get("schema", 1)
        if schema != 1:
            problems.append(Problem("schema", f"unsupported taxonomy schema {schema!r} (expected 1)",
                                    find_line(doc.text, "schema"), doc.source))
        # stages
        stages = d.get("stages", {})
        if not isinstance(stages, dict):
            problems.append(Problem("stages", "must be a table of stage tables", find_line(doc.text, "stages"), doc.source))
            stages = {}
        for sname, sdef in stages.items():
            path = f"stages.{sname}"
            if not isinstance(sdef, dict):
                problems.append(Problem(path, "must be a table", find_line(doc.text, path), doc.source))
                continue
            if not _NAME_RE.match(sname):
                problems.append(Problem(path, "stage names are lower-case letters, digits, '_', '-' or '.'",
                                        find_line(doc.text, path), doc.source))
            merged = {**stage_defs.get(sname, {}), **sdef}
            for k in sdef:
                if k not in ("description", "resolve", "scan_bytes"):
                    problems.append(Problem(f"{path}.{k}", "unknown key (expected description, resolve, scan_bytes)",
                                            find_line(doc.text, f"{path}.{k}"), doc.source))
            if merged.get("resolve", "first") not in RESOLVE_MODES:
                problems.append(Problem(f"{path}.resolve", f"must be one of {list(RESOLVE_MODES)}",
                                        find_line(doc.text, f"{path}.resolve"), doc.source))
            sb = merged.get("scan_bytes", 0)
            if isinstance(sb, bool) or not isinstance(sb, int) or sb < 0:
                problems.append(Problem(f"{path}.scan_bytes", "must be a non-negative integer (0: the whole tail)",
                                        find_line(doc.text, f"{path}.scan_bytes"), doc.source))
            if not isinstance(merged.get("description", ""), str):
                problems.append(Problem(f"{path}.description", "must be a string",
                                        find_line(doc.text, f"{path}.description"), doc.source))
            stage_defs[sname] = merged
        if "stage_order" in d:
            so = d["stage_order"]
            if not isinstance(so, list) or not all(isinstance(x, str) for x in so):
                problems.append(Problem("stage_order", "must be a list of stage names",
                                        find_line(doc.text, "stage_order"), doc.source))
            else:
                stage_order = list(so)
                stage_order_where = (doc, find_line(doc.text, "stage_order"))
                shipped_order = shipped_order or list(so)
        # families
        fams = d.get("families", {})
        if not isinstance(fams, dict):
            problems.append(Problem("families", "must be a table", find_line(doc.text, "families"), doc.source))
            fams = {}
        for fname, fdef in fams.items():
            path = f"families.{fname}"
            if fname not in FAMILIES:
                problems.append(Problem(path, f"unknown family (expected one of {list(FAMILIES)})",
                                        find_line(doc.text, path), doc.source))
                continue
            if not isinstance(fdef, dict):
                problems.append(Problem(path, "must be a table", find_line(doc.text, path), doc.source))
                continue
            cur = families[Family(fname)]
            action = fdef.get("default_action", cur.default_action)
            desc = fdef.get("description", cur.description)
            for k in fdef:
                if k not in ("default_action", "description"):
                    problems.append(Problem(f"{path}.{k}", "unknown key (expected description, default_action)",
                                            find_line(doc.text, f"{path}.{k}"), doc.source))
            if action not in ACTIONS:
                problems.append(Problem(f"{path}.default_action", f"must be one of {list(ACTIONS)}",
                                        find_line(doc.text, f"{path}.default_action"), doc.source))
                action = Action.NONE
            if not isinstance(desc, str):
                problems.append(Problem(f"{path}.description", "must be a string",
                                        find_line(doc.text, f"{path}.description"), doc.source))
                desc = ""
            families[Family(fname)] = FamilyInfo(Family(fname), desc, Action(action))
        # fallback
        fb = d.get("fallback", {})
        if not isinstance(fb, dict):
            problems.append(Problem("fallback", "must be a table", find_line(doc.text, "fallback"), doc.source))
        else:
            for k, v in fb.items():
                if k not in ("category", "family"):
                    problems.append(Problem(f"fallback.{k}", "unknown key (expected category, family)",
                                            find_line(doc.text, f"fallback.{k}"), doc.source))
                elif k == "family" and v not in FAMILIES:
                    problems.append(Problem("fallback.family", f"unknown family {v!r} (expected one of {list(FAMILIES)})",
                                            find_line(doc.text, "fallback.family"), doc.source))
                elif k == "category" and not (isinstance(v, str) and _NAME_RE.match(v)):
                    problems.append(Problem("fallback.category", "must be a lower-case identifier",
                                            find_line(doc.text, "fallback.category"), doc.source))
                else:
                    fallback[k] = v
        # learned fallback
        lf = d.get("learned", {})
        if not isinstance(lf, dict):
            problems.append(Problem("learned", "must be a table", find_line(doc.text, "learned"), doc.source))
        else:
            for k, v in lf.items():
                if k == "enabled" and isinstance(v, bool):
                    learned[k] = v
                elif k == "min_probability" and isinstance(v, (int, float)) and not isinstance(v, bool) \
                        and 0.5 <= v <= 1.0:
                    learned[k] = float(v)
                elif k in ("enabled", "min_probability"):
                    problems.append(Problem(f"learned.{k}", "must be true or false" if k == "enabled" else
                                            "must be a number from 0.5 to 1.0 (1.0: the model never speaks)",
                                            find_line(doc.text, f"learned.{k}"), doc.source))
                else:
                    problems.append(Problem(f"learned.{k}", "unknown key (expected enabled, min_probability)",
                                            find_line(doc.text, f"learned.{k}"), doc.source))
        # rules
        rules = d.get("rule", [])
        if not isinstance(rules, list):
            problems.append(Problem("rule", "must be an array of tables ([[rule]])", find_line(doc.text, "rule"), doc.source))
            rules = []
        for i, r in enumerate(rules):
            path = f"rule[{i}]"
            if not isinstance(r, dict):
                problems.append(Problem(path, "must be a table", _rule_line(doc, i), doc.source))
                continue
            name = r.get("name")
            if not isinstance(name, str) or not _NAME_RE.match(name):
                problems.append(Problem(f"{path}.name", "required: a lower-case identifier (letters, digits, '_', '-', '.')",
                                        _rule_line(doc, i, "name"), doc.source))
                continue
            if name in raw_rules:
                prev = raw_rules[name]
                raw_rules[name] = ({**prev[0], **r}, doc, i, prev[3])
            else:
                raw_rules[name] = (dict(r), doc, i, order)
                order += 1

    # stage order
    if not stage_order:
        stage_order = list(stage_defs)
    seen: set[str] = set()
    sdoc, sline = stage_order_where if stage_order_where else (None, None)
    for s in stage_order:
        if s not in stage_defs:
            problems.append(Problem("stage_order", f"unknown stage {s!r} (define it under [stages.{s}])",
                                    sline, sdoc.source if sdoc else None))
        if s in seen:
            problems.append(Problem("stage_order", f"stage {s!r} listed twice", sline, sdoc.source if sdoc else None))
        seen.add(s)
    for s in stage_defs:
        if s not in seen:
            hint = ""
            if s in shipped_order and shipped_order.index(s) > 0:
                # a site file written for an older release lacks a stage a newer one added
                hint = f" (the shipped order puts it right after {shipped_order[shipped_order.index(s) - 1]!r})"
            problems.append(Problem("stage_order", f"stage {s!r} is defined but missing from stage_order{hint}",
                                    sline, sdoc.source if sdoc else None))

    built: list[tuple[Rule, int]] = []
    for name, (r, doc, i, load_order) in raw_rules.items():
        rule = _build_rule(r, doc, i, stage_defs, problems)
        if rule is not None:
            built.append((rule, load_order))

    if problems:
        raise ConfigError(problems)

    built = _dedupe_needles(built)
    stages = tuple(
        Stage(s, str(stage_defs[s].get("description", "")), str(stage_defs[s].get("resolve", "first")),
              int(stage_defs[s].get("scan_bytes", 0)))
        for s in stage_order
    )
    by_stage: dict[str, list[tuple[int, int, Rule]]] = {s.name: [] for s in stages}
    for rule, load_order in built:
        if rule.enabled:
            by_stage[rule.stage].append((rule.priority, load_order, rule))
    return Taxonomy(
        stages=stages,
        rules_by_stage={k: tuple(r for _, _, r in sorted(v, key=lambda t: (t[0], t[1]))) for k, v in by_stage.items()},
        families=families,
        fallback_category=str(fallback["category"]),
        fallback_family=Family(fallback["family"]),
        learned_enabled=bool(learned["enabled"]),
        learned_min_probability=float(learned["min_probability"]),
        sources=tuple(d.source for d in docs),
    )


def _dedupe_needles(built: list[tuple[Rule, int]]) -> list[tuple[Rule, int]]:
    """Within a stage, look a needle up through a shorter needle it contains.

    If ``"could not resolve host"`` and ``"resolve host"`` are both needles of
    a stage, every line holding the first holds the second: scanning the trace
    once for ``"resolve host"`` serves both patterns (each still runs its own
    regex), which cuts the number of substring scans without adding any
    candidate line that the shorter needle did not already bring.
    """
    by_stage: dict[tuple[str, bool], set[bytes]] = {}
    for rule, _ in built:
        for p in rule.patterns:
            by_stage.setdefault((rule.stage, p.ignore_case), set()).update(p.needles)
    mapping: dict[tuple[str, bool], dict[bytes, bytes]] = {}
    for key, needles in by_stage.items():
        ordered = sorted(needles, key=len)
        m: dict[bytes, bytes] = {}
        for n in ordered:
            for shorter in ordered:
                if len(shorter) >= len(n):
                    break
                if shorter in n and len(shorter) >= SHARED_NEEDLE_MIN:
                    m[n] = m.get(shorter, shorter)
                    break
        mapping[key] = m
    out = []
    for rule, order in built:
        if not rule.patterns:
            out.append((rule, order))
            continue
        pats = []
        for p in rule.patterns:
            m = mapping[(rule.stage, p.ignore_case)]
            needles = tuple(dict.fromkeys(m.get(n, n) for n in p.needles))
            pats.append(p if needles == p.needles else Pattern(p.source, p.regex, needles, p.ignore_case))
        out.append((dataclasses.replace(rule, patterns=tuple(pats)), order))
    return out


#: A needle is only shared when the shorter one has at least this many characters.
SHARED_NEEDLE_MIN = 5


def _build_rule(r: dict[str, Any], doc: _Doc, i: int, stage_defs: Mapping[str, Any],
                problems: list[Problem]) -> Rule | None:
    name = r["name"]
    path = f"rule[{i}]({name})"
    n_before = len(problems)

    def bad(key: str, msg: str) -> None:
        problems.append(Problem(f"{path}.{key}", msg, _rule_line(doc, i, key), doc.source))

    for k in r:
        if k not in _RULE_KEYS:
            bad(k, f"unknown key (expected one of {sorted(_RULE_KEYS)})")
    category = r.get("category")
    if not isinstance(category, str) or not _NAME_RE.match(category):
        bad("category", "required: a lower-case identifier")
    family = r.get("family")
    if family not in FAMILIES:
        bad("family", f"unknown family {family!r} (expected one of {list(FAMILIES)})")
    desc = r.get("description")
    if not isinstance(desc, str) or not desc.strip():
        bad("description", "required: say what the rule catches and why")
    stage = r.get("stage")
    if not isinstance(stage, str) or stage not in stage_defs:
        bad("stage", f"unknown stage {stage!r} (expected one of {sorted(stage_defs)})")
    priority = r.get("priority", 100)
    if isinstance(priority, bool) or not isinstance(priority, int):
        bad("priority", "must be an integer (lower runs first)")
    confidence = r.get("confidence", "strong")
    if confidence not in ("strong", "weak"):
        bad("confidence", "must be 'strong' or 'weak'")
    for flag in ("enabled", "ignore_case", "outside_cgroup"):
        if flag in r and not isinstance(r[flag], bool):
            bad(flag, "must be true or false")
    ignore_case = bool(r.get("ignore_case", False))

    if not any(k in r for k in _CONDITION_KEYS):
        bad("name", f"a rule needs at least one condition: {', '.join(_CONDITION_KEYS)}")

    def str_set(key: str, lower: bool = True) -> frozenset[str] | None:
        if key not in r:
            return None
        v = r[key]
        if not isinstance(v, list) or not v or not all(isinstance(x, str) and x for x in v):
            bad(key, "must be a non-empty list of strings")
            return None
        return frozenset(x.strip().lower() if lower else x for x in v)

    failure_reasons = str_set("failure_reasons")
    statuses = str_set("statuses")
    sections = str_set("sections")
    exit_codes = None
    if "exit_codes" in r:
        v = r["exit_codes"]
        if not isinstance(v, list) or not v or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            bad("exit_codes", "must be a non-empty list of integers")
        else:
            exit_codes = frozenset(v)
    keywords: tuple[bytes, ...] | None = None
    if "keywords" in r:
        v = r["keywords"]
        if not isinstance(v, list) or not v or not all(isinstance(x, str) and len(x.strip()) >= MIN_NEEDLE for x in v):
            bad("keywords", f"must be a non-empty list of literal words of {MIN_NEEDLE}+ characters")
        elif "\n" in "".join(v):
            bad("keywords", "keywords cannot contain a newline")
        else:
            keywords = tuple(dict.fromkeys((x.lower() if ignore_case else x).encode("utf-8") for x in v))
        if "patterns" not in r:
            bad("keywords", "keywords only make sense with patterns")
    patterns: list[Pattern] = []
    if "patterns" in r:
        v = r["patterns"]
        if not isinstance(v, list) or not v or not all(isinstance(x, str) and x for x in v):
            bad("patterns", "must be a non-empty list of regular expressions (strings)")
        else:
            for j, src in enumerate(v):
                pat, err = compile_pattern(src, ignore_case, keywords)
                if err:
                    bad(f"patterns[{j}]", err)
                elif pat is not None:
                    if keywords is not None:
                        # Explicit keywords replace the pattern's own pre-filter literals, so they
                        # must cover it: every match of the pattern holds one of its literals
                        # (compile_pattern), hence one of the keywords only if each literal contains
                        # a keyword.  Otherwise the pre-filter would skip traces the pattern matches
                        # and the rule would silently never fire (issue 11: the localized-gcc kill).
                        uncovered = uncovered_needles(pat.needles, keywords)
                        if uncovered:
                            bad(f"patterns[{j}]",
                                f"keywords {[k.decode('utf-8', 'replace') for k in keywords]} do not cover "
                                f"pattern {src!r}: a match containing "
                                f"{' or '.join(repr(n.decode('utf-8', 'replace')) for n in uncovered)} holds "
                                "none of them, so the pre-filter would hide it; add a keyword that every "
                                "such match contains, or drop keywords")
                            continue
                        pat = Pattern(pat.source, pat.regex, keywords, pat.ignore_case)
                    patterns.append(pat)
    corroborated: list[Pattern] = []
    if "corroborated_by" in r:
        v = r["corroborated_by"]
        if not isinstance(v, list) or not v or not all(isinstance(x, str) and x for x in v):
            bad("corroborated_by", "must be a non-empty list of regular expressions (strings)")
        else:
            for j, src in enumerate(v):
                pat, err = compile_pattern(src, ignore_case)
                if err:
                    bad(f"corroborated_by[{j}]", err)
                elif pat is not None:
                    corroborated.append(pat)
        if "patterns" not in r and "exit_codes" not in r and "failure_reasons" not in r:
            bad("corroborated_by", "corroborates patterns, exit_codes or failure_reasons: give one of them")
    record = None
    if "record" in r:
        v = r["record"]
        if not isinstance(v, dict) or not v:
            bad("record", f"must be a table with some of {sorted(_RECORD_KEYS)}")
        else:
            kw: dict[str, Any] = {}
            for k, x in v.items():
                if k not in _RECORD_KEYS:
                    bad(f"record.{k}", f"unknown record condition (expected one of {sorted(_RECORD_KEYS)})")
                elif k == "peak_to_limit_at_least":
                    if isinstance(x, bool) or not isinstance(x, (int, float)) or x <= 0:
                        bad(f"record.{k}", "must be a positive number")
                    else:
                        kw[k] = float(x)
                elif isinstance(x, bool) or not isinstance(x, int) or x < 0:
                    bad(f"record.{k}", "must be a non-negative integer")
                else:
                    kw[k] = x
            record = RecordCondition(**kw)
    regexes: dict[str, re.Pattern[str] | None] = {}
    for key in ("job_name", "job_stage", "last_command"):
        regexes[key] = None
        if key in r:
            if not isinstance(r[key], str):
                bad(key, "must be a regular expression (string)")
                continue
            try:
                regexes[key] = re.compile(r[key])
            except re.error as exc:
                bad(key, f"invalid regular expression: {exc}")
    if len(problems) > n_before:
        return None
    return Rule(
        name=name, category=category, family=Family(family), description=desc.strip(), stage=stage,
        priority=priority, confidence=confidence, enabled=bool(r.get("enabled", True)),
        ignore_case=ignore_case, failure_reasons=failure_reasons, statuses=statuses,
        exit_codes=exit_codes, patterns=tuple(patterns), record=record,
        job_name=regexes["job_name"], job_stage=regexes["job_stage"], origin=doc.source,
        keywords=keywords is not None, sections=sections, corroborated_by=tuple(corroborated),
        last_command=regexes["last_command"], outside_cgroup=bool(r.get("outside_cgroup", False)),
    )


# --------------------------------------------------------------------------- patterns


def uncovered_needles(needles: tuple[bytes, ...], keywords: tuple[bytes, ...]) -> list[bytes]:
    """The pattern literals that hold none of ``keywords``.

    Every match of a pattern contains one of its literals (``needles``); the
    keywords cover the pattern only if each literal contains a keyword.
    """
    return [n for n in needles if not any(k in n for k in keywords)]


def compile_pattern(source: str, ignore_case: bool = False,
                    keywords: tuple[bytes, ...] | None = None) -> tuple[Pattern | None, str | None]:
    """Compile one trace pattern; return ``(pattern, None)`` or ``(None, problem)``.

    Patterns are compiled as bytes regexes (``re.MULTILINE``; ``re.IGNORECASE``
    when asked) so that traces never need decoding.  Each top-level alternative
    must contain a literal of at least :data:`MIN_NEEDLE` characters.
    """
    try:
        raw = source.encode("utf-8")
    except UnicodeEncodeError as exc:  # pragma: no cover - lone surrogates
        return None, f"pattern is not valid UTF-8: {exc}"
    flags = re.MULTILINE | (re.IGNORECASE if ignore_case else 0)
    try:
        regex = re.compile(raw, flags)
        parsed = sre_parse.parse(raw, flags)
    except re.error as exc:
        return None, f"invalid regular expression {source!r}: {exc}"
    if "\\n" in source or "\n" in source:
        return None, f"pattern {source!r} spans lines: patterns are matched one trace line at a time"
    risk = _nested_quantifier(list(parsed))
    if risk:
        return None, (f"pattern {source!r} nests a repeat inside a repeat ({risk}), which can backtrack "
                      "catastrophically on long lines; rewrite it without nested quantifiers")
    covered = None
    if keywords:
        def covered(n: bytes) -> bool:
            n = n.lower() if ignore_case else n
            return any(k in n for k in keywords)
    needles = _needles(list(parsed), covered)
    if not needles or min(len(n) for n in needles) < MIN_NEEDLE:
        return None, (f"pattern {source!r} has an alternative without a literal of {MIN_NEEDLE}+ "
                      "characters; add a fixed word so the trace can be pre-filtered")
    if ignore_case:  # looked up in the lower-cased trace
        needles = [n.lower() for n in needles]
    return Pattern(source, regex, tuple(dict.fromkeys(needles)), ignore_case), None


def _needles(items: list[Any], covered: Callable[[bytes], bool] | None = None) -> list[bytes]:
    """Literals of which every match of ``items`` contains at least one.

    Candidates are the longest literal run of the sequence, and for each group
    matched exactly once, the union of the needles of its alternatives; the
    candidate whose shortest literal is longest wins.  With ``covered`` (does a
    literal hold one of a rule's explicit keywords?), a candidate whose literals
    are all covered wins first, so the coverage check sees the best evidence.
    """
    options: list[list[bytes]] = []
    run = bytearray()
    runs: list[bytes] = []
    for op, av in items:
        if op is sre_constants.LITERAL:
            run.append(av)
            continue
        if op in _REPEATS and av[0] >= 1 and len(av[2]) == 1 and av[2][0][0] is sre_constants.LITERAL:
            # 'x{3,}' contributes 'xxx' to the literal run
            run.extend([av[2][0][1]] * min(av[0], 16))
            if av[1] == av[0]:
                continue
        if run:
            runs.append(bytes(run))
        run = bytearray()
        if op is sre_constants.SUBPATTERN:
            sub = _needles(list(av[-1]), covered)
            if sub:
                options.append(sub)
        elif op is sre_constants.BRANCH:
            alts = [_needles(list(b), covered) for b in av[1]]
            if all(alts):
                options.append([n for a in alts for n in a])
    if run:
        runs.append(bytes(run))
    # every literal run is a candidate (every match contains it); without keywords the longest wins
    options.extend([r] for r in runs)
    if not options:
        return []
    def rank(o: list[bytes]) -> tuple[bool, int, int]:
        return (covered is not None and all(covered(n) for n in o), min(len(n) for n in o), -len(o))
    return list(dict.fromkeys(max(options, key=rank)))


_REPEATS = (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT, getattr(sre_constants, "POSSESSIVE_REPEAT", None))


def _nested_quantifier(items: Iterable[Any], inside: bool = False) -> str | None:
    for op, av in items:
        if op in _REPEATS and op is not None:
            lo, hi, sub = av
            if inside and hi > 1:
                return "a repeated group contains another unbounded repeat"
            found = _nested_quantifier(sub, inside or hi > 1 and _has_unbounded(sub))
            if found:
                return found
        elif op is sre_constants.SUBPATTERN:
            found = _nested_quantifier(av[-1], inside)
            if found:
                return found
        elif op is sre_constants.BRANCH:
            for b in av[1]:
                found = _nested_quantifier(b, inside)
                if found:
                    return found
    return None


def _has_unbounded(items: Iterable[Any]) -> bool:
    for op, av in items:
        if op in _REPEATS and op is not None:
            if av[1] > 1 or _has_unbounded(av[2]):
                return True
        elif op is sre_constants.SUBPATTERN and _has_unbounded(av[-1]):
            return True
        elif op is sre_constants.BRANCH and any(_has_unbounded(b) for b in av[1]):
            return True
    return False
