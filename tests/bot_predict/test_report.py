"""The HTML report: self-contained, well-formed, with the charts an admin needs."""

from __future__ import annotations

from html.parser import HTMLParser

from retry_bot.cli import main as cli_main
from retry_bot.report import Point, ReportData, render_html
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
