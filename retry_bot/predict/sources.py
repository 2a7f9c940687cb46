"""Edges that fill a :class:`HistoryIndex`: the state store, a benchmark trace, and the policy file.

These are the only places in :mod:`retry_bot.predict` that do I/O.
"""

from __future__ import annotations

import tomllib
from typing import Any, Iterable, Mapping

from retry_bot.predict.estimator import Clamp, new_index
from retry_bot.predict.history import HistoryIndex, Observation, observation_from_record
from retry_bot.predict.settings import DEFAULT_SETTINGS, PredictionSettings, parse_prediction_settings
from retry_bot.problems import ConfigError, Problem

__all__ = ["index_from_store", "index_from_rows", "index_from_trace", "load_policy_and_settings",
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


def observation_from_row(row: Mapping[str, Any], settings: PredictionSettings = DEFAULT_SETTINGS
                         ) -> tuple[Observation, bool] | None:
    """``(observation, trusted)`` of one ``Store.usage_records()`` row; ``None`` when unusable."""
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
    return o, settings.trusts(row.get("ref"), row.get("protected"))


def index_from_store(store: Any, settings: PredictionSettings = DEFAULT_SETTINGS,
                     since: str | None = None) -> HistoryIndex:
    """Build an index from a :class:`retry_bot.state.Store` (``usage_records``)."""
    return index_from_rows(store.usage_records(since=since), settings)


def index_from_trace(path: str, settings: PredictionSettings = DEFAULT_SETTINGS,
                     until: float | None = None) -> HistoryIndex:
    """Build an index from a benchmark trace: every job as it ran under its static size (no limit).

    With ``until`` (POSIX seconds), only jobs that finished before it.
    """
    from retry_bot.simulate import load_trace

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


def load_policy_and_settings(path: str | None) -> tuple[Any, PredictionSettings]:
    """Load the policy (``retry_bot.policy``) and its ``[prediction]`` table.

    ``path=None``: the default policy and default settings.  Raises
    :class:`ConfigError` listing every problem (the ``[prediction]`` table's
    first, with line numbers).
    """
    try:
        from retry_bot.policy.load import default_policy, policy_from_dict
    except ImportError:  # pragma: no cover - the policy package is part of the product
        default_policy = policy_from_dict = None  # type: ignore[assignment]
    if path is None:
        return (default_policy() if default_policy else None), DEFAULT_SETTINGS
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
    policy = policy_from_dict(data, path, text) if policy_from_dict else None
    return policy, settings


def settings_from_policy(policy: Any) -> PredictionSettings:
    """The prediction settings of a loaded policy (its ``prediction`` table); defaults when absent/invalid."""
    table = getattr(policy, "prediction", None)
    if not table:
        return DEFAULT_SETTINGS
    settings, problems = parse_prediction_settings(dict(table), "prediction")
    return settings


def clamp_from_policy(policy: Any) -> Clamp:
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
