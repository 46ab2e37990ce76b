"""The JSON report, schema `rtrace.report/1`.

Stable and deterministic: keys sorted, findings in trace order, no wall-clock time, so two runs diff cleanly.

    {"schema": "rtrace.report/1",
     "config": {"ack_timeout": 5.0, "burst_window": 0.01, "reply_timeout": 10.0},
     "rules": ["RT101", ...],
     "traces": [{"path", "events", "connections", "duration", "header", "problem_count",
                 "problems": [{"line", "col", "message", "severity"}], "failed_rules": [rule id, ...],
                 "summary": {"error": n, "warning": n, "info": n},
                 "accepted": n (only when a baseline accepted findings),
                 "findings": [{"rule", "slug", "severity", "conn", "message", "explanation",
                               "lines", "at_line", "ids": {"items", "call_ids", "responses", "event_ids"},
                               "witness": [{"line", "t", "dir", "conn", "type", "summary"}], "fix"}]}]}
"""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson

from ..core.escape import json_visible
from ..engine.fold import Report, TraceReport
from ..rules.base import as_json

SCHEMA = "rtrace.report/1"


def trace_json(trace: TraceReport) -> dict[str, Any]:
    counts = trace.counts()
    return {
        "path": trace.path,
        "events": trace.events,
        "connections": trace.connections,
        "duration": round(trace.duration, 6),
        "header": trace.header.fields if trace.header else None,
        "unreadable": trace.unreadable,
        "problem_count": trace.problem_count,
        "problems": [
            {"line": p.line, "col": p.col, "message": p.message, "severity": p.severity} for p in trace.problems
        ],
        "failed_rules": list(trace.failed_rules),
        "not_judged": [{"rules": list(n.rules), "what": n.what, "why": n.why} for n in trace.not_judged],
        "summary": {sev: counts.get(sev, 0) for sev in ("error", "warning", "info")},
        "findings": [as_json(f) for f in trace.findings],
        **({"accepted": trace.accepted} if trace.accepted else {}),
    }


def report_json(report: Report) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "config": dataclasses.asdict(report.config),
        "rules": [r.id for r in report.rules],
        "traces": [trace_json(t) for t in report.traces],
    }


def render(report: Report) -> bytes:
    return json_visible(orjson.dumps(report_json(report), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)) + b"\n"
