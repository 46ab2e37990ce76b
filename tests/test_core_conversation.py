"""The conversation model: order by `previous_item_id`, copies of a duplicated id, call_id indexes, payload previews."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from rtrace.core import conversation
from rtrace.core.conversation import (
    ARGUMENTS_CHARS,
    PREVIEW_CHARS,
    Conversation,
    Item,
    client_item,
    item_from_event,
    item_head,
    label,
    update_item,
)

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


@BOUNDED
@given(
    st.lists(st.sampled_from("abcde"), unique=True),
    st.lists(st.tuples(st.booleans(), st.sampled_from("abcdefg"), st.sampled_from([None, "a", "c", "f", "x"]))),
)
def test_a_linked_copy_follows_a_list_model_and_leaves_the_conversation_alone(
    held: list[str], ops: list[tuple[bool, str, str | None]]
) -> None:
    conv = Conversation()
    for item_id in held:
        conv.append(Item(id=item_id, type="message"))
    view = conv.linked_copy()
    model = list(held)
    for is_insert, item_id, prev in ops:
        if is_insert:
            known = view.insert(Item(id=item_id, type="message"), prev)
            if item_id not in model:
                assert known == (prev is None or prev in model)
                where = 0 if prev is None else model.index(prev) + 1 if prev in model else len(model)
                model.insert(where, item_id)
        else:
            view.remove(item_id)
            if item_id in model:
                model.remove(item_id)
        assert view.ids() == model
        assert view.tail == (model[-1] if model else None)
        assert all((i in view) == (i in model) for i in "abcdefgx")
    assert conv.ids() == held
    assert [conv.previous_of(i) for i in held] == [None, *held][: len(held)]


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


#: Values a wire item's field may hold, right or wrong.
_VALUES = st.sampled_from([None, "", "x", "message", "function_call", "user", "k1", 0, 5, 1.5, True, [], {}])


@BOUNDED
@given(st.dictionaries(st.sampled_from(["id", "type", "role", "call_id", "name", "output", "arguments"]), _VALUES))
def test_what_a_pending_create_holds_of_its_item_is_what_the_item_it_sends_says(obj: dict[str, Any]) -> None:
    """`item_head` (what a pending create keeps) reads the id, type, role and call_id `client_item` (the item it
    sends, made when asked) reads, of any wire item, with an id or without."""
    item = client_item(obj)
    assert item_head(obj) == (item.id or None, item.type, item.role, item.call_id)
    assert label(item.id, item.type, item.role, item.call_id) == item.label()


def test_labels() -> None:
    assert Item(id="m", type="message", role="user").label() == "user message m"
    assert Item(id="m", type="message").label() == "unknown-role message m"
    assert Item(id="f", type="function_call", call_id="k").label() == "function_call f (k)"
    assert Item(id="x", type="mcp_call").label() == "mcp_call x"


def test_a_call_carried_twice_hands_over_to_the_other_when_one_goes() -> None:
    conv = Conversation()
    conv.insert(Item(id="f1", type="function_call", call_id="k"), None)
    conv.insert(Item(id="f2", type="function_call", call_id="k"), "f1")
    assert conv.by_call["k"] == "f2"
    conv.remove("f2")
    assert conv.by_call["k"] == "f1"
    conv.insert(Item(id="f3", type="function_call", call_id="k"), "f1")
    conv.remove("f1")  # not the one by_call names: it stays
    assert conv.by_call["k"] == "f3"
    conv.remove("f3")
    assert "k" not in conv.by_call and not conv._calls


class CountingItems(dict):  # type: ignore[type-arg]
    """A dict that counts how often it is iterated (the old `_unindex` walked every item per removed call)."""

    walks = 0

    def values(self):  # type: ignore[no-untyped-def]
        CountingItems.walks += 1
        return super().values()

    def __iter__(self):  # type: ignore[no-untyped-def]
        CountingItems.walks += 1
        return super().__iter__()


def test_removing_function_calls_never_walks_the_conversation() -> None:
    conv = Conversation()
    conv.items = CountingItems()
    prev = None
    for k in range(2000):
        conv.insert(Item(id=f"f{k}", type="function_call", call_id=f"c{k}"), prev)
        conv.insert(Item(id=f"o{k}", type="function_call_output", call_id=f"c{k}"), f"f{k}")
        prev = f"o{k}"
    CountingItems.walks = 0
    for k in range(2000):
        conv.remove(f"f{k}")
        conv.remove(f"o{k}")
    assert CountingItems.walks == 0 and len(conv) == 0 and not conv.by_call and not conv.outputs_by_call


def test_items_share_their_strings_and_the_table_of_them_stops_growing() -> None:
    role = "".join(["us", "er"])  # a string of its own, as a parsed event's is
    first = item_from_event({"id": "a", "type": "message", "role": "user"})
    second = item_from_event({"id": "b", "type": "message", "role": role})
    assert first is not None and second is not None and first.role is second.role
    conversation._SHARED.clear()
    try:
        for n in range(conversation.SHARED_MAX + 10):
            conversation._intern(f"name-{n}")
        assert len(conversation._SHARED) == conversation.SHARED_MAX
        late = "".join(["name-", str(conversation.SHARED_MAX + 5)])
        assert conversation._intern(late) is late  # past the bound a string is kept as it came
    finally:
        conversation._SHARED.clear()
