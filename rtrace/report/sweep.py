"""The output of `rtrace sweep`: a line per run as it finishes, then the latency x rule table (runs that showed the
rule, of all runs) and one trace per finding.

Renders `rtrace.net.sweep` results on the console it is given; runs nothing.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..core.escape import shown
from ..net.sweep import RunResult, SweepResult, label


def progress(r: RunResult, console: Console) -> None:
    """One line for a run that just finished: its exit status, the rules it showed, its trace."""
    status = "timeout" if r.exit_code is None else f"exit {r.exit_code}"
    found = ", ".join(sorted({f.rule for f in r.findings})) or "no finding"
    line = f"{label(r.latency)} run {r.run}: {status}, {found}  {r.trace}"
    console.print(shown(line, 4096), markup=False, soft_wrap=True)


def render(result: SweepResult, console: Console) -> None:
    """The latency x rule table (runs that showed the rule, of all runs), then one trace per finding."""
    table = Table(box=None, header_style="bold", title=None)
    table.add_column("rule")
    table.add_column("severity")
    for latency in result.latencies:
        table.add_column(label(latency), justify="right")
    for rule_id, slug, severity in result.rules():
        cells = [f"{result.count(lat, rule_id)}/{result.runs}" for lat in result.latencies]
        table.add_row(f"{rule_id} {slug}", severity, *cells)
    failed = [
        f"{sum(1 for r in result.results if r.latency == lat and r.exit_code != 0)}/{result.runs}"
        for lat in result.latencies
    ]
    table.add_row("(command failed)", "", *failed)
    console.print(table)
    if not result.rules():
        console.print("no finding at any latency", markup=False)
        return
    console.print()
    console.print("one trace per finding:", markup=False)
    for rule_id, slug, _ in result.rules():
        _first_trace(result, rule_id, slug, console)


def _first_trace(result: SweepResult, rule_id: str, slug: str, console: Console) -> None:
    """Per latency, the first run that showed `rule_id`: its trace at the finding's first line."""
    for latency in result.latencies:
        for r in result.results:
            if r.latency != latency:
                continue
            hit = next((f for f in r.findings if f.rule == rule_id), None)
            if hit is not None:
                lines = ",".join(str(n) for n in hit.lines[:6]) if hit.lines else ""
                where = f"{r.trace}:{hit.lines[0]}" if hit.lines else str(r.trace)
                console.print(
                    shown(f"  {rule_id} {slug} at {label(latency)}: {where}  (lines {lines})", 4096),
                    markup=False,
                    soft_wrap=True,
                )
                break
