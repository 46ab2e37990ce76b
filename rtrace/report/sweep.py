"""The output of `rtrace sweep`: a line per run as it finishes, then the latency x rule table (runs that showed the
rule, of all runs) and one trace per finding.

Renders `rtrace.net.hunt.sweep` results on the console it is given; runs nothing.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..core.escape import shown
from ..net.hunt.sweep import RunResult, SweepResult, label
from ..net.link.server import ServerOptions, describe


def announce(options: ServerOptions, console: Console) -> None:
    """One line before the runs of a latency: what the server does to the command's client, in words."""
    line = f"at {label(options.latency)}: " + "; ".join(describe(options))
    console.print(shown(line, 4096), markup=False, soft_wrap=True)


def failure(result: SweepResult) -> list[str]:
    """When the command failed in every run: how (the exit codes or signals), and the last lines of the stderr
    of its last run; else nothing."""
    if not result.failed_every_run():
        return []
    hows = sorted({r.how() for r in result.results})
    n = len(result.results)
    lines = [f"the command failed in every run ({n} of {n}: {', '.join(hows)}): the sweep shows nothing of the client"]
    last = result.results[-1]
    if last.stderr_tail:
        lines.append(f"last lines of its stderr ({label(last.latency)} run {last.run}):")
        lines.extend("  " + line for line in last.stderr_tail)
    else:
        lines.append("it wrote nothing to stderr")
    return [shown(line, 4096) for line in lines]


def progress(r: RunResult, console: Console) -> None:
    """One line for a run that just finished: its exit status, the rules it showed, its trace."""
    status = r.how()
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
        f"{sum(1 for r in result.results if r.latency == lat and r.failed)}/{result.runs}"
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
