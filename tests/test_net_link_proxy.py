"""`rtrace record`: the proxy forwards frames unchanged, writes them as the server's own recording does, loses nothing
when killed, passes closes on, and never writes a secret."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.http11 import Request, Response

from rtrace.core.loader import TraceReader
from rtrace.net.link.proxy import RecordOptions, run_proxy
from rtrace.net.link.server import ServerOptions, run_server

ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-proj-TESTKEY0123456789abcdefSECRET"
EPHEMERAL = "ek_68c1ephemeralSECRET0123456789"
AUDIO = base64.b64encode(bytes(range(240)) * 20).decode()


def run(coro_fn: Callable[[], Awaitable[None]], timeout: float = 20.0) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(coro_fn(), timeout)

    asyncio.run(bounded())


def user(text: str, item_id: str) -> str:
    item = {"id": item_id, "type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    return json.dumps({"type": "conversation.item.create", "event_id": f"ev_{item_id}", "item": item})


async def conversation(url: str) -> list[str]:
    """A short session: two user items, one response; every frame the client received, raw."""
    got: list[str] = []
    async with connect(f"{url}/realtime?model=gpt-realtime", subprotocols=["realtime"]) as ws:  # type: ignore[list-item]

        async def until(etype: str) -> None:
            while True:
                raw = await asyncio.wait_for(ws.recv(), 5)
                assert isinstance(raw, str)
                got.append(raw)
                if json.loads(raw)["type"] == etype:
                    return

        await until("session.created")
        await ws.send(user("hello", "item_u1"))
        await until("conversation.item.done")
        await ws.send(user("what's the weather?", "item_u2"))
        await until("conversation.item.done")
        await ws.send(json.dumps({"type": "response.create", "event_id": "ev_r1"}))
        await until("response.done")
    return got


def _clockless(frame: str) -> str:
    return re.sub(r'"expires_at":\s*\d+', '"expires_at":0', frame)


def events(path: Path, direction: str) -> list[dict[str, Any]]:
    with TraceReader.open(path) as reader:
        return [r.event for r in reader if r.dir == direction]


def test_client_sees_the_same_frames_and_trace_equals_server_recording(tmp_path: Path) -> None:
    async def main() -> None:
        async with run_server(ServerOptions(latency=0.01)) as direct_srv:
            direct = await conversation(direct_srv.url)
        server_trace, proxy_trace = tmp_path / "server.jsonl", tmp_path / "proxy.jsonl"
        async with (
            run_server(ServerOptions(latency=0.01, record=str(server_trace))) as srv,
            run_proxy(RecordOptions(upstream=srv.url, output=proxy_trace)) as proxy,
        ):
            assert proxy.url.startswith("ws://127.0.0.1:")
            proxied = await conversation(proxy.url)
        # byte for byte, but for the session's `expires_at` (the wall clock's second plus its life: two runs may
        # straddle a second)
        assert [_clockless(f) for f in proxied] == [_clockless(f) for f in direct]
        for direction in ("client", "server"):
            assert events(proxy_trace, direction) == events(server_trace, direction), direction
        with TraceReader.open(proxy_trace) as reader:
            meta = [r.event for r in reader if r.dir == "meta"]
            assert reader.header is not None and reader.header.fields["recorder"] == "rtrace record"
            assert reader.problem_count == 0
        assert meta[0] == {"type": "connection.opened", "path": "/v1/realtime?model=gpt-realtime"}
        assert meta[-1]["type"] == "connection.closed" and meta[-1]["by"] == "client" and meta[-1]["code"] == 1000

    run(main)


def test_many_concurrent_connections(tmp_path: Path) -> None:
    out = tmp_path / "many.jsonl"

    async def main() -> None:
        async with (
            run_server(ServerOptions(latency=0.005)) as srv,
            run_proxy(RecordOptions(upstream=srv.url, output=out)) as proxy,
        ):
            results = await asyncio.gather(*(conversation(proxy.url) for _ in range(8)))
        assert all(json.loads(r[-1])["type"] == "response.done" for r in results)

    run(main)
    with TraceReader.open(out) as reader:
        records = list(reader)
    conns = {r.conn for r in records}
    assert conns == set(range(1, 9))
    for conn in conns:
        mine = [r for r in records if r.conn == conn]
        assert mine[0].type == "connection.opened" and mine[-1].type == "connection.closed"
        sent = [r.event["type"] for r in mine if r.dir == "server"]  # rate_limits.updated may follow, as the real one
        assert "response.done" in sent and set(sent[sent.index("response.done") + 1 :]) <= {"rate_limits.updated"}


# -- a scripted upstream, to see what reaches it and to make it misbehave --------------------------------------------


class Scripted:
    def __init__(self, mode: str = "ok") -> None:
        self.mode = mode
        self.requests: list[Request] = []
        self.subprotocols: list[str | None] = []
        self.received: list[str] = []

    def process_request(self, ws: ServerConnection, request: Request) -> Response | None:
        self.requests.append(request)
        if self.mode == "refuse":
            return ws.respond(401, "invalid api key\n")  # type: ignore[arg-type]
        return None

    async def handler(self, ws: ServerConnection) -> None:
        self.subprotocols.append(ws.subprotocol)
        session = {"type": "session.created", "session": {"id": "sess_1", "client_secret": {"value": EPHEMERAL}}}
        await ws.send(json.dumps(session))
        if self.mode == "close":
            await ws.close(4001, "bye now")
            return
        if self.mode == "drop":
            ws.transport.abort()
            return
        with contextlib.suppress(ConnectionClosed):
            async for message in ws:
                assert isinstance(message, str)
                self.received.append(message)
                await ws.send(json.dumps({"type": "session.updated", "of": json.loads(message).get("type")}))


@contextlib.asynccontextmanager
async def scripted(mode: str = "ok") -> AsyncIterator[tuple[Scripted, str]]:
    script = Scripted(mode)

    def select(ws: ServerConnection, offered: Any) -> Any:
        return "realtime" if "realtime" in offered else None

    async with serve(
        script.handler, "127.0.0.1", 0, process_request=script.process_request, select_subprotocol=select
    ) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        yield script, f"ws://127.0.0.1:{port}/v1/realtime"


def test_upstream_refusal_is_passed_on(tmp_path: Path) -> None:
    out = tmp_path / "refused.jsonl"

    async def main() -> None:
        async with scripted("refuse") as (_, up), run_proxy(RecordOptions(upstream=up, output=out)) as proxy:
            with pytest.raises(InvalidStatus) as info:
                async with connect(f"{proxy.url}/realtime?model=m"):
                    pass
            assert info.value.response.status_code == 401

    run(main)
    meta = events(out, "meta")
    assert [m["type"] for m in meta] == ["connection.opened", "note", "connection.closed"]
    assert "HTTP 401" in meta[1]["text"]


@pytest.mark.parametrize(("mode", "code", "reason"), [("close", 4001, "bye now"), ("drop", 1006, "")])
def test_upstream_close_or_drop_reaches_the_client(tmp_path: Path, mode: str, code: int, reason: str) -> None:
    out = tmp_path / f"{mode}.jsonl"

    async def main() -> None:
        async with scripted(mode) as (_, up), run_proxy(RecordOptions(upstream=up, output=out)) as proxy:
            async with connect(f"{proxy.url}/realtime?model=m") as ws:
                first = json.loads(await asyncio.wait_for(ws.recv(), 5))
                assert first["type"] == "session.created"
                with pytest.raises(ConnectionClosed):
                    await asyncio.wait_for(ws.recv(), 5)
                assert ws.protocol.close_code == code
                assert (ws.protocol.close_reason or "") == reason

    run(main)
    meta = events(out, "meta")
    closed = meta[-1]
    assert closed["type"] == "connection.closed" and closed["by"] == "server" and closed["code"] == code
    assert any(m["type"] == "note" and "upstream" in m["text"] for m in meta)


def test_unreachable_upstream_is_a_bad_gateway(tmp_path: Path) -> None:
    out = tmp_path / "down.jsonl"

    async def main() -> None:
        async with scripted() as (_, up):
            pass  # now closed: the port refuses
        async with run_proxy(RecordOptions(upstream=up, output=out, open_timeout=2)) as proxy:
            with pytest.raises(InvalidStatus) as info:
                async with connect(f"{proxy.url}/realtime"):
                    pass
            assert info.value.response.status_code == 502

    run(main)
    assert "unreachable" in events(out, "meta")[1]["text"]


# -- the recorder as a command: secrets, signals -----------------------------------------------------------------


@contextlib.asynccontextmanager
async def recorder_process(upstream: str, out: Path, logs: Path, *extra: str) -> AsyncIterator[tuple[Any, str]]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("OPENAI_API_KEY", None)
    stdout = open(logs / "stdout.log", "wb")
    stderr = open(logs / "stderr.log", "wb")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rtrace.cli", "record", "--upstream", upstream, "-o", str(out), *extra,
        stdout=stdout, stderr=stderr, env=env, cwd=str(ROOT),
    )  # fmt: skip
    try:
        url = ""
        deadline = time.monotonic() + 15
        while not url:
            assert time.monotonic() < deadline, (logs / "stderr.log").read_text()
            assert proc.returncode is None, (logs / "stderr.log").read_text()
            await asyncio.sleep(0.05)
            for line in (logs / "stdout.log").read_text().splitlines():
                if "OPENAI_BASE_URL=" in line:
                    url = "ws" + line.split("=", 1)[1].strip()[4:]
        yield proc, url
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
        stdout.close()
        stderr.close()


def test_secrets_never_reach_any_artifact(tmp_path: Path) -> None:
    out = tmp_path / "secret.jsonl"

    async def main() -> None:
        async with scripted() as (script, up), recorder_process(up, out, tmp_path) as (proc, url):
            headers = {"Authorization": f"Bearer {KEY}", "api-key": KEY, "OpenAI-Beta": "realtime=v1"}
            async with connect(
                f"{url}/realtime?model=m&api-key={KEY}",
                additional_headers=headers,
                subprotocols=["realtime", f"openai-insecure-api-key.{KEY}"],  # type: ignore[list-item]
            ) as ws:
                await asyncio.wait_for(ws.recv(), 5)
                await ws.send(json.dumps({"type": "session.update", "session": {"instructions": f"key {KEY}"}}))
                await asyncio.wait_for(ws.recv(), 5)
                await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": AUDIO}))
                await asyncio.wait_for(ws.recv(), 5)
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.wait(), 10) == 0
        # the credentials did reach the upstream, unchanged
        req = script.requests[0]
        assert req.headers["Authorization"] == f"Bearer {KEY}" and req.headers["api-key"] == KEY
        assert f"api-key={KEY}" in req.path and "model=m" in req.path
        assert f"openai-insecure-api-key.{KEY}" in req.headers["Sec-WebSocket-Protocol"]
        assert script.subprotocols == ["realtime"]
        assert KEY in script.received[0]
        assert json.loads(script.received[1])["audio"] == AUDIO  # the upstream gets the audio; the trace does not

    run(main)
    artifacts = [p for p in tmp_path.iterdir() if p.is_file()]
    assert {p.name for p in artifacts} >= {"secret.jsonl", "stdout.log", "stderr.log"}
    for path in artifacts:
        text = path.read_bytes()
        assert KEY.encode() not in text and b"TESTKEY" not in text, path.name
        assert EPHEMERAL.encode() not in text, path.name
    trace = events(out, "server")
    assert trace[0]["session"]["client_secret"]["value"] == "[redacted]"
    append = next(e for e in events(out, "client") if e["type"] == "input_audio_buffer.append")
    assert append["audio"] == "" and append["rtrace_audio_bytes"] == 4800
    assert AUDIO.encode() not in out.read_bytes()
    assert [m["type"] for m in events(out, "meta")] == ["connection.opened", "connection.closed"]


def test_sigkill_leaves_a_parseable_trace(tmp_path: Path) -> None:
    out = tmp_path / "killed.jsonl"
    audio = base64.b64encode(os.urandom(48_000)).decode()

    async def main() -> None:
        async with scripted() as (_, up), recorder_process(up, out, tmp_path, "--keep-audio") as (proc, url):
            async with connect(f"{url}/realtime", max_size=None) as ws:
                await asyncio.wait_for(ws.recv(), 5)
                for _ in range(40):
                    await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": audio}))
                await asyncio.wait_for(ws.recv(), 5)
                proc.kill()  # SIGKILL while frames are in flight

    run(main)
    with TraceReader.open(out) as reader:
        records = list(reader)
        assert reader.header is not None
        assert reader.problem_count <= 1, [str(p) for p in reader.problems]
    appends = [r for r in records if r.type == "input_audio_buffer.append"]
    assert appends and all(r.event["audio"] == audio for r in appends)


# -- pure parts -------------------------------------------------------------------------------------------------


def test_cli_rejects_a_bad_upstream(tmp_path: Path) -> None:
    from rtrace.cli import main

    assert main(["record", "--upstream", "http://x", "-o", str(tmp_path / "o.jsonl")]) == 2


def test_stopping_the_recorder_closes_both_sides_and_notes_it(tmp_path: Path) -> None:
    out = tmp_path / "stopped.jsonl"

    async def main() -> None:
        async with scripted() as (_, up):
            async with run_proxy(RecordOptions(upstream=up, output=out)) as proxy:
                ws = await connect(f"{proxy.url}/realtime")
                await asyncio.wait_for(ws.recv(), 5)
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 5)
            assert ws.protocol.close_code == 1001

    run(main)
    closed = events(out, "meta")[-1]
    assert closed["type"] == "connection.closed" and closed["by"] == "recorder", closed
    assert closed["server"]["code"] == 1001, closed




def test_a_client_flooding_pings_through_record_is_closed_at_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rtrace.net.link import common

    from .test_net_link_server import ping_flood

    monkeypatch.setattr(common, "MAX_BACKLOG", 1 << 20)
    out = tmp_path / "p.jsonl"

    async def go() -> float:
        async with (
            run_server(ServerOptions()) as srv,
            run_proxy(RecordOptions(upstream=srv.url, output=out)) as proxy,
        ):
            return await ping_flood(proxy.port)

    assert asyncio.run(go()) < 8
    notes = [json.loads(line)["event"] for line in out.read_text().splitlines()[1:]]
    assert any("closed 1008: the client read none of the" in n.get("text", "") for n in notes)
    assert notes[-1]["type"] == "connection.closed" and notes[-1]["by"] == "recorder" and notes[-1]["code"] == 1008


def _trace_events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line)["event"] for line in path.read_text().splitlines()[1:]]


def test_an_upstream_that_accepts_and_never_answers_is_a_502_within_the_open_timeout(tmp_path: Path) -> None:
    out = tmp_path / "p.jsonl"

    async def go() -> tuple[int, float]:
        silent = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)  # takes TCP, answers nothing
        port = silent.sockets[0].getsockname()[1]
        try:
            async with run_proxy(RecordOptions(upstream=f"ws://127.0.0.1:{port}/v1", output=out,
                                               open_timeout=1.0)) as proxy:  # fmt: skip
                start = time.monotonic()
                with pytest.raises(InvalidStatus) as refused:
                    await connect(f"{proxy.url}/realtime?model=gpt-realtime", open_timeout=10)
                return refused.value.response.status_code, time.monotonic() - start
        finally:
            silent.close()

    status, took = asyncio.run(go())
    assert status == 502 and took < 4
    events = _trace_events(out)
    assert any(e.get("text", "").startswith("upstream unreachable") for e in events)
    assert events[-1] == {"type": "connection.closed", "by": "server", "status": 502}


def test_an_oversized_frame_from_the_upstream_is_noted_and_both_sides_closed_1009(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rtrace.net.link import proxy as proxy_module

    monkeypatch.setattr(proxy_module, "MAX_FRAME_BYTES", 1 << 20)
    out = tmp_path / "p.jsonl"

    async def huge(ws: ServerConnection) -> None:
        await ws.send(json.dumps({"type": "session.created", "pad": "x" * (2 << 20)}))
        with contextlib.suppress(ConnectionClosed):
            await ws.wait_closed()

    async def go() -> int | None:
        async with serve(huge, "127.0.0.1", 0, max_size=None) as up:
            port = up.sockets[0].getsockname()[1]
            async with run_proxy(RecordOptions(upstream=f"ws://127.0.0.1:{port}/v1", output=out)) as proxy:
                async with connect(f"{proxy.url}/realtime?model=gpt-realtime") as ws:
                    with contextlib.suppress(ConnectionClosed):
                        await asyncio.wait_for(ws.recv(), 10)
                    rcvd = ws.protocol.close_rcvd
                    return int(rcvd.code) if rcvd is not None else None

    assert asyncio.run(go()) == 1009
    events = _trace_events(out)
    assert any("the upstream sent a frame over the 1048576-byte limit" in e.get("text", "") for e in events)
    closed = events[-1]
    assert closed["type"] == "connection.closed" and closed["by"] == "recorder" and closed["client"]["code"] == 1009
