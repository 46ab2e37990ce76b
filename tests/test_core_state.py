"""The conversation model: the linked list, item folding, the client view built from pending changes, divergence."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rtrace.core.conversation import ARGUMENTS_CHARS, PREVIEW_CHARS, Conversation, Item, item_from_event, update_item
from rtrace.core.state import Change, Connection, TraceState, client_view, divergence

from .strategies import BOUNDED


def conv_of(*pairs: tuple[str, str | None]) -> Conversation:
    conv = Conversation()
    for item_id, prev in pairs:
        conv.insert(Item(id=item_id, type="message"), prev)
    return conv


def test_insert_first_after_and_unknown() -> None:
    conv = conv_of(("a", None), ("b", "a"), ("c", None), ("d", "a"))
    assert conv.ids() == ["c", "a", "d", "b"] and (conv.head, conv.tail) == ("c", "b")
    assert conv.insert(Item(id="e", type="message"), "nope") is False
    assert conv.ids()[-1] == "e" and conv.tail == "e"
    assert len(conv) == 5 and "e" in conv and "z" not in conv


def test_duplicate_insert_counts_copies_not_positions() -> None:
    conv = conv_of(("a", None), ("b", "a"))
    assert conv.insert(Item(id="a", type="message"), "b") is True
    assert conv.ids() == ["a", "b"] and conv.items["a"].copies == 2


def test_remove_head_middle_tail_and_unknown() -> None:
    conv = conv_of(("a", None), ("b", "a"), ("c", "b"), ("d", "c"))
    assert conv.remove("b") is not None and conv.ids() == ["a", "c", "d"]
    conv.remove("a")
    assert conv.head == "c" and conv.previous_of("c") is None
    conv.remove("d")
    assert conv.tail == "c" and conv.ids() == ["c"]
    assert conv.remove("zz") is None
    conv.remove("c")
    assert (conv.head, conv.tail, conv.ids()) == (None, None, [])


def test_append() -> None:
    conv = Conversation()
    for item_id in "xyz":
        conv.append(Item(id=item_id, type="message"))
    assert conv.ids() == ["x", "y", "z"]


def test_call_indexes_and_reindex() -> None:
    conv = Conversation()
    conv.insert(Item(id="f", type="function_call", call_id="k1"), None)
    conv.insert(Item(id="o", type="function_call_output", call_id="k1"), "f")
    assert conv.by_call == {"k1": "f"} and conv.outputs_by_call == {"k1": {"o"}}
    item = conv.items["f"]
    item.call_id = "k2"
    conv.reindex(item, "k1")
    assert conv.by_call == {"k2": "f"}
    out = conv.items["o"]
    out.call_id = "k2"
    conv.reindex(out, "k1")
    assert conv.outputs_by_call == {"k2": {"o"}}


@BOUNDED
@given(st.lists(st.tuples(st.booleans(), st.sampled_from("abcde"), st.sampled_from([None, "a", "b", "c", "x"]))))
def test_conversation_matches_a_list_model(ops: list[tuple[bool, str, str | None]]) -> None:
    conv = Conversation()
    model: list[str] = []
    for is_insert, item_id, prev in ops:
        if is_insert:
            if item_id in model:
                conv.insert(Item(id=item_id, type="message"), prev)
                continue
            known = conv.insert(Item(id=item_id, type="message"), prev)
            assert known == (prev is None or prev in model)
            if prev is None:
                model.insert(0, item_id)
            elif prev in model:
                model.insert(model.index(prev) + 1, item_id)
            else:
                model.append(item_id)
        else:
            removed = conv.remove(item_id)
            assert (removed is not None) == (item_id in model)
            if item_id in model:
                model.remove(item_id)
        assert conv.ids() == model
        assert [conv.previous_of(i) for i in model] == [None, *model][: len(model)]


# -- items --------------------------------------------------------------------------------------------------


def test_item_from_event_needs_an_id() -> None:
    assert item_from_event({"type": "message"}) is None
    assert item_from_event({"id": "", "type": "message"}) is None
    assert item_from_event({"id": 5}) is None
    item = item_from_event({"id": "i", "type": None})
    assert item is not None and item.type == "unknown"


def test_update_item_folds_fields_and_cuts_payloads() -> None:
    item = Item(id="f", type="function_call")
    update_item(item, {"call_id": "k", "name": "get_weather", "status": "in_progress", "arguments": "x" * 1000})
    assert (item.call_id, item.name, item.status) == ("k", "get_weather", "in_progress")
    assert len(item.arguments) == ARGUMENTS_CHARS and item.arguments_len == 1000
    update_item(item, {"arguments": "", "call_id": "", "role": 3})
    assert item.arguments_len == 1000 and item.call_id == "k" and item.role is None
    out = Item(id="o", type="function_call_output")
    update_item(out, {"output": "y" * 500})
    assert out.text == "y" * PREVIEW_CHARS
    msg = Item(id="m", type="message")
    update_item(msg, {"content": [{"type": "input_text", "text": "hello"}, 7, {"transcript": "world"}, {"x": 1}]})
    assert msg.text == "hello world"


def test_labels() -> None:
    assert Item(id="m", type="message", role="user").label() == "user message m"
    assert Item(id="m", type="message").label() == "unknown-role message m"
    assert Item(id="f", type="function_call", call_id="k").label() == "function_call f (k)"
    assert Item(id="x", type="mcp_call").label() == "mcp_call x"


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
    return Change(
        "conversation.item.create", 1, seq, seq + 1, 0.0, item_id=item.id if item else None, item=item,
        previous_item_id=prev,
    )  # fmt: skip


def _delete(seq: int, item_id: str) -> Change:
    return Change("conversation.item.delete", 1, seq, seq + 1, 0.0, item_id=item_id)


def test_expected_ids_and_items() -> None:
    fco = Item(id="o2", type="function_call_output", call_id="k")
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
    assert conn.expected_item("o2") is fco
    assert conn.expected_outputs("k") == [fco]
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
    assert conn.expected_call("k") is again


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
