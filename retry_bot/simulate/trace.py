"""Trace and allocation-file I/O of the what-if replay (``../shared/bench/TRACE_FORMAT.md``).

* :func:`read_trace` / :func:`load_trace`: a trace of finished jobs (JSON Lines, optionally
  gzip), checked against the format's ordering contract, as :class:`TraceJob` records;
* :class:`AttemptAlloc`: one row of an allocation file; :func:`write_allocations` writes them;
* :func:`index_from_trace`: a :class:`~retry_bot.predict.history.HistoryIndex` filled from a
  trace (``retry-bot predict --trace``).

The only module of :mod:`retry_bot.simulate` that reads or writes files.
"""

from __future__ import annotations

import gzip
import io
import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping

from retry_bot.predict.estimator import StaticSize, new_index
from retry_bot.predict.history import HistoryIndex, Observation, parse_time
from retry_bot.predict.keys import JobKey, KeySettings, extract_key
from retry_bot.predict.settings import DEFAULT_SETTINGS, PredictionSettings

__all__ = ["TraceError", "TraceJob", "AttemptAlloc", "read_trace", "load_trace", "write_allocations",
           "index_from_trace"]


class TraceError(ValueError):
    """The trace file is unreadable or inconsistent (message names file and line)."""



@dataclass(frozen=True)
class TraceJob:
    """One trace record: what is known before it runs, and its (hidden) usage."""

    job_id: int
    t: float
    project: str
    ref: str
    job_name: str
    key: JobKey
    static: StaticSize
    # usage (never shown to an allocator before the job has finished)
    duration_s: float
    memory_peak_bytes: float
    memory_mean_bytes: float
    peak_at_fraction: float
    cpu_mean_cores: float
    cpu_max_cores: float
    raw_key: Mapping[str, str] = field(default_factory=dict)
    created_at: str = ""

    def killed(self, limit: float | None) -> bool:
        return limit is not None and self.memory_peak_bytes > limit

    def kill_time(self, limit: float) -> float:
        return self.duration_s * self.peak_at_fraction * (limit / self.memory_peak_bytes)


_REQUIRED = ("job_id", "ref", "job_name", "created_at", "duration_s", "memory_peak_bytes",
             "memory_mean_bytes", "peak_at_fraction", "cpu_mean_cores")


def _open_text(path: str):
    if str(path).endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, "r", encoding="utf-8")


def read_trace(path: str) -> Iterator[dict]:
    """Yield the raw records of a JSON Lines (optionally gzip) trace; :class:`TraceError` on bad lines."""
    try:
        with _open_text(path) as fh:
            for lineno, line in enumerate(fh, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise TraceError(f"{path}:{lineno}: invalid JSON: {exc.msg}") from None
                if not isinstance(rec, dict):
                    raise TraceError(f"{path}:{lineno}: not a JSON object")
                rec["_line"] = lineno
                yield rec
    except OSError as exc:
        raise TraceError(f"cannot read trace {path}: {exc.strerror or exc}") from None
    except (EOFError, gzip.BadGzipFile, UnicodeDecodeError) as exc:
        raise TraceError(f"cannot read trace {path}: {exc}") from None


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def load_trace(path: str, keys: KeySettings | None = None) -> list[TraceJob]:
    """Read and check a trace (ordering contract of ``TRACE_FORMAT.md``)."""
    keys = keys or KeySettings()
    jobs: list[TraceJob] = []
    prev_id = prev_t = None
    for rec in read_trace(path):
        where = f"{path}:{rec['_line']}"
        missing = [f for f in _REQUIRED if f not in rec]
        if missing:
            raise TraceError(f"{where}: missing field(s) {', '.join(missing)}")
        t = parse_time(rec["created_at"])
        if t is None:
            raise TraceError(f"{where}: created_at {rec['created_at']!r} is not an ISO-8601 time")
        for f in ("duration_s", "memory_peak_bytes", "memory_mean_bytes", "peak_at_fraction", "cpu_mean_cores"):
            if not _num(rec[f]) or rec[f] < 0:
                raise TraceError(f"{where}: {f} must be a non-negative number, not {rec[f]!r}")
        if rec["memory_peak_bytes"] <= 0 or not 0 < rec["peak_at_fraction"] <= 1:
            raise TraceError(f"{where}: memory_peak_bytes must be > 0 and peak_at_fraction in (0, 1]")
        jid = rec["job_id"]
        if not isinstance(jid, int) or isinstance(jid, bool):
            raise TraceError(f"{where}: job_id must be an integer")
        if prev_id is not None and jid <= prev_id:
            raise TraceError(f"{where}: job_id {jid} is not increasing")
        if prev_t is not None and t < prev_t:
            raise TraceError(f"{where}: created_at goes backwards")
        prev_id, prev_t = jid, t
        raw_key = rec.get("key") if isinstance(rec.get("key"), dict) else {}
        raw_key = {k: v for k, v in raw_key.items() if isinstance(v, str)}
        key = extract_key(keys, job_name=rec["job_name"], explicit=raw_key,
                          variables=rec.get("variables") if isinstance(rec.get("variables"), dict) else None,
                          project=rec.get("project"))
        sr = rec.get("static_request") if isinstance(rec.get("static_request"), dict) else {}
        static = StaticSize(
            memory_request_bytes=float(sr["memory_request_bytes"]) if _num(sr.get("memory_request_bytes")) and sr["memory_request_bytes"] > 0 else None,
            cpu_request_cores=float(sr["cpu_request_cores"]) if _num(sr.get("cpu_request_cores")) and sr["cpu_request_cores"] > 0 else None,
        )
        jobs.append(TraceJob(
            job_id=jid, t=t, project=str(rec.get("project", "")), ref=str(rec["ref"]),
            job_name=str(rec["job_name"]), key=key, static=static,
            duration_s=float(rec["duration_s"]), memory_peak_bytes=float(rec["memory_peak_bytes"]),
            memory_mean_bytes=float(rec["memory_mean_bytes"]),
            peak_at_fraction=float(rec["peak_at_fraction"]), cpu_mean_cores=float(rec["cpu_mean_cores"]),
            cpu_max_cores=float(rec.get("cpu_max_cores", rec["cpu_mean_cores"])),
            raw_key=raw_key, created_at=str(rec["created_at"]),
        ))
    return jobs



@dataclass(frozen=True)
class AttemptAlloc:
    """One attempt's allocation (a row of the allocation file)."""

    memory_request_bytes: int
    memory_limit_bytes: int | None
    cpu_request_cores: float

    def __post_init__(self) -> None:
        if self.memory_limit_bytes is not None and self.memory_limit_bytes < self.memory_request_bytes:
            object.__setattr__(self, "memory_request_bytes", self.memory_limit_bytes)



def write_allocations(path: str, rows: Iterable[dict]) -> int:
    """Write allocation rows as JSON Lines (gzip if ``*.gz``); returns the count."""
    n = 0
    if str(path).endswith(".gz"):
        fh: Any = io.TextIOWrapper(gzip.GzipFile(path, "wb", mtime=0), encoding="utf-8", newline="\n")
    else:
        fh = open(path, "w", encoding="utf-8", newline="\n")
    with fh:
        for r in rows:
            fh.write(json.dumps(r, separators=(",", ":")))
            fh.write("\n")
            n += 1
    return n



def index_from_trace(path: str, settings: PredictionSettings = DEFAULT_SETTINGS,
                     until: float | None = None) -> HistoryIndex:
    """Build an index from a benchmark trace: every job as it ran under its static size (no limit).

    With ``until`` (POSIX seconds), only jobs that finished before it.
    """
    index = new_index(settings)
    obs: list[tuple[Observation, bool]] = []
    for job in load_trace(path, settings.keys):
        end = job.t + job.duration_s
        if until is not None and end >= until:
            continue
        obs.append((Observation(key=job.key, at=end, memory_peak_bytes=job.memory_peak_bytes,
                                memory_mean_bytes=job.memory_mean_bytes, cpu_mean_cores=job.cpu_mean_cores,
                                cpu_max_cores=job.cpu_max_cores, duration_s=job.duration_s, job_id=job.job_id,
                                ref=job.ref, static_memory_bytes=job.static.memory_request_bytes),
                    settings.trusts(job.ref)))
    index.extend(obs)
    return index
