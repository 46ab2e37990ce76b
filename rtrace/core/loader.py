"""Reading traces: native JSONL, bare events, and openai-realtime-api-beta `{time, source, event}` logs.

A trace compressed with gzip, bzip2, xz or zstd (zstd needs the `zstandard` package: `rtrace[zstd]`) is read as it
is decompressed, found by its magic bytes whatever its name (`compression_of`), a block at a time: the line limits
below bound the decompressed data, so a decompression bomb costs time, never memory. A stream that breaks (a
truncated or corrupt file) is a problem at the line where it broke; the lines before it are read.

Streams line by line and never raises on bad input: each problem becomes a `Problem` with `file:line:col`,
and reading goes on with the next line. Only a file that cannot be opened at all raises `UnreadableInput`. A fold
reads through `Rows.entries`, where the optional C scanner (`_scan.c`) takes the lines a full parse would only
count without parsing them; the pure path gives the same records.
"""

from __future__ import annotations

import codecs
import contextlib
import datetime
import io
import os
import re
import stat
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, Any

import orjson

from .catalog import BETA_TO_GA, CLIENT_EVENTS, LOCAL_EVENTS, META_EVENTS, SERVER_EVENTS, side_of
from .escape import printable
from .trace import DIRECTIONS, AudioRun, Direction, Header, Problem, QuietRun, Record, dumps_header, dumps_record

#: Lines longer than this are skipped without being held in memory (a 50 MB line is a recording bug).
DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024
#: How many problems a reader keeps in full; beyond that it only counts them.
MAX_KEPT_PROBLEMS = 1000
#: How far past the start of an oversized line a reader looks for its end: `MAX_SKIP_FACTOR` times the line limit,
#: and at least `MIN_SKIP_BYTES`; beyond that (`/dev/zero`, a stream with no newline) the rest of the input is not
#: read.
MAX_SKIP_FACTOR = 16
MIN_SKIP_BYTES = 256 * 1024 * 1024
#: Set (to anything but "" or "0") to read FIFOs, devices and sockets by name: `--allow-special-files`. Carried in
#: the environment so every process of an analysis sees it.
ALLOW_SPECIAL_ENV = "RTRACE_ALLOW_SPECIAL_FILES"

#: Bytes read at a time.
_CHUNK = 1 << 18

#: Wire name -> GA name of every event type of the catalogue (beta names included): the inline path of `rows`
#: takes only these, and hands on the catalogue's own string objects (hashed once, shared by every record).
_GA_NAMES: dict[str, str] = {
    **{name: name for name in CLIENT_EVENTS | SERVER_EVENTS | META_EVENTS | LOCAL_EVENTS},
    **BETA_TO_GA,
}
_DIRECTIONS: dict[str, Direction] = {d: d for d in DIRECTIONS}

#: A record as a plain tuple, the fields of `Record` in order: (seq, line, t, dir, conn, event, type, raw_type).
Row = tuple[int, int, float, Direction, int, dict[str, Any], str, str]
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
    ) -> Iterator[Row | QuietRun | AudioRun]:
        """The records for a fold, with the lines a full parse would only count taken as runs (see
        `TraceReader._entries`): a line whose (dir, type) is not in `transitions` (it only moves the clocks), or
        is in `audio` (an audio delta: only an item's audio length moves). Without the C scanner, every record
        comes as a `Row`: the fold then makes the same runs itself, at the speed of the pure path."""
        return self.reader._entries(scan_table(transitions, audio), until_line)


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


class UnreadableInput(Exception):
    """The input cannot be opened or decoded at all (missing file, a directory, permission denied)."""


_SPECIAL = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def special_allowed() -> bool:
    return os.environ.get(ALLOW_SPECIAL_ENV, "") not in ("", "0")


def open_input(path: str | os.PathLike[str], allow_special: bool | None = None) -> IO[bytes]:
    """`path` open for reading: a regular file, or (when allowed: `allow_special`, else `ALLOW_SPECIAL_ENV`) a FIFO,
    device or socket. Never blocks on a FIFO no one writes to (it is opened non-blocking, then checked). Raises
    `UnreadableInput` with the reason."""
    p = os.fspath(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        with contextlib.suppress(OSError):
            if stat.S_ISSOCK(os.stat(p).st_mode):  # a socket cannot be opened at all: say what it is
                raise UnreadableInput(f"{p}: is a socket, not a regular file") from None
        raise UnreadableInput(f"{p}: {e.strerror or e}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise UnreadableInput(f"{p}: is a directory")
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _SPECIAL if test(mode)), "not a regular file")
            if not (special_allowed() if allow_special is None else allow_special):
                raise UnreadableInput(
                    f"{p}: is {kind}, not a regular file; read it as stdin (`-`) or pass --allow-special-files"
                )
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


#: Magic bytes -> the compression they announce.
_MAGIC = ((b"\x1f\x8b", "gzip"), (b"\xfd7zXZ\x00", "xz"), (b"\x28\xb5\x2f\xfd", "zstd"))
#: File name endings of compressed traces (what a folder of traces holds, what an output is written as).
COMPRESSED_SUFFIXES = {".gz": "gzip", ".bz2": "bzip2", ".xz": "xz", ".zst": "zstd"}


def compression_of(head: bytes) -> str | None:
    """`gzip`, `bzip2`, `xz` or `zstd` when `head` (the first bytes of an input) starts like one; else None."""
    for magic, codec in _MAGIC:
        if head.startswith(magic):
            return codec
    if head[:3] == b"BZh" and head[3:4] in b"123456789" and len(head) > 3:
        return "bzip2"
    return None


#: What a folder of traces holds: these names, plain or compressed.
TRACE_SUFFIXES = (".jsonl", *(f".jsonl{end}" for end in COMPRESSED_SUFFIXES))


def is_trace_name(name: str) -> bool:
    """Whether a file found in a folder of traces is one: `*.jsonl`, `*.jsonl.gz`, `.bz2`, `.xz`, `.zst`."""
    return name.endswith(TRACE_SUFFIXES)


def open_trace(path: str | os.PathLike[str]) -> IO[bytes]:
    """`path` open as `open_input` opens it, decompressed when it is compressed (by its magic bytes): its plain
    bytes, for a reader that needs them again (a report quoting lines). A break reads as the end."""
    f: Any = open_input(path)
    try:
        buffered = io.BufferedReader(f) if not hasattr(f, "peek") else f
        codec = compression_of(buffered.peek(8)[:8])
        return buffered if codec is None else io.BufferedReader(_Decompressed(buffered, codec), _CHUNK)
    except BaseException:
        f.close()
        raise


def compression_of_file(path: str | os.PathLike[str]) -> str | None:
    """The compression of the file at `path` by its first bytes (None: plain, or not readable)."""
    try:
        with open_input(path) as f:
            return compression_of(f.read(8))
    except (OSError, UnreadableInput):
        return None


#: What a reader says of a zstd input when `zstandard` is not installed.
NO_ZSTD = "the input is zstd-compressed: reading it needs the zstandard package (pip install 'rtrace[zstd]')"


class _ZstdReader:
    """zstd frames, one after another, decompressed a small piece of input at a time: `zstandard`'s own stream
    reader reads a truncated frame as a clean end, and its decompress objects have no output bound, so the input
    is fed in `_ZSTD_STEP`-byte pieces (a zstd block of at most 128 KiB takes a few bytes at the least: what one
    piece gives is bounded), and an input that ends inside a frame raises `EOFError`."""

    def __init__(self, stream: Any, zstandard: Any) -> None:
        self._stream = stream
        self._new = zstandard.ZstdDecompressor().decompressobj
        self._obj = self._new()
        self._started = False  # the current frame has had input
        self._input = b""
        self._output = b""  # decompressed, read up to `_at`
        self._at = 0

    def read1(self, n: int) -> bytes:
        if self._at >= len(self._output):
            self._output, self._at = self._step(), 0
        out = self._output[self._at : self._at + n]
        self._at += len(out)
        return out

    read = read1

    def _step(self) -> bytes:
        while True:
            if not self._input:
                self._input = self._stream.read(_CHUNK)
                if not self._input:
                    if self._started and not self._obj.eof:
                        raise EOFError("the input ends inside a zstd frame")
                    return b""
            piece, self._input = self._input[:_ZSTD_STEP], self._input[_ZSTD_STEP:]
            self._started = True
            out = self._obj.decompress(piece)
            if self._obj.eof:  # a frame ended: what follows it starts the next one
                self._input = self._obj.unused_data + self._input
                self._obj, self._started = self._new(), False
            if out:
                return bytes(out)


#: Compressed bytes fed to the zstd decompressor at a time (at most some 128 KiB of output per 4 bytes of input:
#: 2 MiB per piece).
_ZSTD_STEP = 64


def _zstd_reader(stream: Any) -> Any:
    try:
        import zstandard
    except ImportError:
        raise UnreadableInput(NO_ZSTD) from None
    return _ZstdReader(stream, zstandard)


def decompressor(stream: Any, codec: str) -> Any:
    """A file object reading `stream` decompressed (`codec` as `compression_of` names it)."""
    if codec == "gzip":
        import gzip

        return gzip.GzipFile(fileobj=stream, mode="rb")
    if codec == "bzip2":
        import bz2

        return bz2.BZ2File(stream, "rb")
    if codec == "xz":
        import lzma

        return lzma.LZMAFile(stream, "rb")
    return _zstd_reader(stream)


class _Decompressed(io.RawIOBase):
    """A compressed byte stream read decompressed, at most a buffer at a time. A stream that breaks (ends early,
    corrupt data) reads as its end, and `error` says why."""

    def __init__(self, stream: Any, codec: str) -> None:
        self.codec = codec
        self.error: str | None = None
        #: Set when this rtrace cannot decompress `codec` at all (zstd without `zstandard`): why.
        self.unavailable: str | None = None
        try:
            inner = decompressor(stream, codec)
        except UnreadableInput as e:
            self.unavailable = self.error = str(e)
            inner = io.BytesIO()
        # read1: one step of the decompressor, so the data before a break is handed on before the break is seen
        self._read = getattr(inner, "read1", inner.read)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.error is not None:
            return 0
        try:
            data = self._read(len(buffer))
        except Exception as e:  # EOFError (truncated), OSError / zlib.error / LZMAError / ZstdError (corrupt)
            self.error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
            return 0
        n = len(data)
        buffer[:n] = data
        return n


class _Recoded(io.RawIOBase):
    """A UTF-16 byte stream read as UTF-8, a chunk at a time (never the whole input in memory)."""

    def __init__(self, stream: Any, codec: str) -> None:
        self._stream = stream
        self._decoder = codecs.getincrementaldecoder(codec)(errors="replace")
        self._pending = b""
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending and not self._done:
            chunk = self._stream.read(_CHUNK)
            self._done = not chunk
            self._pending = self._decoder.decode(chunk, final=self._done).encode("utf-8")
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


class TraceReader:
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
        limit: int | None = None,
        at_start: bool = True,
    ) -> None:
        """`limit`: read at most this many bytes of `stream`. `at_start`: the stream starts at the beginning of the
        trace; a reader of a later part (see `parallel.analyze_split`) looks for no BOM, UTF-16 or header, and
        numbers its lines from 1 at the stream's position."""
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
        self._limit = limit
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
        self._decompressed: _Decompressed | None = None

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

    # -- problems -----------------------------------------------------------------------------------

    def _problem(self, line: int, col: int, message: str, excerpt: str = "") -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_KEPT_PROBLEMS:
            self.problems.append(Problem(self.path, line, col, message, "warning", excerpt))

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
            if self._limit is not None:
                self._limit -= 3
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
        limit = self._max
        horizon = max(limit * MAX_SKIP_FACTOR, MIN_SKIP_BYTES)
        lineno = 1
        pieces: list[bytes] = []  # the unfinished line, across blocks
        held = 0  # its length so far
        skipped = -1  # >= 0: inside an oversized line, this many bytes of it seen
        left = -1 if self._limit is None else self._limit
        while left:
            block = stream.read(_CHUNK if left < 0 else min(_CHUNK, left))
            if not block:
                break
            if left > 0:
                left -= len(block)
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
                    count = block.count(b"\n", at, last + 1)
                    self.lines = lineno + count - 1
                    yield lineno, (block, at, last + 1, count), True
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
        if self._decompressed is not None and self._decompressed.error is not None:
            self.broken = lineno  # the first line not read whole
            self._problem(
                self.broken,
                1,
                self._decompressed.unavailable
                or f"the {self._decompressed.codec} stream breaks here ({self._decompressed.error}): the file is "
                "truncated or corrupt; the lines before are read, the rest is lost",
            )

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
        self, table: dict[bytes, int] | None = None, until_line: int | None = None
    ) -> Iterator[Row | QuietRun | AudioRun]:
        """The records (`Row`s) of the trace, up to `until_line` when given. With `table` (see `Rows.entries`) and
        the C scanner built, runs of lines it takes (`_scan.scan`) come as a `QuietRun` (no transition) or an
        `AudioRun` (audio deltas of one item) instead. A run's connection is always
        one a row of this reader named before (the fold must meet a connection's first record whole)."""
        loads = orjson.loads
        decode_error = orjson.JSONDecodeError
        ga_names = _GA_NAMES
        directions = _DIRECTIONS
        dirs = DIRECTIONS
        scan = _scanner.scan if _scanner is not None and table is not None else None
        seen: set[int] = set()  # the connections of the rows yielded: the scanner leaves their first line whole
        native = 0
        try:
            for start, lines, complete in self._blocks(regions=scan is not None):
                if isinstance(lines, tuple):  # whole lines in place, for the scanner
                    block, a, b, n = lines
                    if until_line is not None and start + n > until_line:
                        b = a
                        for _ in range(max(0, until_line - start + 1)):
                            b = block.index(b"\n", b) + 1
                        n = until_line - start + 1
                    plan: list[Any] = scan(block, a, b, table, seen)  # type: ignore[arg-type,misc]
                    final = start + n - 1
                else:
                    if until_line is not None and start + len(lines) > until_line:
                        lines = lines[: max(0, until_line - start + 1)]
                        complete = True  # the line after the last kept one is known to exist
                    plan = lines
                    final = start + len(lines) - 1
                nxt = start
                for raw in plan:
                    if type(raw) is tuple:
                        # A run of lines the scanner took: only the counters and the clocks move.
                        count, t, conn, d = raw[:4]
                        nxt += count
                        native += count
                        seq = self.count
                        self.count = seq + count
                        self.last_t = t
                        if len(raw) == 4:
                            yield QuietRun(count, nxt - 1, t, conn, dirs[d])
                        else:
                            yield AudioRun(count, nxt - 1, t, conn, dirs[d], *raw[4:], seq)  # type: ignore[call-arg]
                        continue
                    lineno = nxt
                    nxt += 1
                    try:
                        obj = loads(raw)
                    except decode_error as e:
                        obj = self._unparsed(lineno, raw, complete or lineno != final, e)
                        if obj is None:
                            continue
                    # The inline path: a native line whose fields are all as expected gives the row `_native`
                    # would give. A missing key, a wrong shape or an unknown type or direction leaves it to
                    # `_record` (KeyError/TypeError), which reports the problem.
                    try:
                        event = obj["event"]
                        raw_type = event["type"]
                        etype = ga_names[raw_type]
                        direction = directions[obj["dir"]]
                        t = obj["t"]
                        conn = obj["conn"]
                    except (KeyError, TypeError):
                        pass
                    else:
                        if type(t) is float and type(conn) is int and conn >= 1:
                            native += 1
                            seq = self.count
                            self.count = seq + 1
                            self.last_t = t
                            seen.add(conn)
                            yield seq, lineno, t, direction, conn, event, etype, raw_type
                            continue
                    if type(obj) is not dict:
                        self._problem(lineno, 1, f"expected a JSON object, got {json_kind(obj)}; skipped")
                        continue
                    row = self._record(lineno, obj)
                    if row is not None:
                        seen.add(row[4])
                        yield row
                if native:
                    self.shapes["native"] = self.shapes.get("native", 0) + native
                    native = 0
                if until_line is not None and final >= until_line:
                    break
        except OSError as e:
            self._problem(self.count + 1, 1, f"read error: {e.strerror or e}; the rest of the file is skipped")
        finally:
            if native:
                self.shapes["native"] = self.shapes.get("native", 0) + native

    def __iter__(self) -> Iterator[Record]:
        for row in self.rows():
            yield Record(*row)

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


# -- where a field stands in a line ------------------------------------------------------------------------

_SPACE = re.compile(r"[ \t\r\n]*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SCALAR = re.compile(r"[^,\]}\s]*")


def column_of(line: str, path: Sequence[str | int]) -> int | None:
    """The 1-based column where the value at `path` (object keys, array positions) starts in one JSON line, or
    None when the line has no such value. A duplicated key is the last one, as the reader takes it."""
    try:
        at = _value_at(line, _skip_space(line, 0), tuple(path))
    except (IndexError, ValueError):
        return None
    return None if at is None else at + 1


def _skip_space(text: str, i: int) -> int:
    m = _SPACE.match(text, i)
    return m.end() if m else i


def _value_at(text: str, i: int, path: tuple[str | int, ...]) -> int | None:
    if not path:
        return i
    head, rest = path[0], path[1:]
    opener = text[i]
    if (opener == "{") != isinstance(head, str) or opener not in "{[":
        return None
    found = None
    i = _skip_space(text, i + 1)
    k = 0
    while text[i] not in "}]":
        if opener == "{":
            m = _STRING.match(text, i)
            if m is None:
                raise ValueError(i)
            key = orjson.loads(m.group())
            i = _skip_space(text, m.end())
            if text[i] != ":":
                raise ValueError(i)
            i = _skip_space(text, i + 1)
            if key == head:
                found = i
        elif k == head:
            found = i
        i = _skip_space(text, _skip_value(text, i))
        k += 1
        if text[i] == ",":
            i = _skip_space(text, i + 1)
    return None if found is None else _value_at(text, found, rest)


def _skip_value(text: str, i: int) -> int:
    """The position just past the JSON value that starts at `i`."""
    if text[i] == '"':
        m = _STRING.match(text, i)
        if m is None:
            raise ValueError(i)
        return m.end()
    if text[i] not in "{[":
        return _SCALAR.match(text, i).end()  # type: ignore[union-attr]
    depth = 0
    while True:
        c = text[i]
        if c == '"':
            m = _STRING.match(text, i)
            if m is None:
                raise ValueError(i)
            i = m.end()
            continue
        if c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1


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
