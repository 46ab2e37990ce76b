"""End to end: pipecat-ai 1.14.0 (`OpenAIRealtimeLLMService` with `base_url="ws://.../v1/realtime"`, to which it
appends `?model=`, in a pipeline without a transport; `.venv-e2e-pipecat`) driven by tests/e2e/pipecat_scenario.py
against `rtrace serve` at 50 ms latency.

What it does on the wire: it waits for `session.created`, sends its `session.update` (and another with the first
context), the user text as an item and `response.create`; its function handler's result goes out as the output and
the assistant aggregator asks for the next response. It never reconnects: on a close its receive task stops and
every later send is logged and dropped; the pipeline stays up, idle.
"""

from __future__ import annotations

import pytest

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
    scenario_fixtures,
)

pytestmark = pytest.mark.e2e


def client() -> Client:
    return python_client("pipecat", "pipecat_scenario.py", lambda server: f"{server.url}/realtime")


healthy, healthy_audio, reconnect, drop = scenario_fixtures(client)
test_healthy_audio_turn, test_audio_is_streamed, test_serve_calls_the_session_tool = common_tests(client)


def test_healthy_turn(healthy: Run) -> None:
    assert healthy.summary["client_version"] == "1.14.0", healthy.explain()
    assert_healthy(healthy)
    (conn,) = healthy.conns()
    assert conn.sent("session.update") == 2, healthy.explain()
    assert conn.close_code == 1000, healthy.explain()  # cancelling the pipeline closes the socket


def test_reconnect_while_the_tool_runs_is_not_attempted(reconnect: Run) -> None:
    assert_closed_while_the_tool_ran(reconnect, FAULT_CLOSE_CODE)
    assert len(reconnect.conns()) == 1 and reconnect.summary["reconnected"] == 0, reconnect.explain()
    # the handler's result was handed to the closed socket: logged as a send error, never on the wire
    assert reconnect.summary["tool_outputs_sent"] == 1, reconnect.explain()
    assert any("Error sending client event" in e for e in reconnect.summary["errors"]), reconnect.explain()
    assert reconnect.summary["finish_reason"].startswith("idle"), reconnect.explain()
    assert_slugs(reconnect, {"unanswered-function-call"})


def test_output_dropped_before_its_ack_is_lost(drop: Run) -> None:
    assert_dropped_on_the_output(drop, FAULT_CLOSE_CODE)
    assert len(drop.conns()) == 1 and drop.summary["reconnected"] == 0, drop.explain()
    assert drop.summary["final_answer"] is None and drop.summary["finish_reason"].startswith("idle"), drop.explain()
    # the client never reconnects: the unanswered output create is lost at the final close (RT122)
    assert_slugs(drop, {"unanswered-function-call", "changes-lost-at-final-close"})
