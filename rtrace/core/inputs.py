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
