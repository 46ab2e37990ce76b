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
#: The C scanner's `scan(block, start, end, table, seen, keep, detail)`.
Scan = Callable[[bytes, int, int, dict[bytes, int], set[int], int, bool], list[Any]]


def entries(
    reader: LineRecords,
    blocks: Iterator[tuple[int, Any, bool]],
    scan: Scan | None,
    table: dict[bytes, int],
    until_line: int | None,
    keep: int,
    detail: bool,
) -> Iterator[Entry]:
    """The records of `blocks` (`TraceReader._blocks`, with regions when `scan` is given), up to `until_line` when
    given, `reader` counting them (`count`, `last_t`, `shapes`) and told each problem. A line is parsed and, when it
    is a well-formed native record, made into its `Row` here; any other goes to `reader._record`, which reports what
    is wrong with it. With `scan`, the runs of lines it takes come as a `QuietRun`, `QuietRows` or `AudioRun`."""
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    ga_names = GA_NAMES
    directions = _DIRECTIONS
    dirs = DIRECTIONS
    seen: set[int] = set()  # the connections of the rows yielded: the scanner leaves their first line whole
    native = 0
    try:
        for start, lines, complete in blocks:
            plan: list[Any]
            if isinstance(lines, tuple):  # whole lines in place, for the scanner
                block: bytes = lines[0]
                a: int = lines[1]
                b: int = lines[2]
                n: int = lines[3]
                if until_line is not None and start + n > until_line:
                    b = a
                    for _ in range(max(0, until_line - start + 1)):
                        b = block.index(b"\n", b) + 1
                    n = until_line - start + 1
                assert scan is not None
                plan = scan(block, a, b, table, seen, keep, detail)
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
                    # A run of lines the scanner took: only the counters and the clocks move.
                    run: tuple[Any, ...] = raw
                    count: int = run[0]
                    t_run: float = run[1]
                    conn_run: int = run[2]
                    d: int = run[3]
                    nxt += count
                    native += count
                    seq = reader.count
                    reader.count = seq + count
                    reader.last_t = t_run
                    if len(run) == 4:
                        yield QuietRun(count, nxt - 1, t_run, conn_run, dirs[d])
                    elif len(run) == 6:
                        yield QuietRows(count, nxt - 1, t_run, conn_run, dirs[d], run[4], run[5], seq)
                    else:
                        yield AudioRun(count, nxt - 1, t_run, conn_run, dirs[d], run[4], run[5], run[6], run[7], seq)
                    continue
                lineno = nxt
                nxt += 1
                try:
                    obj: Any = loads(raw)
                except decode_error as e:
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
                            seq = reader.count
                            reader.count = seq + 1
                            reader.last_t = t
                            seen.add(conn)
                            yield seq, lineno, t, direction, conn, ev, etype, raw_type
                            continue
                else:
                    reader._problem(lineno, 1, f"expected a JSON object, got {json_kind(obj)}; skipped")
                    continue
                row = reader._record(lineno, obj)
                if row is not None:
                    seen.add(row[4])
                    yield row
            if native:
                reader.shapes["native"] = reader.shapes.get("native", 0) + native
                native = 0
            if until_line is not None and final >= until_line:
                break
    except OSError as e:
        reader._problem(reader.count + 1, 1, f"read error: {e.strerror or e}; the rest of the file is skipped")
    finally:
        if native:
            reader.shapes["native"] = reader.shapes.get("native", 0) + native
