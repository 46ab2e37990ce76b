"""Drive the openai-agents realtime session (`agents.realtime`: RealtimeAgent, RealtimeRunner, the default
OpenAIRealtimeWebSocketModel) against an endpoint, no audio device.

The agent declares one function tool of this script's own (`--tool-name`, schema `ORDER_SCHEMA`); the session sends
one user text (`RealtimeSession.send_message`); the SDK runs the tool and sends its output and a `response.create`
itself. openai-agents has no reconnect: after a close the session's event stream ends (1000/1001) or raises (other
codes), and this script reports what happened. One JSON line at the end (see scenario_common.py).

    .venv-e2e-openai-agents/bin/python openai_agents_scenario.py --url 'ws://127.0.0.1:PORT/v1/realtime?model=gpt-realtime'
"""

from __future__ import annotations

import asyncio
import base64
import logging
from typing import Any

from scenario_common import (
    INSTRUCTIONS,
    ORDER_SCHEMA,
    TOOL_DESCRIPTION,
    Progress,
    message_text,
    run_snippet,
    run_tool,
    settle,
    start,
)

MODEL = "gpt-realtime"


def close_code(exc: BaseException) -> int | None:
    """The close code a websockets `ConnectionClosed*` received (1006: none received); None for another error. The
    SDK reports a close either as an `exception` event of the stream or by raising out of it, whichever its tasks
    reach first."""
    if not hasattr(exc, "rcvd"):
        return None
    rcvd = exc.rcvd
    return rcvd.code if rcvd is not None else 1006


async def _run(args: Any, progress: Progress) -> None:
    from agents import FunctionTool
    from agents.realtime import RealtimeAgent, RealtimeRunner

    finished_calls: list[str] = []

    async def invoke(ctx: Any, arguments: str) -> str:
        result = await run_tool(args, progress, arguments)
        finished_calls.append(str(getattr(ctx, "tool_call_id", "")))
        return result

    tool = FunctionTool(
        name=args.tool_name,
        description=TOOL_DESCRIPTION,
        params_json_schema=ORDER_SCHEMA,
        on_invoke_tool=invoke,
        strict_json_schema=True,
    )
    agent = RealtimeAgent(name="rtrace-tester", instructions=INSTRUCTIONS, tools=[tool])
    settings: dict[str, Any] = {
        "model_name": MODEL,
        "output_modalities": [args.modality],
    }
    if args.modality == "text":
        settings["turn_detection"] = None  # text in, text out: no server VAD
    runner = RealtimeRunner(agent)
    # The `url` is used as given (openai_realtime.py connect): no `/realtime`, no `?model=` are added.
    session = await runner.run(
        model_config={
            "url": args.url,
            "api_key": "sk-rtrace-test",
            "initial_model_settings": settings,  # type: ignore[typeddict-item]
        }
    )
    if args.snippet:  # the guide's lines instead (tests/test_docs_capture.py)
        run_snippet(args.snippet, session=session)
    elif args.record:  # the two lines of the in-process recorder
        from rtrace.integrations.openai_agents import record_session

        record_session(session, args.record)

    async def consume() -> None:
        async with session:
            progress.mark("user_turn")
            await session.send_message(args.user_text)
            async for event in session:
                etype = event.type
                if etype == "raw_model_event":
                    data = event.data
                    if data.type == "raw_server_event":
                        await on_server(data.data)
                    elif data.type == "exception":
                        progress.error(f"{data.context}: {type(data.exception).__name__}: {data.exception}")
                        code = close_code(data.exception)
                        if code is not None:
                            progress.close_codes.append(code)
                    elif data.type == "connection_status":
                        progress.mark(f"connection_{data.status}")
                elif etype == "tool_start":
                    progress.mark("tool_start_event")
                elif etype == "tool_end":
                    # emitted by the session after it sent the output (session.py _send_tool_output_completion)
                    call_id = finished_calls.pop(0) if finished_calls else "?"
                    progress.output_sent(call_id)
                elif etype == "error":
                    progress.error(f"session error: {str(event.error)[:300]}")
            progress.mark("event_stream_ended")
            # Leaving `async with` closes the session, which cancels a running tool. Stay a little, so the SDK's
            # own handling of the tool output after the close shows (its warning is captured below).
            for _ in range(int((args.tool_seconds + 2.0) / 0.05)):
                if progress.tools_running == 0 and ("tool_started" in progress.marks or not progress.tool_calls):
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)

    async def on_server(ev: dict[str, Any]) -> None:
        progress.server_event()
        etype = ev.get("type")
        if etype == "session.created":
            progress.connections += 1
            progress.mark(f"session_created_{progress.connections}")
        elif etype in ("conversation.item.added", "conversation.item.created"):
            item = ev.get("item") or {}
            if item.get("type") == "function_call_output" and item.get("call_id") not in progress.output_call_ids:
                # an output the SDK sent without our tool (e.g. "Tool X not found")
                progress.output_sent(str(item.get("call_id")))
            progress.item_acked(item)
        elif etype in ("response.output_audio.delta", "response.audio.delta"):
            progress.audio(len(base64.b64decode(str(ev.get("delta") or ""))))
        elif etype == "error":
            err = ev.get("error") or {}
            progress.server_error(err.get("code"))
        elif etype == "response.done":
            for item in (ev.get("response") or {}).get("output") or []:
                if item.get("type") == "function_call":
                    progress.tool_call(str(item.get("name")), str(item.get("call_id")), str(item.get("arguments")))
                elif item.get("type") == "message":
                    progress.answer(message_text(item))

    class _Warnings(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            progress.error(f"log {record.levelname} {record.name}: {record.getMessage()}")

    logging.getLogger("openai.agents").addHandler(_Warnings(level=logging.WARNING))

    consumer = asyncio.create_task(consume())
    settle_task = asyncio.create_task(settle(progress))
    try:
        done, _ = await asyncio.wait([consumer, settle_task], return_when=asyncio.FIRST_COMPLETED)
        if consumer in done:
            exc = consumer.exception()
            if exc is not None and progress.connections == 0:
                progress.fail(f"the session never connected: {type(exc).__name__}: {exc}")
            elif exc is not None:
                progress.error(f"session raised: {type(exc).__name__}: {exc}")
                code = close_code(exc)
                if code is not None and not progress.close_codes:  # the close came as this raise, not as an event first
                    progress.close_codes.append(code)
                progress.finish("the session raised after the socket closed (no reconnect)")
            else:
                progress.finish("the session's event stream ended (socket closed, no reconnect)")
            # the tool may still be running: let it try to send its output, and see what the SDK does
            for _ in range(int((args.tool_seconds + 2.0) / 0.05)):
                if progress.tools_running == 0:
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)
        else:
            await settle_task
    finally:
        settle_task.cancel()
        consumer.cancel()
        try:
            await asyncio.wait_for(session.close(), timeout=2.0)
        except Exception:
            pass


if __name__ == "__main__":
    start(
        "openai-agents",
        __doc__,
        "the realtime model's url, used as given: ws://127.0.0.1:PORT/v1/realtime?model=gpt-realtime",
        _run,
    )
