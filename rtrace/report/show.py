"""`rtrace show`: the conversations at one line, side by side, and the timeline of one connection."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..core.conversation import Item
from ..core.describe import describe
from ..core.escape import shown
from ..core.state import Connection, TraceState, client_view, divergence
from ..core.trace import Record


def item_cell(item: Item | None, item_id: str) -> Text:
    if item is None:
        return Text(shown(item_id, 40))
    text = Text(shown(item.label(), 70))
    if item.text:
        text.append(f"  {shown(item.text, 50)!s}", style="dim")
    if item.arguments:
        text.append(f"  args={shown(item.arguments, 40)}", style="dim")
    if item.copies > 1:
        text.append(f"  ×{item.copies}", style="magenta")
    return text


def render_state(state: TraceState, at_line: int, console: Console, conns: Iterable[int] | None = None) -> None:
    """Server conversation and client view of each connection after `at_line`, differences highlighted."""
    wanted = set(conns) if conns is not None else None
    console.print(Text(f"after line {at_line} (t={state.last_t:.6f} s)", style="bold"))
    for n, conn in sorted(state.conns.items()):
        if wanted is not None and n not in wanted:
            continue
        render_connection(conn, console)


def render_connection(conn: Connection, console: Console) -> None:
    status = "open" if conn.open else f"ended ({conn.ended_by}) at line {conn.closed_line}"
    console.print()
    console.print(Text(f"connection {conn.n}: {status}, {len(conn.conv)} items", style="bold"))
    server_ids = conn.conv.ids()
    client_ids = client_view(conn)
    diff = divergence(client_ids, server_ids)
    local_items = {i.id: i for i in conn.local} if conn.local is not None else {}
    pending_items = {c.item_id: c.item for c in conn.pending.values() if c.item is not None and c.item_id}
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("#", justify="right", style="dim")
    table.add_column("server conversation")
    table.add_column("#", justify="right", style="dim")
    title = "client view (local snapshot)" if conn.local is not None else "client view (confirmed + pending)"
    table.add_column(title)
    for k in range(max(len(server_ids), len(client_ids))):
        left = Text()
        right = Text()
        if k < len(server_ids):
            sid = server_ids[k]
            left = item_cell(conn.conv.get(sid), sid)
            if sid in diff.only_server:
                left.stylize("bold red")
        if k < len(client_ids):
            cid = client_ids[k]
            right = item_cell(conn.conv.get(cid) or local_items.get(cid) or pending_items.get(cid), cid)
            if cid in diff.only_client:
                right.stylize("bold green")
            elif cid in diff.reordered:
                right.stylize("bold yellow")
        table.add_row(str(k) if k < len(server_ids) else "", left, str(k) if k < len(client_ids) else "", right)
    console.print(table)
    if diff:
        parts = []
        if diff.only_server:
            parts.append(f"only on the server: {', '.join(diff.only_server)}")
        if diff.only_client:
            parts.append(f"only in the client view: {', '.join(diff.only_client)}")
        if diff.reordered:
            parts.append(f"order differs: {', '.join(diff.reordered)}")
        console.print(Text("divergence: " + "; ".join(shown(p, 300) for p in parts), style="yellow"))
    if conn.pending:
        console.print(Text("pending client changes:", style="bold"))
        for change in conn.pending.values():
            console.print(Text(f"  line {change.line}: {shown(change.summary, 120)}"))
    open_responses = [r for r in conn.responses.values() if r.open]
    for resp in open_responses:
        console.print(
            Text(f"response {shown(resp.id, 60)} generating since line {resp.created_line}", style="cyan")
        )


def render_timeline(records: Iterable[Record], conn: int, console: Console, until: int | None = None) -> None:
    """One line per event of connection `conn`: line, time, direction, summary."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("line", justify="right", style="dim")
    table.add_column("t", justify="right", style="dim")
    table.add_column("client")
    table.add_column("")
    table.add_column("server")
    rows = 0
    for rec in records:
        if until is not None and rec.line > until:
            break
        if rec.conn != conn:
            continue
        rows += 1
        text = Text(shown(describe(rec.type, rec.event), 90))
        if rec.dir == "client":
            table.add_row(str(rec.line), f"{rec.t:.6f}", text, "→", "")
        elif rec.dir == "server":
            table.add_row(str(rec.line), f"{rec.t:.6f}", "", "←", text)
        else:
            text.stylize("italic dim")
            table.add_row(str(rec.line), f"{rec.t:.6f}", text, "·", "")
    if rows:
        console.print(table)
    else:
        console.print(Text(f"no events on connection {conn}", style="yellow"))
