"""Hostile network input and faults, on loopback: the fake server (`rtrace.net.link.server`), the recording
proxy (`rtrace.net.link.proxy`) and replay (`rtrace.net.replay.runner`) fed bad frames, floods, vanishing and stalling
peers, refused and dropped upstreams, signals and a full disk. Each test checks that nothing is left behind: no
asyncio task once the server context has exited, no file descriptor more than before the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed, InvalidStatus

from rtrace.core.loader import TraceReader
from rtrace.core.writer import TraceWriter
from rtrace.net.faults.flags import Faults
from rtrace.net.faults.script import Schedule
from rtrace.net.link.common import trace_write_failed
from rtrace.net.link.proxy import RecordingProxy, RecordOptions, run_proxy
from rtrace.net.link.server import ServerOptions, run_server

RTRACE = [sys.executable, "-m", "rtrace.cli"]
KEY = "sk-proj-HARDENINGfakeKEY0123456789abcdefghij"
EK = "ek_68b1a0c9d8e7f6a5b4c3d2e1f0a9b8c7"
TEN_MB = 10 * 1024 * 1024

#: Frames a hostile client sends, each one of which a real API answers with an `error` event.
HOSTILE_FRAMES: dict[str, str | bytes] = {
    "binary": b"\x00\x01\x02binary\xff",
    "binary-json": b'{"type":"session.update","session":{}}',
    "not-json": "this is not json",
    "truncated-json": '{"type":"conversation.item.create","item":{',
    "json-array": "[1, 2, 3]",
    "json-string": '"session.update"',
    "no-type": '{"event_id":"x"}',
    "type-not-string": '{"type":5}',
    "deep-nesting": "[" * 100_000 + "]" * 100_000,
    "nul-bytes": '{"type":"\u0000\u0000"}',
    "lone-surrogate": '{"type":"conversation.item.create","item":{"id":"\\ud800"}}',
    "unknown-type": '{"type":"no.such.event"}',
    "oversized-10mb": '{"type":"conversation.item.create","item":{"type":"message","role":"user",'
    '"content":[{"type":"input_text","text":"' + "A" * TEN_MB + '"}]}}',
}


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture(autouse=True)
def no_fd_leak() -> Any:
    gc.collect()
    before = fd_count()
    yield
    for _ in range(50):
        gc.collect()
        if fd_count() <= before:
            break
        time.sleep(0.05)
    assert fd_count() <= before, f"file descriptors leaked: {before} before, {fd_count()} after"


def run(body: Callable[[], Awaitable[None]], timeout: float = 30.0) -> None:
    """Run `body` bounded in time; afterwards no task of it may be left running."""

    async def main() -> None:
        async with asyncio.timeout(timeout):
            await body()
        me = asyncio.current_task()
        await asyncio.sleep(0)
        left = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
        assert not left, f"tasks left behind: {left}"

    asyncio.run(main())


def _url(base: str, query: str = "model=gpt-realtime") -> str:
    return f"{base}/realtime?{query}"


async def until(ws: ClientConnection, etype: str, timeout: float = 10.0) -> dict[str, Any]:
    async with asyncio.timeout(timeout):
        while True:
            event = orjson.loads(await ws.recv())
            if event.get("type") == etype:
                return event


async def still_serving(ws: ClientConnection, item_id: str) -> None:
    """The connection still answers like the API: a create is acknowledged."""
    await ws.send(
        orjson.dumps(
            {
                "type": "conversation.item.create",
                "event_id": f"evt_{item_id}",
                "item": {
                    "id": item_id,
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "hi"}],
                },
            }
        ).decode()
    )
    while True:
        event = await until(ws, "conversation.item.added")
        if event["item"]["id"] == item_id:
            return


async def send_hostile_frames(ws: ClientConnection) -> dict[str, str]:
    """Send every hostile frame, each followed by its answer; returns frame name -> error code."""
    codes = {}
    for name, frame in HOSTILE_FRAMES.items():
        await ws.send(frame)
        if name == "unknown-type":
            event = await until(ws, "error")
        else:
            event = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
            assert event["type"] == "error", (name, event)
        codes[name] = event["error"].get("code") or event["error"].get("type")
    return codes


def trace_ok(path: Path, max_problems: int = 0) -> list[Any]:
    with TraceReader.open(path) as reader:
        records = list(reader)
    # Hostile clients send those; the recorder writes what crossed the wire and the loader warns.
    bad = [str(p) for p in reader.problems if "unknown event type" not in p.message and "no `type`" not in p.message]
    assert len(bad) <= max_problems, bad
    return records


# -- the fake server ----------------------------------------------------------------------------------------------


def test_server_answers_hostile_frames_with_errors_and_keeps_serving(tmp_path: Path) -> None:
    trace = tmp_path / "srv.jsonl"

    async def body() -> None:
        async with run_server(ServerOptions(record=trace)) as srv:
            async with connect(_url(srv.url), max_size=None) as bad, connect(_url(srv.url)) as good:
                await until(bad, "session.created")
                await until(good, "session.created")
                hostile = asyncio.create_task(send_hostile_frames(bad))
                for k in range(20):  # the other client is served meanwhile
                    await still_serving(good, f"good_{k}")
                codes = await hostile
                assert set(codes) == set(HOSTILE_FRAMES)
                await still_serving(bad, "after_all")

    run(body)
    records = trace_ok(trace)
    assert sum(1 for r in records if r.dir == "server" and r.type == "error") >= len(HOSTILE_FRAMES)


#: Valid JSON (orjson reads 1024 levels) that `orjson.dumps` cannot write back (255 levels).
DEEP_VALID = '{"type":"conversation.item.create","item":' + "[" * 300 + "]" * 300 + "}"


def test_server_deep_but_valid_json_frame(tmp_path: Path) -> None:
    async def body() -> None:
        async with run_server(ServerOptions(record=tmp_path / "srv.jsonl")) as srv, connect(_url(srv.url)) as ws:
            await until(ws, "session.created")
            await ws.send(DEEP_VALID)
            await until(ws, "error")
            await still_serving(ws, "after_deep")

    run(body)


def test_proxy_deep_but_valid_json_frame(tmp_path: Path) -> None:
    trace = tmp_path / "rec.jsonl"

    async def body() -> None:
        async with (
            run_server(ServerOptions()) as srv,
            run_proxy(RecordOptions(upstream=srv.url, output=trace)) as proxy,
            connect(_url(proxy.url)) as ws,
        ):
            await until(ws, "session.created")
            await ws.send(DEEP_VALID)
            await until(ws, "error")
            await still_serving(ws, "after_deep")

    run(body)
    assert any("nested too deeply" in str(r.event) for r in trace_ok(trace))


def test_server_flood_is_bounded_and_others_are_served() -> None:
    async def body() -> None:
        async with run_server(ServerOptions()) as srv:
            async with connect(_url(srv.url)) as flood, connect(_url(srv.url)) as other:
                await until(flood, "session.created")
                await until(other, "session.created")
                append = orjson.dumps({"type": "input_audio_buffer.append", "audio": "AAAA" * 256}).decode()
                started = time.monotonic()

                async def pour() -> None:
                    for _ in range(20_000):
                        await flood.send(append)

                pouring = asyncio.create_task(pour())
                await still_serving(other, "other_1")
                await pouring
                await still_serving(flood, "after_flood")
                assert time.monotonic() - started < 25

    run(body, timeout=40)


def test_server_client_vanishes_mid_response() -> None:
    async def body() -> None:
        async with run_server(ServerOptions(latency=0.05)) as srv:
            for k in range(5):
                ws = await connect(_url(srv.url))
                await until(ws, "session.created")
                await ws.send('{"type":"response.create"}')
                if k % 2:
                    await until(ws, "response.created")
                ws.transport.abort()  # gone, no close frame
                await ws.wait_closed()
            async with connect(_url(srv.url)) as other:
                await until(other, "session.created")
                await still_serving(other, "still_here")
            for _ in range(100):
                if srv.connections == 0:
                    break
                await asyncio.sleep(0.05)
            assert srv.connections == 0

    run(body)


async def _slowloris(port: int, n: int) -> list[asyncio.StreamWriter]:
    writers = []
    for _ in range(n):
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /v1/realtime?model=m HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n")
        await writer.drain()
        writers.append(writer)
    return writers


def test_server_slowloris_handshakes_do_not_block_others() -> None:
    async def body() -> None:
        async with run_server(ServerOptions()) as srv:
            stalled = await _slowloris(srv.port, 20)
            async with connect(_url(srv.url)) as ws:
                await until(ws, "session.created")
                await still_serving(ws, "despite_slowloris")
            # Stop with the stalled handshakes still open: must not hang.
            closing = time.monotonic()
        assert time.monotonic() - closing < 15
        for w in stalled:
            w.close()
            with contextlib.suppress(Exception):
                await w.wait_closed()

    run(body, timeout=40)


# -- the recording proxy ------------------------------------------------------------------------------------------


def test_proxy_passes_hostile_frames_and_keeps_serving(tmp_path: Path) -> None:
    trace = tmp_path / "rec.jsonl"

    async def body() -> None:
        async with (
            run_server(ServerOptions()) as srv,
            run_proxy(RecordOptions(upstream=srv.url, output=trace)) as proxy,
        ):
            async with connect(_url(proxy.url), max_size=None) as bad, connect(_url(proxy.url)) as good:
                await until(bad, "session.created")
                await until(good, "session.created")
                hostile = asyncio.create_task(send_hostile_frames(bad))
                for k in range(10):
                    await still_serving(good, f"good_{k}")
                await hostile
                await still_serving(bad, "after_all")

    run(body, timeout=60)
    records = trace_ok(trace)
    notes = [r.event.get("text", "") for r in records if r.type == "note"]
    assert any("binary frame" in n for n in notes), notes
    assert any("not JSON" in n for n in notes), notes
    assert sum(1 for r in records if r.dir == "server" and r.type == "error") >= len(HOSTILE_FRAMES) - 1


def test_proxy_upstream_refused(tmp_path: Path) -> None:
    trace = tmp_path / "rec.jsonl"
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]

    async def body() -> None:
        async with run_proxy(
            RecordOptions(upstream=f"ws://127.0.0.1:{dead}/v1", output=trace, open_timeout=3)
        ) as proxy:
            with pytest.raises(InvalidStatus) as info:
                await connect(_url(proxy.url, f"model=m&api-key={KEY}"))
            assert info.value.response.status_code == 502
            assert KEY.encode() not in (info.value.response.body or b"")

    run(body)
    records = trace_ok(trace)
    assert any("upstream unreachable" in r.event.get("text", "") for r in records)
    assert KEY not in trace.read_text()


@contextlib.asynccontextmanager
async def dropping_upstream(deltas: int) -> AsyncIterator[int]:
    """An upstream that answers `response.create` with a few deltas, then drops the TCP connection."""

    async def handler(ws: ServerConnection) -> None:
        await ws.send(
            orjson.dumps({"type": "session.created", "event_id": "event_1", "session": {"id": "sess_1"}}).decode()
        )
        async for message in ws:
            if orjson.loads(message).get("type") == "response.create":
                await ws.send(
                    '{"type":"response.created","event_id":"event_2","response":{"id":"resp_1","status":"in_progress","output":[]}}'
                )
                for k in range(deltas):
                    await ws.send(
                        orjson.dumps(
                            {"type": "response.output_text.delta", "event_id": f"event_d{k}", "delta": f"w{k} "}
                        ).decode()
                    )
                await asyncio.sleep(0.05)
                ws.transport.abort()
                return

    async with serve(handler, "127.0.0.1", 0, ping_interval=None) as server:
        yield next(iter(server.sockets)).getsockname()[1]


def test_proxy_upstream_drops_mid_response(tmp_path: Path) -> None:
    trace = tmp_path / "rec.jsonl"
    received: list[dict[str, Any]] = []

    async def body() -> None:
        async with (
            dropping_upstream(25) as port,
            run_proxy(RecordOptions(upstream=f"ws://127.0.0.1:{port}/v1", output=trace)) as proxy,
        ):
            async with connect(_url(proxy.url)) as ws:
                await ws.send('{"type":"response.create"}')
                with contextlib.suppress(ConnectionClosed):
                    async for message in ws:
                        received.append(orjson.loads(message))
                assert ws.close_code in (1006, None) or ws.close_code >= 1000

    run(body)
    records = trace_ok(trace)
    in_trace = [r.event.get("event_id") for r in records if r.dir == "server"]
    assert [e.get("event_id") for e in received] == in_trace  # every frame forwarded is in the trace, in order
    assert len(received) == 27
    assert any("upstream dropped" in r.event.get("text", "") for r in records)
    assert records[-1].type == "connection.closed"


def test_proxy_client_drops_mid_response(tmp_path: Path) -> None:
    trace = tmp_path / "rec.jsonl"

    async def body() -> None:
        async with (
            run_server(ServerOptions(latency=0.02)) as srv,
            run_proxy(RecordOptions(upstream=srv.url, output=trace)) as proxy,
        ):
            ws = await connect(_url(proxy.url))
            await until(ws, "session.created")
            await ws.send('{"type":"response.create"}')
            await until(ws, "response.created")
            ws.transport.abort()
            await ws.wait_closed()
            for _ in range(100):
                if srv.connections == 0:
                    break
                await asyncio.sleep(0.05)
            assert srv.connections == 0, "the upstream connection of a vanished client stays open"
            async with connect(_url(proxy.url)) as other:
                await until(other, "session.created")
                await still_serving(other, "next_client")

    run(body)
    records = trace_ok(trace)
    closed = [r for r in records if r.type == "connection.closed" and r.conn == 1]
    assert closed and closed[0].event.get("by") == "client"


class FullDisk:
    """A file that takes `room` bytes, then fails every write with ENOSPC (a full disk)."""

    def __init__(self, path: Path, room: int) -> None:
        self._fp = open(path, "wb")
        self.room = room
        self.failures = 0

    def write(self, data: bytes) -> int:
        if len(data) > self.room:
            self.failures += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return self._fp.write(data)

    def flush(self) -> None:
        self._fp.flush()

    def fileno(self) -> int:
        return self._fp.fileno()

    def close(self) -> None:
        self._fp.close()


def test_proxy_disk_full_keeps_forwarding_and_says_so(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "rec.jsonl"
    disk = FullDisk(path, room=1500)
    writer = TraceWriter(disk, {"recorder": "test"}, time.monotonic, trace_write_failed)  # type: ignore[arg-type]
    received: list[str] = []

    async def body() -> None:
        async with run_server(ServerOptions()) as srv:
            proxy = RecordingProxy(RecordOptions(upstream=srv.url), writer)
            await proxy.start()
            try:
                async with connect(_url(proxy.url)) as ws:
                    received.append((await until(ws, "session.created"))["type"])
                    for k in range(10):  # the disk is full by now: the session must go on
                        await still_serving(ws, f"item_{k}")
                        received.append(f"item_{k}")
            finally:
                await proxy.stop()
                writer.close()

    run(body)
    assert disk.failures >= 1
    trace_ok(path, max_problems=0)
    err = capfd.readouterr().err
    assert "No space left" in err or "disk" in err.lower(), f"the user is not told the trace is incomplete: {err!r}"


def _start_recorder(upstream: str, trace: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen(
        [*RTRACE, "record", "--upstream", upstream, "-o", str(trace), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline().decode()
    found = re.search(r"(ws://127\.0\.0\.1:\d+/v1)", first)
    assert found, first
    return proc, found.group(1)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_recorder_signals_leave_a_parseable_complete_trace(sig: signal.Signals, tmp_path: Path) -> None:
    trace = tmp_path / "rec.jsonl"
    received: list[dict[str, Any]] = []
    outcome: dict[str, Any] = {}

    async def body() -> None:
        async with run_server(ServerOptions()) as srv:
            proc, url = await asyncio.to_thread(_start_recorder, srv.url, trace)
            try:
                async with connect(_url(url)) as ws:
                    received.append(await until(ws, "session.created"))
                    for k in range(5):
                        await still_serving(ws, f"i{k}")
                    await ws.send('{"type":"response.create"}')
                    received.append(await until(ws, "response.created"))
                    proc.send_signal(sig)
                    with contextlib.suppress(ConnectionClosed):
                        async for _ in ws:
                            pass
                outcome["rc"] = await asyncio.to_thread(proc.wait, 15)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                out, err = proc.communicate()
                outcome["err"] = err
                outcome["out"] = out

    run(body, timeout=45)
    assert b"Traceback" not in outcome["err"], outcome["err"]
    records = trace_ok(trace, max_problems=1 if sig == signal.SIGKILL else 0)
    ids = {r.event.get("event_id") for r in records if r.dir == "server"}
    assert all(e["event_id"] in ids for e in received)
    if sig != signal.SIGKILL:
        assert outcome["rc"] in (0, 130, -sig), outcome
        assert any(r.type == "connection.closed" for r in records)


# -- replay -------------------------------------------------------------------------------------------------------

SAMPLE = Path(__file__).resolve().parent.parent / "sample_traces" / "real" / "tool-output-race.livekit-1.8.8.jsonl"


def _replay(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*RTRACE, "replay", *args], capture_output=True, timeout=timeout)


def test_replay_unreachable_endpoint_exit_4(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    out = tmp_path / "replayed.jsonl"
    proc = _replay(
        [str(SAMPLE), "--target", f"ws://127.0.0.1:{dead}/v1?api-key={KEY}", "-o", str(out), "--timeout", "2s"]
    )
    assert proc.returncode == 4, proc.stderr
    assert b"Traceback" not in proc.stderr and b"cannot connect" in proc.stderr
    assert KEY.encode() not in proc.stderr + proc.stdout
    if out.exists():
        trace_ok(out)
        assert KEY not in out.read_text()


async def _replay_async(args: list[str]) -> subprocess.CompletedProcess[bytes]:
    proc = await asyncio.create_subprocess_exec(
        *RTRACE, "replay", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    return subprocess.CompletedProcess(args, proc.returncode or 0, out, err)


def test_replay_slow_endpoint_is_bounded_and_keeps_the_partial_trace(tmp_path: Path) -> None:
    out = tmp_path / "replayed.jsonl"
    result: dict[str, Any] = {}

    async def body() -> None:
        async with run_server(ServerOptions(latency=2.0)) as srv:
            started = time.monotonic()
            argv = [str(SAMPLE), "--target", srv.url, "--timeout", "300ms", "-o", str(out)]
            result["proc"] = await _replay_async(argv)
            result["elapsed"] = time.monotonic() - started

    run(body, timeout=120)
    proc = result["proc"]
    assert b"Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 1, proc  # it answered, too late: the replay diverged (4 is "cannot be reached")
    assert b"rtrace: the replay diverged: " in proc.stderr
    assert out.exists(), "the partial replayed trace is not kept"
    assert trace_ok(out)
    assert re.search(rb"timed? ?out|no answer|waited|missing|differ", proc.stdout + proc.stderr, re.IGNORECASE), (
        proc.stdout[-2000:]
    )


def test_replay_endpoint_answering_differently(tmp_path: Path) -> None:
    out = tmp_path / "replayed.jsonl"
    result: dict[str, Any] = {}

    async def body() -> None:
        schedule = Schedule.of(Faults(error_on=["conversation.item.create"], times=None))
        async with run_server(ServerOptions(schedule=schedule)) as srv:
            result["proc"] = await _replay_async([str(SAMPLE), "--target", srv.url, "--timeout", "1s", "-o", str(out)])

    run(body, timeout=120)
    proc = result["proc"]
    assert b"Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 1, proc  # a divergence is a finding of the replay
    assert trace_ok(out)
    assert re.search(rb"differ|diverg|unexpected|instead", proc.stdout, re.IGNORECASE), proc.stdout[-2000:]


# -- secrets and exposure -----------------------------------------------------------------------------------------


def test_no_secret_in_any_artifact_of_a_recorded_session(tmp_path: Path) -> None:
    """A key in Authorization, api-key, the query string and the key subprotocol, an ephemeral secret in an event:
    after a session through `rtrace record`, then analyze/report/redact of its trace, no artifact holds either."""
    trace, srv_trace = tmp_path / "rec.jsonl", tmp_path / "srv.jsonl"
    logs: dict[str, bytes] = {}

    async def body() -> None:
        async with run_server(ServerOptions(record=srv_trace)) as srv:
            proc, url = await asyncio.to_thread(_start_recorder, srv.url, trace)
            try:
                headers = [("Authorization", f"Bearer {KEY}"), ("api-key", KEY), ("OpenAI-Beta", "realtime=v1")]
                async with connect(
                    _url(url, f"model=gpt-realtime&api-key={KEY}"),
                    additional_headers=headers,
                    subprotocols=["realtime", f"openai-insecure-api-key.{KEY}"],  # type: ignore[list-item]
                ) as ws:
                    await until(ws, "session.created")
                    await ws.send(
                        orjson.dumps(
                            {
                                "type": "session.update",
                                "session": {"type": "realtime", "client_secret": {"value": EK, "expires_at": 1}},
                            }
                        ).decode()
                    )
                    await ws.send(
                        orjson.dumps(
                            {
                                "type": "conversation.item.create",
                                "item": {
                                    "id": "u1",
                                    "type": "message",
                                    "role": "user",
                                    "content": [{"type": "input_text", "text": f"token {EK} and Bearer {KEY}"}],
                                },
                            }
                        ).decode()
                    )
                    await until(ws, "conversation.item.added")
                    await ws.send(f'{{"type":"bad json {KEY}')
                    await until(ws, "error")
            finally:
                proc.send_signal(signal.SIGTERM)
                out, err = await asyncio.to_thread(proc.communicate, timeout=15)
                logs["record.stdout"], logs["record.stderr"] = out, err

    run(body, timeout=45)
    artifacts: dict[str, bytes] = {"trace": trace.read_bytes(), "serve-trace": srv_trace.read_bytes(), **logs}
    reports = {"html": "r.html", "markdown": "r.md", "sarif": "r.sarif", "junit": "r.xml", "json": "r.json"}
    for target in (trace, srv_trace):
        for fmt in (None, "json"):
            cmd = [*RTRACE, "analyze", str(target)] + (["-f", fmt] if fmt else [])
            cmd += [f"--{k}={tmp_path / (target.stem + v)}" for k, v in reports.items()]
            proc = subprocess.run(cmd, capture_output=True, timeout=60)
            assert proc.returncode in (0, 1), proc.stderr
            artifacts[f"analyze {target.name} {fmt}"] = proc.stdout + proc.stderr
        for command in (["show", str(target)], ["report", str(target)], ["redact", str(target)]):
            proc = subprocess.run([*RTRACE, *command], capture_output=True, timeout=60)
            artifacts[" ".join([*command[:1], target.name])] = proc.stdout + proc.stderr
    for f in tmp_path.iterdir():
        if f.is_file():
            artifacts[f.name] = f.read_bytes()
    secrets = (KEY.encode(), EK.encode(), KEY[8:30].encode(), EK[3:25].encode())
    leaks = {name: [s.decode() for s in secrets if s in data] for name, data in artifacts.items()}
    leaks = {name: found for name, found in leaks.items() if found}
    assert len(artifacts) >= 15
    assert not leaks, f"secrets found in: {sorted(leaks)}"
    records = trace_ok(trace)
    assert any(r.type == "conversation.item.create" for r in records)  # the session itself was recorded


@pytest.mark.parametrize("command", ["serve", "record"])
def test_bind_loopback_by_default_and_warn_otherwise(command: str) -> None:
    extra = ["--upstream", "ws://127.0.0.1:9/v1", "-o", os.devnull] if command == "record" else []
    for host, warned in ((None, False), ("127.0.0.2", True)):
        args = [*RTRACE, command, *extra] + (["--host", host] if host else [])
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert proc.stdout is not None
            first = proc.stdout.readline().decode()
            assert f"ws://{host or '127.0.0.1'}:" in first, first
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=15)
        text = err.decode()
        assert b"Traceback" not in err
        if warned:
            assert f"warning: listening on {host}, not loopback" in text, text
        else:
            assert "warning" not in text, text


# -- the proxy never prints the upstream key (`make harden` class 1) ------------------------------------------------


@pytest.mark.parametrize(
    "upstream",
    [
        f"ws://user@127.0.0.1:9/v1/realtime?api-key={KEY}",
        f"wss://user:{KEY}@api.example/v1",
        f"ws://{KEY}@127.0.0.1:9/v1",
        "ws://127.0.0.1:99999/v1",
        "ws://127.0.0.1:9/v1#frag",
        "ws://[::1/v1",
        f"ws://127.0.0.1:9/v1 ?api-key={KEY}",
        "http://127.0.0.1:9/v1",
    ],
)
def test_record_refuses_an_unusable_upstream_at_start(upstream: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [*RTRACE, "record", "--upstream", upstream, "-o", str(tmp_path / "rec.jsonl")], capture_output=True, timeout=30
    )
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert b"--upstream" in proc.stderr and b"Traceback" not in proc.stderr
    assert KEY.encode() not in proc.stdout + proc.stderr and KEY[8:30].encode() not in proc.stderr
    assert not (tmp_path / "rec.jsonl").exists()


def test_an_upstream_failure_of_any_kind_is_a_502_a_closed_connection_and_no_key(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever `connect` raises (websockets' InvalidURI quotes the whole URL, key included), the client gets a 502,
    the trace a `connection.closed` for its `connection.opened`, and no log the key."""
    import logging

    from websockets.exceptions import InvalidURI

    from rtrace.net.link import proxy as proxy_module
    from rtrace.net.link.common import scrubbed_logging

    trace = tmp_path / "rec.jsonl"
    errors = iter([InvalidURI(f"ws://u@h/v1?api-key={KEY}", "username provided without password"), RuntimeError(KEY)])

    async def failing_connect(*args: Any, **kw: Any) -> Any:
        raise next(errors)

    monkeypatch.setattr(proxy_module, "connect", failing_connect)
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    scrubbed_logging(sys.stderr)

    async def body() -> None:
        async with run_proxy(RecordOptions(upstream="ws://127.0.0.1:9/v1", output=trace)) as proxy:
            for _ in range(2):
                with pytest.raises(InvalidStatus) as info:
                    await connect(_url(proxy.url, f"model=m&api-key={KEY}"))
                assert info.value.response.status_code == 502
                assert KEY.encode() not in (info.value.response.body or b"")
        logging.getLogger("websockets.server").error(
            "failed %s", f"wss://h/v1?api-key={KEY}", exc_info=RuntimeError(KEY)
        )

    run(body)
    err = capfd.readouterr().err
    assert KEY not in err and KEY[8:30] not in err
    assert "api-key=[redacted]" in err  # the log record was written, scrubbed
    records = trace_ok(trace)
    opened = [r.conn for r in records if r.type == "connection.opened"]
    closed = [r.conn for r in records if r.type == "connection.closed"]
    assert opened == closed == [1, 2]
    assert KEY not in trace.read_text() and KEY[8:30] not in trace.read_text()


# -- replay sends a key only when asked, never in clear across the network (`make harden` class 5) ------------------


@contextlib.asynccontextmanager
async def header_catcher() -> AsyncIterator[tuple[str, list[dict[str, str]]]]:
    """A websocket endpoint that keeps each handshake's headers, says `session.created` and closes."""
    seen: list[dict[str, str]] = []

    async def handler(ws: ServerConnection) -> None:
        assert ws.request is not None
        seen.append({k.lower(): v for k, v in ws.request.headers.raw_items()})
        await ws.send('{"type":"session.created","event_id":"e1","session":{}}')
        await ws.close()

    async with serve(handler, "127.0.0.1", 0, ping_interval=None) as server:
        yield f"ws://127.0.0.1:{next(iter(server.sockets)).getsockname()[1]}/v1", seen


@pytest.mark.parametrize("asked", [False, True])
def test_replay_sends_the_key_only_when_asked_and_says_where(asked: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("MY_KEY", KEY)
    result: dict[str, Any] = {}

    async def body() -> None:
        async with header_catcher() as (url, seen):
            extra = ["--api-key-env", "MY_KEY"] if asked else []
            result["proc"] = await _replay_async([str(SAMPLE), "--target", url, "--timeout", "300ms", *extra])
            result["seen"] = seen
            result["url"] = url

    run(body, timeout=60)
    proc, seen = result["proc"], result["seen"]
    assert seen, proc.stderr
    sent = [h.get("authorization") for h in seen]
    assert sent == ([f"Bearer {KEY}"] * len(seen) if asked else [None] * len(seen)), sent
    assert KEY.encode() not in proc.stdout + proc.stderr and b"Traceback" not in proc.stderr
    told = f"the key in $MY_KEY ({len(KEY)} characters) goes to {result['url']} in the Authorization header".encode()
    assert (told in proc.stderr) is asked, proc.stderr


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--target", "ws://192.0.2.1/v1", "--api-key-env", "MY_KEY"], b"unencrypted to ws://192.0.2.1/v1"),
        (["--compare", "ws://192.0.2.1/v1", "--api-key-env", "MY_KEY"], b"unencrypted"),
        (["--target", "wss://192.0.2.1/v1", "--api-key-env", "NO_SUCH_VARIABLE"], b"NO_SUCH_VARIABLE"),
        (["--target", f"ws://user:{KEY}@127.0.0.1:9/v1"], b"user name or password"),
    ],
)
def test_replay_refuses_to_send_a_key_where_it_must_not_go(
    args: list[str], why: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_KEY", KEY)
    started = time.monotonic()
    proc = subprocess.run([*RTRACE, "replay", str(SAMPLE), *args], capture_output=True, timeout=60, env=os.environ)
    assert proc.returncode == 2 and why in proc.stderr, proc.stderr
    assert KEY.encode() not in proc.stdout + proc.stderr and KEY[8:30].encode() not in proc.stderr
    assert time.monotonic() - started < 30  # refused before connecting anywhere


# -- smaller: a stalled client at SIGTERM, an empty --host (`make harden` class 8) ---------------------------------


@contextlib.asynccontextmanager
async def flooding_upstream() -> AsyncIterator[int]:
    """An upstream that answers `response.create` with megabytes of audio deltas, as fast as it can send them."""

    async def handler(ws: ServerConnection) -> None:
        await ws.send('{"type":"session.created","event_id":"e0","session":{}}')
        delta = orjson.dumps({"type": "response.output_audio.delta", "delta": "QUJD" * 16000}).decode()
        with contextlib.suppress(ConnectionClosed):
            async for _ in ws:
                for _ in range(100_000):
                    await ws.send(delta)

    async with serve(handler, "127.0.0.1", 0, ping_interval=None) as server:
        yield next(iter(server.sockets)).getsockname()[1]


def test_record_exits_within_2s_of_sigterm_when_a_client_stopped_reading(tmp_path: Path) -> None:
    trace = tmp_path / "rec.jsonl"
    outcome: dict[str, Any] = {}

    async def body() -> None:
        async with flooding_upstream() as port:
            proc, url = await asyncio.to_thread(_start_recorder, f"ws://127.0.0.1:{port}/v1", trace)
            try:
                ws = await connect(_url(url), max_size=None)
                await until(ws, "session.created")
                await ws.send('{"type":"response.create"}')
                ws.transport.pause_reading()  # the client stops reading; buffers fill on every hop
                await asyncio.sleep(1.5)
                started = time.monotonic()
                proc.send_signal(signal.SIGTERM)
                outcome["rc"] = await asyncio.to_thread(proc.wait, 20)
                outcome["took"] = time.monotonic() - started
                ws.transport.abort()
            finally:
                if proc.poll() is None:
                    proc.kill()
                outcome["err"] = proc.communicate()[1]

    run(body, timeout=60)
    assert outcome["rc"] == 0 and b"Traceback" not in outcome["err"], outcome
    assert outcome["took"] < 2.0, f"record took {outcome['took']:.1f} s to exit on SIGTERM"
    records = trace_ok(trace)
    assert records[-1].type == "connection.closed" and records[-1].event["by"] == "recorder"


@pytest.mark.parametrize("command", ["serve", "record"])
@pytest.mark.parametrize("host", ["", " ", "127.0.0.1,::1"])
def test_an_empty_or_several_hosts_are_refused(command: str, host: str) -> None:
    extra = ["--upstream", "ws://127.0.0.1:9/v1", "-o", os.devnull] if command == "record" else []
    proc = subprocess.run([*RTRACE, command, *extra, "--host", host], capture_output=True, timeout=30)
    assert proc.returncode == 2 and b"--host must name one address" in proc.stderr, proc.stderr


def test_a_host_name_binds_one_address_and_prints_it() -> None:
    proc = subprocess.Popen([*RTRACE, "serve", "--host", "localhost"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().decode()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=15)
    assert re.search(r"listening on ws://(127\.0\.0\.1|\[::1\]):\d+/v1", first), first


# -- planted secrets never reach a live trace (`make harden` class 4) -----------------------------------------------


async def _drain(ws: ServerConnection) -> None:
    with contextlib.suppress(ConnectionClosed):
        async for _ in ws:
            pass


@contextlib.asynccontextmanager
async def scripted_upstream(events: list[dict[str, Any]], reason: str) -> AsyncIterator[int]:
    """An upstream that sends `events` once the client's first frame arrives, then closes with `reason`."""

    async def handler(ws: ServerConnection) -> None:
        await ws.recv()
        drain = asyncio.create_task(_drain(ws))  # keep reading, or the close handshake waits behind unread frames
        for event in events:
            await ws.send(orjson.dumps(event).decode())
        await ws.close(4000, reason)
        await drain

    async with serve(handler, "127.0.0.1", 0, ping_interval=None) as server:
        yield next(iter(server.sockets)).getsockname()[1]


def test_no_planted_secret_reaches_a_live_record_trace(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    from .secret_corpus import PLANTS, keyed_session, survivors

    live = [p for p in PLANTS if all(d != "meta" for d, _ in p.lines)]
    trace = tmp_path / "rec.jsonl"
    reason_secret = "PlAnTreasonZq9Xw7Vu5"

    async def body() -> None:
        server_events = [e for p in live for d, e in p.lines if d == "server"]
        client_events = [e for p in live for d, e in p.lines if d == "client"]
        async with (
            scripted_upstream(server_events, f"bad api-key={reason_secret}") as port,
            run_proxy(RecordOptions(upstream=f"ws://127.0.0.1:{port}/v1", output=trace)) as proxy,
        ):
            await keyed_session(proxy.url, KEY, client_events)

    run(body, timeout=60)
    data = trace.read_bytes()
    assert len(trace_ok(trace)) >= sum(len(p.lines) for p in live)  # everything was recorded
    assert survivors(data, live) == []
    logs = capfd.readouterr()
    for needle in (KEY, KEY[8:30], reason_secret):
        assert needle not in data.decode() and needle not in logs.out + logs.err, needle


def test_no_planted_secret_reaches_a_serve_record_trace(tmp_path: Path) -> None:
    """`serve --from` plays recorded responses back: a secret split across their deltas, and any secret a client
    sends, stays out of `--record`."""
    from .secret_corpus import PLANTS, responses_lines, stream_plants, survivors

    streamed = stream_plants()
    client = [p for p in PLANTS if all(d == "client" for d, _ in p.lines)]
    source = tmp_path / "responses.jsonl"
    source.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in responses_lines(streamed)))
    trace = tmp_path / "serve.jsonl"

    async def body_() -> None:
        async with (
            run_server(ServerOptions(record=trace, from_trace=str(source))) as srv,
            connect(_url(srv.url, f"model=m&api-key={KEY}"), max_size=None) as ws,
        ):
            await until(ws, "session.created")
            for plant in client:
                for _, event in plant.lines:
                    await ws.send(orjson.dumps(event).decode())
            for _ in streamed:
                await ws.send('{"type":"response.create"}')
                await until(ws, "response.done")

    run(body_, timeout=60)
    data = trace.read_bytes()
    assert survivors(data, streamed + client) == []
    assert KEY not in data.decode() and KEY[8:30] not in data.decode()
    joined = "".join(r.event.get("delta", "") for r in trace_ok(trace) if r.type == "response.output_text.delta")
    assert "Your key: sk-" in joined  # the text around a masked key is kept
