"""The websocket layer: real sockets on 127.0.0.1, port 0. Latency, order, recording, faults, bad frames, tasks."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from rtrace.core.loader import TraceReader
from rtrace.engine.fold import analyze_path
from rtrace.net.fake.endpoint import EndpointOptions
from rtrace.net.faults.flags import Faults
from rtrace.net.faults.script import Schedule, parse_script
from rtrace.net.link.server import RealtimeServer, ServerOptions, run_server

REAL = Path(__file__).resolve().parent.parent / "sample_traces" / "real"


def run(coro_fn: Callable[[], Awaitable[None]], timeout: float = 10.0) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(coro_fn(), timeout)

    asyncio.run(bounded())


async def recv(ws: ClientConnection) -> dict[str, Any]:
    return json.loads(await asyncio.wait_for(ws.recv(), 5))


async def until(ws: ClientConnection, etype: str) -> list[dict[str, Any]]:
    out = []
    while True:
        ev = await recv(ws)
        out.append(ev)
        if ev["type"] == etype:
            return out


def user(text: str, item_id: str | None = None) -> str:
    item: dict[str, Any] = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    if item_id:
        item["id"] = item_id
    return json.dumps({"type": "conversation.item.create", "item": item, "event_id": f"ev_{item_id}"})


def endpoint(srv: RealtimeServer) -> str:
    return f"{srv.url}/realtime?model=gpt-realtime"





def test_latency_delays_acks_and_never_reorders(tmp_path: Path) -> None:
    async def main() -> None:
        opts = ServerOptions(latency=0.05, jitter=0.03, seed=7, record=tmp_path / "t.jsonl")
        async with run_server(opts) as srv, connect(endpoint(srv)) as ws:
            await recv(ws)
            t0 = time.monotonic()
            await ws.send(user("hi", "A"))
            added = await recv(ws)
            delay = time.monotonic() - t0
            assert added["type"] == "conversation.item.added"
            assert 0.015 <= delay < 0.2
            await recv(ws)
            for k in range(30):
                await ws.send(user(f"m{k}", f"I{k}"))
            got = [await recv(ws) for _ in range(60)]
            numbers = [int(e["event_id"].rsplit("_", 1)[1]) for e in got]
            assert numbers == sorted(numbers)
            assert [e["item"]["id"] for e in got[::2]] == [f"I{k}" for k in range(30)]

    run(main)


def test_per_type_latency_override() -> None:
    async def main() -> None:
        opts = ServerOptions(latency=0.0, latency_by_type={"conversation.item.added": 0.12})
        async with run_server(opts) as srv, connect(endpoint(srv)) as ws:
            t0 = time.monotonic()
            await recv(ws)
            assert time.monotonic() - t0 < 0.1
            t0 = time.monotonic()
            await ws.send(user("hi", "A"))
            await recv(ws)
            assert time.monotonic() - t0 >= 0.115
            # conversation.item.done has no delay of its own but cannot overtake the added before it.
            assert (await recv(ws))["type"] == "conversation.item.done"

    run(main)


def virtual_clock() -> tuple[Callable[[], float], Callable[[float], Awaitable[None]]]:
    """A clock and its sleep for the server: sleeping moves the clock at once (latency tests run instantly)."""
    now = [0.0]

    def clock() -> float:
        return now[0]

    async def sleep(d: float) -> None:
        now[0] += d
        await asyncio.sleep(0)

    return clock, sleep


def test_virtual_clock_makes_latency_exact(tmp_path: Path) -> None:
    clock, sleep = virtual_clock()
    async def main() -> None:
        no_limit = EndpointOptions(max_session_seconds=None)  # a virtual hour passes at once
        opts = ServerOptions(latency=0.05, record=tmp_path / "v.jsonl", clock=clock, sleep=sleep, endpoint=no_limit)
        async with run_server(opts) as srv, connect(endpoint(srv)) as ws:
            await recv(ws)
            await ws.send(user("hi", "A"))
            await recv(ws)
            await recv(ws)
        recs = list(TraceReader.open(tmp_path / "v.jsonl"))
        sent = next(r for r in recs if r.dir == "client")
        added = next(r for r in recs if r.type == "conversation.item.added")
        assert added.t - sent.t == pytest.approx(0.05, abs=1e-9)

    run(main)


def test_an_event_sent_after_its_due_time_is_counted_late_and_warned_of() -> None:
    """Serve's own lateness drifted silently under load; a sleep that oversleeps (a busy machine) now
    makes each late event counted, and a warning says the latency is not kept."""
    now = [0.0]
    warnings: list[str] = []

    async def oversleep(d: float) -> None:
        now[0] += d + 0.030  # every wait ends 30 ms late
        await asyncio.sleep(0)

    async def main() -> None:
        no_limit = EndpointOptions(max_session_seconds=None)
        opts = ServerOptions(latency=0.05, clock=lambda: now[0], sleep=oversleep, endpoint=no_limit,
                             log=warnings.append)  # fmt: skip
        async with run_server(opts) as srv, connect(endpoint(srv)) as ws:
            await recv(ws)
            await ws.send(user("hi", "A"))
            await recv(ws)
            await recv(ws)
            lateness = srv.lateness
        assert lateness.count >= 3 and lateness.late >= 2 and lateness.worst == pytest.approx(0.030)
        assert len(warnings) == 1 and "30 ms after it was due" in warnings[0]
        assert "events sent over 10 ms" in lateness.summary()

    run(main)


def test_a_scripted_ack_delay_holds_what_follows_in_order(tmp_path: Path) -> None:
    clock, sleep = virtual_clock()
    script = parse_script('[[turn]]\nwhen = { event = "conversation.item.create:user", connection = 1 }\ndelay = "2s"\n'
                          "times = 1\n")  # fmt: skip
    path = tmp_path / "delay.jsonl"

    async def main() -> None:
        ep = EndpointOptions(max_session_seconds=None)
        opts = ServerOptions(latency=0.05, record=path, clock=clock, sleep=sleep, endpoint=ep, schedule=script)
        async with run_server(opts) as srv, connect(endpoint(srv)) as ws:
            await recv(ws)
            await ws.send(user("slow", "A"))
            await ws.send(user("fast", "B"))
            got = [await recv(ws) for _ in range(4)]
            assert [e["item"]["id"] for e in got] == ["A", "A", "B", "B"]

    run(main)
    recs = list(TraceReader.open(path))
    sent = next(r for r in recs if r.dir == "client")
    note = next(r for r in recs if r.type == "fault.injected")
    acks = [r for r in recs if r.type == "conversation.item.added"]
    assert note.event["action"] == "delay" and note.t - sent.t == pytest.approx(2.0, abs=1e-6)
    assert acks[0].t - sent.t == pytest.approx(2.05, abs=1e-6)  # the hold, then the latency
    assert acks[1].t >= acks[0].t  # B's ack waited behind A's


def test_record_is_a_trace_that_analyze_reads_and_holds_no_secret(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"

    async def main() -> None:
        async with run_server(ServerOptions(record=path)) as srv:
            url = f"{srv.url}/realtime?model=gpt-realtime&api_key=sk-SECRET1"
            async with connect(
                url,
                subprotocols=["realtime", "openai-insecure-api-key.sk-SECRET2"],  # type: ignore[list-item]
                additional_headers={"Authorization": "Bearer sk-SECRET3"},
            ) as ws:
                assert ws.subprotocol == "realtime"
                await recv(ws)
                secret = {"type": "realtime", "client_secret": {"value": "ek_SECRET4abcdefgh", "expires_at": 1}}
                await ws.send(json.dumps({"type": "session.update", "session": secret}))
                await recv(ws)
                await ws.send(user("my key is sk-SECRET5abcdefghijkl", "K"))
                await until(ws, "conversation.item.done")
                await ws.send(user("What's the weather?", "A"))
                await until(ws, "conversation.item.done")
                await ws.send(json.dumps({"type": "response.create"}))
                done = (await until(ws, "response.done"))[-1]
                call = done["response"]["output"][0]
                await ws.send(
                    json.dumps(
                        {
                            "type": "conversation.item.create",
                            "item": {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"},
                        }
                    )
                )
                await until(ws, "conversation.item.done")

    run(main)
    text = path.read_text()
    assert "SECRET" not in text
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0]["rtrace"] == 1
    assert lines[1]["event"] == {
        "type": "connection.opened",
        "path": "/v1/realtime?model=gpt-realtime",
        "route": "/v1/realtime",
        "protocol": "openai",
        "model": "gpt-realtime",
    }
    assert lines[-1]["event"]["type"] == "connection.closed"
    report = analyze_path(path)
    assert report.events == len(lines) - 1 and report.problem_count == 0
    assert not [f for f in report.findings if f.severity == "error"]


@pytest.mark.parametrize("path", ["/v1/realtime", "/v1/realtime/", "/realtime", "/v1", "/v1/", "/", ""])
def test_the_base_and_the_full_urls_are_accepted_with_a_model(path: str) -> None:
    async def main() -> None:
        async with run_server() as srv, connect(f"ws://127.0.0.1:{srv.port}{path}?model=gpt-realtime") as ws:
            assert (await recv(ws))["type"] == "session.created"

    run(main)


@pytest.mark.parametrize(
    ("path", "route", "protocol", "model"),
    [
        ("/openai/realtime?api-version=2024-10-01&deployment=my-rt", "/openai/realtime", "azure-openai", "my-rt"),
        ("/openai/v1/realtime?model=dep-ga", "/openai/v1/realtime", "azure-openai", "dep-ga"),
        ("/openai/deployments/dep%2Dx/realtime?api-version=2025-04-01", "/openai/deployments/{deployment}/realtime",
         "azure-openai", "dep-x"),
        ("/voice-live/realtime?api-version=2026-07-15&model=gpt-4o&x-ms-client-sdk=v", "/voice-live/realtime",
         "voice-live", "gpt-4o"),
        ("/v1/realtime?model=gpt-realtime-mini", "/v1/realtime", "openai", "gpt-realtime-mini"),
        ("/v1", "/v1", "openai", None),
    ],
)  # fmt: skip
def test_vendor_paths_are_served_with_their_model_and_noted(
    path: str, route: str, protocol: str, model: str | None, tmp_path: Path
) -> None:
    trace = tmp_path / "t.jsonl"

    async def main() -> None:
        async with run_server(ServerOptions(record=trace)) as srv, connect(f"ws://127.0.0.1:{srv.port}{path}") as ws:
            created = await recv(ws)
            assert created["session"]["model"] == (model or "gpt-realtime")

    run(main)
    opened = next(r.event for r in TraceReader.open(trace) if r.type == "connection.opened")
    assert opened["route"] == route and opened["protocol"] == protocol and opened.get("model") == model
    assert opened["path"].split("?")[0] == path.split("?")[0]


def test_an_unknown_path_is_refused_naming_the_accepted_ones(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    logged: list[str] = []

    async def main() -> None:
        async with run_server(ServerOptions(record=trace, log=logged.append)) as srv:
            for bad in ("/openai/deployments/a/b/realtime", "/voice-live", "/openai/v2/realtime"):
                with pytest.raises(InvalidStatus) as refused:
                    async with connect(f"ws://127.0.0.1:{srv.port}{bad}"):
                        pass
                assert refused.value.response.status_code == 404
                assert b"/voice-live/realtime?api-version=...&model=..." in refused.value.response.body

    run(main)
    assert len(logged) == 3 and all("/openai/v1/realtime" in line and "/voice-live/realtime" in line for line in logged)
    notes = [r.event["note"] for r in TraceReader.open(trace) if r.type == "note"]
    assert len(notes) == 3 and all("the accepted paths are /v1/realtime" in n for n in notes)


def test_the_ga_schema_judges_only_clients_that_speak_ga() -> None:
    """A beta-shaped `session.update` (no `session.type`, `modalities`) is a schema error from a GA client, as the
    real GA server says; a beta client (`OpenAI-Beta: realtime=v1`), Azure's preview API and Voice Live speak the
    beta shape and get their `session.updated`."""
    beta_session = {"type": "session.update", "session": {"modalities": ["text"], "instructions": "hi"}}

    async def answer(srv: RealtimeServer, path: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
        async with connect(f"ws://127.0.0.1:{srv.port}{path}", additional_headers=headers) as ws:
            await until(ws, "session.created")
            await ws.send(json.dumps(beta_session))
            return await recv(ws)

    async def main() -> None:
        async with run_server(ServerOptions()) as srv:
            ga = await answer(srv, "/v1/realtime?model=gpt-realtime")
            assert ga["type"] == "error" and ga["error"]["param"] == "session.type", ga
            for path, headers in (
                ("/v1/realtime?model=gpt-realtime", {"OpenAI-Beta": "realtime=v1"}),
                ("/openai/realtime?api-version=2024-10-01-preview&deployment=gpt-4o-realtime-preview", None),
                ("/voice-live/realtime?api-version=2025-10-01&model=gpt-realtime", None),
            ):
                assert (await answer(srv, path, headers))["type"] == "session.updated", path

    run(main)


def test_voice_live_text_only_modalities_are_answered_in_text() -> None:
    """Voice Live's session shape (`modalities` on `session.update`, the beta field): `["text"]` gets a text answer,
    no audio; `["text", "audio"]` audio and its transcript, as the real service answers."""

    async def answer(srv: RealtimeServer, modalities: list[str]) -> list[str]:
        path = "/voice-live/realtime?api-version=2025-10-01&model=gpt-realtime"
        async with connect(f"ws://127.0.0.1:{srv.port}{path}") as ws:
            await until(ws, "session.created")
            update = {"modalities": modalities, "turn_detection": None, "instructions": "hi"}
            await ws.send(json.dumps({"type": "session.update", "session": update}))
            await until(ws, "session.updated")
            await ws.send(user("hello", "U"))
            await ws.send(json.dumps({"type": "response.create"}))
            return [e["type"] for e in await until(ws, "response.done")]

    async def main() -> None:
        async with run_server(ServerOptions()) as srv:
            text = await answer(srv, ["text"])
            assert "response.output_text.delta" in text and "response.output_audio.delta" not in text, text
            audio = await answer(srv, ["text", "audio"])
            assert "response.output_audio.delta" in audio and "response.output_audio_transcript.delta" in audio

    run(main)


def test_a_refused_handshake_is_in_the_trace_and_logged_without_the_key(tmp_path: Path) -> None:
    path = tmp_path / "refused.jsonl"
    logged: list[str] = []

    async def main() -> None:
        async with run_server(ServerOptions(record=path, log=logged.append)) as srv:
            assert srv.realtime_url == f"ws://127.0.0.1:{srv.port}/v1/realtime?model=gpt-realtime"
            with pytest.raises(InvalidStatus) as refused:
                async with connect(f"ws://127.0.0.1:{srv.port}/v2/realtime?model=m&api_key=sk-secret123456"):
                    pass
            assert refused.value.response.status_code == 404
            async with connect(srv.realtime_url) as ws:
                await recv(ws)
            # not a websocket upgrade at all
            reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
            writer.write(b"GET /v1/realtime HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (await reader.readline()).startswith(b"HTTP/1.1 426")
            writer.close()
            await writer.wait_closed()

    run(main)
    assert len(logged) == 2 and "sk-secret" not in " ".join(logged)
    assert logged[0].startswith("rtrace serve: refused a handshake: HTTP 404 Not Found for /v2/realtime?model=m")
    assert "HTTP 426" in logged[1]
    text = path.read_text()
    assert "sk-secret" not in text
    recs = list(TraceReader.open(path))
    first = [r.event for r in recs if r.conn == 1]
    assert [e["type"] for e in first] == ["connection.opened", "note", "connection.closed"]
    assert first[1]["note"].startswith("handshake refused: HTTP 404 Not Found for /v2/realtime")
    assert first[2] == {"type": "connection.closed", "by": "server", "status": 404}
    assert [r.type for r in recs if r.conn == 2][:2] == ["connection.opened", "session.created"]
    report = analyze_path(path)
    assert report.findings == [] and report.problems == []


def test_bad_frames_get_errors_and_everyone_keeps_being_served() -> None:
    async def main() -> None:
        async with run_server() as srv, connect(endpoint(srv), max_size=None) as bad, connect(endpoint(srv)) as good:
            await recv(bad)
            await recv(good)
            for frame in ("{oops", b"\x00\x01", json.dumps({"type": "what.ever"}), "x" * (10 * 1024 * 1024)):
                await bad.send(frame)
                ev = await recv(bad)
                assert ev["type"] == "error" and ev["error"]["type"] == "invalid_request_error"
            await bad.send(user("still here", "B"))
            assert (await recv(bad))["type"] == "conversation.item.added"
            await good.send(user("hello", "G"))
            ack = await recv(good)
            assert ack["previous_item_id"] is None  # its own, empty conversation

    run(main, timeout=20)


def test_many_clients_each_have_their_own_conversation() -> None:
    async def client(srv: RealtimeServer, k: int) -> None:
        async with connect(endpoint(srv)) as ws:
            await recv(ws)
            for j in range(3):
                await ws.send(user(f"c{k} m{j}", f"c{k}_{j}"))
                ack = await recv(ws)
                assert ack["previous_item_id"] == (None if j == 0 else f"c{k}_{j - 1}")
                await recv(ws)

    async def main() -> None:
        async with run_server(ServerOptions(latency=0.01)) as srv:
            await asyncio.gather(*(client(srv, k) for k in range(10)))

    run(main)


def test_client_leaving_mid_response_leaves_no_task() -> None:
    async def main() -> None:
        async with run_server(ServerOptions(latency=0.01)) as srv:
            baseline = len(asyncio.all_tasks())
            async with connect(endpoint(srv)) as ws:
                await recv(ws)
                await ws.send(user("a long story", "S"))
                await ws.send(json.dumps({"type": "response.create"}))
                await until(ws, "response.content_part.added")
            for _ in range(100):
                if not srv.sessions and len(asyncio.all_tasks()) <= baseline:
                    break
                await asyncio.sleep(0.01)
            assert not srv.sessions
            assert len(asyncio.all_tasks()) <= baseline

    run(main)


@pytest.mark.parametrize(("close_code", "seen"), [(None, 1006), (1011, 1011), (1001, 1001), (1005, 1005)])
def test_fault_drop_on_closes_before_answering(tmp_path: Path, close_code: int | None, seen: int) -> None:
    path = tmp_path / "drop.jsonl"

    async def main() -> None:
        faults = Faults(drop_on=["conversation.item.create:function_call_output"], close_code=close_code)
        opts = ServerOptions(record=path, latency=0.02, schedule=Schedule.of(faults))
        async with run_server(opts) as srv, connect(endpoint(srv)) as ws:
            await recv(ws)
            await ws.send(user("weather please", "A"))
            await ws.send(json.dumps({"type": "response.create"}))
            done = (await until(ws, "response.done"))[-1]
            call_id = done["response"]["output"][0]["call_id"]
            item = {"type": "function_call_output", "call_id": call_id, "output": "x"}
            await ws.send(json.dumps({"type": "conversation.item.create", "item": item}))
            with pytest.raises(ConnectionClosed):
                while True:  # the rate limits after the response.done, then the drop
                    assert (await recv(ws))["type"] == "rate_limits.updated"
            assert ws.close_code == seen
            assert (ws.protocol.close_rcvd is None) == (seen == 1006)  # 1006: no close frame came

    run(main)
    recs = list(TraceReader.open(path))
    faults = [r for r in recs if r.type == "fault.injected"]
    assert len(faults) == 1 and faults[0].event["fault"] == "drop-on"
    closed = recs[-1]
    assert closed.type == "connection.closed" and closed.event["by"] == "server"
    assert closed.event["code"] == (close_code or 1006)
    # Nothing answered the output's create.
    assert recs[-3].dir == "client" and recs[-2] is faults[0]


def test_a_drop_is_in_the_trace_before_the_next_handshake_and_the_client_reconnects(tmp_path: Path) -> None:
    path = tmp_path / "reconnect.jsonl"

    async def main() -> None:
        faults = Faults(drop_after=["response.done:function_call"])
        opts = ServerOptions(record=path, latency=0.01, schedule=Schedule.of(faults))
        async with run_server(opts) as srv:
            async with connect(endpoint(srv)) as ws:
                await recv(ws)
                await ws.send(user("weather please", "A"))
                await ws.send(json.dumps({"type": "response.create"}))
                got = await until(ws, "response.done")
                assert got[-1]["response"]["output"][0]["type"] == "function_call"
                with pytest.raises(ConnectionClosed):
                    await recv(ws)
                assert ws.close_code == 1006
            async with connect(endpoint(srv)) as ws:  # at once, as agents-js does
                assert (await recv(ws))["type"] == "session.created"
                await ws.send(user("weather please", "B"))
                await ws.send(json.dumps({"type": "response.create"}))
                done = (await until(ws, "response.done"))[-1]  # the fault fired once: no drop this time
                assert done["response"]["output"][0]["type"] == "function_call"

    run(main)
    recs = list(TraceReader.open(path))
    kinds = [(r.conn, r.type) for r in recs if r.dir == "meta"]
    assert kinds[:4] == [
        (1, "connection.opened"), (1, "fault.injected"), (1, "connection.closed"), (2, "connection.opened"),
    ]  # fmt: skip
    conn1 = [r for r in recs if r.conn == 1]
    assert [r.type for r in conn1[-3:]] == ["response.done", "fault.injected", "connection.closed"]
    assert conn1[-2].event == {
        "type": "fault.injected", "fault": "drop-after", "spec": "response.done:function_call",
        "server_event_type": "response.done",
    }  # fmt: skip
    assert conn1[-1].event == {"type": "connection.closed", "by": "server", "code": 1006, "reason": "fault: drop-after"}


def test_fault_notes_are_written_where_the_faults_act_not_when_decided(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"

    async def main() -> None:
        opts = ServerOptions(record=path, latency=0.05, schedule=Schedule.of(Faults(close_after=3, fail_response={1})))
        async with run_server(opts) as srv, connect(endpoint(srv)) as ws:
            await recv(ws)
            await ws.send(json.dumps({"type": "response.create"}))
            with pytest.raises(ConnectionClosed):
                while True:
                    await recv(ws)
            assert ws.close_code == 1000

    run(main)
    recs = list(TraceReader.open(path))
    seq = [r.type for r in recs]
    assert seq == [
        "connection.opened", "session.created", "response.create", "response.created",
        "fault.injected", "response.done", "fault.injected", "connection.closed",
    ]  # fmt: skip
    assert [r.event["fault"] for r in recs if r.type == "fault.injected"] == ["fail-response", "close-after"]
    assert recs[4].t - recs[2].t >= 0.04  # noted when the failed response.done went out, not when decided


def test_fault_close_after_expire_and_failed_response() -> None:
    async def main() -> None:
        options = ServerOptions(schedule=Schedule.of(Faults(close_after=2)))
        async with run_server(options) as srv, connect(endpoint(srv)) as ws:
            await recv(ws)
            await ws.send(user("a", "A"))
            assert (await recv(ws))["type"] == "conversation.item.added"
            with pytest.raises(ConnectionClosed):
                await recv(ws)
        options = ServerOptions(schedule=Schedule.of(Faults(expire_after=0.1)))
        async with run_server(options) as srv, connect(endpoint(srv)) as ws:
            await recv(ws)
            err = await recv(ws)
            assert err["error"]["code"] == "session_expired"
            assert err["error"]["param"] is None and err["error"]["event_id"] is None, err
            with pytest.raises(ConnectionClosed):
                await recv(ws)
            # the real server's close: 1001 with the error's message as its reason (not a reason of its own)
            assert (ws.close_code, ws.close_reason) == (1001, err["error"]["message"]), ws.close_reason
        options = ServerOptions(schedule=Schedule.of(Faults(fail_response={1})))
        async with run_server(options) as srv, connect(endpoint(srv)) as ws:
            await recv(ws)
            await ws.send(json.dumps({"type": "response.create"}))
            out = await until(ws, "response.done")
            assert [e["type"] for e in out] == ["response.created", "response.done"]
            assert out[-1]["response"]["status"] == "failed"

    run(main)


def test_from_trace_replays_the_recorded_responses() -> None:
    async def main() -> None:
        opts = ServerOptions(from_trace=REAL / "tool-output-race.livekit-1.8.9.jsonl")
        async with run_server(opts) as srv, connect(endpoint(srv)) as ws:
            await recv(ws)
            await ws.send(json.dumps({"type": "response.create"}))
            done = (await until(ws, "response.done"))[-1]
            assert done["response"]["output"][0]["name"] == "get_weather"
            t0 = time.monotonic()
            await ws.send(json.dumps({"type": "response.create"}))
            done = (await until(ws, "response.done"))[-1]
            assert time.monotonic() - t0 > 0.4  # the story's recorded pacing
            assert done["response"]["output"][0]["content"][0]["text"].startswith("Once upon a time")

    run(main)


def test_stop_while_clients_are_connected_completes_the_trace(tmp_path: Path) -> None:
    path = tmp_path / "stop.jsonl"

    async def main() -> None:
        async with run_server(ServerOptions(record=path)) as srv:
            ws = await connect(endpoint(srv))
            await recv(ws)
            await ws.send(user("a long story", "S"))
            await ws.send(json.dumps({"type": "response.create"}))
            await until(ws, "response.content_part.added")
        await ws.close()

    run(main)
    recs = list(TraceReader.open(path))
    assert recs[-1].type == "connection.closed"


def test_rtrace_serve_prints_the_url_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    path = tmp_path / "cli.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rtrace.cli", "serve", "--latency", "10ms", "--record", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("rtrace serve: listening on ws://127.0.0.1:") and first.rstrip().endswith("/v1")
        base = proc.stdout.readline().strip()
        assert base.startswith("OPENAI_BASE_URL=http://127.0.0.1:") and base.endswith("/v1")
        full = proc.stdout.readline().strip()
        url = first.split()[-1]
        assert full == f"websocket URL: {url}/realtime?model=gpt-realtime"

        async def main() -> None:
            ws = await connect(f"{url}/realtime?model=gpt-realtime")
            await recv(ws)
            await ws.send(user("a long story", "S"))
            await ws.send(json.dumps({"type": "response.create"}))
            await until(ws, "response.content_part.added")
            proc.send_signal(signal.SIGTERM)
            with pytest.raises(ConnectionClosed):
                await until(ws, "response.done")

        run(main)
        assert proc.wait(10) == 0
    finally:
        proc.kill()
        proc.wait()
    recs = list(TraceReader.open(path))
    assert recs[0].type == "connection.opened" and recs[-1].type == "connection.closed"
    assert recs[-1].event.get("code") == 1001


def test_serve_says_the_latency_jitter_and_faults_in_force_in_its_start_lines() -> None:
    """`--latency 50` was 50 s with no word of it; the start lines now say what the server does, in words."""
    import io

    import rtrace.net.link.server as server_mod
    from rtrace.cli.mains import serve_main
    from rtrace.net.link.server import describe, options_from_cli

    opts = options_from_cli(
        latency=["50ms", "conversation.item.added=120ms"], jitter="5ms", close_code=1011,
        drop_on=["conversation.item.create:function_call_output"], expire_after="10s", fail_response=[2],
    )  # fmt: skip
    assert describe(opts) == [
        "latency 50ms on every server event (conversation.item.added 120ms), jitter +/-5ms (order kept)",
        "faults (once each): drop the socket (close 1011) when the client sends "
        "conversation.item.create:function_call_output; fail response 2 of a connection; session_expired and close "
        "1001 10s after a connection opens",
    ]
    assert describe(options_from_cli()) == ["no latency, no jitter", "no fault"]
    every = options_from_cli(fault_times=0, drop_on=["response.create"])  # 0 is every time (it was never, from Python)
    assert every.schedule.turns[0].times is None
    assert describe(options_from_cli(drop_after=["response.done"], fault_times=None))[1] == (
        "faults (every time each): drop the socket (no close frame, 1006) right after sending response.done"
    )

    async def announce_only(options: Any, announce: Any) -> None:
        announce(type("S", (), {"url": "ws://h/v1", "http_url": "http://h/v1", "realtime_url": "ws://h/v1/r"})())

    out, temporary = io.StringIO(), io.StringIO()
    real = server_mod.serve_forever
    server_mod.serve_forever = announce_only  # type: ignore[assignment]
    try:
        serve_main(opts, out=out, err=io.StringIO())
        opts.record = "/tmp/rtrace-own.jsonl"  # a trace of serve's own (live findings), not the user's
        serve_main(opts, out=temporary, err=io.StringIO(), temporary=True)
    finally:
        server_mod.serve_forever = real  # type: ignore[assignment]
    lines = out.getvalue().splitlines()
    assert lines[4:6] == [f"  {line}" for line in describe(opts)]
    assert "recording to" not in temporary.getvalue() and "  no fault" not in temporary.getvalue()


def test_options_from_cli() -> None:
    from rtrace.net.link.server import options_from_cli

    o = options_from_cli(
        latency=["50ms", "conversation.item.added=120ms"],
        jitter="5ms",
        drop_on=["conversation.item.create:function_call_output"],
        fail_response=[1, 3],
        error_on=["response.create,conversation.item.delete"],
        expire_after="1m",
        duplicate_id="reject",
        fault_times=None,
    )
    assert o.latency == pytest.approx(0.05) and o.latency_of("conversation.item.added") == pytest.approx(0.12)
    assert o.jitter == pytest.approx(0.005)
    assert [(t.fault, t.spec, t.times) for t in o.schedule.turns] == [
        ("drop-on", "conversation.item.create:function_call_output", None), ("fail-response", "1", None),
        ("fail-response", "3", None), ("error-on", "response.create", None),
        ("error-on", "conversation.item.delete", None), ("expire-after", "60.0", None),
    ]  # fmt: skip
    assert o.endpoint.duplicate_id == "reject"
    o = options_from_cli(drop_after=["response.done:function_call"], close_code=1011, tool='lookup={"id": 4}', seed=3)
    [drop] = o.schedule.turns
    assert (drop.fault, drop.sent, drop.close) == ("drop-after", "response.done:function_call", 1011)
    assert (o.endpoint.tool, o.endpoint.tool_arguments, o.endpoint.seed) == ("lookup", '{"id": 4}', 3)
    assert (options_from_cli(tool="ping").endpoint.tool_arguments, options_from_cli().endpoint.tool) == (None, None)
    o = options_from_cli(audio_tone=440, audio_pace=1, transcript=["hi", "bye"], vad_threshold=0.1)
    assert (o.endpoint.audio_tone, o.endpoint.audio_pace) == (440, 1)
    assert (o.endpoint.transcript, o.endpoint.vad_threshold) == (["hi", "bye"], 0.1)
    for bad in (
        {"duplicate_id": "x"}, {"latency": ["fast"]}, {"from_trace": "/nonexistent.jsonl"}, {"close_code": 1015},
        {"close_code": 2000}, {"tool": "=1"}, {"tool": "x={"}, {"tool": "x=[1]"}, {"audio_tone": -1.0},
        {"audio_pace": float("nan")}, {"vad_threshold": 0.0},
    ):  # fmt: skip
        with pytest.raises(ValueError):
            options_from_cli(**bad)  # type: ignore[arg-type]


def test_a_killed_recording_server_leaves_every_frame_its_clients_saw_in_the_trace(tmp_path: Path) -> None:
    """`--record` is buffered (for speed), but each event reaches the kernel before its frame is sent: kill -9 the
    server while three clients push creates, and every server event a client received is a line of the trace, with
    the client create it acknowledged before it."""
    import signal
    import subprocess
    import sys

    path = tmp_path / "killed.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rtrace.cli", "serve", "--latency", "5ms", "--record", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    seen: list[dict[str, Any]] = []
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split()[-1]

        async def client(k: int) -> None:
            ws = await connect(f"{url}/realtime?model=gpt-realtime")
            seen.append(await recv(ws))
            n = 0
            try:
                while True:
                    await ws.send(user(f"hello {n}", f"item_{k}_{n}"))
                    n += 1
                    seen.append(await recv(ws))
            except ConnectionClosed:
                return

        async def main() -> None:
            tasks = [asyncio.create_task(client(k)) for k in range(3)]
            await asyncio.sleep(0.5)
            proc.send_signal(signal.SIGKILL)
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 10)

        run(main, timeout=20)
    finally:
        proc.kill()
        proc.wait()
    recorded = [rec for rec in TraceReader.open(path) if rec.dir == "server"]
    ids = {rec.event.get("event_id") for rec in recorded}
    assert len(seen) > 30 and all(ev.get("event_id") in ids for ev in seen)
    creates = {rec.event["item"]["id"] for rec in TraceReader.open(path) if rec.type == "conversation.item.create"}
    acked = {ev["item"]["id"] for ev in seen if ev.get("type") == "conversation.item.added"}
    assert acked <= creates


def test_from_trace_reads_a_compressed_trace(tmp_path: Path) -> None:
    import lzma

    packed = tmp_path / "recorded.jsonl.xz"
    packed.write_bytes(lzma.compress((REAL / "tool-output-race.livekit-1.8.9.jsonl").read_bytes()))

    async def main() -> None:
        async with run_server(ServerOptions(from_trace=packed)) as srv, connect(endpoint(srv)) as ws:
            await recv(ws)
            await ws.send(json.dumps({"type": "response.create"}))
            done = (await until(ws, "response.done"))[-1]
            assert done["response"]["output"][0]["name"] == "get_weather"

    run(main)


def test_a_schema_error_goes_ahead_of_the_acks_still_waiting_out_their_latency() -> None:
    """The realapi recording `history-seed-rejected-item`: three creates sent together, the second rejected by the
    schema; the real server's error comes before the first create's acks. With latency, serve's does too; the
    other answers keep their order."""

    async def main() -> None:
        opts = ServerOptions(latency=0.2)
        async with run_server(opts) as srv, connect(endpoint(srv)) as ws:
            await recv(ws)
            bad = {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "x"}]}
            await ws.send(user("one", "A"))
            await ws.send(json.dumps({"type": "conversation.item.create", "item": bad}))
            await ws.send(user("three", "C"))
            got = [await recv(ws) for _ in range(5)]
            assert [e["type"] for e in got] == ["error", *["conversation.item.added", "conversation.item.done"] * 2]
            assert got[0]["error"]["param"] == "item.content[0].type"
            assert [e["item"]["id"] for e in got[1:]] == ["A", "A", "C", "C"]

    run(main)


def test_the_trace_header_holds_the_schedule_as_the_script_that_runs_it_again(tmp_path: Path) -> None:
    schedule = Schedule.of(Faults(drop_after=["response.done"], close_code=1011)) + parse_script(
        '[[turn]]\nwhen = { user = "x" }\ntext = "y"\n', "s.toml"
    )
    plain, scheduled = tmp_path / "plain.jsonl", tmp_path / "scheduled.jsonl"

    async def main() -> None:
        for path, given in ((plain, Schedule()), (scheduled, schedule)):
            async with run_server(ServerOptions(record=path, schedule=given)) as srv, connect(endpoint(srv)) as ws:
                await recv(ws)

    asyncio.run(main())
    assert "schedule" not in json.loads(plain.read_text().splitlines()[0])
    header = json.loads(scheduled.read_text().splitlines()[0])
    assert header["schedule"] == schedule.to_toml()
    assert parse_script(header["schedule"]).to_toml() == schedule.to_toml()


def test_jitter_by_type_varies_only_that_type_and_never_reorders(tmp_path: Path) -> None:
    from rtrace.net.link.server import describe, options_from_cli

    path = tmp_path / "j.jsonl"
    clock, sleep = virtual_clock()
    cli = options_from_cli(jitter=["conversation.item.added=30ms"], seed=3)
    assert (cli.jitter, cli.jitter_by_type) == (0.0, {"conversation.item.added": 0.03})
    assert describe(cli)[0] == "no latency, jitter (conversation.item.added +/-30ms) (order kept)"
    with pytest.raises(ValueError, match=r"--jitter response\.create: response\.create is a client event"):
        options_from_cli(jitter=["response.create=5ms"])

    async def main() -> None:
        opts = ServerOptions(jitter_by_type=cli.jitter_by_type, seed=3, record=path, clock=clock, sleep=sleep,
                             endpoint=EndpointOptions(max_session_seconds=None))  # fmt: skip
        async with run_server(opts) as srv, connect(endpoint(srv)) as ws:
            await recv(ws)
            for k in range(20):
                await ws.send(user(f"m{k}", f"I{k}"))
                await recv(ws), await recv(ws)

    run(main)
    recs = [r for r in TraceReader.open(path) if r.dir in ("client", "server")]
    late: dict[str, list[float]] = {}
    sent_at = 0.0
    for r in recs:
        if r.dir == "client":
            sent_at = r.t
        else:
            late.setdefault(r.type, []).append(round(r.t - sent_at, 6))
    added = late["conversation.item.added"]
    assert all(0 <= d <= 0.03 for d in added) and len(set(added)) > 5
    # the done has no jitter of its own: it goes right behind its added, never before it
    assert [r.type for r in recs if r.dir == "server"][2::2] == ["conversation.item.done"] * 20
    assert late["session.created"] == [0.0]
    assert json.loads(path.read_text().splitlines()[0])["jitter_by_type"] == {"conversation.item.added": 0.03}


def test_the_servers_own_faults_go_out_with_the_real_shapes_and_their_notes_in_the_trace(tmp_path: Path) -> None:
    path = tmp_path / "own.jsonl"
    faults = Faults(cancel_response={1}, rate_limit_response={2}, barge_in={3}, fail_transcription={1})
    voice = {"type": "realtime", "output_modalities": ["audio"],
             "audio": {"input": {"transcription": {"model": "whisper-1"}}}}  # fmt: skip

    async def main() -> None:
        opts = ServerOptions(record=path, schedule=Schedule.of(faults))
        async with run_server(opts) as srv, connect(endpoint(srv)) as ws:
            await recv(ws)
            await ws.send(json.dumps({"type": "session.update", "session": voice}))
            await until(ws, "session.updated")
            await ws.send(json.dumps({"type": "response.create"}))
            cancelled = (await until(ws, "response.done"))[-1]["response"]
            assert (cancelled["status"], cancelled["status_details"]["reason"], cancelled["output"]) == (
                "cancelled", "turn_detected", []
            )  # fmt: skip
            await ws.send(json.dumps({"type": "response.create"}))
            limited = await until(ws, "response.done")
            assert [e["type"] for e in limited][-3:] == ["response.created", "rate_limits.updated", "response.done"]
            assert limited[-2]["rate_limits"][0]["remaining"] == 0
            assert limited[-1]["response"]["status_details"]["error"]["code"] == "rate_limit_exceeded"
            await ws.send(user("hello there, how are you", "U1"))
            await ws.send(json.dumps({"type": "response.create"}))
            barged = await until(ws, "response.done")
            assert "input_audio_buffer.speech_started" in [e["type"] for e in barged]
            assert barged[-1]["response"]["status_details"] == {"type": "cancelled", "reason": "turn_detected"}
            after = await until(ws, "response.done")  # the user's turn: committed, failed transcription, answered
            kinds = [e["type"] for e in after]
            assert kinds[:2] == ["rate_limits.updated", "input_audio_buffer.speech_stopped"]
            failed = next(e for e in after if e["type"].startswith("conversation.item.input_audio_transcription"))
            assert failed["type"] == "conversation.item.input_audio_transcription.failed"
            assert failed["error"]["type"] == "server_error" and failed["item_id"] == after[1]["item_id"]
            assert after[-1]["response"]["status"] == "completed"

    run(main)
    recs = list(TraceReader.open(path))
    notes = [(r.event["fault"], i) for i, r in enumerate(recs) if r.type == "fault.injected"]
    assert [f for f, _ in notes] == ["cancel-response", "rate-limit-response", "barge-in", "fail-transcription"]
    after_note = [recs[i + 1].type for _, i in notes]  # each note right where its fault acts
    assert after_note == ["response.done", "rate_limits.updated", "input_audio_buffer.speech_started",
                          "conversation.item.input_audio_transcription.failed"]  # fmt: skip
    header = json.loads(path.read_text().splitlines()[0])
    assert parse_script(header["schedule"]).describe() == Schedule.of(faults).describe()


async def ping_flood(port: int, path: str = "/v1/realtime?model=gpt-realtime", seconds: float = 10.0) -> float:
    """A client that floods pings and never reads (its receive buffer kept small): seconds until the server drops
    it (or `seconds`)."""
    import base64
    import os
    import socket

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())  # fmt: skip
    await reader.readuntil(b"\r\n\r\n")
    mask = b"\x00\x00\x00\x00"  # masked with zeros: the payload as is
    ping = bytes([0x89, 0x80 | 125]) + mask + b"p" * 125
    start = time.monotonic()
    try:
        while time.monotonic() - start < seconds:
            writer.write(ping * 512)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()
    return time.monotonic() - start


def test_a_client_flooding_pings_and_reading_nothing_is_closed_at_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its pongs pile up for it: past `common.MAX_BACKLOG` bytes held the server closes it (1008, dropped when the
    close cannot go out), says so in the trace, and stops within a second after."""
    from rtrace.net.link import common

    monkeypatch.setattr(common, "MAX_BACKLOG", 1 << 20)
    trace = tmp_path / "t.jsonl"

    async def go() -> tuple[float, float, int]:
        async with run_server(ServerOptions(record=trace)) as srv:
            took = await ping_flood(srv.port)
            held = max((s.ws.transport.get_write_buffer_size() for s in srv.sessions), default=0)
            start = time.monotonic()
        return took, time.monotonic() - start, held

    took, stopping, held = asyncio.run(go())
    assert took < 8 and stopping < 1.0 and held <= 2 << 20
    notes = [json.loads(line)["event"] for line in trace.read_text().splitlines()[1:]]
    assert any("closed 1008: the client read none of the" in n.get("note", "") for n in notes)


def test_stop_ends_within_a_second_whatever_a_client_does(tmp_path: Path) -> None:
    async def go() -> float:
        async with run_server(ServerOptions(record=tmp_path / "t.jsonl")) as srv:
            flood = asyncio.ensure_future(ping_flood(srv.port, seconds=30))
            await asyncio.sleep(0.5)
            start = time.monotonic()
        stopped = time.monotonic() - start
        flood.cancel()
        await asyncio.gather(flood, return_exceptions=True)
        return stopped

    assert asyncio.run(go()) < 1.0


def test_serve_record_on_a_full_disk_says_where_its_trace_stopped_and_keeps_serving(
    capfd: pytest.CaptureFixture[str],
) -> None:
    async def session(url: str) -> str:
        async with connect(f"{url}/realtime?model=gpt-realtime") as ws:
            return str(json.loads(await ws.recv())["type"])

    async def go() -> list[str]:
        async with run_server(ServerOptions(record="/dev/full")) as srv:
            return [await session(srv.url) for _ in range(4)]

    assert asyncio.run(go()) == ["session.created"] * 4
    err = capfd.readouterr().err
    assert err.count("cannot write the trace /dev/full any more (No space left on device)") == 1, err


def test_a_stalled_audio_stream_stops_after_its_first_chunk_on_the_wire_and_is_noted(tmp_path: Path) -> None:
    """`stall_audio` through `serve`'s socket: the first audio delta at once, the next ones the stall later (the
    flag `--stall-audio N` is the same action at 3s; a script turn makes it short here), the note in the trace."""
    path = tmp_path / "stall.jsonl"
    stall = 0.4
    schedule = parse_script(f'[[turn]]\nwhen = {{ response = 1 }}\nstall_audio = "{stall}s"\n')
    arrived: list[float] = []

    async def main() -> None:
        async with run_server(ServerOptions(record=path, schedule=schedule)) as srv, connect(endpoint(srv)) as ws:
            await recv(ws)
            await ws.send(json.dumps({"type": "session.update",
                                      "session": {"type": "realtime", "output_modalities": ["audio"]}}))  # fmt: skip
            await until(ws, "session.updated")
            await ws.send(user("hello there", "U1"))
            await ws.send(json.dumps({"type": "response.create"}))
            start = time.monotonic()
            while (event := await recv(ws))["type"] != "response.done":
                if event["type"] == "response.output_audio.delta":
                    arrived.append(time.monotonic() - start)

    run(main)
    assert len(arrived) > 2 and arrived[1] - arrived[0] >= stall * 0.9 and arrived[-1] - arrived[1] < stall / 2
    notes = [r.event for r in TraceReader.open(path) if r.type == "fault.injected"]
    assert [(n["action"], n["spec"]) for n in notes] == [("stall_audio", "turn 1")]
