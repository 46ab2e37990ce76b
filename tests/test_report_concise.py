"""The concise format: one `path:line:col: RT... [severity] message` line per finding, then input problems."""

from __future__ import annotations

import re
from pathlib import Path

from rtrace.core.trace import Problem
from rtrace.engine.fold import Report, TraceReport, analyze_path
from rtrace.report import concise
from rtrace.rules.base import Config

from .conftest import REAL

LINE = re.compile(
    r"^(?P<path>.+):(?P<line>\d+):(?P<col>\d+): (?P<code>RT\d{3}|input) \[(?P<sev>error|warning|info)\] .+$"
)


def test_one_line_per_finding_at_the_line_its_message_is_about() -> None:
    trace = analyze_path(REAL / "tool-output-race.livekit-1.8.8.jsonl")
    lines = concise.render(Report([trace], Config())).splitlines()
    assert len(lines) == len(trace.findings) > 0
    for line, finding in zip(lines, trace.findings, strict=True):
        m = LINE.match(line)
        assert m is not None, line
        assert (m["code"], m["sev"], int(m["line"])) == (finding.rule, finding.severity, finding.subject_line)
    # RT101 became certain at the server's ack (line 47); its message is about the delete, and so is its place.
    (rt101,) = [line for line in lines if " RT101 [error] " in line]
    assert rt101.startswith(f"{REAL / 'tool-output-race.livekit-1.8.8.jsonl'}:45:1: ") and "deleted at line 45" in rt101


def test_problems_unreadable_traces_and_hostile_text(tmp_path: Path) -> None:
    hostile = "a\x1b[31mred\nnext sk-proj-ABCDEFGHIJKLMNOP1234"
    trace = TraceReport(
        path=str(tmp_path / "t\x1b]0;x\x07.jsonl"),
        events=1,
        connections=1,
        duration=0.0,
        findings=[],
        problems=[Problem("t.jsonl", 3, 7, hostile)],
        problem_count=2,
    )
    gone = TraceReport(path="gone.jsonl", events=0, connections=0, duration=0.0, findings=[], problems=[],
                       problem_count=0, unreadable="no such file")  # fmt: skip
    text = concise.render(Report([trace, gone], Config()))
    lines = text.splitlines()
    assert ":3:7: input [warning] " in lines[0]
    assert "1 more input problems" in lines[1]
    assert lines[2] == "gone.jsonl: unreadable: no such file"
    assert "\x1b" not in text and "\x07" not in text and "ABCDEFGHIJKLMNOP1234" not in text
    assert len(lines) == 3  # the newline in the message did not make a line of its own


def test_statistics_one_line_per_rule_most_found_first_then_the_total() -> None:
    traces = [analyze_path(REAL / f"tool-output-race.livekit-{v}.jsonl") for v in ("1.8.8", "1.8.9")]
    text = concise.statistics(Report(traces, Config()))
    rows = [line.split() for line in text.splitlines()]
    assert rows[0] == ["3", "RT103", "unanswered-function-call", "warning"]
    assert rows[-1] == ["5", "findings", "in", "2", "of", "2", "traces"]
    assert concise.statistics(Report([], Config())) == "no findings\n"


def test_what_could_not_be_judged_is_a_line_of_its_own() -> None:
    from rtrace.engine.fold import NotJudged

    trace = TraceReport("t.jsonl", 2, 1, 0.0, [], [], 0, not_judged=[NotJudged(("RT110",), "timestamps", "no times")])
    assert concise.render(Report([trace], Config())) == "t.jsonl: not judged by RT110: no times\n"
