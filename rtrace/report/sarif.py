"""The SARIF 2.1.0 report, for code-scanning UIs in CI.

One run; `ruleId` is the rule's RT id and the rule metadata comes from the detector classes; each trace is an
artifact and each finding's region starts at the line where it became certain. `partialFingerprints` hash what
the finding is about (rule, connection, ids), not where it sits, so repeated runs of the same scenario
deduplicate. Deterministic output: no clock, no absolute paths for relative inputs.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import orjson

from .. import __version__
from ..core.escape import json_visible
from ..engine.fold import Report, TraceReport
from ..rules.base import Finding, Rule
from .excerpt import scrub_text

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
LEVEL = {"error": "error", "warning": "warning", "info": "note"}
FINGERPRINT = "rtraceFinding/v1"


def artifact_uri(path: str) -> str:
    """A relative path stays relative (forward slashes); an absolute one becomes a file URI."""
    if path in ("-", "<stdin>"):
        return "stdin"
    p = Path(path)
    if p.is_absolute():
        return p.as_uri()
    return Path(os.path.normpath(path)).as_posix()


def rule_json(rule: type[Rule]) -> dict[str, Any]:
    doc = rule.doc()
    first = doc.split("\n\n", 1)[0].replace("\n", " ") if doc else rule.title
    return {
        "id": rule.id,
        "name": rule.slug,
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": first},
        "help": {"text": f"{doc}\n\nFix: {rule.fix}" if doc else rule.fix, "markdown": doc or rule.fix},
        "defaultConfiguration": {"level": LEVEL[rule.severity]},
        "properties": {"tags": ["realtime", "race" if rule.severity == "error" else "protocol"]},
    }


def fingerprint(finding: Finding, trace_name: str, occurrence: int) -> str:
    """What the finding is about: rule, trace file name, connection, ids; never its line numbers."""
    ids = sorted(f"{k}={v}" for k, vals in finding.ids.items() for v in vals)
    key = "\x1f".join([finding.rule, trace_name, str(finding.conn), *ids, str(occurrence)])
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


def trace_fingerprints(trace: TraceReport) -> list[tuple[Finding, str]]:
    """Each finding of `trace` with its fingerprint; equal findings (same rule, connection and ids) are told apart
    by their order of occurrence."""
    name = os.path.basename(trace.path)
    seen: dict[str, int] = {}
    out = []
    for finding in trace.findings:
        base = fingerprint(finding, name, 0)
        occurrence = seen.get(base, 0)
        seen[base] = occurrence + 1
        out.append((finding, fingerprint(finding, name, occurrence) if occurrence else base))
    return out


def result_json(finding: Finding, rule_index: int, artifact_index: int, uri: str, print_key: str) -> dict[str, Any]:
    def location(line: int, text: str | None = None, ident: int | None = None) -> dict[str, Any]:
        loc: dict[str, Any] = {
            "physicalLocation": {
                "artifactLocation": {"uri": uri, "index": artifact_index},
                "region": {"startLine": max(1, line)},
            }
        }
        if ident is not None:
            loc["id"] = ident
        if text is not None:
            loc["message"] = {"text": scrub_text(text)}
        return loc

    start = finding.subject_line
    return {
        "ruleId": finding.rule,
        "ruleIndex": rule_index,
        "level": LEVEL[finding.severity],
        "message": {"text": scrub_text(f"{finding.message}. {finding.explanation}")},
        "locations": [location(start)],
        "relatedLocations": [
            location(w.line, f"{w.dir} {w.type}: {w.summary}", k) for k, w in enumerate(finding.witness)
        ],
        "partialFingerprints": {FINGERPRINT: print_key},
        "properties": {"connection": finding.conn, "slug": finding.slug, "fix": finding.fix},
    }


def report_sarif(report: Report) -> dict[str, Any]:
    rules = list(report.rules)
    index = {r.id: k for k, r in enumerate(rules)}
    artifacts: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    notifications: list[dict[str, Any]] = []
    for trace in report.traces:
        uri = artifact_uri(trace.path)
        a_index = len(artifacts)
        artifacts.append({"location": {"uri": uri}, "mimeType": "application/jsonl"})
        _trace_notifications(trace, uri, a_index, notifications)
        for finding, print_ in trace_fingerprints(trace):
            if finding.rule in index:
                results.append(result_json(finding, index[finding.rule], a_index, uri, print_))
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "rtrace",
                "version": __version__,
                "semanticVersion": __version__,
                "rules": [rule_json(r) for r in rules],
            }
        },
        "artifacts": artifacts,
        "results": results,
        "invocations": [
            {
                "executionSuccessful": not any(t.unreadable for t in report.traces),
                "toolExecutionNotifications": notifications,
            }
        ],
        "columnKind": "unicodeCodePoints",
    }
    return {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def _trace_notifications(trace: TraceReport, uri: str, a_index: int, out: list[dict[str, Any]]) -> None:
    artifact = {"uri": uri, "index": a_index}
    if trace.unreadable:
        out.append(
            {
                "level": "error",
                "message": {"text": scrub_text(trace.unreadable)},
                "locations": [{"physicalLocation": {"artifactLocation": artifact}}],
            }
        )
    for problem in trace.problems[:100]:
        out.append(
            {
                "level": "error" if problem.severity == "error" else "warning",
                "message": {"text": scrub_text(problem.message)},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": artifact,
                            "region": {"startLine": max(1, problem.line), "startColumn": max(1, problem.col)},
                        }
                    }
                ],
            }
        )


def render(report: Report) -> bytes:
    return json_visible(orjson.dumps(report_sarif(report), option=orjson.OPT_INDENT_2)) + b"\n"
