"""Small realtime clients with one planted bug each, for `rtrace hunt` (tests/test_hunt_planted.py and
bench/hunt_planted.py). Run as a script: `python tests/planted_client.py MODE [--correct]`.

- `give-up`: two turns; on a close the client stops and exits 0 without a word (correct: it reconnects, replays
  its conversation and asks again for what the close cut).
- `lose-output`: a tool turn; after a reconnect it replays the function call but not its output, then asks for
  the response (correct: both).
- `hang`: two turns; after a reconnect it replays the conversation but never asks again for the response the
  close cut, and waits for it until its test's deadline (`PLANTED_WAIT` seconds, then exit 1).
- `parallel`: the model calls two tools at once (the hunt's `--script tests/planted_parallel.toml`); the client
  asks for the next response as soon as the first output is sent (correct: once both are).

Otherwise every variant is a careful client: it reconnects on a close (three times at most), replays what it
created, asks again for a response the close cut, and sends an event again when the server refuses it (an
injected error) or fails its response.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

MODES = ("give-up", "lose-output", "hang", "parallel")
#: Seconds the client's test waits for an answer before it fails.
WAIT = float(os.environ.get("PLANTED_WAIT", "3"))
RECONNECTS = 3


class GaveUp(Exception):
    """The buggy `give-up` client on a close."""


class Client:
    def __init__(self, mode: str, correct: bool) -> None:
        self.mode = mode
        self.correct = correct
        self.url = os.environ["RTRACE_URL"] + "/realtime?model=gpt-realtime"
        self.ws: ClientConnection | None = None
        #: What the client created or was given, in order: replayed on a new connection.
        self.items: list[dict[str, Any]] = []
        self.reconnects = 0
        #: A response was asked for and not done (what a close cuts).
        self.asking = False
        #: Function calls complete (`conversation.item.done`) whose output is not sent yet.
        self.calls: list[dict[str, Any]] = []
        #: The response asked for was cut by a close after it called a tool: the tool runs before anything is asked.
        self.cut = False

    async def open(self) -> None:
        self.ws = await connect(self.url)
        self.added_ids: set[str] = set()  # the items this connection's server added
        await self.next_of(lambda e: e["type"] == "session.created", retry=None)

    async def reconnect(self) -> None:
        if self.mode == "give-up" and not self.correct:
            raise GaveUp
        while True:
            self.reconnects += 1
            if self.reconnects > RECONNECTS:
                raise RuntimeError("too many reconnects")
            try:
                await self.open()
                await self.replay()
                break
            except ConnectionClosed:
                continue  # closed again while replaying: from the start
        if self.asking and self.calls:
            self.cut = True  # its calls complete: run them, then ask
        elif self.asking and not (self.mode == "hang" and not self.correct):
            await self.send({"type": "response.create"})  # ask again for what the close cut (the bug: not)

    async def replay(self) -> None:
        """The conversation created again, one item at a time (each refused one sent again); a close propagates."""
        assert self.ws is not None
        for item in self.items:
            if item["type"] == "function_call_output" and self.mode == "lose-output" and not self.correct:
                continue  # the planted bug: outputs are not part of the replay
            event = {"type": "conversation.item.create", "item": item}
            await self.ws.send(json.dumps(event))
            await self.next_of(self.added(item), retry=event, reconnect=False)

    @staticmethod
    def added(item: dict[str, Any]) -> Callable[[dict[str, Any]], bool]:
        return lambda e: e["type"] == "conversation.item.added" and e["item"].get("id") == item["id"]

    async def send(self, event: dict[str, Any]) -> None:
        assert self.ws is not None
        while True:
            try:
                await self.ws.send(json.dumps(event))
                return
            except ConnectionClosed:
                await self.reconnect()
                return  # the replay sent what was created, and asked again for what was asked

    async def next_of(
        self, wanted: Callable[[dict[str, Any]], bool], retry: dict[str, Any] | None, reconnect: bool = True,
        item: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The next server event `wanted`; an `error` (or a failed response) sends `retry` again; a close
        reconnects (or, with `reconnect=False`, propagates)."""
        assert self.ws is not None
        while True:
            try:
                event = json.loads(await asyncio.wait_for(self.ws.recv(), WAIT))
            except ConnectionClosed:
                if not reconnect:
                    raise
                await self.reconnect()
                if self.cut or (item is not None and item["id"] in self.added_ids):
                    return {}  # the replay created what was waited for
                continue
            except TimeoutError:
                raise AssertionError(f"no answer within {WAIT}s ({self.reconnects} reconnects)") from None
            self.take_call(event)
            if event["type"] == "conversation.item.added":
                self.added_ids.add(event["item"].get("id"))
            failed = event["type"] == "response.done" and event["response"].get("status") in ("failed", "cancelled")
            if (event["type"] == "error" or failed) and retry is not None:
                if reconnect:
                    await self.send(retry)
                else:
                    await self.ws.send(json.dumps(retry))
                continue
            if wanted(event):
                return event

    def take_call(self, event: dict[str, Any]) -> None:
        """A function call joins the conversation (and waits for its tool) once its arguments are complete."""
        item = event.get("item")
        if event["type"] == "response.function_call_arguments.done":
            item = {"type": "function_call", "id": event["item_id"], **{k: event[k] for k in ("call_id", "name")},
                    "arguments": event["arguments"]}  # fmt: skip
        elif not (event["type"] == "conversation.item.done" and isinstance(item, dict)):
            return
        if item.get("type") == "function_call" and all(i["id"] != item["id"] for i in self.items):
            call = {k: item[k] for k in ("type", "id", "call_id", "name", "arguments")}
            self.items.append(call)
            self.calls.append(call)

    async def create(self, item: dict[str, Any]) -> None:
        self.items.append(item)
        event = {"type": "conversation.item.create", "item": item}
        await self.send(event)
        if item["id"] not in self.added_ids:  # else a reconnect's replay already created it
            await self.next_of(self.added(item), retry=event, item=item)

    async def respond(self) -> None:
        """Ask for a response and wait for it (or for its cut, once its calls are complete)."""
        self.asking, self.cut = True, False
        ask = {"type": "response.create"}
        await self.send(ask)
        await self.next_of(lambda e: e["type"] == "response.done", retry=ask)
        self.asking = False

    async def run(self) -> None:
        await self.open()
        if self.mode in ("give-up", "hang"):
            for n, text in enumerate(("Hello!", "How are you?"), 1):
                await self.create(user(f"item_user{n}", text))
                await self.respond()
            return
        await self.create(user("item_user1", "What's the weather and the time in Paris?"))
        for _ in range(3):  # a response the server started itself (the user spoke) may come first
            await self.respond()
            if self.calls:
                break
        if not self.calls:
            raise AssertionError("the model called no tool")
        outputs = 0
        while self.calls:
            calls, self.calls = self.calls, []
            for n, call in enumerate(calls, 1):
                outputs += 1
                out = {"type": "function_call_output", "id": f"item_out{outputs}", "call_id": call["call_id"],
                       "output": "ok"}  # fmt: skip
                await self.create(out)
                if self.mode == "parallel" and not self.correct and n == 1 and len(calls) > 1:
                    await self.respond()  # the planted bug: the reply is asked before the other calls' outputs
            await self.respond()


def user(item_id: str, text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "id": item_id, "content": [{"type": "input_text", "text": text}]}


async def main(argv: list[str]) -> int:
    mode = argv[0] if argv else ""
    if mode not in MODES:
        print(f"usage: planted_client.py {{{','.join(MODES)}}} [--correct]", file=sys.stderr)
        return 2
    client = Client(mode, "--correct" in argv[1:])
    try:
        await client.run()
    except GaveUp:
        return 0  # the planted bug: gone without a word
    finally:
        if client.ws is not None:
            await client.ws.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
