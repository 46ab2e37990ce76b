"""Record pipecat's OpenAI realtime service (`pipecat.services.openai.realtime.llm.OpenAIRealtimeLLMService`, and
services built on it) from inside the pipeline, two lines::

    from rtrace.integrations.pipecat import record_service
    llm = record_service(OpenAIRealtimeLLMService(api_key=..., settings=...), "trace.jsonl")

A wrapper of the service's websocket: when the service connects (`_connect`, on the pipeline's start frame and on
every reconnect it is asked for), the socket it just opened (`_websocket`) is replaced by a recorded stand-in,
before its receive task reads a frame; every client event the service sends (`send_client_event` -> `_ws_send` ->
`_websocket.send`) and every server event its receive task reads are written, each socket a connection of the
trace. Nothing else of the service changes. pipecat's own context is kept as LLM messages without the wire's item
ids, so there are no `local` annotations. `close()` on the recorder detaches it and closes the trace; see
`rtrace.integrations.websocket` for what a line is and when it is written.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, TypeVar

from .websocket import WireRecorder, distribution_version

_S = TypeVar("_S")


class ServiceRecorder:
    """The recording of one pipecat realtime service."""

    def __init__(self, service: Any, path: str | os.PathLike[str], keep_audio: bool = False) -> None:
        connect = getattr(service, "_connect", None)
        if connect is None or not hasattr(service, "_websocket"):
            raise TypeError(
                "record_service needs a pipecat OpenAIRealtimeLLMService (a `_connect` that opens `_websocket`); "
                f"got {type(service).__name__}"
            )
        if getattr(service, "_websocket", None) is not None:
            raise RuntimeError(
                "record_service must be called before the pipeline starts the service: its receive task is "
                "already reading the socket"
            )
        self.service = service
        self.recorder = WireRecorder(
            path, "rtrace.integrations.pipecat", distribution_version("pipecat-ai"), keep_audio
        )

        async def record_connect(*args: Any, **kwargs: Any) -> Any:
            result = await connect(*args, **kwargs)
            ws = getattr(service, "_websocket", None)
            if ws is not None:  # no await since `_connect` returned: its receive task has not read yet
                service._websocket = self.recorder.socket(ws)
            return result

        service._connect = record_connect

    def close(self) -> None:
        """Detach from the service and close the trace."""
        with contextlib.suppress(AttributeError):
            del self.service._connect
        self.recorder.close()


def record_service(service: _S, path: str | os.PathLike[str], *, keep_audio: bool = False) -> _S:
    """Record `service` (a pipecat OpenAI realtime LLM service) to the trace at `path`; returns the service (the
    same object). The recording is `service.rtrace_recorder`."""
    recorder = ServiceRecorder(service, path, keep_audio)
    with contextlib.suppress(AttributeError):
        setattr(service, "rtrace_recorder", recorder)  # noqa: B010
    return service


__all__ = ["ServiceRecorder", "record_service"]
