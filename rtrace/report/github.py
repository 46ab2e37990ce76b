"""GitHub Actions workflow commands: one annotation per finding (`::error file=...,line=N,title=...::message`),
so findings show on the run's summary and, for files in the repository, on the lines of the pull request.

Severity maps to the command: error -> `error`, warning -> `warning`, info -> `notice`. Values are escaped as the
runner expects (`%`, CR and LF in the message; also `:` and `,` in properties), so trace text cannot start a command
of its own; text is made printable and scrubbed of secrets first.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..core.escape import shown
from ..engine.fold import Report, TraceReport

COMMAND = {"error": "error", "warning": "warning", "info": "notice"}
MESSAGE_CHARS = 1000


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _clean(text: str, limit: int) -> str:
    return shown(text, limit)


def trace_lines(trace: TraceReport) -> Iterator[str]:
    path = escape_property(_clean(trace.path, 500))
    if trace.unreadable:
        title = escape_property("rtrace: unreadable trace")
        yield f"::error file={path},title={title}::{escape_data(_clean(trace.unreadable, 300))}"
        return
    for f in trace.findings:
        line = f.subject_line
        title = escape_property(f"{f.rule} {f.slug}")
        message = escape_data(_clean(f"{f.message}. {f.explanation} Fix: {f.fix}", MESSAGE_CHARS))
        yield f"::{COMMAND[f.severity]} file={path},line={line},title={title}::{message}"
    if trace.problem_count:
        first = trace.problems[0] if trace.problems else None
        where = f",line={first.line},col={first.col}" if first is not None else ""
        text = f"{trace.problem_count} input problems" + (f"; first: {first.message}" if first else "")
        yield f"::warning file={path}{where},title=rtrace input::{escape_data(_clean(text, 300))}"


def render(report: Report) -> str:
    return "".join(f"{line}\n" for trace in report.traces for line in trace_lines(trace))
