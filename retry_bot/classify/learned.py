"""The learned fallback: a small logistic-regression text model behind the rules.

The rules decide whenever one of them matches.  When none does -- the verdict is the taxonomy's
fallback or an ambiguous failure reason's ``unknown`` -- this model reads the end of the trace and
the structure the engine already computed, and names a family with a probability.  It speaks only
at or above the taxonomy's ``[learned] min_probability`` and on a trace with enough words it knows
(the artifact's ``min_words``); otherwise ``unknown`` stays.  Its verdict is visible as such: rule
``learned:<family>``, category ``learned_<family>`` (so a policy can treat it more cautiously than
a rule's, by category), confidence ``weak``, ``probability`` the posterior of the family it names (a
policy's ``min_probability`` is held against it), and evidence naming the features that weighed most.

Pure and dependency-free.  The model is a multinomial logistic regression (L2-regularised, fitted by
:func:`retry_bot.classify.train.fit_logistic`) over *binary* features (a feature counts once per
trace: build logs repeat lines).  Until session 24 it was a multinomial naive Bayes over
the same features, whose posteriors were overconfident: its ``infrastructure`` verdicts were right
about 2 times for each deterministic failure they named, at any probability; the logistic regression's
about 4 times (docs/taxonomy.md, "The learned fallback's precision").  The features:

* the **words** of the last 32 KiB: runs of ASCII letters, lower-cased, of the distinct lines -- the
  very vocabulary the classifier's literal pre-filter already built for this trace
  (:meth:`~retry_bot.classify.trace.TraceText.words`), so reading them costs one set intersection
  with the model's vocabulary.  Digits split words and are dropped, so numbers, versions, line
  numbers, paths' and URLs' punctuation and hashes leave only their letter runs (a hash leaves runs
  of one or two letters, which training mostly prunes as too rare); a path or URL keeps its words
  (a registry's host, a tool's name), which carry meaning;
* the words of the last :data:`LAST_LINES` non-blank cleaned lines again, prefixed ``$`` (the end
  weighs more: the failure is there), and the numbers there that carry meaning, prefixed ``#``: exit
  codes (126, 127, 128+N...) and HTTP statuses (:data:`KEPT_NUMBERS`; other numbers are dropped);
* structural features: ``failure_reason``, the exit code and its ``128+N`` signal, the runner
  section, the last command's tool, whether the trace ends in the runner's ``Job failed`` line.

The runner wrapper's usage-record markers are not read (the record stage reads them, verified, for
this job only; their encoded payload is no text of the job).

The artifact (``learned_model.json``, shipped in the package) is produced by
:mod:`retry_bot.classify.train` from the labelled splits that were read (never a sealed one) and is
loaded once, lazily, on the first fallback.  Cost per fallback: one set intersection, the cleaning
of the last :data:`LAST_BYTES`, and one sum per class over the known features.
"""

from __future__ import annotations

import heapq
import json
import math
import re
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any, Iterable, Mapping

from retry_bot.classify.structure import Structure, signal_name, signal_of
from retry_bot.classify.trace import TraceText, clean_line
from retry_bot.model import Classification, Family
from runner_wrapper.marker import MARKER_PREFIX

__all__ = ["LAST_BYTES", "LAST_LINES", "KEPT_NUMBERS", "LearnedModel", "LearnedVerdict", "features", "is_word",
           "line_words", "known_words", "last_lines", "default_model", "consult", "ELIGIBLE_STAGES",
           "MODEL_RESOURCE", "MODEL_FORMAT", "ModelUnavailable"]

#: The last non-blank lines whose words count twice (prefixed ``$``) ...
LAST_LINES = 5
#: ... looked for in this many bytes from the end.
LAST_BYTES = 4096
#: Words are 2 to this many letters long (longer runs are binary junk or encodings).
MAX_WORD = 40
#: The artifact's file name in the package, and its format version.
MODEL_RESOURCE = "learned_model.json"
#: 3: logistic regression (``bias``, ``weights``); 2 was the naive Bayes (``log_prior``, ``log_likelihood``).
MODEL_FORMAT = 3

#: Numbers kept in the last lines: exit codes with a meaning (POSIX 126/127, timeout(1)'s 124,
#: docker run's 125, 128+N signals) and HTTP statuses (RFC 9110).
KEPT_NUMBERS = frozenset({
    "124", "125", "126", "127", "130", "134", "135", "136", "137", "139", "143",
    "400", "401", "403", "404", "405", "407", "408", "409", "410", "413", "422", "429",
    "500", "502", "503", "504",
})

#: Keeps the lower-case ASCII letters, turns every other byte into a space.
_LETTERS = bytes(c if 97 <= c <= 122 else 32 for c in range(256))
_NUMBER = re.compile(rb"(?<![0-9.])[1-5][0-9]{2}(?![0-9])")
#: The runner wrapper's usage-record marker (runner_wrapper/marker.py ``MARKER_PREFIX``).
_MARKER = MARKER_PREFIX.encode("ascii")
#: ``KEY=value`` words (environment assignments) before a command.
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def is_word(w: bytes) -> bool:
    """A letter run the model reads: 2 to :data:`MAX_WORD` letters, and not two hex letters (what
    commit hashes and digests leave behind, ``9f86d0...`` -> ``f``, ``d``, ``ad``...)."""
    return 2 <= len(w) <= MAX_WORD and not (len(w) == 2 and w.strip(b"abcdef") == b"")


def line_words(line: bytes) -> list[str]:
    """The words of one line as the model reads them (:func:`is_word`), lower-cased."""
    return [w.decode("ascii") for w in line.lower().translate(_LETTERS).split() if is_word(w)]


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


def _marker_words(raw: bytes) -> set[bytes]:
    """The letter runs of the usage-record marker lines in the vocabulary's span (usually none)."""
    out: set[bytes] = set()
    lo = max(0, len(raw) - 32 * 1024 - 4096)
    i = raw.rfind(_MARKER, lo)
    while i >= 0:
        end = raw.find(b"\n", i)
        out.update(raw[i:end if end >= 0 else len(raw)].lower().translate(_LETTERS).split())
        i = raw.rfind(_MARKER, lo, i)
    return out


def known_words(trace: TraceText, known: frozenset[bytes] | None = None) -> set[bytes]:
    """The trace's words (:meth:`TraceText.words`) that ``known`` holds (``None``: all of them), without
    the usage-record markers' letter runs."""
    words = trace.words()
    words = set(words) if known is None else words & known
    if words and trace.raw.rfind(_MARKER, max(0, len(trace.raw) - 40 * 1024)) >= 0:
        words -= _marker_words(trace.raw)
    return words


def last_lines(raw: bytes) -> list[bytes]:
    """The last :data:`LAST_LINES` non-blank lines (cleaned) within :data:`LAST_BYTES` of the end,
    oldest first, without the usage-record markers."""
    out: list[bytes] = []
    lo = max(0, len(raw) - LAST_BYTES)
    end = len(raw)
    while end > lo and len(out) < LAST_LINES:
        start = raw.rfind(b"\n", lo, end) + 1
        if start == 0:
            start = lo
        line = clean_line(raw[start:end])
        if line.strip() and _MARKER not in line:
            out.append(line)
        end = start - 1
    out.reverse()
    return out


def features(trace: TraceText, *, failure_reason: str | None, exit_code: int | None, structure: Structure,
             vocabulary: "LearnedModel | None" = None, words: set[bytes] | None = None) -> set[str]:
    """The model's features of one trace tail and its structure.

    ``vocabulary``: the model's (:class:`LearnedModel`), so that only the features it knows are
    made (the others cannot weigh); ``None``: every feature (training).  ``words``:
    :func:`known_words`, when the caller has it already.
    """
    if vocabulary is None:
        feats = {w.decode("ascii") for w in known_words(trace) if is_word(w)}
        for line in last_lines(trace.raw):
            feats.update("$" + w for w in line_words(line))
            for num in _NUMBER.findall(line):
                if num.decode("ascii") in KEPT_NUMBERS:
                    feats.add("#" + num.decode("ascii"))
    else:
        # The same features, restricted to the model's: C-level set operations and lookups.
        if words is None:
            words = known_words(trace, vocabulary.words)
        feats = set(map(vocabulary.word_str.__getitem__, words))
        for line in last_lines(trace.raw):
            last = vocabulary.last_words.keys() & line.lower().translate(_LETTERS).split()
            feats.update(map(vocabulary.last_words.__getitem__, last))
            for num in _NUMBER.findall(line):
                if num.decode("ascii") in KEPT_NUMBERS:
                    feats.add("#" + num.decode("ascii"))
    reason = (failure_reason or "").strip().lower()
    feats.add(f"s:reason={reason or 'none'}")
    if exit_code is None:
        feats.add("s:exit=none")
    else:
        code = str(exit_code)
        feats.add(f"s:exit={code if code in KEPT_NUMBERS or exit_code in (0, 1, 2) else 'other'}")
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
    #: The features that weighed most for ``family`` (weight against the mean of the others').
    top_features: tuple[str, ...]
    #: Every class's posterior probability.
    posterior: Mapping[str, float]
    #: How many of the trace's words of 3 letters or more the model knows (not the structural
    #: features or the ``$`` copies of the last lines).
    known_words: int = 0


class LearnedModel:
    """A trained logistic-regression model (see :mod:`retry_bot.classify.train` for the artifact's
    fields): a class's score is its bias plus the weights of the trace's known features; the
    posterior is their softmax."""

    def __init__(self, data: Mapping[str, Any]):
        if data.get("format") != MODEL_FORMAT:
            old = " (a naive Bayes artifact of an older release)" if data.get("format") in (1, 2) else ""
            raise ValueError(f"learned model: format {data.get('format')!r}{old}, expected {MODEL_FORMAT}; "
                             "regenerate it with python -m retry_bot.classify.train")
        self.data = data
        self.classes: tuple[str, ...] = tuple(data["classes"])
        self.bias = tuple(float(x) for x in data["bias"])
        k = len(self.classes)
        weights: dict[str, list[float]] = data["weights"]
        #: feature -> its weight for every class, in class order (one lookup per feature in
        #: :meth:`predict`)
        self.rows: dict[str, tuple[float, ...]] = {f: tuple(float(x) for x in w) for f, w in weights.items()}
        self.vocabulary = frozenset(weights)
        #: The plain words of the vocabulary (as features, and as the trace's word set holds them).
        self.word_features = frozenset(f for f in weights if f[0].isalpha() and ":" not in f)
        self.words = frozenset(f.encode("ascii") for f in self.word_features)
        #: The words of 3 letters or more: those the ``min_words`` gate counts (random bytes and
        #: encodings leave many 2-letter runs, hardly any longer one).
        self.long_words = frozenset(w for w in self.words if len(w) >= 3)
        self.long_word_features = frozenset(f for f in self.word_features if len(f) >= 3)
        #: word (bytes) -> its feature; a last line's word (bytes) -> its ``$`` feature.
        self.word_str: dict[bytes, str] = {f.encode("ascii"): f for f in self.word_features}
        self.last_words: dict[bytes, str] = {f[1:].encode("ascii"): f for f in weights
                                             if f.startswith("$") and f[1:2].isalpha()}
        #: Per class: feature -> how much its weight favours the class over the mean of the
        #: others (the evidence's "weighed most").
        self.lift: tuple[dict[str, float], ...] = tuple(
            {f: w[c] - (sum(w) - w[c]) / max(k - 1, 1) for f, w in weights.items()} for c in range(k))
        self.version = str(data.get("version", ""))
        #: Below this many known words the model does not speak (a few strongly weighted words give
        #: a confident posterior on a thin trace).
        self.min_words = int(data.get("options", {}).get("min_words", 0))
        self.trained_on = tuple(data.get("trained_on", ()))

    @classmethod
    def from_json(cls, text: str) -> "LearnedModel":
        return cls(json.loads(text))

    def features(self, trace: TraceText, *, failure_reason: str | None, exit_code: int | None,
                 structure: Structure, words: set[bytes] | None = None) -> set[str]:
        """:func:`features`, restricted to the ones this model knows."""
        return features(trace, failure_reason=failure_reason, exit_code=exit_code, structure=structure,
                        vocabulary=self, words=words)

    def predict(self, feats: Iterable[str], exclude: Iterable[str] = ()) -> LearnedVerdict:
        """The posterior over the model's classes (``exclude``: classes not allowed; the rest renormalised)."""
        known = self.vocabulary.intersection(feats)
        banned = set(exclude)
        scores = []
        # the known features' weights, one column per class (fsum is exactly rounded: the order of
        # the set does not matter)
        cols = tuple(zip(*map(self.rows.__getitem__, known))) or ((),) * len(self.classes)
        for c in range(len(self.classes)):
            if self.classes[c] in banned:
                scores.append(-math.inf)
                continue
            scores.append(self.bias[c] + math.fsum(cols[c]))
        top = max(scores)
        exps = [math.exp(s - top) if s != -math.inf else 0.0 for s in scores]
        total = sum(exps)
        post = {self.classes[c]: exps[c] / total for c in range(len(self.classes))}
        best = max(range(len(self.classes)), key=lambda c: (scores[c], -c))
        top_feats = tuple(heapq.nlargest(6, sorted(known), key=self.lift[best].__getitem__))  # stable on ties
        words = len(self.long_word_features.intersection(known))
        return LearnedVerdict(self.classes[best], post[self.classes[best]], top_feats, post, words)


class ModelUnavailable(Exception):
    """The shipped artifact cannot be read (a damaged installation): the fallback stays silent."""


_DEFAULT: LearnedModel | ModelUnavailable | None = None


def default_model() -> LearnedModel:
    """The shipped model, loaded on first use and kept (a failure too: raised again, not retried)."""
    global _DEFAULT
    if _DEFAULT is None:
        try:
            text = resources.files("retry_bot.classify").joinpath(MODEL_RESOURCE).read_text("utf-8")
            _DEFAULT = LearnedModel.from_json(text)
        except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
            _DEFAULT = ModelUnavailable(f"the learned model {MODEL_RESOURCE} cannot be read ({e}); "
                                        "reinstall gitlab-rightsizer")
    if isinstance(_DEFAULT, ModelUnavailable):
        raise _DEFAULT
    return _DEFAULT


#: Stages whose ``unknown`` verdicts the model may replace: the deliberate fallback of an
#: ambiguous failure reason (``reason_fallback``) and the taxonomy's fallback (no rule matched).
#: Every other verdict is a rule's, and is never overridden.
ELIGIBLE_STAGES = frozenset({"reason_fallback", "fallback"})


def consult(model: LearnedModel, verdict: Classification, trace: TraceText, *, failure_reason: str | None,
            exit_code: int | None, structure: Structure, min_probability: float,
            allow_oom: bool = True) -> Classification:
    """``verdict`` (an eligible ``unknown``), or the model's family when it is at least
    ``min_probability`` sure.  ``allow_oom=False`` (a verified usage record covers the failing
    stage and counts no OOM kill) takes ``oom`` out of the model's choices."""
    words = known_words(trace, model.words)
    n = len(model.long_words.intersection(words))
    if n < model.min_words:
        # Too little known text to weigh (a thin trace, binary junk): no posterior is computed.
        return replace(verdict, evidence=verdict.evidence + (
            f"learned fallback (model {model.version}): only {n} known words of 3 letters or more (fewer "
            f"than {model.min_words}), so unknown stays",))
    feats = model.features(trace, failure_reason=failure_reason, exit_code=exit_code, structure=structure,
                           words=words)
    out = model.predict(feats, exclude=() if allow_oom else ("oom",))
    shown = ", ".join(out.top_features) or "(no known feature)"
    if min_probability >= 1.0 or out.probability < min_probability:
        return replace(verdict, evidence=verdict.evidence + (
            f"learned fallback (model {model.version}): {out.family} at p={out.probability:.2f}, below "
            f"min_probability {min_probability:.2f}, so unknown stays; features: {shown}",))
    return Classification(
        category=f"learned_{out.family}", family=Family(out.family), rule=f"learned:{out.family}",
        evidence=(f"learned fallback (model {model.version}): {out.family} at p={out.probability:.2f} "
                  f"(min_probability {min_probability:.2f}); no rule matched ({verdict.rule}: "
                  f"{verdict.category})",
                  f"features that weighed most: {shown}") + verdict.evidence[:6],
        confidence="weak", probability=out.probability,
    )
