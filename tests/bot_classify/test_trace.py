"""Bounded reading of trace tails and byte-safe cleaning."""

from __future__ import annotations

import io
import os

from retry_bot.classify import clean_trace, read_trace_tail


class CountingReader(io.RawIOBase):
    """A seekable file wrapper that counts the bytes actually read."""

    def __init__(self, fh):
        self.fh = fh
        self.read_bytes = 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, off, whence=0):
        return self.fh.seek(off, whence)

    def read(self, n=-1):
        data = self.fh.read(n)
        self.read_bytes += len(data)
        return data


class Stream(io.RawIOBase):
    """A non-seekable stream of `total` bytes, in chunks."""

    def __init__(self, total: int):
        self.left = total
        self.pos = 0

    def readable(self):
        return True

    def read(self, n=-1):
        n = self.left if n < 0 else min(n, self.left)
        base = bytes(range(251))
        start = self.pos % 251
        out = (base * (n // 251 + 2))[start:start + n]
        self.left -= n
        self.pos += n
        return out


def test_bytes_and_small_files(tmp_path):
    assert read_trace_tail(b"abcdef", 4) == b"cdef"
    assert read_trace_tail(b"abc", 10) == b"abc"
    assert read_trace_tail(b"abc", 0) == b""
    f = tmp_path / "t.log"
    f.write_bytes(b"0123456789")
    assert read_trace_tail(f, 3) == b"789"
    assert read_trace_tail(str(f), 100) == b"0123456789"


def test_100_mb_file_reads_only_the_tail(tmp_path):
    f = tmp_path / "big.log"
    with open(f, "wb") as fh:           # sparse: 100 MB of NULs, then a real ending
        fh.truncate(100 * 2**20)
        fh.seek(0, os.SEEK_END)
        fh.write(b"\nERROR: Job failed: exit code 137\n")
    with open(f, "rb") as raw:
        counting = CountingReader(raw)
        tail = read_trace_tail(counting, 256 * 1024)
    assert len(tail) == 256 * 1024 and tail.endswith(b"exit code 137\n")
    assert counting.read_bytes == 256 * 1024


def test_non_seekable_stream_keeps_a_bounded_ring():
    s = Stream(3 * 2**20 + 123)
    tail = read_trace_tail(s, 100_000)
    assert len(tail) == 100_000
    # the same bytes as the end of the whole stream
    whole = Stream(3 * 2**20 + 123).read()
    assert tail == whole[-100_000:]


def test_clean_trace_is_byte_safe():
    raw = (b"section_start:1:get_sources\r\x1b[0K\x1b[32;1mFetching\x1b[0;m\n"
           b"\xff\xfe\x00bad\x00bytes\n10%\r50%\r100%\r\n\x1b]8;;http://x\x07link\x1b]8;;\x07\n")
    out = clean_trace(raw)
    assert b"\x1b" not in out and b"section_start" not in out and b"\x00" not in out
    assert b"Fetching" in out and b"100%" in out and b"10%" not in out and b"link" in out
