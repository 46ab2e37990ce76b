"""Goldens of `rtrace show` on the shared real traces: `python -m tests.regen_show` rewrites tests/golden/show/.

For each trace and each chosen line (and the end), every connection's server conversation, client view, pending
changes and open responses, plus the rendered `rtrace show` text. Review the diff before committing: the
hand-written expectations in tests/test_report_show.py pin what the events describe.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console

from rtrace.core.loader import load
from rtrace.core.reducer import step
from rtrace.core.state import TraceState, client_view, divergence
from rtrace.core.trace import Record
from rtrace.report.show import render_state

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "sample_traces" / "real"
GOLDEN = Path(__file__).resolve().parent / "golden" / "show"

#: Lines worth a snapshot, per trace (the end is always taken).
CHOSEN: dict[str, list[int]] = {
    "tool-output-race.livekit-1.8.8": [42, 44, 45, 46, 47],
    "tool-output-race.livekit-1.8.8.client-view": [41, 43, 45, 46],
    "tool-output-race.livekit-1.8.9": [42, 45, 47],
    "reconnect-during-tool.livekit-1.8.4": [20, 21, 26, 31, 32],
    "reconnect-during-tool.livekit-1.8.5": [21, 27, 33, 34],
}


def traces() -> list[Path]:
    return [REAL / f"{name}.jsonl" for name in CHOSEN]


def golden_path(trace: Path) -> Path:
    return GOLDEN / f"{trace.name.removesuffix('.jsonl')}.json"


def state_at(records: list[Record], at: int | None) -> TraceState:
    """The state `rtrace show --at` shows: every record up to and including line `at`."""
    state = TraceState()
    for rec in records:
        if at is not None and rec.line > at:
            break
        step(state, rec)
    return state


def snapshot(state: TraceState, at: int) -> dict[str, Any]:
    conns = {}
    for n, conn in sorted(state.conns.items()):
        server, client = conn.conv.ids(), client_view(conn)
        diff = divergence(client, server)
        conns[str(n)] = {
            "status": "open" if conn.open else f"{conn.ended_by} at line {conn.closed_line}",
            "server": server,
            "client_view": client,
            "only_server": list(diff.only_server),
            "only_client": list(diff.only_client),
            "reordered": list(diff.reordered),
            "pending": [f"line {c.line}: {c.summary}" for c in conn.pending.values()],
            "open_responses": [r.id for r in conn.responses.values() if r.open],
        }
    out = io.StringIO()
    render_state(state, at, Console(file=out, width=160, color_system=None, highlight=False))
    return {"at": at, "connections": conns, "text": out.getvalue().splitlines()}


def golden_of(trace: Path) -> dict[str, Any]:
    records, reader = load(trace)
    name = trace.name.removesuffix(".jsonl")
    snaps = {str(at): snapshot(state_at(records, at), at) for at in CHOSEN[name]}
    snaps["end"] = snapshot(state_at(records, None), records[-1].line)
    return {"trace": f"sample_traces/real/{trace.name}", "problems": [str(p) for p in reader.problems], **snaps}


def dumps(data: dict[str, Any]) -> bytes:
    return orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n"


def main() -> None:
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for trace in traces():
        golden_path(trace).write_bytes(dumps(golden_of(trace)))
        print(golden_path(trace).relative_to(ROOT))


if __name__ == "__main__":
    main()
