"""The output of `rtrace replay`: the connections replayed, each divergence from the recording with its line in both
traces, and the findings of the original next to the replay's.

Renders a `rtrace.net.replay.runner.ReplayResult` through the `emit` it is given, one line at a time; replays nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from ..core.escape import shown
from ..engine.fold import TraceReport
from ..net.replay.runner import ReplayResult


def _finding_rows(report: TraceReport | None) -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {}
    for f in report.findings if report else []:
        key = f"{f.rule} {f.slug}"
        lines = ",".join(str(n) for n in f.lines[:6])
        rows.setdefault(key, []).append(lines)
    return rows


def render(result: ReplayResult, emit: Callable[[str], None]) -> None:
    """The replay summary: connections, divergences (both lines), findings of the original next to the replay's."""
    emit(f"replayed {shown(result.original)} against {shown(result.target)} -> {shown(result.replayed)}")
    for c in result.conns:
        emit(f"  conn {c.conn}: {c.sent} sent, {c.received} received, {c.timeouts} wait(s) timed out")
    if result.faults:
        emit(shown(result.faults))
    if result.divergences:
        emit(f"{len(result.divergences)} divergence(s) from the recording:")
        for d in result.divergences:
            where = f"original line {d.original_line or '?'}, replay line {d.replay_line or '?'}"
            emit(f"  conn {d.conn} {d.kind}: {d.message} ({where})")
            if d.original_text:
                emit(f"    original: {d.original_text}")
            if d.replay_text:
                emit(f"    replay:   {d.replay_text}")
    else:
        emit("the endpoint answered every acknowledgement the recording has")
    before, after = _finding_rows(result.original_report), _finding_rows(result.replay_report)
    emit("findings (original | replay):")
    if not before and not after:
        emit("  none in either")
    for key in sorted(set(before) | set(after)):
        a = "; ".join(f"lines {x}" for x in before.get(key, [])) or "-"
        b = "; ".join(f"lines {x}" for x in after.get(key, [])) or "-"
        emit(f"  {key}: {a} | {b}")
