"""Faults on the link (rtrace/net/link/upstream.py): a `LinkProxy` between a small client and a real `rtrace serve` (in
this process, 127.0.0.1, a free port) acts the fault declarations as the fake endpoint does, notes each where it acted,
and leaves out what only the fake model can do."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from rtrace.net.faults.flags import Faults
from rtrace.net.faults.schedule import Fault
from rtrace.net.faults.script import Schedule
from rtrace.net.hunt.search import single_faults, surface_of
from rtrace.net.link.proxy import RecordOptions
from rtrace.net.link.server import ServerOptions, run_server
from rtrace.net.link.upstream import FAKE_ONLY, LINK_KINDS, check_link, link_makes, run_link

USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hello there"}]}


async def one_turn(url: str, headers: dict[str, str] | None = None) -> tuple[list[dict[str, Any]], int | None]:
    """A user message and a response: the events received (each with `_at`, when it came), and the close code
    (None: ended by the client)."""
    got: list[dict[str, Any]] = []

    async def receive(ws: Any) -> None:
        got.append({**json.loads(await asyncio.wait_for(ws.recv(), 5)), "_at": time.monotonic()})

    async with connect(f"{url}/realtime?model=gpt-realtime", additional_headers=headers or {}) as ws:
        try:
            await receive(ws)
            await ws.send(json.dumps({"type": "conversation.item.create", "event_id": "ev_c1", "item": USER}))
            await ws.send(json.dumps({"type": "response.create"}))
            while got[-1]["type"] != "response.done":
                await receive(ws)
        except ConnectionClosed:
            return got, ws.close_code
    return got, None


def records(path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [r for r in lines if "dir" in r]


async def through_link(tmp: Path, faults: ServerOptions, headers: dict[str, str] | None = None) -> Any:
    async with run_server(ServerOptions(record=tmp / "upstream.jsonl")) as upstream:
        record = RecordOptions(upstream=upstream.url, output=tmp / "link.jsonl")
        async with run_link(record, faults) as link:
            return await one_turn(link.url, headers)


def test_a_close_after_a_server_event_acts_and_is_noted(tmp_path: Path) -> None:
    faults = ServerOptions(schedule=Schedule.of(Faults(drop_after=["response.created"], close_code=1011)))
    got, code = asyncio.run(through_link(tmp_path, faults))
    assert code == 1011 and got[-1]["type"] == "response.created", got
    recs = records(tmp_path / "link.jsonl")
    metas = [r["event"] for r in recs if r["dir"] == "meta"]
    note = next(m for m in metas if m["type"] == "fault.injected")
    assert note["fault"] == "drop-after" and note["server_event_type"] == "response.created", note
    closed = next(m for m in metas if m["type"] == "connection.closed")
    assert closed["by"] == "server" and closed["code"] == 1011, closed
    # the note comes right after the event it followed, the close after it
    at = [r["event"]["type"] for r in recs].index("fault.injected")
    assert recs[at - 1]["event"]["type"] == "response.created"


def test_an_error_answers_a_client_event_which_the_upstream_never_sees(tmp_path: Path) -> None:
    faults = ServerOptions(schedule=Schedule.of(Faults(error_on=["conversation.item.create"])))
    got, code = asyncio.run(through_link(tmp_path, faults, {"Authorization": "Bearer sk-test-link-secret-123456"}))
    errors = [e for e in got if e["type"] == "error"]
    assert [e["error"]["code"] for e in errors] == ["fault_injected"] and errors[0]["error"]["event_id"] == "ev_c1"
    assert code is None and got[-1]["type"] == "response.done"
    upstream = [r["event"]["type"] for r in records(tmp_path / "upstream.jsonl") if r["dir"] == "client"]
    assert "conversation.item.create" not in upstream and "response.create" in upstream
    link = records(tmp_path / "link.jsonl")
    assert any(r["event"].get("fault") == "error-on" for r in link if r["dir"] == "meta")
    for name in ("link.jsonl", "upstream.jsonl"):  # the client's key went upstream, into no trace
        assert "sk-test-link-secret" not in (tmp_path / name).read_text(encoding="utf-8")


def test_a_drop_on_a_client_event_withholds_it_and_drops_the_socket(tmp_path: Path) -> None:
    faults = ServerOptions(schedule=Schedule.of(Faults(drop_on=["response.create"])))
    got, code = asyncio.run(through_link(tmp_path, faults))
    assert code == 1006, got
    upstream = [r["event"]["type"] for r in records(tmp_path / "upstream.jsonl") if r["dir"] == "client"]
    assert "response.create" not in upstream
    closed = [r["event"] for r in records(tmp_path / "link.jsonl") if r["event"].get("type") == "connection.closed"]
    assert closed[0]["by"] == "server" and closed[0]["code"] == 1006


def test_latency_delays_the_upstreams_events(tmp_path: Path) -> None:
    """An ack latency on one type holds that event (and keeps the order): response.done comes 400 ms after the
    event before it, which came at once."""
    got, _ = asyncio.run(through_link(tmp_path, ServerOptions(latency_by_type={"response.done": 0.4})))
    assert got[-1]["type"] == "response.done" and got[-1]["_at"] - got[-2]["_at"] >= 0.38, got[-2:]
    assert [e["type"] for e in got][:2] == ["session.created", "conversation.item.added"], got


def test_session_expired_after_the_time_given(tmp_path: Path) -> None:
    faults = ServerOptions(schedule=Schedule.of(Faults(expire_after=0.2)), latency=0.3)
    got, code = asyncio.run(through_link(tmp_path, faults))
    assert code == 1001 and got[-1]["type"] == "error" and got[-1]["error"]["code"] == "session_expired", got


def test_what_only_the_fake_model_makes_is_refused_and_left_out() -> None:
    with pytest.raises(ValueError, match="--fail-response: only the fake endpoint"):
        check_link(ServerOptions(schedule=Schedule.of(Faults(fail_response={1}))))
    assert {"fail", "cancel", "barge_in"} <= set(FAKE_ONLY) and not LINK_KINDS & set(FAKE_ONLY)
    surface = surface_of([{"dir": "client", "conn": 1, "t": 0.0, "event": {"type": "response.create"}},
                          {"dir": "server", "conn": 1, "t": 0.1, "event": {"type": "response.done",
                                                                            "response": {"output": []}}}])  # fmt: skip
    kinds = {f.kind for f in single_faults(surface) if link_makes(f)}
    assert "drop" in kinds and "fail" not in kinds
    assert not link_makes(Fault("close", "response", "", 1011, 1)) and link_makes(Fault("close", "sent", "x", 1011))


class Upstream:
    """A plain `rtrace serve` on 127.0.0.1 in a thread of its own (the hunt runs its own event loop)."""

    def __enter__(self) -> str:
        import threading

        self.ready = threading.Event()
        self.stop: asyncio.Event | None = None
        self.thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)
        self.thread.start()
        assert self.ready.wait(10)
        return self.url

    async def _serve(self) -> None:
        self.stop = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        async with run_server(ServerOptions()) as srv:
            self.url = srv.url
            self.ready.set()
            await self.stop.wait()

    def __exit__(self, *exc: object) -> None:
        assert self.stop is not None
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(10)


def test_a_hunt_through_the_link_finds_the_bug_the_direct_hunt_finds(tmp_path: Path) -> None:
    """`hunt --upstream`: every run through a link of its own to a plain serve; the planted bug of
    tests/sweep_client.py (it gives up on a late ack) is found as the direct hunt finds it, the traces hold both
    sides, and the search drew no fault the link cannot make."""
    import sys

    from rtrace.net.hunt.hunt import HuntOptions, hunt

    client = [sys.executable, str(Path(__file__).parent / "sweep_client.py")]
    with Upstream() as url:
        options = HuntOptions(budget=None, runs=3, shrink_runs=1, repro_runs=1, max_bugs=1, out_dir=tmp_path,
                              upstream=url)  # fmt: skip
        result = hunt(client, options)
    assert [b.rule for b in result.bugs] == ["RT101"], [r.schedule.describe() for r in result.runs]
    assert all(link_makes(f) for r in result.runs for f in r.schedule.faults)
    assert "--upstream" in result.bugs[0].command
    recs = records(result.runs[0].trace)
    assert {"client", "server"} <= {r["dir"] for r in recs}


def test_a_run_through_the_link_whose_trace_cannot_be_written_is_discarded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk under --out with --upstream: the link's trace of the clean run is not written whole, so the run
    is discarded (never judged, the command never blamed) and the hunt stops there, as it does without a link."""
    import sys

    from rtrace.net.hunt.hunt import HuntOptions, hunt

    from .test_core_writer import traces_onto_a_full_disk

    traces_onto_a_full_disk(monkeypatch)
    client = [sys.executable, str(Path(__file__).parent / "sweep_client.py")]
    with Upstream() as url:
        options = HuntOptions(budget=None, runs=3, shrink_runs=1, repro_runs=1, out_dir=tmp_path, upstream=url)
        result = hunt(client, options)
    assert result.clean is not None and result.clean.cut == "trace not written", result.clean
    assert result.stopped == "trace not written" and not result.clean_failed and len(result.runs) == 1


def test_the_link_acts_on_a_real_api_recording_played_back(tmp_path: Path) -> None:
    """The upstream a real server's session played back (`serve --from` a realapi recording: what the real API
    answered): the link's faults act on its answers as on the fake's; the client gets the recorded response."""
    from bench.fidelity import find_realapi

    realapi = find_realapi(None)
    if realapi is None:
        pytest.skip("no ../shared/realapi recordings beside the clone")
    recording = realapi / "cases" / "realapi.pydantic-ai.tool-call-round.a.jsonl"
    done = [r["event"] for r in records(recording) if r["event"].get("type") == "response.done"]
    recorded = [o.get("name") for o in done[0]["response"]["output"] if o.get("type") == "function_call"]

    async def main() -> Any:
        async with run_server(ServerOptions(from_trace=str(recording))) as upstream:
            record = RecordOptions(upstream=upstream.url, output=tmp_path / "link.jsonl")
            faults = ServerOptions(schedule=Schedule.of(Faults(error_on=["conversation.item.create"])), latency=0.02)
            async with run_link(record, faults) as link:
                return await one_turn(link.url)

    got, code = asyncio.run(main())
    assert code is None and [e["error"]["code"] for e in got if e["type"] == "error"] == ["fault_injected"]
    calls = [o.get("name") for o in got[-1]["response"]["output"] if o.get("type") == "function_call"]
    assert recorded and calls == recorded, (recorded, got[-1])
    notes = [
        r["event"]["fault"] for r in records(tmp_path / "link.jsonl") if r["event"].get("type") == "fault.injected"
    ]
    assert notes == ["error-on"]
