"""The JSON report (`rtrace.report/1`): schema, determinism, problems and findings as data."""

from __future__ import annotations

from pathlib import Path

import orjson

from rtrace.core.trace import Header, Problem
from rtrace.engine.fold import Report, TraceReport, analyze_path
from rtrace.report import json_report
from rtrace.rules import RULES
from rtrace.rules.base import Config

from .conftest import REAL

RACE_188 = REAL / "tool-output-race.livekit-1.8.8.jsonl"
RACE_189 = REAL / "tool-output-race.livekit-1.8.9.jsonl"


def report_of(*paths: Path) -> Report:
    return Report([analyze_path(p) for p in paths], Config())


def test_schema_and_top_level() -> None:
    data = orjson.loads(json_report.render(report_of(RACE_188, RACE_189)))
    assert data["schema"] == "rtrace.report/1" == json_report.SCHEMA
    assert data["config"] == {"ack_timeout": 5.0, "burst_window": 0.01, "reply_timeout": 10.0}
    assert data["rules"] == [r.id for r in RULES]
    assert [t["path"] for t in data["traces"]] == [str(RACE_188), str(RACE_189)]


def test_trace_entry() -> None:
    trace = orjson.loads(json_report.render(report_of(RACE_188)))["traces"][0]
    assert {k: trace[k] for k in ("events", "connections", "duration", "header", "unreadable", "problem_count")} == {
        "events": 76,
        "connections": 1,
        "duration": 1.5459,
        "header": None,
        "unreadable": None,
        "problem_count": 0,
    }
    assert trace["problems"] == []
    assert trace["summary"] == {"error": 2, "warning": 2, "info": 0}
    finding = next(f for f in trace["findings"] if f["slug"] == "deleted-function-call-output")
    assert finding["rule"] == "RT101" and finding["severity"] == "error" and finding["conn"] == 1
    assert finding["lines"] == [15, 42, 43, 45, 46, 47]
    assert [w["line"] for w in finding["witness"]] == finding["lines"]
    assert {"line", "t", "dir", "conn", "type", "summary"} <= finding["witness"][0].keys()


def test_deterministic_and_sorted() -> None:
    a = json_report.render(report_of(RACE_188, RACE_189))
    b = json_report.render(report_of(RACE_188, RACE_189))
    assert a == b and a.endswith(b"\n")
    data = orjson.loads(a)
    assert a == orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def test_problems_header_and_unreadable_as_data() -> None:
    problems = [Problem("t.jsonl", 3, 9, "malformed JSON: x; skipped", excerpt="\\x1b")]
    trace = TraceReport("t.jsonl", 2, 1, 0.1234567891, [], problems, 7, Header(1, {"client": "lk", "x": [1]}))
    gone = TraceReport("gone.jsonl", 0, 0, 0.0, [], [], 0, unreadable="no such file")
    data = orjson.loads(json_report.render(Report([trace, gone], Config())))
    first, second = data["traces"]
    assert first["problems"] == [{"line": 3, "col": 9, "message": "malformed JSON: x; skipped", "severity": "warning"}]
    assert first["failed_rules"] == []
    assert first["problem_count"] == 7 and first["header"] == {"client": "lk", "x": [1]}
    assert first["duration"] == 0.123457 and first["summary"] == {"error": 0, "warning": 0, "info": 0}
    assert second["unreadable"] == "no such file" and second["findings"] == []


def test_untrusted_text_stays_valid_json(tmp_path: Path) -> None:
    data = RACE_188.read_bytes().replace(b"item_2cd9ef851886", b'item_\\u001b[31m\\"}{')
    path = tmp_path / "evil.jsonl"
    path.write_bytes(data)
    out = orjson.loads(json_report.render(report_of(path)))
    finding = next(f for f in out["traces"][0]["findings"] if f["slug"] == "deleted-function-call-output")
    assert 'item_\x1b[31m"}{' in finding["ids"]["items"]


def test_what_rules_could_not_judge_is_data() -> None:
    from rtrace.engine.fold import NotJudged

    trace = analyze_path(RACE_189)
    trace.not_judged = [NotJudged(("RT105", "RT106"), "reconnect-replay", "the log omits the replay")]
    data = orjson.loads(json_report.render(Report([trace], Config())))["traces"][0]
    note = {"rules": ["RT105", "RT106"], "what": "reconnect-replay", "why": "the log omits the replay"}
    assert data["not_judged"] == [note]
    assert orjson.loads(json_report.render(report_of(RACE_189)))["traces"][0]["not_judged"] == []
