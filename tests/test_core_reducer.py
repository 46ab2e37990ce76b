"""The reducer, one semantic at a time on small hand-written traces, then random traces with colliding ids."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given

from rtrace.core import reducer
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
)
from rtrace.core.reducer import finish, step
from rtrace.core.state import TraceState, client_view
from rtrace.core.trace import DIRECTIONS, Record

from .hand_trace import Trace, response_body
from .strategies import BOUNDED, check_invariants, envelopes, to_records

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


# -- connections --------------------------------------------------------------------------------------------


def test_connection_close_makes_pending_indeterminate_and_orphans_the_response() -> None:
    t = Trace()
    opened = t("meta", "connection.opened", path="/v1/realtime")
    assert isinstance(t.fact(opened, ConnOpened), ConnOpened) and t.conn().explicit
    c = t.create("a")
    t.s("response.created", response=response_body("r1"))
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
    t.s("response.created", conn=1, response=response_body("r1"))
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
    t.s("response.created", response=response_body("r1"))
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
    happened inside the dict, where no line count sees it: `tests/test_core_pending.py` pins `Pending` itself)."""
    from .counting import LINEAR, growth, pipelined_creates

    assert growth(lambda n: pipelined_creates(n, ids=False), _fold_without_rules, 100) < LINEAR  # 6.9 before


@pytest.mark.source
def test_opening_a_connection_does_not_walk_the_connections_before_it() -> None:
    """`_open` looked at every connection ever seen to end the implicit ones and to know whether one was open."""
    from .counting import LINEAR, growth, reconnects

    assert growth(reconnects, _fold_without_rules, 60) < LINEAR  # 5.5 before


def test_the_tables_by_direction_hold_every_transition_and_nothing_else() -> None:
    by_dir = {(d, kind) for d, kinds in reducer._STEPS_BY_DIR.items() for kind in kinds}
    assert by_dir == set(reducer._STEPS) == reducer.TRANSITIONS
    assert {(d, kind) for d, kinds in reducer.TRANSITION_TYPES.items() for kind in kinds} == reducer.TRANSITIONS
    assert set(reducer.TRANSITION_TYPES) == set(DIRECTIONS)
    for (d, kind), found in reducer._STEPS.items():
        assert reducer._STEPS_BY_DIR[d][kind] == found
