"""Writing files without losing one: `TraceWriter`, the one writer of the recorders (`serve`, `record`, `replay`, the
livekit integration), and `Replacing`, how every other output (reports, `convert`, `redact`) is written.

No command writes over a file it reads (`same_file`), and none leaves an output half-written or replaces one with
nothing: an output is written to a new temporary file in its own folder (`tempfile`: an unpredictable name, created
exclusively, so never a symlink planted there) and renamed over the target only once complete; a recorder's trace
appears at the first record and grows line by line. A target that is not a regular file (`/dev/stdout`, a pipe) is
written in place. The clock is the caller's, and a write that fails is reported once to the caller's `on_failure`:
this module reads no clock and prints nothing.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import IO, Any, TypeVar

import orjson

from .secrets import STREAM_ENDS, STREAMS, DeltaWindows, scrub_secrets
from .trace import dumps_header, dumps_record

#: Seconds, monotonic: what a record's `t` is measured with (from the writer's creation).
Clock = Callable[[], float]
#: Given the bytes of each write once they reached the file (whole lines, the header included; a buffered writer
#: hands over several lines at once): how live findings see a recording.
Tap = Callable[[bytes], None]
#: Told once why writing stopped (`OSError.strerror`, e.g. "No space left on device") and how many lines the
#: trace kept.
OnFailure = Callable[[str, int], None]

_W = TypeVar("_W", bound="TraceWriter")


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two paths name one file (the same inode, through links; else the same absolute path)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))


def _regular_or_new(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return True


def _new_file(path: str) -> tuple[IO[bytes], str]:
    """A new, empty temporary file beside `path`, open for writing, with the permissions `path` has (or would get)."""
    import tempfile  # here: every command imports this module, few write a file (`tempfile` loads `random`)

    folder, name = os.path.split(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".rtrace-tmp")
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        mode = 0o666 & ~mask
    with contextlib.suppress(OSError):
        os.fchmod(fd, mode)
    return os.fdopen(fd, "wb"), tmp


def check_writable(path: str | os.PathLike[str]) -> None:
    """Raise the `OSError` opening `path` for writing would raise, without creating or changing anything."""
    p = os.fspath(path)
    if os.path.isdir(p):
        raise IsADirectoryError(21, "Is a directory", p)
    folder = os.path.dirname(os.path.abspath(p))
    if not os.path.isdir(folder):
        raise FileNotFoundError(2, "No such file or directory", p)
    if not _regular_or_new(p):
        if not os.access(p, os.W_OK):
            raise PermissionError(13, "Permission denied", p)
    elif not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(13, "Permission denied", p)


class Replacing:
    """`with Replacing(path) as fp:` -- `fp` is a new temporary file beside `path`; when the block ends without an
    exception and without `discard()`, it is renamed over `path` (a symlink there is replaced, never followed); else
    it is removed and `path` is as it was. A `path` that is not a regular file (`/dev/stdout`) is written directly."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._tmp: str | None = None
        self._fp: IO[bytes] | None = None
        self._discard = False

    def __enter__(self) -> IO[bytes]:
        if _regular_or_new(self.path):
            self._fp, self._tmp = _new_file(self.path)
        else:
            self._fp = open(self.path, "wb")
        return self._fp

    def discard(self) -> None:
        """Leave `path` as it was (the command produced nothing worth replacing it with)."""
        self._discard = True

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        assert self._fp is not None
        tmp, fp = self._tmp, self._fp
        self._fp = None
        try:
            if tmp is not None and kind is None and not self._discard:
                fp.flush()
                os.fsync(fp.fileno())
        finally:
            fp.close()
            if tmp is not None:
                if kind is None and not self._discard:
                    try:
                        os.replace(tmp, self.path)
                        tmp = None
                    finally:
                        if tmp is not None:
                            os.unlink(tmp)
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(tmp)


#: Output name endings -> the compression a trace written there gets (what `loader.compression_of` reads back).
COMPRESSED_OUTPUTS = {".gz": "gzip", ".bz2": "bzip2", ".xz": "xz", ".zst": "zstd"}
_COPY = 1 << 20


def compression_for(path: str | os.PathLike[str]) -> str | None:
    """The compression a trace written to `path` gets from its name (`out.jsonl.gz`: gzip), or None."""
    return next((codec for end, codec in COMPRESSED_OUTPUTS.items() if os.fspath(path).endswith(end)), None)


def _compressor(out: IO[bytes], codec: str) -> Any:
    if codec == "gzip":
        import gzip

        return gzip.GzipFile(fileobj=out, mode="wb", mtime=0)  # the same trace, the same bytes
    if codec == "bzip2":
        import bz2

        return bz2.BZ2File(out, "wb")
    if codec == "xz":
        import lzma

        return lzma.LZMAFile(out, "wb")
    try:
        import zstandard
    except ImportError:
        why = "writing a .zst trace needs the zstandard package (pip install 'rtrace-cli[zstd]')"
        raise OSError(f"{out.name}: {why}") from None
    return zstandard.ZstdCompressor().stream_writer(out, closefd=False)


@contextlib.contextmanager
def replacing_trace(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """`Replacing(path)`, compressed as its name says (`.gz`, `.bz2`, `.xz`, `.zst`; see `compression_for`): the
    trace is written plain to a temporary file (seekable, so a split secret is masked where it stands) and
    compressed into `path` only once complete. A plain name is `Replacing` itself."""
    import tempfile

    codec = compression_for(path)
    if codec is None:
        with Replacing(path) as fp:
            yield fp
        return
    with tempfile.TemporaryFile() as spool:
        yield spool
        spool.flush()
        spool.seek(0)
        with Replacing(path) as out:
            packed = _compressor(out, codec)
            try:
                while chunk := spool.read(_COPY):
                    packed.write(chunk)
            finally:
                packed.close()


def rewrite_at(fp: IO[bytes], offset: int, data: bytes) -> bool:
    """Overwrite `len(data)` bytes of `fp` at `offset` (the file position stays where it was); False when the file
    cannot be rewritten (a pipe)."""
    try:
        fp.flush()
        os.pwrite(fp.fileno(), data, offset)
        return True
    except (AttributeError, OSError, ValueError):
        pass
    try:
        here = fp.tell()
        fp.seek(offset)
        fp.write(data)
        fp.seek(here)
        fp.flush()
        return True
    except (AttributeError, OSError, ValueError):
        return False


def write_replacing(path: str | os.PathLike[str], data: bytes) -> None:
    """`path` replaced by `data` as `Replacing` does (whole or not at all)."""
    with Replacing(path) as fp:
        fp.write(data)


class _Line:
    """A streamed delta already written: where, and what, so `DeltaWindows` can have it rewritten masked."""

    __slots__ = ("conn", "direction", "event", "length", "offset", "t")

    def __init__(self, t: float, direction: str, conn: int, event: dict[str, Any]) -> None:
        self.t, self.direction, self.conn, self.event = t, direction, conn, event
        self.offset = -1
        self.length = 0

    def encode(self) -> bytes:
        return dumps_record({"t": self.t, "dir": self.direction, "conn": self.conn, "event": self.event})


class TraceWriter:
    """Each line written whole and flushed, so a killed recorder loses at most one.

    A write that fails (a full disk, a vanished file) does not raise: the trace is cut back to its last whole line,
    `failed` says why, `on_failure` is told once, and later writes are dropped, so the session being recorded goes
    on.

    `buffered`: lines wait in memory until `flush`, which hands them all to the kernel in one write (a recorder
    under load: `serve` flushes before each frame it sends, so every frame sent is in the trace before the peer can
    see it; what waits is what no frame answered yet). Offsets stay those of the file: a line still waiting is
    rewritten in memory, one already written in the file.

    Streamed text (`core.secrets.STREAMS`: text, transcript and argument deltas) is written through
    `core.secrets.DeltaWindows`: a delta is written masked where a secret spans it and the deltas before it, and
    those earlier lines, already on disk, are rewritten in place (same length) as soon as the secret completes.
    `redact` (e.g. `core.secrets.redact_event`) makes each event safe to write; the writer is given events as
    they crossed the wire, so a delta's text is joined as it was, never from a copy scrubbed on its own. Without
    `redact` the caller scrubs (and streamed deltas are still scrubbed here, with `core.secrets.scrub_secrets`).
    """

    def __init__(
        self,
        fp: IO[bytes] | None,
        header: dict[str, Any] | None,
        clock: Clock,
        on_failure: OnFailure,
        redact: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        buffered: bool = False,
        tap: Tap | None = None,
    ) -> None:
        self._fp: IO[bytes] | None = fp
        #: Makes each event safe to write (None: the caller does).
        self.redact = redact
        #: Handed each chunk of lines as it reaches the file (live findings); an in-place mask of a split secret
        #: comes later and is not handed on, so a tap folds what it gets and never stores it.
        self._tap = tap
        self._clock = clock
        self._on_failure = on_failure
        self._t0 = clock()
        #: Lines written whole (the header included).
        self.lines = 0
        #: Why writing stopped, or None while the trace is complete.
        self.failed: str | None = None
        #: Where the next line written to the file starts (the end of its last whole line).
        self._good = 0
        if fp is not None:
            with contextlib.suppress(OSError, AttributeError, ValueError):
                self._good = fp.tell()
        self._buffered = buffered
        #: `buffered`: the lines waiting, as they will be written at `_good`, and how many.
        self._waiting = bytearray()
        self._waiting_lines = 0
        #: `open`'s target, created at the first record, and the header it starts with.
        self._path: str | None = None
        self._header = header
        self._windows: DeltaWindows[_Line] = DeltaWindows()
        if fp is not None and header is not None:
            self._put(dumps_header(header))

    @classmethod
    def open(
        cls: type[_W],
        path: str | os.PathLike[str],
        header: dict[str, Any] | None,
        clock: Clock,
        on_failure: OnFailure,
        redact: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        buffered: bool = False,
        tap: Tap | None = None,
    ) -> _W:
        """A writer of the trace at `path`, which appears with the first record: a recorder that records nothing
        leaves an existing file as it was. The trace is written to a new file beside `path` and renamed over it at
        once, then grows line by line (a killed recorder leaves a parseable trace at `path`). Raises `OSError` now
        when `path` cannot be written."""
        check_writable(path)
        writer = cls(None, header, clock, on_failure, redact, buffered, tap)
        writer._path = os.fspath(path)
        return writer

    @property
    def path(self) -> str | None:
        """The file `open` was given."""
        return self._path

    def _create(self) -> IO[bytes] | None:
        assert self._path is not None
        path, self._path = self._path, None
        try:
            if _regular_or_new(path):
                fp, tmp = _new_file(path)
                try:
                    os.replace(tmp, path)
                except OSError:
                    fp.close()
                    os.unlink(tmp)
                    raise
            else:
                fp = open(path, "wb")  # a device or a pipe: written in place
        except OSError as e:
            self._path = path
            self.failed = e.strerror or str(e)
            self._on_failure(self.failed, self.lines)
            return None
        self._path = path
        self._fp = fp
        if self._header is not None:
            header, self._header = self._header, None
            self._put(dumps_header(header))
        return fp

    def _put(self, line: bytes) -> int | None:
        """Write one line (`buffered`: have it wait); where it starts in the file (None when it was not written)."""
        if self.failed is not None:
            return None
        if self._fp is None and (self._path is None or self._create() is None):
            return None
        if self._buffered:
            start = self._good + len(self._waiting)
            self._waiting += line
            self._waiting_lines += 1
            return start
        start = self._good
        return start if self._write(line, 1) else None

    def flush(self) -> None:
        """Hand the lines waiting (`buffered`) to the kernel, in one write."""
        if self._waiting:
            waiting, lines = bytes(self._waiting), self._waiting_lines
            self._waiting.clear()
            self._waiting_lines = 0
            self._write(waiting, lines)

    def _write(self, data: bytes, lines: int) -> bool:
        if self._fp is None or self.failed is not None:
            return False
        try:
            self._fp.write(data)
            self._fp.flush()
        except OSError as e:
            self.failed = e.strerror or str(e)
            with contextlib.suppress(OSError, AttributeError, ValueError):
                self._fp.truncate(self._good)
            self._on_failure(self.failed, self.lines)
            return False
        self.lines += lines
        self._good += len(data)
        if self._tap is not None:
            self._tap(data)
        return True

    def _rewrite(self, offset: int, data: bytes) -> None:
        """`data` over the line of the same length at `offset`: in memory while it waits, else in the file."""
        waiting = offset - self._good
        if waiting >= 0:
            if waiting + len(data) <= len(self._waiting):
                self._waiting[waiting : waiting + len(data)] = data
        elif self._fp is not None and offset + len(data) <= self._good:
            rewrite_at(self._fp, offset, data)

    def write(self, direction: str, conn: int, event: dict[str, Any], raw: bytes | None = None) -> None:
        """One line for `event`, timed now (`raw`: the event's JSON, when the caller has it already and scrubbed
        it; with `redact`, the event is redacted and `raw` not used)."""
        self.write_at(round(max(0.0, self._clock() - self._t0), 6), direction, conn, event, raw)

    def write_at(
        self, t: float, direction: str, conn: int, event: dict[str, Any], raw: bytes | None = None
    ) -> None:
        """`write` with the record's time given (a conversion keeps the capture's times)."""
        etype = event.get("type")
        if etype in STREAMS:
            self._write_delta(t, direction, conn, event)
            return
        if etype in STREAM_ENDS:
            self._windows.end(conn, event)
        elif etype == "connection.closed" and direction == "meta":
            self._windows.close(conn)
        if self.redact is not None:
            event, raw = self.redact(event), None
        if raw is None:
            self._put(dumps_record({"t": float(t), "dir": direction, "conn": conn, "event": event}))
            return
        head = b'{"t":' + orjson.dumps(float(t)) + b',"dir":' + orjson.dumps(direction) + b',"conn":'
        self._put(head + str(int(conn)).encode() + b',"event":' + raw + b"}\n")

    def _write_delta(self, t: float, direction: str, conn: int, event: dict[str, Any]) -> None:
        field = STREAMS[str(event.get("type"))][0]
        clean = self.redact(event) if self.redact is not None else scrub_secrets(event)
        text = event.get(field)
        if isinstance(text, str):
            clean[field] = text  # the wire's text, masked below where a secret spans it
        line = _Line(t, direction, conn, clean)
        rewrites = self._windows.delta(conn, event, line) if isinstance(text, str) else []
        for mine, now in rewrites:
            if mine is line:
                clean[field] = now
        data = line.encode()
        start = self._put(data)
        line.offset, line.length = (start, len(data)) if start is not None else (-1, 0)
        for earlier, now in rewrites:
            if earlier is line or earlier.offset < 0:
                continue
            earlier.event = {**earlier.event, field: now}
            again = earlier.encode()
            if len(again) == earlier.length:
                self._rewrite(earlier.offset, again)

    def close(self) -> None:
        """Flush what waits and close. Never raises: a write that fails here (a full disk) is a failure like any
        other (`on_failure` told, the trace cut back to its last whole line)."""
        self.flush()
        fp, self._fp = self._fp, None
        if fp is None:
            return
        try:
            fp.flush()
            os.fsync(fp.fileno())
        except OSError as e:
            if self.failed is None:
                self.failed = e.strerror or str(e)
                self._on_failure(self.failed, self.lines)
        if self.failed is not None:
            with contextlib.suppress(OSError, ValueError):
                os.ftruncate(fp.fileno(), self._good)  # under the buffer: what it still holds is not whole
        with contextlib.suppress(OSError, ValueError):
            fp.close()  # a buffer it cannot flush: the file is closed all the same
