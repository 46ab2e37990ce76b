"""End to end: @openai/agents-realtime 0.20.0 (`RealtimeSession` over `OpenAIRealtimeWebSocket`, which uses the
URL it is given verbatim: `ws://.../v1/realtime?model=...`; tests/e2e/node/node_modules) driven by
tests/e2e/node/agents_realtime_scenario.mjs against `rtrace serve` at 50 ms latency.

What it does on the wire: it sends its `session.update` (with the tools), the user text and `response.create` as
soon as the socket opens, runs the tool itself and sends the output and a `response.create`. It never reconnects:
after a close a tool that finishes fails to send its output ("WebSocket is not connected"). `session.close()`
closes with no status code (1005).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .realclients import (
    FAULT_CLOSE_CODE,
    Client,
    Run,
    assert_closed_while_the_tool_ran,
    assert_dropped_on_the_output,
    assert_healthy,
    assert_slugs,
    base_url,
    common_tests,
    node_client,
    realtime_url,
    run,
    scenario_fixtures,
)

pytestmark = pytest.mark.e2e


def client() -> Client:
    return node_client("agents-realtime", "agents_realtime_scenario.mjs", realtime_url)


healthy, healthy_audio, reconnect, drop = scenario_fixtures(client)
test_healthy_audio_turn, test_audio_is_streamed, test_serve_calls_the_session_tool = common_tests(client)


def test_healthy_turn(healthy: Run) -> None:
    assert healthy.summary["client_version"] == "0.20.0", healthy.explain()
    assert_healthy(healthy)
    (conn,) = healthy.conns()
    assert conn.close_code == 1005, healthy.explain()


def test_the_printed_url_works_as_is(tmp_path: Path) -> None:
    assert_healthy(run(client(), tmp_path, url=base_url))


def test_reconnect_while_the_tool_runs_is_not_attempted(reconnect: Run) -> None:
    assert_closed_while_the_tool_ran(reconnect, FAULT_CLOSE_CODE)
    assert len(reconnect.conns()) == 1 and reconnect.summary["reconnected"] == 0, reconnect.explain()
    assert any("WebSocket is not connected" in e for e in reconnect.summary["errors"]), reconnect.explain()
    assert_slugs(reconnect, {"unanswered-function-call"})


def test_output_dropped_before_its_ack_is_lost(drop: Run) -> None:
    assert_dropped_on_the_output(drop, FAULT_CLOSE_CODE)
    assert len(drop.conns()) == 1 and drop.summary["reconnected"] == 0, drop.explain()
    assert drop.summary["final_answer"] is None, drop.explain()
    # the client never reconnects: the unanswered output create is lost at the final close (RT122)
    assert_slugs(drop, {"unanswered-function-call", "changes-lost-at-final-close"})
