"""The JUnit XML report, for CI test dashboards: a testsuite per trace, a testcase per rule, a failure per finding.

Built with ElementTree (attributes and text escaped by it); characters XML 1.0 cannot carry are shown as
`\\xNN` first. An unreadable trace is one testcase with an `<error>`.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ..engine.fold import Report, TraceReport
from .excerpt import scrub_text

_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def xml_text(text: str) -> str:
    """Untrusted text safe for XML 1.0 (ElementTree escapes the markup characters itself)."""
    return _XML_INVALID.sub(lambda m: f"\\x{ord(m.group(0)):02x}", scrub_text(text))


def trace_suite(trace: TraceReport, report: Report) -> ET.Element:
    suite = ET.Element("testsuite", name=xml_text(trace.path))
    name = xml_text(trace.path.rsplit("/", 1)[-1])
    tests = failures = errors = 0
    if trace.unreadable or trace.events == 0:
        case = ET.SubElement(suite, "testcase", classname=f"rtrace.{name}", name="read trace")
        err = ET.SubElement(case, "error", type="unreadable", message=xml_text(trace.unreadable or "no usable event"))
        err.text = xml_text(trace.unreadable or "no usable event")
        tests, errors = 1, 1
    else:
        by_rule: dict[str, list] = {}
        for finding in trace.findings:
            by_rule.setdefault(finding.rule, []).append(finding)
        for rule in report.rules:
            tests += 1
            case = ET.SubElement(suite, "testcase", classname=f"rtrace.{name}", name=f"{rule.id} {rule.slug}")
            for finding in by_rule.get(rule.id, []):
                failures += 1
                failure = ET.SubElement(
                    case, "failure", type=f"{finding.rule} {finding.severity}", message=xml_text(finding.message)
                )
                body = [
                    f"{finding.severity} {finding.rule} {finding.slug}, connection {finding.conn}, "
                    f"lines {', '.join(map(str, finding.lines))}",
                    finding.explanation,
                    *(f"  line {w.line} {w.dir:>6} {w.summary}" for w in finding.witness),
                    f"fix: {finding.fix}",
                ]
                failure.text = xml_text("\n".join(body))
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", "0")
    suite.set("time", f"{trace.duration:.3f}")
    return suite


def render(report: Report) -> bytes:
    root = ET.Element("testsuites", name="rtrace")
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for trace in report.traces:
        suite = trace_suite(trace, report)
        for key in totals:
            totals[key] += int(suite.get(key, "0"))
        root.append(suite)
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"
