"""The word-vocabulary pre-filter is a pure optimisation.

* soundness: a needle that occurs in a text (in any case) is never dismissed, whatever the
  text holds (ANSI codes, digits, binary bytes) and wherever the needle starts;
* equivalence: on long traces (past the vocabulary's 32 KiB and the 64 KiB stages), with
  messages at every distance from the end, the classifier decides exactly as it does with the
  pre-filter switched off (every needle searched for in the trace itself).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retry_bot.classify import classify, load_taxonomy
from retry_bot.classify.trace import VOCABULARY_BYTES, NeedleIndex, TraceText, needle_witness
from retry_bot.model import JobFacts

from .test_prefilter_equivalence import FRAGMENTS

TAX = load_taxonomy()
NEEDLES = sorted({n for r in TAX.rules for p in r.patterns for n in p.needles})

# Bytes that make the word structure interesting: letters of both cases, digits, separators,
# escape sequences, non-ASCII.
_ALPHABET = st.sampled_from([b"a", b"B", b"o", b"M", b"k", b"i", b"l", b"e", b"d", b"r", b"x", b"9", b"0",
                             b" ", b":", b"-", b"_", b"'", b"\n", b"\r", b"\x1b[31m", b"\xff", b"\x00", b"("])
texts = st.lists(_ALPHABET, min_size=1, max_size=300).map(b"".join)


def test_witness_examples():
    assert needle_witness(b"No space left on device") == ((b"space", b"left", b"on"), (b"device",), (b"no",), ())
    assert needle_witness(b"Killed") == ((), (), (), (b"killed",))
    assert needle_witness(b"127.0.0.1") == ((), (), (), ())
    assert needle_witness(b"x509: cert") == ((), (b"cert",), (b"x",), ())


@settings(max_examples=400, deadline=None)
@given(texts, st.data())
def test_a_needle_that_occurs_is_never_dismissed(text, data):
    i = data.draw(st.integers(0, len(text) - 1))
    j = data.draw(st.integers(i + 1, min(len(text), i + 40)))
    needle = text[i:j]
    if data.draw(st.booleans()):
        needle = needle.swapcase()  # needles are matched in any case
    trace = TraceText(text)
    assert trace.may_contain(needle, 0)
    assert trace.may_contain(needle, i)
    assert needle in trace.live_needles(NeedleIndex([needle, b"zzzq unrelated"]), 0)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(NEEDLES), st.integers(0, 3 * VOCABULARY_BYTES), st.integers(0, 2 * VOCABULARY_BYTES))
def test_taxonomy_needles_are_found_at_any_distance_from_the_end(needle, before, after):
    rng = random.Random(before * 7 + after)
    filler = bytes(rng.choice(b"abcdefghij klmnop\n0123456789") for _ in range(before))
    raw = filler + needle.swapcase() + b" " + bytes(rng.choice(b"qrstuvwxyz \n-") for _ in range(after))
    trace = TraceText(raw)
    start = len(filler)
    assert trace.may_contain(needle, 0) and trace.may_contain(needle, start)
    index = NeedleIndex(NEEDLES)
    assert needle in trace.live_needles(index, min(start, max(0, len(raw) - VOCABULARY_BYTES)))


def _filler(rng: random.Random, size: int) -> bytes:
    out, total, i = [], 0, 0
    while total < size:
        i += 1
        k = rng.randrange(6)
        if k == 0:
            ln = f"\x1b[32m[{i % 100:3d}%] Building CXX object src/m{i % 37}/file{i}.cpp.o\x1b[0m"
        elif k == 1:
            ln = f"src/file{i}.cpp:{i % 900}:7: warning: unused variable 'tmp{i}' [-Wunused-variable]"
        elif k == 2:
            ln = f"section_start:{1700000000 + i}:step_{i}\r\x1b[0K\x1b[36;1m$ make -j8 target{i}\x1b[0;m"
        elif k == 3:
            ln = f"Downloading dependency {i}: 10%\r  45%\r  100%"
        elif k == 4:
            ln = f"tests/test_m{i % 50}.py::test_case_{i} PASSED   [{i % 100:3d}%]"
        else:
            ln = f"  {i} | static int helper_{i}(int a) {{ return a * {i}; }}"
        b = ln.encode() + b"\n"
        out.append(b)
        total += len(b)
    return b"".join(out)


def _long_trace(rng: random.Random) -> bytes:
    """100-200 KiB of build output with a few messages at random places, some near the
    vocabulary boundary (32 KiB from the end) and the 64 KiB stage boundary."""
    raw = bytearray(_filler(rng, rng.randrange(100_000, 200_000)))
    n = len(raw)
    for _ in range(rng.randrange(0, 6)):
        frag = b" ".join(rng.choice(FRAGMENTS) for _ in range(rng.randrange(1, 3)))
        where = rng.choice([rng.randrange(n), n - VOCABULARY_BYTES + rng.randrange(-300, 300),
                            n - rng.randrange(VOCABULARY_BYTES), n - rng.randrange(VOCABULARY_BYTES),
                            n - 2 * VOCABULARY_BYTES + rng.randrange(-300, 300), n - rng.randrange(2000)])
        where = min(max(where, 0), len(raw))
        raw[where:where] = b"\n" + frag + b"\n"
    if rng.random() < 0.3:
        raw += rng.randbytes(rng.randrange(1, 40_000))
    return bytes(raw)


class _NoPrefilter:
    """Switch the vocabulary off: every needle may occur everywhere."""

    def __enter__(self):
        self.mp = pytest.MonkeyPatch()
        self.mp.setattr(TraceText, "may_contain", lambda self, needle, lo=0: True)
        self.mp.setattr(TraceText, "live_needles", lambda self, index, lo=0: frozenset(index.needles))
        return self

    def __exit__(self, *exc):
        self.mp.undo()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_the_prefilter_changes_no_verdict_on_long_traces(seed):
    rng = random.Random(seed)
    raw = _long_trace(rng)
    facts = JobFacts(job_id=1, name="j", exit_code=rng.choice([None, None, 1, 2, 137]),
                     failure_reason=rng.choice([None, "script_failure", "runner_system_failure"]))
    fast = classify(facts, raw, TAX)
    with _NoPrefilter():
        slow = classify(facts, raw, TAX)
    assert (fast.rule, fast.category, fast.evidence) == (slow.rule, slow.category, slow.evidence)


def test_the_older_regions_vocabulary_never_dismisses_a_needle_that_occurs_there():
    """A region reaching before the vocabulary's 32 KiB gets its own vocabulary when many needles
    are pending there (trace.py ``_older_vocabulary``): every needle that occurs in it, wherever it
    starts (deep in it, just before the vocabulary's part, straddling the boundary), stays live."""
    index = NeedleIndex(NEEDLES)
    filler = b"[ 12%] plain output of a build step, nothing to see\n"
    recent = (filler * (VOCABULARY_BYTES // len(filler) + 2))[-VOCABULARY_BYTES:]
    rng = random.Random(11)
    pad = (filler * 900)[:20000]
    for needle in rng.sample(NEEDLES, 200):
        for back in (4000, 600, 3, 1, len(needle) // 2 or 1):  # bytes before the vocabulary's part
            buf = bytearray(pad + recent)
            at = len(pad) - back
            buf[at:at + len(needle)] = needle
            raw = bytes(buf[:len(pad) + VOCABULARY_BYTES])
            assert len(raw) - VOCABULARY_BYTES == len(pad) and raw[at:].startswith(needle)
            live = TraceText(raw).live_needles(index, lo=0)
            assert needle in live, (needle, back)


# --- case-sensitive pre-check (upper-case runs) and words of non-folding text ------------------

_CASED = st.sampled_from([b"a", b"B", b"AB", b"FAIL", b"ED", b"e", b"Err", b"or", b"x", b"9", b" ", b":", b"[",
                          b"-", b"\n", b"\r", b"\x1b[31m", b"\xff", b"\x00", b"\xc3\x89", b"_"])
cased_texts = st.lists(_CASED, min_size=1, max_size=200).map(b"".join)


def _distinct_lines(k: int, line: bytes) -> bytes:
    """``k`` lines of lower-case build output that do not fold into line shapes (a distinct word each),
    as real output: the upper-case check is used only there."""
    def word(i: int) -> bytes:
        out = b""
        while True:
            out += bytes([97 + i % 26])
            i //= 26
            if not i:
                return out
    return b"".join(b"%s %s\n" % (word(i), line) for i in range(k))


@settings(max_examples=400, deadline=None)
@given(cased_texts, st.data(), st.integers(0, 3000))
def test_the_upper_case_check_never_dismisses_a_needle_that_occurs(text, data, pad):
    """A needle cut from the text as it is (mixed case, spanning lines, escape bytes) is admitted,
    and a case-sensitive search finds it, however far into the vocabulary's region it lies."""
    raw = _distinct_lines(pad, b"lower case build output, -Werror, test_fail.py") + text
    i = data.draw(st.integers(0, len(text) - 1))
    j = data.draw(st.integers(i + 1, min(len(text), i + 40)))
    needle = text[i:j]
    trace = TraceText(raw)
    assert trace.upper_admits(needle)
    at = len(raw) - len(text) + i
    floor = data.draw(st.integers(max(0, len(raw) - VOCABULARY_BYTES), at))
    assert any(k == raw.rfind(needle, floor) for k, _ in trace._candidates(needle, False, floor))


def test_the_upper_case_check_dismisses_absent_upper_case_runs():
    raw = _distinct_lines(50, b"gcc -Werror -c errors.c; tests/test_fail.py::test_x passed") + b"ERROR: Job failed: exit code 1\n"
    trace = TraceText(raw)
    assert not trace._vocabulary().shapes()
    for needle in (b"FAILED", b"BUILD FAILED", b"[SC", b" FAILED **", b"rror MSB"):
        assert needle not in raw and not trace.upper_admits(needle)
        assert trace._candidates(needle, False, len(raw) - 4096) == []
    for needle in (b"ERROR", b"ERROR: Job", b"error", b"Job failed", b"passed\nb gcc -Werror", b"1\n"):
        assert needle in raw and trace.upper_admits(needle)
    assert TraceText(raw).upper_admits(b"x")  # no upper-case letter: no evidence
    # lines that fold into shapes: the shapes decide, the check is not built (no evidence)
    assert TraceText(b"FAIL: x 1\n" * 200).upper_admits(b"FAILED")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([b"alpha", b"Beta9", b"gam-ma", b"x1", b" ", b"\n", b"\xff", b"12", b"DELTA"]),
                min_size=1, max_size=400).map(b"".join))
def test_vocabulary_words_and_shapes_are_those_of_the_text(text):
    """Whether its lines fold or not, a vocabulary's words are the text's (lower-cased) letter runs,
    and its shapes (when it keeps any) are its distinct line shapes."""
    from retry_bot.classify.trace import _LETTER_TABLE, _SHAPE_TABLE, _Vocabulary
    low = text.lower()
    words = set(low.translate(_LETTER_TABLE).split())
    distinct = set(low.translate(_SHAPE_TABLE).split(b"\n"))
    for v in (_Vocabulary.of_text(low), _Vocabulary.of_region(low)):
        if v.words is not None:
            assert v.words == words
        shapes = v.shapes() if v._text is not None else b""
        if shapes:
            assert set(shapes.split(b"\n")) == distinct
