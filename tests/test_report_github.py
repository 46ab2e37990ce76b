"""GitHub workflow annotations: one command per finding, escaped so trace text cannot start a command."""

from __future__ import annotations

from rtrace.core.trace import Problem
from rtrace.engine.fold import Report, TraceReport, analyze_path
from rtrace.report import github
from rtrace.rules.base import Config

from .conftest import REAL


def test_a_command_per_finding_with_its_severity_line_and_rule() -> None:
    trace = analyze_path(REAL / "tool-output-race.livekit-1.8.8.jsonl")
    lines = github.render(Report([trace], Config())).splitlines()
    assert len(lines) == len(trace.findings)
    for line, finding in zip(lines, trace.findings, strict=True):
        command = {"error": "::error ", "warning": "::warning ", "info": "::notice "}[finding.severity]
        assert line.startswith(command)
        assert f",line={finding.subject_line}," in line and f"title={finding.rule} {finding.slug}::" in line


def test_escaping_keeps_one_command_per_line() -> None:
    assert github.escape_data("50%\r\nx") == "50%25%0D%0Ax"
    assert github.escape_property("a:b,c") == "a%3Ab%2Cc"
    trace = TraceReport(
        path="dir,with:colons.jsonl", events=1, connections=1, duration=0.0, findings=[],
        problems=[Problem("p", 2, 1, "bad\n::error::injected")], problem_count=1,
    )  # fmt: skip
    [line] = github.render(Report([trace], Config())).splitlines()
    assert line.startswith("::warning file=dir%2Cwith%3Acolons.jsonl,line=2,col=1,title=rtrace input::")
    assert "\n" not in line and "\r" not in line  # one command; `::` inside a message starts nothing
