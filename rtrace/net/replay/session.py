"""The replay of one recorded connection, sans I/O: which client event to send when, what the answers teach about
the endpoint's ids, and where they diverge from the recording.

No sockets, no event loop, no clock of its own: `ReplaySession` is told each server event with the line it was
written at (`receive`), each send with its line (`sent`) and the close (`closed`), reads the time from the clock it
was given, and answers `next()` with what to do: `Send` this event, `Wait` until an event arrives or a time passes,
or `Done`. `rtrace.net.replay.runner` moves the frames and the time (as websockets' `protocol.py` is driven by its
`asyncio/connection.py`); a test drives a session with a fake clock and hand-made answers in milliseconds.

Pacing keeps the recording's causality at every pace: a client event is sent only once the server event it followed
in the recording (its anchor: the last of `rtrace.core.catalog.ANCHOR_TYPES` before it) has come, or
`timeout` passed (a wait over the timeout: a divergence). `reactive` then waits the recorded think time (at most
`MAX_THINK`), `recorded` sends at the recorded offset from the connection's start when that is later, `asap` at
once; `speed` divides every pause. Once every event is sent the session settles: it waits (up to `timeout` in all)
until each acknowledgement the recording has came as often, then for `SETTLE` seconds without any server event.

Server-assigned ids are learned (`rtrace.net.fake.ids.learn_ids`) by walking each server event beside its recorded
counterpart (the k-th event of the same type) and rewritten in what is sent afterwards; the ids the client chose
itself stay. Divergences: an acknowledgement that did not come (`missing`, at the recording's line of the one
awaited), an error the recording does not have (`error`, at the recording's line of the event that caused it and the
replay's line of the error), the endpoint closing before every event was sent (`closed`).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from typing import Any

import orjson

from ...core.catalog import ANCHOR_TYPES
from ...core.escape import shown
from ...core.trace import Record
from ..fake.ids import ID_KEYS, client_ids, learn_ids, rewrite_ids

PACES = ("reactive", "recorded", "asap")
#: A recorded pause longer than this is shortened to it (a replay is not meant to take as long as the call).
MAX_THINK = 5.0
#: Seconds without any server event after which a connection whose answers are all in is considered settled.
SETTLE = 0.3


@dataclasses.dataclass
class Divergence:
    """A place where the endpoint answered differently from the recording."""

    conn: int
    kind: str  # missing, error, closed
    message: str
    #: Line in the original trace, line in the replayed trace (either may be unknown).
    original_line: int | None
    replay_line: int | None
    original_text: str = ""
    replay_text: str = ""


@dataclasses.dataclass
class ConnResult:
    conn: int
    sent: int = 0
    received: int = 0
    timeouts: int = 0
    close_code: int | None = None


# -- the plan of one connection -------------------------------------------------------------------------------------


@dataclasses.dataclass
class Step:
    """A client event to send: after the `anchor_k`-th server event of `anchor_type`, `think` seconds later
    (reactive), or `offset` seconds after the connection's start (recorded)."""

    rec: Record
    anchor_type: str | None
    anchor_k: int
    anchor_line: int | None
    think: float
    offset: float


def plan(records: list[Record]) -> tuple[list[Step], list[Record]]:
    """The client events of one connection with what each followed; and the recorded server events."""
    steps: list[Step] = []
    server: list[Record] = []
    counts: Counter[str] = Counter()
    anchor: Record | None = None
    start = records[0].t if records else 0.0
    for rec in records:
        if rec.dir == "server":
            server.append(rec)
            counts[rec.type] += 1
            if rec.type in ANCHOR_TYPES:
                anchor = rec
        elif rec.dir == "client":
            base = anchor.t if anchor is not None else start
            steps.append(
                Step(
                    rec,
                    anchor.type if anchor is not None else None,
                    counts[anchor.type] if anchor is not None else 0,
                    anchor.line if anchor is not None else None,
                    min(MAX_THINK, max(0.0, rec.t - base)),
                    max(0.0, rec.t - start),
                )
            )
    return steps, server


def server_event(message: str | bytes) -> dict[str, Any] | None:
    """The event a server frame holds, or None (not JSON, or not an object: nothing a replay can compare)."""
    try:
        event = orjson.loads(message)
    except orjson.JSONDecodeError:
        return None
    return event if isinstance(event, dict) else None


def _short(event: dict[str, Any]) -> str:
    return shown(orjson.dumps(event).decode(), 100)


# -- what to do next ------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Send:
    """Send `event` (ids already rewritten), write it to the replayed trace, then call `ReplaySession.sent`; if
    the connection turns out closed, call `ReplaySession.closed` instead."""

    event: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Wait:
    """Nothing to send before a server event arrives, the connection closes, or the clock reaches `until`."""

    until: float


@dataclasses.dataclass(frozen=True)
class Done:
    """The connection is replayed: close it."""


Action = Send | Wait | Done

_ANCHOR, _PAUSE, _SENDING, _SETTLE, _QUIET, _DONE = range(6)


class ReplaySession:
    """The replay of one recorded connection (`records`), driven by `next()`.

    `ids` (recorded -> replayed server ids) and `keep` (ids the client chose) are shared by the connections of one
    trace: an id learned on one is rewritten on the next. `line`: the replayed trace's last line when the
    connection opened (a divergence before any event names it)."""

    def __init__(
        self,
        conn: int,
        records: list[Record],
        *,
        clock: Callable[[], float],
        pace: str = "reactive",
        speed: float = 1.0,
        timeout: float = 5.0,
        ids: dict[str, str] | None = None,
        keep: set[str] | None = None,
        line: int = 0,
    ) -> None:
        if pace not in PACES:
            raise ValueError(f"pace {pace!r}: one of {', '.join(PACES)}")
        self.conn = conn
        self.clock = clock
        self.pace = pace
        self.speed = max(speed, 1e-6)
        self.timeout = timeout
        self.ids = ids if ids is not None else {}
        self.keep = keep if keep is not None else client_ids(records)
        self.steps, self.recorded_server = plan(records)
        self.recorded_by_type: dict[str, list[Record]] = {}
        for rec in self.recorded_server:
            self.recorded_by_type.setdefault(rec.type, []).append(rec)
        self.result = ConnResult(conn)
        self.divergences: list[Divergence] = []
        #: The server event types received, in order (ids left out): for `--compare`.
        self.answers: list[str] = []
        self.counts: Counter[str] = Counter()
        self.is_closed = False
        self.started = self.last_arrival = clock()
        self.last_line = line
        #: Replay line and recording line of each client event sent, by its event_id; and of the last one.
        self.sent_lines: dict[str, tuple[int, int]] = {}
        self.last_sent: tuple[int, int] | None = None
        self._phase = _ANCHOR
        self._step = 0
        self._deadline = 0.0  # of the wait for an anchor, or of the settling
        self._waiting = False  # a wait for the current step's anchor has begun
        self._send_at = 0.0
        self._pending: Send | None = None
        self._settle_types = [t for t in self.recorded_by_type if t in ANCHOR_TYPES and t != "error"]

    # -- told by the I/O layer --------------------------------------------------------------------------------------

    def receive(self, event: dict[str, Any], line: int) -> None:
        """A server event, written at `line` of the replayed trace."""
        etype = str(event.get("type"))
        self.last_line = line
        self.result.received += 1
        self.answers.append(etype)
        self.last_arrival = self.clock()
        k = self.counts[etype]
        self.counts[etype] += 1
        recorded = self.recorded_by_type.get(etype, [])
        if k < len(recorded):
            learn_ids(recorded[k].event, event, self.keep, self.ids)
        elif etype == "error":
            raw_err = event.get("error")
            err: dict[str, Any] = raw_err if isinstance(raw_err, dict) else {}
            cause = self.sent_lines.get(str(err.get("event_id"))) or self.last_sent
            what = shown(str(err.get("code") or err.get("message")))
            self.divergences.append(
                Divergence(
                    self.conn,
                    "error",
                    f"an error the recording does not have: {what}",
                    cause[1] if cause else None,
                    line,
                    "",
                    _short(event),
                )
            )

    def sent(self, line: int) -> None:
        """The event of the last `Send` went out and was written at `line` of the replayed trace."""
        assert self._pending is not None, "sent() without a Send"
        event, step = self._pending.event, self.steps[self._step]
        self._pending = None
        self.last_line = line
        self.result.sent += 1
        self.last_sent = (line, step.rec.line)
        if isinstance(event.get("event_id"), str):
            self.sent_lines[event["event_id"]] = self.last_sent
        self._step += 1
        self._phase = _ANCHOR

    def closed(self) -> None:
        """The endpoint closed the connection (or a send found it closed)."""
        self.is_closed = True

    # -- asked by the I/O layer -------------------------------------------------------------------------------------

    def next(self) -> Action:
        """What to do now. After a `Send`, the same `Send` until `sent` is called; once `closed`, the event of a
        `Send` not confirmed by `sent` counts as not sent."""
        now = self.clock()
        while True:
            if self._phase == _ANCHOR:
                if self._step == len(self.steps):
                    self._phase, self._deadline = _SETTLE, now + self.timeout
                    continue
                step = self.steps[self._step]
                if step.anchor_type is not None and self.counts[step.anchor_type] < step.anchor_k:
                    if not self._waiting:
                        self._waiting, self._deadline = True, now + self.timeout
                    if not self.is_closed and now < self._deadline:
                        return Wait(self._deadline)
                    self.result.timeouts += 1
                    self._missing(step.anchor_type, step.anchor_k, f"before sending recording line {step.rec.line}")
                self._waiting = False
                if self.pace == "reactive":
                    self._send_at = now + step.think / self.speed
                elif self.pace == "recorded":
                    self._send_at = self.started + step.offset / self.speed
                else:
                    self._send_at = now
                self._phase = _PAUSE
            elif self._phase == _PAUSE:
                if not self.is_closed and now < self._send_at:
                    return Wait(self._send_at)
                if self.is_closed:
                    rest = len(self.steps) - self.result.sent
                    self.divergences.append(
                        Divergence(
                            self.conn,
                            "closed",
                            f"the endpoint closed the connection; {rest} client event(s) not sent",
                            self.steps[self._step].rec.line,
                            self.last_line,
                        )
                    )
                    self._phase, self._deadline = _SETTLE, now + self.timeout
                    continue
                self._pending = Send(rewrite_ids(self.steps[self._step].rec.event, self.ids))
                self._phase = _SENDING
            elif self._phase == _SENDING:
                assert self._pending is not None
                if not self.is_closed:
                    return self._pending
                self._pending, self._phase = None, _PAUSE  # closed before it went out: not sent
            elif self._phase == _SETTLE:
                while self._settle_types:
                    etype = self._settle_types[0]
                    want = len(self.recorded_by_type[etype])
                    if self.counts[etype] < want:
                        if not self.is_closed and now < self._deadline:
                            return Wait(self._deadline)
                        self._missing(etype, want, "by the end of the connection")
                    self._settle_types.pop(0)
                self._phase = _QUIET
            elif self._phase == _QUIET:
                if not self.is_closed and now < self.last_arrival + SETTLE:
                    return Wait(self.last_arrival + SETTLE)
                self._phase = _DONE
            else:
                return Done()

    def _missing(self, etype: str, k: int, when: str) -> None:
        got = self.counts[etype]
        recorded = self.recorded_by_type.get(etype, [])
        rec = recorded[got] if got < len(recorded) else None
        self.divergences.append(
            Divergence(
                self.conn,
                "missing",
                f"{etype} #{got + 1} of the recording did not come {when} (got {got} of {k})",
                rec.line if rec else None,
                self.last_sent[0] if self.last_sent else None,
                _short(rec.event) if rec else "",
                "",
            )
        )


__all__ = [
    "ANCHOR_TYPES",
    "ID_KEYS",
    "MAX_THINK",
    "PACES",
    "SETTLE",
    "Action",
    "ConnResult",
    "Divergence",
    "Done",
    "ReplaySession",
    "Send",
    "Step",
    "Wait",
    "client_ids",
    "learn_ids",
    "plan",
    "rewrite_ids",
    "server_event",
]
