"""Markdown for tickets, rendered with a CommonMark renderer (markdown-it-py, GitHub's table
extension on): one ``<details>`` whose summary is the counts and failing ids, the problems first
with their remedies, skips omitted, facts folded, under 60,000 characters with a note of any cut."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

from markdown_it import MarkdownIt

from envdoctor.model import Facts, Finding, Reading, Remediation, Status
from envdoctor.output.render import MARKDOWN_LIMIT, render_markdown
from envdoctor.report import Report
from tests.faults import run_cli

CORPUS = Path(__file__).resolve().parent / "corpus"


class Tree(HTMLParser):
    """Top-level elements, every table row's cells, and code blocks with their language."""

    def __init__(self) -> None:
        super().__init__()
        self.depth, self.top, self.rows, self.codes, self.summaries = 0, [], [], [], []
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self._code: tuple[str, list[str]] | None = None
        self._summary: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if self.depth == 0:
            self.top.append(tag)
        self.depth += 1
        if tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "code" and dict(attrs).get("class"):
            self._code = (dict(attrs)["class"], [])
        elif tag == "summary":
            self._summary = []

    def handle_endtag(self, tag):
        self.depth -= 1
        if tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None
        elif tag == "code" and self._code:
            self.codes.append((self._code[0], "".join(self._code[1])))
            self._code = None
        elif tag == "summary" and self._summary is not None:
            self.summaries.append("".join(self._summary))
            self._summary = None

    def handle_data(self, data):
        for part in (self._cell, self._code[1] if self._code else None, self._summary):
            if part is not None:
                part.append(data)


def html_of(markdown: str) -> tuple[str, Tree]:
    html = MarkdownIt("commonmark").enable("table").render(markdown)
    tree = Tree()
    tree.feed(html)
    return html, tree


def _markdown(path: Path) -> str:
    out = run_cli(["diagnose", str(path), "--markdown"], timeout=60)
    assert out.rc == 3, out.text
    return out.stdout.decode()


def test_the_whole_report_is_one_details_block_summarised_by_counts_and_failing_ids(mixed):
    html, tree = html_of(_markdown(mixed))
    assert tree.top == ["details"], tree.top  # everything inside the one block
    assert re.fullmatch(r"envdoctor: 1 fail \(torch-arch-support\) · 1 error \(library-conflicts\) · 1 warn "
                        r"\(host-shm-size\) · \d+ ok · \d+ skip \(\d+ could not be judged\)", tree.summaries[0])


def test_problems_come_first_with_their_remedies_and_skips_are_omitted(mixed):
    markdown = _markdown(mixed)
    _, tree = html_of(markdown)
    body = [r for r in tree.rows if r[0] != "status"]
    assert [r[0] for r in body[:3]] == ["✖ fail", "⁉ error", "▲ warn"]
    assert {r[0] for r in body[3:]} == {"✔ ok"} and not any("skip" in r[0] for r in body)
    command = "pip install --force-reinstall torch==2.7.1 --index-url https://download.pytorch.org/whl/cu128"
    assert ("language-sh", command + "\n") in tree.codes
    assert markdown.count(command) == 1
    assert markdown.index("torch-arch-support` —") < markdown.index("library-conflicts` —") < markdown.index(
        "host-shm-size` —") < markdown.index("passing check(s)")
    assert re.search(r"\d+ check\(s\) that do not apply here are omitted", markdown)


def test_the_facts_are_folded_json(mixed):
    _, tree = html_of(_markdown(mixed))
    assert any(s.startswith("Facts") for s in tree.summaries)
    facts = json.loads(next(code for lang, code in tree.codes if lang == "language-json"))
    assert facts["torch.version"]["value"] == "2.6.0+cu126"


def test_a_huge_report_is_cut_under_60000_characters_with_a_note(mixed, tmp_path):
    data = json.loads(mixed.read_text())
    data["facts"]["python.packages"] = {"value": {f"package-{i}": "1.0" for i in range(20_000)}}
    big = tmp_path / "big.json"
    big.write_text(json.dumps(data))
    markdown = _markdown(big)
    assert len(markdown) < MARKDOWN_LIMIT
    html, tree = html_of(markdown)
    assert tree.top == ["details"] and "language-json" not in html
    assert re.search(r"Cut to stay under 60,000 characters:</strong> the \d+ facts", html)
    assert "pip install --force-reinstall torch==2.7.1" in html  # the problems are kept


def test_thousands_of_problems_keep_the_rows_and_name_the_blocks_that_were_cut():
    findings = tuple(Finding(f"check-{i}", Status.FAIL, f"broken thing {i}", detail="x" * 500,
                             remediation=Remediation("fix it", (f"fix --thing {i}",))) for i in range(300))
    report = Report(facts=Facts({"torch.version": Reading("2.6.0")}), findings=findings)
    markdown = render_markdown(report)
    assert len(markdown) < MARKDOWN_LIMIT
    _, tree = html_of(markdown)
    assert tree.top == ["details"] and len([r for r in tree.rows if r[0] == "✖ fail"]) == 300
    assert re.search(r"the details of \d+ problem\(s\) \(check-\d+, ", markdown)


def test_ten_thousand_problems_still_fit():
    findings = tuple(Finding(f"check-{i}", Status.WARN, f"odd thing {i}") for i in range(10_000))
    markdown = render_markdown(Report(facts=Facts({}), findings=findings))
    assert len(markdown) < MARKDOWN_LIMIT and "the rows of " in markdown
    _, tree = html_of(markdown)
    assert tree.top == ["details"] and tree.summaries[0].endswith("+9990 more) · 0 ok · 0 skip")


def test_a_command_two_problems_share_is_in_one_fence_and_pointed_to_after():
    """As on the screen: each command once per report."""
    dmesg = "sudo dmesg | grep -iE 'nvrm|nvidia'"
    findings = (Finding("a-check", Status.FAIL, "The driver is not loaded",
                        remediation=Remediation("Load it.", ("sudo modprobe nvidia", dmesg))),
                Finding("b-check", Status.WARN, "A GPU fell off the bus",
                        remediation=Remediation("Read the kernel log.", (dmesg,))),
                Finding("c-check", Status.WARN, "Either way",
                        remediation=Remediation("", (), alternatives=(Remediation("Look.", (dmesg,)),))))
    text = render_markdown(Report(facts=Facts({}), findings=findings))
    assert text.count(dmesg) == 1, text
    assert "**What to do:** Read the kernel log. (command above)" in text, text
    assert "*Either* Look. (the command above)" in text, text
