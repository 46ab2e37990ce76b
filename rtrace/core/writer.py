"""Writing a trace as it happens: `TraceWriter`, the one writer of the recorders (`serve`, `record`, `replay`, the
livekit integration).

The clock is the caller's, and a write that fails is reported once to the caller's `on_failure`: this module reads
no clock and prints nothing.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import IO, Any, TypeVar

import orjson

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


class TraceWriter:
    """Each line written whole and flushed, so a killed recorder loses at most one.

    `buffered`: lines wait in memory until `flush`, which hands them all to the kernel in one write (a recorder
    under load: `serve` flushes before each frame it sends, so every frame sent is in the trace before the peer can
    see it; what waits is what no frame answered yet).

    A write that fails (a full disk, a vanished file) does not raise: the trace is cut back to its last whole line,
    `failed` says why, `on_failure` is told once, and later writes are dropped, so the session being recorded goes
    on.
    """

    def __init__(
        self,
        fp: IO[bytes],
        header: dict[str, Any] | None,
        clock: Clock,
        on_failure: OnFailure,
        buffered: bool = False,
        tap: Tap | None = None,
    ) -> None:
        self._fp: IO[bytes] | None = fp
        self._tap = tap
        self._clock = clock
        self._on_failure = on_failure
        self._t0 = clock()
        #: Lines written whole (the header included).
        self.lines = 0
        #: Why writing stopped, or None while the trace is complete.
        self.failed: str | None = None
        self._good = 0
        with contextlib.suppress(OSError, AttributeError, ValueError):
            self._good = fp.tell()
        self._buffered = buffered
        self._waiting: list[bytes] = []
        if header is not None:
            self._put(dumps_header(header))

    @classmethod
    def open(
        cls: type[_W],
        path: str | os.PathLike[str],
        header: dict[str, Any] | None,
        clock: Clock,
        on_failure: OnFailure,
        buffered: bool = False,
        tap: Tap | None = None,
    ) -> _W:
        return cls(open(path, "wb"), header, clock, on_failure, buffered, tap)

    def _put(self, line: bytes) -> None:
        if self._fp is None or self.failed is not None:
            return
        if self._buffered:
            self._waiting.append(line)
            return
        self._write(line, 1)

    def flush(self) -> None:
        """Hand the lines waiting (`buffered`) to the kernel, in one write."""
        if self._waiting:
            waiting, self._waiting = self._waiting, []
            self._write(b"".join(waiting), len(waiting))

    def _write(self, data: bytes, lines: int) -> None:
        if self._fp is None or self.failed is not None:
            return
        try:
            self._fp.write(data)
            self._fp.flush()
        except OSError as e:
            self.failed = e.strerror or str(e)
            with contextlib.suppress(OSError, AttributeError, ValueError):
                self._fp.truncate(self._good)
            self._on_failure(self.failed, self.lines)
            return
        self.lines += lines
        self._good += len(data)
        if self._tap is not None:
            self._tap(data)

    def write(self, direction: str, conn: int, event: dict[str, Any], raw: bytes | None = None) -> None:
        """One line for `event`, timed now (`raw`: the event's JSON, when the caller has it already)."""
        t = round(max(0.0, self._clock() - self._t0), 6)
        if raw is None:
            self._put(dumps_record({"t": float(t), "dir": direction, "conn": conn, "event": event}))
            return
        head = b'{"t":' + orjson.dumps(float(t)) + b',"dir":' + orjson.dumps(direction) + b',"conn":'
        self._put(head + str(int(conn)).encode() + b',"event":' + raw + b"}\n")

    def close(self) -> None:
        self.flush()
        if self._fp is not None:
            with contextlib.suppress(OSError):
                self._fp.flush()
                os.fsync(self._fp.fileno())
            self._fp.close()
            self._fp = None
