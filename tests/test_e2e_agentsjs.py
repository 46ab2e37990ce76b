"""End to end: LiveKit agents-js 1.9.0 (`@livekit/agents` + `@livekit/agents-plugin-openai` 1.9.0, its
`realtime.RealtimeModel` without a room, given `baseURL: "ws://.../v1"`, to which it appends
`/realtime?model=`; tests/e2e/node/node_modules) driven by tests/e2e/node/agentsjs_scenario.mjs against
`rtrace serve` at 50 ms latency. The driver runs the tool as AgentActivity does (chat context copy + output,
`updateChatCtx`, `generateReply`).

What it does on the wire: it reconnects at once on any close, and its replay (a full `session.update`, the tools,
the confirmed conversation) leaves out function calls and their outputs and does not resend a create the old
socket never confirmed. The first event it queues after a reconnect is lost in its own send queue (never on the
wire): the tool output after a close, or the `response.create` after a drop. Its `session.close()` does not close
the socket: the server sees 1006 when the process exits.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .realclients import (
    FAULT_CLOSE_CODE,
    TOOL,
    Client,
    Conn,
    Run,
    assert_a_preamble_came_before_the_call,
    assert_closed_while_the_tool_ran,
    assert_dropped_on_the_output,
    assert_healthy,
    assert_slugs,
    base_url,
    common_tests,
    node_client,
    run,
    scenario_fixtures,
)

pytestmark = pytest.mark.e2e


def client() -> Client:
    return node_client("agents-js", "agentsjs_scenario.mjs", base_url)


healthy, healthy_audio, reconnect, drop = scenario_fixtures(client)
test_healthy_audio_turn, test_audio_is_streamed, test_serve_calls_the_session_tool = common_tests(client)


def test_healthy_turn(healthy: Run) -> None:
    assert healthy.summary["client_version"] == "1.9.0+plugin-openai@1.9.0", healthy.explain()
    assert_healthy(healthy)
    (conn,) = healthy.conns()
    assert conn.sent("session.update") == 3, healthy.explain()  # session, instructions, tools
    assert conn.close_code == 1006, healthy.explain()  # session.close() leaves the socket open


def assert_replay_without_the_call(run_: Run) -> Conn:
    """Conn 2 opens with the replay: the session and its tools, then the user message alone (no function call,
    no output); returns conn 2."""
    assert len(run_.conns()) == 2 and run_.summary["reconnected"] == 1, run_.explain()
    second = run_.conns()[1]
    updates = [e for e in second.client[:2] if e.get("type") == "session.update"]
    assert len(updates) == 2 and "tools" in updates[1]["session"], run_.explain()
    assert second.creates()[:1] == ["message:user"], run_.explain()
    assert "function_call" not in second.creates(), run_.explain()
    return second


def test_reconnect_while_the_tool_runs_loses_the_call_and_the_output(reconnect: Run) -> None:
    first = assert_closed_while_the_tool_ran(reconnect, FAULT_CLOSE_CODE)
    second = assert_replay_without_the_call(reconnect)
    first_call = reconnect.summary["tool_calls"][0]["call_id"]
    # the output of the first call never reaches the wire (lost in the client's queue after the reconnect):
    # updateChatCtx times out, then the response.create makes the model call the tool again on conn 2
    outputs = [
        e["item"]["call_id"] for e in second.client if (e.get("item") or {}).get("type") == "function_call_output"
    ]
    assert first_call not in outputs, reconnect.explain()
    assert "update_chat_ctx timed out." in reconnect.summary["client_warnings"], reconnect.explain()
    calls = [(c["name"], c["conn"]) for c in reconnect.summary["tool_calls"]]
    assert calls == [(TOOL, first.n), (TOOL, second.n)] and reconnect.summary["ok"], reconnect.explain()
    assert_slugs(reconnect, {"unanswered-function-call", "function-call-lost-on-reconnect"})


def test_output_dropped_before_its_ack_is_not_sent_again(drop: Run) -> None:
    assert_dropped_on_the_output(drop, FAULT_CLOSE_CODE)
    second = assert_replay_without_the_call(drop)
    # the unconfirmed output is not sent again, and the response.create after the reconnect is lost in the
    # client's queue: generateReply times out and nothing answers
    assert second.creates() == ["message:user"], drop.explain()
    assert second.sent("response.create") == 0, drop.explain()
    assert "generateReply: Error: generateReply timed out." in drop.summary["errors"], drop.explain()
    assert drop.summary["final_answer"] is None, drop.explain()
    assert_slugs(
        drop,
        {
            "unanswered-function-call",
            "function-call-lost-on-reconnect",
            "unconfirmed-item-lost-on-reconnect",
        },
    )


def test_a_preamble_message_before_the_call_is_a_healthy_turn(tmp_path: Path) -> None:
    """A message then the call in one response, the message still open while the call streams (serve's
    `--preamble on`: the real gpt-realtime-2.1's shape): the client runs the tool and answers as with a call alone."""
    with_preamble = run(client(), tmp_path, preamble=True)
    assert_a_preamble_came_before_the_call(with_preamble.trace)
    assert_healthy(with_preamble)
