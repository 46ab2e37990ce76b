"""The reader's per-line path (`TraceReader._entries`): blocks of lines in, the records of a fold out, as `Row`s
and the runs the C scanner took. Compiled with the fold (`rtrace._compiled`): the work each line costs runs here.
No I/O: the reader hands in its blocks (`TraceReader._blocks`) and its slow path (`LineRecords`) for the lines
this one does not take; nothing raises on bad input.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import orjson

from .catalog import BETA_TO_GA, CLIENT_EVENTS, LOCAL_EVENTS, META_EVENTS, SERVER_EVENTS
from .records import LineRecords, Row, json_kind
from .trace import DIRECTIONS, AudioRun, Direction, QuietRows, QuietRun

#: Wire name -> GA name of every event type of the catalogue (beta names included): the inline path takes only
#: these, and hands on the catalogue's own string objects (hashed once, shared by every record).
GA_NAMES: dict[str, str] = {
    **{name: name for name in CLIENT_EVENTS | SERVER_EVENTS | META_EVENTS | LOCAL_EVENTS},
    **BETA_TO_GA,
}
_DIRECTIONS: dict[str, Direction] = {d: d for d in DIRECTIONS}

#: What a fold reads: a record as a `Row`, or a run of lines the scanner took.
Entry = Row | QuietRun | QuietRows | AudioRun
#: The C scanner's `scan(block, start, end, table, seen, keep, detail, heads)`.
Scan = Callable[[bytes, int, int, dict[bytes, int], set[int], int, bool, bool], list[Any]]


def entries(
    reader: LineRecords,
    blocks: Iterator[tuple[int, Any, bool]],
    scan: Scan | None,
    table: dict[bytes, int],
    until_line: int | None,
    keep: int,
    detail: bool,
    count_lines: Callable[[bytes, int, int], int] | None = None,
) -> Iterator[Entry]:
    """The records of `blocks` (`TraceReader._blocks`, with regions when `scan` is given), up to `until_line` when
    given, `reader` counting them (`count`, `last_t`, `shapes`: exact between blocks, before each line it is handed and
    once the records end) and told each problem. A line is parsed and, when it
    is a well-formed native record, made into its `Row` here; any other goes to `reader._record`, which reports what
    is wrong with it. With `scan`, the runs of lines it takes come as a `QuietRun`, `QuietRows` or `AudioRun`, and a
    line whose top level it read as its event's bytes, t, conn and direction: only the event is parsed. The lines of
    a region of lines in place are counted as they are read (`reader._counted`, for `_blocks`), or first
    (`count_lines`) when reading may stop inside it."""
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    ga_names = GA_NAMES
    directions = _DIRECTIONS
    dirs = DIRECTIONS
    seen: set[int] = set()  # the connections of the rows yielded: the scanner leaves their first line whole
    last_conn = 0  # the connection of the last row yielded (in `seen`)
    native = 0
    # The reader's counters, kept here and written back to it (`_sync`) at the end of each block and before it is
    # handed a line: its slow path numbers the records it makes from them.
    count = reader.count
    last_t: float = reader.last_t
    try:
        for start, lines, complete in blocks:
            plan: list[Any]
            if isinstance(lines, tuple):  # whole lines in place, for the scanner (uncounted: see `_blocks`)
                block: bytes = lines[0]
                a: int = lines[1]
                b: int = lines[2]
                n: int = lines[3]
                if until_line is not None:  # counted first, for reading may stop inside the region
                    n = count_lines(block, a, b) if count_lines is not None else block.count(b"\n", a, b)
                    reader.lines = start + n - 1
                if until_line is not None and start + n > until_line:
                    b = a
                    for _ in range(max(0, until_line - start + 1)):
                        b = block.index(b"\n", b) + 1
                    n = until_line - start + 1
                assert scan is not None
                plan = scan(block, a, b, table, seen, keep, detail, True)
                final = start + n - 1
            else:
                plan = lines
                if until_line is not None and start + len(plan) > until_line:
                    plan = plan[: max(0, until_line - start + 1)]
                    complete = True  # the line after the last kept one is known to exist
                final = start + len(plan) - 1
            nxt = start
            for raw in plan:
                if type(raw) is tuple:
                    run: tuple[Any, ...] = raw
                    if type(run[0]) is bytes:
                        # A record whose top level the scanner read (the inline path's checks passed): only its
                        # event is parsed, and the row is the one the inline path gives.
                        t_head: float = run[1]
                        conn_head: int = run[2]
                        try:
                            head: dict[str, Any] = loads(run[0])
                        except decode_error as e:  # pragma: no cover - the scanner reads only what orjson does
                            _sync(reader, count, last_t)
                            reader._problem(nxt, 1, f"not valid JSON ({e}); skipped")
                            nxt += 1
                            continue
                        head_type: str = head["type"]
                        native += 1
                        seq = count
                        count += 1
                        last_t = t_head
                        if conn_head != last_conn:
                            seen.add(conn_head)
                            last_conn = conn_head
                        yield seq, nxt, t_head, dirs[run[3]], conn_head, head, ga_names[head_type], head_type
                        nxt += 1
                        continue
                    # A run of lines the scanner took: only the counters and the clocks move.
                    k: int = run[0]
                    t_run: float = run[1]
                    conn_run: int = run[2]
                    d: int = run[3]
                    nxt += k
                    native += k
                    seq = count
                    count += k
                    last_t = t_run
                    if len(run) == 4:
                        yield QuietRun(k, nxt - 1, t_run, conn_run, dirs[d])
                    elif len(run) == 6:
                        yield QuietRows(k, nxt - 1, t_run, conn_run, dirs[d], run[4], run[5], seq)
                    else:
                        yield AudioRun(k, nxt - 1, t_run, conn_run, dirs[d], run[4], run[5], run[6], run[7], seq)
                    continue
                lineno = nxt
                nxt += 1
                try:
                    obj: Any = loads(raw)
                except decode_error as e:
                    _sync(reader, count, last_t)
                    obj = reader._unparsed(lineno, raw, complete or lineno != final, e)
                    if obj is None:
                        continue
                # The inline path: a native line whose fields are all as expected gives the row `_native` would
                # give. A missing key, a wrong shape or an unknown type or direction leaves it to `_record`, which
                # reports the problem.
                if type(obj) is dict:
                    top: dict[str, Any] = obj
                    event = top.get("event")
                    if type(event) is dict:
                        ev: dict[str, Any] = event
                        raw_type = ev.get("type")
                        way = top.get("dir")
                        t = top.get("t")
                        conn = top.get("conn")
                        etype = ga_names.get(raw_type) if type(raw_type) is str else None
                        direction = directions.get(way) if type(way) is str else None
                        if (
                            etype is not None
                            and direction is not None
                            and type(raw_type) is str
                            and type(t) is float
                            and type(conn) is int
                            and conn >= 1
                        ):
                            native += 1
                            seq = count
                            count += 1
                            last_t = t
                            if conn != last_conn:
                                seen.add(conn)
                                last_conn = conn
                            yield seq, lineno, t, direction, conn, ev, etype, raw_type
                            continue
                else:
                    _sync(reader, count, last_t)
                    reader._problem(lineno, 1, f"expected a JSON object, got {json_kind(obj)}; skipped")
                    continue
                _sync(reader, count, last_t)
                row = reader._record(lineno, obj)
                count, last_t = reader.count, reader.last_t
                if row is not None:
                    seen.add(row[4])
                    yield row
            reader._counted = nxt - start  # every line of a region is a line or in a run: all of them are counted
            _sync(reader, count, last_t)
            if native:
                reader.shapes["native"] = reader.shapes.get("native", 0) + native
                native = 0
            if until_line is not None and final >= until_line:
                break
    except OSError as e:
        _sync(reader, count, last_t)
        reader._problem(reader.count + 1, 1, f"read error: {e.strerror or e}; the rest of the file is skipped")
    finally:
        _sync(reader, count, last_t)
        if native:
            reader.shapes["native"] = reader.shapes.get("native", 0) + native


def _sync(reader: LineRecords, count: int, last_t: float) -> None:
    """Write the counters `entries` keeps back to `reader`."""
    reader.count = count
    reader.last_t = last_t
