"""Reading traces: native JSONL, bare events, and openai-realtime-api-beta `{time, source, event}` logs.

Streams line by line and never raises on bad input: each problem becomes a `Problem` with `file:line:col`,
and reading goes on with the next line. Only a file that cannot be opened at all raises `UnreadableInput`.
"""

from __future__ import annotations

import codecs
import datetime
import io
import os
import sys
from collections.abc import Iterable, Iterator
from typing import IO, Any

import orjson

from .catalog import BETA_TO_GA, side_of
from .escape import printable
from .trace import DIRECTIONS, Direction, Header, Problem, Record, dumps_header, dumps_record

#: Lines longer than this are skipped without being held in memory (a 50 MB line is a recording bug).
DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024
#: How many problems a reader keeps in full; beyond that it only counts them.
MAX_KEPT_PROBLEMS = 1000

_CHUNK = 1 << 20


class UnreadableInput(Exception):
    """The input cannot be opened or decoded at all (missing file, a directory, permission denied)."""


class TraceReader:
    """Iterate the records of one trace; problems and the header are collected on the reader.

    Usage::

        reader = TraceReader.open("trace.jsonl")
        for rec in reader:
            ...
        reader.problems, reader.problem_count, reader.header
    """

    def __init__(self, stream: IO[bytes], path: str, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self.path = path
        self.header: Header | None = None
        #: The first MAX_KEPT_PROBLEMS problems, in order.
        self.problems: list[Problem] = []
        #: How many problems there were in all.
        self.problem_count = 0
        #: Records yielded so far.
        self.count = 0
        #: Which input shape the lines were read as (`native`, `bare`, `rtb`), by count.
        self.shapes: dict[str, int] = {}
        self.last_t = 0.0
        self._stream = stream
        self._max = max_line_bytes
        # Connection inference for shapes that carry no `conn`: a new session.created starts a connection.
        self._inferred_conn = 0
        self._t0: float | None = None

    @classmethod
    def open(cls, path: str | os.PathLike[str], **kw: Any) -> TraceReader:
        p = os.fspath(path)
        if p == "-":
            return cls(sys.stdin.buffer, "<stdin>", **kw)
        try:
            if os.path.isdir(p):
                raise UnreadableInput(f"{p}: is a directory")
            stream = open(p, "rb")
        except OSError as e:
            raise UnreadableInput(f"{p}: {e.strerror or e}") from None
        return cls(stream, p, **kw)

    def close(self) -> None:
        if self._stream is not sys.stdin.buffer:
            self._stream.close()

    def __enter__(self) -> TraceReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- problems -----------------------------------------------------------------------------------

    def _problem(self, line: int, col: int, message: str, excerpt: str = "") -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_KEPT_PROBLEMS:
            self.problems.append(Problem(self.path, line, col, message, "warning", excerpt))

    # -- lines --------------------------------------------------------------------------------------

    def _lines(self) -> Iterator[tuple[int, bytes, bool]]:
        """(line number, bytes without the newline, had a newline). Oversized lines are reported, not held."""
        stream: Any = self._stream
        if not hasattr(stream, "peek"):
            stream = io.BufferedReader(stream)
        head = stream.peek(4)[:4]
        if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            self._problem(1, 1, "file is UTF-16; rtrace reads UTF-8 (converted on the fly)")
            text = stream.read().decode("utf-16", errors="replace")
            stream = io.BytesIO(text.encode("utf-8"))
        elif head.startswith(codecs.BOM_UTF8):
            stream.read(3)
        lineno = 0
        limit = self._max
        while True:
            chunk = stream.readline(limit + 1)
            if not chunk:
                return
            lineno += 1
            if len(chunk) > limit and not chunk.endswith(b"\n"):
                size = len(chunk)
                while True:
                    more = stream.readline(_CHUNK)
                    if not more:
                        break
                    size += len(more)
                    if more.endswith(b"\n"):
                        break
                self._problem(lineno, 1, f"line is {size:,} bytes, over the {limit:,}-byte limit; skipped")
                continue
            if chunk.endswith(b"\n"):
                yield lineno, chunk[:-1], True
            else:
                yield lineno, chunk, False

    def __iter__(self) -> Iterator[Record]:
        loads = orjson.loads
        decode_error = orjson.JSONDecodeError
        try:
            for lineno, raw, had_newline in self._lines():
                if not raw.strip():
                    continue
                try:
                    obj = loads(raw)
                except decode_error as e:
                    obj = self._recover(lineno, raw, had_newline, e)
                    if obj is None:
                        continue
                if type(obj) is not dict:
                    self._problem(lineno, 1, f"expected a JSON object, got {_json_kind(obj)}; skipped")
                    continue
                rec = self._record(lineno, obj)
                if rec is not None:
                    yield rec
        except OSError as e:
            self._problem(self.count + 1, 1, f"read error: {e.strerror or e}; the rest of the file is skipped")

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

    def _record(self, lineno: int, obj: dict[str, Any]) -> Record | None:
        event = obj.get("event")
        if type(event) is dict:
            direction = obj.get("dir")
            if direction is None:
                direction = obj.get("src")
            if direction is not None:
                return self._native(lineno, obj, event, direction)
            if "source" in obj:
                return self._rtb(lineno, obj, event)
        if "rtrace" in obj and self.count == 0 and self.header is None:
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
            self._problem(lineno, 1, f"`event` is {_json_kind(event)}, expected an object; skipped")
        else:
            self._problem(lineno, 1, "no `event` and no `type`: not a trace line; skipped")
        return None

    def _typed(self, lineno: int, event: dict[str, Any]) -> tuple[str, str] | None:
        raw_type = event.get("type")
        if type(raw_type) is not str or not raw_type:
            self._problem(lineno, 1, "event has no `type`; skipped")
            return None
        return BETA_TO_GA.get(raw_type, raw_type), raw_type

    def _native(self, lineno: int, obj: dict[str, Any], event: dict[str, Any], direction: Any) -> Record | None:
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
        if type(t) is not float:
            if type(t) is int:
                t = float(t)
            else:
                if t is not None:
                    self._problem(lineno, 1, f"`t` is {_json_kind(t)}, expected seconds; using {self.last_t}")
                t = self.last_t
        conn = obj.get("conn")
        if type(conn) is not int or conn < 1:
            if conn is not None:
                self._problem(
                    lineno, 1, f"`conn` is {printable(repr(conn), 40)}, expected an ordinal >= 1; using inferred"
                )
            conn = self._infer_conn(etype)
        if side_of(etype) is None:
            self._problem(lineno, 1, f"unknown event type {printable(repr(raw_type), 60)}; kept, not interpreted")
        self.last_t = t
        rec = Record(self.count, lineno, t, direction, conn, event, etype, raw_type)
        self.count += 1
        return rec

    def _infer_conn(self, etype: str) -> int:
        if etype == "session.created" or self._inferred_conn == 0:
            self._inferred_conn += 1
        return self._inferred_conn

    def _bare(self, lineno: int, event: dict[str, Any]) -> Record | None:
        self.shapes["bare"] = self.shapes.get("bare", 0) + 1
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
        rec = Record(self.count, lineno, self.last_t, side, conn, event, etype, raw_type)
        self.count += 1
        return rec

    def _rtb(self, lineno: int, obj: dict[str, Any], event: dict[str, Any]) -> Record | None:
        self.shapes["rtb"] = self.shapes.get("rtb", 0) + 1
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
        rec = Record(self.count, lineno, t, side, self._infer_conn(etype), event, etype, raw_type)
        self.count += 1
        return rec


def _parse_time(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) / (1000.0 if value > 1e11 else 1.0)
    if isinstance(value, str):
        try:
            return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def _json_kind(value: Any) -> str:
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


def load(path: str | os.PathLike[str], **kw: Any) -> tuple[list[Record], TraceReader]:
    """Read a whole trace into memory (tests, `show`); analysis streams instead."""
    with TraceReader.open(path, **kw) as reader:
        records = list(reader)
    return records, reader


def write(records: Iterable[Record | dict[str, Any]], fp: IO[bytes], header: dict[str, Any] | None = None) -> None:
    """Write records as native JSONL."""
    if header is not None:
        fp.write(dumps_header(header))
    for rec in records:
        fp.write(dumps_record(rec))
