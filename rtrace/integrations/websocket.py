"""Record a realtime client's websocket from inside its process: every frame it sends and every frame it reads, as
native trace lines. The floor the framework recorders (`openai_sdk`, `openai_agents`, `pipecat`) stand on, and the
recorder of a hand-written client on the `websockets` library, two lines::

    from rtrace.integrations.websocket import record_websocket
    ws = record_websocket(await websockets.connect(url, additional_headers=...), "trace.jsonl")

`record_websocket` returns a stand-in for the connection (asyncio or sync, `websockets` 13 or later) that the client
uses as it used the connection: `send`, `recv`, iteration and `close` are recorded, anything else is the
connection's own. One `WireRecorder` is one trace; each socket it records is a connection of it, numbered in the
order they opened (a client that reconnects gets a new stand-in for each socket, `WireRecorder.socket`).

What a line is, and when it is written:

- a frame the client sends is written just before it goes (so a reply can never come first in the trace); a frame
  offered on a socket already closing is not sent by the library: a `note` says so instead;
- a frame the client reads is written when the client reads it (not when it arrived in the library's buffer);
- a frame that is not a JSON object becomes a `note`; binary frames too;
- the close, once per connection, when the client first learns of it (a read or a send that raises, the iteration
  ending, or its own `close`): `code` and `reason` of the close frame received (1006 when none was), `by` whoever
  sent the first close frame.

Every line goes through `core.writer.TraceWriter` with `core.secrets.redact_event`: secrets scrubbed (a streamed
secret across deltas included), audio payloads replaced by their size unless `keep_audio`, each line flushed as it
is written, so a killed client leaves a parseable trace. The library is never imported at module load; nothing
here changes what the client sends or reads.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson

from .. import __version__
from ..core.secrets import redact_event, safe_path, scrub_text
from ..core.writer import TraceWriter
from ..net.link.common import trace_write_failed

#: A websockets `State.OPEN` (the value of the enum member); any other state cannot send.
_OPEN = 1
#: The close code of a connection that ended with no close frame received.
ABNORMAL = 1006


def distribution_version(name: str) -> str | None:
    """`name x.y.z` for an installed distribution (the trace header's `client`), or None."""
    try:
        from importlib.metadata import version

        return f"{name} {version(name)}"
    except Exception:
        return None


class WireRecorder:
    """One native trace of a client's connections: `socket` wraps each websocket it opens, `local` writes the
    client's own view next to the wire. Thread-safe (a sync client may send from one thread and read in another).
    `close()` notes every connection still open as closed and closes the file."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        recorder: str,
        client: str | None = None,
        keep_audio: bool = False,
    ) -> None:
        header: dict[str, Any] = {"recorder": recorder, "version": __version__}
        if client:
            header["client"] = client
        redact = functools.partial(redact_event, keep_audio=keep_audio)
        self.writer: TraceWriter | None = TraceWriter.open(path, header, time.monotonic, trace_write_failed, redact)
        #: Connections opened so far (the last one's number).
        self.conns = 0
        self._open: set[int] = set()
        self._lock = threading.Lock()

    # -- lines ----------------------------------------------------------------------------------------------------

    def write(self, direction: str, conn: int, event: dict[str, Any]) -> None:
        with self._lock:
            if self.writer is not None:
                self.writer.write(direction, conn, event)

    def opened(self, path: str | None = None) -> int:
        """A new connection: its number (its `connection.opened` written, with the request path if known)."""
        with self._lock:
            self.conns += 1
            conn = self.conns
            self._open.add(conn)
        event: dict[str, Any] = {"type": "connection.opened"}
        if path:
            event["path"] = safe_path(path)
        self.write("meta", conn, event)
        return conn

    def closed(self, conn: int, by: str, code: int | None, reason: str | None = None) -> None:
        """`connection.closed` of `conn`, once."""
        with self._lock:
            if conn not in self._open:
                return
            self._open.discard(conn)
        event: dict[str, Any] = {"type": "connection.closed", "by": by}
        if code is not None:
            event["code"] = code
        if reason:
            event["reason"] = reason
        self.write("meta", conn, event)

    def is_open(self, conn: int) -> bool:
        return conn in self._open

    def note(self, conn: int, text: str) -> None:
        self.write("meta", conn, {"type": "note", "text": scrub_text(text)})

    def frame(self, direction: str, conn: int, data: Any) -> None:
        """A frame as it crossed the socket: a JSON object is the event; anything else a `note`."""
        event: Any = None
        if isinstance(data, (str, bytes, bytearray, memoryview)):
            try:
                event = orjson.loads(data)
            except orjson.JSONDecodeError:
                event = None
        if isinstance(event, dict):
            self.write(direction, conn, event)
        else:
            kind = "a binary frame" if isinstance(data, (bytes, bytearray, memoryview)) else "a frame"
            self.note(conn, f"{direction} sent {kind} that is not a JSON object ({_size(data)} bytes)")

    def local(self, conn: int | None, event: dict[str, Any]) -> None:
        """A `local` annotation (the client's own view), on `conn` or the last connection opened."""
        self.write("local", conn if conn is not None else max(self.conns, 1), event)

    # -- sockets --------------------------------------------------------------------------------------------------

    def socket(self, ws: Any) -> Any:
        """`ws` (a websockets connection, asyncio or sync) recorded as a new connection of this trace."""
        if isinstance(ws, (AsyncRecordedSocket, RecordedSocket)):
            return ws
        conn = self.opened(_request_path(ws))
        if asyncio.iscoroutinefunction(getattr(ws, "send", None)):
            return AsyncRecordedSocket(ws, self, conn)
        return RecordedSocket(ws, self, conn)

    def close(self) -> None:
        """Note every open connection closed (by the client, as far as the trace knows) and close the file."""
        for conn in sorted(self._open):
            self.closed(conn, "client", None, "the recorder was closed")
        with self._lock:
            if self.writer is not None:
                self.writer.close()
                self.writer = None

    def __enter__(self) -> WireRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _size(data: Any) -> int:
    if isinstance(data, str):
        return len(data.encode("utf-8", "replace"))
    try:
        return len(data)
    except TypeError:
        return 0


def _request_path(ws: Any) -> str | None:
    request = getattr(ws, "request", None)
    path = getattr(request, "path", None)
    return path if isinstance(path, str) else None


def _close(rcvd: Any, sent: Any, rcvd_then_sent: bool | None) -> tuple[str, int, str | None]:
    """(by, code, reason) of a close from the frames websockets saw: the code and reason of the close frame
    received (1006 when none was), `by` whoever sent the first."""
    if rcvd is not None:
        by = "client" if sent is not None and rcvd_then_sent is False else "server"
        return by, int(rcvd.code), (rcvd.reason or None)
    return ("client" if sent is not None else "server"), ABNORMAL, None


def _closed_by(exc: BaseException) -> tuple[str, int, str | None] | None:
    """The close a websockets `ConnectionClosed` tells of, or None for any other exception."""
    if not hasattr(exc, "rcvd") or not hasattr(exc, "sent"):
        return None
    return _close(exc.rcvd, exc.sent, getattr(exc, "rcvd_then_sent", None))


def _closed_ok(exc: BaseException) -> bool:
    return any(k.__name__ == "ConnectionClosedOK" for k in type(exc).__mro__)


class _Recorded:
    """What both stand-ins share: the connection, its recorder and number; every other attribute is the
    connection's."""

    def __init__(self, ws: Any, recorder: WireRecorder, conn: int) -> None:
        self._ws = ws
        self._recorder = recorder
        self.rtrace_conn = conn
        #: Whether closing this socket closes the trace (`record_websocket` given a path).
        self._owns_trace = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ws, name)

    def _ended(self, exc: BaseException) -> None:
        closed = _closed_by(exc)
        if closed is not None:
            self._recorder.closed(self.rtrace_conn, *closed)

    def _ended_quietly(self) -> None:
        """The connection ended without an exception the client saw (an iteration that stopped, a `close`)."""
        protocol = getattr(self._ws, "protocol", self._ws)
        close = _close(
            getattr(protocol, "close_rcvd", None),
            getattr(protocol, "close_sent", None),
            getattr(protocol, "close_rcvd_then_sent", None),
        )
        self._recorder.closed(self.rtrace_conn, *close)

    def _can_send(self, message: Any) -> bool:
        """Write the frame about to be sent; False (and a note) when the socket is past sending."""
        state = getattr(self._ws, "state", _OPEN)
        if int(getattr(state, "value", state)) != _OPEN or not self._recorder.is_open(self.rtrace_conn):
            if self._recorder.is_open(self.rtrace_conn):
                self._ended_quietly()
            what = _event_type(message)
            self._recorder.note(self.rtrace_conn, f"the client sent {what} on a closed connection: not sent")
            return False
        self._recorder.frame("client", self.rtrace_conn, message)
        return True


def _event_type(message: Any) -> str:
    try:
        event = orjson.loads(message)
    except (orjson.JSONDecodeError, TypeError):
        return "a frame"
    kind = event.get("type") if isinstance(event, dict) else None
    return str(kind) if isinstance(kind, str) else "a frame"


class AsyncRecordedSocket(_Recorded):
    """An asyncio websockets connection, recorded."""

    async def send(self, message: Any, *args: Any, **kwargs: Any) -> None:
        self._can_send(message)
        try:
            await self._ws.send(message, *args, **kwargs)
        except Exception as exc:
            self._ended(exc)
            raise

    async def recv(self, *args: Any, **kwargs: Any) -> Any:
        try:
            message = await self._ws.recv(*args, **kwargs)
        except Exception as exc:
            self._ended(exc)
            raise
        self._recorder.frame("server", self.rtrace_conn, message)
        return message

    async def __aiter__(self) -> AsyncIterator[Any]:
        while True:
            try:
                yield await self.recv()
            except Exception as exc:
                if _closed_ok(exc):
                    return
                raise

    async def close(self, *args: Any, **kwargs: Any) -> None:
        try:
            await self._ws.close(*args, **kwargs)
        finally:
            self._ended_quietly()
            if self._owns_trace:
                self._recorder.close()

    async def __aenter__(self) -> AsyncRecordedSocket:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class RecordedSocket(_Recorded):
    """A sync websockets connection (`websockets.sync`), recorded."""

    def send(self, message: Any, *args: Any, **kwargs: Any) -> None:
        self._can_send(message)
        try:
            self._ws.send(message, *args, **kwargs)
        except Exception as exc:
            self._ended(exc)
            raise

    def recv(self, *args: Any, **kwargs: Any) -> Any:
        try:
            message = self._ws.recv(*args, **kwargs)
        except TimeoutError:
            raise
        except Exception as exc:
            self._ended(exc)
            raise
        self._recorder.frame("server", self.rtrace_conn, message)
        return message

    def __iter__(self) -> Iterator[Any]:
        while True:
            try:
                yield self.recv()
            except Exception as exc:
                if _closed_ok(exc):
                    return
                raise

    def close(self, *args: Any, **kwargs: Any) -> None:
        try:
            self._ws.close(*args, **kwargs)
        finally:
            self._ended_quietly()
            if self._owns_trace:
                self._recorder.close()

    def __enter__(self) -> RecordedSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def record_websocket(ws: Any, path: str | os.PathLike[str] | WireRecorder, *, keep_audio: bool = False) -> Any:
    """`ws` recorded to the trace at `path` (or as one more connection of a `WireRecorder`): use what it returns
    in place of `ws`. Closing the socket closes its connection in the trace; the file is complete after each line
    (a `WireRecorder` given is closed by its owner)."""
    if isinstance(path, WireRecorder):
        return path.socket(ws)
    recorder = WireRecorder(path, "rtrace.integrations.websocket", distribution_version("websockets"), keep_audio)
    socket = recorder.socket(ws)
    socket._owns_trace = True
    return socket


__all__ = ["AsyncRecordedSocket", "RecordedSocket", "WireRecorder", "distribution_version", "record_websocket"]
