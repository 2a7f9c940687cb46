"""Edges that fill a :class:`HistoryIndex`: the state store and the policy file.

(A benchmark trace: :func:`retry_bot.simulate.trace.index_from_trace`.)

These are the only places in :mod:`retry_bot.predict` that do I/O.
"""

from __future__ import annotations

import re
import tomllib
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from retry_bot.predict.estimator import Clamp, new_index
from retry_bot.predict.history import HistoryIndex, Observation, observation_from_record, parse_time
from retry_bot.predict.keys import extract_key
from retry_bot.predict.settings import DEFAULT_SETTINGS, PredictionSettings, parse_prediction_settings
from retry_bot.problems import ConfigError, Problem

if TYPE_CHECKING:
    from retry_bot.policy import Policy
    from retry_bot.state import Store

__all__ = ["index_from_store", "index_from_rows", "load_policy_and_settings",
           "settings_from_policy", "clamp_from_policy"]


def index_from_rows(rows: Iterable[dict], settings: PredictionSettings = DEFAULT_SETTINGS) -> HistoryIndex:
    """Build an index from ``Store.usage_records()`` rows (each with its raw ``record``).

    A row trains predictions only when ``settings`` trusts its ref (or it is
    protected); other rows are kept under their ref only.  Malformed records
    are skipped.
    """
    index = new_index(settings)
    index.extend(p for p in (observation_from_row(row, settings) for row in rows) if p is not None)
    return index


#: ``usage.cpu_max_cores`` in a record stored as canonical JSON (``retry_bot.state.usage.usage_row``).
_CPU_MAX = re.compile(r'"cpu_max_cores":(-?[0-9][0-9.eE+-]*)')


def observation_from_row(row: Mapping[str, Any], settings: PredictionSettings = DEFAULT_SETTINGS
                         ) -> tuple[Observation, bool] | None:
    """``(observation, trusted)`` of one ``Store.usage_records()`` row; ``None`` when unusable.

    The row's columns were taken from the verified record at ingest (``retry_bot.state.usage``),
    so they are read directly (the raw record only for what has no column), as
    :func:`observation_from_record` would read the record: the same observation, without
    parsing the record again (history at scale: a million rows).
    """
    trusted = settings.trusts(row.get("ref"), row.get("protected"))
    if "finished_at" in row and "key_fields" in row:
        at = parse_time(row.get("finished_at"))
        if at is None:
            return None
        variables = row.get("key_fields") or {}
        key = extract_key(settings.keys, job_name=row.get("job_name"),
                          variables=variables if isinstance(variables, Mapping) else {},
                          project=row.get("project_path"))
        if row.get("oom_killed"):
            lim = row.get("memory_limit_bytes")
            if not lim:
                return None
            return Observation(key=key, at=at, oom_limit_bytes=float(lim), job_id=row.get("job_id"),
                               ref=row.get("ref")), trusted
        if row.get("exit_code") not in (0, None) or not row.get("memory_peak_bytes"):
            return None
        peak = float(row["memory_peak_bytes"])
        mean = float(row.get("memory_mean_bytes") or peak)
        wall = row.get("wall_seconds")
        cpu_mean = row.get("cpu_mean_cores")
        if cpu_mean is None and wall and row.get("cpu_seconds") is not None:
            cpu_mean = float(row["cpu_seconds"]) / float(wall)
        raw = row.get("record")
        if isinstance(raw, Mapping):
            usage = raw.get("usage")
            cpu_max = usage.get("cpu_max_cores") if isinstance(usage, Mapping) else None
        else:  # the raw record as canonical JSON text (Store.usage_records_after): one number of it
            m = _CPU_MAX.search(row.get("raw") or "")
            cpu_max = float(m.group(1)) if m else None
        return Observation(key=key, at=at, memory_peak_bytes=peak, memory_mean_bytes=mean, cpu_mean_cores=cpu_mean,
                           cpu_max_cores=cpu_max, duration_s=wall, job_id=row.get("job_id"),
                           ref=row.get("ref")), trusted
    from runner_wrapper.record import RecordError

    rec = row.get("record")
    if not isinstance(rec, dict):
        return None
    try:
        o = observation_from_record(rec, settings.keys)
    except RecordError:
        return None
    if o is None:
        return None
    return o, trusted


def index_from_store(store: Store, settings: PredictionSettings = DEFAULT_SETTINGS,
                     since: str | None = None) -> HistoryIndex:
    """Build an index from a :class:`retry_bot.state.Store` (``usage_records``)."""
    return index_from_rows(store.usage_records(since=since), settings)


def load_policy_and_settings(path: str | None) -> tuple[Policy, PredictionSettings]:
    """Load the policy (``retry_bot.policy``) and its ``[prediction]`` table.

    ``path=None``: the default policy and default settings.  Raises
    :class:`ConfigError` listing every problem (the ``[prediction]`` table's
    first, with line numbers).
    """
    from retry_bot.policy.load import default_policy, policy_from_dict  # deferred: policy imports predict

    if path is None:
        return default_policy(), DEFAULT_SETTINGS
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise ConfigError([Problem("", f"cannot read policy {path}: {exc.strerror or exc}", source=path)]) from None
    text = raw.decode("utf-8", "replace")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([Problem("", f"not valid TOML: {exc}", source=path)]) from None
    settings, problems = parse_prediction_settings(data.get("prediction"), "prediction", text)
    if problems:  # reported here first: with line numbers
        raise ConfigError([Problem(p.path, p.message, p.line, path) for p in problems])
    policy = policy_from_dict(data, path, text)
    return policy, settings


def settings_from_policy(policy: Policy | None) -> PredictionSettings:
    """The prediction settings of a loaded policy (its ``prediction`` table); defaults when absent/invalid."""
    table = getattr(policy, "prediction", None)
    if not table:
        return DEFAULT_SETTINGS
    settings, problems = parse_prediction_settings(dict(table), "prediction")
    return settings


def clamp_from_policy(policy: Policy | None) -> Clamp:
    """The predictor's caps from the policy: the one place ``serve``, the live bot and ``simulate`` take them.

    Memory: :meth:`Policy.memory_cap` (``resize.max_memory`` and the top of the runner-class
    ladder).  CPU: the largest ``max_cpus`` of the runner classes (unbounded without classes).
    ``None`` (no policy): unbounded.
    """
    if policy is None:
        return Clamp()
    classes = tuple(getattr(policy, "runner_classes", ()) or ())
    max_cpus = max((float(rc.max_cpus) for rc in classes), default=None)
    return Clamp(max_memory_bytes=float(policy.memory_cap()), max_cpu_cores=max_cpus)
