"""How late `serve` sends what it meant to send on time: the latency it applies is a promise it keeps, or says it
cannot keep.

Each server event is due at a moment (`--latency`, jitter, a script's pause); the send queue notes how long after
that moment the frame actually left (`Lateness.sent`). A busy machine (other processes on every core, the live
fold's thread holding the interpreter) makes that lateness grow silently, and every ack delay a client measures
grows with it. Past `LATE_BOUND` an event is counted late, and a warning says so (at most one each `WARN_EVERY`
seconds, with the count so far); `summary` is the line `serve` prints when it stops.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

#: An event sent more than this after its due time is late (the bound serve promises to keep).
LATE_BOUND = 0.010
#: At most one warning in this many seconds.
WARN_EVERY = 10.0
#: Upper edges of the histogram's buckets (seconds); the last bucket is everything above.
EDGES = (0.001, 0.002, 0.005, 0.010, 0.020, 0.050, 0.100, 0.200, 0.500, 1.0, 2.0, 5.0)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms" if seconds >= 0.001 else f"{seconds * 1000:.1f} ms"


class Lateness:
    """The lateness of every event a server sent: a count, the late ones, the worst, a histogram."""

    def __init__(
        self, clock: Callable[[], float], warn: Callable[[str], None] | None, bound: float = LATE_BOUND
    ) -> None:
        self.clock = clock
        self.warn = warn
        self.bound = bound
        self.count = 0
        #: Events sent more than `bound` after their due time.
        self.late = 0
        self.worst = 0.0
        self.buckets = [0] * (len(EDGES) + 1)
        #: How many warnings were given.
        self.warnings = 0
        self._next_warning = float("-inf")

    def sent(self, lateness: float) -> None:
        """An event left `lateness` seconds after it was due (0 or less: on time)."""
        lateness = max(0.0, lateness)
        self.count += 1
        self.buckets[bisect.bisect_left(EDGES, lateness)] += 1
        if lateness > self.worst:
            self.worst = lateness
        if lateness <= self.bound:
            return
        self.late += 1
        now = self.clock()
        if self.warn is not None and now >= self._next_warning:
            self._next_warning = now + WARN_EVERY
            self.warnings += 1
            self.warn(
                f"rtrace serve: warning: an event left {_ms(lateness)} after it was due, over the "
                f"{_ms(self.bound)} bound ({self.late:,} of {self.count:,} events so far): this machine is too "
                "busy to keep the latency asked for; the trace has the times the frames really left"
            )

    def quantile(self, q: float) -> float:
        """The upper edge of the bucket holding the `q` quantile (the worst lateness for the last bucket)."""
        if not self.count:
            return 0.0
        rank = q * self.count
        seen = 0
        for k, n in enumerate(self.buckets):
            seen += n
            if seen >= rank and n:
                return min(EDGES[k], self.worst) if k < len(EDGES) else self.worst
        return self.worst

    def summary(self) -> str:
        """The line `serve` prints when it stops."""
        if not self.count:
            return "rtrace serve: lateness: no event sent"
        return (
            f"rtrace serve: lateness: {self.late:,} of {self.count:,} events sent over {_ms(self.bound)} after "
            f"they were due (median <= {_ms(self.quantile(0.5))}, p99 <= {_ms(self.quantile(0.99))}, worst "
            f"{_ms(self.worst)})"
        )


__all__ = ["LATE_BOUND", "Lateness"]
