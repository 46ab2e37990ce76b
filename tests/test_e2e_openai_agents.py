"""End to end: openai-agents 0.24.0 (`agents.realtime`: RealtimeAgent + RealtimeRunner, its default websocket
model given the full URL `ws://.../v1/realtime?model=...` as `model_config["url"]`, in `.venv-e2e-openai-agents`)
driven by tests/e2e/openai_agents_scenario.py against `rtrace serve` at 50 ms latency.

What it does on the wire: the SDK runs the tool and sends its output and a `response.create` itself. It never
reconnects: on a close the session's event stream ends (1000, 1001) or raises (any other code, as here), a running
tool is cancelled when the application leaves the session, and an output already sent is simply gone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .realclients import (
    FAULT_CLOSE_CODE,
    Client,
    Run,
    assert_a_preamble_came_before_the_call,
    assert_closed_while_the_tool_ran,
    assert_dropped_on_the_output,
    assert_healthy,
    assert_slugs,
    common_tests,
    python_client,
    realtime_url,
    run,
    scenario_fixtures,
)

pytestmark = pytest.mark.e2e


def client() -> Client:
    return python_client("openai-agents", "openai_agents_scenario.py", realtime_url)


healthy, healthy_audio, reconnect, drop = scenario_fixtures(client)
test_healthy_audio_turn, test_audio_is_streamed, test_serve_calls_the_session_tool = common_tests(client)


def test_healthy_turn(healthy: Run) -> None:
    assert healthy.summary["client_version"] == "0.24.0", healthy.explain()
    assert_healthy(healthy)
    (conn,) = healthy.conns()
    assert conn.close_code == 1000, healthy.explain()  # leaving the session closes the socket


def test_reconnect_while_the_tool_runs_is_not_attempted(reconnect: Run) -> None:
    assert_closed_while_the_tool_ran(reconnect, FAULT_CLOSE_CODE)
    assert len(reconnect.conns()) == 1 and reconnect.summary["reconnected"] == 0, reconnect.explain()
    # the session raised on the close; leaving it cancelled the tool: no output ever left
    assert reconnect.summary["close_codes"] == [FAULT_CLOSE_CODE], reconnect.explain()
    assert reconnect.summary["tool_outputs_sent"] == 0, reconnect.explain()
    assert_slugs(reconnect, {"unanswered-function-call"})


def test_output_dropped_before_its_ack_is_lost(drop: Run) -> None:
    assert_dropped_on_the_output(drop, FAULT_CLOSE_CODE)
    assert len(drop.conns()) == 1 and drop.summary["reconnected"] == 0, drop.explain()
    assert drop.summary["final_answer"] is None, drop.explain()
    # the client never reconnects: the unanswered output create is lost at the final close (RT122)
    assert_slugs(drop, {"unanswered-function-call", "changes-lost-at-final-close"})


def test_a_preamble_message_before_the_call_is_a_healthy_turn(tmp_path: Path) -> None:
    """A message then the call in one response, the message still open while the call streams (serve's
    `--preamble on`: the real gpt-realtime-2.1's shape): the client runs the tool and answers as with a call alone."""
    with_preamble = run(client(), tmp_path, preamble=True)
    assert_a_preamble_came_before_the_call(with_preamble.trace)
    assert_healthy(with_preamble)
