"""Record a LiveKit Agents realtime session from inside the agent, no proxy: two lines in the user's code::

    from rtrace.integrations.livekit import record_session
    record_session(agent, "trace.jsonl")  # after `await session.start(agent)`; or a RealtimeSession

Owns the mapping of the session's `openai_client_event_queued` / `openai_server_event_received` events to native trace
lines (scrubbed by `redact.redact_event`), connection counting across reconnects, and the `local` annotations: the
agent's own conversation when it changes and its generations opening and closing. livekit is never imported here.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import time
from collections.abc import Callable
from typing import Any

from .. import __version__
from ..core.secrets import redact_event
from ..core.writer import TraceWriter
from ..net.link.common import trace_write_failed

#: Seconds between checks of the agent's conversation for changes not tied to a wire event (a tool result).
POLL_SECONDS = 0.1
#: Chat items that are pushed to the server; anything else (handoffs, config updates) stays local.
_WIRE_TYPES = ("message", "function_call", "function_call_output")


def _text_parts(item: Any) -> list[dict[str, Any]]:
    role = getattr(item, "role", "user")
    kind = "output_text" if role == "assistant" else "input_text"
    parts: list[dict[str, Any]] = []
    for part in getattr(item, "content", None) or []:
        if isinstance(part, str):
            parts.append({"type": kind, "text": part})
        else:
            transcript = getattr(part, "transcript", None)
            if isinstance(transcript, str):
                parts.append({"type": "input_audio", "transcript": transcript})
    return parts


def wire_item(item: Any) -> dict[str, Any] | None:
    """A livekit chat item as a realtime wire item (id, type, role, call_id, name, arguments, content text)."""
    kind = getattr(item, "type", None)
    item_id = getattr(item, "id", None)
    if kind not in _WIRE_TYPES or not isinstance(item_id, str):
        return None
    out: dict[str, Any] = {"id": item_id, "type": kind}
    if kind == "message":
        out["role"] = str(getattr(item, "role", ""))
        out["content"] = _text_parts(item)
    elif kind == "function_call":
        out.update(call_id=getattr(item, "call_id", ""), name=getattr(item, "name", ""))
        out["arguments"] = getattr(item, "arguments", "")
    else:
        out.update(call_id=getattr(item, "call_id", ""), output=str(getattr(item, "output", "")))
    return out


def conversation_items(chat_ctx: Any) -> list[dict[str, Any]]:
    """The items of a livekit ChatContext that a realtime session would push, as wire items."""
    with contextlib.suppress(TypeError, AttributeError):
        chat_ctx = chat_ctx.copy(
            exclude_instructions=True, exclude_empty_message=True, exclude_handoff=True, exclude_config_update=True
        )
    items = []
    for item in getattr(chat_ctx, "items", []):
        if getattr(item, "role", None) in ("system", "developer"):
            continue
        wire = wire_item(item)
        if wire is not None:
            items.append(wire)
    return items


class SessionRecorder:
    """Writes one session's events to a native trace; `close()` detaches and closes the file (each line is flushed
    as it is written, so a crash loses nothing already seen)."""

    def __init__(
        self,
        session: Any,
        path: str | os.PathLike[str],
        chat_ctx: Callable[[], Any] | None = None,
        keep_audio: bool = False,
    ) -> None:
        self.session = session
        self.keep_audio = keep_audio
        self.conn = 1
        self._chat_ctx = chat_ctx or (lambda: session.chat_ctx)
        self._last_items: list[dict[str, Any]] | None = None
        self._generation: tuple[Any, str | None] | None = None
        self._handlers: list[tuple[str, Callable[..., None]]] = []
        self._poll: asyncio.Task[None] | None = None
        self._restore: Callable[[], None] | None = None
        header = {"recorder": "rtrace.integrations.livekit", "version": __version__, "client": _livekit_version()}
        redact = functools.partial(redact_event, keep_audio=keep_audio)
        self.writer: TraceWriter | None = TraceWriter.open(path, header, time.monotonic, trace_write_failed, redact)
        self._write("meta", {"type": "connection.opened"})
        self._on("openai_client_event_queued", self._client_event)
        self._on("openai_server_event_received", self._server_event)
        self._on("generation_created", self._generation_created)
        if not self._wrap_connect():
            self._on("session_reconnected", lambda _ev: self._new_connection())
        with contextlib.suppress(RuntimeError):
            self._poll = asyncio.get_running_loop().create_task(self._poll_loop())
        self.check()

    # -- wiring ---------------------------------------------------------------------------------------------------

    def _on(self, event: str, handler: Callable[..., None]) -> None:
        self.session.on(event, handler)
        self._handlers.append((event, handler))

    def _wrap_connect(self) -> bool:
        """Count a connection when the session opens its websocket (before it replays anything on it)."""
        original = getattr(self.session, "_create_ws_conn", None)
        if original is None or not asyncio.iscoroutinefunction(original):
            return False

        async def create_ws_conn(*args: Any, **kwargs: Any) -> Any:
            ws = await original(*args, **kwargs)
            self._new_connection()
            return ws

        self.session._create_ws_conn = create_ws_conn

        def restore() -> None:
            with contextlib.suppress(AttributeError):
                del self.session._create_ws_conn

        self._restore = restore
        return True

    def _write(self, direction: str, event: dict[str, Any]) -> None:
        if self.writer is not None:
            self.writer.write(direction, self.conn, event)

    def _new_connection(self) -> None:
        self._close_generation()
        self._write("meta", {"type": "connection.closed"})
        self.conn += 1
        self._write("meta", {"type": "connection.opened"})
        self._last_items = None
        self._later()

    def _later(self) -> None:
        try:
            asyncio.get_running_loop().call_soon(self.check)
        except RuntimeError:
            self.check()

    # -- events ---------------------------------------------------------------------------------------------------

    def _client_event(self, event: Any) -> None:
        if isinstance(event, dict):
            self._write("client", event)  # redacted by the writer (streamed deltas joined first)
        self._later()

    def _server_event(self, event: Any) -> None:
        if isinstance(event, dict):
            self._write("server", event)
        self._later()

    def _generation_created(self, event: Any) -> None:
        self._close_generation()
        rid = getattr(event, "response_id", None)
        rid = rid if isinstance(rid, str) else None
        self._generation = (getattr(self.session, "_current_generation", None), rid)
        self._write("local", {"type": "local.generation.opened", **({"response_id": rid} if rid else {})})

    def _close_generation(self) -> None:
        if self._generation is None:
            return
        rid = self._generation[1]
        self._generation = None
        self._write("local", {"type": "local.generation.closed", **({"response_id": rid} if rid else {})})

    def check(self) -> None:
        """Write a `local.conversation` snapshot if the agent's conversation changed; note a closed generation."""
        if self.writer is None:
            return
        if self._generation is not None and self._generation[0] is not None:
            current = getattr(self.session, "_current_generation", self._generation[0])
            if current is not self._generation[0]:
                self._close_generation()
        try:
            items = conversation_items(self._chat_ctx())
        except Exception:  # a session being torn down: no snapshot, never an error in the user's agent
            return
        if items != self._last_items:
            self._last_items = items
            self._write("local", {"type": "local.conversation", "items": items})

    async def _poll_loop(self) -> None:
        while self.writer is not None:
            await asyncio.sleep(POLL_SECONDS)
            self.check()

    def close(self) -> None:
        """Detach from the session and close the trace."""
        if self.writer is None:
            return
        self.check()
        self._close_generation()
        for event, handler in self._handlers:
            with contextlib.suppress(Exception):
                self.session.off(event, handler)
        self._handlers.clear()
        if self._restore is not None:
            self._restore()
        if self._poll is not None:
            self._poll.cancel()
        self._write("meta", {"type": "connection.closed"})
        self.writer.close()
        self.writer = None

    def __enter__(self) -> SessionRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _livekit_version() -> str | None:
    try:
        from livekit.agents import __version__ as version
    except Exception:
        return None
    return str(version)


def record_session(
    target: Any, path: str | os.PathLike[str], *, keep_audio: bool = False, chat_ctx: Callable[[], Any] | None = None
) -> SessionRecorder:
    """Record a livekit realtime session to `path`. `target` is an `Agent` (its realtime session is recorded and
    its own chat context annotated) or a `RealtimeSession` (annotated with `chat_ctx()` if given, else with the
    session's mirror of the server conversation)."""
    session = target
    if not hasattr(target, "on") and hasattr(target, "realtime_llm_session"):
        session = target.realtime_llm_session
        if chat_ctx is None:
            chat_ctx = lambda: target.chat_ctx  # noqa: E731
    return SessionRecorder(session, path, chat_ctx=chat_ctx, keep_audio=keep_audio)


__all__ = ["SessionRecorder", "conversation_items", "record_session", "wire_item"]
