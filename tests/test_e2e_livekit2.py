"""End to end: livekit-agents 2.0.0b1, a pre-release (`LiveSession` with its built-in OpenAI realtime model given
`base_url="ws://.../v1"`, to which it appends `/realtime?model=`; no room, no plugin package;
`.venv-e2e-livekit-2.0.0b1`) driven by tests/e2e/livekit2_scenario.py against `rtrace serve` at 50 ms latency.

What it does on the wire: its reconnect replay is complete (the session, the tools, the conversation with its
function calls, the creates the old socket never confirmed, and a `response.create` it never got an answer to),
but it has the 1.8.8 tool-output race again (no `_rt_chat_ctx_lock` around the snapshot-and-push of the remote
context): a push computed from a stale snapshot deletes the tool output right after its ack. Its websocket
(aiohttp) answers the server's close frame with 1000, and serve records the code the client answered.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .realclients import (
    FAULT_CLOSE_CODE,
    Client,
    Conn,
    Run,
    assert_closed_while_the_tool_ran,
    assert_dropped_on_the_output,
    assert_healthy,
    assert_slugs,
    base_url,
    common_tests,
    python_client,
    run,
    scenario_fixtures,
)

pytestmark = pytest.mark.e2e



def client() -> Client:
    return python_client("livekit-2.0.0b1", "livekit2_scenario.py", base_url)


healthy, healthy_audio, reconnect, drop = scenario_fixtures(client)
test_healthy_audio_turn, test_audio_is_streamed, test_serve_calls_the_session_tool = common_tests(client)


def test_healthy_turn(healthy: Run) -> None:
    assert healthy.summary["client_version"] == "2.0.0b1", healthy.explain()
    assert_healthy(healthy)


def test_the_race_deletes_the_tool_output(tmp_path: Path) -> None:
    race = run(client(), tmp_path, driver_args=("--scenario", "race"))
    (conn,) = race.conns()
    assert conn.creates() == ["message:user", "message:user", "function_call_output", "message:user"], race.explain()
    output_ids = [e["item"]["id"] for e in conn.client if (e.get("item") or {}).get("type") == "function_call_output"]
    deleted = [e.get("item_id") for e in conn.client if e.get("type") == "conversation.item.delete"]
    assert deleted == output_ids, race.explain()
    # RT103: turn B's response was asked for while the call had no output (the scenario's design)
    assert_slugs(race, {"deleted-function-call-output", "stale-snapshot-delete", "unanswered-function-call"})


def assert_complete_replay(run_: Run) -> Conn:
    """Conn 2 replays the conversation with the function call and its output (re-sent when it was never
    confirmed), and the turn completes there; returns conn 2."""
    _, second = run_.conns()
    assert run_.summary["reconnected"] == 1 and run_.summary["ok"], run_.explain()
    assert second.creates() == ["message:user", "function_call", "function_call_output"], run_.explain()
    assert second.errors() == [], run_.explain()
    return second


def test_reconnect_while_the_tool_runs_replays_the_call(reconnect: Run) -> None:
    assert_closed_while_the_tool_ran(reconnect, FAULT_CLOSE_CODE)
    assert_complete_replay(reconnect)
    assert_slugs(reconnect, set())


def test_output_dropped_before_its_ack_is_sent_again(drop: Run) -> None:
    first = assert_dropped_on_the_output(drop, FAULT_CLOSE_CODE)
    second = assert_complete_replay(drop)
    lost = next(e for e in reversed(first.client) if e.get("type") == "conversation.item.create")
    resent = next(e for e in second.client if (e.get("item") or {}).get("type") == "function_call_output")
    assert (resent["event_id"], resent["item"]["id"]) == (lost["event_id"], lost["item"]["id"]), drop.explain()
    assert_slugs(drop, set())


def test_a_response_create_lost_with_the_socket_is_sent_again(tmp_path: Path) -> None:
    dropped = run(client(), tmp_path, drop_on=["response.create"], close_code=FAULT_CLOSE_CODE)
    first, second = dropped.conns()
    assert first.faults == ["drop-on:response.create"] and first.close_code == FAULT_CLOSE_CODE, dropped.explain()
    lost = first.client[-1]
    assert lost.get("type") == "response.create", dropped.explain()
    assert [e.get("event_id") for e in second.client if e.get("type") == "response.create"][:1] == [
        lost.get("event_id")
    ], dropped.explain()
    assert dropped.summary["ok"] and [c["conn"] for c in dropped.summary["tool_calls"]] == [2], dropped.explain()
    assert_slugs(dropped, set())
