"""The split read's second opinion (`parallel.analyze_split`): whether its two processes each got a core.

Owns `Watch` (their CPU time against the wall clock, shortly after the fork) and `Gate` (the first part's stream,
which reads on past the cut when the watch says so). Reads /proc and clocks only; forks, kills and folds nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

#: How long after the fork the watch looks (wall seconds): long enough for the scheduler to have shared the cores
#: out a few times (a time slice is a few ms), short against a trace worth splitting (`parallel.SPLIT_MIN_BYTES`).
WATCH_AFTER_S = 0.02
#: The least share of that time the two processes must have run (on a core, not waiting for one) for the split to go
#: on: about 1 on a machine with a core free for each, 2/3 with one busy process beside them on 2 cores, 1/2 with
#: two. Below it they share cores with others, and one process is never slower: the first reads on alone.
MIN_RUN_SHARE = 0.8


def cpu_ns(pid: int) -> int | None:
    """The CPU time process `pid` has had so far, in ns (the first field of /proc/<pid>/schedstat), or None."""
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as f:
            field = f.read().split(None, 1)[0]
    except (OSError, IndexError):
        return None
    return int(field) if field.isdigit() else None


def run_share(elapsed_s: float, own_cpu_s: float, child_cpu_ns: int | None) -> float:
    """The share of `elapsed_s` the two processes ran: this one's CPU time since the fork and the child's (all of
    it, from its /proc schedstat); this one's alone when the child's cannot be read."""
    if elapsed_s <= 0:
        return 1.0
    if child_cpu_ns is None:
        return own_cpu_s / elapsed_s
    return (own_cpu_s + child_cpu_ns / 1e9) / (2 * elapsed_s)


class Watch:
    """Asked as the first process reads its part (`alone`): None until `WATCH_AFTER_S` after the fork, then once
    whether it should read on alone (the two ran less than `MIN_RUN_SHARE` of the time), never again after. The
    clocks and the child's CPU time are injectable (tests)."""

    def __init__(
        self,
        child: int,
        clock: Callable[[], float] = time.perf_counter,
        own_cpu: Callable[[], float] = time.process_time,
        child_cpu: Callable[[int], int | None] = cpu_ns,
    ) -> None:
        self.child = child
        self._clock, self._own_cpu, self._child_cpu = clock, own_cpu, child_cpu
        self._start, self._cpu0 = clock(), own_cpu()
        #: The run share the verdict was taken on, once taken (for a bench's log).
        self.share: float | None = None

    def alone(self) -> bool | None:
        if self.share is not None:
            return None
        elapsed = self._clock() - self._start
        if elapsed < WATCH_AFTER_S:
            return None
        self.share = run_share(elapsed, self._own_cpu() - self._cpu0, self._child_cpu(self.child))
        return self.share < MIN_RUN_SHARE


class Gate:
    """The first part of a file, as a `TraceReader` reads it (`read`, `peek`, `tell`): up to `stop`, or to the end
    once `ask` (called before each read until it answers True or False) answers True (`alone` is then set)."""

    def __init__(self, f: Any, stop: int, ask: Callable[[], bool | None]) -> None:
        self._f = f
        self._ask: Callable[[], bool | None] | None = ask
        self.stop: int | None = stop
        self.pos = 0
        self.alone = False

    def peek(self, n: int = 0) -> bytes:
        data: bytes = self._f.peek(n)
        return data if self.stop is None else data[: max(0, self.stop - self.pos)]

    def read(self, n: int = -1) -> bytes:
        if self._ask is not None:
            verdict = self._ask()
            if verdict is not None:
                self._ask = None
                if verdict:
                    self.stop, self.alone = None, True
        if self.stop is not None:
            left = self.stop - self.pos
            n = left if n < 0 else min(n, left)
            if n <= 0:
                return b""
        data: bytes = self._f.read(n)
        self.pos += len(data)
        return data

    def tell(self) -> int:
        return self.pos

    def close(self) -> None:
        self._f.close()
