"""Opening user input: the one place that refuses special files, decompresses and recodes a byte stream.

`open_input` opens a path for reading and refuses, by name, a FIFO, a device or a socket (unless the user allows
them), without ever blocking on a FIFO no one writes to. Traces are read through it (`TraceReader.open`,
`open_trace`), decompressed by their magic bytes (`compression_of`, `_Decompressed`: gzip, bzip2, xz, zstd) and
recoded from UTF-16 (`_Recoded`), a chunk at a time, never the whole input in memory.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import re
import stat
from typing import IO, Any

#: Set (to anything but "" or "0") to read FIFOs, devices and sockets by name: `--allow-special-files`. Carried in
#: the environment so every process of an analysis sees it.
ALLOW_SPECIAL_ENV = "RTRACE_ALLOW_SPECIAL_FILES"

#: Bytes read at a time.
_CHUNK = 1 << 18


class UnreadableInput(Exception):
    """The input cannot be opened or decoded at all (missing file, a directory, permission denied)."""


_SPECIAL = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


#: What refusing a special file suggests: for a trace, and for a side input (`read_side_input`).
_TRACE_HINT = "read it as stdin (`-`) or pass --allow-special-files"
_SIDE_HINT = "give a regular file (or pass --allow-special-files where the command has it)"


def special_allowed() -> bool:
    return os.environ.get(ALLOW_SPECIAL_ENV, "") not in ("", "0")


def open_input(
    path: str | os.PathLike[str], allow_special: bool | None = None, hint: str = _TRACE_HINT
) -> IO[bytes]:
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
                raise UnreadableInput(f"{p}: is {kind}, not a regular file; {hint}")
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
NO_ZSTD = "the input is zstd-compressed: reading it needs the zstandard package (pip install 'rtrace-cli[zstd]')"


#: How many bytes the header piece after each state takes (`_ZstdFrames`).
_ZSTD_NEED = {"magic": 4, "skippable": 4, "descriptor": 1, "block": 3, "checksum": 4}


class _ZstdFrames:
    """Walks the frames of a zstd stream as its compressed bytes pass (frame and block headers only: a few steps
    per block of up to 128 KiB), to tell a stream that ends inside a frame from one that ends between frames:
    `zstandard`'s stream reader reads both as a clean end. What is not a zstd frame is zstd's to refuse."""

    def __init__(self) -> None:
        self._state = "magic"  # what the next header piece is
        self._need = 4
        self._have = b""
        self._skip = 0  # bytes of content (a block's, a skippable frame's) still to pass
        self._checksum = False

    @property
    def between(self) -> bool:
        """Whether the bytes so far end between frames (or before the first)."""
        return self._state == "magic" and not self._have and not self._skip

    def feed(self, data: bytes | memoryview) -> None:
        at, n = 0, len(data)
        while at < n:
            if self._skip:
                step = min(self._skip, n - at)
                self._skip -= step
                at += step
                continue
            take = min(self._need - len(self._have), n - at)
            self._have += bytes(data[at : at + take])
            at += take
            if len(self._have) == self._need:
                head, self._have = self._have, b""
                self._next(head)

    def _go(self, state: str, need: int = 0) -> None:
        self._state, self._need = state, need or _ZSTD_NEED[state]

    def _next(self, head: bytes) -> None:
        state = self._state
        if state == "magic":
            skippable = head[1:] == b"\x2a\x4d\x18" and head[0] & 0xF0 == 0x50
            self._go("skippable" if skippable else "descriptor")
        elif state == "skippable":
            self._skip = int.from_bytes(head, "little")
            self._go("magic")
        elif state == "descriptor":
            d = head[0]
            single = d >> 5 & 1
            fcs = (0, 2, 4, 8)[d >> 6] or single  # the frame content size field
            self._checksum = bool(d >> 2 & 1)
            rest = (0 if single else 1) + (0, 1, 2, 4)[d & 3] + fcs  # window descriptor, dictionary id, size
            self._go("frame header", rest) if rest else self._go("block")
        elif state == "frame header":
            self._go("block")
        elif state == "block":
            h = int.from_bytes(head, "little")
            self._skip = 1 if h >> 1 & 3 == 1 else h >> 3  # an RLE block's content is one byte
            if not h & 1:
                self._go("block")
            else:
                self._go("checksum" if self._checksum else "magic")
        else:  # the checksum
            self._go("magic")


class _ZstdReader:
    """zstd frames, one after another, decompressed by `zstandard`'s stream reader (each read bounded: a
    decompression bomb costs time, never memory), with an input that ends inside a frame raising `EOFError`
    (`_ZstdFrames` watches the compressed bytes as they pass)."""

    def __init__(self, stream: Any, zstandard: Any) -> None:
        self._frames = _ZstdFrames()
        self._source = _Watched(stream, self._frames)
        self._reader = zstandard.ZstdDecompressor().stream_reader(
            self._source, read_size=_CHUNK, read_across_frames=True, closefd=False
        )

    def read1(self, n: int) -> bytes:
        out: bytes = self._reader.read(n)
        if not out and self._source.done and not self._frames.between:
            raise EOFError("the input ends inside a zstd frame")
        return out

    read = read1


class _Watched:
    """A byte stream whose bytes `frames` sees as they are read."""

    def __init__(self, stream: Any, frames: _ZstdFrames) -> None:
        self._stream = stream
        self._frames = frames
        self.done = False

    def read(self, n: int = -1) -> bytes:
        data: bytes = self._stream.read(n)
        if data:
            self._frames.feed(data)
        else:
            self.done = True
        return data


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


# -- side inputs: settings, scripts, baselines, a tool's arguments --------------------------------------------------

#: The most bytes a side input (a settings file, a scenario script, a baseline) is read to: more is refused before
#: it is held (a baseline of 200,000 findings is some 40 MB).
SIDE_INPUT_BYTES = 64 << 20
#: How deep a side input may nest arrays and tables (objects): deeper is refused at the line and column where it
#: goes past, before a parser recurses into it (tomllib and the json module recurse, orjson stops at 1,024).
MAX_NESTING = 100


class TooDeep(ValueError):
    """A side input nested deeper than `MAX_NESTING` (the message names the file, line and column)."""


def read_side_input(path: str | os.PathLike[str], what: str, max_bytes: int = SIDE_INPUT_BYTES) -> bytes:
    """The bytes of a side input (`what`: "the script", "the baseline", ...), opened as `open_input` opens a trace
    (a FIFO, a device or a socket refused by name unless special files are allowed) and read to at most
    `max_bytes` (more is refused: `/dev/zero` allowed by name ends here too). Raises `UnreadableInput`."""
    p = os.fspath(path)
    with open_input(p, hint=_SIDE_HINT) as f:
        try:
            data = f.read(max_bytes + 1)
        except OSError as e:
            raise UnreadableInput(f"{p}: cannot read {what}: {e.strerror or e}") from None
    if len(data) > max_bytes:
        raise UnreadableInput(f"{p}: {what} is over the {max_bytes:,}-byte limit; refused")
    return data


_JSON_MARKS = re.compile(r'[\[\]{}"]')
_TOML_MARKS = re.compile(r"[\[\]{}\"'#.=,\n]")
_BASIC_STRING = re.compile(r'[^"\\\n]*(?:\\.[^"\\\n]*)*(?:"|$)', re.MULTILINE)


def nesting_over(text: str, syntax: str = "json", limit: int = MAX_NESTING) -> tuple[int, int] | None:
    """(line, column), 1-based, of the bracket or brace where `text` (JSON, or TOML with `syntax="toml"`) first
    nests deeper than `limit`; None when it never does. Strings and (TOML) comments are passed over; one pass,
    linear in the text, whatever it holds (malformed text included: its parser says what is wrong with it)."""
    toml = syntax == "toml"
    marks = (_TOML_MARKS if toml else _JSON_MARKS).search
    depth, at, n = 0, 0, len(text)
    dots = 0  # TOML: the dots of the key being read (`a.b.c = 1` and `[a.b.c]` nest without a bracket)
    while at < n:
        m = marks(text, at)
        if m is None:
            return None
        c, at = m.group(), m.end()
        if c in "[{":
            depth += 1
            dots = 0
        elif c in "]}":
            depth = max(0, depth - 1)
        elif c == ".":
            dots += 1
        elif c in "=,\n":  # a key ends (a float's dot after it counts once, and the next comma forgets it)
            dots = 0
            continue
        if c in "[{." and depth + dots > limit:
            pos = m.start()
            return text.count("\n", 0, pos) + 1, pos - text.rfind("\n", 0, pos)
        if c in "[]{}.":
            continue
        elif c == "#":
            end = text.find("\n", at)
            at = n if end < 0 else end
        elif toml and text.startswith(c * 2, at):  # a multi-line string: to its closing triple quote
            end = text.find(c * 3, at + 2)
            at = n if end < 0 else end + 3
        elif c == "'":  # a TOML literal string: no escapes
            end = text.find("'", at)
            at = n if end < 0 else end + 1
        else:
            s = _BASIC_STRING.match(text, at)
            at = s.end() if s is not None else n
    return None


def check_nesting(text: str, where: str, syntax: str = "json", limit: int = MAX_NESTING) -> None:
    """Raise `TooDeep` (`where:line:col: ...`) when `text` nests deeper than `limit` (see `nesting_over`)."""
    over = nesting_over(text, syntax, limit)
    if over is not None:
        kind = "arrays and tables" if syntax == "toml" else "arrays and objects"
        raise TooDeep(f"{where}:{over[0]}:{over[1]}: {kind} nested deeper than {limit} levels; refused")


def value_nesting_over(value: object, limit: int = MAX_NESTING) -> bool:
    """Whether a parsed value (dicts and lists) nests deeper than `limit` (TOML's dotted keys nest without a
    bracket); iterative, so a deep value never exhausts the stack."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


# -- regular expressions a user gives -----------------------------------------------------------------------------

#: The longest pattern read, the deepest group nesting, the largest repetition count, and the most positions the
#: compiled pattern may unroll to (`a{1000}` is 1,000; `(a{1000}){100}` 100,000): past these a pattern is refused.
MAX_PATTERN_CHARS = 1000
MAX_PATTERN_GROUPS = 20
MAX_REPEAT = 1000
MAX_PATTERN_SIZE = 100_000
#: How long one search of a user's pattern may take: past it, the search is abandoned (it does not match).
PATTERN_SECONDS = 0.05

_QUANTIFIER = re.compile(r"\{(\d*)(?:(,)(\d*))?\}")


def user_pattern(pattern: str) -> Any:
    """`pattern` (Python syntax) compiled by the `regex` engine, after checks that bound what compiling it costs
    (length, nesting, repetition counts, unrolled size); searched with `pattern_search`, which bounds its time.
    Raises ValueError with the reason."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"the pattern is {len(pattern):,} characters, over the limit of {MAX_PATTERN_CHARS:,}")
    _check_pattern(pattern)
    import regex

    try:
        return regex.compile(pattern)
    except (regex.error, OverflowError, RecursionError, ValueError, IndexError) as e:
        raise ValueError(str(e) or type(e).__name__) from None


def _check_pattern(pattern: str) -> None:
    """Group nesting, repetition counts and the unrolled size of `pattern`, read in one pass."""
    sums = [0]  # per open group: the positions it unrolls to so far
    last = 0  # the size of the atom a quantifier would repeat
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i, last = i + 2, 1
            sums[-1] += 1
        elif c == "[":
            j = i + 1
            if pattern.startswith("^", j):
                j += 1
            if pattern.startswith("]", j):
                j += 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            i, last = j + 1, 1
            sums[-1] += 1
        elif c == "(":
            if pattern.startswith("(?#", i):
                end = pattern.find(")", i)
                i = n if end < 0 else end + 1
                continue
            sums.append(0)
            if len(sums) - 1 > MAX_PATTERN_GROUPS:
                raise ValueError(f"groups nested deeper than {MAX_PATTERN_GROUPS} levels")
            i += 1
        elif c == ")":
            last = sums.pop() if len(sums) > 1 else 0
            sums[-1] += last
            i += 1
        elif c == "{" and (q := _QUANTIFIER.match(pattern, i)) is not None and (q.group(1) or q.group(3)):
            counts = [int(g) for g in (q.group(1), q.group(3)) if g]
            if max(counts) > MAX_REPEAT:
                raise ValueError(f"a repetition count of {max(counts):,}, over the limit of {MAX_REPEAT:,}")
            sums[-1] += last * (max(counts) - 1)
            i = q.end()
        else:
            i, last = i + 1, 1
            sums[-1] += 1
        if sums[-1] > MAX_PATTERN_SIZE or sum(sums) > MAX_PATTERN_SIZE:
            raise ValueError(f"the pattern unrolls to more than {MAX_PATTERN_SIZE:,} positions")


def pattern_search(pattern: Any, text: str) -> bool | None:
    """Whether `pattern` (from `user_pattern`) is found in `text`; None when the search took longer than
    `PATTERN_SECONDS` and was abandoned."""
    try:
        return pattern.search(text, timeout=PATTERN_SECONDS) is not None
    except TimeoutError:
        return None
