"""Record an openai-agents realtime session (`agents.realtime`, the default `OpenAIRealtimeWebSocketModel`) from
inside the application, two lines::

    from rtrace.integrations.openai_agents import record_session
    session = await runner.run(model_config=...)
    record_session(session, "trace.jsonl")  # before `async with session:` (it connects on entry)

On the wire: the model's websocket, from the moment `_create_websocket_connection` returns it, before the model
sends its first `session.update`: every frame its transport sends (`_send_raw_message` and the sequencer's
conditional sends all write to that socket) and every frame the model reads, which it then hands its listeners as
`raw_server_event`. Each socket is a connection of the trace (openai-agents never reconnects by itself; an
application that connects again gets connection 2).

Local annotations, the session's own view: `local.generation.opened` / `local.generation.closed` when the model
tells its listeners a turn started and ended (`turn_started` / `turn_ended`, with the response id), through a listener
of the model (added before the session's own, so an annotation follows the server event that caused it and
precedes what the session does about it). The session's history is not written as `local.conversation`: it folds a
tool call and its output into one item and never learns the id of an item it created, so it cannot be compared with
the server's conversation by item id.

`close()` on the recorder (or `record_session(...).close()`) detaches it and closes the trace; the trace is complete
after each line anyway. See `rtrace.integrations.websocket` for what a line is and when it is written.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from .websocket import WireRecorder, distribution_version


class SessionRecorder:
    """The recording of one openai-agents realtime model (the session's `model`)."""

    def __init__(self, model: Any, path: str | os.PathLike[str], keep_audio: bool = False) -> None:
        create = getattr(model, "_create_websocket_connection", None)
        if create is None or not callable(create):
            raise TypeError(
                "record_session needs an openai-agents RealtimeSession (or its OpenAIRealtimeWebSocketModel); "
                f"got {type(model).__name__}"
            )
        if getattr(model, "_websocket", None) is not None:
            raise RuntimeError(
                "record_session must be called before the session connects (before `async with session`): "
                "the model is already reading its socket"
            )
        self.model = model
        self.recorder = WireRecorder(
            path, "rtrace.integrations.openai_agents", distribution_version("openai-agents"), keep_audio
        )

        async def create_websocket_connection(*args: Any, **kwargs: Any) -> Any:
            return self.recorder.socket(await create(*args, **kwargs))

        model._create_websocket_connection = create_websocket_connection
        add = getattr(model, "add_listener", None)
        if callable(add):
            add(self)

    async def on_event(self, event: Any) -> None:
        """The model's listener: its turns as the client's generations."""
        kind = getattr(event, "type", None)
        if kind == "turn_started":
            self.recorder.local(None, _generation("local.generation.opened", _response_id(event)))
        elif kind == "turn_ended":
            self.recorder.local(None, _generation("local.generation.closed", _response_id(event)))

    def close(self) -> None:
        """Detach from the model and close the trace."""
        with contextlib.suppress(AttributeError):
            del self.model._create_websocket_connection
        remove = getattr(self.model, "remove_listener", None)
        if callable(remove):
            remove(self)
        self.recorder.close()


def _response_id(event: Any) -> str | None:
    rid = getattr(event, "response_id", None)
    return rid if isinstance(rid, str) else None


def _generation(kind: str, rid: str | None) -> dict[str, Any]:
    return {"type": kind, **({"response_id": rid} if rid else {})}


def record_session(target: Any, path: str | os.PathLike[str], *, keep_audio: bool = False) -> SessionRecorder:
    """Record an openai-agents realtime session to `path`: `target` is a `RealtimeSession` (from
    `RealtimeRunner.run`, not entered yet) or its model."""
    model = getattr(target, "model", target)
    if not hasattr(model, "_create_websocket_connection"):
        model = getattr(target, "_model", model)
    return SessionRecorder(model, path, keep_audio)


__all__ = ["SessionRecorder", "record_session"]
