"""Drive Azure's Voice Live SDK 1.3 (`azure.ai.voicelive.aio.connect`) against a realtime endpoint.

The SDK is a thin socket over aiohttp: this script is the minimal application on it. It connects to
`ENDPOINT/voice-live/realtime?api-version=...&model=...` (the SDK appends the path to the endpoint it is given;
`http(s)://` becomes `ws(s)://`) with an `api-key` header; on `session.created` it sends one `session.update` (the
tool, the modalities, no turn detection: the Voice Live session shape), then one user text and `response.create`;
when a `response.done` holds a call of the tool it runs it, sends the `function_call_output` and a
`response.create`. The SDK never reconnects: once the socket is gone, sending raises and the run ends. One JSON line
at the end (see scenario_common.py).

    .venv-e2e-voicelive/bin/python voicelive_scenario.py --url http://127.0.0.1:PORT
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from scenario_common import (
    INSTRUCTIONS,
    ORDER_SCHEMA,
    TOOL_DESCRIPTION,
    Progress,
    on_response_done,
    read_until_done,
    run_tool,
    start,
)

MODEL = "gpt-realtime"


def _session_config(args: Any) -> dict[str, Any]:
    tool = {"type": "function", "name": args.tool_name, "description": TOOL_DESCRIPTION, "parameters": ORDER_SCHEMA}
    return {
        "instructions": INSTRUCTIONS,
        "modalities": [args.modality] if args.modality == "text" else ["text", "audio"],
        "tools": [tool],
        "tool_choice": "auto",
        "turn_detection": None,
        "input_audio_format": "pcm16",
        "output_audio_format": "pcm16",
    }


def _as_dict(event: Any) -> dict[str, Any]:
    """A typed Voice Live event as the JSON it came from."""
    if hasattr(event, "as_dict"):
        return dict(event.as_dict())
    return dict(event)


async def _run(args: Any, progress: Progress) -> None:
    from azure.ai.voicelive.aio import connect
    from azure.ai.voicelive.models import FunctionCallOutputItem, InputTextContentPart, UserMessageItem
    from azure.core.credentials import AzureKeyCredential

    tasks: set[asyncio.Task[None]] = set()
    sent_user_turn = False
    manager = connect(endpoint=args.url, credential=AzureKeyCredential("sk-rtrace-test"), model=MODEL)
    conn = await manager.__aenter__()

    async def tool_then_reply(call_id: str, arguments: str) -> None:
        output = await run_tool(args, progress, arguments)
        try:
            await conn.conversation.item.create(item=FunctionCallOutputItem(call_id=call_id, output=output))
            progress.output_sent(call_id)
            await conn.response.create()
            progress.mark("response_create_after_output")
        except Exception as exc:
            progress.error(f"sending the tool output: {type(exc).__name__}: {exc}")
            progress.finish("the tool output could not be sent")

    async def reader() -> None:
        nonlocal sent_user_turn
        async for event in conn:
            ev = _as_dict(event)
            progress.server_event()
            etype = ev.get("type")
            if etype == "session.created":
                progress.connections += 1
                progress.mark(f"session_created_{progress.connections}")
                await conn.session.update(session=_session_config(args))
            elif etype == "session.updated" and not sent_user_turn:
                sent_user_turn = True
                progress.mark("user_turn")
                text = InputTextContentPart(text=args.user_text)
                await conn.conversation.item.create(item=UserMessageItem(content=[text]))
                await conn.response.create()
            elif etype in ("response.output_audio.delta", "response.audio.delta"):
                progress.audio(len(base64.b64decode(str(ev.get("delta") or ""))))
            elif etype in ("conversation.item.added", "conversation.item.created"):
                progress.item_acked(ev.get("item"))
            elif etype == "error":
                progress.server_error((ev.get("error") or {}).get("code"))
            elif etype == "response.done":
                on_response_done(progress, args, ev.get("response") or {}, tasks, tool_then_reply)
        # the iterator ended: the socket closed (the SDK does not reconnect)
        ws = getattr(conn, "_connection", None)
        progress.close_codes.append(getattr(ws, "close_code", None))
        progress.mark("socket_closed")
        if tasks:  # a running tool tries its send (and fails) before the run is over
            await asyncio.wait(list(tasks), timeout=args.tool_seconds + 2.0)
        progress.finish("socket closed, no reconnect")

    await read_until_done(progress, reader(), tasks, lambda: manager.__aexit__(None, None, None))


if __name__ == "__main__":
    start(
        "azure-ai-voicelive",
        __doc__,
        "the Voice Live endpoint, e.g. http://127.0.0.1:PORT (the SDK appends /voice-live/realtime?...)",
        _run,
    )
