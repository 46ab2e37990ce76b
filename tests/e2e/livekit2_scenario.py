"""Drive livekit-agents 2.0.0b1's `LiveSession` (its OpenAI realtime model, no room, no audio device) against an
endpoint.

2.0.0b1 ships no plugin package: the model is `livekit.agents.llm._realtime.openai.RealtimeModel` (given
`base_url`, to which it appends `/realtime?model=`), and an agent's realtime session is reachable only inside the
agent's hooks and tools (taken here in `on_enter`). The agent has one raw function tool of this script's own
(`--tool-name`, schema `ORDER_SCHEMA`); the framework runs it and sends its output and the next `response.create`.

Scenarios: `turn` (one user text, as the other drivers) or `race` (the 1.8.8 tool-output race of
tests/e2e/livekit_scenario.py: while the tool runs a second user turn asks for a story, and a third turn goes out
right behind the tool output's create). One JSON line at the end (see scenario_common.py).

    .venv-e2e-livekit-2.0.0b1/bin/python livekit2_scenario.py --url ws://127.0.0.1:PORT/v1 --scenario turn
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
from typing import Any

from scenario_common import (
    INSTRUCTIONS,
    ORDER_SCHEMA,
    TOOL_DESCRIPTION,
    Progress,
    message_text,
    run_tool,
    settle,
    start,
)

#: The race's second turn (while the tool runs) and third (with the tool output's create).
TURN_B = "While you look, tell me a slow story."
TURN_C = "And what should I wear?"


async def _run(args: argparse.Namespace, progress: Progress) -> None:
    from livekit.agents import Agent, LiveSession, function_tool
    from livekit.agents.llm._realtime.openai import RealtimeModel

    loop = asyncio.get_running_loop()
    rt_session_fut: asyncio.Future[Any] = loop.create_future()

    class OrderAgent(Agent):
        async def on_enter(self) -> None:
            if not rt_session_fut.done():
                rt_session_fut.set_result(self.realtime_llm_session)

    async def lookup(raw_arguments: dict[str, Any]) -> str:
        if args.scenario == "race" and "turn_b" not in progress.marks:
            progress.mark("turn_b")  # a long reply while the tool runs, queued ahead of the tool's
            session.generate_reply(user_input=TURN_B)
        return await run_tool(args, progress, json.dumps(raw_arguments))

    schema = {"name": args.tool_name, "description": TOOL_DESCRIPTION, "parameters": ORDER_SCHEMA}
    agent = OrderAgent(instructions=INSTRUCTIONS, tools=[function_tool(lookup, raw_schema=schema)])
    model = RealtimeModel(base_url=args.url, api_key="sk-rtrace-test", modalities=[args.modality])
    session = LiveSession(llm=model)
    await session.start(agent, record=False)
    rt_session = await rt_session_fut

    def on_client_event(event: dict[str, Any]) -> None:
        item = event.get("item") or {}
        if event.get("type") == "conversation.item.create" and item.get("type") == "function_call_output":
            progress.output_sent(str(item.get("call_id")))
            if args.scenario == "race" and "turn_c" not in progress.marks:
                progress.mark("turn_c")  # its push races the output's ack
                session.generate_reply(user_input=TURN_C)

    def on_server_event(event: dict[str, Any]) -> None:
        progress.server_event()
        kind = event.get("type")
        if kind == "session.created":
            progress.connections += 1
            progress.mark(f"session_created_{progress.connections}")
        elif kind in ("conversation.item.added", "conversation.item.created"):
            progress.item_acked(event.get("item"))
        elif kind == "response.output_audio.delta":
            progress.audio(len(base64.b64decode(str(event.get("delta") or ""))))
        elif kind == "error":
            progress.server_error((event.get("error") or {}).get("code"))
        elif kind == "response.done":
            for item in (event.get("response") or {}).get("output") or []:
                if item.get("type") == "function_call":
                    progress.tool_call(str(item.get("name")), str(item.get("call_id")), str(item.get("arguments")))
                elif item.get("type") == "message":
                    progress.answer(message_text(item))

    def on_reconnected(_event: Any) -> None:
        progress.reconnected += 1
        progress.mark(f"reconnected_{progress.reconnected}")

    rt_session.on("openai_client_event_queued", on_client_event)
    rt_session.on("openai_server_event_received", on_server_event)
    rt_session.on("session_reconnected", on_reconnected)

    progress.mark("user_turn")
    session.generate_reply(user_input=args.user_text)
    try:
        await settle(progress)
    finally:
        try:
            await asyncio.wait_for(session.aclose(), timeout=3.0)
            await asyncio.wait_for(model.aclose(), timeout=2.0)
        except asyncio.TimeoutError:
            progress.error("closing the session timed out")


def _scenario(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", choices=["turn", "race"], default="turn")


if __name__ == "__main__":
    start(
        "livekit-agents",
        __doc__,
        "the model's base_url, e.g. ws://127.0.0.1:PORT/v1 (it appends /realtime?model=...)",
        _run,
        _scenario,
    )
