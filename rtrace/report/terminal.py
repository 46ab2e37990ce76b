"""The terminal report: a summary per trace, then each finding with its witness as a two-lane timeline.

All trace text goes through `escape.shown` (secrets scrubbed, escapes visible) and into `rich.text.Text` (never
markup), so a transcript with ANSI escapes or `[bold]` prints as text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.text import Text

from ..core.escape import printable, shown
from ..core.secrets import scrub_text
from ..core.trace import Problem
from ..engine.fold import Report, TraceReport
from ..rules.base import Finding, Witness

if TYPE_CHECKING:  # imported where a finding or the totals are drawn: a clean trace's summary needs neither
    from rich.table import Table

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
MAX_PROBLEMS_SHOWN = 20
#: A trace with thousands of findings of one rule shows the first ones and a count (JSON has them all).
MAX_FINDINGS_SHOWN_PER_RULE = 25
LANE_WIDTH = 58
#: An unbroken run of text longer than this (base64 audio, hex dumps) is cut even inside prose.
RUN_LIMIT = 80
_RUN = re.compile(rf"\S{{{RUN_LIMIT + 1},}}")


def _prose(text: str, limit: int) -> str:
    """`shown(text, limit)`, with every over-long unbroken run cut to RUN_LIMIT characters and a count."""
    cut = _RUN.sub(lambda m: f"{m.group()[:RUN_LIMIT]}… (+{len(m.group()) - RUN_LIMIT} chars)", text)
    return shown(cut, limit)


#: Trace names in the totals tables are cut to this many characters, in the middle.
NAME_CHARS = 30


def trace_name(path: str, limit: int = NAME_CHARS) -> str:
    """The file name of `path` for a table column, cut in the middle when long: traces of one fleet usually share
    a prefix and differ at the end (`reconnect-during-tool.livekit-1.8.4.jsonl` -> `reconnect-dur…ekit-1.8.4.jsonl`)."""
    name = scrub_text(path.rsplit("/", 1)[-1])
    if len(name) > limit:
        head = (limit - 1) // 2
        name = f"{name[:head]}…{name[len(name) - (limit - 1 - head):]}"
    return printable(name, limit * 4)  # scrubbed before it was cut


def trace_names(paths: list[str], limit: int | None) -> list[str]:
    """A name for each trace that tells it from the others: its file name (cut in the middle to `limit`, when
    given), or the path as given where file names (or their cuts) would be the same."""
    names = [trace_name(p, limit) if limit else trace_name(p, 10**6) for p in paths]
    if len(set(names)) == len(names):
        return names
    return [printable(scrub_text(p), 400) for p in paths]


def render(report: Report, console: Console) -> None:
    """Print the report: built whole, then printed at once (one `print` per line costs rich ~0.5 ms each, which
    was most of the time to show a fleet of 200 traces)."""
    console.print(Group(*renderables(report, console.is_terminal, console.width)))


def renderables(report: Report, terminal: bool = True, width: int = 120) -> Iterator[RenderableType]:
    """Off a `terminal`, trace names are never cut (output read by tools and diffed must tell traces apart)."""
    for trace in report.traces:
        yield from render_trace(trace)
    if len(report.traces) > 1:
        yield from render_totals(report, terminal, width)


def render_trace(trace: TraceReport) -> Iterator[RenderableType]:
    yield Text(shown(trace.path, 200), style="bold")
    if trace.unreadable:
        yield Text(f"  unreadable: {shown(trace.unreadable, 300)}", style="red")
        return
    counts = trace.counts()
    parts = [
        f"{trace.events} events",
        f"{trace.connections} connection{'s' if trace.connections != 1 else ''}",
        f"{trace.duration:.2f} s",
    ]
    sev = ", ".join(
        f"{counts[s]} {s}{'s' if counts[s] != 1 else ''}" for s in ("error", "warning", "info") if counts[s]
    )
    parts.append(sev or "no findings")
    if trace.accepted:
        parts.append(f"{trace.accepted} accepted by the baseline")
    if trace.header and trace.header.fields:
        client = trace.header.fields.get("client") or trace.header.fields.get("recorder")
        if client:
            parts.append(shown(str(client), 60))
    yield Text("  " + " · ".join(parts))
    yield from render_not_judged(trace)
    yield from render_problems(trace)
    per_rule: Counter[str] = Counter()
    for finding in trace.findings:
        per_rule[finding.rule] += 1
        if per_rule[finding.rule] <= MAX_FINDINGS_SHOWN_PER_RULE:
            yield Text()
            yield from render_finding(finding)
    for rule, count in sorted(per_rule.items()):
        if count > MAX_FINDINGS_SHOWN_PER_RULE:
            hidden = count - MAX_FINDINGS_SHOWN_PER_RULE
            yield Text(f"  … and {hidden} more {rule} findings (all of them: --format json)", style="dim")
    yield Text()


def render_not_judged(trace: TraceReport) -> Iterator[RenderableType]:
    """One line per thing the trace lacks: the rules that could not judge it, and why."""
    for note in trace.not_judged:
        yield Text(f"  not judged by {', '.join(note.rules)}: {shown(note.why, 300)}", style="yellow")


def render_problems(trace: TraceReport) -> Iterator[RenderableType]:
    for problem in trace.problems[:MAX_PROBLEMS_SHOWN]:
        yield from render_problem(problem)
    hidden = trace.problem_count - min(len(trace.problems), MAX_PROBLEMS_SHOWN)
    if hidden > 0:
        yield Text(f"  … and {hidden} more input problems", style="dim")


def render_problem(problem: Problem) -> Iterator[RenderableType]:
    style = "red" if problem.severity == "error" else "yellow"
    yield Text(f"  {_prose(str(problem), 300)}", style=style)
    if problem.excerpt:
        yield Text(f"      {shown(problem.excerpt, 200)}", style="dim")


def render_finding(finding: Finding) -> Iterator[RenderableType]:
    from rich.padding import Padding

    head = Text("  ")
    head.append(f"{finding.severity:<7}", style=SEVERITY_STYLE[finding.severity])
    head.append(f" {finding.rule} {finding.slug}", style="bold")
    head.append(f"  conn {finding.conn}  lines {', '.join(map(str, finding.lines))}", style="dim")
    yield head
    yield Padding(Text(_prose(finding.message, 300)), (0, 0, 0, 4))
    yield Padding(Text(_prose(finding.explanation, 2000), style="default"), (0, 0, 0, 4))
    yield Padding(timeline(finding.witness), (0, 0, 0, 4))
    yield Padding(Text(f"fix: {finding.fix}", style="green"), (0, 0, 0, 4))


def timeline(witness: tuple[Witness, ...]) -> Table:
    """The witness lines as a client lane and a server lane, times relative to the first."""
    from rich.table import Table

    table = Table(box=None, show_header=True, header_style="dim", pad_edge=False, padding=(0, 1))
    table.add_column("line", justify="right", style="dim")
    table.add_column("+ms", justify="right", style="dim")
    table.add_column("client", max_width=LANE_WIDTH, overflow="fold")
    table.add_column("", width=1)
    table.add_column("server", max_width=LANE_WIDTH, overflow="fold")
    t0 = witness[0].t if witness else 0.0
    for w in witness:
        text = Text(shown(w.summary, 110))
        rel = f"{(w.t - t0) * 1000:.1f}"
        if w.dir == "client":
            table.add_row(str(w.line), rel, text, "→", "")
        elif w.dir == "server":
            table.add_row(str(w.line), rel, "", "←", text)
        else:
            text.stylize("italic dim")
            table.add_row(str(w.line), rel, text, "·", "")
    return table


#: Beyond this many traces the totals table has one column per count, not one per trace.
MAX_TRACE_COLUMNS = 6


def render_totals(report: Report, terminal: bool = True, width: int = 120) -> Iterator[RenderableType]:
    """Findings per rule and trace, a column per trace headed by its name; when the names do not fit beside the
    rules in `width` (or, on a terminal, once cut), the columns are numbered and a legend names each trace whole."""
    if len(report.traces) > MAX_TRACE_COLUMNS:
        yield from render_fleet_totals(report, terminal)
        return
    rows: dict[tuple[str, str, str], list[int]] = {}
    for k, trace in enumerate(report.traces):
        for f in trace.findings:
            rows.setdefault((f.rule, f.slug, f.severity), [0] * len(report.traces))[k] += 1
    if not rows:
        yield Text("no findings in any trace")
        return
    names = trace_names([t.path for t in report.traces], NAME_CHARS if terminal else None)
    rule_width = max(len(f"{rule} {slug}") for rule, slug, _ in rows) + len("warning") + 4
    legend = rule_width + sum(len(n) + 2 for n in names) > width
    from rich.table import Table

    table = Table(title="findings by rule", box=None, header_style="bold")
    table.add_column("rule", no_wrap=True)
    table.add_column("severity")
    for k, name in enumerate(names, 1):
        table.add_column(str(k) if legend else name, justify="right")
    for (rule, slug, severity), counts in sorted(rows.items()):
        table.add_row(f"{rule} {slug}", Text(severity, style=SEVERITY_STYLE[severity]), *map(str, counts))
    yield Group(table)
    if legend:
        whole = trace_names([t.path for t in report.traces], None)
        for k, name in enumerate(whole, 1):
            yield Text(f"  {k}  {name}")


def render_fleet_totals(report: Report, terminal: bool = True) -> Iterator[RenderableType]:
    """Many traces: per rule, how many findings, in how many traces, and the first of those traces: on a
    `terminal` in a column, names cut; elsewhere on a line per rule after the table, names whole (wrapped only
    between names, so grep finds each)."""
    from rich.table import Table

    total = len(report.traces)
    table = Table(title=f"findings by rule over {total} traces", box=None, header_style="bold")
    for name, justify in (("rule", "left"), ("severity", "left"), ("findings", "right"), ("traces", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    if terminal:
        table.add_column("in")
    rows: dict[tuple[str, str, str], dict[str, int]] = {}
    for trace in report.traces:
        for f in trace.findings:
            per_trace = rows.setdefault((f.rule, f.slug, f.severity), {})
            per_trace[trace.path] = per_trace.get(trace.path, 0) + 1
    every = trace_names([t.path for t in report.traces], NAME_CHARS if terminal else None)
    name_of = {t.path: name for t, name in zip(report.traces, every, strict=True)}
    found_in: list[Text] = []
    for (rule, slug, severity), per_trace in sorted(rows.items()):
        names = [name_of[p] for p in list(per_trace)[:3]]
        more = f" +{len(per_trace) - 3}" if len(per_trace) > 3 else ""
        cells: list[str | Text] = [f"{rule} {slug}", Text(severity, style=SEVERITY_STYLE[severity])]
        cells += [str(sum(per_trace.values())), f"{len(per_trace)}/{total}"]
        if terminal:
            cells.append(", ".join(names) + more)
        else:
            found_in.append(Text(f"  {rule} in {', '.join(names)}{more}"))
        table.add_row(*cells)
    failed = sum(1 for t in report.traces if t.unreadable)
    yield Group(table, *found_in) if rows else Text(f"no findings in any of {total} traces")
    if failed:
        yield Text(f"{failed} of {total} traces could not be analyzed (see above)", style="red")
