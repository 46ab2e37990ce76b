"""One line per finding, as compilers and linters print them: `path:line:col: RT101 [error] message`.

For editors and grep. The line is the one the finding's message is about (`Finding.subject_line`: "deleted at
line 45" is at line 45); the column is always 1 (a trace line is one event). Input problems follow as
`path:line:col: input [warning] message`; an unreadable trace is one `path: unreadable: why` line. All trace text
is scrubbed of secrets and made printable (`core.escape.shown`).
"""

from __future__ import annotations

from collections.abc import Iterator

from ..core.escape import shown
from ..engine.fold import Report, TraceReport

MESSAGE_CHARS = 300


def _text(text: str, limit: int) -> str:
    return shown(text, limit)


def trace_lines(trace: TraceReport) -> Iterator[str]:
    path = _text(trace.path, 500)
    if trace.unreadable:
        yield f"{path}: unreadable: {_text(trace.unreadable, MESSAGE_CHARS)}"
        return
    for f in trace.findings:
        line = f.subject_line
        yield f"{path}:{line}:1: {f.rule} [{f.severity}] {_text(f.message, MESSAGE_CHARS)}"
    for p in trace.problems:
        yield f"{path}:{p.line}:{p.col}: input [{p.severity}] {_text(p.message, MESSAGE_CHARS)}"
    hidden = trace.problem_count - len(trace.problems)
    if hidden > 0:
        yield f"{path}: input [warning] {hidden} more input problems not listed"
    for note in trace.not_judged:
        yield f"{path}: not judged by {', '.join(note.rules)}: {_text(note.why, MESSAGE_CHARS)}"


def render(report: Report) -> str:
    return "".join(f"{line}\n" for trace in report.traces for line in trace_lines(trace))


def statistics(report: Report) -> str:
    """`--statistics`: one line per rule that found something (count, id, slug, severity), most found first, then
    the total; `no findings` when there is none."""
    from collections import Counter

    counts = Counter(f.rule for f in report.findings)
    if not counts:
        return "no findings\n"
    rules = {r.id: r for r in report.rules}
    width = len(str(max(counts.values())))
    slug_width = max(len(rules[k].slug) if k in rules else 0 for k in counts)
    lines = []
    for rule_id, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        rule = rules.get(rule_id)
        slug, severity = (rule.slug, rule.severity) if rule else ("", "")
        lines.append(f"{n:>{width}}  {rule_id}  {slug:<{slug_width}}  {severity}".rstrip())
    total = sum(counts.values())
    traces = sum(1 for t in report.traces if t.findings)
    lines.append(f"{total} finding{'s' if total != 1 else ''} in {traces} of {len(report.traces)} traces")
    return "".join(f"{line}\n" for line in lines)
