"""The speed work of issue 11's twelfth pass keeps every verdict: line shapes in the pre-filter
vocabulary, words taken from the shapes, the older region's shapes-only vocabulary, and the
engine skipping a stage's rules none of whose needles occurs in the window."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retry_bot.classify import classify, load_taxonomy, taxonomy_from_text
from retry_bot.classify.trace import _LETTER_TABLE, VOCABULARY_BYTES, TraceText, _shape, _Vocabulary
from retry_bot.model import JobFacts

from tests.bot_classify.test_prefilter_equivalence import FRAGMENTS, reference

TAX = load_taxonomy()

NOISE = [
    b"\x1b[32m[ 12%] Building CXX object src/mod3/CMakeFiles/m.dir/file17.cpp.o\x1b[0m",
    b"/builds/g/p/src/mod4/file1234.cpp:12:7: warning: unused variable 'tmp1234' [-Wunused-variable]",
    b"tests/test_mod9.py::test_case_77 PASSED                         [ 42%]",
    b"Downloading dependency 9: 10%\r  45%\r  100%",
    b"  9 | static int helper_9(int a, int b) { return a * b + 9; }",
]


def _plain_words(lowered: bytes) -> set[bytes]:
    return set(lowered.translate(_LETTER_TABLE).split())


def _repetitive(rng: random.Random, lines: int) -> bytes:
    """Build-log-like text: few line shapes, many numbers (the shapes path is taken)."""
    out = []
    for i in range(lines):
        ln = rng.choice(NOISE)
        out.append(ln.replace(b"9", str(rng.randrange(10**6)).encode()).replace(b"12", str(i).encode()))
    return b"\n".join(out) + b"\n"


# ------------------------------------------------------------------ vocabulary and line shapes


def test_shapes_are_a_fraction_of_a_repetitive_text_and_words_are_unchanged():
    text = _repetitive(random.Random(1), 800).lower()
    v = _Vocabulary.of_text(text)
    assert v.shapes() and len(v.shapes()) * 3 <= len(text)
    assert v.words == _plain_words(text)


def test_no_shapes_for_binary_or_one_long_line():
    rng = random.Random(2)
    for text in (rng.randbytes(32768).lower(), b" ".join([b"error-1", b"Killed-2"] * 3000).lower()):
        v = _Vocabulary.of_text(text)
        assert not v.shapes()
        assert v.words == _plain_words(text)


def test_shape_maps_digits_and_case_bytewise():
    assert _shape(b"Error 137") == b"error 000"
    assert _shape(b"-1073741") == b"-0000000"
    assert len(_shape(bytes(range(256)))) == 256


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6), st.integers(1, 400), st.data())
def test_every_substring_is_admitted(seed, lines, data):
    """The shapes (and the shapes-only region vocabulary) are necessary conditions: a needle that
    occurs, in any case, is always admitted."""
    text = _repetitive(random.Random(seed), lines)
    text += b"\n".join(data.draw(st.lists(st.sampled_from(FRAGMENTS), max_size=5))) + b"\n"
    low = text.lower()
    full, region = _Vocabulary.of_text(low), _Vocabulary.of_region(low)
    assert full.words == _plain_words(low)
    for _ in range(20):
        a = data.draw(st.integers(0, len(text) - 1))
        b = data.draw(st.integers(a + 1, min(len(text), a + 40)))
        needle = text[a:b]
        if b"\n" in needle:
            continue
        assert full.admits(needle), needle
        assert region.admits(needle), needle


# ------------------------------------------------------------------ occurs


def test_occurs_is_what_last_match_can_try():
    raw = b"alpha one\n" + b"noise\n" * 50 + b"beta two\nalpha three\n"
    t = TraceText(raw)
    n = len(raw)
    assert t.occurs(b"alpha", False, 0, n)
    assert t.occurs(b"alpha", False, n - 12, n)
    assert not t.occurs(b"alpha", False, 10, n - 12)  # the only ones lie outside [10, n - 12)
    assert not t.occurs(b"gamma", False, 0, n)
    assert t.occurs(b"beta", True, 0, n) and not t.occurs(b"BETA", False, 0, n)


# ------------------------------------------------------------------ the engine's choice is unchanged

_TWO = """schema = 1
stage_order = ["s", "fallback_s"]
[stages.s]
resolve = "{resolve}"
scan_bytes = 32768
[stages.fallback_s]
resolve = "first"
[learned]
enabled = false
[[rule]]
name = "low-priority"
stage = "s"
priority = 20
category = "b"
family = "infrastructure"
description = "d"
patterns = ["connection (?:reset|refused)"]
[[rule]]
name = "high-priority"
stage = "s"
priority = 10
category = "a"
family = "build_error"
description = "d"
patterns = ["error: .*refused"]
[[rule]]
name = "absent-needle"
stage = "s"
priority = 5
category = "c"
family = "oom"
description = "d"
patterns = ["zebra crossing"]
"""


def _verdict(resolve: str, raw: bytes) -> str:
    return classify(JobFacts(job_id=1, name="j"), raw, taxonomy_from_text(_TWO.format(resolve=resolve))).rule


def test_same_line_two_rules_priority_wins():
    line = b"error: connection refused\n"
    for resolve in ("last", "first"):
        assert _verdict(resolve, b"noise\n" * 100 + line) == "high-priority"


def test_resolve_last_later_line_wins_and_first_takes_priority():
    raw = b"error: it was refused\n" + b"noise 12\n" * 200 + b"connection reset by peer\n"
    assert _verdict("last", raw) == "low-priority"
    assert _verdict("first", raw) == "high-priority"


def test_a_match_far_back_behind_repetitive_output_is_still_found():
    # the stage reads 32 KiB; the match is 16-32 KiB back behind output the line shapes fold
    raw = b"connection reset by peer\n" + _repetitive(random.Random(3), 250)
    assert 16384 < len(raw) < 32768
    assert _verdict("last", raw) == "low-priority"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6), st.integers(0, 100),
       st.lists(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=3).map(b" ".join), max_size=12),
       st.booleans())
def test_fast_path_equals_brute_force_behind_build_output(seed, lines, tail, before):
    """As test_prefilter_equivalence, with the fragments behind (or before) repetitive build output
    (the line shapes are used), within 8 KiB (every stage's region: the reference reads everything).
    Far-back matches and the older region: ``benchmarks/verdict_dump.py``'s ``far`` inputs."""
    noise = _repetitive(random.Random(seed), lines)
    frag = b"\n".join(tail) + b"\n"
    raw = frag + noise if before else noise + frag
    if b"exit code" in raw or b"exit status" in raw or len(raw) > 8192:
        return
    got = classify(JobFacts(job_id=1, name="j"), raw, TAX).rule
    want = reference(raw)
    if got.startswith("learned:"):
        assert want == "fallback", (got, want)
        got = "fallback"
    assert got == want


def test_vocabulary_bytes_unchanged():
    # the regions the shapes cover are the vocabulary's: a change here changes what is dismissed
    assert VOCABULARY_BYTES == 32 * 1024
