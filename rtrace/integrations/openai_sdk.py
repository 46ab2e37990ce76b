"""Record a realtime connection of the openai Python SDK (`client.realtime.connect()`, async or sync; also
`client.beta.realtime.connect()`) from inside the application, two lines::

    from rtrace.integrations.openai_sdk import record_connection
    conn = record_connection(await client.realtime.connect(model="gpt-realtime").enter(), "trace.jsonl")
    # or: async with client.realtime.connect(...) as conn: record_connection(conn, "trace.jsonl")

What is recorded is the socket under the connection (`conn._connection`, the `websockets` connection its `send`,
`recv`, `recv_bytes` and iteration all go through), so the trace holds every frame as it left or was read, the
SDK's own (the frames it queued while reconnecting, flushed on the new socket) included. With `on_reconnecting`
the SDK opens a new socket through `conn._make_ws`; each is a new connection of the trace, so a reconnect reads as
it happened on the wire. `conn.close()` closes the trace. The SDK keeps no conversation or response state of its own,
so there are no `local` annotations (the application's own view, if it has one, can be written with
`ConnectionRecorder.recorder.local`). See `rtrace.integrations.websocket` for what a line is and when it is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from typing import Any, TypeVar

from .websocket import WireRecorder, distribution_version

_C = TypeVar("_C")


class ConnectionRecorder:
    """The recording of one SDK connection; `close()` detaches (the connection's own methods again) and closes the
    trace."""

    def __init__(self, connection: Any, path: str | os.PathLike[str], keep_audio: bool = False) -> None:
        if not hasattr(connection, "_connection"):
            raise TypeError("record_connection needs a connection from client.realtime.connect() (entered)")
        self.connection = connection
        self.recorder = WireRecorder(path, "rtrace.integrations.openai_sdk", distribution_version("openai"), keep_audio)
        self._restore: list[Callable[[], None]] = []
        connection._connection = self.recorder.socket(connection._connection)
        self._wrap_make_ws()
        self._wrap_close()

    def _patch(self, name: str, value: Any) -> None:
        """Set an attribute of the connection instance, to be undone by `close`."""
        connection = self.connection
        had = name in vars(connection)
        old = vars(connection).get(name)
        setattr(connection, name, value)

        def restore() -> None:
            if had:
                setattr(connection, name, old)
            else:
                with contextlib.suppress(AttributeError):
                    delattr(connection, name)

        self._restore.append(restore)

    def _wrap_make_ws(self) -> None:
        make_ws = getattr(self.connection, "_make_ws", None)
        if make_ws is None:  # no `on_reconnecting`: the SDK never opens a second socket
            return
        socket = self.recorder.socket
        if asyncio.iscoroutinefunction(make_ws):

            async def make_async(*args: Any, **kwargs: Any) -> Any:
                return socket(await make_ws(*args, **kwargs))

            self._patch("_make_ws", make_async)
        else:

            def make_sync(*args: Any, **kwargs: Any) -> Any:
                return socket(make_ws(*args, **kwargs))

            self._patch("_make_ws", make_sync)

    def _wrap_close(self) -> None:
        close = self.connection.close
        if asyncio.iscoroutinefunction(close):

            async def close_async(*args: Any, **kwargs: Any) -> Any:
                try:
                    return await close(*args, **kwargs)
                finally:
                    self.close()

            self._patch("close", close_async)
        else:

            def close_sync(*args: Any, **kwargs: Any) -> Any:
                try:
                    return close(*args, **kwargs)
                finally:
                    self.close()

            self._patch("close", close_sync)

    def close(self) -> None:
        """Stop recording: the connection's socket and methods are its own again; the trace is closed."""
        socket = getattr(self.connection, "_connection", None)
        inner = getattr(socket, "_ws", None)
        if inner is not None:
            self.connection._connection = inner
        for restore in reversed(self._restore):
            restore()
        self._restore.clear()
        self.recorder.close()


def record_connection(connection: _C, path: str | os.PathLike[str], *, keep_audio: bool = False) -> _C:
    """Record `connection` (an entered `client.realtime.connect(...)`, async or sync) to the trace at `path`, and
    return it (the same object: recording changes nothing it does). The recording is `connection.rtrace_recorder`."""
    recorder = ConnectionRecorder(connection, path, keep_audio)
    with contextlib.suppress(AttributeError):
        setattr(connection, "rtrace_recorder", recorder)  # noqa: B010
    return connection


__all__ = ["ConnectionRecorder", "record_connection"]
