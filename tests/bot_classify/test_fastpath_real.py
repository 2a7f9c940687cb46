"""The real-output speed pass (issue 11, branch h11w) keeps every verdict: each structure it added
answers exactly as the plain search it replaces, or is a necessary condition only.

* anchors: case variants of a needle answered from one list of a shared lower-case word's
  occurrences (``TraceText._anchor_rfind``) find what the plain ``rfind`` scans find;
* vocabularies of text whose lines do not fold (``_distinct_lines``) hold the same words;
* affix sets by one ``map`` answer every ``k``-letter key as the filtered comprehensions did;
* ``live_needles`` over a region reaching before the vocabulary (group tests on both parts) gives
  the needles the per-needle tests gave;
* ``TraceText.may_occur`` (runner headers in ``structure.analyse``) never dismisses a needle that
  occurs; ``analyse`` with its shortcuts equals the plain searches;
* the learned fallback's column sums equal its per-class sums.
"""

from __future__ import annotations

import math
import random
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retry_bot.classify import learned, load_taxonomy
from retry_bot.classify.engine import _StagePlan
from retry_bot.classify.structure import (_COMMAND, _END_BYTES, _HEADERS, _RUNNER_VERDICT, _SECTION_START,
                                          POST_FAILURE_SECTIONS, analyse, drop_post_failure_output,
                                          drop_post_failure_output_and_markers)
from retry_bot.classify.trace import (_LETTER_TABLE, MAX_LINES_PER_NEEDLE, VOCABULARY_BYTES,
                                      NeedleIndex, TraceText, _anchor, _distinct_lines, _Vocabulary, clean_line)

TAX = load_taxonomy()
#: The words of 4+ letters as the affix sets once picked them (a regex over the joined words): the reference the
#: comprehension in ``_Vocabulary.affixes`` is checked against.
_LONG_WORD_RE = re.compile(rb"[a-z]{4,}")

#: Case variants sharing anchors, as the taxonomy's needles do (``error``, ``status``, ``failed``).
NEEDLES = [b"error", b"ERROR", b"Error:", b"error ", b": error", b"error[E", b"Error 137", b"Bus error",
           b"status code", b"Status code: 50", b" status code", b"status_code: 403", b"failed", b"Job failed",
           b" test failed", b"exit code", b"exit ", b".py:", b"127.0.0.1"]
PIECES = [b"error", b"ERROR", b"Error", b"eRRor", b"-Werror", b"status", b"Status code: 503", b"status_code: 403",
          b"failed", b"FAILED", b"Job failed", b"exit code 1", b"exit ", b"setup.py:12", b"127.0.0.1", b"[E0425]",
          b": ", b" ", b"\n", b"x", b"copying build/lib/sqlalchemy/orm/state.py -> build/bdist/wheel",
          b"Bus error", b"test failed", b"errorerror"]


def _real_like(rng: random.Random, size: int) -> bytes:
    """Lines that do not fold into shapes (a file name on each), with the pieces in between."""
    out, n = [], 0
    while n < size:
        line = b"  copying build/lib/pkg/mod%d_%s.py -> build/bdist/pkg" % (
            rng.randrange(10**6), bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))))
        if rng.random() < 0.3:
            line += b" " + b"".join(rng.choice(PIECES) for _ in range(rng.randint(1, 4)))
        out.append(line)
        n += len(line) + 1
    return b"\n".join(out) + b"\n"


def _plain_candidates(raw: bytes, needle: bytes, ignore_case: bool, floor: int) -> list[tuple[int, int]]:
    """``TraceText._candidates`` without any pre-filter or anchor: plain scans."""
    hay = raw.lower() if ignore_case else raw
    out: list[tuple[int, int]] = []
    end = len(raw)
    while len(out) < MAX_LINES_PER_NEEDLE:
        i = hay.rfind(needle, floor, end)
        if i < 0:
            break
        ls = raw.rfind(b"\n", 0, i) + 1
        out.append((i, ls))
        end = ls
    return out


def test_real_like_text_takes_the_direct_path_and_repetitive_text_does_not():
    assert _distinct_lines(_real_like(random.Random(3), 20000).lower())
    assert not _distinct_lines(b"".join(b"[ %d%%] Building CXX object src/f%d.o\n" % (i % 100, i) for i in range(900)))
    assert not _distinct_lines(b"one long line " * 400)


def test_anchor_is_the_longest_lower_case_word():
    assert _anchor(b"ERROR: Job failed: canceled") == (b"canceled", 19)
    assert _anchor(b"Error 137") == (b"error", 0)
    assert _anchor(b" code E") == (b"code", 1)
    assert _anchor(b"127.0.0.1") is None and _anchor(b"e: /") is None


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6), st.integers(200, 40000), st.booleans(), st.data())
def test_anchored_scans_find_what_plain_scans_find(seed, size, dense, data):
    rng = random.Random(seed)
    raw = _real_like(rng, size)
    if dense:  # more than _ANCHOR_MAX occurrences of the shared word: the list is dropped, scans
        raw += b"\n".join(b"ErRoR %d error" % i for i in range(80)) + b"\n"
    raw += b"".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12)))
    t = TraceText(raw)
    n = len(raw)
    vstart = max(0, n - VOCABULARY_BYTES)
    needles = data.draw(st.lists(st.sampled_from(NEEDLES), min_size=1, max_size=12))
    for needle in needles:
        ignore_case = data.draw(st.booleans())
        if ignore_case:
            needle = needle.lower()
        floors = sorted({data.draw(st.integers(vstart, n)) for _ in range(2)}, reverse=True)
        for floor in floors:  # as the windows grow: lower floors later
            got = [c for c in t._candidates(needle, ignore_case, floor) if c[0] >= floor]
            want = _plain_candidates(raw, needle, ignore_case, floor)
            assert got == want[:len(got)] and (len(got) == len(want) or len(got) >= MAX_LINES_PER_NEEDLE), (
                needle, ignore_case, floor)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6), st.integers(1000, 40000), st.data())
def test_vocabulary_of_lines_that_do_not_fold(seed, size, data):
    """Real-like text takes the direct path (no shapes): the same words, and every substring is
    admitted, by the vocabulary and by the older region's."""
    text = _real_like(random.Random(seed), size)
    low = text.lower()
    full, region = _Vocabulary.of_text(low), _Vocabulary.of_region(low)
    plain = set(low.translate(_LETTER_TABLE).split())
    assert full.words == plain and region.words == plain
    if _distinct_lines(low):  # (a short text of a few long lines may not have the 8 lines it needs)
        assert not full.shapes()
    for _ in range(25):
        a = data.draw(st.integers(0, len(text) - 1))
        needle = text[a:data.draw(st.integers(a + 1, min(len(text), a + 40)))]
        assert full.admits(needle) and region.admits(needle), needle


@given(st.lists(st.from_regex(re.compile(rb"[a-z]{1,12}"), fullmatch=True), max_size=60),
       st.lists(st.from_regex(re.compile(rb"[a-z]{4,8}"), fullmatch=True), max_size=30))
def test_affix_sets_answer_every_key_as_before(words, probes):
    v = _Vocabulary(set(words))
    long = set(_LONG_WORD_RE.findall(v.joined()))
    for k in (4, 6, -4, -6):
        before = {w[:k] for w in long if len(w) >= k} if k > 0 else {w[k:] for w in long if len(w) >= -k}
        keys = {w[:k] if k > 0 else w[k:] for w in list(long) + probes if len(w) >= abs(k)}
        for key in keys:
            assert (key in v.affixes(k)) == (key in before), (k, key)


def _live_before(t: TraceText, index: NeedleIndex, lo: int) -> frozenset[bytes]:
    """live_needles for lo before the vocabulary as it was: one test per needle."""
    vstart = len(t.raw) - VOCABULARY_BYTES
    low = t.raw.lower()
    live = [n for n in index.needles if t.may_contain(n, vstart)]
    older = [n for n in index.needles if not t.may_contain(n, vstart)]
    if len(older) >= 8:
        vocab = _Vocabulary.of_region(low[lo:vstart + 512])
        older = [n for n in older if len(n) >= 512 or vocab.admits(n)]
    live += [n for n in older if low.find(n.lower(), lo, vstart + len(n) - 1) >= 0]
    return frozenset(live)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6), st.booleans(), st.data())
def test_live_needles_of_a_region_before_the_vocabulary(seed, folding, data):
    rng = random.Random(seed)
    if folding:
        body = b"".join(b"[ %d%%] Building CXX object src/f%d.o\n" % (i % 100, i) for i in range(2600))
    else:
        body = _real_like(rng, 70000)
    # needles of the OOM stage placed deep in the older region, before and across the boundary
    plan = _StagePlan.of(TAX, "oom_signature")
    picks = data.draw(st.lists(st.sampled_from(plan.index.needles), max_size=4))
    n0 = len(body)
    for p in picks:
        at = data.draw(st.integers(0, n0 - 1))
        body = body[:at] + p + body[at:]
    raw = body[-(64 * 1024 + 2000):]
    lo = len(raw) - 64 * 1024
    t = TraceText(raw)
    got = t.live_needles(plan.index, lo)
    assert got == _live_before(TraceText(raw), plan.index, lo)
    low = raw.lower()
    for n in plan.index.needles:
        if low.find(n.lower(), lo) >= 0:
            assert n in got, n


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6), st.integers(100, 80000), st.data())
def test_may_occur_never_dismisses_a_needle_that_occurs(seed, size, data):
    rng = random.Random(seed)
    raw = _real_like(rng, size)
    headers = [h for h, _ in _HEADERS]
    for _ in range(data.draw(st.integers(0, 3))):
        at = data.draw(st.integers(0, len(raw)))
        raw = raw[:at] + data.draw(st.sampled_from(headers)) + raw[at:]
    t = TraceText(raw)
    lo = max(0, len(raw) - 64 * 1024)
    if data.draw(st.booleans()):  # the older region's vocabulary built, as oom_signature does
        t.live_needles(_StagePlan.of(TAX, "oom_signature").index, lo)
    for needle in headers + [raw[a:a + 30] for a in (data.draw(st.integers(lo, len(raw) - 1)),)]:
        if needle in raw[lo:]:
            assert t.may_occur(needle, lo), needle


def _analyse_before(raw: bytes):
    """structure.analyse before this pass (every search plain)."""
    section = source = None
    end = len(raw)
    while True:
        i = raw.rfind(b"section_start:", 0, end)
        if i < 0:
            break
        m = _SECTION_START.match(raw, i)
        if m is not None:
            name = m.group(1).decode("ascii", "replace")
            if name not in POST_FAILURE_SECTIONS:
                section, source = name, "marker"
                break
        end = i
    tail = raw[-_END_BYTES:]
    if section is None:
        best = -1
        for needle, name in _HEADERS:
            i = tail.rfind(needle, best + 1)
            if i > best and name not in POST_FAILURE_SECTIONS:
                best, section, source = i, name, "header"
    last_cmd = None
    i = tail.rfind(b"\n$ ")
    j = tail.rfind(b"[32;1m$ ")
    start = j + 6 if j > i else (i + 1 if i >= 0 or tail.startswith(b"$ ") else -1)
    if start >= 0:
        m = _COMMAND.match(tail, start)
        if m is not None:
            last_cmd = clean_line(m.group(1)).decode("utf-8", "replace").strip() or None
    last = tail[-4096:]
    verdict = b"Job failed" in last and bool(_RUNNER_VERDICT.search(last))
    return section, source, verdict, last_cmd


STRUCT_PIECES = [b"$ ", b"\n", b"\x1b[32;1m$ ", b"[32;1m", b"make -j8", b"x", b" ", b"$", b"\t", b"\r",
                 b"ERROR: Job failed: exit code 1", b"WARNING: Job failed", b"Running after_script",
                 b"Restoring cache", b"Getting source from Git repository", b"Uploading artifacts for failed job",
                 b"section_start:123:step_script\r\x1b[0K", b"section_start:124:after_script\r\x1b[0K",
                 b"section_end:125:step_script\r\x1b[0K", b"  \n", b"\n$ $ $ ", b"Cleaning up project directory"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(STRUCT_PIECES), max_size=60), st.integers(0, 3))
def test_analyse_equals_the_plain_searches(pieces, pad):
    raw = b"".join(pieces)
    raw = b"padding line\n" * (pad * 2000) + raw  # 0 to ~78 KB before: the tail and the older region
    want = _analyse_before(raw)
    out, markers = drop_post_failure_output_and_markers(raw)
    assert out == drop_post_failure_output(raw)
    assert markers == (b"section_start:" in raw)
    for got in (analyse(raw), analyse(raw, b"section_start:" in raw),
                analyse(raw, b"section_start:" in raw, TraceText(raw).may_occur)):
        assert (got.section, got.section_source, got.runner_verdict_last, got.last_command) == want


def test_predict_columns_equal_the_per_class_sums():
    model = learned.default_model()
    feats = sorted(model.vocabulary)
    rng = random.Random(5)
    # the per-class tables straight from the artifact (predict's one-table-per-class form before this pass)
    by_class = [{f: float(w[c]) for f, w in model.data["weights"].items()} for c in range(len(model.classes))]
    for size in (0, 1, 7, 140, 600):
        known = set(rng.sample(feats, size))
        out = model.predict(known)
        for c, table in enumerate(by_class):
            score = model.bias[c] + math.fsum(table[f] for f in known)
            assert math.fsum(model.rows[f][c] for f in known) + model.bias[c] == score
        scores = [model.bias[c] + math.fsum(table[f] for f in known) for c, table in enumerate(by_class)]
        best = max(range(len(model.classes)), key=lambda c: (scores[c], -c))
        assert out.family == model.classes[best]
        top = max(scores)
        exps = [math.exp(s - top) for s in scores]
        assert out.probability == exps[best] / sum(exps)


def test_anchored_scans_on_many_traces():
    """Every needle, both search modes, on traces ending in a needle or not (deterministic seeds)."""
    for seed in range(40):
        rng = random.Random(seed)
        raw = _real_like(rng, rng.randint(200, 40000)) + b"".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12)))
        n = len(raw)
        t = TraceText(raw)
        floors = sorted({max(0, n - VOCABULARY_BYTES), max(0, n - 8192), rng.randint(max(0, n - VOCABULARY_BYTES), n)},
                        reverse=True)
        for needle in NEEDLES:
            for ignore_case in (False, True):
                nd = needle.lower() if ignore_case else needle
                for floor in floors:
                    got = [c for c in t._candidates(nd, ignore_case, floor) if c[0] >= floor]
                    assert got == _plain_candidates(raw, nd, ignore_case, floor), (seed, nd, ignore_case, floor)


def test_every_needle_of_the_older_region_stays_live():
    """Each OOM-stage needle alone, deep in the older region of real-like or repetitive output."""
    plan = _StagePlan.of(TAX, "oom_signature")
    for folding in (False, True):
        if folding:
            body = b"".join(b"[ %d%%] Building CXX object src/f%d.o\n" % (i % 100, i) for i in range(2600))
        else:
            body = _real_like(random.Random(7), 70000)
        body = body[-(64 * 1024 + 2000):]
        for k, needle in enumerate(plan.index.needles):
            at = 3000 + (k * 613) % 30000
            raw = body[:at] + needle + body[at:]
            lo = len(raw) - 64 * 1024
            got = TraceText(raw).live_needles(plan.index, lo)
            assert needle in got, needle
            assert got == _live_before(TraceText(raw), plan.index, lo)


def _plain_occurs(raw: bytes, needle: bytes, ignore_case: bool, lo: int, hi: int) -> bool:
    """``TraceText.occurs`` as plain scans: an occurrence starting in ``[lo, hi)`` among the newest
    :data:`MAX_LINES_PER_NEEDLE` lines (from ``lo`` on) that hold one."""
    return any(lo <= i < hi for i, _ in _plain_candidates(raw, needle, ignore_case, lo))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6), st.integers(200, 40000), st.data())
def test_cached_candidates_answer_repeated_and_falling_floors_like_plain_scans(seed, size, data):
    """Third real-output pass: ``_candidates``, ``occurs`` and ``last_match`` answer a needle already
    searched down to where no occurrence at or after the floor fits from its cached lines.  Asked
    again and again at the same floor, at floors a few bytes apart (an occurrence straddling a
    floor, one ending the trace), and at falling floors, they must find what plain scans find."""
    rng = random.Random(seed)
    raw = _real_like(rng, size) + b"".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12)))
    t = TraceText(raw)
    n = len(raw)
    vstart = max(0, n - VOCABULARY_BYTES)
    for _ in range(data.draw(st.integers(1, 30))):
        needle = data.draw(st.sampled_from(NEEDLES))
        ignore_case = data.draw(st.booleans())
        if ignore_case:
            needle = needle.lower()
        # a floor near an occurrence (straddling it), or anywhere in the vocabulary's part
        occ = [i for i, _ in _plain_candidates(raw, needle, ignore_case, vstart)]
        if occ and data.draw(st.booleans()):
            floor = max(vstart, min(n, data.draw(st.sampled_from(occ)) + data.draw(st.integers(-3, len(needle) + 2))))
        else:
            floor = data.draw(st.integers(vstart, n))
        kind = data.draw(st.sampled_from(("cands", "occurs", "last_match")))
        if kind == "cands":
            got = [c for c in t._candidates(needle, ignore_case, floor) if c[0] >= floor]
            want = _plain_candidates(raw, needle, ignore_case, floor)
            assert got == want[:len(got)] and (len(got) == len(want) or len(got) >= MAX_LINES_PER_NEEDLE), (
                needle, ignore_case, floor)
        elif kind == "occurs":
            hi = data.draw(st.integers(floor, n))
            assert t.occurs(needle, ignore_case, floor, hi) == _plain_occurs(raw, needle, ignore_case, floor, hi), (
                needle, ignore_case, floor, hi)
        else:
            rx = re.compile(re.escape(needle), re.IGNORECASE if ignore_case else 0)
            hit = t.last_match(rx, (needle,), ignore_case, lo=floor)
            want = _plain_candidates(raw, needle, ignore_case, floor)
            # the newest line with an occurrence starting at or after the floor whose cleaned line matches
            exp = None
            for i, ls in want:
                if rx.search(t._line(i, len(needle))):
                    exp = ls
                    break
            assert (hit[0] if hit else None) == exp, (needle, ignore_case, floor)


def test_a_needle_ending_the_trace_and_one_straddling_the_floor_are_found_after_a_cached_miss():
    raw = b"  copying a.py -> b\n" * 50 + b"x Killed\nERROR: Job failed: exit code 1"
    t = TraceText(raw)
    n = len(raw)
    k = raw.index(b"Killed")
    # first asked with a floor just past the occurrence (a cached miss there), then at its start
    assert t._candidates(b"Killed", False, k + 1) == [] or all(i < k + 1 for i, _ in t._candidates(b"Killed", False, k + 1))
    assert not t.occurs(b"Killed", False, k + 1, n)
    assert t.occurs(b"Killed", False, k, n)
    assert [i for i, _ in t._candidates(b"Killed", False, k)] == [k]
    # a needle that ends the trace, asked repeatedly at floors up to its start
    j = raw.index(b"exit code 1")
    for floor in (j + 3, j + 1, j, j):
        assert t.occurs(b"exit code 1", False, floor, n) == (floor <= j)
    assert t.occurs(b"exit code", True, j, n) and not t.occurs(b"exit code", True, j + 1, n)
