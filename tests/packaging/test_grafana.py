"""The Grafana dashboard is real Grafana JSON, and every metric and label its
PromQL uses exists: the bot's metrics are read from the registry that
``retry_bot.live.metrics.BotMetrics`` builds (and ``retry_bot.server.make_metrics``
for ``retry-bot serve``), the runner hosts' from the textfile
``runner_wrapper.sinks.write_textfile`` really writes.  Nothing is listed by hand."""

from __future__ import annotations

import json
import re
from typing import Any, Iterator

import pytest

from ._paths import PACKAGING

DASHBOARD = PACKAGING / "grafana" / "retry-bot-dashboard.json"

#: PromQL words that are not metric names.
PROMQL_KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or",
    "unless", "inf", "nan", "atan2",
}
#: Labels Prometheus attaches to every scraped series, and histograms' bucket label.
TARGET_LABELS = {"instance", "job", "le", "namespace", "pod", "service", "container", "endpoint"}


def _samples_of(family_name: str, family_type: str) -> set[str]:
    suffixes = {
        "counter": ["_total", "_created"],
        "gauge": [""],
        "histogram": ["_bucket", "_sum", "_count", "_created"],
        "gaugehistogram": ["_bucket", "_gsum", "_gcount"],
        "summary": ["", "_sum", "_count", "_created"],
        "info": ["_info"],
        "stateset": [""],
        "unknown": [""],
    }[family_type]
    return {family_name + s for s in suffixes}


def _registry_samples(registry: Any, owner: Any) -> dict[str, set[str]]:
    """Sample name -> label names of every metric on ``registry`` (labels from ``owner``'s attributes)."""
    from prometheus_client.metrics import MetricWrapperBase

    labels_by_family: dict[str, set[str]] = {}
    for value in vars(owner).values():
        if isinstance(value, MetricWrapperBase):
            labels_by_family[value._name] = set(value._labelnames)  # noqa: SLF001 - no public accessor
    out: dict[str, set[str]] = {}
    for family in registry.collect():
        for sample in _samples_of(family.name, family.type):
            out[sample] = labels_by_family.get(family.name, set()) | ({"le"} if sample.endswith("_bucket") else set())
    return out


@pytest.fixture(scope="module")
def bot_metrics() -> dict[str, set[str]]:
    """Sample name -> label names, from the bot's own registry (retry_bot.live.metrics.BotMetrics)."""
    from retry_bot.live.metrics import BotMetrics

    metrics = BotMetrics()
    out = _registry_samples(metrics.registry, metrics)
    assert out, "BotMetrics registered no metric"
    return out


@pytest.fixture(scope="module")
def serve_metrics() -> dict[str, set[str]]:
    """Sample name -> label names of ``retry-bot serve`` (retry_bot.server.make_metrics)."""
    from prometheus_client import CollectorRegistry

    from retry_bot.server import make_metrics

    registry = CollectorRegistry()
    out = _registry_samples(registry, make_metrics(registry))
    assert out
    return out


@pytest.fixture(scope="module")
def wrapper_metrics(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """Sample name -> label names, from a textfile the runner wrapper writes for a full record."""
    from prometheus_client.parser import text_string_to_metric_families

    from runner_wrapper.sinks import write_textfile

    record = {
        "job": {"id": 1, "name": "build", "project_path": "g/p"},
        "usage": {"memory_peak_bytes": 3, "memory_mean_bytes": 2, "cpu_user_seconds": 1.0,
                  "cpu_system_seconds": 0.5, "cpu_max_cores": 1.5, "wall_seconds": 9.0, "oom_kills": 0},
        "limits": {"memory_limit_bytes": 4, "memory_request_bytes": 4, "cpu_limit_cores": 2.0},
        "exit_code": 0,
    }
    path = tmp_path_factory.mktemp("textfile") / "rightsizer.prom"
    write_textfile(str(path), record)
    out: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(path.read_text(encoding="utf-8")):
        for sample in family.samples:
            out.setdefault(sample.name, set()).update(sample.labels)
    assert out
    return out


def _dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for p in panels:
        yield p
        yield from _panels(p.get("panels") or [])


def _queries(dash: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for p in _panels(dash["panels"]):
        for t in p.get("targets") or []:
            if t.get("expr"):
                yield p["title"], t["expr"]
    for v in dash.get("templating", {}).get("list", []):
        q = v.get("query")
        if v.get("type") == "query":
            yield f"variable {v['name']}", q["query"] if isinstance(q, dict) else q


def strip_promql(expr: str) -> str:
    """Remove strings, Grafana variables, ranges and label matchers, keeping names and groupings."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)
    expr = re.sub(r"\$__\w+|\$\{\w+[^}]*\}|\$\w+", "1", expr)
    expr = re.sub(r"\[[^\]]*\]", "", expr)
    expr = re.sub(r"\{[^}]*\}", "", expr)
    return expr


def metric_names(expr: str) -> set[str]:
    e = strip_promql(expr)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\blabel_values\s*\(\s*([a-zA-Z_:][\w:]*)\s*,\s*\w+\s*\)", r" \1 ", e)
    names = set()
    for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][\w:]*)\s*(\()?", e):
        name, call = m.group(1), m.group(2)
        if call or name.lower() in PROMQL_KEYWORDS or re.fullmatch(r"\d+e\d+", name):
            continue
        names.add(name)
    return names


def grouping_labels(expr: str) -> set[str]:
    e = strip_promql(expr)
    out: set[str] = set()
    for m in re.finditer(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", e):
        out.update(x.strip() for x in m.group(1).split(",") if x.strip())
    for m in re.finditer(r"\blabel_values\s*\(\s*[\w:]+\s*,\s*(\w+)\s*\)", e):
        out.add(m.group(1))
    return out


def matcher_labels(expr: str) -> set[str]:
    out: set[str] = set()
    for block in re.findall(r"\{([^}]*)\}", re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)):
        out.update(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", block))
    return out


# --------------------------------------------------------------------------- tests


def test_extractor_finds_names_and_skips_functions() -> None:
    """Control for the PromQL scanner the other tests rely on."""
    expr = ('histogram_quantile(0.9, sum by (le) (rate(foo_seconds_bucket{instance=~"$instance",a="b c"}'
            '[$__rate_interval]))) / clamp_min(sum(bar_total offset 5m), 1e-9) and on(job) baz')
    assert metric_names(expr) == {"foo_seconds_bucket", "bar_total", "baz"}
    assert grouping_labels(expr) == {"le", "job"}
    assert matcher_labels(expr) == {"instance", "a"}
    assert metric_names("label_values(retry_bot_is_leader, instance)") == {"retry_bot_is_leader"}


def test_dashboard_is_grafana_dashboard_json() -> None:
    dash = _dashboard()
    for key in ("title", "uid", "panels", "schemaVersion", "templating", "time"):
        assert key in dash, key
    assert isinstance(dash["schemaVersion"], int) and dash["schemaVersion"] >= 30
    ids = [p["id"] for p in _panels(dash["panels"])]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    variables = {v["name"] for v in dash["templating"]["list"]}
    for p in _panels(dash["panels"]):
        assert {"type", "title", "gridPos"} <= set(p), p.get("title")
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24, p["title"]
        if p["type"] == "row":
            continue
        assert p.get("targets"), f"panel {p['title']!r} has no query"
        for t in p["targets"]:
            assert t.get("refId")
            for used in re.findall(r"\$(?!__)(\w+)|\$\{(\w+)", t["expr"]):
                name = used[0] or used[1]
                assert name in variables, f"panel {p['title']!r} uses undefined variable ${name}"


def test_every_metric_in_the_dashboard_exists(bot_metrics: dict[str, set[str]],
                                              serve_metrics: dict[str, set[str]],
                                              wrapper_metrics: dict[str, set[str]]) -> None:
    known = {**wrapper_metrics, **serve_metrics, **bot_metrics}
    unknown = []
    for where, expr in _queries(_dashboard()):
        names = metric_names(expr)
        assert names, f"{where}: no metric found in {expr!r}"
        for name in names - set(known):
            unknown.append(f"{where}: {name}")
    assert not unknown, "metrics not exported by retry_bot.live.metrics / retry_bot.server / runner_wrapper.sinks:\n" + "\n".join(unknown)


def test_every_label_in_the_dashboard_exists(bot_metrics: dict[str, set[str]],
                                             serve_metrics: dict[str, set[str]],
                                             wrapper_metrics: dict[str, set[str]]) -> None:
    known = {**wrapper_metrics, **serve_metrics, **bot_metrics}
    problems = []
    for where, expr in _queries(_dashboard()):
        labels = set().union(*(known.get(n, set()) for n in metric_names(expr))) | TARGET_LABELS
        for label in (grouping_labels(expr) | matcher_labels(expr)) - labels:
            problems.append(f"{where}: label {label!r} is not a label of {sorted(metric_names(expr))}")
    assert not problems, "\n".join(problems)


def test_dashboard_covers_what_the_admin_guide_promises(bot_metrics: dict[str, set[str]],
                                                       serve_metrics: dict[str, set[str]]) -> None:
    """Failures by family and category, retries and re-creations, OOM recoveries,
    requested vs used memory, API calls and errors, poll duration."""
    used = set().union(*(metric_names(e) for _, e in _queries(_dashboard())))
    by_family = [e for _, e in _queries(_dashboard()) if "retry_bot_jobs_classified_total" in e]
    assert any("family" in grouping_labels(e) for e in by_family)
    assert any("category" in grouping_labels(e) for e in by_family)
    for needed in ("retry_bot_actions_total", "retry_bot_decisions_total", "retry_bot_oom_recoveries_total",
                   "retry_bot_gitlab_api_calls_total", "retry_bot_gitlab_api_errors_total",
                   "retry_bot_poll_duration_seconds_bucket", "rightsizer_last_job_memory_limit_bytes",
                   "rightsizer_last_job_memory_peak_bytes"):
        assert needed in used, needed
    # Every metric family the bot exports is on the dashboard.
    shown = {re.sub(r"_(total|created|bucket|sum|count)$", "", n) for n in used}
    for exported in (bot_metrics, serve_metrics):
        families = {re.sub(r"_(total|created|bucket|sum|count)$", "", n) for n in exported}
        assert families <= shown, f"metrics missing from the dashboard: {sorted(families - shown)}"
