"""The openai-agents recorder: on a stand-in model (no agents installed) for the wiring, and with the real
openai-agents 0.24 (`.venv-e2e-openai-agents`, rtrace on its PYTHONPATH) against `rtrace serve`, healthy and under
faults, where its trace must give the findings serve's own recording gives."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rtrace.core.loader import TraceReader
from rtrace.integrations.openai_agents import record_session

from .realclients import (
    DROP_OUTPUT,
    FAULT_CLOSE_CODE,
    ClientTrace,
    assert_same_findings,
    events_through_call,
    recorded_run,
    trace_lines,
)
from .test_e2e_openai_agents import client


class FakeSocket:
    def __init__(self, frames: list[dict[str, Any]]) -> None:
        self.frames = [json.dumps(f) for f in frames]
        self.sent: list[str] = []
        self.state = SimpleNamespace(value=1)
        self.request = SimpleNamespace(path="/v1/realtime?model=gpt-realtime")

    async def send(self, data: str) -> None:
        self.sent.append(data)

    async def recv(self) -> str:
        if not self.frames:
            raise type("ConnectionClosedOK", (Exception,), {})()
        return self.frames.pop(0)


class FakeModel:
    """`OpenAIRealtimeWebSocketModel`'s shape: it opens its socket through `_create_websocket_connection` and
    tells its listeners about turns."""

    def __init__(self) -> None:
        self.listeners: list[Any] = []

    def add_listener(self, listener: Any) -> None:
        self.listeners.append(listener)

    def remove_listener(self, listener: Any) -> None:
        self.listeners.remove(listener)

    async def _create_websocket_connection(self, url: str, headers: dict[str, str]) -> FakeSocket:
        return FakeSocket([{"type": "session.created"}, {"type": "response.created", "response": {"id": "r1"}}])

    async def run(self) -> None:
        ws: Any = await self._create_websocket_connection("ws://x", {})
        await ws.send(json.dumps({"type": "session.update", "session": {}}))
        async for frame in ws:
            if json.loads(frame)["type"] == "response.created":
                for listener in list(self.listeners):
                    await listener.on_event(SimpleNamespace(type="turn_started", response_id="r1"))
        for listener in list(self.listeners):
            await listener.on_event(SimpleNamespace(type="turn_ended", response_id="r1"))


def test_a_stand_in_model_is_recorded_with_its_turns(tmp_path: Path) -> None:
    out = tmp_path / "agents.jsonl"
    model = FakeModel()
    session = SimpleNamespace(model=model)
    recorder = record_session(session, out)
    assert model.listeners == [recorder]
    asyncio.run(asyncio.wait_for(model.run(), 10))
    recorder.close()
    assert model.listeners == [] and "_create_websocket_connection" not in vars(model)
    with TraceReader.open(out) as reader:
        recs = [(r.dir, r.type, r.event.get("response_id")) for r in reader]
        assert reader.problem_count == 0
    assert recs == [
        ("meta", "connection.opened", None),
        ("client", "session.update", None),
        ("server", "session.created", None),
        ("server", "response.created", None),
        ("local", "local.generation.opened", "r1"),
        ("local", "local.generation.closed", "r1"),
        ("meta", "connection.closed", None),
    ]


def test_something_else_or_a_connected_session_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        record_session(SimpleNamespace(model=object()), tmp_path / "x.jsonl")
    connected = FakeModel()
    connected._websocket = object()  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="before the session connects"):
        record_session(connected, tmp_path / "x.jsonl")
    assert not (tmp_path / "x.jsonl").exists()


# -- the real openai-agents ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> ClientTrace:
    return recorded_run(client(), tmp_path_factory.mktemp("healthy"))


def local_types(rec: ClientTrace) -> list[str]:
    return [r["event"]["type"] for r in trace_lines(rec.trace)[1:] if r["dir"] == "local"]


@pytest.mark.e2e
def test_real_agents_healthy_turn_with_its_generations(healthy: ClientTrace) -> None:
    assert healthy.serve.summary["ok"], healthy.explain()
    lines = trace_lines(healthy.trace)
    assert lines[0]["client"] == "openai-agents 0.24.0"
    assert assert_same_findings(healthy) == set() and healthy.slugs == set()
    # two responses (the call, the answer), each opened and closed in the session's own view
    assert local_types(healthy) == ["local.generation.opened", "local.generation.closed"] * 2, healthy.explain()
    order = [(r["dir"], r["event"]["type"]) for r in lines[1:]]
    opened = order.index(("local", "local.generation.opened"))
    assert order[opened - 1] == ("server", "response.created"), order


@pytest.mark.e2e
def test_real_agents_close_while_the_tool_runs(healthy: ClientTrace, tmp_path: Path) -> None:
    rec = recorded_run(client(), tmp_path, close_after=events_through_call(healthy.serve), close_code=FAULT_CLOSE_CODE)
    # the session's `tracing` update was still in flight (serve's latency) when serve closed: only the client's
    # trace holds it, and it is lost with the connection
    assert assert_same_findings(rec) <= {"changes-lost-at-final-close"}, rec.explain()
    assert "unanswered-function-call" in rec.slugs, rec.explain()


@pytest.mark.e2e
def test_real_agents_drop_of_the_output(tmp_path: Path) -> None:
    rec = recorded_run(client(), tmp_path, drop_on=DROP_OUTPUT, close_code=FAULT_CLOSE_CODE)
    assert assert_same_findings(rec) == set(), rec.explain()
    assert rec.slugs == {"unanswered-function-call", "changes-lost-at-final-close"}, rec.explain()
