"""The in-process socket recorder: a hand-written `websockets` client (asyncio and sync) against `rtrace serve` on
127.0.0.1, recorded by `record_websocket`, and its trace against serve's own recording."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as sync_connect

from rtrace.core.loader import TraceReader
from rtrace.engine.fold import analyze_path
from rtrace.integrations.websocket import WireRecorder, record_websocket
from rtrace.net.faults.flags import Faults
from rtrace.net.faults.script import Schedule
from rtrace.net.link.server import ServerOptions, run_server

ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-proj-WIRERECORDERKEY0123456789abcdef"


def user(text: str) -> str:
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    return json.dumps({"type": "conversation.item.create", "item": item})


def records(path: Path) -> list[Any]:
    with TraceReader.open(path) as reader:
        out = list(reader)
        assert reader.problem_count == 0
        assert reader.header is not None
    return out


def kinds(path: Path, conn: int | None = None) -> list[tuple[str, str]]:
    return [(r.dir, r.type) for r in records(path) if conn is None or r.conn == conn]


def wire(path: Path) -> list[tuple[int, str, str]]:
    """The client and server events of a trace, in order."""
    return [(r.conn, r.dir, r.type) for r in records(path) if r.dir in ("client", "server")]


async def one_turn(ws: Any, text: str = "hello") -> None:
    await ws.send(user(text))
    await ws.send(json.dumps({"type": "response.create"}))
    async for message in ws:
        # the last event of a turn: the rate limits serve sends after the `response.done`, as the GA server does
        if json.loads(message)["type"] == "rate_limits.updated":
            return


def test_an_asyncio_client_is_recorded_as_serve_saw_it(tmp_path: Path) -> None:
    mine, theirs = tmp_path / "client.jsonl", tmp_path / "serve.jsonl"

    async def main() -> None:
        async with run_server(ServerOptions(latency=0.01, record=theirs)) as srv:
            ws = record_websocket(await connect(f"{srv.url}/realtime?model=gpt-realtime&api_key={KEY}"), mine)
            await one_turn(ws, f"my key is {KEY}")
            await ws.close()

    asyncio.run(asyncio.wait_for(main(), 20))
    text = mine.read_text()
    assert KEY not in text and "WIRERECORDERKEY" not in text
    assert wire(mine) == wire(theirs)
    recs = records(mine)
    assert recs[0].type == "connection.opened" and recs[0].event["path"].startswith("/v1/realtime?model=gpt-realtime")
    assert recs[-1].type == "connection.closed" and recs[-1].event["by"] == "client" and recs[-1].event["code"] == 1000
    with TraceReader.open(mine) as reader:
        list(reader)
        assert reader.header is not None and reader.header.fields["recorder"] == "rtrace.integrations.websocket"
    assert analyze_path(mine).findings == analyze_path(theirs).findings == []


def test_a_sync_client_and_a_server_close_with_its_code(tmp_path: Path) -> None:
    mine = tmp_path / "sync.jsonl"

    async def main() -> None:
        async with run_server(ServerOptions(schedule=Schedule.of(Faults(close_after=2, close_code=1011)))) as srv:
            url = f"{srv.url}/realtime"

            def client() -> None:
                recorder = WireRecorder(mine, "test")
                with sync_connect(url) as raw:
                    ws = recorder.socket(raw)
                    ws.send(user("hello"))
                    with pytest.raises(ConnectionClosed):
                        for _ in ws:
                            pass
                    with pytest.raises(ConnectionClosed):
                        ws.send(json.dumps({"type": "response.create"}))
                recorder.close()

            await asyncio.to_thread(client)

    asyncio.run(asyncio.wait_for(main(), 20))
    recs = records(mine)
    closed = [r for r in recs if r.type == "connection.closed"]
    assert len(closed) == 1 and closed[0].event["code"] == 1011 and closed[0].event["by"] == "server"
    assert [r.type for r in recs if r.dir == "server"] == ["session.created", "conversation.item.added"]
    # the send after the close never left: a note, not a client event
    assert [r.type for r in recs if r.dir == "client"] == ["conversation.item.create"]
    assert recs[-1].type == "note" and "response.create" in recs[-1].event["text"]


def test_each_socket_is_a_connection_and_frames_that_are_not_events_are_notes(tmp_path: Path) -> None:
    mine = tmp_path / "two.jsonl"

    async def main() -> None:
        async with run_server(ServerOptions()) as srv:
            with WireRecorder(mine, "test", "tester 1.0") as recorder:
                for _ in range(2):
                    ws = recorder.socket(await connect(f"{srv.url}/realtime"))
                    assert recorder.socket(ws) is ws  # recorded once
                    await ws.recv()
                    await ws.send("not json")
                    await ws.send(b"\x00\x01")
                    await ws.close()

    asyncio.run(asyncio.wait_for(main(), 20))
    recs = records(mine)
    assert [(r.conn, r.type) for r in recs if r.dir == "meta" and r.type.startswith("connection.")] == [
        (1, "connection.opened"),
        (1, "connection.closed"),
        (2, "connection.opened"),
        (2, "connection.closed"),
    ]
    notes = [r.event["text"] for r in recs if r.type == "note"]
    assert len(notes) == 4 and "binary frame" in notes[1] and "(8 bytes)" in notes[0]


def test_threads_sending_and_reading_keep_whole_lines(tmp_path: Path) -> None:
    mine = tmp_path / "threads.jsonl"

    async def main() -> None:
        async with run_server(ServerOptions()) as srv:

            def client() -> None:
                with WireRecorder(mine, "test") as recorder, sync_connect(f"{srv.url}/realtime") as raw:
                    ws = recorder.socket(raw)
                    ws.recv()

                    def sender() -> None:
                        for n in range(20):
                            ws.send(user(f"hello {n}"))

                    t = threading.Thread(target=sender)
                    t.start()
                    for _ in range(40):  # an ack and a done each (unread frames would stall its close)
                        ws.recv()
                    t.join()

            await asyncio.to_thread(client)

    asyncio.run(asyncio.wait_for(main(), 30))
    assert sum(1 for d, t in kinds(mine) if d == "client") == 20
    assert sum(1 for d, t in kinds(mine) if d == "server") == 41


CHILD = """
import asyncio, json, sys
from websockets.asyncio.client import connect
from rtrace.integrations.websocket import record_websocket

async def main():
    ws = record_websocket(await connect(sys.argv[1]), sys.argv[2])
    await ws.recv()
    n = 0
    while True:
        item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"hi {n}"}]}
        await ws.send(json.dumps({"type": "conversation.item.create", "item": item}))
        await ws.recv()
        n += 1
        if n == 20:
            print("ready", flush=True)

asyncio.run(main())
"""


def test_a_killed_client_leaves_a_parseable_trace(tmp_path: Path) -> None:
    mine = tmp_path / "killed.jsonl"

    async def main() -> None:
        async with run_server(ServerOptions()) as srv:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", CHILD, f"{srv.url}/realtime", str(mine),
                stdout=asyncio.subprocess.PIPE, cwd=str(ROOT),
            )  # fmt: skip
            assert proc.stdout is not None
            assert (await asyncio.wait_for(proc.stdout.readline(), 20)).strip() == b"ready"
            proc.send_signal(signal.SIGKILL)
            await proc.wait()

    asyncio.run(asyncio.wait_for(main(), 30))
    recs = records(mine)  # no problem in any line
    assert sum(1 for r in recs if r.dir == "client") >= 20


def test_the_module_imports_no_client_library() -> None:
    code = (
        "import sys\n"
        "import rtrace.integrations.websocket, rtrace.integrations.openai_sdk\n"
        "import rtrace.integrations.openai_agents, rtrace.integrations.pipecat\n"
        "bad = [m for m in ('websockets', 'openai', 'agents', 'pipecat', 'typer', 'rich') if m in sys.modules]\n"
        "print(bad)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, cwd=str(ROOT))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_no_planted_secret_survives_the_socket_recorder(tmp_path: Path) -> None:
    """Every plant of the corpus, as frames crossing a recorded socket (each plant's lines on a socket of its own,
    in both directions as planted; a planted path as the socket's request, a planted close reason as its close):
    0 survivors in the trace."""
    from .secret_corpus import PLANTS, survivors

    class Socket:
        def __init__(self, frames: list[str], path: str) -> None:
            self.frames = frames
            self.request = type("Request", (), {"path": path})()

        def send(self, message: str) -> None:
            pass

        def recv(self) -> str:
            return self.frames.pop(0)

    out = tmp_path / "corpus.jsonl"
    with WireRecorder(out, "test") as recorder:
        for plant in PLANTS:
            frames = [json.dumps(event) for direction, event in plant.lines if direction == "server"]
            opened = [e["path"] for d, e in plant.lines if d == "meta" and e["type"] == "connection.opened"]
            ws = recorder.socket(Socket(frames, opened[0] if opened else "/v1/realtime"))
            for direction, event in plant.lines:
                if direction == "client":
                    ws.send(json.dumps(event))
                elif direction == "server":
                    ws.recv()
                elif event["type"] == "connection.closed":  # what a close frame's reason becomes
                    recorder.closed(ws.rtrace_conn, event["by"], event["code"], event["reason"])
    assert records(out)
    assert survivors(out.read_bytes()) == []
