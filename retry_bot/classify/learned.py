"""The learned fallback: a small naive Bayes text model behind the rules.

The rules decide whenever one of them matches.  When none does -- the verdict is the taxonomy's
fallback or an ambiguous failure reason's ``unknown`` -- this model reads the end of the trace and
the structure the engine already computed, and names a family with a probability.  It speaks only
above the taxonomy's ``[learned] min_probability``; below it, ``unknown`` stays.  Its verdict is
visible as such: rule ``learned:<family>``, category ``learned_<family>`` (so a policy can treat it
more cautiously than a rule's, by category), confidence ``weak``, and evidence naming the
features that weighed most for it.

Pure and dependency-free.  The model is a multinomial naive Bayes over *binary* features
(a feature counts once per trace: build logs repeat lines), with Laplace smoothing:

* words of the last :data:`FEATURE_LINES` lines (at most :data:`FEATURE_BYTES` bytes) of the cleaned
  trace, lower-cased; URLs reduced to ``_url_`` and their host's words, paths to ``_path_`` and their
  file name, hex strings and hashes to ``_hex_``, numbers to ``_nN_`` (N digits) except the exit
  codes and HTTP statuses that carry meaning (137, 143, 404, 503...);
* the words of the last :data:`LAST_LINES` non-blank lines again, prefixed ``$`` (the end weighs
  more: the failure is there);
* word bigrams when the artifact says so (``bigrams``);
* structural features: ``failure_reason``, the exit code and its ``128+N`` signal, the runner
  section, the last command's tool, whether the trace ends in the runner's ``Job failed`` line.

The artifact (``learned_model.json``, shipped in the package) is produced by
:mod:`retry_bot.classify.train` from the labelled splits that were read (never a sealed one) and is
loaded once, lazily, on the first fallback.  Cost: one bounded tokenisation (O(bytes), at most
16 KiB) and one set intersection per class.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any, Iterable, Mapping

from retry_bot.classify.structure import Structure, signal_name, signal_of
from retry_bot.classify.trace import clean_trace
from retry_bot.model import Classification, Family
from runner_wrapper.marker import MARKER_PREFIX

__all__ = ["FEATURE_BYTES", "FEATURE_LINES", "LAST_LINES", "LearnedModel", "LearnedVerdict", "features",
           "tokens", "default_model", "consult", "ELIGIBLE_STAGES", "MODEL_RESOURCE", "MODEL_FORMAT"]

#: Only the end of the trace is read: at most this many bytes ...
FEATURE_BYTES = 16 * 1024
#: ... and this many lines.
FEATURE_LINES = 200
#: The last non-blank lines whose words count twice (prefixed ``$``).
LAST_LINES = 5
#: At most this many words are taken from one line (a minified or binary line is not a document).
_WORDS_PER_LINE = 64
#: The artifact's file name in the package, and its format version.
MODEL_RESOURCE = "learned_model.json"
MODEL_FORMAT = 1

#: Numbers kept as themselves: exit codes with a meaning (POSIX 126/127, timeout(1)'s 124,
#: docker run's 125, 128+N signals) and HTTP statuses (RFC 9110).  Every other number becomes
#: ``_nN_`` (N = its digit count, at most 6), so versions, line numbers and sizes do not split the
#: vocabulary.
KEPT_NUMBERS = frozenset({
    "0", "1", "2", "9", "12", "15",
    "124", "125", "126", "127", "128", "130", "134", "135", "136", "137", "139", "143",
    "400", "401", "403", "404", "405", "407", "408", "409", "410", "413", "422", "429",
    "500", "502", "503", "504",
})

_URL = re.compile(rb"\b(?:https?|ftp|git|ssh|s3|gs|oci|docker|tcp|unix)://(?:[^@\s/'\"]*@)?([a-z0-9.\-]{0,253})[^\s'\"<>)\]]*")
_PATH = re.compile(rb"(?<![a-z0-9_.\-])(?:~|\.{1,2})?(?:/[a-z0-9_.@+\-]+){2,}/?")
_HEX = re.compile(rb"\b(?:sha256:|0x)?(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b")
_TOKEN = re.compile(rb"[a-z_][a-z0-9_]{1,40}|[0-9]+")
#: The runner wrapper's usage-record marker (runner_wrapper/marker.py ``MARKER_PREFIX``).
_MARKER = MARKER_PREFIX.encode("ascii")
#: ``KEY=value`` words (environment assignments) before a command.
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _number(tok: str) -> str:
    return tok if tok in KEPT_NUMBERS else f"_n{min(len(tok), 6)}_"


def tokens(line: bytes) -> list[str]:
    """The normalised tokens of one cleaned line (see the module docstring)."""
    low = line.lower()
    if b"/" in low:
        low = _URL.sub(lambda m: b" _url_ " + m.group(1).replace(b".", b" ") + b" ", low)
        low = _PATH.sub(lambda m: b" _path_ " + m.group(0).rstrip(b"/").rsplit(b"/", 1)[-1] + b" ", low)
    low = _HEX.sub(b" _hex_ ", low)
    out: list[str] = []
    for t in _TOKEN.findall(low)[:_WORDS_PER_LINE]:
        s = t.decode("ascii")
        out.append(_number(s) if s[0].isdigit() else s)
    return out


def _tool(command: str | None) -> str | None:
    """The program a ``$ command`` line runs: its first word after ``VAR=value`` assignments and
    ``sudo``/``time``/``env``, without its directory (``./gradlew`` -> ``gradlew``)."""
    if not command:
        return None
    for word in command.split()[:8]:
        if _ASSIGNMENT.match(word) or word in ("sudo", "time", "env", "exec", "nice", "command"):
            continue
        name = word.rsplit("/", 1)[-1].lower()
        name = re.sub(r"[^a-z0-9_.+\-]", "", name)[:32]
        return name or None
    return None


def features(raw: bytes, *, failure_reason: str | None, exit_code: int | None, structure: Structure,
             bigrams: bool = False) -> set[str]:
    """The model's features of one trace tail (raw bytes, markers still in) and its structure."""
    raw = raw[-FEATURE_BYTES:]
    text = clean_trace(raw)
    # The runner wrapper's usage-record markers are the record stage's to read (verified, for this
    # job only): their encoded payload is not the job's text.
    lines = [ln for ln in text.split(b"\n")[-FEATURE_LINES:] if ln.strip() and _MARKER not in ln]
    feats: set[str] = set()
    n = len(lines)
    for i, line in enumerate(lines):
        toks = tokens(line)
        feats.update(toks)
        if bigrams and len(toks) > 1:
            feats.update(f"{a} {b}" for a, b in zip(toks, toks[1:]))
        if i >= n - LAST_LINES:
            feats.update("$" + t for t in toks)
    reason = (failure_reason or "").strip().lower()
    feats.add(f"s:reason={reason or 'none'}")
    if exit_code is None:
        feats.add("s:exit=none")
    else:
        feats.add(f"s:exit={_number(str(abs(exit_code)))}")
        sig = signal_of(exit_code)
        if sig:
            feats.add(f"s:signal={signal_name(sig)}")
    feats.add(f"s:section={structure.section or 'none'}")
    tool = _tool(structure.last_command)
    if tool:
        feats.add(f"s:tool={tool}")
    if structure.runner_verdict_last:
        feats.add("s:runner_verdict_last")
    return feats


@dataclass(frozen=True)
class LearnedVerdict:
    """What the model says about one trace."""

    family: str
    probability: float
    #: The features that weighed most for ``family`` (log-likelihood ratio against the others).
    top_features: tuple[str, ...]
    #: Every class's posterior probability.
    posterior: Mapping[str, float]
    #: How many of the trace's words the model knows (letters: not numbers, masks, structural
    #: features or the ``$`` copies of the last lines).
    known_words: int = 0


class LearnedModel:
    """A trained naive Bayes model (see :mod:`retry_bot.classify.train` for the artifact's fields)."""

    def __init__(self, data: Mapping[str, Any]):
        if data.get("format") != MODEL_FORMAT:
            raise ValueError(f"learned model: format {data.get('format')!r}, expected {MODEL_FORMAT}")
        self.data = data
        self.classes: tuple[str, ...] = tuple(data["classes"])
        self.bigrams = bool(data.get("bigrams", False))
        self.log_prior = tuple(float(x) for x in data["log_prior"])
        k = len(self.classes)
        weights: dict[str, list[float]] = data["log_likelihood"]
        #: Per class: feature -> log P(feature | class).
        self.by_class: tuple[dict[str, float], ...] = tuple(
            {f: float(w[c]) for f, w in weights.items()} for c in range(k))
        self.vocabulary = frozenset(weights)
        self.version = str(data.get("version", ""))
        #: Below this many known words the model does not speak (its probabilities are not
        #: calibrated: a few strongly weighted words give a confident posterior on a thin trace).
        self.min_words = int(data.get("options", {}).get("min_words", 0))
        self.trained_on = tuple(data.get("trained_on", ()))

    @classmethod
    def from_json(cls, text: str) -> "LearnedModel":
        return cls(json.loads(text))

    def features(self, raw: bytes, *, failure_reason: str | None, exit_code: int | None,
                 structure: Structure) -> set[str]:
        return features(raw, failure_reason=failure_reason, exit_code=exit_code, structure=structure,
                        bigrams=self.bigrams)

    def predict(self, feats: Iterable[str], exclude: Iterable[str] = ()) -> LearnedVerdict:
        """The posterior over the model's classes (``exclude``: classes not allowed; the rest renormalised)."""
        known = self.vocabulary.intersection(feats)
        banned = set(exclude)
        scores = []
        for c, table in enumerate(self.by_class):
            if self.classes[c] in banned:
                scores.append(-math.inf)
                continue
            scores.append(self.log_prior[c] + math.fsum(map(table.__getitem__, known)))
        top = max(scores)
        exps = [math.exp(s - top) if s != -math.inf else 0.0 for s in scores]
        total = sum(exps)
        post = {self.classes[c]: exps[c] / total for c in range(len(self.classes))}
        best = max(range(len(self.classes)), key=lambda c: (scores[c], -c))
        # Why: the features whose likelihood favours the winner most over the mean of the others.
        others = [t for c, t in enumerate(self.by_class) if c != best and self.classes[c] not in banned]
        win = self.by_class[best]

        def lift(f: str) -> float:
            if not others:
                return 0.0
            return win[f] - sum(t[f] for t in others) / len(others)

        top_feats = tuple(sorted(known, key=lambda f: (-lift(f), f))[:6])
        words = sum(1 for f in known if f[0].isalpha() and ":" not in f)
        return LearnedVerdict(self.classes[best], post[self.classes[best]], top_feats, post, words)


_DEFAULT: LearnedModel | None = None


def default_model() -> LearnedModel:
    """The shipped model, loaded on first use and kept."""
    global _DEFAULT
    if _DEFAULT is None:
        text = resources.files("retry_bot.classify").joinpath(MODEL_RESOURCE).read_text("utf-8")
        _DEFAULT = LearnedModel.from_json(text)
    return _DEFAULT


#: Stages whose ``unknown`` verdicts the model may replace: the deliberate fallback of an
#: ambiguous failure reason (``reason_fallback``) and the taxonomy's fallback (no rule matched).
#: Every other verdict is a rule's, and is never overridden.
ELIGIBLE_STAGES = frozenset({"reason_fallback", "fallback"})


def consult(model: LearnedModel, verdict: Classification, raw: bytes, *, failure_reason: str | None,
            exit_code: int | None, structure: Structure, min_probability: float,
            allow_oom: bool = True) -> Classification:
    """``verdict`` (an eligible ``unknown``), or the model's family when it is at least
    ``min_probability`` sure.  ``allow_oom=False`` (a verified usage record covers the failing
    stage and counts no OOM kill) takes ``oom`` out of the model's choices."""
    feats = model.features(raw, failure_reason=failure_reason, exit_code=exit_code, structure=structure)
    out = model.predict(feats, exclude=() if allow_oom else ("oom",))
    shown = ", ".join(f"{f}" for f in out.top_features) or "(no known feature)"
    if min_probability >= 1.0 or out.probability < min_probability:
        return replace(verdict, evidence=verdict.evidence + (
            f"learned fallback (model {model.version}): {out.family} at p={out.probability:.2f}, below "
            f"min_probability {min_probability:.2f}, so unknown stays; features: {shown}",))
    if out.known_words < model.min_words:
        return replace(verdict, evidence=verdict.evidence + (
            f"learned fallback (model {model.version}): {out.family} at p={out.probability:.2f}, but only "
            f"{out.known_words} known words (fewer than {model.min_words}), so unknown stays",))
    return Classification(
        category=f"learned_{out.family}", family=Family(out.family), rule=f"learned:{out.family}",
        evidence=(f"learned fallback (model {model.version}): {out.family} at p={out.probability:.2f} "
                  f"(min_probability {min_probability:.2f}); no rule matched ({verdict.rule}: "
                  f"{verdict.category})",
                  f"features that weighed most: {shown}") + verdict.evidence[:6],
        confidence="weak",
    )
