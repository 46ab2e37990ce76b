"""Progress of long work on stderr: a rich bar, only on a terminal, only once the work has lasted a second.

Never in piped or redirected output (stderr not a TTY), never mixed into a report on stdout, and nothing at all
for work that ends within `DELAY` seconds (most commands), so short runs and CI logs look as they always did.
`RTRACE_NO_PROGRESS=1` turns it off everywhere. The bar is transient: it leaves no line behind.
"""

from __future__ import annotations

import os
import sys
import threading
from types import TracebackType
from typing import IO

#: Seconds of work before a bar appears.
DELAY = 1.0


def wanted(stream: IO[str] | None = None) -> bool:
    """A bar may be drawn on `stream` (stderr): it is a terminal and progress is not turned off."""
    stream = stream or sys.stderr
    if os.environ.get("RTRACE_NO_PROGRESS") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Progress:
    """`with Progress("analyzing", total=n) as p: ... p.advance(k)` — a bar of `total` units (`unit`: `bytes`, shown
    as the fraction read and its size; or things counted, e.g. `traces`, shown as done of total), or a spinner with
    the time spent when `total` is None. A timer draws it after `delay` seconds if the work is still going; until
    then, and when no bar is wanted, `advance` and `update` only count."""

    def __init__(
        self,
        what: str,
        total: float | None = None,
        stream: IO[str] | None = None,
        delay: float = DELAY,
        unit: str = "bytes",
    ) -> None:
        self.what = what
        self.total = total
        self.unit = unit
        self.done = 0.0
        self._stream = stream or sys.stderr
        self._bar: object | None = None
        self._task: object | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._timer: threading.Timer | None = None
        if wanted(self._stream):
            self._timer = threading.Timer(delay, self._start)
            self._timer.daemon = True
            self._timer.start()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def shown(self) -> bool:
        """A bar is on the terminal now."""
        return self._bar is not None

    def advance(self, amount: float = 1) -> None:
        self.update(self.done + amount)

    def update(self, done: float) -> None:
        """`done` units of `total` so far (a reader's position in its file)."""
        self.done = done
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done)  # type: ignore[attr-defined]

    def measure(self, total: float, unit: str) -> None:
        """Count in `unit`s, `total` of them (known once the work is sized): before the bar is drawn."""
        with self._lock:
            if self._bar is None:
                self.total, self.unit = total, unit

    def _start(self) -> None:
        with self._lock:
            if not self._closed:
                self._draw()

    def _draw(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        from ..core.escape import shown

        console = Console(file=self._stream, stderr=True, highlight=False)
        columns = [SpinnerColumn(), TextColumn("{task.description}")]
        if self.total:
            columns += [BarColumn(), TextColumn("{task.percentage:>3.0f}%")]
            if self.unit == "bytes":
                columns.append(DownloadColumn())  # 1.2/3.4 GB read
            else:
                columns.append(TextColumn(f"{{task.completed:.0f}}/{{task.total:.0f}} {self.unit}"))
        columns.append(TimeElapsedColumn())
        bar = Progress(*columns, console=console, transient=True)
        self._task = bar.add_task(shown(self.what, 120), total=self.total or None, completed=int(self.done))
        bar.start()
        self._bar = bar

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
            if self._bar is not None:
                self._bar.stop()  # type: ignore[attr-defined]
                self._bar = None
