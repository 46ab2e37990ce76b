"""The openai SDK recorder: on a stand-in connection (no openai installed) for the wiring, and with the real SDK
3.57 (`.venv-e2e-openai`, rtrace on its PYTHONPATH) against `rtrace serve`, healthy and under faults, where its
trace must give the findings serve's own recording gives."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rtrace.core.loader import TraceReader
from rtrace.integrations.openai_sdk import record_connection
from rtrace.net.link.server import ServerOptions, run_server

from .conftest import client_python
from .realclients import (
    DROP_OUTPUT,
    FAULT_CLOSE_CODE,
    ClientTrace,
    assert_same_findings,
    events_through_call,
    recorded_run,
    rtrace_pythonpath,
    trace_lines,
)
from .test_e2e_openai_sdk import client


class FakeSocket:
    """The little of a websockets asyncio connection the SDK uses."""

    def __init__(self, frames: list[dict[str, Any]], path: str = "/v1/realtime?model=m") -> None:
        self.frames = [json.dumps(f).encode() for f in frames]
        self.sent: list[str] = []
        self.state = SimpleNamespace(value=1)
        self.request = SimpleNamespace(path=path)
        self.protocol = SimpleNamespace(close_rcvd=None, close_sent=None, close_rcvd_then_sent=None)

    async def send(self, data: str) -> None:
        self.sent.append(data)

    async def recv(self, decode: bool | None = None) -> bytes:
        return self.frames.pop(0)

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self.protocol.close_sent = SimpleNamespace(code=code, reason=reason)
        self.protocol.close_rcvd = SimpleNamespace(code=code, reason=reason)
        self.protocol.close_rcvd_then_sent = False
        self.state.value = 3


class FakeConnection:
    """`AsyncRealtimeConnection`'s shape: a socket in `_connection`, a `_make_ws` when reconnecting is on."""

    def __init__(self, ws: FakeSocket, make_ws: Any) -> None:
        self._connection: Any = ws
        self._make_ws = make_ws

    async def send(self, event: dict[str, Any]) -> None:
        await self._connection.send(json.dumps(event))

    async def recv(self) -> dict[str, Any]:
        return dict(json.loads(await self._connection.recv(decode=False)))

    async def close(self) -> None:
        await self._connection.close()


def test_a_stand_in_connection_is_recorded_across_a_reconnect(tmp_path: Path) -> None:
    out = tmp_path / "sdk.jsonl"
    created = {"type": "session.created", "session": {"id": "s"}}

    async def make_ws(query: Any, headers: Any) -> FakeSocket:
        return FakeSocket([created])

    async def main() -> None:
        first = FakeSocket([created])
        conn = record_connection(FakeConnection(first, make_ws), out)
        assert (await conn.recv())["type"] == "session.created"
        await conn.send({"type": "session.update", "session": {"instructions": "sk-proj-SDKKEY0123456789abcdefgh"}})
        conn._connection = await conn._make_ws({}, {})  # what the SDK does on a reconnect
        await conn.recv()
        await conn.send({"type": "response.create"})
        await conn.close()
        assert first.sent and "SDKKEY" in first.sent[0]  # the socket gets the event as the app sent it
        assert vars(conn).keys() == {"_connection", "_make_ws", "rtrace_recorder"}  # close() undid the wrapping
        assert isinstance(conn._connection, FakeSocket)

    asyncio.run(asyncio.wait_for(main(), 10))
    text = out.read_text()
    assert "SDKKEY" not in text
    with TraceReader.open(out) as reader:
        recs = [(r.conn, r.dir, r.type) for r in reader]
        assert reader.problem_count == 0
    assert recs == [
        (1, "meta", "connection.opened"),
        (1, "server", "session.created"),
        (1, "client", "session.update"),
        (2, "meta", "connection.opened"),
        (2, "server", "session.created"),
        (2, "client", "response.create"),
        (2, "meta", "connection.closed"),
        (1, "meta", "connection.closed"),  # never closed as far as the app saw: noted when the recording ends
    ]


def test_something_else_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        record_connection(object(), tmp_path / "x.jsonl")
    assert not (tmp_path / "x.jsonl").exists()


# -- the real SDK -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> ClientTrace:
    return recorded_run(client(), tmp_path_factory.mktemp("healthy"))


@pytest.mark.e2e
def test_real_sdk_healthy_turn(healthy: ClientTrace) -> None:
    assert healthy.serve.summary["ok"], healthy.explain()
    lines = trace_lines(healthy.trace)
    assert lines[0]["recorder"] == "rtrace.integrations.openai_sdk" and lines[0]["client"] == "openai 3.57.0"
    assert assert_same_findings(healthy) == set() and healthy.slugs == set()
    # every frame serve saw, in the same order
    mine = [(r["dir"], r["event"]["type"]) for r in lines[1:] if r["dir"] in ("client", "server")]
    theirs = [(r["dir"], r["event"]["type"]) for r in trace_lines(healthy.serve.trace)[1:]]
    assert sorted(mine) == sorted(t for t in theirs if t[0] in ("client", "server")), healthy.explain()


@pytest.mark.e2e
def test_real_sdk_reconnect_is_two_connections_with_the_same_findings(healthy: ClientTrace, tmp_path: Path) -> None:
    rec = recorded_run(client(), tmp_path, close_after=events_through_call(healthy.serve), close_code=FAULT_CLOSE_CODE)
    assert rec.serve.summary["reconnected"] == 1, rec.explain()
    assert assert_same_findings(rec) == set()
    expected = {"unanswered-function-call", "output-for-unknown-call", "server-error", "reconnect-restores-nothing"}
    assert rec.slugs == expected, rec.explain()
    closes = [r["event"] for r in trace_lines(rec.trace)[1:] if r["event"].get("type") == "connection.closed"]
    assert [c.get("code") for c in closes] == [FAULT_CLOSE_CODE, 1000], rec.explain()


@pytest.mark.e2e
def test_real_sdk_drop_shows_the_response_create_serve_never_read(tmp_path: Path) -> None:
    rec = recorded_run(client(), tmp_path, drop_on=DROP_OUTPUT, close_code=FAULT_CLOSE_CODE)
    # serve closed on reading the output's create; the SDK had sent its response.create too, which only the
    # client's own trace holds, lost with the connection
    assert assert_same_findings(rec) == {"response-create-lost-on-reconnect"}, rec.explain()
    assert {"unanswered-function-call", "unconfirmed-item-lost-on-reconnect"} <= rec.slugs


SYNC_CLIENT = """
import sys
from openai import OpenAI
from rtrace.integrations.openai_sdk import record_connection

client = OpenAI(api_key="sk-rtrace-test", websocket_base_url=sys.argv[1])
with client.realtime.connect(model="gpt-realtime") as conn:
    record_connection(conn, sys.argv[2])
    conn.session.update(session={"type": "realtime", "output_modalities": ["text"]})
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]}
    conn.conversation.item.create(item=item)
    conn.response.create()
    for event in conn:
        if event.type == "rate_limits.updated":  # serve's last event of a turn, after response.done (GA)
            break
"""


@pytest.mark.e2e
def test_real_sync_sdk_is_recorded(tmp_path: Path) -> None:
    python = client_python("openai")
    mine, theirs = tmp_path / "sync.jsonl", tmp_path / "serve.jsonl"
    env = {**os.environ, "PYTHONPATH": rtrace_pythonpath(tmp_path)}

    async def main() -> subprocess.CompletedProcess[str]:
        async with run_server(ServerOptions(latency=0.02, record=theirs)) as srv:
            return await asyncio.to_thread(
                subprocess.run, [str(python), "-c", SYNC_CLIENT, srv.url, str(mine)],
                capture_output=True, text=True, timeout=60, env=env,
            )  # fmt: skip

    done = asyncio.run(main())
    assert done.returncode == 0, done.stderr[-3000:]
    wire = [(r["conn"], r["dir"], r["event"]["type"]) for r in trace_lines(mine)[1:] if r["dir"] != "meta"]
    served = [(r["conn"], r["dir"], r["event"]["type"]) for r in trace_lines(theirs)[1:] if r["dir"] != "meta"]
    # each side's frames in the same order; how sends and receives interleave depends on which end looks
    assert [w for w in wire if w[1] == "client"] == [w for w in served if w[1] == "client"]
    assert [w for w in wire if w[1] == "server"] == [w for w in served if w[1] == "server"]
    closed = [r["event"] for r in trace_lines(mine)[1:] if r["event"].get("type") == "connection.closed"]
    assert closed == [{"type": "connection.closed", "by": "client", "code": 1000}]
