"""Bounded reading and cleaning of job traces (bytes in, bytes out, never a decode error).

GitLab traces are raw terminal output: ANSI colour codes, ``section_start:``/
``section_end:`` markers, progress bars redrawn with carriage returns, and
sometimes binary junk.  The classifier works on the *tail* of the trace only
(:data:`DEFAULT_TAIL_BYTES`): the failure is at the end, and a bounded tail
keeps memory and time bounded for 100 MB logs.
"""

from __future__ import annotations

import functools
import io
import operator
import os
import re
from collections import deque
from pathlib import Path
from typing import BinaryIO, Iterable

__all__ = ["DEFAULT_TAIL_BYTES", "read_trace_tail", "clean_trace", "clean_line", "needle_witness", "NeedleIndex",
           "TraceText"]

#: How much of the end of a trace the classifier reads.
DEFAULT_TAIL_BYTES = 256 * 1024
#: Evidence lines are trimmed to this many characters around the match.
EVIDENCE_CHARS = 240
#: Regexes run on at most this many bytes either side of a literal hit.
WINDOW = 2048
#: Keeps the lower-case ASCII letters and ``\n``, turns every other byte into a space
#: (see :func:`needle_witness`).
_LETTER_TABLE = bytes(c if 97 <= c <= 122 or c == 10 else 32 for c in range(256))
#: The word vocabulary covers this many bytes from the end of the trace: the regions of the
#: default taxonomy's stages with many needles (``runner``, ``diagnostic``, ``generic``).  A search
#: reaching further back (``oom_signature``'s few needles over 64 KiB, the exit-code scan) goes
#: straight to the substring search, which is then cheaper than a larger vocabulary.
VOCABULARY_BYTES = 32 * 1024
#: Lines are de-duplicated before collecting words unless they average more than this many bytes.
_DEDUPE_LINE_BYTES = 256
#: A region reaching before the vocabulary gets its own vocabulary when at least this many needles
#: would otherwise be scanned for there (measured: 36 scans of 32 KiB cost 0.34 ms, the vocabulary
#: 0.08 ms); it covers this many bytes of the vocabulary's part too, so needles shorter than that
#: which start before it are wholly inside.
_OLDER_VOCABULARY_MIN = 8
_OVERLAP_BYTES = 512
#: The lower-cased copy of the trace covers at least this many bytes from the end.
LOWERED_BYTES = 64 * 1024

#: At most this many lines containing one literal are tried, newest first.
MAX_LINES_PER_NEEDLE = 256

_ANSI_RE = re.compile(rb"\x1b(?:\[[0-9;?]{0,32}[ -/]{0,4}[@-~]|\][^\x07\x1b]{0,512}(?:\x07|\x1b\\)|[@-Z\\-_])")
_SECTION_RE = re.compile(rb"section_(?:start|end):[0-9]{1,20}:[^\s\r\n]{0,256}\r?")


def read_trace_tail(source: BinaryIO | Path | str | bytes | bytearray | memoryview,
                    max_bytes: int = DEFAULT_TAIL_BYTES) -> bytes:
    """Return at most the last ``max_bytes`` bytes of a trace, in bounded memory.

    ``source`` may be bytes, a path, a seekable binary file (we seek to the end)
    or any binary stream (we keep a ring of the last ``max_bytes``).
    """
    if max_bytes <= 0:
        return b""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source[-max_bytes:])
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as fh:
            return read_trace_tail(fh, max_bytes)
    fh = source
    try:
        seekable = fh.seekable()
    except (AttributeError, OSError, ValueError):
        seekable = False
    if seekable:
        try:
            end = fh.seek(0, io.SEEK_END)
            fh.seek(max(0, end - max_bytes))
            data = fh.read(max_bytes)
            return bytes(data or b"")
        except OSError:
            pass
    ring: deque[bytes] = deque()
    size = 0
    chunk = 64 * 1024
    while True:
        block = fh.read(chunk)
        if not block:
            break
        ring.append(bytes(block))
        size += len(block)
        while ring and size - len(ring[0]) >= max_bytes:
            size -= len(ring.popleft())
    return b"".join(ring)[-max_bytes:]


def clean_trace(raw: bytes) -> bytes:
    """Strip ANSI escapes and GitLab section markers; keep the final text of CR-overwritten lines.

    NUL bytes become spaces. Works on bytes, so binary traces never raise.
    """
    t = _strip_markup(raw)
    if b"\r" in t:
        t = _collapse_cr(t)
    return t


def _strip_markup(t: bytes) -> bytes:
    """ANSI escapes and GitLab's section markers removed, NUL bytes as spaces (each only when present)."""
    if b"\x1b" in t:
        t = _ANSI_RE.sub(b"", t)
    if b"section_" in t:
        t = _SECTION_RE.sub(b"", t)
    if b"\x00" in t:
        t = t.replace(b"\x00", b" ")
    return t


def _collapse_cr(t: bytes) -> bytes:
    """A line redrawn with ``\\r`` keeps only its last non-blank segment (what a terminal shows)."""
    t = t.replace(b"\r\n", b"\n")
    if b"\r" not in t:
        return t
    out: list[bytes] = []
    pos = 0
    n = len(t)
    while True:
        i = t.find(b"\r", pos)
        if i < 0:
            break
        ls = t.rfind(b"\n", 0, i) + 1
        le = t.find(b"\n", i)
        if le < 0:
            le = n
        out.append(t[pos:ls])
        segs = [s for s in t[ls:le].split(b"\r") if s.strip()]
        out.append(segs[-1] if segs else b"")
        pos = le
    out.append(t[pos:])
    return b"".join(out)


def clean_line(line: bytes) -> bytes:
    """:func:`clean_trace` for one line (no ``\\n`` inside)."""
    line = _strip_markup(line)
    if b"\r" in line:
        segs = [s for s in line.split(b"\r") if s.strip()]
        line = segs[-1] if segs else b""
    return line


@functools.lru_cache(maxsize=8192)
def needle_witness(needle: bytes) -> tuple[tuple[bytes, ...], tuple[bytes, ...], tuple[bytes, ...], tuple[bytes, ...]]:
    """What the *vocabulary* of a text must hold if ``needle`` occurs in it (in any case).

    The vocabulary of a text is the set of its *words*: maximal runs of ASCII
    letters once lower-cased (digits, punctuation, spaces, control and
    non-ASCII bytes all separate words).  Split the lower-cased needle into
    its letter runs; wherever the needle occurs,

    * a run with a non-letter on both sides *inside the needle* is a whole word;
    * a run that ends the needle (and starts after its start) begins a word;
    * a run that starts the needle (and ends before its end) ends a word;
    * a run that is the whole needle is part of a word.

    Returns ``(whole_words, word_starts, word_ends, word_parts)``.
    A needle without letters gives four empty tuples: no evidence either
    way.  This is a necessary condition only: a needle that passes is still
    looked for in the trace itself; one that fails cannot be there.
    """
    low = needle.lower()
    whole: list[bytes] = []
    starts: list[bytes] = []
    ends: list[bytes] = []
    parts: list[bytes] = []
    for m in re.finditer(rb"[a-z]+", low):
        run = m.group()
        left_open, right_open = m.start() == 0, m.end() == len(low)
        if not left_open and not right_open:
            whole.append(run)
        elif left_open and right_open:
            parts.append(run)
        elif left_open:
            ends.append(run)
        else:
            starts.append(run)
    return (tuple(dict.fromkeys(whole)), tuple(dict.fromkeys(starts)), tuple(dict.fromkeys(ends)),
            tuple(dict.fromkeys(parts)))


_WITNESSES: dict[bytes, tuple[tuple[bytes, ...], tuple[bytes, ...], tuple[bytes, ...], tuple[bytes, ...]]] = {}


def _witness(needle: bytes) -> tuple[tuple[bytes, ...], tuple[bytes, ...], tuple[bytes, ...], tuple[bytes, ...]]:
    w = _WITNESSES.get(needle)
    if w is None:
        w = needle_witness(needle)
        if len(_WITNESSES) < 65536:
            _WITNESSES[needle] = w
    return w


class _Vocabulary:
    """The words of a lower-cased text (see :func:`needle_witness`), indexed for the four tests.

    Word starts and ends are tested on their first / last 6 or 4 letters (a
    weaker but still necessary condition; runs shorter than 4 letters are no
    evidence), with small sets built on first use.
    """

    __slots__ = ("words", "_affixes", "_joined", "_text", "_shapes")

    def __init__(self, words: set[bytes], text: bytes | None = None):
        self.words = words
        self._affixes: dict[int, set[bytes]] = {}
        self._joined: bytes | None = None
        #: the lower-cased text itself (for :meth:`shapes`), None: no shape evidence
        self._text = text
        self._shapes: bytes | None = None

    @classmethod
    def of_text(cls, lowered: bytes) -> "_Vocabulary":
        if lowered.count(b"\n") * _SHAPES_LINE_BYTES >= len(lowered):
            if _distinct_lines(lowered):
                # Real output: its lines will not fold into shapes (no shape evidence either way), so
                # the words straight from the text, without de-duplicating its lines first.
                v = cls(set(lowered.translate(_LETTER_TABLE).split()), lowered)
                v._shapes = b""
                return v
            # The distinct line shapes hold every distinct line with its letters as they are
            # (lower-case) and digits as "0", a non-letter like the digits: the same words, from a
            # fraction of the text.  When they do not fold (real output), they are no shape evidence
            # (see shapes()) but still give the words: one line split and de-duplication, not two.
            joined = b"\n".join(set(lowered.translate(_SHAPE_TABLE).split(b"\n")))
            v = cls(set(joined.translate(_LETTER_TABLE).split()), lowered)
            v._shapes = joined if len(joined) * _SHAPES_MAX_FRACTION <= len(lowered) else b""
            return v
        letters = lowered.translate(_LETTER_TABLE)
        if letters.count(b"\n") * _DEDUPE_LINE_BYTES < len(letters):
            return cls(set(letters.split()))  # long lines (binary junk, one-line dumps): no repeats
        # Build logs repeat lines that differ only in numbers and punctuation: take the words
        # of the distinct lines only (two C-level passes instead of one set insert per word).
        lines = letters.split(b"\n")
        distinct = set(lines)
        # line shapes (see shapes()) only pay when lines repeat: not for binary junk
        return cls(set(b" ".join(distinct).split()), lowered if len(distinct) * _SHAPES_MAX_FRACTION <= len(lines) else None)

    @classmethod
    def of_region(cls, lowered: bytes) -> "_Vocabulary":
        """:meth:`of_text` for a region searched only through :meth:`admits` (not :attr:`words`):
        when its lines repeat, only its line shapes are built (the word tests add little to them)."""
        if lowered.count(b"\n") * _SHAPES_LINE_BYTES >= len(lowered):
            v = cls(None, lowered)  # type: ignore[arg-type]
            if _distinct_lines(lowered):  # (as in of_text)
                v.words = set(lowered.translate(_LETTER_TABLE).split())
                v._shapes = b""
                return v
            joined = b"\n".join(set(lowered.translate(_SHAPE_TABLE).split(b"\n")))
            if len(joined) * _SHAPES_MAX_FRACTION <= len(lowered):
                v._shapes = joined
                return v
            # no fold: the words of the distinct shapes (as of_text, without splitting the lines again)
            v.words = set(joined.translate(_LETTER_TABLE).split())
            v._shapes = b""
            return v
        return cls.of_text(lowered)

    def admits(self, needle: bytes) -> bool:
        """May ``needle`` occur in the text?  (``False``: certainly not.)"""
        plan = _PLANS.get(needle)
        if plan is None:
            plan = _admit_plan(needle)
        shape, whole, affixes, parts = plan
        if self._text is not None:
            # the line shapes first: one C-level substring test, and the strongest of the tests
            shapes = self._shapes if self._shapes is not None else self.shapes()
            # (a needle spanning lines is no evidence: the distinct lines are kept, not their order)
            if shapes and shape is not None and shape not in shapes:
                return False
            if self.words is None:  # a region's shapes only (of_region)
                return True
        if whole and not self.words.issuperset(whole):
            return False
        if affixes:
            sets = self._affixes
            for k, key in affixes:
                got = sets.get(k)
                if key not in (got if got is not None else self.affixes(k)):
                    return False
        if parts:
            joined = self._joined if self._joined is not None else self.joined()
            for w in parts:
                if w not in joined:
                    return False
        return True

    def shapes(self) -> bytes:
        """The text's distinct *line shapes* (lines with every digit as ``0``), joined by ``\\n``;
        empty when they are not much shorter than the text (no repeats: no evidence).

        A byte-wise mapping keeps occurrences: wherever ``needle`` occurs (in any case), its
        :func:`_shape` occurs in the shape of that line.  Build logs repeat lines that differ only
        in their numbers, so the shapes are a fraction of the text and one substring search there
        dismisses a needle that a scan of the whole text would not find."""
        if self._shapes is None:
            text = self._text or b""
            shapes = b"\n".join(set(text.translate(_SHAPE_TABLE).split(b"\n")))
            self._shapes = shapes if len(shapes) * _SHAPES_MAX_FRACTION <= len(text) else b""
        return self._shapes

    def joined(self) -> bytes:
        """``b" " + b" ".join(words) + b" "``."""
        if self._joined is None:
            self._joined = b" " + b" ".join(self.words) + b" "
        return self._joined

    def affixes(self, k: int) -> set[bytes]:
        """The first ``k`` (``k > 0``) or last ``-k`` letters of every word that long, and the
        shorter words of 4+ letters whole: they cannot equal a ``k``-letter key, which is all this
        set is asked about (one C-level pass instead of a filtered set comprehension)."""
        got = self._affixes.get(k)
        if got is None:
            long = self._affixes.get(0)
            if long is None:  # words of 4+ letters (a comprehension: cheaper than a regex over joined())
                long = self._affixes[0] = {w for w in self.words if len(w) > 3}
            got = self._affixes[k] = set(map(_AFFIX_GETTERS[k], long))
        return got


#: The affix lengths :func:`_affix_key` gives, and their slicers.
_AFFIX_GETTERS = {k: operator.itemgetter(slice(None, k) if k > 0 else slice(k, None)) for k in (4, 6, -4, -6)}
#: Lower-cases ASCII letters and turns every digit into ``0`` (see :meth:`_Vocabulary.shapes`).
_SHAPE_TABLE = bytes(48 if 48 <= c <= 57 else c + 32 if 65 <= c <= 90 else c for c in range(256))
#: Line shapes are used only when they are at most this fraction (1/N) of the text.
_SHAPES_MAX_FRACTION = 3
#: :meth:`_Vocabulary.of_region` tries line shapes alone when lines average at most this many bytes.
_SHAPES_LINE_BYTES = 128
_SHAPES: dict[bytes, bytes] = {}


#: :func:`_distinct_lines` looks at this many bytes from the start of a text.
_FOLD_SAMPLE = 4096


def _distinct_lines(lowered: bytes) -> bool:
    """Do the first :data:`_FOLD_SAMPLE` bytes of ``lowered`` hold at least 8 lines, nearly all of
    distinct shapes?  Then the text's lines will not fold either (real build output names a file or
    module on every line): :meth:`_Vocabulary.of_text` skips the line shapes.  A guess about speed
    only: shapes or none, every test stays a necessary condition.  The start, not the end: a failure
    excerpt at the end of repetitive output does not fold but the output before it does."""
    lines = lowered[:_FOLD_SAMPLE].translate(_SHAPE_TABLE).split(b"\n")
    return len(lines) >= 8 and len(set(lines)) * 8 >= len(lines) * 7


def _shape(needle: bytes) -> bytes:
    """``needle`` as :meth:`_Vocabulary.shapes` holds it: lower-cased, digits as ``0``."""
    got = _SHAPES.get(needle)
    if got is None:
        got = needle.translate(_SHAPE_TABLE)
        if len(_SHAPES) < 65536:
            _SHAPES[needle] = got
    return got


_PLANS: dict[bytes, tuple[bytes | None, tuple[bytes, ...], tuple[tuple[int, bytes], ...], tuple[bytes, ...]]] = {}


def _admit_plan(needle: bytes) -> tuple[bytes | None, tuple[bytes, ...], tuple[tuple[int, bytes], ...], tuple[bytes, ...]]:
    """:meth:`_Vocabulary.admits`'s tests for ``needle``, worked out once: its shape (None when it
    spans lines), the whole words, ``(k, affix)`` for each word start (``k > 0``, its first ``k``
    letters) and word end (``k < 0``, its last ``-k``) long enough to test, in that order, and the
    parts (see :func:`needle_witness`)."""
    whole, starts, ends, parts = _witness(needle)
    affixes = [(k, w[:k]) for w in starts for k in (_affix_key(w),) if k]
    affixes += [(-k, w[-k:]) for w in ends for k in (_affix_key(w),) if k]
    plan = (None if b"\n" in needle else _shape(needle), whole, tuple(affixes), parts)
    if len(_PLANS) < 65536:
        _PLANS[needle] = plan
    return plan


def _affix_key(run: bytes) -> int:
    """How many letters of a word start/end :meth:`_Vocabulary.admits` compares (0: none)."""
    return 6 if len(run) >= 6 else 4 if len(run) >= 4 else 0


#: Keeps the upper-case ASCII letters, turns every other byte into a space (see :func:`_upper_witness`).
_UPPER_TABLE = bytes(c if 65 <= c <= 90 else 32 for c in range(256))
_UPPER_RUN_RE = re.compile(rb"[A-Z]+")
#: The upper-case runs of a region are no evidence when there are more distinct ones than this
#: (an upper-case log: the test would cost what the scans it saves do).
_MAX_UPPER_RUNS = 2048
_UPPER_WITNESSES: dict[bytes, tuple[bytes, ...]] = {}


def _upper_witness(needle: bytes) -> tuple[bytes, ...]:
    """What the *upper-case runs* of a text (maximal runs of ``A``-``Z``, case kept, each between
    spaces in :meth:`TraceText.upper_admits`'s string) must hold where ``needle`` occurs as it is:
    :func:`needle_witness`'s four tests for the upper-case alphabet, as substrings of
    ``b" " + b" ".join(runs) + b" "`` (a run inside the needle is a whole run, `` RUN ``; one ending
    the needle starts a run, `` RUN``; one starting it ends a run, ``RUN ``; the whole needle is
    part of one).  Build output is mostly lower-case: a case-sensitive ``FAILED``, ``BUILD FAILED``
    or ``[SC`` that the lower-cased vocabulary admits (``test_fail.py``) is dismissed here."""
    got = _UPPER_WITNESSES.get(needle)
    if got is None:
        out = []
        for m in _UPPER_RUN_RE.finditer(needle):
            run = m.group()
            out.append((b"" if m.start() == 0 else b" ") + run + (b"" if m.end() == len(needle) else b" "))
        got = tuple(dict.fromkeys(out))
        if len(_UPPER_WITNESSES) < 65536:
            _UPPER_WITNESSES[needle] = got
    return got


#: An anchor's occurrences are listed only while there are at most this many (else: scans).
_ANCHOR_MAX = 64
_ANCHOR_RE = re.compile(rb"[a-z]{3,}")
_ANCHORS: dict[bytes, tuple[bytes, int] | None] = {}


def _anchor(needle: bytes) -> tuple[bytes, int] | None:
    """The needle's *anchor* for :meth:`TraceText._anchor_rfind`: its longest run of 3 or more
    ASCII letters, lower-cased (the first of equal length), and its offset; None without one."""
    got = _ANCHORS.get(needle, False)
    if got is False:
        best = None
        for m in _ANCHOR_RE.finditer(needle.lower()):
            if best is None or len(m.group()) > len(best[0]):
                best = (m.group(), m.start())
        got = best
        if len(_ANCHORS) < 65536:
            _ANCHORS[needle] = got
    return got  # type: ignore[return-value]


class NeedleIndex:
    """A set of needles grouped by one cheap key test each, compiled once per taxonomy stage.

    :meth:`TraceText.live_needles` dismisses whole groups with one set
    intersection against the trace's vocabulary (a needle's key is a whole
    word it implies, or else the 6 or 4 first/last letters of a word start or
    end it implies), and runs the full :meth:`TraceText.may_contain` test only
    on the needles whose key is present and on those without a key.
    """

    __slots__ = ("needles", "keyless", "groups")

    def __init__(self, needles: Iterable[bytes]):
        self.needles: tuple[bytes, ...] = tuple(dict.fromkeys(needles))
        keyless: list[bytes] = []
        #: 0: whole words; k > 0: first k letters of a word; k < 0: last -k letters
        groups: dict[int, dict[bytes, list[bytes]]] = {}
        for n in self.needles:
            whole, starts, ends, _ = _witness(n)
            if whole:
                groups.setdefault(0, {}).setdefault(max(whole, key=len), []).append(n)
            elif any(_affix_key(w) for w in starts):
                w = max(starts, key=len)
                k = _affix_key(w)
                groups.setdefault(k, {}).setdefault(w[:k], []).append(n)
            elif any(_affix_key(w) for w in ends):
                w = max(ends, key=len)
                k = _affix_key(w)
                groups.setdefault(-k, {}).setdefault(w[-k:], []).append(n)
            else:
                keyless.append(n)
        self.keyless = tuple(keyless)
        self.groups = {k: {key: tuple(v) for key, v in g.items()} for k, g in groups.items()}


class TraceText:
    """A raw trace tail searched line by line, newest first, without cleaning it all.

    Literal needles are looked for in the lower-cased raw bytes (one fast
    substring search each); only the lines that contain one are cleaned
    (:func:`clean_line`) and given to the regular expression.  Lines longer
    than ``2 * WINDOW`` are cut to a window around the needle.

    Before any substring search, a needle is checked against the word
    vocabulary of the last :data:`VOCABULARY_BYTES` (built once per trace,
    see :func:`needle_witness`): in an ordinary log most needles of a
    taxonomy are absent, and :meth:`live_needles` dismisses them with a few
    set intersections instead of one scan of up to 32 KiB each; a search
    reaching further back skips the part the vocabulary rules out.  Every
    test is a necessary condition, so results are those of the plain search.
    """

    __slots__ = ("raw", "_lower", "_lower_from", "_clean", "_lines", "_cands", "_vocab", "_live", "_older",
                 "_upper", "_anchors")

    def __init__(self, raw: bytes):
        self.raw = raw
        self._lower: bytes | None = None
        self._lower_from = len(raw)
        self._clean: dict[tuple[int, int], bytes] = {}
        #: (needle offset, needle length) -> its cleaned line (see _line)
        self._lines: dict[tuple[int, int], bytes] = {}
        #: (needle, ignore_case) -> [scanned down to, [(offset, line start), ...] newest first]
        self._cands: dict[tuple[bytes, bool], list] = {}
        #: the words of the last VOCABULARY_BYTES of raw; see :func:`needle_witness`
        self._vocab: _Vocabulary | None = None
        #: needle -> may it occur in the last VOCABULARY_BYTES of raw?
        self._live: dict[bytes, bool] = {}
        #: region start -> the word vocabulary of the part before VOCABULARY_BYTES (see live_needles)
        self._older: dict[int, _Vocabulary] | None = None
        #: the upper-case runs of the last VOCABULARY_BYTES of raw (see upper_admits), b"": no evidence
        self._upper: bytes | None = None
        #: anchor -> how often it was asked for (int), or its occurrences in the vocabulary's part,
        #: newest first (list), or None when there are too many (see _anchor_rfind)
        self._anchors: dict[bytes, int | list[int] | None] | None = None

    def upper_admits(self, needle: bytes) -> bool:
        """May ``needle`` occur *as it is* (case-sensitively) wholly inside the last
        :data:`VOCABULARY_BYTES`?  (``False``: certainly not; see :func:`_upper_witness`.)"""
        wit = _upper_witness(needle)
        if not wit:
            return True
        runs = self._upper
        if runs is None:
            vocab = self._vocabulary()
            if vocab._text is None or vocab.shapes():
                # Lines that fold into shapes (the shapes test already dismissed most needles) or no
                # line structure (binary junk: upper-case runs everywhere): not worth building.
                runs = self._upper = b""
            else:
                n = len(self.raw)
                distinct = set(self.raw[max(0, n - VOCABULARY_BYTES):].translate(_UPPER_TABLE).split())
                runs = self._upper = b" " + b" ".join(distinct) + b" " if len(distinct) <= _MAX_UPPER_RUNS else b""
        if not runs:
            return True
        for w in wit:
            if w not in runs:
                return False
        return True

    def live_needles(self, index: NeedleIndex, lo: int = 0) -> frozenset[bytes]:
        """The needles of ``index`` that may occur at or after ``lo`` (see :meth:`may_contain`).

        For a region reaching before the vocabulary, a needle is live if the
        vocabulary admits it or it occurs (in any case) in the older part.
        """
        vstart = len(self.raw) - VOCABULARY_BYTES
        if lo < vstart:
            low, off = self._lowered(lo)
            # those the vocabulary admits (the group tests below, then may_contain's, cached)
            main = self.live_needles(index, vstart)
            live = list(main)
            older = [n for n in index.needles if n not in main]
            if len(older) >= _OLDER_VOCABULARY_MIN:
                # Many needles to look for in the older part: its own word vocabulary (built once per
                # region) dismisses most of them for less than their substring scans would cost.  An
                # occurrence starting before vstart ends before vstart + _OVERLAP_BYTES (longer needles
                # are always scanned), so it lies wholly in the region the vocabulary covers.
                vocab = self._older_vocabulary(lo, vstart)
                if vocab.words is None:  # line shapes only
                    older = [n for n in older if len(n) >= _OVERLAP_BYTES or vocab.admits(n)]
                else:
                    # as below: a needle whose key is not among the region's words cannot pass admits
                    pending = set(older)
                    maybe = [n for n in index.keyless if n in pending]
                    for k, group in index.groups.items():
                        for key in (vocab.words if k == 0 else vocab.affixes(k)).intersection(group):
                            maybe.extend(n for n in group[key] if n in pending)
                    keep = {n for n in maybe if len(n) < _OVERLAP_BYTES and vocab.admits(n)}
                    keep.update(n for n in older if len(n) >= _OVERLAP_BYTES)
                    older = [n for n in older if n in keep]
            live.extend(n for n in older if low.rfind(n.lower(), lo - off, vstart + len(n) - 1 - off) >= 0)
            return frozenset(live)
        vocab = self._vocabulary()
        maybe = list(index.keyless)
        for k, group in index.groups.items():
            present = (vocab.words if k == 0 else vocab.affixes(k)).intersection(group)
            for key in present:
                maybe.extend(group[key])
        known = self._live
        out = []
        for n in maybe:  # may_contain(n, lo), inlined
            ok = known.get(n)
            if ok is None:
                ok = known[n] = vocab.admits(n)
            if ok:
                out.append(n)
        return frozenset(out)

    def words(self) -> set[bytes]:
        """The words of the last :data:`VOCABULARY_BYTES` (runs of ASCII letters, lower-cased, of the
        distinct lines), built once per trace: the pre-filter's vocabulary, which the learned
        fallback reads too.  Do not modify the set."""
        return self._vocabulary().words

    def _older_vocabulary(self, lo: int, vstart: int) -> _Vocabulary:
        """The word vocabulary of ``raw[lo : vstart + _OVERLAP_BYTES]`` (the part before the
        vocabulary's, and a little of it), built once per ``lo``."""
        got = self._older.get(lo) if self._older is not None else None
        if got is None:
            low, off = self._lowered(lo)
            got = _Vocabulary.of_region(low[lo - off:vstart + _OVERLAP_BYTES - off])
            if self._older is None:
                self._older = {}
            self._older[lo] = got
        return got

    def _vocabulary(self) -> _Vocabulary:
        if self._vocab is None:
            n = len(self.raw)
            low, off = self._lowered(n - VOCABULARY_BYTES)
            self._vocab = _Vocabulary.of_text(low[max(0, n - VOCABULARY_BYTES) - off:])
        return self._vocab

    def may_contain(self, needle: bytes, lo: int = 0) -> bool:
        """``False`` when ``needle`` certainly does not occur (in any case) at or after ``lo``.

        Answered from the word vocabulary of the last :data:`VOCABULARY_BYTES`
        (see :func:`needle_witness`); ``True`` means "look", it is a necessary
        condition only.  For a region reaching further back there is no
        evidence: ``True`` (but see :meth:`_candidates`).
        """
        n = len(self.raw)
        if n - lo > VOCABULARY_BYTES:
            return True
        live = self._live.get(needle)
        if live is None:
            live = self._vocabulary().admits(needle)
            self._live[needle] = live
        return live

    def may_occur(self, needle: bytes, lo: int) -> bool:
        """``False`` when ``needle`` (case-sensitive) certainly does not occur wholly inside ``raw[lo:]``.

        A necessary condition built from what the stages have built already: an occurrence starting
        in the vocabulary's part must pass its tests and :meth:`upper_admits`; one starting before it
        must pass the older region's vocabulary when there is one for ``lo`` (it covers
        :data:`_OVERLAP_BYTES` of the vocabulary's part), else the lower-cased bytes are searched
        (``lo`` within :data:`LOWERED_BYTES` of the end: those are already there)."""
        n = len(self.raw)
        vstart = n - VOCABULARY_BYTES
        if self.may_contain(needle, max(lo, vstart)) and self.upper_admits(needle):
            return True
        if lo >= vstart:
            return False
        older = self._older.get(lo) if self._older is not None else None
        if older is not None and len(needle) < _OVERLAP_BYTES:
            return older.admits(needle)
        low, off = self._lowered(lo)
        return low.rfind(needle.lower(), lo - off, vstart + len(needle) - 1 - off) >= 0

    def _lowered(self, lo: int) -> tuple[bytes, int]:
        """The lower-cased trace from ``lo`` on (computed once per suffix), and its offset."""
        if self._lower is None or lo < self._lower_from:
            lo = max(0, min(lo, len(self.raw) - LOWERED_BYTES))
            self._lower = self.raw[lo:].lower()
            self._lower_from = lo
        return self._lower, self._lower_from

    def _line(self, i: int, nlen: int) -> bytes:
        """The cleaned line holding the needle occurrence at ``i`` (length ``nlen``), cut to
        :data:`WINDOW` bytes either side of it; memoised per occurrence."""
        got = self._lines.get((i, nlen))
        if got is not None:
            return got
        raw = self.raw
        ls = raw.rfind(b"\n", 0, i) + 1
        le = raw.find(b"\n", i)
        if le < 0:
            le = len(raw)
        ws = max(ls, i - WINDOW)
        we = min(le, i + nlen + WINDOW)
        key = (ws, we)
        line = self._clean.get(key)
        if line is None:
            line = clean_line(raw[ws:we])
            if len(self._clean) < 4096:
                self._clean[key] = line
        if len(self._lines) < 4096:
            self._lines[(i, nlen)] = line
        return line

    def _candidates(self, needle: bytes, ignore_case: bool, floor: int) -> list[tuple[int, int]]:
        """Lines containing ``needle`` (one offset per line), newest first, down to ``floor``.

        Case-sensitive needles are looked for in the raw bytes, others in the
        lower-cased bytes (``needle`` is then lower-case).
        """
        key = (needle, ignore_case)
        ent = self._cands.get(key)
        if ent is None:
            ent = [len(self.raw), []]
            self._cands[key] = ent
        end, found = ent
        # (end < floor + len(needle): no occurrence starting at or after floor fits before end, the
        # searches below would find nothing and leave ent as it is)
        if end >= floor + len(needle) and len(found) < MAX_LINES_PER_NEEDLE:
            raw = self.raw
            # a needle absent from the vocabulary is not searched: as if scanned down to floor
            start = floor if self.may_contain(needle, floor) else end
            vstart = len(raw) - VOCABULARY_BYTES
            if not ignore_case and start < end and floor >= vstart and not self.upper_admits(needle):
                start = end  # its upper-case letters are not in the region as it has them
            if start < end and floor < vstart < end and not self.may_contain(needle, vstart):
                # not in the vocabulary's part: search only what lies before it
                end = min(end, vstart + len(needle) - 1)
            if ignore_case:
                hay, off = self._lowered(floor)
            else:
                hay, off = raw, 0
            anchor = _anchor(needle) if start >= vstart else None
            while len(found) < MAX_LINES_PER_NEEDLE:
                if start >= end:
                    i = -1
                elif anchor is not None:
                    i = self._anchor_rfind(needle, anchor, hay, off, start, end)
                    if i == -2:  # no anchor index (yet): the plain scan
                        anchor = None
                        i = hay.rfind(needle, start - off, end - off)
                        i = i + off if i >= 0 else -1
                else:
                    i = hay.rfind(needle, start - off, end - off)
                    i = i + off if i >= 0 else -1
                if i < 0:
                    # an occurrence straddling ``floor`` is found by the next, lower scan
                    end = min(end, floor + len(needle) - 1)
                    break
                ls = raw.rfind(b"\n", 0, i) + 1
                found.append((i, ls))
                end = ls
            ent[0] = end
        return found

    def _anchor_rfind(self, needle: bytes, anchor: tuple[bytes, int], hay: bytes, off: int, start: int,
                      end: int) -> int:
        """``hay.rfind(needle)`` for an occurrence wholly inside ``[start, end)`` (absolute offsets,
        ``start`` in the vocabulary's part; ``hay`` is the raw trace, or the lower-cased one from
        ``off`` for a lower-case needle), answered from the occurrences of the needle's *anchor*
        (a lower-case word of it, at offset ``d``; see :func:`_anchor`) in the lower-cased
        vocabulary's part: wherever the needle occurs, in any case, its anchor occurs ``d`` bytes
        further on.  Case variants (``error``, ``Error:``, ``ERROR``, ``: error``) share one list
        instead of one scan each.  The list is built on an anchor's second request (a single needle
        would gain nothing), and not kept when the anchor occurs more than :data:`_ANCHOR_MAX` times;
        -2: no list, scan."""
        word, d = anchor
        anchors = self._anchors
        if anchors is None:
            anchors = self._anchors = {}
        occ = anchors.get(word, 0)
        if type(occ) is int:
            if occ == 0:
                anchors[word] = 1
                return -2
            n = len(self.raw)
            vlo = max(0, n - VOCABULARY_BYTES)
            low, loff = self._lowered(vlo)
            occ = []
            e = n - loff
            step = len(word) - 1  # occurrences may overlap
            while True:
                q = low.rfind(word, vlo - loff, e)
                if q < 0:
                    break
                if len(occ) == _ANCHOR_MAX:
                    occ = None
                    break
                occ.append(q + loff)
                e = q + step
            anchors[word] = occ
        if occ is None:
            return -2
        last = end - len(needle)
        for q in occ:  # newest first
            p = q - d
            if p > last:
                continue
            if p < start:
                break
            if hay.startswith(needle, p - off):
                return p
        return -1

    def occurs(self, needle: bytes, ignore_case: bool, lo: int, hi: int) -> bool:
        """Does :meth:`last_match` with ``needle`` have a line to try in ``[lo, hi)``?  (An occurrence
        of ``needle`` starting there, among the :data:`MAX_LINES_PER_NEEDLE` newest lines that hold it.)"""
        for i, _ in self._candidates(needle, ignore_case, lo):  # (cached lines when nothing is left to scan)
            if i < lo:
                return False
            if i < hi:
                return True
        return False

    def last_match(self, regex: re.Pattern[bytes], needles: tuple[bytes, ...], ignore_case: bool = False,
                   lo: int = 0, hi: int | None = None, after: int = -1) -> tuple[int, re.Match[bytes]] | None:
        """The latest line in ``[lo, hi)`` (starting after ``after``) where ``regex`` matches.

        Returns ``(line_start, match)``; the match is on the cleaned line.  At
        most :data:`MAX_LINES_PER_NEEDLE` lines are tried per needle.
        """
        if hi is None:
            hi = len(self.raw)
        best: tuple[int, re.Match[bytes]] | None = None
        base_floor = lo if lo > after + 1 else after + 1
        cands_cache = self._cands
        lines = self._lines
        for needle in needles:
            floor = base_floor if best is None or best[0] < base_floor else best[0] + 1
            nlen = len(needle)
            ent = cands_cache.get((needle, ignore_case))
            if ent is None:
                found = self._candidates(needle, ignore_case, floor)
            else:
                found = ent[1]
                if not found and ent[0] < floor + nlen:
                    continue  # already scanned down to this floor: not in the region
                if ent[0] >= floor + nlen and len(found) < MAX_LINES_PER_NEEDLE:
                    found = self._candidates(needle, ignore_case, floor)
                # else: _candidates would return ``found`` as it is
            for i, ls in found:
                if i >= hi:
                    continue
                if i < floor:
                    break
                line = lines.get((i, nlen))
                m = regex.search(line if line is not None else self._line(i, nlen))
                if m is not None:
                    if ls > after and (best is None or ls > best[0]):
                        best = (ls, m)
                    break
        return best

    def evidence(self, line_start: int, m: re.Match[bytes]) -> str:
        """The matching cleaned line, decoded and trimmed around the match."""
        line = m.string
        if len(line) > EVIDENCE_CHARS:
            start = max(0, min(m.start() - EVIDENCE_CHARS // 3, len(line) - EVIDENCE_CHARS))
            line = (b"..." if start > 0 else b"") + line[start:start + EVIDENCE_CHARS] + (
                b"..." if start + EVIDENCE_CHARS < len(line) else b"")
        s = line.decode("utf-8", "replace").strip()
        return "".join(ch if ch.isprintable() else "\ufffd" for ch in s)
