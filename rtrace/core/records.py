"""The reader's slow path: a line the inline path of `TraceReader.rows` did not take, parsed whole, made into a
`Row` (native, bare, or an openai-realtime-api-beta `{time, source, event}` line) or into the `Problem`s that say,
at its `file:line:col`, why it was skipped or what was assumed. Mixed into `core.loader.TraceReader`: no I/O here,
and nothing raises on bad input.
"""

from __future__ import annotations

import datetime
from typing import Any

import orjson

from .catalog import BETA_TO_GA, side_of
from .escape import printable
from .trace import DIRECTIONS, Direction, Header, Problem

#: How many problems a reader keeps in full; beyond that it only counts them.
MAX_KEPT_PROBLEMS = 1000

#: A record as a plain tuple, the fields of `Record` in order: (seq, line, t, dir, conn, event, type, raw_type).
Row = tuple[int, int, float, Direction, int, dict[str, Any], str, str]


class LineRecords:
    """A trace reader's problems and its reading of one parsed line (`TraceReader` keeps the state declared here)."""

    path: str
    header: Header | None
    #: The first MAX_KEPT_PROBLEMS problems, in order.
    problems: list[Problem]
    #: How many problems there were in all.
    problem_count: int
    count: int
    shapes: dict[str, int]
    last_t: float
    #: The lines read so far, and those of the last region of lines in place once its reader has read them.
    lines: int
    _counted: int
    inferred: int
    _max: int
    _at_start: bool
    _inferred_conn: int
    _t0: float | None

    def _problem(self, line: int, col: int, message: str, excerpt: str = "") -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_KEPT_PROBLEMS:
            self.problems.append(Problem(self.path, line, col, message, "warning", excerpt))

    def _unparsed(self, lineno: int, raw: bytes | int, had_newline: bool, e: Exception) -> Any:
        """A line orjson refused: blank (skipped), oversized (reported), or one `_recover` may still read."""
        if type(raw) is int:
            self._problem(lineno, 1, f"line is {raw:,} bytes, over the {self._max:,}-byte limit; skipped")
            return None
        assert isinstance(raw, bytes)
        if not raw.strip():
            return None
        return self._recover(lineno, raw, had_newline, e)

    def _recover(self, lineno: int, raw: bytes, had_newline: bool, e: Exception) -> Any:
        """A line orjson refused: invalid UTF-8 is decoded with replacement and retried; else a problem."""
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as ue:
            col = len(raw[: ue.start].decode("utf-8", errors="replace")) + 1
            try:
                obj = orjson.loads(raw.decode("utf-8", errors="replace"))
            except orjson.JSONDecodeError:
                self._problem(lineno, col, f"invalid UTF-8 (byte 0x{raw[ue.start]:02x}) and not valid JSON; skipped")
                return None
            self._problem(lineno, col, f"invalid UTF-8 (byte 0x{raw[ue.start]:02x}); read with replacement characters")
            return obj
        text = raw.decode("utf-8")
        pos = getattr(e, "pos", 0) or 0
        col = pos + 1
        excerpt = printable(text[max(0, pos - 40) : pos + 40], 80)
        if not had_newline:
            self._problem(lineno, col, "truncated last line (the writer stopped mid-line); skipped", excerpt)
        else:
            msg = getattr(e, "msg", str(e)).split(":")[0]
            self._problem(lineno, col, f"malformed JSON: {msg}; skipped", excerpt)
        return None

    def _record(self, lineno: int, obj: dict[str, Any]) -> Row | None:
        event = obj.get("event")
        if type(event) is dict:
            direction = obj.get("dir")
            if direction is None:
                direction = obj.get("src")
            if direction is not None:
                return self._native(lineno, obj, event, direction)
            if "source" in obj:
                return self._rtb(lineno, obj, event)
        if "rtrace" in obj and self.count == 0 and self.header is None and self._at_start:
            version = obj.get("rtrace")
            if not isinstance(version, int) or version < 1:
                self._problem(lineno, 1, f"header has rtrace version {version!r}; expected 1")
                version = 1
            elif version > 1:
                self._problem(lineno, 1, f"header is rtrace format {version}; this rtrace reads 1 (read as 1)")
            self.header = Header(version, {k: v for k, v in obj.items() if k != "rtrace"})
            return None
        if "type" in obj:
            return self._bare(lineno, obj)
        if event is not None:
            self._problem(lineno, 1, f"`event` is {json_kind(event)}, expected an object; skipped")
        else:
            self._problem(lineno, 1, "no `event` and no `type`: not a trace line; skipped")
        return None

    def _typed(self, lineno: int, event: dict[str, Any]) -> tuple[str, str] | None:
        raw_type = event.get("type")
        if type(raw_type) is not str or not raw_type:
            self._problem(lineno, 1, "event has no `type`; skipped")
            return None
        return BETA_TO_GA.get(raw_type, raw_type), raw_type

    def _native(self, lineno: int, obj: dict[str, Any], event: dict[str, Any], direction: Any) -> Row | None:
        self.shapes["native"] = self.shapes.get("native", 0) + 1
        typed = self._typed(lineno, event)
        if typed is None:
            return None
        etype, raw_type = typed
        if direction not in DIRECTIONS:
            self._problem(
                lineno,
                1,
                f"`dir` is {printable(repr(direction), 40)}, expected one of {', '.join(DIRECTIONS)}; skipped",
            )
            return None
        t = obj.get("t")
        conn = obj.get("conn")
        if (type(t) is not float and type(t) is not int) or type(conn) is not int or conn < 1:
            self.inferred += 1
        if type(t) is not float:
            if type(t) is int:
                t = float(t)
            else:
                if t is not None:
                    self._problem(lineno, 1, f"`t` is {json_kind(t)}, expected seconds; using {self.last_t}")
                t = self.last_t
        if type(conn) is not int or conn < 1:
            if conn is not None:
                self._problem(
                    lineno, 1, f"`conn` is {printable(repr(conn), 40)}, expected an ordinal >= 1; using inferred"
                )
            conn = self._infer_conn(etype)
        if side_of(etype) is None:
            self._problem(lineno, 1, f"unknown event type {printable(repr(raw_type), 60)}; kept, not interpreted")
        self.last_t = t
        row: Row = (self.count, lineno, t, direction, conn, event, etype, raw_type)
        self.count += 1
        return row

    def _infer_conn(self, etype: str) -> int:
        if etype == "session.created" or self._inferred_conn == 0:
            self._inferred_conn += 1
        return self._inferred_conn

    def _bare(self, lineno: int, event: dict[str, Any]) -> Row | None:
        self.shapes["bare"] = self.shapes.get("bare", 0) + 1
        self.inferred += 1
        typed = self._typed(lineno, event)
        if typed is None:
            return None
        etype, raw_type = typed
        side = side_of(etype)
        if side is None:
            self._problem(
                lineno, 1, f"unknown event type {printable(repr(raw_type), 60)} with no `dir`: side unknown; skipped"
            )
            return None
        conn = self._infer_conn(etype)
        row: Row = (self.count, lineno, self.last_t, side, conn, event, etype, raw_type)
        self.count += 1
        return row

    def _rtb(self, lineno: int, obj: dict[str, Any], event: dict[str, Any]) -> Row | None:
        self.shapes["rtb"] = self.shapes.get("rtb", 0) + 1
        self.inferred += 1
        typed = self._typed(lineno, event)
        if typed is None:
            return None
        etype, raw_type = typed
        source = obj.get("source")
        side: Direction
        if source in ("client", "server"):
            side = source
        else:
            guessed = side_of(etype)
            if guessed is None:
                self._problem(lineno, 1, f"`source` is {printable(repr(source), 40)} and the type is unknown; skipped")
                return None
            side = guessed
        t = _parse_time(obj.get("time"))
        if t is None:
            t = self.last_t
        else:
            if self._t0 is None:
                self._t0 = t
            t = max(0.0, t - self._t0)
        self.last_t = t
        row: Row = (self.count, lineno, t, side, self._infer_conn(etype), event, etype, raw_type)
        self.count += 1
        return row


def _parse_time(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) / (1000.0 if value > 1e11 else 1.0)
    if isinstance(value, str):
        try:
            return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def json_kind(value: Any) -> str:
    """`a string`, `an array`, `null`, ...: a JSON value's kind as messages name it."""
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (int, float)):
        return "a number"
    return "an object"
