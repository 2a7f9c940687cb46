"""The HTML report: self-contained, well-formed, with the charts an admin needs."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from retry_bot.cli import main as cli_main
from retry_bot.report import COLORS, Point, ReportData, render_html
from retry_bot.state import open_store
from tests.bot_predict.conftest import make_records, signed_record, write_trace


class _Checker(HTMLParser):
    VOID = {"meta", "br", "img", "input", "link", "hr", "circle", "path", "line", "rect"}

    def __init__(self):
        super().__init__()
        self.stack: list[str] = []
        self.tags: list[str] = []
        self.external: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for k, v in attrs:
            if k in ("src", "href") and v and not v.startswith("#"):
                self.external.append(v)
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unbalanced </{tag}> (open: {self.stack[-3:]})")
        else:
            self.stack.pop()


def _check(text: str) -> _Checker:
    c = _Checker()
    c.feed(text)
    assert c.errors == [] and c.stack == []
    assert c.external == []                      # no external assets
    return c


def test_report_from_a_trace(tmp_path, capsys):
    path = write_trace(tmp_path / "t.jsonl", make_records(300, seed=21))
    out = tmp_path / "r.html"
    assert cli_main(["report", "--trace", str(path), "--out", str(out)]) == 0
    text = out.read_text()
    c = _check(text)
    assert c.tags.count("svg") >= 3
    assert "OOM kills" in text and "Failures by family" in text and "requested" in text


def test_report_from_the_state_store(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    with open_store(url) as s:
        s.add_usage_record(signed_record(1, oom=True, finished="2025-01-06T01:00:00Z"), "test")
        s.add_usage_record(signed_record(2, finished="2025-01-06T02:00:00Z"), "test")
    out = tmp_path / "r.html"
    assert cli_main(["report", "--state", url, "--out", str(out)]) == 0
    text = out.read_text()
    _check(text)
    assert "alpha" in text and "OOM kill at" in text


def test_render_escapes_names():
    data = ReportData(title="t", source="<s>", packages={"<evil>": [Point(t=0.0, request=1e9, used_mean=5e8,
                                                                         used_peak=8e8, limit=2e9)]},
                      families={"oom": 3, "build_error": 5})
    text = render_html(data)
    _check(text)
    assert "<evil>" not in text and "&lt;evil&gt;" in text


def _oom_lineage(store, origin: int, copy: int, copy_status: str) -> None:
    facts = {"job_id": origin, "name": "alpha@1.0 /abcdefg %gcc@12.3.0", "status": "failed",
             "variables": {"KUBERNETES_MEMORY_LIMIT": "128Mi"}}
    store.mark_job_seen(origin, 2, facts, {"category": "oom", "family": "oom", "rule": "record-oom-kill"})
    store.update_lineage_member(origin, memory_limit_bytes=128 * 1024 * 1024, status="failed")
    store.add_lineage_member(origin, copy, "resize", {"KUBERNETES_MEMORY_LIMIT": "384Mi",
                                                      "KUBERNETES_MEMORY_REQUEST": "384Mi"},
                             memory_limit_bytes=384 * 1024 * 1024, status="manual")
    store.update_lineage_member(copy, status=copy_status)


def test_store_report_counts_kills_and_recoveries_from_the_lineage(tmp_path):
    from retry_bot.report import collect_from_store

    url = f"sqlite:///{tmp_path / 's.db'}"
    with open_store(url) as s:
        # as after the demo: the killed job's record (from its trace), no record of the successful copy
        s.add_usage_record(signed_record(1000, oom=True), "trace")
        _oom_lineage(s, 1000, 1006, "success")
        _oom_lineage(s, 2000, 2001, "failed")          # killed, copy failed: no recovery
        s.mark_job_seen(3000, 2, {"job_id": 3000, "name": "compile"},
                        {"category": "compile_error", "family": "build_error", "rule": "r"})
        data = collect_from_store(s)
    assert data.summary["OOM kills"] == 2                       # job 1000 counted once (record + table)
    assert data.summary["recoveries (re-created job succeeded)"] == 1
    assert data.families == {"oom": 2, "build_error": 1}
    pts = data.packages["alpha"]
    assert [p.job_id for p in pts if p.recovered] == [1006]
    assert sorted(p.job_id for p in pts if p.kills) == [1000, 2000]
    out = tmp_path / "r.html"
    assert cli_main(["report", "--state", url, "--out", str(out)]) == 0
    text = out.read_text()
    _check(text)
    assert "recovered</title>" in text


def test_report_rejects_unknown_extensions(tmp_path, capsys):
    path = write_trace(tmp_path / "t.jsonl", make_records(20, seed=3))
    assert cli_main(["report", "--trace", str(path), "--out", str(tmp_path / "r.pdf")]) == 2
    err = capsys.readouterr().err
    assert "unsupported extension '.pdf'" in err and "report.html" in err
    assert not (tmp_path / "r.pdf").exists()


def test_png_without_chromium_is_a_clear_error(tmp_path, capsys):
    path = write_trace(tmp_path / "t.jsonl", make_records(20, seed=3))
    out = tmp_path / "r.png"
    assert cli_main(["report", "--trace", str(path), "--out", str(out),
                     "--chromium", str(tmp_path / "no-such-browser")]) == 2
    err = capsys.readouterr().err
    assert "PNG needs chromium" in err and "use --out report.html" in err
    assert not out.exists()


def test_png_is_rendered_by_headless_chromium(tmp_path):
    import pytest

    from retry_bot.report import find_chromium

    if find_chromium() is None:
        pytest.skip("no headless chromium on this machine (/usr/bin/chromium or $PATH)")
    path = write_trace(tmp_path / "t.jsonl", make_records(120, seed=3))
    out = tmp_path / "r.png"
    assert cli_main(["report", "--trace", str(path), "--out", str(out)]) == 0
    head = out.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"                      # a real PNG, not HTML
    width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    assert width == 1024 and height > 800


# ------------------------------------------------------------------ issue 13: colours, dates, names


def test_every_series_has_its_own_colour():
    from retry_bot.report import _legend

    legend = _legend()
    colours = re.findall(r"background:(#[0-9a-f]{6})", legend)
    assert len(colours) == 6 and len(set(colours)) == 6        # peak used (ring) is not red like an OOM kill
    assert COLORS["peak"] != COLORS["kill"]


def _svg_texts(svg: str) -> list[str]:
    return re.findall(r"<text[^>]*>([^<]*)</text>", svg)


def test_short_history_does_not_repeat_the_same_date():
    from retry_bot.report import _fleet_svg, _package_svg

    t0 = 1_736_125_200.0                                        # 2025-01-06 01:00 UTC
    one_hour = [Point(t=t0, request=1e9, used_mean=5e8, used_peak=None, limit=None),
                Point(t=t0 + 3600, request=1e9, used_mean=5e8, used_peak=None, limit=None)]
    texts = _svg_texts(_package_svg("alpha", one_hour))
    assert "2025-01-06 01:00" in texts and "2025-01-06 02:00" in texts
    assert texts.count("2025-01-06") == 0
    same = _svg_texts(_package_svg("alpha", one_hour[:1]))
    assert sum(t.startswith("2025-01-06") for t in same) == 1
    fleet = _svg_texts(_fleet_svg({"alpha": one_hour}))
    assert fleet.count("2025-01-06") == 1
    week = [Point(t=t0, request=1e9, used_mean=None, used_peak=None, limit=None),
            Point(t=t0 + 7 * 86400, request=1e9, used_mean=None, used_peak=None, limit=None)]
    assert {"2025-01-06", "2025-01-13"} <= set(_svg_texts(_package_svg("alpha", week)))


def test_store_view_of_plain_jobs_says_jobs_not_packages(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    with open_store(url) as s:
        facts = {"job_id": 10, "name": "build", "status": "failed",
                 "variables": {"KUBERNETES_MEMORY_LIMIT": "128Mi"}}
        s.mark_job_seen(10, 2, facts, {"category": "oom", "family": "oom", "rule": "record-oom-kill"})
        s.update_lineage_member(10, memory_limit_bytes=128 * 1024 * 1024, status="failed")
        s.add_lineage_member(10, 11, "resize", {"KUBERNETES_MEMORY_LIMIT": "384Mi"},
                             memory_limit_bytes=384 * 1024 * 1024, status="success")
    out = tmp_path / "r.html"
    assert cli_main(["report", "--state", url, "--out", str(out)]) == 0
    text = out.read_text()
    _check(text)
    assert "memory per job over time" in text and "per package" not in text
    # Spack jobs are still drawn per package.
    url2 = f"sqlite:///{tmp_path / 's2.db'}"
    with open_store(url2) as s:
        s.add_usage_record(signed_record(1, finished="2025-01-06T01:00:00Z"), "test")
    assert cli_main(["report", "--state", url2, "--out", str(out)]) == 0
    assert "memory per package over time" in out.read_text()
