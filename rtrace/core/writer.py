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
#: Given each line once it is written whole (the header included): how live findings see a recording.
Tap = Callable[[bytes], None]
#: Told once why writing stopped (`OSError.strerror`, e.g. "No space left on device") and how many lines the
#: trace kept.
OnFailure = Callable[[str, int], None]

_W = TypeVar("_W", bound="TraceWriter")


class TraceWriter:
    """Each line written whole and flushed, so a killed recorder loses at most one.

    A write that fails (a full disk, a vanished file) does not raise: the trace is cut back to its last whole line,
    `failed` says why, `on_failure` is told once, and later writes are dropped, so the session being recorded goes
    on.
    """

    def __init__(
        self, fp: IO[bytes], header: dict[str, Any] | None, clock: Clock, on_failure: OnFailure, tap: Tap | None = None
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
        if header is not None:
            self._put(dumps_header(header))

    @classmethod
    def open(
        cls: type[_W],
        path: str | os.PathLike[str],
        header: dict[str, Any] | None,
        clock: Clock,
        on_failure: OnFailure,
        tap: Tap | None = None,
    ) -> _W:
        return cls(open(path, "wb"), header, clock, on_failure, tap)

    def _put(self, line: bytes) -> None:
        if self._fp is None or self.failed is not None:
            return
        try:
            self._fp.write(line)
            self._fp.flush()
        except OSError as e:
            self.failed = e.strerror or str(e)
            with contextlib.suppress(OSError, AttributeError, ValueError):
                self._fp.truncate(self._good)
            self._on_failure(self.failed, self.lines)
            return
        self.lines += 1
        with contextlib.suppress(OSError, AttributeError, ValueError):
            self._good = self._fp.tell()
        if self._tap is not None:
            self._tap(line)

    def write(self, direction: str, conn: int, event: dict[str, Any], raw: bytes | None = None) -> None:
        """One line for `event`, timed now (`raw`: the event's JSON, when the caller has it already)."""
        t = round(max(0.0, self._clock() - self._t0), 6)
        if raw is None:
            self._put(dumps_record({"t": float(t), "dir": direction, "conn": conn, "event": event}))
            return
        head = b'{"t":' + orjson.dumps(float(t)) + b',"dir":' + orjson.dumps(direction) + b',"conn":'
        self._put(head + str(int(conn)).encode() + b',"event":' + raw + b"}\n")

    def close(self) -> None:
        if self._fp is not None:
            with contextlib.suppress(OSError):
                self._fp.flush()
                os.fsync(self._fp.fileno())
            self._fp.close()
            self._fp = None
