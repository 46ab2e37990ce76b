"""End to end: Azure's Voice Live SDK 1.3.1 (`azure.ai.voicelive.aio.connect`, aiohttp, in `.venv-e2e-voicelive`)
driven by tests/e2e/voicelive_scenario.py against `rtrace serve` at 50 ms latency, on the path the SDK asks for:
`/voice-live/realtime?api-version=...&model=...` below the endpoint it is given (`http://127.0.0.1:PORT`).

The SDK is a thin socket and never reconnects: after a close, a tool that finishes fails to send its output, and
an output the dropped socket never confirmed is lost with the session (`changes-lost-at-final-close`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rtrace.net.link.server import RealtimeServer

from .realclients import (
    FAULT_CLOSE_CODE,
    Client,
    Run,
    assert_closed_while_the_tool_ran,
    assert_dropped_on_the_output,
    assert_healthy,
    assert_slugs,
    common_tests,
    python_client,
    run,
    scenario_fixtures,
    trace_records,
)

pytestmark = pytest.mark.e2e


def endpoint(server: RealtimeServer) -> str:
    """The Voice Live endpoint: the server's origin (the SDK appends `/voice-live/realtime`)."""
    return server.http_url.removesuffix("/v1")


def client(tls: bool = False) -> Client:
    return python_client("voicelive", "voicelive_scenario.py", endpoint, tls)


healthy, healthy_audio, reconnect, drop = scenario_fixtures(client)
test_healthy_audio_turn, test_audio_is_streamed, test_serve_calls_the_session_tool = common_tests(client)


def test_healthy_turn(healthy: Run) -> None:
    assert healthy.summary["client_version"] == "1.3.1", healthy.explain()
    assert_healthy(healthy)


def test_the_voice_live_path_is_served_and_noted(healthy: Run) -> None:
    (opened,) = [r["event"] for r in trace_records(healthy.trace) if r["event"].get("type") == "connection.opened"]
    assert opened["route"] == "/voice-live/realtime" and opened["protocol"] == "voice-live", opened
    assert opened["model"] == "gpt-realtime" and "api-version=" in opened["path"], opened


def test_a_healthy_turn_over_tls_is_clean(tmp_path: Path) -> None:
    over_tls = run(client(tls=True), tmp_path)
    assert_healthy(over_tls)


def test_reconnect_while_the_tool_runs_is_not_attempted(reconnect: Run) -> None:
    assert_closed_while_the_tool_ran(reconnect, FAULT_CLOSE_CODE)
    assert len(reconnect.conns()) == 1 and reconnect.summary["reconnected"] == 0, reconnect.explain()
    assert_slugs(reconnect, {"unanswered-function-call"})


def test_output_dropped_before_its_ack_is_lost(drop: Run) -> None:
    assert_dropped_on_the_output(drop, FAULT_CLOSE_CODE)
    assert len(drop.conns()) == 1 and drop.summary["final_answer"] is None, drop.explain()
    assert_slugs(drop, {"unanswered-function-call", "changes-lost-at-final-close"})


def test_a_drop_over_tls_is_reported_as_on_ws(tmp_path: Path) -> None:
    dropped = run(client(tls=True), tmp_path, drop_on=["conversation.item.create:function_call_output"])
    assert dropped.conns()[0].close_code == 1006, dropped.explain()
    assert_slugs(dropped, {"unanswered-function-call", "changes-lost-at-final-close"})
