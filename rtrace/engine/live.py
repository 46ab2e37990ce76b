"""Live findings: the one `Fold` over a trace that is still being written, each finding told the moment a rule
returns it (the line at which it became certain has just been folded), the rest at the end of the trace.

The bytes come from a stream that blocks until more arrive: `Pipe` (fed the lines a recorder writes) or
`FollowFile` (a file that grows). They are read by the ordinary `TraceReader`, so the rows, and so the findings,
are the ones `rtrace analyze` gets from the finished file. This module prints nothing; `on_finding` does.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence

from ..core.escape import printable
from ..core.loader import Row, TraceReader
from ..rules import RULES
from ..rules.base import Config, Finding, Rule
from .fold import Fold, TraceReport, without_secrets

#: Told each finding as it becomes certain (`at_end` False), then, once the trace has ended, each finding that
#: only the end made certain (`at_end` True: a connection still open, a rule's `finish`).
OnFinding = Callable[[Finding, bool], None]


def finding_line(finding: Finding, at_end: bool = False) -> str:
    """One line for a person watching: `error RT101 deleted-function-call-output conn 3 line 4512: message`."""
    text = f"{finding.severity} {finding.rule} {finding.slug} conn {finding.conn} line {finding.at_line}: "
    text += printable(finding.message, 300)
    return text + (" (certain at the end of the trace)" if at_end else "")


def fold_live(
    reader: TraceReader,
    on_finding: OnFinding,
    config: Config | None = None,
    rules: Sequence[type[Rule]] = RULES,
    on_row: Callable[[Row], None] | None = None,
) -> TraceReport:
    """Fold what `reader` reads until its stream ends, telling `on_finding` of each finding as it is found, then
    `on_row` of each row once folded (so what it says after a row counts the findings that row made); the report
    is the one `engine.fold.analyze_reader` gives on the same bytes."""
    fold = Fold(config or Config(), rules)
    found = fold.dispatch.findings
    told: set[int] = set()

    def watched(rows: Iterable[Row]) -> Iterator[Row]:
        for row in rows:
            yield row
            # Back here once the fold has folded `row` and asks for the next one (which may wait for bytes).
            if len(found) > len(told):
                for finding in found[len(told) :]:
                    told.add(id(finding))
                    on_finding(without_secrets(finding), False)
            if on_row is not None:
                on_row(row)

    fold.rows(watched(reader.rows()))
    for finding in found[len(told) :]:  # returned by the last row's handlers
        told.add(id(finding))
        on_finding(without_secrets(finding), False)
    report = fold.report(reader.path, reader.count, reader.problems, reader.problem_count, reader.header)
    if reader.unusable is not None:
        report.unreadable = f"{reader.path}: {reader.unusable}"
    # `report.findings` is `fold.dispatch.findings` sorted and scrubbed, one for one.
    for raw, finding in zip(found, report.findings, strict=True):
        if id(raw) not in told:
            on_finding(finding, True)
    return report


class Pipe:
    """A byte stream fed from one thread (`write`, then `close`) and read from another as `TraceReader` reads: a
    `read` waits for bytes and returns what has arrived, `b""` once closed and drained."""

    def __init__(self, gather: float = 0.02, sleep: Callable[[float], None] = time.sleep) -> None:
        self._q: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._buf = b""
        self._closed = False
        #: Seconds the reader lets lines gather after it had to wait for one: the fold then runs on a batch, not
        #: on every frame, so it takes the interpreter from the recorder's event loop rarely (a server's timers
        #: stay on time: bench/bench_serve.py); a finding is told at most this much later.
        self._gather = gather
        self._sleep = sleep

    def write(self, data: bytes) -> None:
        self._q.put(data)

    def close(self) -> None:
        self._q.put(None)

    def _fill(self, want: int) -> None:
        """Wait until the buffer holds `want` bytes or the writer closed; take what else has arrived meanwhile
        (up to 64 KiB more), so a busy recorder's lines are read in runs."""
        parts, size = [self._buf], len(self._buf)
        while not self._closed:
            try:
                waited = size < want
                data = self._q.get(block=waited)
            except queue.Empty:
                break
            if data is None:
                self._closed = True
                break
            parts.append(data)
            size += len(data)
            if waited and self._gather:
                self._sleep(self._gather)
            if size >= want and size >= 1 << 16:
                break
        self._buf = b"".join(parts)

    def peek(self, n: int = 1) -> bytes:
        self._fill(n)
        return self._buf[:n]

    def read(self, n: int = -1) -> bytes:
        self._fill(1)
        if n < 0:
            n = len(self._buf)
        data, self._buf = self._buf[:n], self._buf[n:]
        return data


class FollowFile:
    """A file read as it grows (`tail -f`): a `read` waits for new bytes, polling every `poll` seconds, and returns
    `b""` (the end) once `stop` is set or nothing new came for `idle` seconds (None: never)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        stop: threading.Event,
        idle: float | None = None,
        poll: float = 0.1,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fp = open(path, "rb")  # closed by `close`
        self._stop = stop
        self._idle = idle
        self._poll = poll
        self._sleep = sleep
        self._clock = clock
        self._buf = b""
        self._last = clock()

    def _more(self, n: int) -> bool:
        """Read what is new into the buffer, waiting for at least one byte; False at the end."""
        while True:
            data = self._fp.read(max(n, 1 << 16))
            if data:
                self._buf += data
                self._last = self._clock()
                return True
            if self._stop.is_set() or (self._idle is not None and self._clock() - self._last >= self._idle):
                return False
            self._sleep(self._poll)

    def peek(self, n: int = 1) -> bytes:
        while len(self._buf) < n and self._more(n - len(self._buf)):
            pass
        return self._buf[:n]

    def read(self, n: int = -1) -> bytes:
        if not self._buf and not self._more(n):
            return b""
        if n < 0:
            n = len(self._buf)
        data, self._buf = self._buf[:n], self._buf[n:]
        return data

    def close(self) -> None:
        self._fp.close()


class LiveFold:
    """`fold_live` on a thread of its own, fed the lines a recorder writes (`tap`, the writer's hook): start it,
    give `tap` to the writer, `close` when the recording has ended to get the report."""

    def __init__(
        self,
        path: str,
        on_finding: OnFinding,
        config: Config | None = None,
        on_row: Callable[[Row], None] | None = None,
    ) -> None:
        self.pipe = Pipe()
        self.path = path
        self.on_finding = on_finding
        self.on_row = on_row
        self.config = config
        self.report: TraceReport | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="rtrace-live", daemon=True)

    def tap(self, line: bytes) -> None:
        self.pipe.write(line)

    def start(self) -> LiveFold:
        self._thread.start()
        return self

    def _run(self) -> None:
        reader = TraceReader(self.pipe, self.path)  # type: ignore[arg-type]
        try:
            self.report = fold_live(reader, self.on_finding, self.config, on_row=self.on_row)
        except BaseException as e:  # told to the caller of `close`; never a thread's traceback
            self.error = e

    def close(self) -> TraceReport:
        """End the stream, wait for the fold to finish; its report (a failure inside the fold is raised here)."""
        self.pipe.close()
        self._thread.join()
        if self.error is not None:
            raise self.error
        assert self.report is not None
        return self.report


__all__ = ["FollowFile", "LiveFold", "OnFinding", "Pipe", "finding_line", "fold_live"]
