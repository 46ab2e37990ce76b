"""Writes the golden sample traces of every rule and their `X.expected.json`.

    python -m tests.make_samples            # rewrite sample_traces/rules/**.jsonl and every X.expected.json
    python -m tests.make_samples --expected # only refresh X.expected.json (also for sample_traces/real/)

Each rule has positive traces (the rule must fire) and near-miss negatives (it must not); the file name says
which (`positive-*`, `negative-*`). X.expected.json holds only the stable facts: rule, slug and witness lines (and
the severity of a finding whose severity is not its rule's).
Review a regenerated expected file before committing it: it is the specification of the rule on that trace.
"""

from __future__ import annotations

import base64
import sys
from collections.abc import Callable
from pathlib import Path

import orjson

from rtrace.engine.fold import analyze_path
from rtrace.rules import find_rule

from .tracebuilder import TraceBuilder, assistant_msg, fc, fco, user_msg

ROOT = Path(__file__).resolve().parent.parent / "sample_traces"
RULES_DIR = ROOT / "rules"

Scenario = Callable[[], TraceBuilder]
SCENARIOS: dict[str, Scenario] = {}


def scenario(path: str) -> Callable[[Scenario], Scenario]:
    def register(fn: Scenario) -> Scenario:
        SCENARIOS[path] = fn
        return fn

    return register


# -- building blocks ----------------------------------------------------------------------------------


def tool_turn(
    b: TraceBuilder,
    user: str = "item_u1",
    call_item: str = "item_fc1",
    call_id: str = "call_1",
    rid: str = "resp_1",
    prev: str | None = None,
) -> None:
    """User asks, the model answers with a function call."""
    msg = user_msg(user, "What's the weather in Paris?")
    b.create(msg, prev=prev or "root")
    b.added(msg, prev)
    rc = b.response_create()
    b.response_created(rid, b.event_id(rc))
    call = fc(call_item, call_id)
    b.output_item(rid, call, prev=user)
    b.response_done(rid, output=[call])


def tool_output_confirmed(b: TraceBuilder) -> None:
    """A tool turn, then its output created and confirmed (item_out1 for call_1)."""
    tool_turn(b)
    out = fco("item_out1", "call_1")
    b.create(out, prev="item_fc1", dt=0.3)
    b.added(out, "item_fc1")


def stale_push(b: TraceBuilder, prev_of_output: str = "item_fc1") -> None:
    """The tool result is pushed; a second push computed before its ack deletes it and adds a user turn."""
    out = fco("item_out1", "call_1")
    b.create(out, prev=prev_of_output, dt=0.3)
    b.added(out, prev_of_output)
    b.delete("item_out1", dt=0.0017)
    turn = user_msg("item_u2", "And what should I wear?")
    b.create(turn, prev=prev_of_output, dt=0.0001)
    b.deleted("item_out1")
    b.added(turn, prev_of_output, dt=0.0001)
    rc = b.response_create()
    b.response_created("resp_2", b.event_id(rc))
    answer = assistant_msg("item_a2", "You said: And what should I wear?")
    b.output_item("resp_2", answer, prev="item_u2", text_chunks=["You said: ", "And what should I wear?"])
    b.response_done("resp_2", output=[answer])


def pcm_b64(ms: int, rate: int = 24000) -> str:
    return base64.b64encode(b"\x00\x01" * (rate * ms // 1000)).decode()


# -- RT101 deleted-function-call-output / RT102 stale-snapshot-delete --------------------------------------


@scenario("deleted-function-call-output/positive-stale-push")
def _() -> TraceBuilder:
    b = TraceBuilder(latency=0.05)
    b.open()
    tool_turn(b)
    stale_push(b)
    b.close()
    return b


@scenario("deleted-function-call-output/positive-beta-names")
def _() -> TraceBuilder:
    b = TraceBuilder(latency=0.05, beta=True)
    b.open()
    tool_turn(b)
    stale_push(b)
    b.close()
    return b


@scenario("deleted-function-call-output/positive-ack-0ms")
def _() -> TraceBuilder:
    b = TraceBuilder(latency=0.0)
    b.open()
    tool_turn(b)
    stale_push(b)
    b.close()
    return b


@scenario("deleted-function-call-output/positive-ack-200ms")
def _() -> TraceBuilder:
    b = TraceBuilder(latency=0.2)
    b.open()
    tool_turn(b)
    stale_push(b)
    b.close()
    return b


@scenario("deleted-function-call-output/negative-update-in-place")
def _() -> TraceBuilder:
    """Delete + create of the same id in one burst: an in-place update, not a loss."""
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    out = fco("item_out1", "call_1", "sunny")
    b.create(out, prev="item_fc1", dt=0.3)
    b.added(out, "item_fc1")
    b.delete("item_out1", dt=0.5)
    newer = fco("item_out1", "call_1", "sunny, 21C")
    b.create(newer, prev="item_fc1", dt=0.0001)
    b.deleted("item_out1")
    b.added(newer, "item_fc1", dt=0.0001)
    b.close()
    return b


@scenario("deleted-function-call-output/negative-call-deleted-too")
def _() -> TraceBuilder:
    """The client removes the whole tool exchange: call and output together."""
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    out = fco("item_out1", "call_1")
    b.create(out, prev="item_fc1", dt=0.3)
    b.added(out, "item_fc1")
    b.delete("item_fc1", dt=2.0)
    b.delete("item_out1", dt=0.0001)
    b.deleted("item_fc1")
    b.deleted("item_out1", dt=0.0001)
    b.close()
    return b


@scenario("deleted-function-call-output/negative-delete-rejected")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    d = b.delete("item_out9", dt=0.3)
    b.error(
        "item_delete_invalid_item_id",
        "Error deleting item: the item with id 'item_out9' does not exist.",
        b.event_id(d),
    )
    b.close()
    return b


@scenario("stale-snapshot-delete/positive-inflight-function-call")
def _() -> TraceBuilder:
    """A push computed before the server's function_call arrived deletes it (livekit/agents #4960)."""
    b = TraceBuilder(latency=0.05)
    b.open()
    tool_turn(b)  # one create round trip measured: 50 ms
    rc = b.response_create(dt=0.5)
    b.response_created("resp_2", b.event_id(rc))
    call = fc("item_fc2", "call_2")
    b.output_item("resp_2", call, prev="item_fc1")
    b.response_done("resp_2", output=[call])
    b.delete("item_fc2", dt=0.002)
    turn = user_msg("item_u3", "never mind")
    b.create(turn, prev="item_fc1", dt=0.0001)
    b.deleted("item_fc2")
    b.added(turn, "item_fc1", dt=0.0001)
    b.close()
    return b


@scenario("stale-snapshot-delete/negative-late-delete")
def _() -> TraceBuilder:
    """Deleting an old message long after its ack, in a burst with a create, is an intended edit."""
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    b.delete("item_u1", dt=2.0)
    turn = user_msg("item_u9", "edited question")
    b.create(turn, prev="root", dt=0.0001)
    b.deleted("item_u1")
    b.added(turn, None, dt=0.0001)
    b.close()
    return b


@scenario("stale-snapshot-delete/negative-no-burst")
def _() -> TraceBuilder:
    """A quick delete with no create in its burst is a deliberate removal, not a stale diff."""
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    msg = user_msg("item_u2", "oops")
    b.create(msg, prev="item_fc1", dt=0.3)
    b.added(msg, "item_fc1")
    b.delete("item_u2", dt=0.002)
    b.deleted("item_u2")
    b.close()
    return b


# -- RT103 unanswered-function-call ------------------------------------------------------------------------


@scenario("unanswered-function-call/positive-response-without-output")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    turn = user_msg("item_u2", "Tell me a story meanwhile")
    b.create(turn, prev="item_fc1", dt=0.05)
    b.added(turn, "item_fc1")
    rc = b.response_create()
    b.response_created("resp_2", b.event_id(rc))
    answer = assistant_msg("item_a2", "Once upon a time")
    b.output_item("resp_2", answer, prev="item_u2", text_chunks=["Once upon a time"])
    b.response_done("resp_2", output=[answer])
    out = fco("item_out1", "call_1")
    b.create(out, prev="item_a2", dt=0.2)
    b.added(out, "item_a2")
    b.close()
    return b


@scenario("unanswered-function-call/positive-connection-ends")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    b.close(dt=1.0)
    return b


@scenario("unanswered-function-call/positive-server-vad-response")
def _() -> TraceBuilder:
    """Server VAD starts a response on its own while the tool still runs."""
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    b.server({"type": "input_audio_buffer.committed", "item_id": "item_au1", "previous_item_id": "item_fc1"}, dt=0.4)
    spoken = {"id": "item_au1", "type": "message", "role": "user", "content": [{"type": "input_audio"}]}
    b.added(spoken, "item_fc1", dt=0.0001)
    b.response_created("resp_2", None, dt=0.001)
    b.response_done("resp_2", dt=0.2)
    b.close(dt=1.0)
    return b


@scenario("unanswered-function-call/positive-output-rejected")
def _() -> TraceBuilder:
    """The output was sent but rejected: the finding names it, not "no function_call_output"."""
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    c = b.create(fco("item_out1", "call_1"), prev="item_fc1", dt=0.3)
    b.error("server_error", "The server had an error while processing your request.", b.event_id(c))
    rc = b.response_create(dt=0.01)
    b.response_created("resp_2", b.event_id(rc))
    b.response_done("resp_2", output=[])
    b.close(dt=1.0)
    return b


@scenario("unanswered-function-call/positive-output-unconfirmed-at-close")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    b.create(fco("item_out1", "call_1"), prev="item_fc1", dt=0.3)
    b.close(1006, dt=0.01)
    return b


@scenario("unanswered-function-call/negative-output-resent-after-rejection")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    out = fco("item_out1", "call_1")
    c = b.create(out, prev="item_fc1", dt=0.3)
    b.error("server_error", "The server had an error while processing your request.", b.event_id(c))
    b.create(out, prev="item_fc1", dt=0.2)
    b.added(out, "item_fc1")
    rc = b.response_create(dt=0.01)
    b.response_created("resp_2", b.event_id(rc))
    b.response_done("resp_2", output=[])
    b.close(dt=1.0)
    return b


@scenario("unanswered-function-call/negative-pipelined-output")
def _() -> TraceBuilder:
    """Output create and response.create sent back to back: the pending output counts."""
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    out = fco("item_out1", "call_1")
    b.create(out, prev="item_fc1", dt=0.3)
    rc = b.response_create(dt=0.0001)
    b.added(out, "item_fc1")
    b.response_created("resp_2", b.event_id(rc), dt=0.001)
    answer = assistant_msg("item_a2", "Tool result: sunny")
    b.output_item("resp_2", answer, prev="item_out1", text_chunks=["Tool result: sunny"])
    b.response_done("resp_2", output=[answer])
    b.close()
    return b


@scenario("unanswered-function-call/negative-out-of-band")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    b.response_create(dt=0.05, conversation="none")
    out = fco("item_out1", "call_1")
    b.create(out, prev="item_fc1", dt=0.3)
    b.added(out, "item_fc1")
    b.close()
    return b


def call_cut_mid_arguments(b: TraceBuilder) -> None:
    """The model starts a function call and the server closes the socket before its arguments are done."""
    msg = user_msg("item_u1", "What's the weather in Paris?")
    b.create(msg, prev="root")
    b.added(msg, None)
    rc = b.response_create()
    b.response_created("resp_1", b.event_id(rc))
    start = {"id": "item_fc1", "type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": ""}
    start = {**start, "status": "in_progress"}
    b.server({"type": "response.output_item.added", "response_id": "resp_1", "output_index": 0, "item": start})
    b.server({"type": "conversation.item.added", "previous_item_id": "item_u1", "item": start})
    base = {"response_id": "resp_1", "item_id": "item_fc1", "output_index": 0, "call_id": "call_1"}
    b.server({"type": "response.function_call_arguments.delta", **base, "delta": '{"ci'})
    b.meta({"type": "fault.injected", "fault": "close-after", "spec": "9"})
    b.close(1011)


@scenario("unanswered-function-call/negative-arguments-never-finished")
def _() -> TraceBuilder:
    """A call cut before response.function_call_arguments.done is no call: nothing to answer or to replay."""
    b = TraceBuilder()
    b.open()
    call_cut_mid_arguments(b)
    b.open(2, dt=0.1)
    msg = user_msg("item_u1", "What's the weather in Paris?")
    b.create(msg, prev="root")
    b.added(msg, None)
    rc = b.response_create()
    b.response_created("resp_2", b.event_id(rc))
    call = fc("item_fc2", "call_2")
    b.output_item("resp_2", call, prev="item_u1")
    b.response_done("resp_2", output=[call])
    out = fco("item_out2", "call_2")
    b.create(out, prev="item_fc2", dt=0.3)
    b.added(out, "item_fc2")
    rc = b.response_create()
    b.response_created("resp_3", b.event_id(rc))
    b.response_done("resp_3", output=[])
    b.close(dt=1.0)
    return b


# -- RT104 output-for-unknown-call -------------------------------------------------------------------------


@scenario("output-for-unknown-call/positive-error-event-id-null")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    msg = user_msg("item_u1", "hi")
    b.create(msg, prev="root")
    b.added(msg, None)
    b.create(fco("item_out7", "call_7"), prev="item_u1", dt=0.2)
    b.error("invalid_tool_call_id", "Tool call ID 'call_7' not found in conversation.", None)
    b.close()
    return b


@scenario("output-for-unknown-call/positive-call-deleted")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    b.delete("item_fc1", dt=0.1)
    b.deleted("item_fc1")
    c = b.create(fco("item_out1", "call_1"), prev="item_u1", dt=0.2)
    b.error("invalid_tool_call_id", "Tool call ID 'call_1' not found in conversation.", b.event_id(c))
    b.close()
    return b


@scenario("output-for-unknown-call/negative-injected-invalid-tool-call-id")
def _() -> TraceBuilder:
    """`serve` injected `invalid_tool_call_id` (its fault note before it) for an output whose call is on the
    connection: the fault speaking, not the client; a real server's refusal is still RT104."""
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    c = b.create(fco("item_out1", "call_1"), prev="item_fc1", dt=0.2)
    b.meta({"type": "fault.injected", "fault": "script", "spec": "turn 1", "line": 1, "action": "error",
            "client_event_type": "conversation.item.create"})  # fmt: skip
    b.error("invalid_tool_call_id", "Injected by the script (turn 1).", b.event_id(c))
    b.close()
    return b


@scenario("output-for-unknown-call/negative-pipelined-call-and-output")
def _() -> TraceBuilder:
    """A replay pipelines the call and its output back to back: the pending call counts."""
    b = TraceBuilder()
    b.open()
    msg, call, out = user_msg("item_u1", "weather?"), fc("item_fc1", "call_1"), fco("item_out1", "call_1")
    b.create(msg, prev="root")
    b.create(call, prev="item_u1", dt=0.0001)
    b.create(out, prev="item_fc1", dt=0.0001)
    b.added(msg, None)
    b.added(call, "item_u1", dt=0.0001)
    b.added(out, "item_fc1", dt=0.0001)
    b.close()
    return b


# -- RT105 function-call-lost-on-reconnect / RT106 unconfirmed-item-lost-on-reconnect ----------------------


def reconnect_replay(b: TraceBuilder, conn: int, with_call: bool, args: str = '{"city": "Paris"}') -> None:
    b.open(conn, dt=0.1)
    b.client({"type": "session.update", "session": {"type": "realtime"}})
    msg = user_msg("item_u1", "What's the weather in Paris?")
    b.create(msg, prev="root", dt=0.0001)
    if with_call:
        b.create(fc("item_fc1", "call_1", args), prev="item_u1", dt=0.0001)
    b.server({"type": "session.updated", "session": {"type": "realtime"}}, b.latency)
    b.added(msg, None, dt=0.0001)
    if with_call:
        b.added(fc("item_fc1", "call_1", args), "item_u1", dt=0.0001)


@scenario("function-call-lost-on-reconnect/positive-replay-without-call")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    b.close(dt=0.06)
    reconnect_replay(b, 2, with_call=False)
    c = b.create(fco("item_out1", "call_1"), prev="item_u1", dt=0.15)
    b.error("invalid_tool_call_id", "Tool call ID 'call_1' not found in conversation.", b.event_id(c))
    rc = b.response_create()
    b.response_created("resp_2", b.event_id(rc))
    answer = assistant_msg("item_a2", "You said: What's the weather in Paris?")
    b.output_item("resp_2", answer, prev="item_u1", text_chunks=["You said: ..."])
    b.response_done("resp_2", output=[answer])
    b.close(dt=1.0)
    return b


@scenario("function-call-lost-on-reconnect/positive-two-reconnects")
def _() -> TraceBuilder:
    """The call survives the first reconnect and is lost on the second."""
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    b.close(1006, dt=0.06)
    reconnect_replay(b, 2, with_call=True)
    b.close(1006, dt=0.06)
    reconnect_replay(b, 3, with_call=False)
    rc = b.response_create(dt=0.1)
    b.response_created("resp_3", b.event_id(rc))
    b.response_done("resp_3", output=[])
    b.close(dt=1.0)
    return b


@scenario("function-call-lost-on-reconnect/positive-opened-before-close")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    tool_output_confirmed(b)
    b.open(2, dt=0.1)
    msg = user_msg("item_u1", "What's the weather in Paris?")
    b.create(msg, prev="root", dt=0.0001)  # the replay starts before the old socket's close is noted
    b.close(1006, dt=0.00015, conn=1)
    b.added(msg, None)
    rc = b.response_create()
    b.response_created("resp_2", b.event_id(rc))
    b.response_done("resp_2", output=[])
    b.close(dt=1.0)
    return b


@scenario("function-call-lost-on-reconnect/negative-opened-before-close-full-replay")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    tool_output_confirmed(b)
    out = fco("item_out1", "call_1")
    b.open(2, dt=0.1)
    b.close(1006, dt=0.00025, conn=1)
    msg, call = user_msg("item_u1", "What's the weather in Paris?"), fc("item_fc1", "call_1")
    b.create(msg, prev="root", dt=0.001)
    b.create(call, prev="item_u1", dt=0.0001)
    b.create(out, prev="item_fc1", dt=0.0001)
    b.added(msg, None)
    b.added(call, "item_u1", dt=0.0001)
    b.added(out, "item_fc1", dt=0.0001)
    rc = b.response_create()
    b.response_created("resp_2", b.event_id(rc))
    b.response_done("resp_2", output=[])
    b.close(dt=1.0)
    return b


def replay_under_new_ids(with_output: bool) -> TraceBuilder:
    """A tool turn and its output on conn 1; conn 2 replays the message, then the call and (maybe) its output
    under new item ids, same call_id and arguments, all acknowledged."""
    b = TraceBuilder()
    b.open()
    tool_output_confirmed(b)
    b.close(1006, dt=0.06)
    b.open(2, dt=0.1)
    msg, call, out = user_msg("item_u1", "What's the weather in Paris?"), fc("item_c2_fc", "call_1"), None
    b.create(msg, prev="root", dt=0.001)
    b.create(call, prev="item_u1", dt=0.0001)
    if with_output:
        out = fco("item_c2_out", "call_1")
        b.create(out, prev="item_c2_fc", dt=0.0001)
    b.added(msg, None)
    b.added(call, "item_u1", dt=0.0001)
    if out is not None:
        b.added(out, "item_c2_fc", dt=0.0001)
    rc = b.response_create()
    b.response_created("resp_2", b.event_id(rc))
    b.response_done("resp_2", output=[])
    b.close(dt=1.0)
    return b


@scenario("function-call-lost-on-reconnect/negative-replay-under-new-ids")
def _() -> TraceBuilder:
    """A complete replay: the call and its output come back under new item ids, matched by call_id."""
    return replay_under_new_ids(with_output=True)


@scenario("function-call-lost-on-reconnect/positive-output-not-replayed-under-new-ids")
def _() -> TraceBuilder:
    """The call comes back under a new id, its output does not come back at all."""
    return replay_under_new_ids(with_output=False)


@scenario("function-call-lost-on-reconnect/negative-replay-with-call")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    b.close(dt=0.06)
    reconnect_replay(b, 2, with_call=True)
    out = fco("item_out1", "call_1")
    b.create(out, prev="item_fc1", dt=0.15)
    b.added(out, "item_fc1")
    rc = b.response_create()
    b.response_created("resp_2", b.event_id(rc))
    b.response_done("resp_2", output=[])
    b.close(dt=1.0)
    return b


@scenario("unconfirmed-item-lost-on-reconnect/positive-create")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    msg = user_msg("item_u1", "What's the weather in Paris?")
    b.create(msg, prev="root")
    b.added(msg, None)
    b.create(user_msg("item_u2", "and tomorrow?"), prev="item_u1", dt=0.5)
    b.close(1006, dt=0.01)
    b.open(2, dt=0.1)
    b.create(msg, prev="root")
    b.added(msg, None)
    b.close(dt=1.0)
    return b


@scenario("unconfirmed-item-lost-on-reconnect/positive-delete-undone")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    m1, m2 = user_msg("item_u1", "hello"), user_msg("item_u2", "scratch that")
    b.create(m1, prev="root")
    b.added(m1, None)
    b.create(m2, prev="item_u1")
    b.added(m2, "item_u1")
    b.delete("item_u2", dt=0.5)
    b.close(1006, dt=0.01)
    b.open(2, dt=0.1)
    b.create(m1, prev="root")
    b.create(m2, prev="item_u1", dt=0.0001)
    b.added(m1, None)
    b.added(m2, "item_u1", dt=0.0001)
    b.close(dt=1.0)
    return b


def output_then_expiry(b: TraceBuilder) -> None:
    """A tool turn whose output create is still pending when the session expires (error with a null event_id)."""
    tool_turn(b)
    b.create(fco("item_out1", "call_1"), prev="item_fc1", dt=0.3)
    b.error("session_expired", "Your session hit the maximum duration of 60 minutes.", None, dt=0.02)
    b.close(1001, dt=0.001)


@scenario("unconfirmed-item-lost-on-reconnect/positive-session-expired-output")
def _() -> TraceBuilder:
    """`session_expired` answers no client event: the pending output is not taken as answered, and the replay
    (message and call, no output) loses it."""
    b = TraceBuilder()
    b.open()
    output_then_expiry(b)
    reconnect_replay(b, 2, with_call=True)
    b.close(dt=1.0)
    return b


@scenario("unconfirmed-item-lost-on-reconnect/negative-session-expired-output-resent")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    output_then_expiry(b)
    reconnect_replay(b, 2, with_call=True)
    out = fco("item_out1", "call_1")
    b.create(out, prev="item_fc1", dt=0.01)
    b.added(out, "item_fc1")
    rc = b.response_create()
    b.response_created("resp_2", b.event_id(rc))
    b.response_done("resp_2", output=[])
    b.close(dt=1.0)
    return b


@scenario("unconfirmed-item-lost-on-reconnect/negative-resent-before-old-close")
def _() -> TraceBuilder:
    """The new socket is open and re-sends the unconfirmed create before the old socket's close is noted."""
    b = TraceBuilder()
    b.open()
    msg, later = user_msg("item_u1", "What's the weather in Paris?"), user_msg("item_u2", "and tomorrow?")
    b.create(msg, prev="root")
    b.added(msg, None)
    b.create(later, prev="item_u1", dt=0.5)
    b.open(2, dt=0.01)
    b.create(msg, prev="root")
    b.create(later, prev="item_u1", dt=0.0001)
    b.close(1006, dt=0.0002, conn=1)
    b.added(msg, None)
    b.added(later, "item_u1", dt=0.0001)
    b.close(dt=1.0)
    return b


@scenario("unconfirmed-item-lost-on-reconnect/positive-opened-before-close")
def _() -> TraceBuilder:
    """agents-js: the new socket opens before the old close is noted, and replays without the unconfirmed create."""
    b = TraceBuilder()
    b.open()
    msg = user_msg("item_u1", "What's the weather in Paris?")
    b.create(msg, prev="root")
    b.added(msg, None)
    b.create(user_msg("item_u2", "and tomorrow?"), prev="item_u1", dt=0.5)
    b.open(2, dt=0.01)
    b.close(1006, dt=0.00025, conn=1)
    b.create(msg, prev="root")
    b.added(msg, None)
    b.close(dt=1.0)
    return b


@scenario("unconfirmed-item-lost-on-reconnect/negative-resent")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    msg, later = user_msg("item_u1", "What's the weather in Paris?"), user_msg("item_u2", "and tomorrow?")
    b.create(msg, prev="root")
    b.added(msg, None)
    b.create(later, prev="item_u1", dt=0.5)
    b.close(1006, dt=0.01)
    b.open(2, dt=0.1)
    b.create(msg, prev="root")
    b.create(later, prev="item_u1", dt=0.0001)
    b.added(msg, None)
    b.added(later, "item_u1", dt=0.0001)
    b.close(dt=1.0)
    return b


# -- RT107 orphaned-generation ------------------------------------------------------------------------------


@scenario("orphaned-generation/positive-replaced")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    rc = b.response_create()
    b.response_created("resp_1", b.event_id(rc))
    b.output_item("resp_1", assistant_msg("item_a1", "Hel"), prev=None, text_chunks=["Hel"])
    b.response_created("resp_2", None, dt=0.3)
    b.response_done("resp_2", output=[])
    b.close(dt=1.0)
    return b


@scenario("orphaned-generation/positive-connection-closed")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    rc = b.response_create()
    b.response_created("resp_1", b.event_id(rc))
    b.close(1011, dt=0.2)
    return b


@scenario("orphaned-generation/positive-local-generation")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    b.local({"type": "local.generation.opened", "response_id": "resp_1"})
    b.local({"type": "local.generation.opened", "response_id": "resp_2"}, dt=0.3)
    b.local({"type": "local.generation.closed", "response_id": "resp_2"}, dt=0.3)
    b.close(dt=1.0)
    return b


def streaming_answer_cut(b: TraceBuilder, fault: bool = True) -> None:
    """A text answer streaming when the server closes the socket (rtrace serve --close-after: a fault note)."""
    rc = b.response_create()
    b.response_created("resp_1", b.event_id(rc))
    start = {"id": "item_a1", "type": "message", "role": "assistant", "content": [], "status": "in_progress"}
    b.server({"type": "response.output_item.added", "response_id": "resp_1", "output_index": 0, "item": start})
    b.server({"type": "conversation.item.added", "previous_item_id": None, "item": start})
    for chunk in ("Once ", "upon "):
        base = {"response_id": "resp_1", "item_id": "item_a1", "output_index": 0, "content_index": 0}
        b.server({"type": "response.output_text.delta", **base, "delta": chunk}, 0.06)
    if fault:
        b.meta({"type": "fault.injected", "fault": "close-after", "spec": "12"})


@scenario("orphaned-generation/positive-cut-by-server-fault")
def _() -> TraceBuilder:
    """A mid-response fault: the wire cannot say whether the client closed its generation, so a warning."""
    b = TraceBuilder()
    b.open()
    streaming_answer_cut(b)
    b.close(1011)
    return b


@scenario("orphaned-generation/positive-cut-generation-left-open")
def _() -> TraceBuilder:
    """The client's own annotations show its generation left open after the cut: an error."""
    b = TraceBuilder()
    b.open()
    b.local({"type": "local.generation.opened", "response_id": "resp_1"})
    streaming_answer_cut(b)
    b.close(1011)
    b.open(2, dt=0.5)
    b.close(dt=1.0)
    return b


@scenario("orphaned-generation/negative-cut-client-closed-generation")
def _() -> TraceBuilder:
    """The annotations show the client closed its generation once the socket ended: nothing hangs."""
    b = TraceBuilder()
    b.open()
    b.local({"type": "local.generation.opened", "response_id": "resp_1"})
    streaming_answer_cut(b)
    b.close(1011)
    b.local({"type": "local.generation.closed", "response_id": "resp_1"}, dt=0.002)
    b.open(2, dt=0.5)
    b.close(dt=1.0)
    return b


@scenario("orphaned-generation/negative-cancelled")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    rc = b.response_create()
    b.response_created("resp_1", b.event_id(rc))
    b.client({"type": "response.cancel"}, dt=0.1)
    b.response_done("resp_1", "cancelled", dt=0.05)
    rc = b.response_create()
    b.response_created("resp_2", b.event_id(rc))
    b.response_done("resp_2")
    b.close(dt=1.0)
    return b


# -- RT108 failed-response-not-retried / RT109 retry-raced-by-new-response ----------------------------------


FAILURE = {"type": "server_error", "code": "server_error"}


@scenario("failed-response-not-retried/positive-never-retried")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    rc = b.response_create()
    b.response_created("resp_1", b.event_id(rc))
    b.response_done("resp_1", "failed", dt=0.1, error=FAILURE)
    b.close(dt=3.0)
    return b


@scenario("failed-response-not-retried/negative-retried")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    rc = b.response_create()
    b.response_created("resp_1", b.event_id(rc))
    b.response_done("resp_1", "failed", dt=0.1, error=FAILURE)
    rc = b.response_create(dt=0.2)
    b.response_created("resp_2", b.event_id(rc))
    b.response_done("resp_2")
    b.close(dt=1.0)
    return b


@scenario("retry-raced-by-new-response/positive-server-vad-first")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    rc = b.response_create()
    b.response_created("resp_1", b.event_id(rc))
    b.response_done("resp_1", "failed", dt=0.1, error=FAILURE)
    b.response_created("resp_2", None, dt=0.02)
    rc = b.response_create(dt=0.01)
    b.error("conversation_already_has_active_response", "Conversation already has an active response", b.event_id(rc))
    b.response_done("resp_2", dt=0.2)
    b.close(dt=1.0)
    return b


@scenario("retry-raced-by-new-response/negative-retry-first")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    rc = b.response_create()
    b.response_created("resp_1", b.event_id(rc))
    b.response_done("resp_1", "failed", dt=0.1, error=FAILURE)
    rc = b.response_create(dt=0.01)
    b.response_created("resp_2", b.event_id(rc))
    b.response_done("resp_2", dt=0.2)
    b.close(dt=1.0)
    return b


# -- RT110 ack-timeout -------------------------------------------------------------------------------------


@scenario("ack-timeout/positive-late-ack")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    msg = user_msg("item_u1", "hello")
    b.create(msg, prev="root")
    b.added(msg, None, dt=6.2)
    b.close(dt=0.5)
    return b


@scenario("ack-timeout/positive-never-answered")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    b.create(user_msg("item_u1", "hello"), prev="root")
    b.server({"type": "rate_limits.updated", "rate_limits": []}, dt=3.0)
    b.close(dt=4.0)
    return b


@scenario("ack-timeout/positive-cancel-error-is-not-the-delete")
def _() -> TraceBuilder:
    """`response_cancel_not_active` (event_id null) answers the cancel, not the older pending delete."""
    b = TraceBuilder()
    b.open()
    msg = user_msg("item_u1", "hello")
    b.create(msg, prev="root")
    b.added(msg, None)
    b.delete("item_u1", dt=0.5)
    b.client({"type": "response.cancel"}, dt=0.001)
    b.error("response_cancel_not_active", "Cancellation failed: no active response found", None)
    b.server({"type": "rate_limits.updated", "rate_limits": []}, dt=6.0)
    b.close(dt=0.5)
    return b


@scenario("ack-timeout/negative-delete-error-answers-the-delete")
def _() -> TraceBuilder:
    """`item_delete_invalid_item_id` (event_id null) answers the pending delete: it was answered in time."""
    b = TraceBuilder()
    b.open()
    b.client({"type": "response.cancel"}, dt=0.5)
    b.delete("item_gone", dt=0.001)
    b.error("item_delete_invalid_item_id", "Error deleting item: the item with id 'item_gone' does not exist.", None)
    b.error("response_cancel_not_active", "Cancellation failed: no active response found", None, dt=0.001)
    b.server({"type": "rate_limits.updated", "rate_limits": []}, dt=6.0)
    b.close(dt=0.5)
    return b


@scenario("ack-timeout/negative-slow-but-in-time")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    msg = user_msg("item_u1", "hello")
    b.create(msg, prev="root")
    b.added(msg, None, dt=4.0)
    b.close(dt=0.5)
    return b


# -- RT111 concurrent-response-create / RT112 server-error --------------------------------------------------


@scenario("concurrent-response-create/positive-rejected")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    rc = b.response_create()
    b.response_created("resp_1", b.event_id(rc))
    rc2 = b.response_create(dt=0.05)
    b.error(
        "conversation_already_has_active_response",
        "Conversation already has an active response in progress: resp_1. Wait until the response is finished "
        "before creating a new one.",
        b.event_id(rc2),
    )
    b.response_done("resp_1", dt=0.1)
    b.close(dt=1.0)
    return b


@scenario("concurrent-response-create/negative-server-finished-first")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    rc = b.response_create()
    b.response_created("resp_1", b.event_id(rc))
    rc2 = b.response_create(dt=0.05)
    b.response_done("resp_1", dt=0.01)
    b.response_created("resp_2", b.event_id(rc2), dt=0.04)
    b.response_done("resp_2", dt=0.1)
    b.close(dt=1.0)
    return b


@scenario("concurrent-response-create/negative-injected-active-response")
def _() -> TraceBuilder:
    """`serve` injected the refusal (its fault note before it) while no response existed: the fault, not the client."""
    b = TraceBuilder()
    b.open()
    rc = b.response_create()
    b.meta({"type": "fault.injected", "fault": "script", "spec": "turn 1", "line": 1, "action": "error",
            "client_event_type": "response.create"})  # fmt: skip
    b.error("conversation_already_has_active_response", "Injected by the script (turn 1).", b.event_id(rc))
    b.close(dt=1.0)
    return b


@scenario("server-error/positive-cancel-not-active")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    c = b.client({"type": "response.cancel"})
    b.error("response_cancel_not_active", "Cancellation failed: no active response found", b.event_id(c))
    b.close(dt=1.0)
    return b


@scenario("server-error/negative-clean-session")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    msg = user_msg("item_u1", "hello")
    b.create(msg, prev="root")
    b.added(msg, None)
    b.close(dt=1.0)
    return b


# -- RT113 arguments-lost-in-replay ------------------------------------------------------------------------


@scenario("arguments-lost-in-replay/positive-empty-arguments")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    b.close(1006, dt=0.06)
    reconnect_replay(b, 2, with_call=True, args="")
    b.close(dt=1.0)
    return b


@scenario("arguments-lost-in-replay/negative-arguments-kept")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    b.close(1006, dt=0.06)
    reconnect_replay(b, 2, with_call=True)
    b.close(dt=1.0)
    return b


# -- RT114 truncate-beyond-audio ---------------------------------------------------------------------------


def audio_answer(b: TraceBuilder, ms: int) -> None:
    rc = b.response_create()
    b.response_created("resp_1", b.event_id(rc))
    answer = {"id": "item_a1", "type": "message", "role": "assistant", "content": []}
    b.output_item("resp_1", answer, prev=None, audio_b64=[pcm_b64(ms // 2), pcm_b64(ms - ms // 2)])
    b.response_done("resp_1", output=[answer])


@scenario("truncate-beyond-audio/positive-past-the-audio")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    audio_answer(b, 1000)
    t = b.client(
        {"type": "conversation.item.truncate", "item_id": "item_a1", "content_index": 0, "audio_end_ms": 2500}, dt=0.5
    )
    b.error("invalid_value", "Audio content of 1000ms is already shorter than 2500ms", b.event_id(t))
    b.close(dt=1.0)
    return b


@scenario("truncate-beyond-audio/positive-zero")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    audio_answer(b, 1000)
    b.client({"type": "conversation.item.truncate", "item_id": "item_a1", "content_index": 0, "audio_end_ms": 0})
    b.server(
        {"type": "conversation.item.truncated", "item_id": "item_a1", "content_index": 0, "audio_end_ms": 0}, b.latency
    )
    b.close(dt=1.0)
    return b


@scenario("truncate-beyond-audio/negative-within-audio")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    audio_answer(b, 1000)
    b.client({"type": "conversation.item.truncate", "item_id": "item_a1", "content_index": 0, "audio_end_ms": 640})
    b.server(
        {"type": "conversation.item.truncated", "item_id": "item_a1", "content_index": 0, "audio_end_ms": 640},
        b.latency,
    )
    b.close(dt=1.0)
    return b


# -- RT115 local-server-divergence -------------------------------------------------------------------------


def local_snapshot(b: TraceBuilder, items: list[dict[str, object]], dt: float = 0.0005) -> int:
    return b.local({"type": "local.conversation", "items": items}, dt)


@scenario("local-server-divergence/positive-output-never-on-server")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    out = fco("item_out1", "call_1")
    local_snapshot(b, [user_msg("item_u1", "?"), fc("item_fc1", "call_1"), out], dt=0.3)
    c = b.create(out, prev="item_fc1")
    b.error("server_error", "The server had an error while processing your request.", b.event_id(c))
    b.server({"type": "rate_limits.updated", "rate_limits": []}, dt=6.0)
    b.close(dt=1.0)
    return b


@scenario("local-server-divergence/negative-push-catches-up")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    out = fco("item_out1", "call_1")
    local_snapshot(b, [user_msg("item_u1", "?"), fc("item_fc1", "call_1"), out], dt=0.3)
    b.create(out, prev="item_fc1")
    b.added(out, "item_fc1")
    b.server({"type": "rate_limits.updated", "rate_limits": []}, dt=6.0)
    b.close(dt=1.0)
    return b


# -- RT116-RT121: the server's own event stream (docs/protocol.md section 5) ---------------------------------------


@scenario("response-done-without-created/positive-unknown-response")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    b.response_done("resp_9", "cancelled", dt=0.2)
    b.close(dt=1.0)
    return b


@scenario("response-done-without-created/negative-created-first")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    rc = b.response_create()
    b.response_created("resp_1", b.event_id(rc))
    b.response_done("resp_1", dt=0.2)
    b.close(dt=1.0)
    return b


@scenario("unknown-previous-item/positive-lost-predecessor")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    b.added(user_msg("item_u2", "hi"), "item_never_seen")
    b.close(dt=1.0)
    return b


@scenario("unknown-previous-item/negative-known-predecessor")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    b.added(user_msg("item_u1", "hi"), None)
    b.added(user_msg("item_u2", "again"), "item_u1")
    b.close(dt=1.0)
    return b


@scenario("duplicate-item-id/positive-create-retried")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    msg = user_msg("item_u1", "hello")
    b.create(msg, prev="root")
    b.added(msg, None)
    b.create(msg, dt=1.0)
    b.added(msg, "item_u1")
    b.close(dt=1.0)
    return b


@scenario("duplicate-item-id/negative-delete-then-create")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    msg = user_msg("item_u1", "hello")
    b.create(msg, prev="root")
    b.added(msg, None)
    b.delete("item_u1", dt=1.0)
    b.create(msg, prev="root", dt=0.0001)
    b.deleted("item_u1")
    b.added(msg, None, dt=0.0001)
    b.close(dt=1.0)
    return b


@scenario("session-expired/positive-mid-response")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    rc = b.response_create(dt=3599.5)
    b.response_created("resp_1", b.event_id(rc))
    b.error("session_expired", "Your session hit the maximum duration of 60 minutes.", None, dt=0.5)
    b.close(1001, dt=0.001)
    return b


@scenario("session-expired/negative-other-error")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    c = b.client({"type": "response.cancel"})
    b.error("response_cancel_not_active", "Cancellation failed: no active response found", b.event_id(c))
    b.close(dt=1.0)
    return b


@scenario("reconnect-loop-on-fatal-error/positive-quota-loop")
def _() -> TraceBuilder:
    b = TraceBuilder()
    for conn in (1, 2, 3):
        b.open(conn, dt=0.5)
        b.error("insufficient_quota", "You exceeded your current quota.", None, dt=0.01)
        b.close(1008, dt=0.01)
    return b


@scenario("reconnect-loop-on-fatal-error/negative-gave-up")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    b.error("insufficient_quota", "You exceeded your current quota.", None, dt=0.01)
    b.close(1008, dt=0.01)
    return b


@scenario("duplicate-response-done/positive-done-twice")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    rc = b.response_create()
    b.response_created("resp_1", b.event_id(rc))
    b.response_done("resp_1", dt=0.2)
    b.response_done("resp_1", dt=0.01)
    b.close(dt=1.0)
    return b


@scenario("duplicate-response-done/negative-two-responses")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    for rid in ("resp_1", "resp_2"):
        rc = b.response_create()
        b.response_created(rid, b.event_id(rc))
        b.response_done(rid, dt=0.2)
    b.close(dt=1.0)
    return b


# -- RT122-RT125: losses at a close, on a reconnect, and after a tool output ---------------------------------


def output_and_message_pending(b: TraceBuilder) -> None:
    """A tool turn; the tool output and the user's next message are sent and the socket dies before any ack."""
    tool_turn(b)
    b.create(fco("item_out1", "call_1"), prev="item_fc1", dt=0.3)
    b.create(user_msg("item_u2", "Thanks! And tomorrow?"), prev="item_out1", dt=0.2)
    b.close(1006, dt=0.01)


@scenario("changes-lost-at-final-close/positive-never-reconnected")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    output_and_message_pending(b)
    return b


@scenario("changes-lost-at-final-close/negative-reconnected-and-resent")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    output_and_message_pending(b)
    reconnect_replay(b, 2, with_call=True)
    out, msg = fco("item_out1", "call_1"), user_msg("item_u2", "Thanks! And tomorrow?")
    b.create(out, prev="item_fc1", dt=0.01)
    b.create(msg, prev="item_out1", dt=0.0001)
    b.added(out, "item_fc1")
    b.added(msg, "item_out1", dt=0.0001)
    rc = b.response_create()
    b.response_created("resp_2", b.event_id(rc))
    b.response_done("resp_2", output=[])
    b.close(dt=1.0)
    return b


@scenario("changes-lost-at-final-close/negative-trace-ends")
def _() -> TraceBuilder:
    """The recording stops with the changes in flight: nothing says the session was lost."""
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    b.create(fco("item_out1", "call_1"), prev="item_fc1", dt=0.3)
    b.create(user_msg("item_u2", "Thanks! And tomorrow?"), prev="item_out1", dt=0.2)
    return b


def first_session(b: TraceBuilder) -> None:
    """A configured session with one exchange, then a dropped socket."""
    b.client({"type": "session.update", "session": {"type": "realtime", "instructions": "Be brief."}})
    b.server({"type": "session.updated", "session": {"type": "realtime"}}, b.latency)
    msg = user_msg("item_u1", "My name is Ada.")
    b.create(msg, prev="root", dt=0.5)
    b.added(msg, None)
    rc = b.response_create()
    b.response_created("resp_1", b.event_id(rc))
    answer = assistant_msg("item_a1", "Hello Ada.")
    b.output_item("resp_1", answer, prev="item_u1", text_chunks=["Hello Ada."])
    b.response_done("resp_1", output=[answer])
    b.close(1006, dt=2.0)


@scenario("reconnect-restores-nothing/positive-new-socket-only")
def _() -> TraceBuilder:
    """The openai SDK's opt-in reconnect: a new socket, no session.update, no replay, then the next turn."""
    b = TraceBuilder()
    b.open()
    first_session(b)
    b.open(2, dt=0.2)
    msg = user_msg("item_u2", "What is my name?")
    b.create(msg, dt=1.0)
    b.added(msg, None)
    rc = b.response_create()
    b.response_created("resp_2", b.event_id(rc))
    answer = assistant_msg("item_a2", "I don't know your name.")
    b.output_item("resp_2", answer, prev="item_u2", text_chunks=["I don't know your name."])
    b.response_done("resp_2", output=[answer])
    b.close(dt=1.0)
    return b


@scenario("reconnect-restores-nothing/negative-session-and-replay")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    first_session(b)
    b.open(2, dt=0.2)
    b.client({"type": "session.update", "session": {"type": "realtime", "instructions": "Be brief."}})
    first = user_msg("item_u1", "My name is Ada.")
    b.create(first, prev="root", dt=0.0001)
    b.server({"type": "session.updated", "session": {"type": "realtime"}}, b.latency)
    b.added(first, None, dt=0.0001)
    msg = user_msg("item_u2", "What is my name?")
    b.create(msg, prev="item_u1", dt=1.0)
    b.added(msg, "item_u1")
    rc = b.response_create()
    b.response_created("resp_2", b.event_id(rc))
    b.response_done("resp_2", output=[])
    b.close(dt=1.0)
    return b


@scenario("reconnect-restores-nothing/negative-replay-not-visible")
def _() -> TraceBuilder:
    """A trace converted from a log that omits the reconnect replay says so: the replay cannot be judged."""
    b = TraceBuilder()
    b.open()
    first_session(b)
    b.meta({"type": "connection.opened", "path": "/v1/realtime?model=gpt-realtime", "replay_visible": False}, 0.2, 2)
    b.conn = 2
    b.server({"type": "session.created", "session": {"id": "sess_2", "type": "realtime"}})
    msg = user_msg("item_u2", "What is my name?")
    b.create(msg, dt=1.0)
    b.added(msg, None)
    rc = b.response_create()
    b.response_created("resp_2", b.event_id(rc))
    b.response_done("resp_2", output=[])
    b.close(dt=1.0)
    return b


def closed_while_the_tool_runs(b: TraceBuilder) -> None:
    """A configured session, a tool turn (call_1), and the socket closes (1011) while the tool runs."""
    b.client({"type": "session.update", "session": {"type": "realtime", "instructions": "Be brief."}})
    b.server({"type": "session.updated", "session": {"type": "realtime"}}, b.latency)
    tool_turn(b)
    b.close(1011, dt=0.05)


def answer(b: TraceBuilder, rc: int, text: str, prev: str | None, rid: str = "resp_2", dt: float | None = None) -> None:
    """The response asked for at line `rc`, generated: created, one assistant message saying `text`, done."""
    b.response_created(rid, b.event_id(rc), dt=dt)
    said = assistant_msg(f"item_a_{rid}", text)
    b.output_item(rid, said, prev=prev, text_chunks=[text])
    b.response_done(rid, output=[said])


def answer_from_an_empty_session(b: TraceBuilder, rc: int, prev: str | None = None) -> None:
    """The new session's answer to the `response.create` at line `rc`, with no memory of the old one."""
    answer(b, rc, "Hello! How can I help?", prev)


@scenario("reconnect-restores-nothing/positive-queue-flushed-output-rejected")
def _() -> TraceBuilder:
    """The openai Node SDK 7 with `reconnect: true` and an app that only calls `flushPending()`: the new
    connection's first events are the queued output of the old call (rejected) and a response.create."""
    b = TraceBuilder()
    b.open()
    closed_while_the_tool_runs(b)
    b.open(2, dt=0.1)
    out = b.create(fco(None, "call_1"), dt=0.2)
    b.error("invalid_tool_call_id", "Tool call ID 'call_1' not found in conversation.", b.event_id(out))
    rc = b.response_create(dt=0.001)
    answer_from_an_empty_session(b, rc)
    b.close(dt=1.0)
    return b


@scenario("reconnect-restores-nothing/positive-queue-flushed-pipelined")
def _() -> TraceBuilder:
    """The openai Python SDK's reconnect without the app's session.update: the queued output and its
    response.create leave together, before the server rejects the output; the answer is generated anyway."""
    b = TraceBuilder()
    b.open()
    closed_while_the_tool_runs(b)
    b.open(2, dt=0.1)
    out = b.create(fco(None, "call_1"), dt=0.2)
    rc = b.response_create(dt=0.0002)
    b.error("invalid_tool_call_id", "Tool call ID 'call_1' not found in conversation.", b.event_id(out))
    answer(b, rc, "Hello! How can I help?", None, dt=0.001)
    b.close(dt=1.0)
    return b


@scenario("reconnect-restores-nothing/positive-replay-rejected")
def _() -> TraceBuilder:
    """A replay the server refused (the old message re-created with an id it rejects) restores nothing."""
    b = TraceBuilder()
    b.open()
    first_session(b)
    b.open(2, dt=0.2)
    again = b.create(user_msg("item_u1", "My name is Ada."), prev="root", dt=0.01)
    b.error("invalid_value", "Invalid 'item.id': previous_item_id 'root' does not exist.", b.event_id(again))
    msg = user_msg("item_u2", "What is my name?")
    b.create(msg, dt=1.0)
    b.added(msg, None)
    rc = b.response_create()
    answer_from_an_empty_session(b, rc, prev="item_u2")
    b.close(dt=1.0)
    return b


@scenario("reconnect-restores-nothing/negative-call-then-output-recreated")
def _() -> TraceBuilder:
    """A reconnect that re-creates the old call, then sends its output: the new session holds both."""
    b = TraceBuilder()
    b.open()
    closed_while_the_tool_runs(b)
    b.open(2, dt=0.1)
    call = fc("item_fc1", "call_1")
    b.create(call, prev="root", dt=0.2)
    out = fco("item_out1", "call_1")
    b.create(out, prev="item_fc1", dt=0.0002)
    b.added(call, None)
    b.added(out, "item_fc1", dt=0.0002)
    rc = b.response_create(dt=0.001)
    answer(b, rc, "It is sunny in Paris.", "item_out1")
    b.close(dt=1.0)
    return b


def output_into_the_closing_socket(b: TraceBuilder, code: int = 1011, with_reply: bool = True) -> None:
    """A tool turn; the server closes while the tool runs (its close note), and the client, which has not read the
    close frame yet, writes the tool output (and its response.create) into the closing socket."""
    b.client({"type": "session.update", "session": {"type": "realtime"}})
    b.server({"type": "session.updated", "session": {"type": "realtime"}}, b.latency)
    tool_turn(b)
    b.meta({"type": "connection.closed", "by": "server", "code": code}, dt=0.25)
    b.create(fco("item_out1", "call_1"), prev="item_fc1", dt=0.0003)
    if with_reply:
        b.response_create(dt=0.0002)


@scenario("changes-lost-at-final-close/positive-output-into-the-closing-socket")
def _() -> TraceBuilder:
    """@openai/agents-realtime / the openai Node SDK without reconnect: output and response.create written after
    the server's close note (1011), never answered, no reconnect."""
    b = TraceBuilder()
    b.open()
    output_into_the_closing_socket(b)
    return b


@scenario("changes-lost-at-final-close/positive-output-into-an-expiring-session")
def _() -> TraceBuilder:
    """Voice Live / the openai Python SDK on a session that expired (1001): only the output goes after the close."""
    b = TraceBuilder()
    b.open()
    output_into_the_closing_socket(b, code=1001, with_reply=False)
    b.meta({"type": "note", "note": "client: ConnectionClosed 1001 on the next read"}, dt=0.01)
    return b


@scenario("changes-lost-at-final-close/negative-output-into-the-closing-socket-resent")
def _() -> TraceBuilder:
    """The output written into the closing socket is sent again, with its call, by the next connection and
    acknowledged there: nothing is lost."""
    b = TraceBuilder()
    b.open()
    output_into_the_closing_socket(b)
    b.open(2, dt=0.3)
    call, out = fc("item_fc1", "call_1"), fco("item_out1", "call_1")
    b.create(call, prev="root", dt=0.01)
    b.added(call, None)
    b.create(out, prev="item_fc1")
    b.added(out, "item_fc1")
    rc = b.response_create()
    answer(b, rc, "It is sunny in Paris.", "item_out1")
    b.close(dt=1.0)
    return b


@scenario("unconfirmed-item-lost-on-reconnect/positive-output-into-the-closing-socket")
def _() -> TraceBuilder:
    """The output written into the closing socket, then a reconnect that replays the call but not the output."""
    b = TraceBuilder()
    b.open()
    output_into_the_closing_socket(b, with_reply=False)
    b.open(2, dt=0.3)
    call = fc("item_fc1", "call_1")
    b.create(call, prev="root", dt=0.01)
    b.added(call, None)
    b.close(dt=2.0)
    return b


def answer_without_the_tool(b: TraceBuilder, rc: int, rid: str, prev: str | None) -> None:
    """The response asked for at line `rc`, generated right away, without the tool result."""
    answer(b, rc, "The tool is still running.", prev, rid, dt=0.002)


@scenario("unanswered-function-call/positive-pipelined-output-rejected")
def _() -> TraceBuilder:
    """@openai/agents-realtime / openai-agents: the output and the response.create leave together; the server
    rejects the output and generates the response anyway."""
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    out = b.create(fco("item_out1", "call_1", output="x" * 40), prev="item_fc1", dt=0.3)
    rc = b.response_create(dt=0.0002)
    b.error("invalid_value", "Invalid 'item.output': string too long.", b.event_id(out))
    answer_without_the_tool(b, rc, "resp_2", "item_fc1")
    b.close(dt=1.0)
    return b


@scenario("unanswered-function-call/positive-pipelined-replay-output-rejected")
def _() -> TraceBuilder:
    """A reconnect replay sent in one go (livekit-agents 2.0, openai-agents): the call, its output and a
    response.create before any answer; the call is accepted, the output rejected, the response runs without it."""
    b = TraceBuilder()
    b.open()
    closed_while_the_tool_runs(b)
    b.open(2, dt=0.1)
    b.client({"type": "session.update", "session": {"type": "realtime"}}, dt=0.01)
    call = fc("item_fc1", "call_1")
    b.create(call, prev="root", dt=0.0002)
    out = b.create(fco("item_out1", "call_1", output="x" * 40), prev="item_fc1", dt=0.0002)
    rc = b.response_create(dt=0.0002)
    b.server({"type": "session.updated", "session": {"type": "realtime"}}, b.latency)
    b.added(call, None, dt=0.0002)
    b.error("invalid_value", "Invalid 'item.output': string too long.", b.event_id(out), dt=0.0002)
    answer_without_the_tool(b, rc, "resp_2", "item_fc1")
    b.close(dt=1.0)
    return b


@scenario("unanswered-function-call/positive-pipelined-output-never-confirmed")
def _() -> TraceBuilder:
    """The response runs while the pipelined output is never acknowledged, and the socket drops after it."""
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    b.create(fco("item_out1", "call_1"), prev="item_fc1", dt=0.3)
    rc = b.response_create(dt=0.0002)
    answer_without_the_tool(b, rc, "resp_2", "item_fc1")
    b.close(1006, dt=0.2)
    return b


@scenario("unanswered-function-call/negative-pipelined-output-confirmed")
def _() -> TraceBuilder:
    """Output and response.create pipelined; the output is acknowledged before the response: nothing is missing."""
    b = TraceBuilder()
    b.open()
    tool_turn(b)
    out = fco("item_out1", "call_1")
    b.create(out, prev="item_fc1", dt=0.3)
    rc = b.response_create(dt=0.0002)
    b.added(out, "item_fc1")
    answer(b, rc, "It is sunny in Paris.", "item_out1", dt=0.002)
    b.close(dt=1.0)
    return b


@scenario("unanswered-function-call/negative-pipelined-replay-confirmed")
def _() -> TraceBuilder:
    """A replay sent in one go whose call and output are both accepted before the response."""
    b = TraceBuilder()
    b.open()
    closed_while_the_tool_runs(b)
    b.open(2, dt=0.1)
    call, out = fc("item_fc1", "call_1"), fco("item_out1", "call_1")
    b.create(call, prev="root", dt=0.01)
    b.create(out, prev="item_fc1", dt=0.0002)
    rc = b.response_create(dt=0.0002)
    b.added(call, None)
    b.added(out, "item_fc1", dt=0.0002)
    answer(b, rc, "It is sunny in Paris.", "item_out1", dt=0.002)
    b.close(dt=1.0)
    return b


def reply_dropped(b: TraceBuilder) -> None:
    """livekit-agents under `rtrace serve --drop-on response.create`: the socket closes on the reply's request."""
    b.client({"type": "session.update", "session": {"type": "realtime"}})
    msg = user_msg("item_u1", "What's the weather in Paris?")
    b.create(msg, prev="root", dt=0.0001)
    b.server({"type": "session.updated", "session": {"type": "realtime"}}, b.latency)
    b.added(msg, None, dt=0.0001)
    rc = b.response_create(dt=0.01)
    b.meta({"type": "fault.injected", "fault": "drop-on", "spec": "response.create", "client_event_id": b.event_id(rc)})
    b.close(1000, dt=0.003)
    reconnect_replay(b, 2, with_call=False)


@scenario("response-create-lost-on-reconnect/positive-pending-reply-discarded")
def _() -> TraceBuilder:
    """livekit-agents 1.8.9: the replay comes, the pending reply does not ("pending response discarded")."""
    b = TraceBuilder()
    b.open()
    reply_dropped(b)
    b.close(dt=29.3)
    return b


@scenario("response-create-lost-on-reconnect/negative-asked-again-on-next-connection")
def _() -> TraceBuilder:
    """livekit-agents 2.0.0b1 re-sends the pending response.create after the replay."""
    b = TraceBuilder()
    b.open()
    reply_dropped(b)
    rc = b.response_create(dt=0.0001)
    b.response_created("resp_1", b.event_id(rc))
    b.response_done("resp_1", output=[])
    b.close(dt=1.0)
    return b


# -- RT126 turn-never-completed / RT127 no-reconnect-after-abnormal-close -----------------------------------


def cut_in_flight() -> TraceBuilder:
    """A user turn whose response a fault's close cuts right after `response.created`; the client reconnects and
    replays the conversation (livekit-agents: the turn's future stays pending)."""
    b = TraceBuilder()
    b.open()
    b.client({"type": "session.update", "session": {"type": "realtime"}})
    msg = user_msg("item_u1", "What's the weather in Paris?")
    b.create(msg, prev="root", dt=0.0001)
    b.server({"type": "session.updated", "session": {"type": "realtime"}}, b.latency)
    b.added(msg, None, dt=0.0001)
    rc = b.response_create(dt=0.01)
    b.response_created("resp_1", b.event_id(rc))
    b.meta({"type": "fault.injected", "fault": "script", "spec": "turn 1", "line": 1, "action": "close"})
    b.close(1011, dt=0.001)
    reconnect_replay(b, 2, with_call=False)
    return b


@scenario("turn-never-completed/positive-silent-after-reconnect")
def _() -> TraceBuilder:
    b = cut_in_flight()
    b.server({"type": "rate_limits.updated", "rate_limits": []}, dt=12.0)
    b.close(dt=1.0)
    return b


@scenario("turn-never-completed/positive-new-connection-closed-without-asking")
def _() -> TraceBuilder:
    """The client is killed (or gives the turn up) on the new connection without asking again."""
    b = cut_in_flight()
    b.close(1006, dt=2.0)
    return b


@scenario("turn-never-completed/positive-closed-after-the-replay")
def _() -> TraceBuilder:
    """The client replayed the conversation, waited for the cut response, and its test's deadline closed it (1000)."""
    b = cut_in_flight()
    b.close(1000, dt=2.0)
    return b


@scenario("turn-never-completed/negative-asked-again")
def _() -> TraceBuilder:
    b = cut_in_flight()
    rc = b.response_create(dt=0.01)
    b.response_created("resp_2", b.event_id(rc))
    b.response_done("resp_2", output=[], dt=0.2)
    b.server({"type": "rate_limits.updated", "rate_limits": []}, dt=12.0)
    b.close(dt=1.0)
    return b


@scenario("turn-never-completed/negative-recording-stopped")
def _() -> TraceBuilder:
    """The trace stops 2 s after the reconnect, the connection still open: no time to judge the client by."""
    b = cut_in_flight()
    b.server({"type": "rate_limits.updated", "rate_limits": []}, dt=2.0)
    return b


@scenario("turn-never-completed/negative-response-done-before-the-close")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    rc = b.response_create()
    b.response_created("resp_1", b.event_id(rc))
    b.response_done("resp_1", output=[], dt=0.1)
    b.close(1011, dt=0.01)
    reconnect_replay(b, 2, with_call=False)
    b.server({"type": "rate_limits.updated", "rate_limits": []}, dt=12.0)
    b.close(dt=1.0)
    return b


def fault_close(code: int, reconnect: bool = False) -> TraceBuilder:
    """A user message, then a script fault's close with `code` (its note before it); a reconnect after it or not."""
    b = TraceBuilder()
    b.open()
    msg = user_msg("item_u1", "hi")
    b.create(msg, prev="root")
    b.added(msg, None)
    b.meta({"type": "fault.injected", "fault": "script", "spec": "turn 1", "line": 1, "action": "close"})
    b.close(code, dt=0.001)
    if reconnect:
        reconnect_replay(b, 2, with_call=False)
        b.close(dt=1.0)
    return b


scenario("no-reconnect-after-abnormal-close/positive-gave-up-after-1011")(lambda: fault_close(1011))
scenario("no-reconnect-after-abnormal-close/positive-gave-up-after-a-drop")(lambda: fault_close(1006))
scenario("no-reconnect-after-abnormal-close/negative-reconnected")(lambda: fault_close(1011, reconnect=True))
# a fault's close 1000 ends the session normally: no reason to come back
scenario("no-reconnect-after-abnormal-close/negative-normal-close")(lambda: fault_close(1000))


@scenario("no-reconnect-after-abnormal-close/negative-real-server-close")
def _() -> TraceBuilder:
    """A real server's 1011 with no fault note: the recording may have stopped before the client came back."""
    b = TraceBuilder()
    b.open()
    msg = user_msg("item_u1", "hi")
    b.create(msg, prev="root")
    b.added(msg, None)
    b.close(1011, dt=0.001)
    return b


@scenario("no-response-after-tool-output/positive-silent-after-output")
def _() -> TraceBuilder:
    b = TraceBuilder()
    b.open()
    tool_output_confirmed(b)
    b.server({"type": "rate_limits.updated", "rate_limits": []}, dt=12.0)
    b.close(dt=1.0)
    return b


@scenario("no-response-after-tool-output/negative-out-of-band-response")
def _() -> TraceBuilder:
    """The agent speaks about the result in an out-of-band response: it did not go silent."""
    b = TraceBuilder()
    b.open()
    tool_output_confirmed(b)
    rc = b.response_create(dt=0.01, conversation="none")
    resp = {"object": "realtime.response", "id": "resp_oob", "status": "in_progress", "conversation_id": None}
    resp["metadata"] = {"client_event_id": b.event_id(rc)}
    b.server({"type": "response.created", "response": resp}, b.latency)
    b.response_done("resp_oob", dt=0.2)
    b.server({"type": "rate_limits.updated", "rate_limits": []}, dt=12.0)
    b.close(dt=1.0)
    return b


@scenario("no-response-after-tool-output/negative-replayed-output")
def _() -> TraceBuilder:
    """A reconnect replays the old call and its output: no tool answered, nothing to reply to."""
    b = TraceBuilder()
    b.open()
    tool_output_confirmed(b)
    rc = b.response_create(dt=0.01)
    b.response_created("resp_2", b.event_id(rc))
    b.response_done("resp_2", output=[])
    b.close(1000, dt=1.0)
    reconnect_replay(b, 2, with_call=True)
    out = fco("item_out1", "call_1")
    b.create(out, prev="item_fc1", dt=0.0001)
    b.added(out, "item_fc1")
    b.server({"type": "rate_limits.updated", "rate_limits": []}, dt=12.0)
    b.close(dt=1.0)
    return b


@scenario("no-response-after-tool-output/negative-trace-ends")
def _() -> TraceBuilder:
    """The recording stops 2 s after the output: too soon to say the agent stayed silent."""
    b = TraceBuilder()
    b.open()
    tool_output_confirmed(b)
    b.server({"type": "rate_limits.updated", "rate_limits": []}, dt=2.0)
    return b


# -- writing ----------------------------------------------------------------------------------------------


def expected_of(path: Path) -> dict[str, object]:
    """The stable facts of a trace's report: per finding its rule, slug and witness lines, and its severity when
    it is not the rule's own (a rule whose evidence decides, e.g. `orphaned-generation`)."""
    report = analyze_path(path)
    findings: list[dict[str, object]] = []
    for f in report.findings:
        entry: dict[str, object] = {"rule": f.rule, "slug": f.slug, "lines": list(f.lines)}
        if f.severity != find_rule(f.rule).severity:
            entry["severity"] = f.severity
        findings.append(entry)
    return {"trace": path.name, "problems": report.problem_count, "findings": findings}


def expected_path(trace: Path) -> Path:
    return trace.with_name(trace.name.removesuffix(".jsonl") + ".expected.json")


def all_sample_traces() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.jsonl"))


def write_expected(trace: Path) -> None:
    data = orjson.dumps(expected_of(trace), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    expected_path(trace).write_bytes(data)


def main(argv: list[str]) -> int:
    if "--expected" not in argv:
        for name, build in sorted(SCENARIOS.items()):
            build().write(RULES_DIR / f"{name}.jsonl")
    for trace in all_sample_traces():
        write_expected(trace)
    print(f"{len(SCENARIOS)} scenarios, {len(all_sample_traces())} expected files written under {ROOT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
