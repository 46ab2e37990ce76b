"""The server's answers (`core.answers`): errors joined to the change they answer, responses to their requests."""

from __future__ import annotations

from typing import Any

from rtrace.core.describe import describe
from rtrace.core.facts import (
    ChangeAnswered,
    ChangeSent,
    ItemAdded,
    ResponseCreated,
    ResponseDone,
    ServerError,
    SessionUpdated,
)
from rtrace.core.reducer import SENT_KEPT
from rtrace.core.state import unfinished_call

from .hand_trace import Trace, response_body

# -- errors -------------------------------------------------------------------------------------------------


def _err(message: str = "", event_id: str | None = None, code: str = "x") -> dict[str, Any]:
    return {"type": "invalid_request_error", "code": code, "message": message, "event_id": event_id}


def test_error_joined_by_event_id() -> None:
    t = Trace()
    t.create("a")
    c2 = t.create("b")
    line = t.s("error", error=_err("Item 'a' is bad", event_id=f"ev_{c2}"))
    fact = t.fact(line, ServerError)
    assert fact.cause is not None and fact.cause.line == c2 and fact.how == "event-id"
    assert fact.cause.status == "rejected" and fact.cause.error == _err("Item 'a' is bad", event_id=f"ev_{c2}")
    assert t.fact(line, ChangeAnswered).how == "event-id"


def test_error_joined_by_quoted_id_when_event_id_is_null() -> None:
    t = Trace()
    t.create("a")
    c2 = t.create("o", type="function_call_output", call_id="call_9")
    line = t.s("error", error=_err("Tool call ID 'call_9' not found in conversation.", code="invalid_tool_call_id"))
    fact = t.fact(line, ServerError)
    assert fact.cause is not None and (fact.cause.line, fact.how) == (c2, "quoted-id")


def test_error_joined_by_quoted_previous_item_id() -> None:
    t = Trace()
    t.create("a")
    c2 = t.create("b", "zz")
    line = t.s("error", error=_err("Previous item 'zz' does not exist"))
    assert (t.fact(line, ServerError).cause.line, t.fact(line, ServerError).how) == (c2, "quoted-id")


def test_error_joined_by_order_last() -> None:
    t = Trace()
    c1 = t.c("session.update")
    t.create("a")
    line = t.s("error", error=_err("something", event_id="unknown_event"))
    fact = t.fact(line, ServerError)
    assert fact.cause is not None and (fact.cause.line, fact.how) == (c1, "order")


def test_error_joined_by_order_only_to_an_event_its_code_can_answer() -> None:
    """response_cancel_not_active answers only a response.cancel: the older pending delete stays pending."""
    t = Trace()
    t.added("a", None)
    d = t.c("conversation.item.delete", item_id="a")
    cancel = t.c("response.cancel")
    line = t.s("error", error=_err("Cancellation failed: no active response found", code="response_cancel_not_active"))
    fact = t.fact(line, ServerError)
    assert fact.cause is not None and (fact.cause.line, fact.how) == (cancel, "order")
    assert fact.answers == {"response.cancel"}
    assert [c.line for c in t.conn().pending.values()] == [d]


def test_session_level_error_answers_no_pending_change() -> None:
    t = Trace()
    c = t.create("o", type="function_call_output", call_id="k")
    line = t.s("error", error=_err("Your session hit the maximum duration of 60 minutes.", code="session_expired"))
    fact = t.fact(line, ServerError)
    assert fact.cause is None and fact.how is None and fact.answers == frozenset()
    assert [ch.line for ch in t.conn().pending.values()] == [c]
    assert not [f for f in t.facts[line] if isinstance(f, ChangeAnswered)]


def test_error_whose_code_answers_nothing_pending_joins_nothing() -> None:
    t = Trace()
    t.create("a")
    line = t.s(
        "error",
        error=_err("Conversation already has an active response", code="conversation_already_has_active_response"),
    )
    fact = t.fact(line, ServerError)
    assert fact.cause is None and len(t.conn().pending) == 1


def test_error_param_narrows_a_generic_code() -> None:
    t = Trace()
    t.c("session.update")
    t.added("x", None, role="assistant")
    tr = t.c("conversation.item.truncate", item_id="x", content_index=0, audio_end_ms=900)
    line = t.s("error", error={**_err("Audio content of 0ms is already shorter than 900ms", code="invalid_value"),
                               "param": "audio_end_ms"})  # fmt: skip
    fact = t.fact(line, ServerError)
    assert fact.cause is not None and (fact.cause.line, fact.how) == (tr, "named-field")


def test_a_schema_error_is_joined_to_the_create_holding_the_value_it_names_not_the_oldest() -> None:
    """The realapi recording `history-seed-rejected-item`: three seeded creates without ids or event ids, the
    second an assistant message with content type `text`; the error comes first, naming `item.content[0].type`."""
    t = Trace()
    t.c("conversation.item.create", item={"type": "message", "role": "user", "content": [{"type": "input_text"}]})
    bad = t.c("conversation.item.create", item={"type": "message", "role": "assistant", "content": [{"type": "text"}]})
    t.c("conversation.item.create", item={"type": "message", "role": "user", "content": [{"type": "input_text"}]})
    error = {
        **_err("Invalid value: 'text'. Value must be 'output_text'.", code="invalid_value"),
        "param": "item.content[0].type",
    }
    line = t.s("error", error=error)
    fact = t.fact(line, ServerError)
    assert fact.cause is not None and (fact.cause.line, fact.how) == (bad, "named-field")
    # an unknown parameter: the event that has the field
    t = Trace()
    t.c("session.update", session={"type": "realtime"})
    odd = t.c("session.update", session={"type": "realtime", "voice_x": 1})
    error = {**_err("Unknown parameter: 'session.voice_x'.", code="unknown_parameter"), "param": "session.voice_x"}
    fact = t.fact(t.s("error", error=error), ServerError)
    assert fact.cause is not None and (fact.cause.line, fact.how) == (odd, "named-field")
    # a value no pending event holds there: arrival order, as before
    t = Trace()
    first = t.c(
        "conversation.item.create", item={"type": "message", "role": "user", "content": [{"type": "input_text"}]}
    )
    error = {**_err("Invalid value: 'x'.", code="invalid_value"), "param": "item.content[0].type"}
    fact = t.fact(t.s("error", error=error), ServerError)
    assert fact.cause is not None and (fact.cause.line, fact.how) == (first, "order")


def test_a_change_sent_behind_a_long_queue_is_still_joined_by_the_field_an_error_names() -> None:
    """Past `SENT_KEPT` waiting changes a create keeps its event as JSON text, not the parsed dict: the error that
    names a field of it (once the queue ahead of it is answered) finds it all the same."""
    t = Trace()
    ids = [f"i{k}" for k in range(SENT_KEPT + 10)]
    for item_id in ids:
        t.create(item_id, content=[{"type": "input_text", "text": item_id}])
    bad = t.c("conversation.item.create", item={"type": "message", "role": "assistant", "content": [{"type": "text"}]})
    late = t.conn().pending[t.records[bad - 1].seq]
    assert isinstance(late.sent, str)  # kept as text, not as the parsed event
    for change in t.conn().pending.values():  # each event as sent, whether kept parsed or as text without its ids
        assert change.event() == t.records[change.line - 1].event
        assert change.summary == describe(change.kind, t.records[change.line - 1].event)
    late.said = None  # read again below, from the text
    prev = None
    for item_id in ids:  # every create before it is acknowledged
        t.added(item_id, prev)
        prev = item_id
    error = {
        **_err("Invalid value: 'text'. Value must be 'output_text'.", code="invalid_value"),
        "param": "item.content[0].type",
    }
    fact = t.fact(t.s("error", error=error), ServerError)
    assert fact.cause is not None and (fact.cause.line, fact.how) == (bad, "named-field")
    assert fact.cause.sent is not None and fact.cause.said is None  # the text stays until its summary is said
    assert fact.cause.summary == describe("conversation.item.create", t.records[bad - 1].event)
    assert fact.cause.said == fact.cause.summary and fact.cause.seq not in t.conn().pending


def test_quoted_id_join_is_restricted_to_what_the_code_answers() -> None:
    """A delete quoting the same id is not the cause of an invalid_tool_call_id."""
    t = Trace()
    t.c("conversation.item.delete", item_id="k9")
    c = t.create("o", type="function_call_output", call_id="k9")
    line = t.s("error", error=_err("Tool call ID 'k9' not found in conversation.", code="invalid_tool_call_id"))
    assert (t.fact(line, ServerError).cause.line, t.fact(line, ServerError).how) == (c, "quoted-id")


def test_event_id_decides_whatever_the_code() -> None:
    t = Trace()
    t.create("a")
    d = t.c("conversation.item.delete", item_id="a", event_id="del_1")
    line = t.s("error", error=_err("odd", event_id="del_1", code="invalid_tool_call_id"))
    assert (t.fact(line, ServerError).cause.line, t.fact(line, ServerError).how) == (d, "event-id")


def test_error_with_nothing_pending() -> None:
    t = Trace()
    line = t.s("error", error="boom")
    fact = t.fact(line, ServerError)
    assert fact.cause is None and fact.how is None and fact.error == {"message": "boom"}


def test_session_update_confirmed_by_session_updated_in_order() -> None:
    t = Trace()
    u1 = t.c("session.update")
    u2 = t.c("session.update")
    line = t.s("session.updated", session={"audio": {"output": {"format": {"type": "audio/pcmu"}}}})
    assert t.fact(line, ChangeAnswered).change.line == u1
    assert isinstance(t.fact(line, SessionUpdated), SessionUpdated)
    assert (t.conn().audio_rate, t.conn().audio_sample_bytes) == (8000, 1)
    line = t.s("session.updated")
    assert t.fact(line, ChangeAnswered).change.line == u2


# -- responses ----------------------------------------------------------------------------------------------


def test_response_create_joined_by_metadata_client_event_id() -> None:
    t = Trace()
    r1 = t.c("response.create", event_id="rc_1", response={"metadata": {"client_event_id": "rc_1"}})
    r2 = t.c("response.create", event_id="rc_2", response={"metadata": {"client_event_id": "rc_2"}})
    line = t.s("response.created", response=response_body("resp_2", metadata={"client_event_id": "rc_2"}))
    created = t.fact(line, ResponseCreated)
    assert created.response.request is not None and created.response.request.line == r2
    assert t.fact(line, ChangeAnswered).how == "metadata"
    assert [c.line for c in t.conn().pending.values()] == [r1]


def test_response_create_joined_by_order() -> None:
    t = Trace()
    r1 = t.c("response.create", response={})
    t.c("response.create", response={"conversation": "none"})
    line = t.s("response.created", response=response_body("resp_1"))
    assert t.fact(line, ResponseCreated).response.request.line == r1
    assert t.fact(line, ChangeAnswered).how == "order"


def test_out_of_band_response_joins_the_out_of_band_request() -> None:
    t = Trace()
    t.c("response.create", response={})
    r2 = t.c("response.create", response={"conversation": "none"})
    line = t.s("response.created", response={"id": "oob", "conversation_id": None})
    resp = t.fact(line, ResponseCreated).response
    assert resp.request.line == r2 and not resp.in_conversation and t.conn().active is None


def test_server_initiated_response_has_no_request() -> None:
    t = Trace()
    line = t.s("response.created", response=response_body("resp_vad"))
    fact = t.fact(line, ResponseCreated)
    assert fact.response.request is None and fact.replaced is None and t.conn().active is fact.response


def test_response_replaced_while_open() -> None:
    t = Trace()
    t.s("response.created", response=response_body("r1"))
    line = t.s("response.created", response=response_body("r2"))
    fact = t.fact(line, ResponseCreated)
    assert fact.replaced is not None and fact.replaced.id == "r1" and fact.replaced.orphaned == "replaced"
    assert t.conn().active is fact.response
    # A late done for the replaced response closes it.
    line = t.s("response.done", response=response_body("r1", status="completed"))
    done = t.fact(line, ResponseDone)
    assert not done.unknown and done.response.orphaned is None and t.conn().active is t.conn().responses["r2"]


def test_response_done_unknown() -> None:
    t = Trace()
    line = t.s("response.done", response=response_body("r9", status="failed", status_details={"error": {"code": "e"}}))
    fact = t.fact(line, ResponseDone)
    assert fact.unknown and fact.response.status == "failed" and fact.response.error == {"code": "e"}
    assert not fact.response.open


def test_response_done_collects_output_and_confirms_cancel() -> None:
    t = Trace()
    t.s("response.created", response=response_body("r1"))
    t.s("response.output_item.added", response_id="r1", item={"id": "i1", "type": "message"})
    line = t.s("conversation.item.added", previous_item_id=None, item={"id": "i1", "type": "message"})
    item = t.conn().conv.items["i1"]
    assert item.source == "response" and item.response_id == "r1"
    assert t.fact(line, ItemAdded)
    cancel = t.c("response.cancel")
    line = t.s("response.done", response=response_body("r1", status="cancelled", output=[{"id": "i1"}, {"id": "i2"}]))
    done = t.fact(line, ResponseDone)
    assert done.response.output == ["i1", "i2"] and done.response.status == "cancelled"
    assert t.fact(line, ChangeAnswered).change.line == cancel and t.conn().active is None


def test_item_added_during_a_response_without_output_item_added() -> None:
    t = Trace()
    t.s("response.created", response=response_body("r1"))
    t.added("x", None, role="assistant")
    assert t.conn().responses["r1"].output == ["x"] and t.conn().conv.items["x"].source == "response"


def test_arguments_done_and_output_item_done_fill_the_call() -> None:
    t = Trace()
    t.s("response.created", response=response_body("r1"))
    t.s("conversation.item.added", previous_item_id=None, item={"id": "f", "type": "function_call", "arguments": ""})
    t.s("response.function_call_arguments.done", item_id="f", call_id="k", arguments='{"city": "Paris"}')
    item = t.conn().conv.items["f"]
    assert item.arguments == '{"city": "Paris"}' and item.arguments_len == 17
    t.s("response.output_item.done", response_id="r1", item={"id": "f", "type": "function_call", "call_id": "k"})
    assert t.conn().conv.by_call == {"k": "f"}


def test_arguments_done_marks_a_function_call_finished() -> None:
    t = Trace()
    t.s("response.created", response=response_body("r1"))
    start = {"id": "f", "type": "function_call", "call_id": "k", "arguments": "", "status": "in_progress"}
    t.s("conversation.item.added", previous_item_id=None, item=start)
    item = t.conn().conv.items["f"]
    assert unfinished_call(item)
    t.s("response.function_call_arguments.done", item_id="f", call_id="k", arguments="{}")
    assert not unfinished_call(item)
    # a completed item is finished too, and so is any item the client created
    t.s("conversation.item.added", previous_item_id="f", item={**start, "id": "g", "call_id": "k2"})
    t.s("response.output_item.done", response_id="r1", item={**start, "id": "g", "status": "completed"})
    assert not unfinished_call(t.conn().conv.items["g"])
    c = t.create("h", type="function_call", call_id="k3")
    sent = t.fact(c, ChangeSent).change.sent_item()
    assert sent is not None and not unfinished_call(sent)
    line = t.s("conversation.item.added", previous_item_id=None, item={"id": "h", "type": "function_call"})
    assert not unfinished_call(t.fact(line, ItemAdded).item)
