"""A small realtime client with a latency-dependent bug, for `rtrace sweep` tests. Run as a script.

It waits only ACK_WAIT seconds for the ack of its tool output; when the ack is late it drops the output from its
local conversation, and its sync loop later deletes the output the server did confirm (a stale local copy). At low
latency the ack beats the wait and nothing goes wrong. With `SWEEP_CLIENT_TOOL=NAME` it needs its first
response to call that tool (or exits 3), as an agent whose test scripts the model's tool call.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

ACK_WAIT = 0.03


async def recv(ws: ClientConnection, timeout: float = 5.0) -> dict[str, Any]:
    return json.loads(await asyncio.wait_for(ws.recv(), timeout))


async def main() -> int:
    url = os.environ["RTRACE_URL"] + "/realtime?model=gpt-realtime"
    local: list[str] = []
    remote: list[str] = []

    def create(item: dict[str, Any]) -> str:
        prev = local[-1] if local else "root"
        local.append(item["id"])
        return json.dumps({"type": "conversation.item.create", "previous_item_id": prev, "item": item})

    async with connect(url) as ws:
        await recv(ws)

        async def until(etype: str, timeout: float = 5.0) -> dict[str, Any]:
            while True:
                ev = await recv(ws, timeout)
                if ev["type"] == "conversation.item.added":
                    item = ev["item"]
                    remote.append(item["id"])
                    if item["id"] not in local:
                        if item["type"] == "function_call_output":
                            # Sync: the server holds an output the client gave up on, so it deletes it.
                            await ws.send(json.dumps({"type": "conversation.item.delete", "item_id": item["id"]}))
                        else:
                            local.append(item["id"])  # response items join the local conversation
                elif ev["type"] == "conversation.item.deleted" and ev["item_id"] in remote:
                    remote.remove(ev["item_id"])
                if ev["type"] == etype:
                    return ev

        text = {"type": "input_text", "text": "What's the weather in Paris?"}
        await ws.send(create({"type": "message", "role": "user", "id": "item_user1", "content": [text]}))
        await until("conversation.item.done")
        await ws.send(json.dumps({"type": "response.create"}))
        done = await until("response.done")
        call = done["response"]["output"][0]
        if call.get("name") != os.environ.get("SWEEP_CLIENT_TOOL", call.get("name")):
            print(f"sweep_client: no call of {os.environ['SWEEP_CLIENT_TOOL']} (got {call})", file=sys.stderr)
            return 3  # an agent that needs its tool called: only a script that calls it lets it run
        await asyncio.sleep(0.02)  # the tool runs
        output = {"type": "function_call_output", "id": "item_output1", "call_id": call["call_id"], "output": "sunny"}
        await ws.send(create(output))
        try:
            await until("conversation.item.done", timeout=ACK_WAIT)
        except asyncio.TimeoutError:
            local.remove("item_output1")  # the bug: a late ack is taken for a failure
        text = {"type": "input_text", "text": "And what should I wear?"}
        await ws.send(create({"type": "message", "role": "user", "id": "item_user2", "content": [text]}))
        while "item_user2" not in remote:
            await until("conversation.item.added")
        await ws.send(json.dumps({"type": "response.create"}))
        await until("response.done")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
