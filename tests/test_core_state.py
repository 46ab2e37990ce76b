"""The conversation model: the linked list, item folding, the client view built from pending changes, divergence."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from rtrace.core.conversation import Item
from rtrace.core.state import Change, Connection, TraceState, client_view, divergence

from .strategies import BOUNDED, pending_ops

# -- the client view ----------------------------------------------------------------------------------------


def _conn_with(server: list[str], *changes: Change) -> Connection:
    conn = Connection(n=1, opened_line=1, opened_t=0.0)
    prev = None
    for item_id in server:
        conn.conv.insert(Item(id=item_id, type="message"), prev)
        prev = item_id
    for change in changes:
        conn.pending[change.seq] = change
    return conn


def _create(seq: int, item: Item | None, prev: str | None = None) -> Change:
    """A create of `item` as the reducer makes it: what it holds of the item, the rest in its event as sent."""
    wire = None if item is None else {"id": item.id, "type": item.type, "call_id": item.call_id, "output": item.text}
    return Change(
        "conversation.item.create", 1, seq, seq + 1, 0.0, item_id=item.id if item else None,
        item_type=item.type if item else None, call_id=item.call_id if item else None, previous_item_id=prev,
        sent={"type": "conversation.item.create", "item": wire} if wire is not None else None,
    )  # fmt: skip


def _as_sent(item: Item, seq: int) -> Item:
    """`item` as a create of line `seq + 1` sent it (`Change.sent_item`)."""
    return Item(
        item.id, item.type, call_id=item.call_id, text=item.text, arguments_done=True, source="client",
        created_line=seq + 1, created_t=0.0,
    )  # fmt: skip


def _delete(seq: int, item_id: str) -> Change:
    return Change("conversation.item.delete", 1, seq, seq + 1, 0.0, item_id=item_id)


def test_expected_ids_and_items() -> None:
    fco = Item(id="o2", type="function_call_output", call_id="k", text="42")
    conn = _conn_with(
        ["a", "b"],
        _create(10, Item(id="c", type="message"), "a"),
        _delete(11, "b"),
        _create(12, Item(id="r", type="message"), "root"),
        _create(13, fco),
        _create(14, None),
    )
    assert conn.expected_ids() == ["r", "a", "c", "o2"]
    assert client_view(conn) == conn.expected_ids()
    assert conn.expected_item("b") is None and conn.expected_item("a") is conn.conv.items["a"]
    assert conn.expected_item("o2") == _as_sent(fco, 13) and conn.expected_outputs("k") == [_as_sent(fco, 13)]
    assert next(iter(conn.pending.values())).short == "create"


def test_expected_call_sees_pending_creates_and_deletes() -> None:
    conn = _conn_with([])
    conn.conv.insert(Item(id="f", type="function_call", call_id="k"), None)
    conn.conv.insert(Item(id="o", type="function_call_output", call_id="k"), "f")
    assert conn.expected_call("k") is conn.conv.items["f"]
    conn.pending[1] = _delete(1, "f")
    conn.pending[2] = _delete(2, "o")
    assert conn.expected_call("k") is None and conn.expected_outputs("k") == []
    again = Item(id="f2", type="function_call", call_id="k")
    conn.pending[3] = _create(3, again)
    assert conn.expected_call("k") == _as_sent(again, 3)


def test_client_view_prefers_the_local_snapshot() -> None:
    conn = _conn_with(["a", "b"], _create(5, Item(id="c", type="message")))
    conn.local = [Item(id="b", type="message"), Item(id="z", type="message")]
    assert client_view(conn) == ["b", "z"]


def test_audio_ms_follows_the_format() -> None:
    conn = _conn_with([])
    item = Item(id="x", type="message", audio_bytes=48000)
    assert conn.audio_ms(item) == 1000.0
    conn.audio_rate, conn.audio_sample_bytes = 8000, 1
    assert conn.audio_ms(item) == 6000.0


def test_change_latency() -> None:
    change = _delete(0, "a")
    assert change.latency() is None
    change.answer_t = 0.25
    assert change.latency() == 0.25


def test_trace_state_neighbours() -> None:
    state = TraceState()
    for n in (1, 3, 4):
        state.conns[n] = Connection(n=n, opened_line=n, opened_t=0.0)
    assert state.next_conn(1) is state.conns[3] and state.next_conn(4) is None
    assert state.previous_conn(3) is state.conns[1] and state.previous_conn(1) is None
    assert state.conn(2) is None


# -- divergence ---------------------------------------------------------------------------------------------


def test_divergence_only_client_only_server_reordered() -> None:
    d = divergence(["a", "c", "b", "x"], ["a", "b", "c", "y"])
    assert d.only_client == ("x",) and d.only_server == ("y",)
    assert len(d.reordered) == 1 and d.reordered[0] in ("b", "c")
    assert d


def test_no_divergence() -> None:
    d = divergence(["a", "b"], ["a", "b"])
    assert not d and d.reordered == () and d.only_client == () and d.only_server == ()


def test_reordered_is_minimal() -> None:
    d = divergence(["e", "a", "b", "c", "d"], ["a", "b", "c", "d", "e"])
    assert d.reordered == ("e",)


@BOUNDED
@given(st.permutations(list("abcdefg")), st.sets(st.sampled_from("abcdefg")), st.sets(st.sampled_from("abcdefg")))
def test_divergence_properties(perm: list[str], drop_c: set[str], drop_s: set[str]) -> None:
    server = [i for i in "abcdefg" if i not in drop_s]
    client = [i for i in perm if i not in drop_c]
    d = divergence(client, server)
    assert set(d.only_client) == set(client) - set(server)
    assert set(d.only_server) == set(server) - set(client)
    kept = [i for i in client if i in set(server) and i not in d.reordered]
    assert kept == [i for i in server if i in kept]  # what is not reported as reordered is in server order
    assert bool(d) == (client != server)


def _naive_expected_ids(conn: Connection) -> list[str]:
    """The client view as the reducer computed it with list walks (quadratic on long pipelines): the reference."""
    order = conn.conv.ids()
    for change in conn.pending.values():
        if change.kind == "conversation.item.delete" and change.item_id in order:
            order.remove(change.item_id)
        elif change.kind == "conversation.item.create" and change.item_id and change.item_id not in order:
            prev = change.previous_item_id
            if prev == "root":
                order.insert(0, change.item_id)
            elif prev and prev in order:
                order.insert(order.index(prev) + 1, change.item_id)
            else:
                order.append(change.item_id)
    return order


@BOUNDED
@given(st.lists(st.sampled_from(["a", "b", "c"]), unique=True), pending_ops())
def test_the_client_view_and_expected_items_match_the_walks_they_replace(server: list[str], ops: list[Any]) -> None:
    conn = _conn_with(server)
    for op, arg in ops:
        if op == "add":
            conn.pending.add(arg)
        else:
            conn.pending.remove(conn.pending[arg])
    assert conn.expected_ids() == _naive_expected_ids(conn)
    for item_id in ("a", "b", "", "zz"):
        found = conn.conv.get(item_id)
        for change in conn.pending.values():
            if change.item_id == item_id and change.kind == "conversation.item.delete":
                found = None
            elif change.item_id == item_id and change.kind == "conversation.item.create" and change.item_type:
                found = change.sent_item()
        assert conn.expected_item(item_id) == found  # (a pending create's item is made when asked for)
    for call_id in ("k1", "k2"):
        call = None
        outs: list[Item] = []
        for change in conn.pending.values():
            item = change.sent_item()
            if change.kind == "conversation.item.delete":
                call = None if call is not None and change.item_id == call.id else call
                outs = [o for o in outs if o.id != change.item_id]
            elif item is not None and item.call_id == call_id and item.type == "function_call":
                call = item
            elif item is not None and item.call_id == call_id and item.type == "function_call_output":
                outs.append(item)
        assert conn.expected_call(call_id) == call
        assert conn.expected_outputs(call_id) == outs
