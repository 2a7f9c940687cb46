"""Where a usage record goes.

- the **job log**: one marker line (``RIGHTSIZER-USAGE v1 <base64 JSON>``, <= 4 KiB)
  printed by ``run`` (``cleanup`` output never reaches the job log);
- an append-only **spool** file (JSON Lines, ``fsync``-ed): every record, always,
  so nothing is lost when the collector is down;
- an HTTP **collector** (``POST`` JSON, bearer token from an environment variable,
  tenacity retries with exponential back-off): the one client is
  :func:`runner_wrapper.spool.http_deliver`, which ``spool send`` uses too;
- a Prometheus **node_exporter textfile** (written to a temporary file, then renamed).

Records are signed (HMAC-SHA256, :mod:`runner_wrapper.record`) when a key is
configured; otherwise they are emitted unsigned and the retry bot ignores them.
"""

from __future__ import annotations

import errno
import os
import sys

from runner_wrapper.marker import MARKER_MAX_BYTES, MARKER_PREFIX, canonical_json, hmac_sha256_hex, marker_line

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing and json stay out of the per-stage start-up path
    from typing import Any, Mapping

__all__ = ["say", "marker_line", "hmac_sha256_hex", "canonical_json", "signed_dict", "append_spool", "post_collector", "write_textfile",
           "CollectorError"]

PREFIX = "runner-wrapper: "


def say(message: str, stream: Any = None) -> None:
    """One line for the job log (``run``/``prepare`` stdout is the job log)."""
    out = stream or sys.stdout
    out.write(PREFIX + message + "\n")
    out.flush()


def signed_dict(data: Mapping[str, Any], key: bytes | None, key_id: str) -> dict[str, Any]:
    from runner_wrapper.record import sign_record

    return sign_record(data, key, key_id) if key else dict(data)


def append_spool(path: str, data: Mapping[str, Any]) -> None:
    """Append one JSON line and ``fsync`` it (and the directory when the file is new).

    Every byte is written or :class:`OSError` is raised (``os.write`` may write part of the line:
    a full disk, a file-size limit).  A line an earlier writer left cut off (it was killed, or its
    disk filled, mid-write) is ended first, so the damage stays on that line and this record stays
    whole on its own.  The check and the write hold an exclusive ``flock``: the jobs of one runner
    append to one file.
    """
    import fcntl
    import json

    line = (json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n").encode()
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    new = not os.path.exists(path)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o640)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line
        view = memoryview(line)
        while view:
            n = os.write(fd, view)
            if n <= 0:
                raise OSError(errno.EIO, f"spool {path}: the write made no progress")
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)
    if new:
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


class CollectorError(RuntimeError):
    """The collector did not accept the record (after all retries)."""


def post_collector(url: str, data: Mapping[str, Any], token: str | None, timeout: float, attempts: int,
                   wait_initial: float = 0.5, wait_max: float = 4.0) -> int:
    """POST the record as JSON; retries connection errors and 5xx/429.  Returns the HTTP status.

    Sent by :func:`runner_wrapper.spool.http_deliver` (the one collector client, which ``spool send``
    uses too).  Raises :class:`CollectorError` after the last attempt (the record is already in the
    spool), or at once when the collector refuses the record (any other status; 3xx included).
    """
    import json

    from runner_wrapper.spool import http_deliver

    body = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    answer = http_deliver(url, token, timeout, attempts, wait_initial, wait_max, user_agent="runner-wrapper")(body)
    status = answer.status
    if status is not None and 200 <= status < 300:
        return status
    if status is None or status >= 500 or status == 429:
        why = answer.error if status is None else f"HTTP {status}"
        raise CollectorError(f"collector unreachable after {attempts} attempt(s): {why}")
    detail = f": {answer.error}" if answer.error else ""
    raise CollectorError(f"collector refused the record: HTTP {status}{detail}")


def write_textfile(path: str, record: Mapping[str, Any]) -> None:
    """node_exporter textfile with the last job's figures (atomic: temp file + rename)."""
    from prometheus_client import CollectorRegistry, Gauge, write_to_textfile

    reg = CollectorRegistry()
    job = record.get("job") or {}
    usage = record.get("usage") or {}
    limits = record.get("limits") or {}
    labels = {"project": str(job.get("project_path") or ""), "job_name": str(job.get("name") or "")}
    names = list(labels)

    def g(name: str, doc: str, value: Any) -> None:
        if value is None:
            return
        Gauge(name, doc, names, registry=reg).labels(**labels).set(float(value))

    g("rightsizer_last_job_id", "GitLab job id of the last finished job", job.get("id"))
    g("rightsizer_last_job_memory_peak_bytes", "Memory high-water mark of the last job", usage.get("memory_peak_bytes"))
    g("rightsizer_last_job_memory_mean_bytes", "Mean memory of the last job", usage.get("memory_mean_bytes"))
    g("rightsizer_last_job_memory_limit_bytes", "Memory limit applied to the last job",
      limits.get("memory_limit_bytes"))
    g("rightsizer_last_job_cpu_seconds", "CPU seconds (user+system) of the last job",
      (usage.get("cpu_user_seconds") or 0) + (usage.get("cpu_system_seconds") or 0))
    g("rightsizer_last_job_cpu_max_cores", "Busiest sampled interval of the last job, in cores",
      usage.get("cpu_max_cores"))
    g("rightsizer_last_job_wall_seconds", "Wall time of the last job", usage.get("wall_seconds"))
    g("rightsizer_last_job_oom_kills", "OOM kills in the last job", usage.get("oom_kills"))
    g("rightsizer_last_job_exit_code", "Exit code of the last job", record.get("exit_code"))
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    write_to_textfile(path, reg)
