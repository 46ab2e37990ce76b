"""The reducer, one semantic at a time on small hand-written traces, then random traces with colliding ids."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given

from rtrace.core.catalog import BETA_TO_GA
from rtrace.core.facts import (
    ChangeAnswered,
    ChangeSent,
    ConnClosed,
    ConnOpened,
    Fact,
    ItemAdded,
    ItemDeleted,
    ItemDone,
    ItemTruncated,
    LocalGeneration,
    LocalSnapshot,
    Reconnected,
    ResponseCreated,
    ResponseDone,
    ServerError,
    SessionUpdated,
)
from rtrace.core.reducer import SENT_KEPT, finish, step
from rtrace.core.state import Connection, TraceState, client_view, unfinished_call
from rtrace.core.trace import Record

from .strategies import BOUNDED, check_invariants, envelopes, to_records


class Trace:
    """Records built by hand; each call appends one and returns its line. `run()` folds them, keeping facts."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.facts: dict[int, list[Fact]] = {}
        self.state = TraceState()

    def __call__(self, direction: str, etype: str, conn: int = 1, **fields: Any) -> int:
        line = len(self.records) + 1
        event = {"type": etype, **fields}
        ga = BETA_TO_GA.get(etype, etype)
        rec = Record(line - 1, line, line / 100, direction, conn, event, ga, etype)  # type: ignore[arg-type]
        self.records.append(rec)
        _, facts = step(self.state, rec)
        self.facts[line] = list(facts)
        check_invariants(self.state)
        return line

    def c(self, etype: str, conn: int = 1, **fields: Any) -> int:
        return self("client", etype, conn, **fields)

    def s(self, etype: str, conn: int = 1, **fields: Any) -> int:
        return self("server", etype, conn, **fields)

    def conn(self, n: int = 1) -> Connection:
        conn = self.state.conns[n]
        return conn

    def ids(self, n: int = 1) -> list[str]:
        return self.conn(n).conv.ids()

    def fact(self, line: int, cls: type[Fact]) -> Any:
        found = [f for f in self.facts[line] if isinstance(f, cls)]
        assert len(found) == 1, (line, cls.__name__, self.facts[line])
        return found[0]

    def added(self, item_id: str, prev: str | None, conn: int = 1, **item: Any) -> int:
        item = {"id": item_id, "type": "message", "role": "user", **item}
        return self.s("conversation.item.added", conn, previous_item_id=prev, item=item)

    def create(self, item_id: str | None, prev: str | None = None, conn: int = 1, **item: Any) -> int:
        body = {"type": "message", "role": "user", **item}
        if item_id is not None:
            body["id"] = item_id
        fields: dict[str, Any] = {"item": body, "event_id": f"ev_{len(self.records) + 1}"}
        if prev is not None:
            fields["previous_item_id"] = prev
        return self.c("conversation.item.create", conn, **fields)


# -- previous_item_id ---------------------------------------------------------------------------------------


def test_previous_item_id_null_means_first() -> None:
    t = Trace()
    t.added("a", None)
    line = t.added("b", None)
    assert t.ids() == ["b", "a"]
    fact = t.fact(line, ItemAdded)
    assert fact.position_known and not fact.duplicate and fact.previous_item_id is None


def test_previous_item_id_inserts_after_it() -> None:
    t = Trace()
    t.added("a", None)
    t.added("b", "a")
    t.added("c", "a")
    assert t.ids() == ["a", "c", "b"]
    assert t.conn().conv.previous_of("b") == "c"


def test_unknown_previous_item_id_appends_and_says_so() -> None:
    t = Trace()
    t.added("a", None)
    t.added("b", "a")
    line = t.added("c", "nope")
    assert t.ids() == ["a", "b", "c"]
    fact = t.fact(line, ItemAdded)
    assert not fact.position_known and fact.previous_item_id == "nope"


def test_duplicate_id_counts_copies() -> None:
    t = Trace()
    t.added("a", None)
    t.added("b", "a")
    line = t.added("a", "a")
    assert t.ids() == ["a", "b"]
    fact = t.fact(line, ItemAdded)
    assert fact.duplicate and fact.item.copies == 2 and fact.item is t.conn().conv.items["a"]


def test_beta_created_is_added_and_done() -> None:
    t = Trace()
    t.create("a")
    line = t.s("conversation.item.created", previous_item_id=None, item={"id": "a", "type": "message"})
    assert t.ids() == ["a"] and t.conn().conv.items["a"].done
    assert t.fact(line, ChangeAnswered).how == "item-id"


def test_item_done_without_added_adds_it() -> None:
    t = Trace()
    line = t.s("conversation.item.done", previous_item_id=None, item={"id": "a", "type": "message", "status": "x"})
    assert t.ids() == ["a"]
    assert t.fact(line, ItemDone).item.status == "x"


def test_item_done_folds_its_wire_item_unless_the_added_just_before_read_the_same() -> None:
    """`done` right after `added` with the same wire item changes nothing (the reducer skips that fold); a
    different wire item, or a record between the two, is folded as always."""
    msg = {"id": "a", "type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    t = Trace()
    t.s("conversation.item.added", previous_item_id=None, item=msg)
    t.s("conversation.item.done", previous_item_id=None, item=msg)
    item = t.conn().conv.items["a"]
    assert (item.done, item.text, item.role, item.status) == (True, "hi", "user", None)
    t = Trace()
    t.s("conversation.item.added", previous_item_id=None, item=msg)
    t.s("conversation.item.done", previous_item_id=None, item={**msg, "status": "completed", "call_id": "k"})
    item = t.conn().conv.items["a"]
    assert (item.status, item.call_id) == ("completed", "k")
    t = Trace()
    t.s("conversation.item.added", previous_item_id=None, item=msg)
    t.s("conversation.item.truncated", item_id="a", content_index=0, audio_end_ms=0)
    assert t.conn().conv.items["a"].text == ""
    t.s("conversation.item.done", previous_item_id=None, item=msg)
    assert t.conn().conv.items["a"].text == "hi"  # the done's wire item is folded again


# -- creates, deletes, acks ---------------------------------------------------------------------------------


def test_create_confirmed_by_added_with_the_item_id() -> None:
    t = Trace()
    c1 = t.create("a")
    c2 = t.create("b", "a")
    assert [c.line for c in t.conn().pending.values()] == [c1, c2]
    assert t.fact(c1, ChangeSent).change.status == "pending"
    # Acks out of order still join by item id.
    line = t.added("b", None)
    answered = t.fact(line, ChangeAnswered)
    assert (answered.change.line, answered.how, answered.change.status) == (c2, "item-id", "confirmed")
    assert answered.change.answer_line == line
    assert t.conn().conv.items["b"].source == "client" and t.conn().conv.items["b"].created_line == c2
    assert [c.line for c in t.conn().pending.values()] == [c1]


def test_id_less_creates_confirmed_by_order_and_type() -> None:
    t = Trace()
    c1 = t.create(None)
    c2 = t.create(None, type="function_call_output", call_id="k")
    c3 = t.create(None)
    line = t.s("conversation.item.added", item={"id": "srv_1", "type": "function_call_output", "call_id": "k"})
    assert t.fact(line, ChangeAnswered).change.line == c2
    line = t.added("srv_2", "srv_1")
    assert (t.fact(line, ChangeAnswered).change.line, t.fact(line, ChangeAnswered).how) == (c1, "order")
    line = t.added("srv_3", "srv_2")
    assert t.fact(line, ChangeAnswered).change.line == c3
    assert not t.conn().pending


def test_delete_confirmed_by_deleted() -> None:
    t = Trace()
    t.added("a", None)
    t.added("b", "a")
    d = t.c("conversation.item.delete", item_id="a")
    assert t.ids() == ["a", "b"] and client_view(t.conn()) == ["b"]
    line = t.s("conversation.item.deleted", item_id="a")
    assert t.ids() == ["b"]
    fact = t.fact(line, ItemDeleted)
    assert fact.item is not None and fact.item.id == "a" and fact.change is not None and fact.change.line == d
    assert t.fact(line, ChangeAnswered).how == "item-id"


def test_deleted_of_an_unknown_id() -> None:
    t = Trace()
    line = t.s("conversation.item.deleted", item_id="ghost")
    fact = t.fact(line, ItemDeleted)
    assert fact.item is None and fact.change is None


def test_function_call_indexes_follow_items() -> None:
    t = Trace()
    t.added("f", None, type="function_call", call_id="k")
    t.added("o", "f", type="function_call_output", call_id="k")
    conv = t.conn().conv
    assert conv.by_call == {"k": "f"} and conv.outputs_by_call == {"k": {"o"}}
    t.s("conversation.item.deleted", item_id="o")
    assert conv.outputs_by_call == {}
    t.s("conversation.item.deleted", item_id="f")
    assert conv.by_call == {}


def test_second_function_call_with_same_call_id_takes_over_the_index() -> None:
    """Found by this suite: deleting one of two function_calls sharing a call_id left the other unindexed."""
    t = Trace()
    t.added("a", None, type="function_call", call_id="k")
    t.added("b", "a", type="function_call", call_id="k")
    t.s("conversation.item.deleted", item_id="b")
    assert t.conn().conv.by_call == {"k": "a"}


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
    assert fact.cause.sent is None  # dropped once answered


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


def _resp(rid: str, **kw: Any) -> dict[str, Any]:
    return {"id": rid, "object": "realtime.response", "conversation_id": "conv_1", **kw}


def test_response_create_joined_by_metadata_client_event_id() -> None:
    t = Trace()
    r1 = t.c("response.create", event_id="rc_1", response={"metadata": {"client_event_id": "rc_1"}})
    r2 = t.c("response.create", event_id="rc_2", response={"metadata": {"client_event_id": "rc_2"}})
    line = t.s("response.created", response=_resp("resp_2", metadata={"client_event_id": "rc_2"}))
    created = t.fact(line, ResponseCreated)
    assert created.response.request is not None and created.response.request.line == r2
    assert t.fact(line, ChangeAnswered).how == "metadata"
    assert [c.line for c in t.conn().pending.values()] == [r1]


def test_response_create_joined_by_order() -> None:
    t = Trace()
    r1 = t.c("response.create", response={})
    t.c("response.create", response={"conversation": "none"})
    line = t.s("response.created", response=_resp("resp_1"))
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
    line = t.s("response.created", response=_resp("resp_vad"))
    fact = t.fact(line, ResponseCreated)
    assert fact.response.request is None and fact.replaced is None and t.conn().active is fact.response


def test_response_replaced_while_open() -> None:
    t = Trace()
    t.s("response.created", response=_resp("r1"))
    line = t.s("response.created", response=_resp("r2"))
    fact = t.fact(line, ResponseCreated)
    assert fact.replaced is not None and fact.replaced.id == "r1" and fact.replaced.orphaned == "replaced"
    assert t.conn().active is fact.response
    # A late done for the replaced response closes it.
    line = t.s("response.done", response=_resp("r1", status="completed"))
    done = t.fact(line, ResponseDone)
    assert not done.unknown and done.response.orphaned is None and t.conn().active is t.conn().responses["r2"]


def test_response_done_unknown() -> None:
    t = Trace()
    line = t.s("response.done", response=_resp("r9", status="failed", status_details={"error": {"code": "e"}}))
    fact = t.fact(line, ResponseDone)
    assert fact.unknown and fact.response.status == "failed" and fact.response.error == {"code": "e"}
    assert not fact.response.open


def test_response_done_collects_output_and_confirms_cancel() -> None:
    t = Trace()
    t.s("response.created", response=_resp("r1"))
    t.s("response.output_item.added", response_id="r1", item={"id": "i1", "type": "message"})
    line = t.s("conversation.item.added", previous_item_id=None, item={"id": "i1", "type": "message"})
    item = t.conn().conv.items["i1"]
    assert item.source == "response" and item.response_id == "r1"
    assert t.fact(line, ItemAdded)
    cancel = t.c("response.cancel")
    line = t.s("response.done", response=_resp("r1", status="cancelled", output=[{"id": "i1"}, {"id": "i2"}]))
    done = t.fact(line, ResponseDone)
    assert done.response.output == ["i1", "i2"] and done.response.status == "cancelled"
    assert t.fact(line, ChangeAnswered).change.line == cancel and t.conn().active is None


def test_item_added_during_a_response_without_output_item_added() -> None:
    t = Trace()
    t.s("response.created", response=_resp("r1"))
    t.added("x", None, role="assistant")
    assert t.conn().responses["r1"].output == ["x"] and t.conn().conv.items["x"].source == "response"


def test_arguments_done_and_output_item_done_fill_the_call() -> None:
    t = Trace()
    t.s("response.created", response=_resp("r1"))
    t.s("conversation.item.added", previous_item_id=None, item={"id": "f", "type": "function_call", "arguments": ""})
    t.s("response.function_call_arguments.done", item_id="f", call_id="k", arguments='{"city": "Paris"}')
    item = t.conn().conv.items["f"]
    assert item.arguments == '{"city": "Paris"}' and item.arguments_len == 17
    t.s("response.output_item.done", response_id="r1", item={"id": "f", "type": "function_call", "call_id": "k"})
    assert t.conn().conv.by_call == {"k": "f"}


def test_arguments_done_marks_a_function_call_finished() -> None:
    t = Trace()
    t.s("response.created", response=_resp("r1"))
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
    assert not unfinished_call(t.fact(c, ChangeSent).change.item)
    line = t.s("conversation.item.added", previous_item_id=None, item={"id": "h", "type": "function_call"})
    assert not unfinished_call(t.fact(line, ItemAdded).item)


# -- connections --------------------------------------------------------------------------------------------


def test_connection_close_makes_pending_indeterminate_and_orphans_the_response() -> None:
    t = Trace()
    opened = t("meta", "connection.opened", path="/v1/realtime")
    assert isinstance(t.fact(opened, ConnOpened), ConnOpened) and t.conn().explicit
    c = t.create("a")
    t.s("response.created", response=_resp("r1"))
    line = t("meta", "connection.closed", code=1001, reason="going away")
    fact = t.fact(line, ConnClosed)
    assert [ch.line for ch in fact.indeterminate] == [c] and fact.indeterminate[0].status == "indeterminate"
    assert fact.indeterminate[0].answer_line == line
    assert fact.orphaned is not None and fact.orphaned.id == "r1" and fact.orphaned.orphaned == "closed"
    conn = t.conn()
    assert (conn.ended_by, conn.close_code, conn.close_reason, conn.closed_line) == ("closed", 1001, "going away", line)


def test_implicit_connections_are_superseded_explicit_ones_are_not() -> None:
    t = Trace()
    t.s("session.created")
    t.create("a")
    line = t.s("session.created", conn=2)
    closed = t.fact(line, ConnClosed)
    assert closed.conn.n == 1 and closed.conn.ended_by == "superseded" and len(closed.indeterminate) == 1
    assert t.fact(line, ConnOpened).conn.n == 2
    # Connections opened by a note end only with their close note.
    t2 = Trace()
    t2("meta", "connection.opened")
    line = t2("meta", "connection.opened", conn=2)
    assert t2.facts[line] and not any(isinstance(f, ConnClosed) for f in t2.facts[line])
    assert t2.conn(1).open and t2.conn(2).open
    assert [f.conn.n for f in finish(t2.state) if isinstance(f, ConnClosed)] == [1, 2]
    assert t2.conn(1).ended_by == "trace-end"


def test_a_new_connection_replaces_the_one_that_closed_before_it() -> None:
    t = Trace()
    t("meta", "connection.opened")
    t("meta", "connection.closed")
    line = t("meta", "connection.opened", conn=2)
    fact = t.fact(line, Reconnected)
    assert (fact.previous.n, fact.conn.n, fact.early) == (1, 2, [])
    assert (t.conn(1).replaced_by, t.conn(2).replaces) == (2, 1) and t.state.last_ended is None


def test_a_new_connection_opened_before_the_old_close_is_paired_at_the_close() -> None:
    """agents-js: conn 2's `connection.opened` is written 0.25 ms before conn 1's `connection.closed`."""
    t = Trace()
    t("meta", "connection.opened")
    opened = t("meta", "connection.opened", conn=2)
    assert not [f for f in t.facts[opened] if isinstance(f, Reconnected)] and 2 in t.state.awaiting
    c = t.create("a", conn=2)  # the replay starts before the old close is noted
    closed = t("meta", "connection.closed")
    assert isinstance(t.fact(closed, ConnClosed), ConnClosed)
    fact = t.fact(closed, Reconnected)
    assert (fact.previous.n, fact.conn.n, [ch.line for ch in fact.early]) == (1, 2, [c])
    assert t.conn(2).early is None and not t.state.awaiting
    assert [type(f) for f in t.facts[closed]] == [ConnClosed, Reconnected]


def test_an_old_connection_that_ends_after_the_window_is_not_the_one_replaced() -> None:
    t = Trace()  # Trace puts record k at t = k / 100
    t("meta", "connection.opened")
    t("meta", "connection.closed")
    t("meta", "connection.opened", conn=2)  # replaces conn 1
    t("meta", "connection.opened", conn=3)  # line 4: conn 2 is open; conn 3 waits for it to end
    for _ in range(110):
        t.s("session.updated", conn=3)
    # settled once the window passed: conn 1 is taken, nothing else ended before conn 3 opened
    assert 3 not in t.state.awaiting and t.conn(3).replaces is None
    line = t("meta", "connection.closed", conn=2)  # 1.1 s after conn 3 opened: a concurrent session's end
    assert not [f for f in t.facts[line] if isinstance(f, Reconnected)] and t.state.last_ended is t.conn(2)
    t("meta", "connection.closed", conn=3)
    line = t("meta", "connection.opened", conn=4)
    assert t.fact(line, Reconnected).previous.n == 3  # the latest that ended


def test_a_waiting_connection_falls_back_to_the_latest_one_ended_before_it() -> None:
    t = Trace()
    t("meta", "connection.opened")
    t("meta", "connection.opened", conn=2)  # concurrent with conn 1, which never closes in time
    t("meta", "connection.closed", conn=2)  # line 3 (conn 2 never paired: nothing had ended)
    t("meta", "connection.opened", conn=3)  # conn 1 still open: waits, with conn 2 to fall back on
    for _ in range(110):
        t.s("session.updated", conn=3)
    [settled] = [line for line, facts in t.facts.items() if any(isinstance(f, Reconnected) for f in facts)]
    assert t.fact(settled, Reconnected).previous.n == 2 and t.records[settled - 1].t - t.conn(3).opened_t > 1.0


def test_concurrent_connections_without_a_close_are_not_paired() -> None:
    t = Trace()
    t("meta", "connection.opened")
    t("meta", "connection.opened", conn=2)
    facts = finish(t.state)
    assert not [f for f in facts if isinstance(f, Reconnected)]
    assert t.conn(2).replaces is None and t.conn(1).replaced_by is None


def test_superseded_implicit_connection_is_replaced_by_the_next() -> None:
    t = Trace()
    t.s("session.created")
    line = t.s("session.created", conn=2)
    assert [type(f) for f in t.facts[line]] == [ConnClosed, ConnOpened, Reconnected]


def test_connection_opened_may_say_the_replay_is_not_visible() -> None:
    t = Trace()
    t("meta", "connection.opened", replay_visible=False)
    t("meta", "connection.opened", conn=2, path="/v1/realtime")
    assert not t.conn(1).replay_visible and t.conn(2).replay_visible


def test_reused_ordinal_after_close_starts_afresh() -> None:
    t = Trace()
    t("meta", "connection.opened")
    t.added("a", None)
    t("meta", "connection.closed")
    t("meta", "connection.opened")
    assert t.ids() == [] and t.conn().open


def test_events_after_close_cannot_stay_pending() -> None:
    """Found by this suite: a send on a connection that had already ended stayed pending forever."""
    t = Trace()
    t.s("session.created")
    t.s("session.created", conn=2)  # supersedes connection 1
    c = t.create("a", conn=1)
    t.s("response.created", conn=1, response=_resp("r1"))
    conn = t.conn(1)
    assert not conn.pending and conn.active is None and not conn.responses["r1"].open
    assert t.fact(c, ChangeSent).change.status == "indeterminate"


def test_ids_do_not_carry_over_connections() -> None:
    t = Trace()
    t("meta", "connection.opened")
    t.added("a", None)
    t("meta", "connection.closed")
    t("meta", "connection.opened", conn=2)
    line = t.added("b", "a", conn=2)
    assert t.ids(2) == ["b"] and not t.fact(line, ItemAdded).position_known


# -- truncate, audio ----------------------------------------------------------------------------------------


def test_audio_deltas_count_bytes_base64_and_recorded_counts() -> None:
    t = Trace()
    t.s("response.created", response=_resp("r1"))
    t.added("x", None, role="assistant")
    t.s("response.output_audio.delta", item_id="x", delta="AAAA")  # 3 bytes
    t.s("response.audio.delta", item_id="x", delta="AAA=")  # 2 bytes
    t.s("response.output_audio.delta", item_id="x", delta="AA==")  # 1 byte
    t.s("response.output_audio.delta", item_id="x", rtrace_audio_bytes=48000)
    t.s("response.output_audio.delta", item_id="nope", delta="AAAA")
    item = t.conn().conv.items["x"]
    assert item.audio_bytes == 48006
    assert t.conn().audio_ms(item) == 48006 * 1000 / 48000


def test_truncate_updates_audio_bytes_and_confirms() -> None:
    t = Trace()
    t.added("x", None, role="assistant", content=[{"type": "output_audio", "transcript": "hello there"}])
    t.s("response.output_audio.delta", item_id="x", rtrace_audio_bytes=96000)  # 2 s at 24 kHz, 16 bit
    c = t.c("conversation.item.truncate", item_id="x", content_index=0, audio_end_ms=500)
    assert t.fact(c, ChangeSent).change.audio_end_ms == 500
    line = t.s("conversation.item.truncated", item_id="x", content_index=0, audio_end_ms=500)
    item = t.conn().conv.items["x"]
    assert item.audio_bytes == 24000 and item.text == ""
    assert t.fact(line, ItemTruncated).audio_end_ms == 500 and t.fact(line, ChangeAnswered).change.line == c


def test_retrieve_commit_and_clear_acks() -> None:
    t = Trace()
    r = t.c("conversation.item.retrieve", item_id="a")
    line = t.s("conversation.item.retrieved", item={"id": "a", "type": "message"})
    assert t.fact(line, ChangeAnswered).change.line == r
    c = t.c("input_audio_buffer.commit")
    line = t.s("input_audio_buffer.committed", item_id="u1", previous_item_id=None)
    assert t.fact(line, ChangeAnswered).change.line == c
    t.added("u1", None)
    assert t.conn().conv.items["u1"].source == "audio"
    c = t.c("input_audio_buffer.clear")
    line = t.s("input_audio_buffer.cleared")
    assert t.fact(line, ChangeAnswered).change.line == c


# -- client view --------------------------------------------------------------------------------------------


def test_local_snapshot_sets_the_client_view() -> None:
    t = Trace()
    t.added("a", None)
    t.create("b", "a")
    assert client_view(t.conn()) == ["a", "b"]
    line = t("local", "local.conversation", items=[{"id": "b"}, {"id": "a"}, {"no": "id"}, 5])
    assert [i.id for i in t.fact(line, LocalSnapshot).items] == ["b", "a"]
    assert client_view(t.conn()) == ["b", "a"] and t.conn().local_line == line
    line = t("local", "local.generation.opened", response_id="r1")
    gen = t.fact(line, LocalGeneration)
    assert gen.opened and gen.response_id == "r1"


def test_expected_ids_apply_pending_creates_and_deletes_in_order() -> None:
    t = Trace()
    t.added("a", None)
    t.added("b", "a")
    t.c("conversation.item.delete", item_id="a")
    t.create("c", "root")
    t.create("d", "b")
    t.create("e", "unknown")
    t.create(None)  # no id: not shown
    t.create("f")
    assert t.ids() == ["a", "b"]
    assert t.conn().expected_ids() == ["c", "b", "d", "e", "f"]
    assert client_view(t.conn()) == t.conn().expected_ids()


# -- properties ---------------------------------------------------------------------------------------------


@BOUNDED
@given(envelopes())
def test_random_traces_with_colliding_ids_keep_the_invariants(lines: list[dict[str, Any]]) -> None:
    state = TraceState()
    for rec in to_records(lines):
        _, facts = step(state, rec)
        assert all(isinstance(f, Fact) for f in facts)
        check_invariants(state)
    finish(state)
    check_invariants(state)
    assert all(not c.open for c in state.conns.values())


# -- cost linear in the trace: pinned by counting the lines executed, not by timing ---------------------


def _fold_without_rules(records: list[Record]) -> None:
    from rtrace.engine.fold import fold_state

    fold_state(records)


@pytest.mark.source
def test_an_ack_finds_its_id_less_create_without_walking_the_pipeline() -> None:
    """An ack of a create without an item id looked at every pending create for the oldest id-less one of its type:
    from 100 pipelined creates to 400 the lines executed grew 6.9 times; now 4 (the walk of a pipeline with ids
    happened inside the dict, where no line count sees it: `tests/test_core_state.py` pins `Pending` itself)."""
    from .counting import LINEAR, growth, pipelined_creates

    assert growth(lambda n: pipelined_creates(n, ids=False), _fold_without_rules, 100) < LINEAR  # 6.9 before


@pytest.mark.source
def test_opening_a_connection_does_not_walk_the_connections_before_it() -> None:
    """`_open` looked at every connection ever seen to end the implicit ones and to know whether one was open."""
    from .counting import LINEAR, growth, reconnects

    assert growth(reconnects, _fold_without_rules, 60) < LINEAR  # 5.5 before
