"""History-based predictions of memory/CPU requests and limits.

Public API::

    from retry_bot.predict import (
        PredictionSettings, parse_prediction_settings,      # settings ([prediction] table)
        JobKey, KeySettings, extract_key, parse_spack_spec,  # job keys and the fallback chain
        Observation, HistoryIndex, observation_from_record,  # trusted history
        Allocation, StaticSize, Clamp, predict, predict_for_retry, gantry_variables,
    )
"""

from retry_bot.predict.estimator import (
    Allocation,
    Clamp,
    StaticSize,
    estimate,
    gantry_variables,
    predict,
    predict_for_retry,
)
from retry_bot.predict.history import HistoryIndex, Observation, observation_from_record
from retry_bot.predict.keys import JobKey, KeySettings, SpecError, extract_key, parse_spack_spec
from retry_bot.predict.settings import DEFAULT_SETTINGS, PredictionSettings, parse_prediction_settings

__all__ = [
    "Allocation", "Clamp", "StaticSize", "estimate", "gantry_variables", "predict", "predict_for_retry",
    "HistoryIndex", "Observation", "observation_from_record",
    "JobKey", "KeySettings", "SpecError", "extract_key", "parse_spack_spec",
    "DEFAULT_SETTINGS", "PredictionSettings", "parse_prediction_settings",
]
