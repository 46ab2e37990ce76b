"""Counting the work of a fold, for the unit tests that pin a complexity fix without timing anything: the lines of
rtrace's own code a call executes (`sys.settrace`), and traces of each session shape that once cost quadratic time
(`bench/scale.py`) at any size.

Linear work grows with the trace; a walk of every pending change per ack, of every connection per open, of every
lost change per create grows with its square. A test folds a shape at n and at 4n and bounds the ratio.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import rtrace
from rtrace.core.trace import Record

from .strategies import to_records
from .tracebuilder import TraceBuilder, fc, fco, user_msg

_PACKAGE = str(Path(rtrace.__file__).parent)


def executed_lines(fn: Callable[[], Any]) -> int:
    """How many lines of rtrace's code `fn()` executes."""
    count = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename.startswith(_PACKAGE) else None

    sys.settrace(calls)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count


def growth(make: Callable[[int], list[Record]], fold: Callable[[list[Record]], Any], n: int) -> float:
    """Lines executed folding `make(4n)` over those folding `make(n)`: about 4 when the fold is linear. Only where
    the fold runs from its source (compiled code executes no line): mark the test `source` (tests/conftest.py)."""
    small, large = make(n), make(4 * n)
    lines = executed_lines(lambda: fold(small))
    assert lines, "no line of rtrace executed: the fold is compiled here (mark the test `source`)"
    return executed_lines(lambda: fold(large)) / lines


#: The bound a linear fold stays under from n to 4n (a quadratic one is past 8 at the sizes the tests use).
LINEAR = 4.6


def pipelined_creates(n: int, ids: bool = True, pairs: bool = False) -> list[Record]:
    """One connection: n creates sent back to back (user messages, with or without item ids, or function_call +
    output pairs), then acknowledged in order, then one response asked for."""
    b = TraceBuilder()
    b.open()
    items = []
    for k in range(n):
        if pairs:
            batch = [fc(f"item_c{k}", f"call_{k}"), fco(f"item_o{k}", f"call_{k}")]
        else:
            batch = [user_msg(f"item_u{k}", f"hello {k}")]
        for item in batch:
            sent = dict(item)
            if not ids:
                del sent["id"]
            b.create(sent, dt=0.0001)
            items.append(item)
    prev = None
    for item in items:
        b.added(item, prev, dt=0.0001)
        prev = item["id"]
    b.response_create()
    return to_records(b.lines)


def reconnects(n: int, unacked: bool = False) -> list[Record]:
    """n connections in a row, each replaying the two items the client holds, one turn, then a clean close (with
    `unacked`: lost with a user message create unanswered, which the next connection re-sends)."""
    b = TraceBuilder()
    held: list[dict[str, Any]] = []
    for k in range(1, n + 1):
        b.open(conn=k)
        prev = None
        for item in held:
            b.create(item, prev)
            b.added(item, prev)
            prev = item["id"]
        msg = user_msg(f"item_u{k}", f"turn {k}")
        b.create(msg, prev)
        b.added(msg, prev)
        held = [*held[-1:], msg]
        if unacked:
            lost = user_msg(f"item_l{k}", f"lost {k}")
            b.create(lost, msg["id"])
            held = [*held[-1:], lost]
            b.close(1006)
        else:
            b.close(1000)
    return to_records(b.lines)


class Parses:
    """How many JSON documents rtrace parsed into objects (`orjson.loads` calls) since `count_parses` or the last
    `n = 0`: the fast path's tests pin that the scanner took the other lines whole."""

    def __init__(self) -> None:
        self.n = 0


def count_parses(monkeypatch: Any) -> Parses:
    """Counts `orjson.loads` calls from here to the test's end (`monkeypatch` undoes it)."""
    import orjson

    parses = Parses()
    loads = orjson.loads

    def counted(data: Any) -> Any:
        parses.n += 1
        return loads(data)

    monkeypatch.setattr(orjson, "loads", counted)
    return parses
