"""The Markdown report, made to be pasted into a bug: a summary, then each finding with its witness as a
Mermaid `sequenceDiagram`, the raw witness lines and the likely fix.

Re-reads the witness lines from the trace file (through `excerpt`, so payloads are cut and secrets
redacted). All trace text is escaped for the context it lands in: Markdown prose, Mermaid labels, code fences.
"""

from __future__ import annotations

import re

from ..core.escape import shown
from ..engine.fold import Report, TraceReport
from ..rules.base import Finding, Witness, ms
from .excerpt import read_lines, scrub

#: Longest label put on a Mermaid arrow.
LABEL_CHARS = 120
_MD_SPECIAL = re.compile(r"([\\`*_\[\]{}|#!~])")
_MERMAID_UNSAFE = re.compile(r"[^A-Za-z0-9 _.,()/+=@'\-]")


def md_text(text: str, limit: int = 2000) -> str:
    """Untrusted text as inert Markdown: one line, HTML and Markdown syntax escaped."""
    s = shown(text, limit).replace("\n", " ")
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", s)


def mermaid_label(text: str, limit: int = LABEL_CHARS) -> str:
    """Text for a Mermaid message: every character outside a small safe set as an entity code (`#59;`)."""
    s = shown(text, limit).replace("\n", " ")
    return _MERMAID_UNSAFE.sub(lambda m: f"#{ord(m.group(0))};", s)


def fence(body: str, info: str = "") -> str:
    """A fenced code block whose fence is longer than any backtick run inside."""
    runs = [len(r) for r in re.findall(r"`+", body)]
    ticks = "`" * max(3, max(runs, default=0) + 1)
    return f"{ticks}{info}\n{body}\n{ticks}"


def sequence_diagram(witness: tuple[Witness, ...]) -> str:
    """The witness as a Mermaid sequence diagram: Client and Server lanes, times relative to the first line."""
    out = ["sequenceDiagram", "    participant C as Client", "    participant S as Server"]
    t0 = witness[0].t if witness else 0.0
    for w in witness:
        label = mermaid_label(f"+{(w.t - t0) * 1000:.1f} ms L{w.line} {w.summary}")
        if w.dir == "client":
            out.append(f"    C->>S: {label}")
        elif w.dir == "server":
            out.append(f"    S->>C: {label}")
        else:
            out.append(f"    Note over C,S: {label}")
    return "\n".join(out)


def render(report: Report) -> str:
    parts = ["# rtrace report", ""]
    for trace in report.traces:
        parts.append(render_trace(trace))
    return "\n".join(parts).rstrip() + "\n"


def _header_summary(trace: TraceReport) -> list[str]:
    fields = scrub(trace.header.fields) if trace.header else {}
    rows = []
    client = fields.get("client") or fields.get("recorder")
    if client:
        rows.append(f"- client: {md_text(str(client), 200)}")
    versions = fields.get("versions")
    if isinstance(versions, dict) and versions:
        text = ", ".join(f"{k} {v}" for k, v in versions.items())
        rows.append(f"- versions: {md_text(text, 400)}")
    for key in sorted(fields):
        if key in ("client", "recorder", "versions"):
            continue
        rows.append(f"- {md_text(str(key), 60)}: {md_text(str(fields[key]), 200)}")
    if not rows:
        rows.append("- client: not recorded (the trace has no `rtrace` header)")
    return rows


def render_trace(trace: TraceReport) -> str:
    out = [f"## `{md_text(trace.path, 300).replace('`', '')}`", ""]
    if trace.unreadable:
        out += [f"Unreadable: {md_text(trace.unreadable, 300)}", ""]
        return "\n".join(out)
    counts = trace.counts()
    sev = ", ".join(f"{counts[s]} {s}" for s in ("error", "warning", "info") if counts[s]) or "none"
    out += _header_summary(trace)
    out += [
        f"- events: {trace.events}",
        f"- connections: {trace.connections}",
        f"- duration: {ms(trace.duration)}",
        f"- findings: {sev}",
    ]
    if trace.problem_count:
        out.append(f"- input problems: {trace.problem_count} (see `rtrace analyze`)")
    out.append("")
    if trace.events == 0:
        out += ["No usable event in this trace.", ""]
        return "\n".join(out)
    if not trace.findings:
        out += ["No findings.", ""]
        return "\n".join(out)
    lines = read_lines(trace.path, {w.line for f in trace.findings for w in f.witness}, trace.line_marks)
    for k, finding in enumerate(trace.findings, start=1):
        out.append(render_finding(k, finding, lines))
    return "\n".join(out)


def render_reproducers(reproducers: list[tuple[str, str, int, str, str]]) -> str:
    """A section of minimal reproducers (`rtrace report --minimize`): for each (trace, rule id, records of the
    trace, reproducer file, its name to show), the reproducer's lines quoted (payloads cut, secrets redacted)."""
    out = ["## Minimal reproducers", ""]
    for trace, rule, records, path, name in reproducers:
        quoted = read_lines(path, range(1, 10_000))
        out += [
            f"### {md_text(rule, 40)} in `{md_text(trace, 300).replace('`', '')}`: {len(quoted)} lines of {records}",
            "",
            f"`{md_text(name, 300).replace('`', '')}` (`rtrace minimize`): the finding still holds in these lines.",
            "",
            fence("\n".join(quoted[k] for k in sorted(quoted)), "jsonl"),
            "",
        ]
    return "\n".join(out)


def render_finding(k: int, finding: Finding, lines: dict[int, str]) -> str:
    where = ", ".join(map(str, finding.lines))
    out = [
        f"### {k}. {finding.severity}: {finding.rule} `{finding.slug}`",
        "",
        f"**{md_text(finding.message, 300)}**",
        "",
        f"Connection {finding.conn}, lines {where}.",
        "",
        md_text(finding.explanation, 3000),
        "",
        fence(sequence_diagram(finding.witness), "mermaid"),
        "",
    ]
    quoted = [f"{line}: {lines[line]}" for line in finding.lines if line in lines]
    if quoted:
        out += ["Witness lines (payloads cut, secrets redacted):", "", fence("\n".join(quoted), "jsonl"), ""]
    out += [f"**Likely fix.** {md_text(finding.fix, 1000)}", ""]
    return "\n".join(out)
