"""The pipecat recorder: on a stand-in service (no pipecat installed) for the wiring, and with the real pipecat-ai
1.14 (`.venv-e2e-pipecat`, rtrace on its PYTHONPATH) against `rtrace serve`, healthy and under faults, where its
trace must give the findings serve's own recording gives."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rtrace.core.loader import TraceReader
from rtrace.integrations.pipecat import record_service

from .realclients import (
    DROP_OUTPUT,
    FAULT_CLOSE_CODE,
    ClientTrace,
    assert_same_findings,
    events_through_call,
    recorded_run,
    trace_lines,
)
from .test_e2e_pipecat import client


class FakeSocket:
    def __init__(self) -> None:
        self.frames = [json.dumps({"type": "session.created"})]
        self.state = SimpleNamespace(value=1)
        self.request = SimpleNamespace(path="/v1/realtime?model=gpt-realtime")

    async def send(self, data: str) -> None:
        pass

    async def recv(self) -> str:
        return self.frames.pop(0)


class FakeService:
    """`OpenAIRealtimeLLMService`'s shape: `_connect` opens `_websocket` and starts the task that reads it."""

    def __init__(self) -> None:
        self._websocket: Any = None
        self.read: list[str] = []

    async def _connect(self) -> None:
        self._websocket = FakeSocket()
        self.task = asyncio.get_running_loop().create_task(self._receive())

    async def _receive(self) -> None:
        self.read.append(await self._websocket.recv())

    async def send_client_event(self, event: dict[str, Any]) -> None:
        await self._websocket.send(json.dumps(event))


def test_a_stand_in_service_is_recorded_from_its_first_frame(tmp_path: Path) -> None:
    out = tmp_path / "pipecat.jsonl"

    async def main() -> None:
        service = record_service(FakeService(), out)
        await service._connect()
        await service.send_client_event({"type": "session.update", "session": {}})
        await service.task
        service.rtrace_recorder.close()  # type: ignore[attr-defined]
        assert "_connect" not in vars(service) and service.read

    asyncio.run(asyncio.wait_for(main(), 10))
    with TraceReader.open(out) as reader:
        recs = [(r.conn, r.dir, r.type) for r in reader]
        assert reader.problem_count == 0
    assert recs == [
        (1, "meta", "connection.opened"),
        (1, "client", "session.update"),
        (1, "server", "session.created"),
        (1, "meta", "connection.closed"),
    ]


def test_something_else_or_a_started_service_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        record_service(object(), tmp_path / "x.jsonl")
    started = FakeService()
    started._websocket = FakeSocket()
    with pytest.raises(RuntimeError, match="before the pipeline starts"):
        record_service(started, tmp_path / "x.jsonl")
    assert not (tmp_path / "x.jsonl").exists()


# -- the real pipecat ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> ClientTrace:
    return recorded_run(client(), tmp_path_factory.mktemp("healthy"))


@pytest.mark.e2e
def test_real_pipecat_healthy_turn(healthy: ClientTrace) -> None:
    assert healthy.serve.summary["ok"], healthy.explain()
    assert trace_lines(healthy.trace)[0]["client"] == "pipecat-ai 1.14.0"
    assert assert_same_findings(healthy) == set() and healthy.slugs == set()


@pytest.mark.e2e
def test_real_pipecat_close_while_the_tool_runs(healthy: ClientTrace, tmp_path: Path) -> None:
    rec = recorded_run(client(), tmp_path, close_after=events_through_call(healthy.serve), close_code=FAULT_CLOSE_CODE)
    assert assert_same_findings(rec) == set(), rec.explain()
    assert rec.slugs == {"unanswered-function-call"}, rec.explain()


@pytest.mark.e2e
def test_real_pipecat_drop_of_the_output(tmp_path: Path) -> None:
    rec = recorded_run(client(), tmp_path, drop_on=DROP_OUTPUT, close_code=FAULT_CLOSE_CODE)
    assert assert_same_findings(rec) == set(), rec.explain()
    assert rec.slugs == {"unanswered-function-call", "changes-lost-at-final-close"}, rec.explain()
