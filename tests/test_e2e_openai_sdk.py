"""End to end: the openai Python SDK 3.57.0 (`AsyncOpenAI(websocket_base_url=...).realtime.connect()`, in
`.venv-e2e-openai`) driven by tests/e2e/openai_sdk_scenario.py against `rtrace serve` at 50 ms latency.

The SDK is a thin socket; the driver is the minimal application on it, opted in to the SDK's reconnect. What it
does on the wire: it reconnects only on the codes it lists (1001, 1005, 1006, 1011-1013, 1015; not 1000) and then
restores nothing: the SDK flushes the frames queued while it reconnected as the socket opens, and the driver sends
its `session.update` again only on the new `session.created`, after them (`reconnect-restores-nothing`). So an
output sent while it reconnects names a call the new conversation does not hold, and an output the old socket never
confirmed is lost.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .realclients import (
    DROP_OUTPUT,
    FAULT_CLOSE_CODE,
    Client,
    Run,
    assert_closed_while_the_tool_ran,
    assert_dropped_on_the_output,
    assert_fault_noted_when_it_acted,
    assert_healthy,
    assert_slugs,
    base_url,
    common_tests,
    events_through_call,
    python_client,
    run,
    scenario_fixtures,
)

pytestmark = pytest.mark.e2e


def client() -> Client:
    return python_client("openai", "openai_sdk_scenario.py", base_url)


healthy, healthy_audio, reconnect, drop = scenario_fixtures(client)
test_healthy_audio_turn, test_audio_is_streamed, test_serve_calls_the_session_tool = common_tests(client)


def test_healthy_turn(healthy: Run) -> None:
    assert healthy.summary["client_version"] == "3.57.0", healthy.explain()
    assert_healthy(healthy)
    (conn,) = healthy.conns()
    assert conn.close_code == 1000, healthy.explain()  # the driver closes the connection


def test_reconnect_while_the_tool_runs_restores_nothing(reconnect: Run) -> None:
    assert_closed_while_the_tool_ran(reconnect, FAULT_CLOSE_CODE)
    _, second = reconnect.conns()
    assert reconnect.summary["reconnected"] == 1 and reconnect.summary["close_codes"] == [1011], reconnect.explain()
    # conn 2: the application's session.update, then the frames queued while reconnecting: the output (of a call
    # the new conversation does not hold: rejected) and its response.create; no replay of the conversation
    assert second.creates() == ["function_call_output"], reconnect.explain()
    assert second.sent("session.update") == 1 and second.sent("response.create") == 1, reconnect.explain()
    assert second.errors() == ["invalid_tool_call_id"], reconnect.explain()
    # the flushed frames leave as the socket opens, before the application's session.update: the response runs
    # from an empty session with default settings, and the answer comes from an empty conversation
    first = [e.get("type") for e in second.client][:2]
    assert first == ["conversation.item.create", "response.create"], reconnect.explain()
    assert reconnect.summary["final_answer"] == "Hello! How can I help?", reconnect.explain()
    expected = {"unanswered-function-call", "output-for-unknown-call", "server-error", "reconnect-restores-nothing"}
    assert_slugs(reconnect, expected)


def test_the_fault_is_noted_when_it_acts(reconnect: Run) -> None:
    assert_fault_noted_when_it_acted(reconnect)


def test_output_dropped_before_its_ack_is_lost(drop: Run) -> None:
    assert_dropped_on_the_output(drop, FAULT_CLOSE_CODE)
    _, second = drop.conns()
    assert drop.summary["reconnected"] == 1, drop.explain()
    # conn 2: only the application's session.update; the unconfirmed output is not sent again, nothing answers
    assert second.creates() == [] and second.sent("session.update") == 1, drop.explain()
    assert second.sent("response.create") == 0, drop.explain()
    assert drop.summary["final_answer"] is None, drop.explain()
    assert_slugs(drop, {"unanswered-function-call", "unconfirmed-item-lost-on-reconnect"})


def test_a_clean_close_is_not_retried(healthy: Run, tmp_path: Path) -> None:
    closed = run(client(), tmp_path, close_after=events_through_call(healthy), close_code=1000)
    assert_closed_while_the_tool_ran(closed, 1000)
    assert len(closed.conns()) == 1 and closed.summary["reconnected"] == 0, closed.explain()
    # the tool's output never leaves: the SDK raises on the send (ConnectionClosedOK)
    assert closed.summary["tool_outputs_sent"] == 0, closed.explain()
    assert_slugs(closed, {"unanswered-function-call"})


def test_the_default_drop_is_abnormal_and_the_sdk_reconnects(tmp_path: Path) -> None:
    dropped = run(client(), tmp_path, drop_on=DROP_OUTPUT)
    assert dropped.conns()[0].close_code == 1006, dropped.explain()
    assert dropped.summary["reconnected"] == 1, dropped.explain()
