"""The classifier: job facts + trace tail + verified usage record -> :class:`Classification`.

Pure: no I/O, no clock, no logging.  Stages are evaluated in the taxonomy's
precedence order; the first stage with a matching rule decides.  Within a
stage, ``resolve = "first"`` takes the first matching rule by priority and
``resolve = "last"`` takes the rule whose trace match is latest (the line
nearest to the failure), ties broken by priority.  When nothing matches, the
taxonomy's fallback category is returned with ``confidence = "weak"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from retry_bot.classify.learned import ELIGIBLE_STAGES, ModelUnavailable, consult, default_model
from retry_bot.classify.structure import (Structure, analyse, drop_post_failure_output_and_markers,
                                          drop_superseded_attempts,
                                          record_covers_failure, signal_name, signal_of)
from retry_bot.classify.taxonomy import Pattern, Rule, Taxonomy
from retry_bot.classify.trace import DEFAULT_TAIL_BYTES, NeedleIndex, TraceText
from retry_bot.model import Classification, Family, JobFacts
from runner_wrapper.quantity import human_bytes
from runner_wrapper.record import UsageRecord

__all__ = ["classify", "effective_exit_code"]

# "ERROR: Job failed: exit code 137", "ERROR: Job failed: exit status 1",
# "command terminated with exit code 137", "... exit code: 137, reason: 'OOMKilled'";
# GitHub Actions' runner: "Process completed with exit code 137." (actions/runner
# src/Runner.Worker/Handlers/ScriptHandler: "Process completed with exit code {0}.");
# Azure Pipelines' task library: "Exit code 137 returned from process: file name '...'"
# (azure-pipelines-task-lib toolrunner: "Exit code {0} returned from process: file name '{1}'"),
# and its script tasks' own summary: "##[error]Bash exited with code '137'." (the Bash, CmdLine and
# PowerShell tasks of azure-pipelines-tasks, task.loc strings "Bash exited with code '%s'.",
# "Cmd.exe exited with code '%s'.", "PowerShell exited with code '%s'.").
# Eighth pass, the other CI systems' own result lines, so that the exit-code conventions (128+N, 124-127)
# apply to their logs too: Travis CI (travis-build's bash templates: 'The command "CMD" exited with N.',
# 'The command "CMD" failed and exited with N during STAGE.'), CircleCI ('Exited with code exit status N',
# older 'Exited with code N'), Buildkite ('Exited with status N'), Jenkins Pipeline's sh/bat step
# (workflow-durable-task-step: 'script returned exit code N'), TeamCity ('Process exited with code N');
# CircleCI 1.0's 'Failing command: CMD / Exit code: N' (the Azure form above with a colon).
# Tenth pass: TeamCity's line only at line start (after its '[12:00:01]W:' and '[Step 1/2]' tags), not a
# program's 'worker process exited with code 137'; Travis keeps running the script's later commands (and
# after_script) after a failed one, so its first non-zero 'The command ... exited with N' is the failure,
# not the last one (a teardown's 143).
_EXIT_RE = re.compile(rb"(?:(?:Job failed|command terminated|exited|Process completed with)[^\n]{0,200}?"
                      rb"exit (?:code|status):? ?|^(?:##\[error\])?Exit code:? "
                      rb"|^(?:##\[error\])?(?:Bash|Cmd\.exe|cmd\.exe|PowerShell|pwsh) exited with code '"
                      rb"|The command \"[^\n]{0,300}\" (?:failed and )?exited with "
                      rb"|Exited with code (?:exit status )?|Exited with status |script returned exit code "
                      rb"|^(?:\[[^\]\n]{1,40}\][A-Z]?:?\s*){0,3}[Pp]rocess exited with code )"
                      rb"(-?[0-9]{1,3})\b")
_EXIT_NEEDLES = (b"exit code", b"exit status", b"Exit code", b"exited with", b"Exited with")
#: The runner prints the exit code in the last lines; look no further back than this.
_EXIT_SCAN_BYTES = 64 * 1024
#: Windows (from the end) searched in turn by ``resolve = "last"`` stages.
_FIRST_WINDOW = 32 * 1024
_WINDOW_GROWTH = 4
_OVERLAP = 512
#: How far back ``corroborated_by`` looks in a stage without a window.
_CORROBORATION_BYTES = 64 * 1024


@dataclass(frozen=True)
class _Hit:
    rule: Rule
    pos: int
    evidence: tuple[str, ...]


class _Context:
    __slots__ = ("facts", "trace", "record", "notes", "reason", "status", "_exit", "_exit_src", "_structure",
                 "no_oom_stage", "demoted", "markers", "learned_trace")

    def __init__(self, facts: JobFacts, trace: TraceText, record: UsageRecord | None, markers: bool = True):
        self.facts = facts
        self.trace = trace
        #: what the learned fallback reads when the rules' text differs (the runner's superseded attempts dropped):
        #: the text its training saw (train.py reads drop_post_failure_output only)
        self.learned_trace: TraceText | None = None
        #: False: the trace holds no ``section_start:`` marker (already searched; see structure.analyse)
        self.markers = markers
        self.notes: list[str] = []
        if record is not None and facts.job_id and record.job.id and record.job.id != facts.job_id:
            self.notes.append(f"usage record ignored: it is for job {record.job.id}, not {facts.job_id}")
            record = None
        self.record = record
        self.reason = (facts.failure_reason or "").strip().lower() or None
        self.status = (facts.status or "").strip().lower() or None
        self._exit: int | None = None
        self._exit_src: str | None = None
        self._structure: Structure | None = None
        #: Set when a verified record covers the failing stage and counts no OOM kill there: the
        #: stage's name (or "" when the record has no per-stage entries).  OOM text from the
        #: job's own cgroup is then at most weak evidence (docs/taxonomy.md, "Text and the record").
        self.no_oom_stage: str | None = None
        if record is not None and record.usage.oom_kills == 0:
            covers, stage = record_covers_failure(record)
            if covers:
                self.no_oom_stage = stage or ""
        #: The first OOM text hit set aside because of ``no_oom_stage``.
        self.demoted: _Hit | None = None

    @property
    def structure(self) -> Structure:
        if self._structure is None:
            self._structure = analyse(self.trace.raw, self.markers, self.trace.may_occur)
        return self._structure

    def exit_code(self) -> tuple[int | None, str | None]:
        if self._exit_src is None:
            code, src = effective_exit_code(self.facts, self.trace, self.record)
            self._exit, self._exit_src = code, src or ""
        return self._exit, self._exit_src or None


def effective_exit_code(facts: JobFacts, trace: TraceText, record: UsageRecord | None) -> tuple[int | None, str | None]:
    """The job's exit code and where it came from: GitLab, the usage record, or the runner's last line."""
    if facts.exit_code is not None:
        return facts.exit_code, "GitLab exit code"
    if record is not None and record.exit_code is not None:
        return record.exit_code, "usage record exit code"
    lo = max(0, len(trace.raw) - _EXIT_SCAN_BYTES)
    hit = trace.last_match(_EXIT_RE, _EXIT_NEEDLES, False, lo=lo)
    if hit is not None and hit[1].group(0).startswith(b"The command \""):
        first = _first_travis_failure(trace.raw, lo)
        if first is not None:
            return first[0], f"runner message: {first[1]}"
    if hit is not None:
        try:
            return int(hit[1].group(1)), f"runner message: {trace.evidence(*hit)}"
        except ValueError:  # pragma: no cover - the regex only captures digits
            return None, None
    return None, None


_TRAVIS_RESULT_RE = re.compile(rb'(?m)^The command "[^\n]{0,300}" (?:failed and )?exited with ([0-9]{1,3})\b[^\r\n]*')


def _first_travis_failure(raw: bytes, lo: int) -> tuple[int, str] | None:
    """Travis CI's first non-zero command result in ``raw[lo:]``: ``(code, line)``, else None."""
    for m in _TRAVIS_RESULT_RE.finditer(raw, lo):
        code = int(m.group(1))
        if code != 0:
            return code, m.group(0).decode("utf-8", "replace").strip()[:240]
    return None


def _record_evidence(rec: UsageRecord) -> str:
    u, lim = rec.usage, rec.limits
    parts = [f"oom_kills={u.oom_kills}"]
    if u.memory_peak_bytes is not None:
        peak = f"memory peak {human_bytes(u.memory_peak_bytes)}"
        if lim.memory_limit_bytes:
            peak += f" of limit {human_bytes(lim.memory_limit_bytes)}"
        parts.append(peak)
    if u.memory_failcnt:
        parts.append(f"failcnt={u.memory_failcnt}")
    if rec.exit_code is not None:
        parts.append(f"exit code {rec.exit_code}")
    parts.append(f"backend {rec.host.backend}{' (approximate)' if rec.host.approximate else ''}")
    return "verified usage record: " + ", ".join(parts)


class _StagePlan:
    """A stage's text rules compiled for searching: one :class:`NeedleIndex` over all their
    needles, and for each needle the rules that use it (cached in ``Taxonomy.compiled``)."""

    __slots__ = ("index", "rules", "by_needle", "patterns", "keys")

    def __init__(self, rules: tuple[Rule, ...]):
        self.rules = tuple(r for r in rules if r.patterns)
        by_needle: dict[bytes, list[int]] = {}
        for i, r in enumerate(self.rules):
            for p in r.patterns:
                for n in p.needles:
                    lst = by_needle.setdefault(n, [])
                    if not lst or lst[-1] != i:
                        lst.append(i)
        self.by_needle = {n: tuple(v) for n, v in by_needle.items()}
        self.index = NeedleIndex(by_needle)
        #: per rule: its patterns, each with its needles as a tuple and as a set
        self.patterns = tuple(tuple((p, p.needles, frozenset(p.needles)) for p in r.patterns) for r in self.rules)
        #: per rule: its distinct ``(needle, ignore_case)`` pairs, in pattern order
        self.keys = tuple(tuple(dict.fromkeys((n, p.ignore_case) for p in r.patterns for n in p.needles))
                          for r in self.rules)

    @classmethod
    def of(cls, taxonomy: Taxonomy, stage: str) -> "_StagePlan":
        plan = taxonomy.compiled.get(stage)
        if plan is None:
            plan = taxonomy.compiled[stage] = cls(taxonomy.rules_by_stage.get(stage, ()))
        return plan

    def live_rules(self, trace: TraceText, lo: int) -> tuple[list[int], frozenset[bytes]]:
        """The indices (in priority order) of the text rules with a needle that may occur in
        ``trace.raw[lo:]`` (the others cannot match), and those needles
        (:meth:`~retry_bot.classify.trace.TraceText.live_needles`)."""
        live = trace.live_needles(self.index, lo)
        if not live:
            return [], live
        by_needle = self.by_needle
        return sorted({i for n in live for i in by_needle[n]}), live

    def live_patterns(self, i: int, live: frozenset[bytes]) -> tuple[tuple[Pattern, tuple[bytes, ...]], ...]:
        """Rule ``i``'s patterns with a needle in ``live``, each with those needles (in order)."""
        pats = []
        for p, needles, nset in self.patterns[i]:
            if nset <= live:
                pats.append((p, needles))
            elif not nset.isdisjoint(live):
                pats.append((p, tuple(n for n in needles if n in live)))
        return tuple(pats)


def _match(rule: Rule, ctx: _Context, after: int = -1, lo: int = 0, hi: int | None = None,
           patterns: tuple[tuple[Pattern, tuple[bytes, ...]], ...] | None = None) -> _Hit | None:
    """Does every condition of ``rule`` hold?  Cheap conditions first, the trace last.

    Trace patterns are searched in ``[lo, hi)`` on lines starting after ``after``;
    ``patterns`` (default: all the rule's, with all their needles) are those worth searching,
    with the needles to look for (see :meth:`_StagePlan.live_rules`).
    """
    ev: list[str] = []
    f = ctx.facts
    if rule.statuses is not None:
        if ctx.status not in rule.statuses:
            return None
        ev.append(f"job status {ctx.status}")
    if rule.failure_reasons is not None:
        if ctx.reason not in rule.failure_reasons:
            return None
        ev.append(f"failure_reason={ctx.reason}")
    if rule.job_name is not None and not rule.job_name.search(f.name or ""):
        return None
    if rule.job_stage is not None and not rule.job_stage.search(f.stage or ""):
        return None
    if rule.sections is not None:
        section = ctx.structure.section
        if section not in rule.sections:
            return None
        ev.append(f"failed in runner section {section} ({ctx.structure.section_source})")
    if rule.last_command is not None:
        cmd = ctx.structure.last_command
        if cmd is None or not rule.last_command.search(cmd):
            return None
        ev.append(f"last command: $ {cmd[:160]}")
    if rule.record is not None:
        rec = ctx.record
        if rec is None:
            return None
        c = rule.record
        kills = rec.usage.oom_kills
        if c.oom_kills_at_least is not None and kills < c.oom_kills_at_least:
            return None
        if c.oom_kills_at_most is not None and kills > c.oom_kills_at_most:
            return None
        if c.peak_to_limit_at_least is not None:
            peak, limit = rec.usage.memory_peak_bytes, rec.limits.memory_limit_bytes
            if not peak or not limit or peak / limit < c.peak_to_limit_at_least:
                return None
        ev.append(_record_evidence(rec))
    if rule.exit_codes is not None:
        code, src = ctx.exit_code()
        if code is None or code not in rule.exit_codes:
            return None
        sig = signal_of(code)
        ev.append(f"exit code {code} ({src})" + (f" = 128 + {sig} ({signal_name(sig)})" if sig else ""))
    pos = -1
    if rule.patterns:
        best: tuple[int, re.Match[bytes]] | None = None
        for p, needles in (((p, p.needles) for p in rule.patterns) if patterns is None else patterns):
            hit = ctx.trace.last_match(p.regex, needles, p.ignore_case, lo=lo, hi=hi,
                                       after=max(after, best[0] if best is not None else -1))
            if hit is not None and (best is None or hit[0] > best[0]):
                best = hit
        if best is None:
            return None
        # hits are compared by line: the latest line wins; on one line, the rule with priority
        pos = best[0]
        ev.append(ctx.trace.evidence(*best))
    if rule.corroborated_by:
        clo = lo if lo > 0 else max(0, len(ctx.trace.raw) - _CORROBORATION_BYTES)
        seen = None
        for p in rule.corroborated_by:
            seen = ctx.trace.last_match(p.regex, p.needles, p.ignore_case, lo=clo)
            if seen is not None:
                break
        if seen is None:
            return None
        ev.append("corroborated by: " + ctx.trace.evidence(*seen))
    hit = _Hit(rule, pos, tuple(ev))
    if ctx.no_oom_stage is not None and rule.family == Family.OOM and rule.record is None \
            and not rule.outside_cgroup:
        # Text (or a bare 137) says OOM, the kernel's counter for the failing stage says no.
        if ctx.demoted is None:
            ctx.demoted = hit
        return None
    return hit


def _resolve_first(rules: tuple[Rule, ...], ctx: _Context, lo: int) -> _Hit | None:
    for rule in rules:
        hit = _match(rule, ctx, lo=lo)
        if hit is not None:
            return hit
    return None


def _resolve_last(rules: tuple[Rule, ...], ctx: _Context, lo: int, plan: _StagePlan) -> _Hit | None:
    """The rule matching the latest line; windows grow from the end, which is exact:
    a match in a later window always beats anything before it.

    Text rules none of whose needles can be in the trace (word vocabulary,
    see :class:`~retry_bot.classify.trace.NeedleIndex`) are dropped first: they
    cannot match, and a stage with nothing to look for costs a few set
    intersections rather than one substring scan per needle and window.
    """
    live_idx, live = plan.live_rules(ctx.trace, lo)
    if live_idx:
        trace = ctx.trace
        keys_of, rules_of = plan.keys, plan.rules
        #: rule index -> its live patterns (built on first use: most rules are skipped below)
        pats_of: dict[int, tuple[tuple[Pattern, tuple[bytes, ...]], ...]] = {}
        hi = len(trace.raw)
        size = _FIRST_WINDOW
        while True:
            wlo = max(lo, hi - size)
            chosen: _Hit | None = None
            #: (needle, ignore_case) -> does it occur on a line of [wlo, hi) that last_match would try?
            occurs: dict[tuple[bytes, bool], bool] = {}
            for i in live_idx:
                if chosen is None:
                    # Before any hit, a rule none of whose live needles occurs in the window cannot
                    # match: skip it (one cached lookup per needle instead of a _match call).
                    for key in keys_of[i]:
                        if key[0] in live:
                            got = occurs.get(key)
                            if got is None:
                                got = occurs[key] = trace.occurs(key[0], key[1], wlo, hi)
                            if got:
                                break
                    else:
                        continue
                pats = pats_of.get(i)
                if pats is None:
                    pats = pats_of[i] = plan.live_patterns(i, live)
                hit = _match(rules_of[i], ctx, chosen.pos if chosen is not None else -1, wlo, hi, pats)
                if hit is not None and (chosen is None or hit.pos > chosen.pos):
                    chosen = hit
            if chosen is not None:
                return chosen
            if wlo <= lo:
                break
            hi = min(len(trace.raw), wlo + _OVERLAP)
            size *= _WINDOW_GROWTH
    return _resolve_first(tuple(r for r in rules if not r.patterns), ctx, lo)


def classify(facts: JobFacts, trace_tail: bytes, taxonomy: Taxonomy,
             record: UsageRecord | None = None) -> Classification:
    """Classify one failed (or canceled) job.

    ``trace_tail`` is the end of the raw trace (at most 256 KiB are used; use
    :func:`~retry_bot.classify.read_trace_tail` to get it), read without what ``after_script`` and
    the ``*_on_failure`` stages printed (:func:`~retry_bot.classify.structure.drop_post_failure_output`:
    they run after the failure and never change the job's result); ``record`` is a
    usage record whose signature was already verified (see
    :func:`~retry_bot.classify.extract_verified_record`); it is ignored when it
    names another job.  Never raises on any bytes.
    """
    if isinstance(trace_tail, str):  # tolerate decoded traces
        trace_tail = trace_tail.encode("utf-8", "replace")
    # the output of after_script and the *_on_failure stages never decides (structure module docstring)
    raw, markers = drop_post_failure_output_and_markers(bytes(trace_tail or b"")[-DEFAULT_TAIL_BYTES:])
    # nor do the runner's lines about pull and preparation attempts it made again
    # (structure.drop_superseded_attempts; the rules' text only)
    seen = raw
    raw = drop_superseded_attempts(raw)
    ctx = _Context(facts, TraceText(raw), record, markers)
    if raw is not seen:
        ctx.learned_trace = TraceText(seen)
    n = len(raw)
    for stage in taxonomy.stages:
        rules = taxonomy.rules_by_stage.get(stage.name, ())
        if not rules:
            continue
        lo = max(0, n - stage.scan_bytes) if stage.scan_bytes else 0
        if stage.resolve == "first":
            chosen = _resolve_first(rules, ctx, lo)
        else:
            chosen = _resolve_last(rules, ctx, lo, _StagePlan.of(taxonomy, stage.name))
        if chosen is not None:
            r = chosen.rule
            notes = tuple(ctx.notes)
            if ctx.demoted is not None:
                notes += (f"OOM text set aside ({ctx.demoted.rule.name}): the verified usage record covers the "
                          "failing stage and counts no OOM kill",)
            if stage.name in _STRUCTURE_NOTED:
                notes += _structure_note(ctx)
            verdict = Classification(
                category=r.category, family=r.family, rule=r.name,
                evidence=chosen.evidence + notes, confidence=r.confidence,
            )
            if r.family == Family.UNKNOWN and stage.name in ELIGIBLE_STAGES:
                return _learned(ctx, verdict, taxonomy)
            return verdict
    if ctx.demoted is not None:
        d = ctx.demoted
        where = f"stage {ctx.no_oom_stage}" if ctx.no_oom_stage else "the failing stage"
        return Classification(
            category="oom_unconfirmed", family=Family.UNKNOWN, rule=d.rule.name,
            evidence=d.evidence + (f"not an OOM kill: the verified usage record covers {where} and counts "
                                   f"no OOM kill there (record: {_record_evidence(ctx.record)})",) + tuple(ctx.notes),
            confidence="weak",
        )
    verdict = Classification(
        category=taxonomy.fallback_category, family=taxonomy.fallback_family, rule="fallback",
        evidence=("no rule matched",) + _structure_note(ctx) + tuple(ctx.notes), confidence="weak",
    )
    if taxonomy.fallback_family == Family.UNKNOWN:
        return _learned(ctx, verdict, taxonomy)
    return verdict


def _learned(ctx: _Context, verdict: Classification, taxonomy: Taxonomy) -> Classification:
    """The learned fallback (:mod:`retry_bot.classify.learned`) on an eligible ``unknown`` verdict,
    when the taxonomy's ``[learned]`` table enables it; the verdict itself otherwise."""
    if not taxonomy.learned_enabled:
        return verdict
    try:
        model = default_model()
    except ModelUnavailable as e:
        return replace(verdict, evidence=verdict.evidence + (f"learned fallback unavailable: {e}",))
    code, _ = ctx.exit_code()
    return consult(model, verdict, ctx.learned_trace or ctx.trace, failure_reason=ctx.reason, exit_code=code,
                   structure=ctx.structure, min_probability=taxonomy.learned_min_probability,
                   allow_oom=ctx.no_oom_stage is None)


#: Stages whose verdicts are weak fallbacks: their evidence also says what the trace's shape showed.
_STRUCTURE_NOTED = frozenset({"structure", "reason_fallback"})


def _structure_note(ctx: _Context) -> tuple[str, ...]:
    d = ctx.structure.describe()
    return (f"trace structure: {d}",) if d else ()
