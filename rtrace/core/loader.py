"""Reading traces: native JSONL, bare events, and openai-realtime-api-beta `{time, source, event}` logs.

A trace compressed with gzip, bzip2, xz or zstd (zstd needs the `zstandard` package: `rtrace-cli[zstd]`) is read as it
is decompressed, found by its magic bytes whatever its name (`compression_of`), a block at a time: the line limits
below bound the decompressed data, so a decompression bomb costs time, never memory. A stream that breaks (a
truncated or corrupt file) is a problem at the line where it broke; the lines before it are read.

Streams line by line and never raises on bad input: each problem becomes a `Problem` with `file:line:col`,
and reading goes on with the next line. Only a file that cannot be opened at all raises `UnreadableInput`. A fold
reads through `Rows.entries`, where the optional C scanner (`_scan.c`) takes the lines a full parse would only
count without parsing them, and reads the top level of the others (only their event is parsed); the pure path
gives the same records.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

import orjson

from .inputs import (
    _CHUNK,
    ALLOW_SPECIAL_ENV,
    COMPRESSED_SUFFIXES,
    NO_ZSTD,
    TRACE_SUFFIXES,
    UnreadableInput,
    _Decompressed,
    _Recoded,
    compression_of,
    compression_of_file,
    decompressor,
    is_trace_name,
    open_input,
    open_trace,
    special_allowed,
)
from .jsonpos import _skip_space, _skip_value, column_of
from .records import MAX_KEPT_PROBLEMS, LineRecords, Row, json_kind
from .rowpath import GA_NAMES, entries
from .trace import (
    DIRECTIONS,
    AudioRun,
    Header,
    Problem,
    QuietRows,
    QuietRun,
    Record,
    dumps_header,
    dumps_record,
)

#: Lines longer than this are skipped without being held in memory (a 50 MB line is a recording bug).
DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024
#: How far past the start of an oversized line a reader looks for its end: `MAX_SKIP_FACTOR` times the line limit,
#: and at least `MIN_SKIP_BYTES`; beyond that (`/dev/zero`, a stream with no newline) the rest of the input is not
#: read.
MAX_SKIP_FACTOR = 16
MIN_SKIP_BYTES = 256 * 1024 * 1024
#: Wire name -> GA name of every event type of the catalogue (beta names included): see `rowpath.GA_NAMES`.
_GA_NAMES = GA_NAMES

#: Whole lines of a block, in place: (the block, where the first starts, where the last one's newline ends, how many).
Region = tuple[bytes, int, int, int]


try:  # the fast path's scanner, when it was built (setup.py); without it every line takes the pure path
    from . import _scan as _scanner
except ImportError:  # pragma: no cover - a machine without a C compiler
    _scanner = None  # type: ignore[assignment]


class Rows:
    """What `TraceReader.rows` returns: iterated, the records as `Row`s, every line parsed (the reference path)."""

    __slots__ = ("reader",)

    def __init__(self, reader: TraceReader) -> None:
        self.reader = reader

    def __iter__(self) -> Iterator[Row]:
        return self.reader._entries()  # type: ignore[return-value]

    def entries(
        self,
        transitions: frozenset[tuple[str, str]],
        audio: frozenset[tuple[str, str]],
        until_line: int | None = None,
        keep: int = 0,
        detail: bool = False,
    ) -> Iterator[Row | QuietRun | QuietRows | AudioRun]:
        """The records for a fold, with the lines a full parse would only count taken as runs (see
        `TraceReader._entries`): a line whose (dir, type) is not in `transitions` (it only moves the clocks), or
        is in `audio` (an audio delta: only an item's audio length moves). `keep`: a connection whose records all
        come as `Row`s (0: none). `detail`: a run of quiet records comes as `QuietRows` (each one's `t` and type).
        Without the C scanner, every record comes as a `Row`: the fold then makes the same runs itself, at the speed
        of the pure path."""
        return self.reader._entries(scan_table(transitions, audio), until_line, keep, detail)


#: Newlines in a region of a block: the scanner's `lines` (`memchr`), else `bytes.count` (an older build).
_count_lines: Callable[[bytes, int, int], int] = getattr(_scanner, "lines", None) or (
    lambda b, i, j: b.count(b"\n", i, j)
)

#: The largest connection number the C scanner takes a line of (nine digits); a line of a larger one is parsed whole.
SCANNED_CONN_MAX = 999_999_999

_TABLES: dict[tuple[frozenset[tuple[str, str]], frozenset[tuple[str, str]]], dict[bytes, int]] = {}


def scan_table(transitions: frozenset[tuple[str, str]], audio: frozenset[tuple[str, str]]) -> dict[bytes, int]:
    """What the scanner takes of each raw event type of the catalogue (beta names included): bit k when it is quiet
    in direction k of `DIRECTIONS`, bit 4 + k when it is an audio delta there."""
    table = _TABLES.get((transitions, audio))
    if table is None:
        table = {}
        for raw, ga in _GA_NAMES.items():
            bits = 0
            for k, direction in enumerate(DIRECTIONS):
                if (direction, ga) in audio:
                    bits |= 16 << k
                elif (direction, ga) not in transitions:
                    bits |= 1 << k
            table[raw.encode()] = bits
        _TABLES[(transitions, audio)] = table
    return table


class TraceReader(LineRecords):
    """Iterate the records of one trace; problems and the header are collected on the reader.

    Usage::

        reader = TraceReader.open("trace.jsonl")
        for rec in reader:
            ...
        reader.problems, reader.problem_count, reader.header
    """

    def __init__(
        self,
        stream: IO[bytes],
        path: str,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        at_start: bool = True,
        on_read: Callable[[int], None] | None = None,
    ) -> None:
        """`at_start`: the stream starts at the beginning of the
        trace; a reader of a later part (see `parallel.analyze_split`) looks for no BOM, UTF-16 or header, and
        numbers its lines from 1 at the stream's position. `on_read`: told, after each block, how far into
        `stream` reading has gone (bytes of the file, compressed or not): a progress bar's fraction."""
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
        #: Lines read so far, the last one included (blank and bad lines count).
        self.lines = 0
        #: Records that took a value from earlier lines: a missing `t` (the previous record's) or `conn`
        #: (inferred from the `session.created` seen before), and every bare or rtb line.
        self.inferred = 0
        self._stream = stream
        self._max = max_line_bytes
        self._at_start = at_start
        # Connection inference for shapes that carry no `conn`: a new session.created starts a connection.
        self._inferred_conn = 0
        self._t0: float | None = None
        #: The line after which reading stopped for want of a line end (see `MAX_SKIP_FACTOR`), if it did.
        self.gave_up: int | None = None
        #: The compression the input was read through (`compression_of`), if any.
        self.compression: str | None = None
        #: The line at which a compressed stream broke (truncated, corrupt), if it did: the rest is lost.
        self.broken: int | None = None
        #: Why the input holds no trace at all, when it does not: "the file is empty", or "not a text trace ..."
        #: (binary data: nothing of it is read, rather than a problem for each of its lines). Known once read.
        self.unusable: str | None = None
        self._decompressed: _Decompressed | None = None
        self._on_read = on_read
        #: Where lines start in the file, (line, byte offset), one every block or so, once read: what a report
        #: quoting a few lines seeks to (`report.excerpt.read_lines`) instead of reading the file again up to
        #: them. None when the bytes read are not the file's own (compressed, UTF-16, a later part of a trace).
        self.marks: list[tuple[int, int]] | None = None
        self._offset = 0  # of the next block in the file, while `marks` is kept
        self._counted = -1  # the lines of the region `_blocks` yielded last, once its caller has read them

    @classmethod
    def open(cls, path: str | os.PathLike[str], **kw: Any) -> TraceReader:
        p = os.fspath(path)
        if p == "-":
            return cls(sys.stdin.buffer, "<stdin>", **kw)
        return cls(open_input(p), p, **kw)

    def close(self) -> None:
        if self._stream is not sys.stdin.buffer:
            self._stream.close()

    def __enter__(self) -> TraceReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- lines --------------------------------------------------------------------------------------

    def _open_stream(self) -> Any:
        """The byte stream to read, past a UTF-8 BOM; UTF-16 is converted to UTF-8 on the fly."""
        stream: Any = self._stream
        if not self._at_start:
            return stream
        if not hasattr(stream, "peek"):
            stream = io.BufferedReader(stream)
        compression = compression_of(stream.peek(8)[:8])
        if compression is not None:
            self.compression = compression
            self._decompressed = _Decompressed(stream, compression)
            stream = io.BufferedReader(self._decompressed, _CHUNK)
        head = stream.peek(4)[:4]
        codec = None
        if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            codec = "utf-16"
        elif len(head) == 4 and head[0] and not head[1] and head[2] and not head[3]:
            codec = "utf-16-le"  # no BOM: ASCII JSON text with every other byte NUL
        elif len(head) == 4 and not head[0] and head[1] and not head[2] and head[3]:
            codec = "utf-16-be"
        if codec is not None:
            self._problem(1, 1, "file is UTF-16; rtrace reads UTF-8 (converted on the fly)")
            stream = io.BufferedReader(_Recoded(stream, codec), _CHUNK)
        elif head.startswith(codecs.BOM_UTF8):
            stream.read(3)
            self._offset = 3
        if codec is None and compression is None:
            self.marks = []
        return stream

    def _blocks(self, regions: bool = False) -> Iterator[tuple[int, list[bytes | int] | Region, bool]]:
        """The file as runs of lines: (number of the first line, lines without their newline, whether the last one
        had a newline). Read in large blocks, split in C: per-line Python work is the caller's only.

        An oversized line is never held: in its place the run carries its size (an `int`), which `orjson.loads`
        refuses like any bad line, so the caller reports it on the error path at no cost to good lines. Its end is
        looked for at most `MAX_SKIP_FACTOR` times the limit (`MIN_SKIP_BYTES` at least) past its start: beyond
        that, the rest of the input is not read (a problem says so, and `gave_up` holds the line).

        With `regions` (and a line limit of at least a block), the whole lines inside a block come unsplit, as a
        `Region` (the block, where they start, where the last one's newline ends, how many): the scanner reads them
        in place. A line that spans blocks still comes as a list of one.
        """
        stream = self._open_stream()
        count_lines = _count_lines
        limit = self._max
        horizon = max(limit * MAX_SKIP_FACTOR, MIN_SKIP_BYTES)
        lineno = 1
        pieces: list[bytes] = []  # the unfinished line, across blocks
        held = 0  # its length so far
        skipped = -1  # >= 0: inside an oversized line, this many bytes of it seen
        sniff = self._at_start  # the first block of the trace is yet to come: is it text at all?
        while True:
            block = stream.read(_CHUNK)
            if not block:
                break
            if self._on_read is not None:
                self._tell_position()
            if sniff:
                sniff = False
                self.unusable = not_text(block, self.compression)
                if self.unusable is not None:
                    return
            if self.marks is not None:  # the first line that starts in this block, and where
                nl = block.find(b"\n")
                if nl >= 0:
                    self.marks.append((lineno + 1, self._offset + nl + 1))
                self._offset += len(block)
            if skipped >= 0:
                nl = block.find(b"\n")
                if nl < 0:
                    skipped += len(block)
                    if skipped > horizon:
                        self._stop_looking(lineno, skipped)
                        return
                    continue
                self.lines = lineno
                yield lineno, [skipped + nl + 1], True
                lineno += 1
                skipped = -1
                block = block[nl + 1 :]
            if regions and limit >= _CHUNK:
                at = 0
                if pieces:  # the line the previous blocks began ends in this one (or goes on past it)
                    nl = block.find(b"\n")
                    if nl < 0:
                        pieces.append(block)
                        held += len(block)
                        if held > limit:
                            skipped, pieces, held = held, [], 0
                            if skipped > horizon:
                                self._stop_looking(lineno, skipped)
                                return
                        continue
                    pieces.append(block[:nl])
                    joined = b"".join(pieces)
                    pieces, held = [], 0
                    self.lines = lineno
                    yield lineno, [joined if len(joined) <= limit else len(joined) + 1], True
                    lineno += 1
                    at = nl + 1
                last = block.rfind(b"\n", at)
                if last >= 0:
                    # How many lines, the caller says once it has read them (`_counted`): the scanner finds each
                    # line's end as it parses it, and counting them here first was a pass of its own over the block.
                    self._counted = -1
                    yield lineno, (block, at, last + 1, -1), True
                    count = self._counted if self._counted >= 0 else count_lines(block, at, last + 1)
                    self.lines = lineno + count - 1
                    lineno += count
                    at = last + 1
                if at < len(block):
                    pieces.append(block[at:])
                    held += len(block) - at
                    if held > limit:
                        skipped, pieces, held = held, [], 0
                        if skipped > horizon:
                            self._stop_looking(lineno, skipped)
                            return
                continue
            # bytes, or the size of an oversized line in its place
            lines: list[Any] = block.split(b"\n")
            tail: bytes = lines.pop()
            if pieces and lines:
                first: bytes = lines[0]
                pieces.append(first)
                lines[0] = b"".join(pieces) if held + len(first) <= limit else held + len(first) + 1
                pieces, held = [], 0
            if limit < _CHUNK:
                lines = [raw if type(raw) is int or len(raw) <= limit else len(raw) + 1 for raw in lines]
            if lines:
                self.lines = lineno + len(lines) - 1
                yield lineno, lines, True
                lineno += len(lines)
            if tail:
                pieces.append(tail)
                held += len(tail)
                if held > limit:
                    skipped, pieces, held = held, [], 0
                    if skipped > horizon:
                        self._stop_looking(lineno, skipped)
                        return
        if skipped >= 0:
            self.lines = lineno
            yield lineno, [skipped], False
        elif pieces:
            last = b"".join(pieces)
            self.lines = lineno
            yield lineno, [last if len(last) <= limit else len(last)], False
        broke = self._decompressed is not None and self._decompressed.error is not None
        if sniff and not broke:
            self.unusable = "the file is empty" if self.compression is None else f"the {self.compression} data is empty"
        if self._decompressed is not None and self._decompressed.error is not None:
            self.broken = lineno  # the first line not read whole
            self._problem(
                self.broken,
                1,
                self._decompressed.unavailable
                or f"the {self._decompressed.codec} stream breaks here ({self._decompressed.error}): the file is "
                "truncated or corrupt; the lines before are read, the rest is lost",
            )

    def _tell_position(self) -> None:
        assert self._on_read is not None
        try:
            self._on_read(self._stream.tell())
        except (OSError, ValueError, AttributeError):  # a pipe or a stream without a position: nothing to tell
            self._on_read = None

    def _stop_looking(self, lineno: int, seen: int) -> None:
        self.lines = lineno
        self.gave_up = lineno
        self._problem(
            lineno,
            1,
            f"no line end in the {seen:,} bytes from here (lines over {self._max:,} bytes are skipped, their end "
            f"looked for up to {max(self._max * MAX_SKIP_FACTOR, MIN_SKIP_BYTES):,} bytes); the rest of the input is "
            "not read",
        )

    def raw_lines(self) -> Iterator[tuple[int, bytes | int, bool]]:
        """(line number, the line without its newline or the size of an oversized one, whether it had a newline),
        BOM and UTF-16 handled as for records: what `rtrace redact` rewrites line for line."""
        for start, lines, complete in self._blocks():
            last = start + len(lines) - 1
            for lineno, raw in enumerate(lines, start):
                yield lineno, raw, complete or lineno != last

    def rows(self) -> Rows:
        """The records as plain tuples: the fields of `Record`, in order (see `Row`), when iterated.

        The fast form behind `__iter__`, for callers that build a `Record` only when they need one (`analysis`).
        A well-formed native line takes the inline path; anything else goes through the general one. What it
        returns also offers `Rows.entries`, the fast path of a fold (`engine.fold.Fold.rows`).
        """
        return Rows(self)

    def _entries(
        self, table: dict[bytes, int] | None = None, until_line: int | None = None, keep: int = 0, detail: bool = False
    ) -> Iterator[Row | QuietRun | QuietRows | AudioRun]:
        """The records (`Row`s) of the trace, up to `until_line` when given. With `table` (see `Rows.entries`) and
        the C scanner built, runs of lines it takes (`_scan.scan`) come as a `QuietRun` (no transition) or an
        `AudioRun` (audio deltas of one item) instead, and a line whose top level it read comes as its event's bytes,
        t, conn and direction (`heads`): the row the inline path gives, its event alone parsed. A run's connection
        is always one a row of this reader named before (the fold must meet a connection's first record whole)."""
        scan = _scanner.scan if _scanner is not None and table is not None else None
        if not 0 <= keep <= SCANNED_CONN_MAX:
            keep = 0  # the scanner leaves every line of such a connection to the full parse already
        # The per-line work is `rowpath.entries`' (compiled with the fold); reading the blocks stays here.
        blocks = self._blocks(regions=scan is not None)
        return entries(self, blocks, scan, table or {}, until_line, keep, detail, _count_lines)

    def __iter__(self) -> Iterator[Record]:
        for row in self.rows():
            yield Record(*row)


def lines_at(
    path: str | os.PathLike[str], wanted: Iterable[int], max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> dict[int, str]:
    """The text of the given 1-based lines of a regular file (a line over `max_line_bytes` is left out); {} when
    it is not a regular file or cannot be read."""
    want = set(wanted)
    found: dict[int, str] = {}
    if not want or not os.path.isfile(path):
        return found
    last = max(want)
    try:
        with open(path, "rb") as fp:
            for lineno in range(1, last + 1):
                raw = fp.readline(max_line_bytes + 1)
                if not raw:
                    break
                long = len(raw) > max_line_bytes and not raw.endswith(b"\n")
                while long and raw and not raw.endswith(b"\n"):
                    raw = fp.readline(1 << 20)
                if lineno in want and not long:
                    text = raw.decode("utf-8", "replace")
                    found[lineno] = text.removeprefix("\ufeff") if lineno == 1 else text
    except OSError:
        return found
    return found


#: Bytes of a trace's start looked at to tell text from binary data (as git and grep do).
TEXT_SNIFF_BYTES = 8192


def not_text(block: bytes, compression: str | None = None) -> str | None:
    """Why `block`, the first bytes of a trace (decompressed, UTF-8), is binary data rather than text, or None.

    Binary: its first `TEXT_SNIFF_BYTES` hold a NUL byte, or more than one character in twenty that is not UTF-8
    text (an invalid byte, a control character), and not one whole line of them is a JSON object. A trace with
    bad bytes in some lines (NUL padding left by a crash, a corrupt line) is still read line by line."""
    head = block[:TEXT_SNIFF_BYTES]
    text = head.decode("utf-8", "replace")
    if len(head) == TEXT_SNIFF_BYTES:
        text = text[:-3]  # a character cut at the end of the look is not a bad one
    nul = head.find(b"\0")
    bad = sum(1 for c in text if c == "\ufffd" or (c < " " and c not in "\t\n\r\f"))
    if nul < 0 and bad <= max(1, len(text) // 20):
        return None
    lines = head.split(b"\n")
    if len(head) == TEXT_SNIFF_BYTES:
        lines.pop()  # cut by the look
    for line in lines:
        with contextlib.suppress(orjson.JSONDecodeError):
            if isinstance(orjson.loads(line), dict):
                return None
    of = f" of the {compression} data" if compression else ""
    what = (
        f"a NUL byte at byte {nul + 1}{of}"
        if nul >= 0
        else f"{bad} of its first {len(text)} characters{of} are not text"
    )
    reads = "rtrace reads JSON lines (.jsonl), plain or compressed with gzip, bzip2, xz or zstd"
    return f"not a text trace (binary data: {what}); {reads}"


#: Where the JSON value at an offset of a text ends, and where the next non-space is (for readers of JSON documents).
skip_value = _skip_value
skip_space = _skip_space


def load(path: str | os.PathLike[str], **kw: Any) -> tuple[list[Record], TraceReader]:
    """Read a whole trace into memory (tests, `show`); analysis streams instead."""
    with TraceReader.open(path, **kw) as reader:
        records = list(reader)
    return records, reader


__all__ = [  # what the loader offers, its openers (`inputs`) and column finder (`jsonpos`) included
    "ALLOW_SPECIAL_ENV",
    "COMPRESSED_SUFFIXES",
    "DEFAULT_MAX_LINE_BYTES",
    "MAX_KEPT_PROBLEMS",
    "NO_ZSTD",
    "TRACE_SUFFIXES",
    "Row",
    "Rows",
    "TraceReader",
    "UnreadableInput",
    "column_of",
    "compression_of",
    "compression_of_file",
    "decompressor",
    "is_trace_name",
    "json_kind",
    "lines_at",
    "load",
    "open_input",
    "open_trace",
    "scan_table",
    "special_allowed",
    "write",
]


def write(records: Iterable[Record | dict[str, Any]], fp: IO[bytes], header: dict[str, Any] | None = None) -> None:
    """Write records as native JSONL."""
    if header is not None:
        fp.write(dumps_header(header))
    for rec in records:
        fp.write(dumps_record(rec))
