"""The trace model: one record per JSONL line, the optional header, and input problems.

Owns the native format (`{"t", "dir", "conn", "event"}` per line, optional `{"rtrace": 1}` header) and how
a record is written back. It does not read files (see `loader`) and knows nothing of conversation state.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

import orjson
from mypy_extensions import mypyc_attr

FORMAT_VERSION = 1

Direction = Literal["client", "server", "meta", "local"]
DIRECTIONS: tuple[Direction, ...] = ("client", "server", "meta", "local")


class Record:
    """One event of a trace, as it crossed the wire (or as a recorder noted it).

    `seq` is the 0-based position among records (ordering); `line` is the 1-based line of the file it came
    from (for people). The two are never mixed.
    """

    __slots__ = ("conn", "dir", "event", "line", "raw_type", "seq", "t", "type")

    def __init__(
        self,
        seq: int,
        line: int,
        t: float,
        dir: Direction,
        conn: int,
        event: dict[str, Any],
        type: str,
        raw_type: str,
    ) -> None:
        #: 0-based ordinal among the trace's records.
        self.seq = seq
        #: 1-based line number in the source file.
        self.line = line
        #: Seconds since the trace started.
        self.t = t
        #: Who sent it: client, server, meta (the recorder) or local (a client-side annotation).
        self.dir: Direction = dir
        #: Websocket connection ordinal, 1-based. Each connection is a new, empty server conversation.
        self.conn = conn
        #: The event exactly as it crossed the wire.
        self.event = event
        #: The event type under its GA name.
        self.type = type
        #: The event type as written in the trace (a beta name stays a beta name here).
        self.raw_type = raw_type

    def __repr__(self) -> str:
        return f"Record(line={self.line}, t={self.t}, dir={self.dir}, conn={self.conn}, type={self.type!r})"

    def to_json(self) -> dict[str, Any]:
        return {"t": self.t, "dir": self.dir, "conn": self.conn, "event": self.event}


class QuietRun(NamedTuple):
    """Records in a row on one connection and direction whose (dir, type) has no transition (`reducer.TRANSITIONS`):
    a fold only moves the clocks and counters for them (`reducer.tick`). What the reader's fast path yields for
    the lines its scanner takes (`loader.Rows.entries`) and what `engine.fold.digest` passes on."""

    #: How many records.
    size: int
    #: The line of the last one.
    line: int
    #: The `t` of the last one.
    t: float
    conn: int
    dir: Direction


class QuietRows(NamedTuple):
    """A `QuietRun` with each record's `t` and type: what the reader's fast path yields for an observer of the fold
    that records every event (the HTML report's timeline), which a quiet record's event itself does not concern."""

    #: How many records.
    size: int
    #: The line of the last one.
    line: int
    #: The `t` of the last one.
    t: float
    conn: int
    dir: Direction
    #: Each one's `t`.
    times: tuple[float, ...]
    #: Each one's type as written (a beta name stays a beta name).
    raw_types: tuple[str, ...]
    #: The `seq` of the first.
    seq: int


class AudioRun(NamedTuple):
    """Audio deltas in a row for one item on one connection and direction (`reducer.AUDIO_DELTAS`), as the reader's
    fast path takes them: the clocks move and the item's audio grows by `n_bytes` (`reducer.audio_run`), or each
    one is stepped (from `times` and `sizes`) when a connection awaits its pairing."""

    #: How many records.
    size: int
    #: The line of the last one.
    line: int
    #: The `t` of the last one.
    t: float
    conn: int
    dir: Direction
    item_id: str
    #: The audio bytes of all of them.
    n_bytes: int
    #: Each one's `t`.
    times: Sequence[float]
    #: Each one's audio bytes.
    sizes: Sequence[int]
    #: The `seq` of the first.
    seq: int


@mypyc_attr(native_class=False)  # crosses processes (pickled): a plain class where compiled
@dataclasses.dataclass(frozen=True)
class Header:
    """The optional first line `{"rtrace": 1, ...}`: recorder, versions, model. Unknown keys are kept."""

    version: int
    fields: dict[str, Any]


@mypyc_attr(native_class=False)  # crosses processes (pickled): a plain class where compiled
@dataclasses.dataclass(frozen=True)
class Problem:
    """Something wrong with the input at one place. A problem never stops the analysis."""

    path: str
    line: int
    col: int
    message: str
    #: `warning` (the line was skipped or read with a guess) or `error` (the input as a whole is unusable).
    severity: Literal["warning", "error"] = "warning"
    #: A short excerpt of the offending text, already made printable, for the caret display.
    excerpt: str = ""

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.message}"


#: What replaces a value nested deeper than `MAX_DEPTH`: no real event nests this far, Python recursion and
#: `orjson.dumps` (255 levels) stop not far beyond. Shared by the trace writer and `redact`.
TOO_DEEP = "[rtrace: nested too deeply]"
MAX_DEPTH = 200


def _cut_depth(value: Any, depth: int = 0) -> Any:
    if depth >= MAX_DEPTH and isinstance(value, (dict, list)):
        return TOO_DEEP
    if isinstance(value, dict):
        return {k: _cut_depth(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut_depth(v, depth + 1) for v in value]
    return value


def encode(value: Any) -> bytes:
    """JSON for a trace line. Never raises on what a websocket can carry: a value nested too deeply for one line
    keeps its outer levels and says where it was cut."""
    try:
        return orjson.dumps(value)
    except (orjson.JSONEncodeError, RecursionError):
        return orjson.dumps(_cut_depth(value), default=str)


def dumps_record(rec: Record | dict[str, Any]) -> bytes:
    """One native JSONL line (with its newline) for a record."""
    obj = rec.to_json() if isinstance(rec, Record) else rec
    return encode(obj) + b"\n"


def dumps_header(fields: dict[str, Any]) -> bytes:
    return orjson.dumps({"rtrace": FORMAT_VERSION, **fields}) + b"\n"
