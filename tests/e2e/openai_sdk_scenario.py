"""Drive the openai Python SDK 3.x realtime connection (`AsyncOpenAI().realtime.connect`) against an endpoint.

The SDK is a thin socket: this script is the minimal application on top of it. On `session.created` it sends one
`session.update` (the tool, the output modality, no turn detection), then one user text and `response.create`;
when a `response.done` holds a call of the tool it runs it, sends the `function_call_output` and a
`response.create`. It opts in to the SDK's reconnect (`on_reconnecting`; the SDK reconnects on close codes
1001/1005/1006/1011-1013/1015 only), and after a reconnect it sends its `session.update` again on the new
`session.created`, as an application must: the SDK restores nothing, it only flushes the frames queued while it
was reconnecting. One JSON line at the end (see scenario_common.py).

    .venv-e2e-openai/bin/python openai_sdk_scenario.py --url ws://127.0.0.1:PORT/v1
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
    run_snippet,
    run_tool,
    start,
)

MODEL = "gpt-realtime"


def _session_config(args: Any) -> dict[str, Any]:
    tool = {"type": "function", "name": args.tool_name, "description": TOOL_DESCRIPTION, "parameters": ORDER_SCHEMA}
    session: dict[str, Any] = {
        "type": "realtime",
        "instructions": INSTRUCTIONS,
        "output_modalities": [args.modality],
        "tools": [tool],
        "tool_choice": "auto",
    }
    if args.modality == "text":
        session["audio"] = {"input": {"turn_detection": None}}  # text in: no server VAD
    else:
        session["audio"] = {
            "input": {"format": {"type": "audio/pcm", "rate": 24000}, "turn_detection": None},
            "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "marin"},
        }
    return session


async def _run(args: Any, progress: Progress) -> None:
    from openai import AsyncOpenAI

    # `websocket_base_url` is used as given plus "/realtime?model=..." (realtime.py _prepare_url); `base_url` would
    # have to be http(s)://.
    client = AsyncOpenAI(api_key="sk-rtrace-test", websocket_base_url=args.url)

    def on_reconnecting(event: Any) -> None:
        progress.reconnected += 1
        progress.close_codes.append(event.close_code)
        progress.mark(f"reconnecting_{event.attempt}")

    manager = client.realtime.connect(model=MODEL, on_reconnecting=on_reconnecting)
    conn = await manager.enter()
    if args.snippet:  # the guide's lines instead (tests/test_docs_capture.py)
        run_snippet(args.snippet, conn=conn)
    elif args.record:  # the two lines of the in-process recorder
        from rtrace.integrations.openai_sdk import record_connection

        record_connection(conn, args.record)
    tasks: set[asyncio.Task[None]] = set()
    sent_user_turn = False

    async def tool_then_reply(call_id: str, arguments: str) -> None:
        output = await run_tool(args, progress, arguments)
        try:
            # While the SDK reconnects these are queued and flushed on the new socket (_send_queue.py).
            await conn.conversation.item.create(
                item={"type": "function_call_output", "call_id": call_id, "output": output}
            )
            progress.output_sent(call_id)
            await conn.response.create()
            progress.mark("response_create_after_output")
        except Exception as exc:
            progress.error(f"sending the tool output: {type(exc).__name__}: {exc}")
            progress.finish("the tool output could not be sent")

    async def reader() -> None:
        nonlocal sent_user_turn
        async for event in conn:
            ev = event.to_dict() if hasattr(event, "to_dict") else dict(event)
            progress.server_event()
            etype = ev.get("type")
            if etype == "session.created":
                progress.connections += 1
                progress.mark(f"session_created_{progress.connections}")
                await conn.session.update(session=_session_config(args))
            elif etype == "session.updated" and not sent_user_turn:
                sent_user_turn = True
                progress.mark("user_turn")
                await conn.conversation.item.create(
                    item={
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": args.user_text}],
                    }
                )
                await conn.response.create()
            elif etype in ("response.output_audio.delta", "response.audio.delta"):
                progress.audio(len(base64.b64decode(str(ev.get("delta") or ""))))
            elif etype in ("conversation.item.added", "conversation.item.created"):
                progress.item_acked(ev.get("item"))
            elif etype == "error":
                err = ev.get("error") or {}
                progress.server_error(err.get("code"))
            elif etype == "response.done":
                on_response_done(progress, args, ev.get("response") or {}, tasks, tool_then_reply)
        # the iterator ended: a clean close the SDK does not retry (or retries exhausted)
        code = getattr(getattr(conn, "_connection", None), "close_code", None)
        progress.close_codes.append(code)
        progress.mark("socket_closed")
        # give a running tool the chance to try its send (and fail) before calling the run over
        if tasks:
            await asyncio.wait(list(tasks), timeout=args.tool_seconds + 2.0)
        progress.finish(f"socket closed (code {code}) and not reconnected")

    def close_code(exc: BaseException) -> int | None:
        rcvd = getattr(exc, "rcvd", False)
        return None if rcvd is False else (rcvd.code if rcvd is not None else 1006)

    await read_until_done(progress, reader(), tasks, conn.close, close_code)


if __name__ == "__main__":
    start(
        "openai",
        __doc__,
        "the SDK's websocket_base_url, e.g. ws://127.0.0.1:PORT/v1 (it appends /realtime?model=...)",
        _run,
    )
