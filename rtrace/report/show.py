"""`rtrace show`: the conversations at one line, side by side, and the timeline of one connection.

The side-by-side view is written as it is laid out (`Out`): it never holds the view whole."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from operator import itemgetter
from typing import TYPE_CHECKING, Final

from mypy_extensions import mypyc_attr
from rich.cells import cell_len
from rich.text import Text

from ..core.conversation import Item
from ..core.describe import describe
from ..core.escape import shown
from ..core.loader import Rows
from ..core.state import Connection, TraceState, client_view, divergence
from ..core.trace import AudioRun, QuietRun, Record
from ..engine.fold import steady_gc

if TYPE_CHECKING:
    from rich.console import Console

#: A cell: runs of text, each with its style ("" for none).
Cell = list[tuple[str, str]]
_GAP: Final = "  "


def item_cell(item: Item | None, item_id: str) -> Cell:
    if item is None:
        return [(shown(item_id, 40), "")]
    cell = [(shown(item.label(), 70), "")]
    if item.text:
        cell.append((f"  {shown(item.text, 50)!s}", "dim"))
    if item.arguments:
        cell.append((f"  args={shown(item.arguments, 40)}", "dim"))
    if item.copies > 1:
        cell.append((f"  ×{item.copies}", "magenta"))
    return cell


def wrap(cell: Cell, width: int, over: str = "") -> list[Cell]:
    """`cell` in lines of at most `width` terminal cells: broken at spaces (the spaces at a break dropped), a word
    longer than a line cut. `over` is laid over every run's style (a divergence's colour)."""
    return wrapped(cell, width, over)[0]


def wrapped(cell: Cell, width: int, over: str = "", drawn: bool = True) -> tuple[list[Cell], list[int]]:
    """`wrap`'s lines, and the cells each takes (what a column pads after it).

    A run of printable ASCII is laid out a stretch of words at a time (as many as fit on the line), not a word at a
    time: thousands of items, each a few runs. Where the runs are `drawn` with their styles (through rich, in
    colour) a stretch is put back into its words and spaces, a run each (rich draws each styled run apart); in
    plain text (`drawn` False) only the characters count and a stretch stays one run."""
    lines: list[Cell] = [[]]
    line = lines[0]
    used = 0
    sizes: list[int] = []
    space: tuple[str, str] | None = None  # the spaces before the next word, kept only if it fits on this line
    for run, style in cell:
        if drawn:  # (plain text has no styles: only its characters are read)
            style = f"{style} {over}".strip()
        if run.isascii() and run.isprintable():  # a cell a character: measured by `len`
            while run:
                if run[0] == " ":
                    rest = run.lstrip(" ")
                    space = (run[: len(run) - len(rest)], style)
                    run = rest
                    if not run:
                        break
                gap = len(space[0]) if space is not None and used else 0  # spaces: a cell each
                room = width - used - gap
                if len(run) <= room:  # the longest head of the run that ends a word and fits in `room`
                    head = run.rstrip(" ")
                elif room <= 0:
                    head = ""
                elif run[room] == " ":
                    head = run[:room].rstrip(" ")
                else:
                    head = run[: max(run.rfind(" ", 0, room), 0)].rstrip(" ")
                if head:
                    if gap and space is not None:
                        line.append(space)
                    if drawn and " " in head:
                        line.extend((token, style) for token in _TOKENS.findall(head))
                    else:
                        line.append((head, style))
                    used += gap + len(head)
                    space = None
                    run = run[len(head) :]
                elif used:  # the next word starts the next line
                    sizes.append(used)
                    line = []
                    lines.append(line)
                    used = 0
                else:  # a word longer than a line: cut
                    head = run[: max(width, 1)]
                    line.append((head, style))
                    sizes.append(len(head))
                    line = []
                    lines.append(line)
                    space = None
                    run = run[len(head) :]
            continue
        for token in _TOKENS.findall(run):  # any other text: a word at a time, measured by rich
            if token[0] == " ":
                space = (token, style)
                continue
            size = cell_len(token)
            gap = len(space[0]) if space is not None and used else 0
            if used and used + gap + size > width:
                line = []
                lines.append(line)
                sizes.append(used)
                used = gap = 0
            if gap and space is not None:
                line.append(space)
                used += gap
            space = None
            while size > width - used:  # a word longer than a line
                head = chop(token, width - used)
                line.append((head, style))
                line = []
                lines.append(line)
                sizes.append(used + cell_len(head))
                used = 0
                token = token[len(head) :]
                size = cell_len(token)
            if token:
                line.append((token, style))
                used += size
    sizes.append(used)
    if not lines[-1] and len(lines) > 1:
        lines.pop()
        sizes.pop()
    return lines, sizes


_TOKENS: Final = re.compile(r" +|[^ ]+")


def cells(text: str) -> int:
    """The terminal cells `text` takes (`rich.cells.cell_len`), without asking rich when each character takes one
    (printable ASCII: most of what `show` lays out, thousands of items at a time)."""
    return len(text) if text.isascii() and text.isprintable() else cell_len(text)


def chop(word: str, width: int) -> str:
    """The longest head of `word` that fits in `width` cells (at least one character)."""
    k = min(len(word), width)
    while k > 1 and cell_len(word[:k]) > width:
        k -= 1
    return word[: max(k, 1)]


@mypyc_attr(native_class=False)  # its batch and writer are swapped in tests: a plain class where compiled
class Out:
    """Lines of styled runs, written as they are laid out, a batch of whole lines at a time (`BATCH` runs or
    more): as plain text when the console has no colours (a pipe, a file), else through rich (one `Text` a batch).
    Memory holds one batch, not the view (100,000 lines for a 50,000-item conversation)."""

    #: Runs held before the lines they make are written (about 0.5 MB of output).
    BATCH = 1 << 16

    def __init__(self, console: Console) -> None:
        self.console = console
        self.runs: Cell = []
        self.plain = console.color_system is None and not console.record

    def append(self, text: str, style: str = "") -> None:
        """A run; written with those before it when there are `BATCH` and it ends a line."""
        self.runs.append((text, style))
        if len(self.runs) >= self.BATCH and text.endswith("\n"):
            self.write()

    def write(self) -> None:
        """The runs held so far on the console, every line of them whole (called at a line's end)."""
        runs = self.runs
        if self.plain:
            self.console.file.write("".join(map(itemgetter(0), runs)))
        elif runs:
            text = Text()
            for run, style in runs:
                text.append(run, style or None)
            self.console.print(text, soft_wrap=True, end="")
        runs.clear()  # in place: `side_by_side` holds the list

    def close(self) -> None:
        self.write()
        if self.plain:
            self.console.file.flush()


#: A row of the side-by-side view: the left cell and the style laid over it, the right cell and its.
Row = tuple[Cell, str, Cell, str]


def column_widths(rows: Iterable[Row], titles: tuple[str, str], room: int) -> list[int]:
    """The widths of the two columns in `room` cells: each as wide as its widest cell (or title) when both fit;
    else the narrower one keeps its width when under half, and the other takes the rest; else half each. Reads
    `rows` only until they are known: once both columns are over half and together over `room`, no later row
    changes them (the rows are made as read: the view is never held whole)."""
    half = room // 2
    widest = [cells(titles[0]), cells(titles[1])]
    for left, _, right, _ in rows:
        if widest[0] >= half and widest[1] >= half and widest[0] + widest[1] > room:
            break
        size = sum(cells(run) for run, _ in left)
        widest[0] = max(widest[0], size)
        widest[1] = max(widest[1], size if right is left else sum(cells(run) for run, _ in right))
    if sum(widest) <= room:
        return widest
    if min(widest) < half:
        narrow = 0 if widest[0] < widest[1] else 1
        widths = [0, 0]
        widths[narrow], widths[1 - narrow] = widest[narrow], room - widest[narrow]
        return widths
    return [half, room - half]


def side_by_side(
    out: Out, rows: Callable[[], Iterable[Row]], titles: tuple[str, str], width: int, count: tuple[int, int]
) -> None:
    """Two numbered columns of cells (`rows()`: left cell and its style over, right cell and its style over, made
    afresh at each call), their lines wrapped to their column (`column_widths`), written to `out` as laid out."""
    num = max(len(str(max(count) - 1)), 1) if max(count) else 1
    room = max(24, width - 2 * num - 3 * len(_GAP))
    widths = column_widths(rows(), titles, room)

    runs = out.runs
    add, extend = runs.append, runs.extend  # `Out.append`'s runs, added here directly: a row is a handful of them
    gap, newline = (_GAP, ""), ("\n", "")
    batch, write = Out.BATCH, out.write
    drawn = not out.plain
    if not drawn:  # a run is a whole line here, not a word: a batch of as many bytes (a larger one only costs memory)
        batch = max(batch >> 4, 1)
    blank = " " * num
    blanks = (blank, blank)

    def line(left: Cell, used: int, right: Cell, numbers: tuple[str, str]) -> None:
        add((numbers[0].rjust(num), "dim"))
        add(gap)
        extend(left)
        if right or numbers[1]:
            add((" " * max(widths[0] - used, 0) + _GAP, ""))
            add((numbers[1].rjust(num), "dim"))
            add(gap)
            extend(right)
        add(newline)
        if len(runs) >= batch:
            write()

    line([(titles[0], "bold")], cells(titles[0]), [(titles[1], "bold")], ("#", "#"))
    nothing: tuple[list[Cell], list[int]] = ([[]], [0])
    for k, (left, left_over, right, right_over) in enumerate(rows()):
        left_lines, left_sizes = wrapped(left, widths[0], left_over, drawn) if left else nothing
        if right is left and right_over == left_over and widths[1] == widths[0]:
            right_lines = left_lines  # the same cell the same way: its lines are only read
        else:
            right_lines = wrapped(right, widths[1], right_over, drawn)[0] if right else [[]]
        if drawn:
            for j in range(max(len(left_lines), len(right_lines))):
                numbers = (str(k) if j == 0 and k < count[0] else "", str(k) if j == 0 and k < count[1] else "")
                if j < len(left_lines):
                    line(left_lines[j], left_sizes[j], right_lines[j] if j < len(right_lines) else [], numbers)
                else:
                    line([], 0, right_lines[j], numbers)
            continue
        lefts = [_joined(cell) for cell in left_lines]
        rights = lefts if right_lines is left_lines else [_joined(cell) for cell in right_lines]
        first = (str(k).rjust(num) if k < count[0] else blank, str(k).rjust(num) if k < count[1] else blank)
        for j in range(max(len(lefts), len(rights))):  # `line`'s text, a run a line
            numbers, right_number = (first, k < count[1]) if j == 0 else (blanks, False)
            left_text, used = (lefts[j], left_sizes[j]) if j < len(lefts) else ("", 0)
            right_text = rights[j] if j < len(rights) else ""
            if right_text or right_number:  # one string built at once, not a concatenation per part
                pad = " " * max(widths[0] - used, 0)
                add((f"{numbers[0]}{_GAP}{left_text}{pad}{_GAP}{numbers[1]}{_GAP}{right_text}\n", ""))
            else:
                add((f"{numbers[0]}{_GAP}{left_text}\n", ""))
            if len(runs) >= batch:
                write()


def _joined(line: Cell) -> str:
    if len(line) == 1:
        return line[0][0]
    return "".join([run for run, _ in line])


def render_state(state: TraceState, at_line: int, console: Console, conns: Iterable[int] | None = None) -> None:
    """Server conversation and client view of each connection after `at_line`, differences highlighted, written
    as laid out."""
    wanted = set(conns) if conns is not None else None
    # Every line is laid out to fit already: printed as is, a batch of lines at a time (a rich Table per
    # connection, measured and wrapped cell by cell, took longer than the fold of a 400,000-line trace up to
    # `at_line`; the whole view at once held 245 MB for 50,000 items).
    out = Out(console)
    out.append(f"after line {at_line} (t={state.last_t:.6f} s)\n", "bold")
    with steady_gc():  # as in the fold: a row's runs are freed as written, the state stays (no walks over it)
        for n, conn in sorted(state.conns.items()):
            if wanted is not None and n not in wanted:
                continue
            render_connection(conn, out, console.width)
    out.close()


def render_connection(conn: Connection, out: Out, width: int) -> None:
    status = "open" if conn.open else f"ended ({conn.ended_by}) at line {conn.closed_line}"
    out.append(f"\nconnection {conn.n}: {status}, {len(conn.conv)} items\n", "bold")
    server_ids = conn.conv.ids()
    client_ids = client_view(conn)
    diff = divergence(client_ids, server_ids)
    only_server, only_client, reordered = set(diff.only_server), set(diff.only_client), set(diff.reordered)
    local_items = {i.id: i for i in conn.local} if conn.local is not None else {}
    # The pending creates by item id, their items made only for the rows that show them.
    pending_items = {c.item_id: c for c in conn.pending.values() if c.item_type is not None and c.item_id}
    title = "client view (local snapshot)" if conn.local is not None else "client view (confirmed + pending)"

    def rows() -> Iterator[Row]:
        for k in range(max(len(server_ids), len(client_ids))):
            left: Cell = []
            right: Cell = []
            left_over = right_over = ""
            item: Item | None = None
            if k < len(server_ids):
                sid = server_ids[k]
                item = conn.conv.get(sid)
                left = item_cell(item, sid)
                left_over = "bold red" if only_server and sid in only_server else ""
            if k < len(client_ids):
                cid = client_ids[k]
                if k < len(server_ids) and cid == server_ids[k] and item is not None:
                    right = left  # the same item on both sides (most rows): one cell, laid out once
                else:
                    item = conn.conv.get(cid) or local_items.get(cid)
                    if item is None and (create := pending_items.get(cid)) is not None:
                        item = create.sent_item()
                    right = item_cell(item, cid)
                if only_client and cid in only_client:  # (most views differ nowhere: no lookup then)
                    right_over = "bold green"
                elif reordered and cid in reordered:
                    right_over = "bold yellow"
            yield left, left_over, right, right_over

    side_by_side(out, rows, ("server conversation", title), width, (len(server_ids), len(client_ids)))
    if diff:
        parts = []
        if diff.only_server:
            parts.append(f"only on the server: {', '.join(diff.only_server)}")
        if diff.only_client:
            parts.append(f"only in the client view: {', '.join(diff.only_client)}")
        if diff.reordered:
            parts.append(f"order differs: {', '.join(diff.reordered)}")
        out.append("divergence: " + "; ".join(shown(p, 300) for p in parts) + "\n", "yellow")
    if conn.pending:
        out.append("pending client changes:\n", "bold")
        for change in conn.pending.values():
            out.append(f"  line {change.line}: {shown(change.summary, 120)}\n")
    open_responses = [r for r in conn.responses.values() if r.open]
    for resp in open_responses:
        out.append(f"response {shown(resp.id, 60)} generating since line {resp.created_line}\n", "cyan")


def render_timeline(
    records: Iterable[Record] | Rows, conn: int, console: Console, until: int | None = None
) -> set[int]:
    """One line per event of connection `conn`: line, time, direction, summary. Returns the connections the
    trace has (nothing is printed when `conn` is not one of them: the caller says so). What `TraceReader.rows`
    returns is read on its fast path: the other connections' lines the scanner takes come as runs, of which only
    the connection counts (`Rows.entries` with every type quiet, `conn`'s records kept whole)."""
    from rich.table import Table  # the timeline's only: `--at`'s view is laid out here

    if isinstance(records, Rows):
        records = _timeline_records(records, conn, until)
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("line", justify="right", style="dim")
    table.add_column("t", justify="right", style="dim")
    table.add_column("client")
    table.add_column("")
    table.add_column("server")
    rows = 0
    seen: set[int] = set()
    for rec in records:
        if until is not None and rec.line > until:
            break
        seen.add(rec.conn)
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
    return seen


def _timeline_records(rows: Rows, conn: int, until: int | None) -> Iterator[Record]:
    """The records of `rows` as the timeline reads them: `conn`'s whole, the others' as parsed or as runs, each run
    a record of its connection (`render_timeline` only counts them)."""
    for entry in rows.entries(frozenset(), frozenset(), until, conn):
        if type(entry) is tuple:
            yield Record(*entry)
        else:
            run: QuietRun | AudioRun = entry  # type: ignore[assignment]
            yield Record(0, run.line, run.t, run.dir, run.conn, {}, "", "")
