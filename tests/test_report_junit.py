"""JUnit XML: well-formed, a testsuite per trace, a testcase per rule, a failure per finding."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from rtrace.engine.fold import Report, TraceReport, analyze_path
from rtrace.report import junit
from rtrace.rules import RULES, select_rules
from rtrace.rules.base import Config

from .conftest import REAL
from .hostile_trace import SECRET, write_hostile_trace

REAL_TRACES = sorted(REAL.glob("*.jsonl"))


def parse(data: bytes) -> ET.Element:
    assert data.startswith(b"<?xml version='1.0' encoding='utf-8'?>")
    return ET.fromstring(data)


def test_suites_cases_and_failures_match_the_findings() -> None:
    traces = [analyze_path(p) for p in REAL_TRACES]
    root = parse(junit.render(Report(traces, Config())))
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [str(p) for p in REAL_TRACES]
    for suite, trace in zip(suites, traces, strict=True):
        cases = suite.findall("testcase")
        assert [c.get("name") for c in cases] == [f"{r.id} {r.slug}" for r in RULES]
        assert suite.get("tests") == str(len(RULES))
        assert suite.get("failures") == str(len(trace.findings))
        for case, rule in zip(cases, RULES, strict=True):
            failures = case.findall("failure")
            mine = [f for f in trace.findings if f.rule == rule.id]
            assert [f.get("message") for f in failures] == [f.message for f in mine]
            for failure, finding in zip(failures, mine, strict=True):
                assert failure.get("type") == f"{finding.rule} {finding.severity}"
                assert finding.fix in (failure.text or "")
    assert root.get("tests") == str(len(RULES) * len(traces))
    assert root.get("failures") == str(sum(len(t.findings) for t in traces))
    race = suites[REAL_TRACES.index(REAL / "tool-output-race.livekit-1.8.8.jsonl")]
    assert len(race.findall("testcase[@name='RT101 deleted-function-call-output']/failure")) == 1
    clean = suites[REAL_TRACES.index(REAL / "tool-output-race.livekit-1.8.9.jsonl")]
    assert clean.findall(".//failure[@type='RT101 error']") == []


def test_selected_rules_only() -> None:
    rules = select_rules(["RT101", "RT102"])
    root = parse(junit.render(Report([analyze_path(REAL_TRACES[0])], Config(), rules)))
    assert [c.get("name") for c in root.iter("testcase")] == [
        "RT101 deleted-function-call-output",
        "RT102 stale-snapshot-delete",
    ]


def test_hostile_text_stays_well_formed(tmp_path: Path) -> None:
    trace = analyze_path(write_hostile_trace(tmp_path / "evil.jsonl"))
    data = junit.render(Report([trace], Config()))
    root = parse(data)
    assert SECRET.encode() not in data
    texts = " ".join(f.text or "" for f in root.iter("failure"))
    assert "</script>" in texts  # as text, escaped in the file
    assert b"</script>" not in data
    assert "\\x1b" in texts and "\x1b" not in texts


def test_unreadable_trace_is_an_error_case(tmp_path: Path) -> None:
    missing = TraceReport(str(tmp_path / "gone.jsonl"), 0, 0, 0.0, [], [], 0, unreadable="gone.jsonl: missing")
    root = parse(junit.render(Report([missing], Config())))
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("errors"), suite.get("failures")) == ("1", "1", "0")
    error = suite.find("testcase/error")
    assert error is not None and error.get("message") == "gone.jsonl: missing"
    assert root.get("errors") == "1"
