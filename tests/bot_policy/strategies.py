"""Hypothesis strategies: valid policies (as TOML-shaped dicts), facts, verdicts, lineages, usage.

Every strategy object is built once at import: building them inside the
composite functions on every draw dominated the run time.  Weights (repeated
list entries) steer most examples past the early gates (superseded, budget,
unknown memory) so the resize and ladder code is exercised often.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from hypothesis import strategies as st

from retry_bot.decide import ClassUsage
from retry_bot.model import FAMILIES, JobContext, LineageAttempt, Read
from retry_bot.policy import policy_from_dict
from runner_wrapper.quantity import parse_memory

from tests.bot_policy.helpers import GiB, MiB, facts, usage_record, verdict

PROJECTS = ("group/project", "group/other", "hpc/browser", "team/experimental-1")
JOBS = ("build", "test", "chromium-build", "deploy-prod")
USERS = ("alice", "bob", None)
SOURCES = ("push", "schedule", "schedule", "schedule", "web", None)
CATEGORIES = ("oom", "dns_error", "compile_error", "spot_reclamation", "execution_timeout", "misc")
CLASS_NAMES = ("c0", "c1", "c2", "c3")

BOOL = st.booleans()
MOSTLY_FALSE = st.sampled_from([False, False, False, True])
MOSTLY_TRUE = st.sampled_from([True, True, True, False])
MEMORY = st.sampled_from(["256Mi", "1Gi", "2Gi", "3G", "4Gi", "6Gi", "8Gi", "12Gi", "16G", "32Gi", "64Gi",
                          "96G", "100000000", "256Gi"])
RESIZE_MAX = st.sampled_from(["2Gi", "8Gi", "32Gi", "96G", "100000000000", "256Gi"])
ACTION = st.sampled_from(["retry", "resize", "resize", "none"])
BUDGET = st.integers(0, 5)
FAMILY = st.sampled_from(FAMILIES)
FAMILY_WEIGHTED = st.sampled_from(["oom"] * 4 + ["infrastructure"] * 2 + list(FAMILIES))
FOCUS_FAMILY = st.sampled_from(["oom"] * 5 + ["timeout"])
LINEAGE_FAMILY = st.sampled_from(list(FAMILIES) + ["oom", "oom", None, None, None])
CATEGORY = st.sampled_from(CATEGORIES)
BACKOFF_INITIAL = st.sampled_from([0, 30, "1m", "10m"])
BACKOFF_FACTOR = st.sampled_from([1, 1.5, 2.0])
MAX_ATTEMPTS = st.integers(1, 10)
MAX_AGE = st.sampled_from(["0s", "1h", "24h"])
LIMIT_VAR = st.sampled_from(["KUBERNETES_MEMORY_LIMIT", "KUBERNETES_MEMORY_LIMIT", ""])
FORMAT = st.sampled_from(["binary", "decimal", "bytes"])
N_CLASSES = st.integers(0, 4)
CLASS_GIB = st.integers(2, 300)
CPUS = st.sampled_from(["2", "4", "16", "64"])
CONCURRENCY = st.integers(0, 3)
PLACE_PROJECT = st.sampled_from(["hpc/.*", "group/.*"])
PLACE_JOB = st.sampled_from(JOBS + (".*",))
SMALL_COUNT = st.integers(0, 2)
RATIO = st.sampled_from([1.1, 1.2, 1.5, 2.0, 3.0])
MIN_BUMP = st.sampled_from([0, "100Mi", "512Mi", "1G"])
GRANULARITY = st.sampled_from(["1Mi", "64Mi", "256Mi", "1k", "1G"])
BEYOND = st.sampled_from(["cap", "stop"])
LAST = st.sampled_from(["bump", "max"])
UNKNOWN = st.sampled_from(["max", "none"])
FACTOR = st.sampled_from([0.0, 0.5, 1.0, 1.0, 2.0])
OV_PROJECT = st.sampled_from(["group/.*", "hpc/browser", ".*"])
LINEAGE_LEN = st.integers(0, 6)
RERUN_ACTION = st.sampled_from(["retry", "resize"])
BYTES = st.integers(min_value=64 * MiB, max_value=400 * GiB)
OPT_BYTES = st.none() | BYTES
#: Lineage figures come from a store and may be garbage: zero or negative must not break a decision.
LINEAGE_BYTES = st.none() | BYTES | st.sampled_from([0, -1])
OPT_CPU = st.none() | st.sampled_from([0.5, 1.0, 4.0, 64.0, 0.0, -2.0])
OPT_TIMEOUT = st.none() | st.sampled_from([600.0, 3600.0, 4 * 3600.0, 0.0])
WHERE = st.sampled_from(["last"] * 4 + ["absent", "middle"])
TAGS_CHOICE = st.sampled_from(["none", "class", "class", "other"])
CPU_VAR = st.sampled_from(["500m", "2", "8"])
JOB = st.sampled_from(JOBS)
PROJECT = st.sampled_from(PROJECTS)
SOURCE = st.sampled_from(SOURCES)
USER = st.sampled_from(USERS)
FINISHED = st.sampled_from([None, "2026-01-01T11:59:00Z", "2025-12-01T00:00:00Z"])
OPT_REC_CPU = st.none() | st.sampled_from([1.0, 2.0])
NOW = st.sampled_from([None, datetime(2026, 1, 1, 12, 0)])
COUNT = st.integers(0, 4)
FRACTION = st.sampled_from([0.3, 0.5, 0.7, 0.9, 1.0])
#: A rule's floor on the classifier's probability, and a verdict's probability (``None``: a rule's verdict).
MIN_PROBABILITY = st.sampled_from([0.5, 0.9, 1.0])
PROBABILITY = st.sampled_from([None, None, None, 0.6, 0.75, 0.9, 0.95, 1.0])
INDEX = st.integers(0, 100)
SHA = "a" * 40
REF = st.sampled_from(["main"] * 5 + ["refs/merge-requests/7/head", ""])
OPT_SHA = st.sampled_from([SHA, SHA, SHA, None])
PIPELINE_ID = st.sampled_from([500, 500, 500, 0])
MR_SOURCE = st.sampled_from([None] * 6 + ["merge_request_event", "external_pull_request_event"])
SUPERSEDED_BY = st.sampled_from([None, None, None, 600])
BRANCH_HEAD = st.sampled_from([None, SHA, SHA, "b" * 40])
DEFINITION_ERROR = st.sampled_from([None, None, None, "job 'build' is not in the CI configuration"])
READS = st.frozensets(st.sampled_from(list(Read)))


@st.composite
def contexts(draw: Any) -> JobContext:
    """The gates' inputs, read or not: mostly nothing blocks, every gate applies now and then."""
    return JobContext(retried=draw(MOSTLY_FALSE), manual_job=draw(BOOL), job_retry_supported=draw(BOOL),
                      superseded_by=draw(SUPERSEDED_BY), branch_head=draw(BRANCH_HEAD),
                      definition_error=draw(DEFINITION_ERROR), read=draw(READS))


def _pick(draw: Any, seq: Any) -> Any:
    """One element of a sequence that is only known at draw time."""
    return seq[draw(INDEX) % len(seq)]


def _rule(draw: Any, partial: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not partial or draw(BOOL):
        out["action"] = draw(ACTION)
    if not partial or draw(BOOL):
        out["budget"] = draw(BUDGET)
    if draw(MOSTLY_FALSE):
        out["backoff"] = {"initial": draw(BACKOFF_INITIAL), "factor": draw(BACKOFF_FACTOR), "max": "1h"}
    if draw(MOSTLY_FALSE):
        out["min_probability"] = draw(MIN_PROBABILITY)
    return out


@st.composite
def policy_dicts(draw: Any, focus: bool = False) -> dict[str, Any]:
    """A valid policy document, covering every section.

    ``focus``: OOM and timeout failures are resized with a large budget, so
    most examples reach the resize, ladder and cap code.
    """
    d: dict[str, Any] = {
        "dry_run": draw(MOSTLY_FALSE),
        "skip_superseded": draw(BOOL),
        "skip_allow_failure": draw(MOSTLY_FALSE),
        "max_attempts": draw(MAX_ATTEMPTS),
        "max_job_age": draw(MAX_AGE),
        "variables": {
            "memory_limit": draw(LIMIT_VAR),
            "memory_request": "KUBERNETES_MEMORY_REQUEST",
            "memory_format": draw(FORMAT),
            "raise_request": draw(st.sampled_from([True, False, "scale"])),
        },
    }
    d["families"] = {draw(FAMILY): _rule(draw, partial=True) for _ in range(draw(SMALL_COUNT) * 2)}
    d["categories"] = {}
    for _ in range(draw(SMALL_COUNT)):
        t = _rule(draw, partial=True)
        if t:
            d["categories"][draw(CATEGORY)] = t
    n = draw(N_CLASSES)
    sizes = sorted(draw(CLASS_GIB) for _ in range(n))
    classes = []
    for i, gib in enumerate(sizes):
        rc: dict[str, Any] = {"name": CLASS_NAMES[i], "tags": ["rs", CLASS_NAMES[i]], "max_memory": f"{gib}Gi",
                              "max_cpus": draw(CPUS)}
        if draw(BOOL):
            rc["max_memory_request"] = f"{max(1, gib // 2)}Gi"
        if draw(BOOL):
            rc["default_memory"] = f"{max(1, gib // 4)}Gi"
        rc["expensive"] = draw(BOOL)
        rc["placement_only"] = draw(MOSTLY_FALSE)
        for cap in ("max_concurrent_per_user", "max_concurrent_per_project"):
            if draw(BOOL):
                rc[cap] = draw(CONCURRENCY)
        classes.append(rc)
    d["runner_classes"] = classes
    if classes:
        d["placement"] = [{"project": draw(PLACE_PROJECT), "job": draw(PLACE_JOB),
                           "runner_class": _pick(draw, CLASS_NAMES[: len(classes)])}
                          for _ in range(draw(SMALL_COUNT))]
    resize: dict[str, Any] = {
        "ratio": draw(RATIO), "min_bump": draw(MIN_BUMP), "granularity": draw(GRANULARITY),
        "beyond_top": draw(BEYOND), "last_attempt": draw(LAST), "unknown_limit": draw(UNKNOWN),
    }
    max_memory = draw(RESIZE_MAX)
    if classes and parse_memory(max_memory) < sizes[0] * GiB:
        max_memory = f"{sizes[-1]}Gi"  # below the first class is a validation error
    resize["max_memory"] = max_memory
    if draw(BOOL):
        resize["default_memory"] = "1Gi"
    if draw(BOOL):
        resize["cpu"] = {"ratio": 2.0, "min_bump": "500m", "max_cpus": "32", "default": "1"}
    if draw(BOOL):
        resize["time"] = {"ratio": 1.5, "min_bump": "10m", "max": "4h", "default": "1h"}
    d["resize"] = resize
    if d["families"].get("timeout", {}).get("action") == "resize" and "cpu" not in resize and "time" not in resize:
        resize["time"] = {"max": "3h"}
    if draw(MOSTLY_TRUE):
        src: dict[str, Any] = {"budget_factor": draw(FACTOR), "allow_expensive": draw(MOSTLY_FALSE)}
        if draw(BOOL):
            src["max_budget"] = draw(BUDGET)
        d["pipeline_sources"] = {"schedule": src}
    overrides = []
    for _ in range(draw(SMALL_COUNT)):
        ov: dict[str, Any] = {"project": draw(OV_PROJECT)}
        if draw(BOOL):
            ov["family"] = draw(FAMILY)
        if draw(BOOL):
            ov["max_memory"] = draw(MEMORY)
        if draw(MOSTLY_FALSE):
            ov["dry_run"] = draw(BOOL)
        ov.update(_rule(draw, partial=True))
        if set(ov) <= {"project", "family"}:
            ov["budget"] = draw(BUDGET)
        if ov.get("action") == "resize" and ov.get("family") == "timeout" and "cpu" not in resize \
                and "time" not in resize:
            ov["action"] = "retry"
        overrides.append(ov)
    d["overrides"] = overrides
    if focus:
        d["max_attempts"] = 12
        d["families"]["oom"] = {"action": "resize", "budget": draw(st.integers(3, 8))}
        d["families"]["timeout"] = {"action": "resize", "budget": 3}
        resize.setdefault("cpu", {"max_cpus": "24"})
        for ov in overrides:
            ov.pop("action", None)
            ov["budget"] = max(ov.get("budget", 3), 3)
    return d


policies = policy_dicts().map(lambda d: policy_from_dict(d, source="<hypothesis>"))
focused_policies = policy_dicts(focus=True).map(lambda d: policy_from_dict(d, source="<hypothesis>"))


@st.composite
def scenarios(draw: Any, focus: bool = False) -> dict[str, Any]:
    """Everything :func:`decide` takes, consistent enough to reach every branch.

    ``focus``: an OOM or timeout of the last job of its lineage, not superseded,
    under a focused policy (see :func:`policy_dicts`).
    """
    pol = draw(focused_policies if focus else policies)
    class_names = [rc.name for rc in pol.runner_classes] + [None, "bogus"]
    ids = list(range(1000, 1000 + draw(LINEAGE_LEN)))
    lineage = [
        LineageAttempt(
            job_id=job_id,
            action="origin" if i == 0 else draw(RERUN_ACTION),
            family=draw(LINEAGE_FAMILY),
            memory_limit_bytes=draw(LINEAGE_BYTES),
            memory_request_bytes=draw(LINEAGE_BYTES),
            memory_peak_bytes=draw(LINEAGE_BYTES),
            cpu_limit_cores=draw(OPT_CPU),
            runner_class=_pick(draw, class_names),
            timeout_seconds=draw(OPT_TIMEOUT),
        )
        for i, job_id in enumerate(ids)
    ]
    if focus and pol.runner_classes and lineage and draw(MOSTLY_TRUE):
        # Sizes that fit the ladder: the job ran on a class, with part of its memory.
        rc = _pick(draw, pol.runner_classes)
        last = lineage[-1]
        lineage[-1] = LineageAttempt(
            job_id=last.job_id, action=last.action, family=last.family,
            memory_limit_bytes=int(rc.max_memory * draw(FRACTION)), memory_peak_bytes=None,
            runner_class=rc.name if draw(BOOL) else None, timeout_seconds=last.timeout_seconds)
    # The failed job: usually the last of its lineage, sometimes absent or in the middle.
    where = "last" if focus else draw(WHERE)
    if where == "last" and ids:
        job_id = ids[-1]
    elif where == "middle" and len(ids) > 1:
        job_id = _pick(draw, ids[:-1])
    else:
        job_id = 2000
    tags: tuple[str, ...] = ()
    choice = draw(TAGS_CHOICE)
    if choice == "class" and pol.runner_classes:
        tags = _pick(draw, pol.runner_classes).tags
    elif choice == "other":
        tags = ("docker",)
    variables = {}
    if draw(BOOL):
        variables["KUBERNETES_MEMORY_LIMIT"] = draw(MEMORY)
    if draw(BOOL):
        variables["KUBERNETES_MEMORY_REQUEST"] = draw(MEMORY)
    if draw(BOOL):
        variables["KUBERNETES_CPU_LIMIT"] = draw(CPU_VAR)
    f = facts(job_id=job_id, name=draw(JOB), project_path=draw(PROJECT), pipeline_source=draw(SOURCE),
              user=draw(USER), tags=tags, variables=variables, allow_failure=False if focus else draw(MOSTLY_FALSE),
              finished_at=draw(FINISHED), ref="main" if focus else draw(REF), sha=draw(OPT_SHA),
              pipeline_id=draw(PIPELINE_ID))
    mr_source = None if focus else draw(MR_SOURCE)
    if mr_source is not None:
        f = replace(f, pipeline_source=mr_source)
    fam = draw(FOCUS_FAMILY) if focus else draw(FAMILY_WEIGHTED)
    v = replace(verdict(fam, _pick(draw, CATEGORIES + (fam,))), probability=draw(PROBABILITY))
    record = None
    if draw(BOOL):
        record = usage_record(job_id if draw(MOSTLY_TRUE) else 99, limit=draw(OPT_BYTES), peak=draw(OPT_BYTES),
                              request=draw(OPT_BYTES), cpu_limit=draw(OPT_REC_CPU))
    by_user = {(rc.name, u or ""): draw(COUNT) for rc in pol.runner_classes for u in USERS if draw(BOOL)}
    by_project = {(rc.name, p): draw(COUNT) for rc in pol.runner_classes for p in PROJECTS if draw(BOOL)}
    return {
        "facts": f, "classification": v, "lineage": lineage, "policy": pol,
        "class_usage": ClassUsage(by_user=by_user, by_project=by_project),
        "record": record, "predicted_memory_bytes": draw(OPT_BYTES),
        "context": JobContext() if focus and draw(MOSTLY_TRUE) else draw(contexts()),
        "now": None if focus else draw(NOW),
    }
