"""The in-process LiveKit recorder: without livekit (a stand-in session) for the mapping, and with the real
livekit-agents client (the `.venv-e2e-<version>` environments) against `rtrace serve`."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rtrace.core.loader import TraceReader
from rtrace.engine.fold import analyze_path
from rtrace.integrations.livekit import conversation_items, record_session

from .conftest import client_python
from .realclients import rtrace_pythonpath

ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-proj-LIVEKITKEY0123456789SECRET"


def test_imports_without_livekit() -> None:
    code = (
        "import sys; sys.modules['livekit'] = None\n"  # any `import livekit...` now fails
        "import rtrace.integrations.livekit as m\n"
        "print(m._livekit_version())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, cwd=str(ROOT))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "None"


# -- a stand-in for livekit's RealtimeSession and chat items ---------------------------------------------------------


@dataclass
class Message:
    id: str
    role: str
    content: list[Any]
    type: str = "message"


@dataclass
class Call:
    id: str
    call_id: str
    name: str
    arguments: str
    type: str = "function_call"


@dataclass
class Output:
    id: str
    call_id: str
    output: str
    type: str = "function_call_output"


@dataclass
class Ctx:
    items: list[Any] = field(default_factory=list)


@dataclass
class Generated:
    response_id: str


class FakeSession:
    def __init__(self) -> None:
        self.handlers: dict[str, list[Callable[..., None]]] = {}
        self.chat_ctx = Ctx()
        self._current_generation: object | None = None
        self.connects = 0

    def on(self, event: str, handler: Callable[..., None]) -> None:
        self.handlers.setdefault(event, []).append(handler)

    def off(self, event: str, handler: Callable[..., None]) -> None:
        self.handlers[event].remove(handler)

    def emit(self, event: str, arg: Any) -> None:
        for handler in list(self.handlers.get(event, [])):
            handler(arg)

    async def _create_ws_conn(self) -> str:
        self.connects += 1
        return "ws"


def test_stand_in_session_is_recorded(tmp_path: Path) -> None:
    out = tmp_path / "lk.jsonl"

    async def main() -> None:
        session = FakeSession()
        recorder = record_session(session, out)
        session.emit("openai_server_event_received", {"type": "session.created", "session": {"id": "s"}})
        audio = base64.b64encode(b"\x00" * 960).decode()
        session.emit("openai_client_event_queued", {"type": "input_audio_buffer.append", "audio": audio})
        session.emit("openai_client_event_queued", {"type": "session.update", "session": {"instructions": KEY}})
        user = Message("item_u", "user", ["hi"])
        session.chat_ctx.items.append(Message("sys", "system", ["be nice"]))
        session.chat_ctx.items.append(user)
        event = {"type": "conversation.item.create", "item": {"id": "item_u", "type": "message"}}
        session.emit("openai_client_event_queued", event)
        await asyncio.sleep(0)
        gen = object()
        session._current_generation = gen
        session.emit("generation_created", Generated("resp_1"))
        session.chat_ctx.items.append(Call("item_c", "call_1", "get_weather", '{"city":"Paris"}'))
        await asyncio.sleep(0.25)  # the poll notices the change without a wire event
        session._current_generation = None
        session.emit("openai_server_event_received", {"type": "response.done", "response": {"id": "resp_1"}})
        await asyncio.sleep(0)
        await session._create_ws_conn()  # a reconnect: the next events belong to connection 2
        session.emit("openai_client_event_queued", {"type": "session.update", "session": {}})
        session.chat_ctx.items.append(Output("item_o", "call_1", "sunny"))
        recorder.close()
        assert session.handlers == {k: [] for k in session.handlers}
        assert "_create_ws_conn" not in vars(session)

    asyncio.run(asyncio.wait_for(main(), 10))
    text = out.read_text()
    assert KEY not in text and "LIVEKITKEY" not in text
    with TraceReader.open(out) as reader:
        records = list(reader)
        assert reader.problem_count == 0
        assert reader.header is not None and reader.header.fields["recorder"] == "rtrace.integrations.livekit"
    kinds = [(r.conn, r.dir, r.type) for r in records]
    assert (1, "local", "local.generation.opened") in kinds and (1, "local", "local.generation.closed") in kinds
    assert [k for k in kinds if k[2].startswith("connection.")] == [
        (1, "meta", "connection.opened"),
        (1, "meta", "connection.closed"),
        (2, "meta", "connection.opened"),
        (2, "meta", "connection.closed"),
    ]
    append = next(r for r in records if r.type == "input_audio_buffer.append")
    assert append.event["audio"] == "" and append.event["rtrace_audio_bytes"] == 960
    snapshots = [[i["id"] for i in r.event["items"]] for r in records if r.type == "local.conversation"]
    assert snapshots == [[], ["item_u"], ["item_u", "item_c"], ["item_u", "item_c", "item_o"]]
    assert snapshots[-1] and records[-2].conn == 2


def test_conversation_items_are_wire_items() -> None:
    ctx = Ctx(
        [
            Message("m1", "assistant", ["hello", "there"]),
            Call("c1", "call_1", "f", "{}"),
            Output("o1", "call_1", "42"),
            Message("sys", "system", ["x"]),
        ]
    )
    assert conversation_items(ctx) == [
        {
            "id": "m1",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "hello"}, {"type": "output_text", "text": "there"}],
        },
        {"id": "c1", "type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
        {"id": "o1", "type": "function_call_output", "call_id": "call_1", "output": "42"},
    ]


# -- the real client --------------------------------------------------------------------------------------------------


DRIVER = ROOT / "tests" / "e2e" / "livekit_record_driver.py"


def shim_path(tmp_path: Path) -> Path:
    """rtrace and its runtime dependencies, for the client venv (which has livekit but not rtrace)."""
    import websockets

    return Path(rtrace_pythonpath(tmp_path, websockets))


def run_client(version: str, scenario: str, tmp_path: Path, **faults: Any) -> tuple[Path, dict[str, Any]]:
    from rtrace.net.faults.flags import Faults
    from rtrace.net.faults.script import Schedule
    from rtrace.net.link.server import ServerOptions, run_server

    python = client_python(version)
    options = ServerOptions(latency=0.05, schedule=Schedule.of(Faults(times=1, **faults)))
    out = tmp_path / f"{scenario}.{version}.local.jsonl"
    env = {**os.environ, "PYTHONPATH": str(shim_path(tmp_path)), "OPENAI_API_KEY": "x", "PYTHONUNBUFFERED": "1"}

    async def main() -> tuple[int | None, bytes, bytes]:
        async with run_server(options) as srv:
            proc = await asyncio.create_subprocess_exec(
                str(python), str(DRIVER), str(out), "--url", srv.url, "--scenario", scenario, "--timeout", "20",
                env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            try:
                o, e = await asyncio.wait_for(proc.communicate(), 40)
            except asyncio.TimeoutError:
                proc.kill()
                o, e = await proc.communicate()
            return proc.returncode, o, e

    code, stdout, stderr = asyncio.run(main())
    lines = [line for line in stdout.decode(errors="replace").splitlines() if line.startswith("{")]
    assert code == 0 and lines, stderr.decode(errors="replace")[-3000:]
    return out, json.loads(lines[-1])


def slugs(path: Path, severity: str | None = None) -> set[str]:
    return {f.slug for f in analyze_path(path).findings if severity is None or f.severity == severity}


@pytest.mark.e2e
def test_real_client_1_8_8_local_view_shows_the_lost_output(tmp_path: Path) -> None:
    out, summary = run_client("1.8.8", "race", tmp_path)
    assert summary["livekit_agents"] == "1.8.8"
    with TraceReader.open(out) as reader:
        records = list(reader)
        assert reader.problem_count == 0
    dirs = {r.dir for r in records}
    assert dirs == {"meta", "client", "server", "local"}
    assert any(r.type == "local.generation.opened" for r in records)
    assert any(r.type == "local.generation.closed" for r in records)
    found = slugs(out)
    assert {"deleted-function-call-output", "local-server-divergence"} <= found, found


@pytest.mark.e2e
def test_real_client_1_8_9_local_view_is_clean(tmp_path: Path) -> None:
    out, summary = run_client("1.8.9", "race", tmp_path)
    assert summary["livekit_agents"] == "1.8.9"
    assert any(r.type == "local.conversation" for r in TraceReader.open(out))
    errors = [f"{f.rule} {f.slug} {f.lines} {f.message}" for f in analyze_path(out).findings if f.severity == "error"]
    assert errors == [], errors


@pytest.mark.e2e
def test_real_client_reconnect_counts_connections(tmp_path: Path) -> None:
    # closed (1000) right after the call's response.done, while the tool runs
    during_tool = {"drop_after": ["response.done:function_call"], "close_code": 1000}
    out, summary = run_client("1.8.4", "reconnect", tmp_path, **during_tool)
    assert summary["reconnects"] >= 1
    report = analyze_path(out)
    assert report.connections >= 2
    assert "function-call-lost-on-reconnect" in {f.slug for f in report.findings}
    replayed = [r for r in TraceReader.open(out) if r.conn == 2 and r.dir == "client"]
    assert replayed and replayed[0].type == "session.update"
