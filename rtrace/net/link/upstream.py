"""Faults on the link: `rtrace record` (and `hunt`/`serve --upstream`) between a client and a real upstream, the
faults that need no fake model acting on the frames as they pass. The same declarations as the fake endpoint's
(`rtrace.net.faults.flags`, `script.Schedule` turns, `ServerOptions` latency and jitter) and the same decisions
(`script.ConnectionScript`: which turn acts, its note, its close); `LINK_KINDS` is the one list of what a link can
make, `link_makes`/`unmakeable` what the search and the command line check against it. No protocol answer is made
here but an injected `error` and `session_expired`: everything else the upstream says.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
from collections.abc import AsyncIterator
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from ...core.writer import TraceWriter
from ..fake.wire import Emission, error_event
from ..faults import actions
from ..faults.flags import ABNORMAL, NO_STATUS
from ..faults.schedule import KIND_COST
from ..faults.schedule import Fault as SearchFault
from ..faults.script import ConnectionScript, Turn
from ..faults.script import Schedule as ScriptSchedule
from .common import Quiet
from .proxy import RecordingProxy, RecordOptions, run_proxy
from .server import ServerOptions, _Outbox

#: Either side of a proxied connection.
Socket = ServerConnection | ClientConnection
#: The kinds of fault (`schedule.Kind`) a link makes (`rtrace.net.faults.actions.Action.link`): latency and jitter on
#: the upstream's events, a drop, close, `error` answer or delay at a client event, a close or delay after a server
#: event, `session_expired`. The others (failed, cancelled, rate-limited responses, a close after the Nth response,
#: failed transcriptions, barge-ins, paced or bursty audio) change what the model does: only the fake endpoint
#: makes them.
LINK_KINDS = actions.LINK_KINDS
#: The moments (`schedule.Moment`) a link sees: every event, a client event, a server event, the session's clock.
LINK_MOMENTS = frozenset({"all", "event", "sent", "session"})
#: What only the fake model makes, in words (the hunt's report names them when it leaves them out).
FAKE_ONLY = (*sorted(k for k in KIND_COST if k not in LINK_KINDS), "close after the Nth response")
#: The turn fields that ask the model for something (a link has no model to ask): its conditions on a response or a
#: transcription, its answer, and the fault actions no link makes (`rtrace.net.faults.actions.Key.model`).
_MODEL_FIELDS = ("user", "user_regex", "tool_output", "response", "transcription", "text",
                 *(k for k, key in actions.KEYS.items() if key.model))  # fmt: skip


def link_makes(fault: SearchFault) -> bool:
    """Whether a link can make this fault of the hunt's search (`LINK_KINDS`, `LINK_MOMENTS`)."""
    return fault.kind in LINK_KINDS and fault.moment in LINK_MOMENTS


def unmakeable(schedule: ScriptSchedule) -> list[Turn]:
    """The turns of `schedule` a link cannot act out (they ask the model for a response, a call, a transcription)."""
    return [t for t in schedule.turns if t.calls or t.moment not in ("event", "sent", "opened")
            or any(getattr(t, name) not in (None, False) for name in _MODEL_FIELDS)]  # fmt: skip


def check_link(options: ServerOptions) -> None:
    """Raise ValueError naming the first fault or turn of `options` only the fake endpoint can make."""
    for turn in unmakeable(options.schedule):
        what = f"--{turn.fault}" if turn.fault != "script" else f"{options.schedule.path or 'the script'}:{turn.line}"
        raise ValueError(f"{what}: only the fake endpoint can make this fault, not a link to an upstream "
                         f"(a link makes: {', '.join(sorted(LINK_KINDS))})")  # fmt: skip


@dataclasses.dataclass
class _State:
    """One proxied connection's faults: its script, its send queue towards the client, how the link closed it."""

    script: ConnectionScript
    outbox: _Outbox
    sender: asyncio.Task[None]
    #: (code, reason) once a fault closed the connection.
    closed: tuple[int, str] | None = None
    expiry: asyncio.Task[None] | None = None
    injected: int = 0


class LinkProxy(RecordingProxy):
    """A recording proxy whose frames go through the faults of `faults` (`ServerOptions`: schedule, latency,
    jitter, seed), each connection with its `ConnectionScript`; fires are counted across connections, as the
    fake endpoint counts them in its life."""

    def __init__(self, options: RecordOptions, faults: ServerOptions, writer: TraceWriter | None = None) -> None:
        check_link(faults)
        super().__init__(options, writer)
        self.faults = faults
        self.fired: dict[str, int] = {}
        self._states: dict[int, _State] = {}
        #: The quiet after the link's faults (`hung_after_fault`), as the fake endpoint keeps it.
        self.quiet = Quiet()

    def hung_after_fault(self, quiet: float) -> bool:
        """Whether a fault the link made acted, no response was done since, a connection is proxied and nothing
        went either way for `quiet` seconds (`RealtimeServer.hung_after_fault`: a hunt ends such a run early)."""
        return self.quiet.hung(quiet, bool(self._live))

    def _state(self, conn: int, ws: ServerConnection, upstream: ClientConnection) -> _State:
        state = self._states.get(conn)
        if state is not None:
            return state
        o = self.faults
        rng = random.Random(f"{o.seed}:{conn}") if o.seed is not None else random.Random()
        outbox = _Outbox(ws, o, rng, lambda ev, raw: self._write("server", conn, ev),
                         lambda note: self._write("meta", conn, note),
                         lambda code, reason: self._close(conn, ws, upstream, code, reason))  # fmt: skip
        script = ConnectionScript(o.schedule, conn, self.fired)
        state = self._states[conn] = _State(script, outbox, asyncio.get_running_loop().create_task(outbox.run()))
        script.opened()
        if script.expiry is not None and script.expiry.expire is not None:
            state.expiry = asyncio.get_running_loop().create_task(self._expire(state, script.expiry))
        return state

    async def _expire(self, state: _State, turn: Turn) -> None:
        """`session_expired` and a close 1001, `turn.expire` seconds after the connection opened (as the endpoint)."""
        assert turn.expire is not None
        await self.faults.sleep(turn.expire)
        message = f"Your session hit the maximum duration of {turn.expire / 60:g} minutes."
        state.outbox.put(turn.note("expire"))
        state.outbox.put(Emission(event=self._error(state, "session_expired", message, None, "invalid_request_error")))
        state.outbox.put(Emission(close=(1001, message)))

    def _error(self, state: _State, code: str, message: str, client: dict[str, Any] | None, etype: str) -> Any:
        state.injected += 1
        event_id = client.get("event_id") if client is not None else None
        event = error_event(code, message, None, event_id if isinstance(event_id, str) else None, etype)
        return {"event_id": f"event_rtrace_link_{state.injected}", **event}

    async def _close(self, conn: int, ws: ServerConnection, upstream: ClientConnection, code: int, reason: str) -> None:
        """A fault closes the connection: the client side as the fault says (1006: no close frame), the upstream
        with 1000 (the session is over)."""
        state = self._states.get(conn)
        if state is not None and state.closed is None:
            state.closed = (code, reason)
        if code == ABNORMAL:
            ws.transport.abort()
        else:
            with contextlib.suppress(Exception):
                await (ws.close(None) if code == NO_STATUS else ws.close(code, reason))  # type: ignore[arg-type]
        with contextlib.suppress(Exception):
            await asyncio.wait_for(upstream.close(), 2.0)

    def _write(self, direction: str, conn: int, event: dict[str, Any]) -> None:
        self.quiet.saw(direction, event)
        state = self._states.get(conn)
        if direction == "meta" and event.get("type") == "connection.closed" and state is not None:
            if state.closed is not None:  # the link closed it: as the fake endpoint notes its own closes
                code, reason = state.closed
                event = {**event, "by": "server", "code": code, "reason": reason}
            self._forget(conn)
        super()._write(direction, conn, event)

    def _forget(self, conn: int) -> None:
        state = self._states.pop(conn, None)
        if state is not None:
            state.sender.cancel()
            if state.expiry is not None:
                state.expiry.cancel()

    async def _pump(self, src: Socket, dst: Socket, direction: str, conn: int) -> None:
        """`RecordingProxy._pump`'s place: each side's frames through the connection's faults."""
        ws, upstream = (src, dst) if direction == "client" else (dst, src)
        state = self._state(conn, ws, upstream)  # type: ignore[arg-type]
        if direction == "client":
            await self._from_client(state, src, dst, conn)  # type: ignore[arg-type]
        else:
            await self._from_upstream(state, src, conn)  # type: ignore[arg-type]

    async def _from_client(self, state: _State, ws: ServerConnection, upstream: ClientConnection, conn: int) -> None:
        async for message in ws:
            self._log_frame("client", conn, message)
            event = _event_of(message)
            turn = state.script.on_event(event) if event is not None and state.closed is None else None
            if turn is not None and turn.close is not None:
                note, close = turn.closing(event, flush=False)
                self._write("meta", conn, note.meta or {})
                state.sender.cancel()  # what is still queued never leaves (a drop)
                assert close.close is not None
                await self._close(conn, ws, upstream, *close.close)
                return
            if turn is not None and turn.error is not None:  # answered here, withheld from the upstream
                state.outbox.put(turn.note("error", event))
                error = self._error(state, turn.error, turn.error_message(), event, "server_error")
                state.outbox.put(Emission(event=error))
                continue
            if turn is not None and turn.delay is not None:  # what follows waits behind it (the link is ordered)
                self._write("meta", conn, turn.note("delay", event).meta or {})
                await self.faults.sleep(turn.delay)
            try:
                await upstream.send(message)
            except ConnectionClosed:
                return

    async def _from_upstream(self, state: _State, upstream: ClientConnection, conn: int) -> None:
        closed = False
        async for message in upstream:
            event = _event_of(message)
            if event is None:  # not an event: passed on as it is, after what is queued
                self._log_frame("server", conn, message)
                state.outbox.put(Emission(meta={"type": "note", "text": "a frame that is not an event passed on"}))
                with contextlib.suppress(ConnectionClosed):
                    await state.outbox.ws.send(message)
                continue
            if state.closed is not None:
                continue
            kept, closed = state.script.sent([Emission(event=event)])
            for em in kept:
                state.outbox.put(em)
            if closed:
                break
        # the upstream is done, or a fault closes after this event: what is queued goes out first
        with contextlib.suppress(asyncio.CancelledError, ConnectionClosed):
            if closed:
                await asyncio.wait({state.sender}, timeout=5.0)
                return
            for _ in range(500):  # at most 5 s: the events the latency still holds
                if not state.outbox.queue or state.sender.done():
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.02)  # the last one popped is being sent


def _event_of(message: str | bytes) -> dict[str, Any] | None:
    if isinstance(message, bytes):
        return None
    try:
        event = orjson.loads(message)
    except orjson.JSONDecodeError:
        return None
    return event if isinstance(event, dict) else None


@contextlib.asynccontextmanager
async def run_link(options: RecordOptions, faults: ServerOptions) -> AsyncIterator[LinkProxy]:
    """A recording proxy to `options.upstream` with the faults of `faults`, for the duration of the block."""
    async with run_proxy(options, lambda o, w: LinkProxy(o, faults, w)) as proxy:
        assert isinstance(proxy, LinkProxy)
        yield proxy


__all__ = [
    "FAKE_ONLY",
    "LINK_KINDS",
    "LinkProxy",
    "check_link",
    "link_makes",
    "run_link",
    "unmakeable",
]
