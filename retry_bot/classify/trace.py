"""Bounded reading and cleaning of job traces (bytes in, bytes out, never a decode error).

GitLab traces are raw terminal output: ANSI colour codes, ``section_start:``/
``section_end:`` markers, progress bars redrawn with carriage returns, and
sometimes binary junk.  The classifier works on the *tail* of the trace only
(:data:`DEFAULT_TAIL_BYTES`): the failure is at the end, and a bounded tail
keeps memory and time bounded for 100 MB logs.
"""

from __future__ import annotations

import io
import os
import re
from collections import deque
from pathlib import Path
from typing import BinaryIO

__all__ = ["DEFAULT_TAIL_BYTES", "read_trace_tail", "clean_trace", "clean_line", "TraceText"]

#: How much of the end of a trace the classifier reads.
DEFAULT_TAIL_BYTES = 256 * 1024
#: Evidence lines are trimmed to this many characters around the match.
EVIDENCE_CHARS = 240
#: Regexes run on at most this many bytes either side of a literal hit.
WINDOW = 2048
_TOKEN_TABLE = bytes(c if (48 <= c <= 57 or 97 <= c <= 122) else 32 for c in range(256))
#: Token sets of adjacent regions overlap by this much, so no short token is cut in two.
_TOKEN_OVERLAP = 128

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
    t = raw
    if b"\x1b" in t:
        t = _ANSI_RE.sub(b"", t)
    if b"section_" in t:
        t = _SECTION_RE.sub(b"", t)
    if b"\x00" in t:
        t = t.replace(b"\x00", b" ")
    if b"\r" in t:
        t = _collapse_cr(t)
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
    if b"\x1b" in line:
        line = _ANSI_RE.sub(b"", line)
    if b"section_" in line:
        line = _SECTION_RE.sub(b"", line)
    if b"\x00" in line:
        line = line.replace(b"\x00", b" ")
    if b"\r" in line:
        segs = [s for s in line.split(b"\r") if s.strip()]
        line = segs[-1] if segs else b""
    return line


class TraceText:
    """A raw trace tail searched line by line, newest first, without cleaning it all.

    Literal needles are looked for in the lower-cased raw bytes (one fast
    substring search each); only the lines that contain one are cleaned
    (:func:`clean_line`) and given to the regular expression.  Lines longer
    than ``2 * WINDOW`` are cut to a window around the needle.
    """

    __slots__ = ("raw", "_lower", "_lower_from", "_clean", "_cands", "_tokens", "_tokens_from")

    def __init__(self, raw: bytes):
        self.raw = raw
        self._lower: bytes | None = None
        self._lower_from = len(raw)
        self._clean: dict[tuple[int, int], bytes] = {}
        #: (needle, ignore_case) -> [scanned down to, [(offset, line start), ...] newest first]
        self._cands: dict[tuple[bytes, bool], list] = {}
        #: lower-case alphanumeric tokens of raw[_tokens_from:]
        self._tokens: set[bytes] = set()
        self._tokens_from = len(raw)

    def _token_set(self, lo: int) -> set[bytes]:
        """Lower-case ``[a-z0-9]`` tokens of the trace from ``lo`` on (extended lazily)."""
        if lo < self._tokens_from:
            end = min(len(self.raw), self._tokens_from + _TOKEN_OVERLAP)
            chunk = self.raw[lo:end].lower().translate(_TOKEN_TABLE)
            self._tokens.update(chunk.split())
            self._tokens_from = lo
        return self._tokens

    def _lowered(self, lo: int) -> tuple[bytes, int]:
        """The lower-cased trace from ``lo`` on (computed once per suffix), and its offset."""
        if self._lower is None or lo < self._lower_from:
            lo = max(0, min(lo, len(self.raw) - 65536))
            self._lower = self.raw[lo:].lower()
            self._lower_from = lo
        return self._lower, self._lower_from

    def _line(self, i: int, nlen: int) -> bytes:
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
        if end > floor and len(found) < MAX_LINES_PER_NEEDLE:
            raw = self.raw
            if ignore_case:
                hay, off = self._lowered(floor)
            else:
                hay, off = raw, 0
            while len(found) < MAX_LINES_PER_NEEDLE:
                i = hay.rfind(needle, floor - off, end - off)
                if i < 0:
                    # an occurrence straddling ``floor`` is found by the next, lower scan
                    end = min(end, floor + len(needle) - 1)
                    break
                i += off
                ls = raw.rfind(b"\n", 0, i) + 1
                found.append((i, ls))
                end = ls
            ent[0] = end
        return found

    def last_match(self, regex: re.Pattern[bytes], needles: tuple[bytes, ...], ignore_case: bool = False,
                   lo: int = 0, hi: int | None = None, after: int = -1,
                   anchors: tuple[bytes | None, ...] = ()) -> tuple[int, re.Match[bytes]] | None:
        """The latest line in ``[lo, hi)`` (starting after ``after``) where ``regex`` matches.

        Returns ``(line_start, match)``; the match is on the cleaned line.  At
        most :data:`MAX_LINES_PER_NEEDLE` lines are tried per needle.
        """
        if hi is None:
            hi = len(self.raw)
        best: tuple[int, re.Match[bytes]] | None = None
        base_floor = lo if lo > after + 1 else after + 1
        cands_cache = self._cands
        for k, needle in enumerate(needles):
            floor = base_floor if best is None or best[0] < base_floor else best[0] + 1
            ent = cands_cache.get((needle, ignore_case))
            if ent is not None and not ent[1] and ent[0] < floor + len(needle):
                continue  # already scanned down to this floor: not in the region
            if ent is None and anchors:
                anchor = anchors[k]
                if anchor is not None and anchor not in self._token_set(floor):
                    continue
            for i, ls in self._candidates(needle, ignore_case, floor):
                if i >= hi:
                    continue
                if i < floor:
                    break
                m = regex.search(self._line(i, len(needle)))
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
