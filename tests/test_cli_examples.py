"""The examples of `rtrace serve --help` and docs/serve.md, run as a user would: the real command in a subprocess, a
websocket client against the URL it prints."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from rtrace.cli.examples import EXAMPLE_SCRIPT, EXAMPLE_TOOL
from rtrace.core.loader import TraceReader
from rtrace.engine.fold import analyze_path

ROOT = Path(__file__).resolve().parent.parent
LOOKUP = {
    "type": "function",
    "name": "lookup_order",
    "description": "Look up an order",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
}


@asynccontextmanager
async def rtrace_serve(args: list[str]) -> AsyncIterator[str]:
    """`rtrace serve ARGS` in a subprocess: the full websocket URL it prints."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rtrace.cli", "serve", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = None
        while url is None:
            line = (await asyncio.wait_for(proc.stdout.readline(), 10)).decode()
            assert line, (await proc.stderr.read()).decode() if proc.stderr else "serve exited"
            if line.strip().startswith("websocket URL: "):
                url = line.split(": ", 1)[1].strip()
        yield url
    finally:
        proc.terminate()
        await proc.wait()


async def recv(ws: ClientConnection) -> dict[str, Any]:
    return json.loads(await asyncio.wait_for(ws.recv(), 5))


async def turn(ws: ClientConnection, text: str | None = None, output: tuple[str, str] | None = None) -> dict[str, Any]:
    """Send a user text (or a tool output) and a response.create; the response.done."""
    if text is not None:
        item: dict[str, Any] = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    else:
        assert output is not None
        item = {"type": "function_call_output", "call_id": output[0], "output": output[1]}
    await ws.send(json.dumps({"type": "conversation.item.create", "item": item}))
    await ws.send(json.dumps({"type": "response.create"}))
    while True:
        ev = await recv(ws)
        if ev["type"] == "response.done":
            return ev["response"]


async def start(ws: ClientConnection) -> None:
    assert (await recv(ws))["type"] == "session.created"
    session = {"type": "realtime", "output_modalities": ["text"], "tools": [LOOKUP]}
    await ws.send(json.dumps({"type": "session.update", "session": session}))
    assert (await recv(ws))["type"] == "session.updated"


def run(coro: Any) -> None:
    asyncio.run(asyncio.wait_for(coro, 30))


def test_the_script_example_calls_answers_and_closes_while_the_tool_runs(tmp_path: Path) -> None:
    script = tmp_path / "scenario.toml"
    script.write_text(EXAMPLE_SCRIPT)
    trace = tmp_path / "trace.jsonl"

    async def main() -> None:
        async with rtrace_serve(["--script", str(script), "--record", str(trace)]) as url:
            async with connect(url) as ws:
                await start(ws)
                done = await turn(ws, "Where is my order?")
                call = done["output"][0]
                assert (call["name"], json.loads(call["arguments"])) == ("lookup_order", {"order_id": "42"})
                with pytest.raises(ConnectionClosed):
                    await recv(ws)  # the socket closes while the tool runs
                assert ws.close_code == 1011
            async with connect(url) as ws:  # a client that reconnects and asks again
                await start(ws)
                call = (await turn(ws, "Where is my order?"))["output"][0]
                answer = (await turn(ws, output=(call["call_id"], "shipped")))["output"][0]
                assert answer["content"][0]["text"] == "Order 42: shipped"

    run(main())
    notes = [r.event for r in TraceReader.open(trace) if r.type == "fault.injected"]
    assert notes == [{"type": "fault.injected", "fault": "script", "spec": "turn 3", "line": 10, "action": "close"}]
    assert analyze_path(trace).connections == 2


def test_the_tool_example_calls_the_tool_with_its_arguments_on_each_user_turn() -> None:
    argv = shlex.split(EXAMPLE_TOOL)
    assert argv[:2] == ["rtrace", "serve"]

    async def main() -> None:
        async with rtrace_serve(argv[2:]) as url, connect(url) as ws:
            await start(ws)
            for text in ("hello", "anything at all"):
                call = (await turn(ws, text))["output"][0]
                assert (call["name"], call["arguments"]) == ("lookup_order", '{"order_id": "42"}')
                answer = (await turn(ws, output=(call["call_id"], "ok")))["output"][0]
                assert answer["content"][0]["text"] == "Tool result: ok"

    run(main())


def test_the_examples_are_in_the_help_and_the_docs() -> None:
    help_text = subprocess.run(
        [sys.executable, "-m", "rtrace.cli", "serve", "--help"],
        capture_output=True, text=True, check=True, env={**os.environ, "COLUMNS": "200"},
    ).stdout  # fmt: skip
    shown = [line.strip() for line in help_text.splitlines()]
    page = (ROOT / "docs" / "serve.md").read_text(encoding="utf-8")  # the fake endpoint's page of the docs
    for line in [*EXAMPLE_SCRIPT.splitlines(), EXAMPLE_TOOL]:
        if line.strip():
            assert line.strip() in shown, line
    assert EXAMPLE_SCRIPT in page and EXAMPLE_TOOL in page
