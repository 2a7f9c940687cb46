"""Prediction settings: the ``[prediction]`` table of the policy TOML.

:func:`parse_prediction_settings` validates the table and reports every
problem with its key path (and line, when the TOML source is given) instead
of stopping at the first, like the rest of the policy.  Every key is
documented in ``docs/predictions.md``; the defaults below are the documented
defaults.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping

from retry_bot.problems import Problem, find_line
from retry_bot.predict.keys import (
    GENERIC_LEVELS,
    GENERIC_NAME_PATTERNS,
    SPACK_LEVELS,
    SPACK_NAME_PATTERNS,
    SPACK_VARIABLES,
    KeySettings,
)

__all__ = ["PredictionSettings", "parse_prediction_settings", "DEFAULT_SETTINGS"]

MIB = 1024 * 1024


@dataclass(frozen=True)
class PredictionSettings:
    """How history becomes requests and limits.  Frozen; build with :func:`parse_prediction_settings`."""

    #: Use history at all (``false``: static sizes / defaults only).
    enabled: bool = True
    #: Key extraction and the fallback chain.
    keys: KeySettings = field(default_factory=KeySettings)
    #: Refs whose runs train predictions (regexes, full match).  PR builds never train.
    trusted_refs: tuple[str, ...] = (r"develop", r"main", r"master")
    #: Also trust any run GitLab marked as on a protected ref.
    trust_protected: bool = True
    #: Weight of a run halves every this many hours (recent runs count more).
    half_life_hours: float = 168.0
    #: At most this many most recent runs per key are kept.
    max_samples: int = 24
    #: A fallback level is used once it has this many trusted runs (else the next, less specific one).
    min_samples: int = 3
    #: Memory request = decayed mean of the runs' mean memory x this.
    memory_request_factor: float = 1.05
    #: Memory limit, before the margin ("base"): the larger of the log-normal upper quantile
    #: limit_z spreads above the decayed mean log-peak, and the largest recent peak.
    limit_z: float = 2.0
    #: The largest recent peak (within two half-lives) is a floor of the base and of the limit
    #: (x 1 + limit_margin).  Off: only the learned margin over the quantile decides, so the
    #: OOM budget can also thin the limits of noisy keys.
    recent_max_floor: bool = False
    #: The margin over that base is learned from the residuals log(peak / base) of past
    #: runs (how far real peaks went beyond the model), per fallback level and trust: the
    #: margin m minimising base * exp(m) + K * P(residual > m), K = oom_cost x the mean peak
    #: of the fleet's recent trusted runs: an OOM kill is judged as costly as K bytes of limit
    #: headroom, so large jobs get thin margins and small ones generous margins, whatever the
    #: farm's sizes.  Used once calibration_min residuals exist; kept between limit_margin
    #: and max_margin (a factor).
    oom_cost: float = 36.0
    #: OOM kills the admin accepts per 100 jobs (0: off: ``oom_cost`` alone prices a kill).  When set, the price of a kill
    #: (``oom_cost``) is only the starting point: every observed OOM kill raises it and every
    #: finished job lowers it a little (online, causally, from the farm's own outcomes), so
    #: kills settle at this rate on any farm; the residuals still decide how the headroom is
    #: shared between keys (noisy, bimodal or drifting ones get more).
    oom_budget_per_100: float = 0.85
    #: Step of that feedback, in log(price) per kill.
    oom_budget_gain: float = 0.08
    calibration_min: int = 200
    max_margin: float = 3.0
    #: The smallest margin: the limit is at least base x (1 + this) and every known peak
    #: (of this key's more specific levels, of the job's own ref) x (1 + this).
    limit_margin: float = 0.10
    #: Spread (sd of log peak) assumed where history is short; blended with what is observed.
    prior_spread: float = 0.12
    #: How many runs' worth of weight the prior spread carries.
    prior_weight: float = 10.0
    #: Hierarchical prior of the spread (empirical Bayes): a key's prior is the pooled spread of
    #: its package's keys at the same level (other versions / compilers / variants), shrunk toward
    #: the farm-wide pooled spread of that level by sibling_weight runs' worth (0: off, prior_spread
    #: alone).  The pools forget with these memories (in runs).
    sibling_weight: float = 5.0
    sibling_memory_runs: float = 200.0
    farm_memory_runs: float = 2000.0
    #: Keys whose level used has fewer runs than this are calibrated in a class of their own.
    prior_runs: int = 5
    #: Floor of the observed spread (no build is perfectly reproducible).
    min_spread: float = 0.03
    #: Centre trackers per key level: time-decayed means of log(peak) with these half-lives,
    #: each scored on its one-step-ahead error (decayed by tracker_rate per run); once
    #: tracker_min_runs were scored, the best one gives the key's centre and its RMS error the
    #: key's predictive spread (shrunk by tracker_prior runs' worth toward the error its package's
    #: pooled spread predicts for that tracker: noise x sqrt(1 + 1/runs in its mean)).
    #: Empty: off (the sample statistics alone).
    tracker_half_lives_hours: tuple[float, ...] = (24.0, 72.0, 168.0, 672.0)
    tracker_rate: float = 0.1
    tracker_min_runs: float = 3.0
    tracker_prior: float = 10.0
    #: Package-relative centres: the package keeps base trackers (its runs less their builds'
    #: offsets) and each key level an offset from them; base + offset is one more candidate centre
    #: of the level, scored like its own trackers (a build follows its package's drift).
    package_trackers: bool = True
    #: Bimodal keys: with at least mode_min_runs runs whose sorted log peaks have a gap of at
    #: least mode_gap within-mode spreads (interleaved in time), the limit covers the upper
    #: mode with the spread within a mode (0: off).
    mode_gap: float = 4.0
    mode_min_runs: int = 8
    #: A job whose level used has fewer trusted runs than this gets no memory limit (as a job
    #: without history: the runner's default limit applies); its request is still predicted.
    #: With the hierarchical spread prior one run is enough for the job's own package version and
    #: variants; a level that does not name both (a build never seen) needs limit_min_runs_other_builds.
    limit_min_runs: int = 1
    limit_min_runs_other_builds: int = 3
    #: After an OOM kill at limit L, the need is > L: the next limit is at least
    #: max(L x oom_bump_ratio, L + oom_min_bump_bytes) (VPA's rule), remembered this long.
    oom_bump_ratio: float = 1.2
    oom_min_bump_bytes: int = 100 * MIB
    oom_memory_hours: float = 336.0
    #: The predictor's view for a retry after kills at L: the limit the key's peaks exceed with
    #: probability retry_miss given that they exceed L (its centre and spread); without a model
    #: of the key, L x retry_growth ** kills.  Never below the OOM bump above.
    retry_growth: float = 2.0
    retry_miss: float = 0.01
    #: CPU request = decayed mean CPU usage x this.
    cpu_request_factor: float = 1.05
    #: CPU limit = decayed upper CPU usage x this; 0 disables CPU limits.
    cpu_limit_factor: float = 1.2
    #: No history: request = the static size (job's own KUBERNETES_* request) or these defaults.
    default_memory_request_bytes: int = 2_000_000_000
    default_cpu_request_cores: float = 1.0
    #: No history at all for a job: "none" = its static size and no limit (as without a
    #: predictor; the runner's default limit applies), "learned" = static size x what
    #: peaks of jobs with the same static size reached, "factor" = request x cold_limit_factor.
    cold_limit: str = "none"
    cold_limit_factor: float = 2.5
    #: Floors, as VPA's PodMinMemoryMb / PodMinCPUMillicores.
    min_memory_bytes: int = 128 * MIB
    min_cpu_cores: float = 0.05
    #: Clamp to these when the policy gives no runner classes (0: no clamp).
    max_memory_bytes: int = 0
    max_cpu_cores: float = 0.0

    def trusts(self, ref: str | None, protected: bool | None = None) -> bool:
        """May a run on ``ref`` train predictions?"""
        if self.trust_protected and protected:
            return True
        if not ref:
            return False
        return any(p.fullmatch(ref) for p in _compiled(self.trusted_refs))


_RE_CACHE: dict[tuple[str, ...], tuple[re.Pattern[str], ...]] = {}


def _compiled(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    got = _RE_CACHE.get(patterns)
    if got is None:
        got = tuple(re.compile(p) for p in patterns)
        _RE_CACHE[patterns] = got
    return got


DEFAULT_SETTINGS = PredictionSettings()

_NUMERIC: dict[str, tuple[type, float, float]] = {
    # name: (type, min, max) (inclusive)
    "half_life_hours": (float, 0.01, 1e6),
    "max_samples": (int, 1, 10_000),
    "min_samples": (int, 1, 10_000),
    "memory_request_factor": (float, 0.1, 10.0),
    "limit_z": (float, 0.0, 10.0),
    "limit_margin": (float, 0.0, 10.0),
    "oom_cost": (float, 0.0, 1e6),
    "oom_budget_per_100": (float, 0.0, 100.0),
    "oom_budget_gain": (float, 0.0, 2.0),
    "calibration_min": (int, 1, 1_000_000),
    "max_margin": (float, 1.0, 100.0),
    "prior_spread": (float, 0.0, 5.0),
    "prior_weight": (float, 0.0, 1000.0),
    "sibling_weight": (float, 0.0, 1000.0),
    "sibling_memory_runs": (float, 1.0, 1e7),
    "farm_memory_runs": (float, 1.0, 1e7),
    "prior_runs": (int, 0, 10_000),
    "min_spread": (float, 0.0, 5.0),
    "tracker_rate": (float, 0.001, 1.0),
    "tracker_min_runs": (float, 0.0, 1000.0),
    "tracker_prior": (float, 0.0, 1000.0),
    "mode_gap": (float, 0.0, 100.0),
    "mode_min_runs": (int, 4, 10_000),
    "limit_min_runs": (int, 0, 10_000),
    "limit_min_runs_other_builds": (int, 0, 10_000),
    "oom_bump_ratio": (float, 1.0, 10.0),
    "oom_min_bump_bytes": (int, 0, 2**50),
    "oom_memory_hours": (float, 0.0, 1e6),
    "retry_growth": (float, 1.0, 10.0),
    "retry_miss": (float, 0.0, 1.0),
    "cpu_request_factor": (float, 0.1, 10.0),
    "cpu_limit_factor": (float, 0.0, 100.0),
    "default_memory_request_bytes": (int, 1, 2**50),
    "default_cpu_request_cores": (float, 0.001, 10_000.0),
    "cold_limit_factor": (float, 0.0, 100.0),
    "min_memory_bytes": (int, 1, 2**50),
    "min_cpu_cores": (float, 0.001, 10_000.0),
    "max_memory_bytes": (int, 0, 2**60),
    "max_cpu_cores": (float, 0.0, 1e6),
}
_MEMORY_KEYS = {"oom_min_bump_bytes", "default_memory_request_bytes", "min_memory_bytes", "max_memory_bytes"}
_BOOL = {"enabled", "trust_protected", "recent_max_floor", "package_trackers"}
_CHOICES = {"cold_limit": ("none", "learned", "factor")}
_KEY_TABLE = {"extract", "levels", "variables", "name_patterns", "include_project"}


def parse_prediction_settings(
    table: Mapping[str, Any] | None,
    path: str = "prediction",
    source_text: str | None = None,
) -> tuple[PredictionSettings, list[Problem]]:
    """Validate the ``[prediction]`` table; returns the settings and every problem found.

    Memory keys accept Kubernetes quantities (``"100Mi"``) or integers (bytes).
    Unknown keys are problems (a typo must not silently do nothing).  On
    problems the returned settings use the defaults for the bad keys.
    """
    problems: list[Problem] = []

    def problem(key: str, message: str) -> None:
        full = f"{path}.{key}" if path else key
        line = find_line(source_text, full) if source_text else None
        problems.append(Problem(full, message, line))

    if table is None:
        return DEFAULT_SETTINGS, problems
    if not isinstance(table, Mapping):
        problems.append(Problem(path, f"must be a table, not {type(table).__name__}"))
        return DEFAULT_SETTINGS, problems

    known = {f.name for f in fields(PredictionSettings)}
    values: dict[str, Any] = {}
    for key, raw in table.items():
        if key not in known:
            problem(key, f"unknown key (known: {', '.join(sorted(known))})")
            continue
        if key == "keys":
            ks, kp = _parse_keys(raw, f"{path}.keys" if path else "keys", source_text)
            problems.extend(kp)
            if not kp:
                values["keys"] = ks
            continue
        if key in _BOOL:
            if not isinstance(raw, bool):
                problem(key, f"must be true or false, not {raw!r}")
            else:
                values[key] = raw
            continue
        if key in _CHOICES:
            if raw not in _CHOICES[key]:
                problem(key, f"must be one of {', '.join(map(repr, _CHOICES[key]))}, not {raw!r}")
            else:
                values[key] = raw
            continue
        if key == "tracker_half_lives_hours":
            if (not isinstance(raw, list) or len(raw) > 8
                    or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                               and 0.1 <= x <= 1e5 for x in raw)):
                problem(key, "must be a list of at most 8 half-lives in hours, each between 0.1 and 100000")
            else:
                values[key] = tuple(float(x) for x in raw)
            continue
        if key == "trusted_refs":
            if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
                problem(key, "must be a list of regular expressions (strings)")
                continue
            ok = True
            for i, pat in enumerate(raw):
                try:
                    re.compile(pat)
                except re.error as exc:
                    problem(f"{key}[{i}]", f"invalid regular expression {pat!r}: {exc}")
                    ok = False
            if ok:
                values[key] = tuple(raw)
            continue
        typ, lo, hi = _NUMERIC[key]
        val: Any = raw
        if key in _MEMORY_KEYS and isinstance(raw, str):
            from runner_wrapper.quantity import QuantityError, parse_memory

            try:
                val = parse_memory(raw)
            except QuantityError as exc:
                problem(key, str(exc))
                continue
        if isinstance(val, bool) or not isinstance(val, (int, float)):
            problem(key, f"must be a number, not {raw!r}")
            continue
        if typ is int and (isinstance(val, float) and not val.is_integer()):
            problem(key, f"must be a whole number, not {raw!r}")
            continue
        if not math.isfinite(val) or not lo <= val <= hi:
            problem(key, f"must be between {lo:g} and {hi:g}, not {raw!r}")
            continue
        values[key] = typ(val)
    settings = replace(DEFAULT_SETTINGS, **values)
    if settings.min_samples > settings.max_samples:
        problem("min_samples", f"must not exceed max_samples ({settings.max_samples})")
        settings = replace(settings, min_samples=min(settings.min_samples, settings.max_samples))
    return settings, problems


def _parse_keys(raw: Any, path: str, source_text: str | None) -> tuple[KeySettings, list[Problem]]:
    problems: list[Problem] = []

    def problem(key: str, message: str) -> None:
        full = f"{path}.{key}"
        problems.append(Problem(full, message, find_line(source_text, full) if source_text else None))

    if not isinstance(raw, Mapping):
        return KeySettings(), [Problem(path, "must be a table")]
    for key in raw:
        if key not in _KEY_TABLE:
            problem(key, f"unknown key (known: {', '.join(sorted(_KEY_TABLE))})")
    extract = raw.get("extract", "spack")
    if extract not in ("spack", "generic"):
        problem("extract", f"must be \"spack\" or \"generic\", not {extract!r}")
        extract = "spack"
    if extract == "spack":
        base = KeySettings()
    else:
        base = KeySettings(levels=GENERIC_LEVELS, variables={}, name_patterns=GENERIC_NAME_PATTERNS)
    levels = base.levels
    if "levels" in raw:
        lv = raw["levels"]
        if (not isinstance(lv, list) or not lv
                or not all(isinstance(x, list) and x and all(isinstance(f, str) and f for f in x) for x in lv)):
            problem("levels", "must be a non-empty list of non-empty lists of field names, most specific first")
        else:
            levels = tuple(tuple(x) for x in lv)
    variables = base.variables
    if "variables" in raw:
        vv = raw["variables"]
        if not isinstance(vv, Mapping) or not all(isinstance(v, str) and v for v in vv.values()):
            problem("variables", "must be a table of field = \"VARIABLE_NAME\"")
        else:
            variables = dict(vv)
    patterns = base.name_patterns
    if "name_patterns" in raw:
        pp = raw["name_patterns"]
        if not isinstance(pp, list) or not all(isinstance(p, str) for p in pp):
            problem("name_patterns", "must be a list of regular expressions with named groups")
        else:
            good = True
            for i, p in enumerate(pp):
                try:
                    c = re.compile(p)
                except re.error as exc:
                    problem(f"name_patterns[{i}]", f"invalid regular expression {p!r}: {exc}")
                    good = False
                    continue
                if not c.groupindex:
                    problem(f"name_patterns[{i}]", f"{p!r} has no named group such as (?P<package>...)")
                    good = False
            if good:
                patterns = tuple(pp)
    include_project = raw.get("include_project", base.include_project)
    if not isinstance(include_project, bool):
        problem("include_project", "must be true or false")
        include_project = base.include_project
    return KeySettings(levels=levels, variables=variables, name_patterns=patterns,
                       include_project=include_project), problems


# Re-exported for documentation generators and tests.
SPACK_DEFAULTS = {"levels": SPACK_LEVELS, "variables": SPACK_VARIABLES, "name_patterns": SPACK_NAME_PATTERNS}
