"""Pending changes: O(1) lookups that answer what a walk of every pending change answered; a change kept as text."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rtrace.core.conversation import Item, item_head
from rtrace.core.describe import describe
from rtrace.core.pending import Change, Pending

from .strategies import BOUNDED, PENDING_KINDS, pending_ops


@BOUNDED
@given(pending_ops(), st.sampled_from(["a", "b", "", "k1", "e1", "zz"]))
def test_pending_lookups_answer_what_a_walk_of_every_change_answers(ops: list[tuple[str, Any]], key: str) -> None:
    pending = Pending()
    model: dict[int, Change] = {}
    for k, (op, arg) in enumerate(ops):
        if op == "add":
            pending.add(arg)
            model[arg.seq] = arg
        else:
            pending.remove(model.pop(arg))
        assert list(pending.values()) == list(model.values()) and len(pending) == len(model)
        assert list(pending) == list(model) and all(pending[seq] is c and seq in pending for seq, c in model.items())
        if op == "remove":
            assert arg not in pending
        if k == len(ops) // 2:
            pending.quoting({key}, None)  # the index of previous ids is built here, then kept up to date
    walk = list(model.values())

    def first(pred: Any) -> Change | None:
        return next((c for c in walk if pred(c)), None)

    for kind in PENDING_KINDS:
        assert pending.oldest(kind) is first(lambda c, k=kind: c.kind == k)
        assert pending.oldest(kind, key) is first(lambda c, k=kind: c.kind == k and c.item_id == key)
        assert pending.count(kind) == sum(c.kind == kind for c in walk)
    for kinds in (None, frozenset(PENDING_KINDS[:2]), frozenset({"response.create"})):
        assert pending.oldest_of(kinds) is first(lambda c, ks=kinds: ks is None or c.kind in ks)

        def quotes(c: Change, ks: Any = kinds) -> bool:
            keys = {c.item_id, c.previous_item_id, c.call_id}
            return (ks is None or c.kind in ks) and key in keys

        assert pending.quoting({key}, kinds) is first(quotes)
    for item_type in ("message", "function_call"):
        assert pending.oldest_idless_create(item_type) is first(
            lambda c, t=item_type: (
                c.kind == PENDING_KINDS[0] and c.item_id is None and (c.item_type is None or c.item_type == t)
            )
        )
    for in_conversation in (True, False):
        replies = [c for c in walk if c.kind == "response.create" and (c.conversation != "none") == in_conversation]
        assert pending.oldest_replies(in_conversation, 2) == replies[:2]
    assert pending.with_event_id("e1") is first(lambda c: c.event_id == "e1")
    assert pending.with_event_id("e1", "response.create") is first(
        lambda c: c.event_id == "e1" and c.kind == "response.create"
    )
    calls = [c for c in walk if c.kind == PENDING_KINDS[0] and c.call_id == "k1"]
    assert pending.creates_for_call("k1") == calls


def test_a_pipeline_acknowledged_in_order_leaves_nothing_behind() -> None:
    """200,000 creates then their acks, oldest first: each lookup finds the next at once, and what the indexes hold
    stays within a quarter more than what is pending (the dict the reducer used walked every removed slot at every
    ack; an answered change held past that kept its memory)."""
    pending = Pending()
    changes = [Change("conversation.item.create", 1, k, k + 1, 0.0, item_id=f"i{k}") for k in range(200_000)]
    for change in changes:
        pending.add(change)
    for k, change in enumerate(changes):
        assert pending.oldest("conversation.item.create") is change
        assert pending.oldest("conversation.item.create", f"i{k}") is change
        pending.remove(change)
        queue = pending._kinds.get("conversation.item.create")
        for held in (queue, pending._order):
            if held is not None and type(held) is not Change:
                assert len(held.changes) - held.head <= held.live + held.live // 4 + 1  # type: ignore[union-attr]
    assert not pending and not pending._kinds and "conversation.item.create" not in pending._items
    assert pending._order.changes == [] and not any(c.filed for c in changes)


def test_pending_by_seq_takes_each_change_once_newest_last_and_clear_lets_all_go() -> None:
    """The mapping by seq: a change is filed once, after the ones pending (its seq the newest), and found by its
    seq until it is answered; `clear` lets every one go."""
    pending = Pending()
    first, second = (Change("response.create", 1, k, k + 1, 0.0) for k in (5, 9))
    pending[5] = first
    pending.add(second)
    for wrong in (first, Change("response.create", 1, 9, 10, 0.0), Change("session.update", 1, 7, 8, 0.0)):
        with pytest.raises(ValueError):
            pending.add(wrong)
    assert 5 in pending and pending[9] is second and 7 not in pending and "5" not in pending
    del pending[5]
    assert list(pending.items()) == [(9, second)] and not first.filed
    with pytest.raises(KeyError):
        pending.remove(first)
    pending.clear()
    assert not pending and not second.filed and 9 not in pending


def _sent(event: dict[str, Any], kind: str | None = None) -> Change:
    """A change of `event` holding what the reducer reads of it (`reducer._send`, `_c_item_create`), event kept."""
    event_id, prev, raw = event.get("event_id"), event.get("previous_item_id"), event.get("item")
    item_id, item_type, role, call_id = item_head(raw) if isinstance(raw, dict) else (None, None, None, None)
    return Change(
        kind or event["type"], 1, 3, 4, 0.5, event_id if type(event_id) is str else None, None, item_id, item_type,
        role, call_id, prev if type(prev) is str and prev else None, sent=event,
    )  # fmt: skip


def test_a_change_kept_as_text_gives_back_its_event_and_says_its_summary_when_read() -> None:
    """A change sent behind a long queue keeps its event as text without the fields it holds
    (`Change.keep_as_text`): `event()` gives back the event as sent, `summary` says it when first read (then the text
    may go), and the item it sends is whole while the text is there, what it holds of it after."""
    event = {
        "type": "conversation.item.create",
        "event_id": "ev_9",
        "previous_item_id": "a",
        "item": {"id": "b", "type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
    }
    change = _sent(event)
    assert change.keep_as_text() and isinstance(change.sent, str)
    assert orjson.loads(change.sent) == {"item": {"content": [{"type": "input_text", "text": "hi"}]}}
    assert change.event() == event and change.sent_item() == Item(
        "b", "message", "user", text="hi", arguments_done=True, source="client", created_line=4, created_t=0.5
    )
    change.answered()
    assert change.sent is not None  # its summary is still to be said from it
    assert change.summary == describe(change.kind, event) and change.said == change.summary
    change.answered()
    assert change.sent is None and change.event() is None and change.summary == describe(change.kind, event)
    held = change.sent_item()
    assert held is not None and (held.id, held.type, held.role, held.text) == ("b", "message", "user", "")
    assert change.item_label() == held.label() == "user message b"
    other = {**event, "previous_item_id": "z"}  # a field the change holds otherwise stays in the text
    kept = _sent(event)
    kept.sent = other
    assert kept.keep_as_text() and kept.event() == other and '"z"' in str(kept.sent)


_VALUE = st.sampled_from([None, "", "a", "b", "message", "user", "k", 0, 5, True, [], {"x": 1}])


@BOUNDED
@given(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["conversation.item.create", "conversation.item.delete", "response.create"])},
        optional={
            "event_id": _VALUE,
            "previous_item_id": _VALUE,
            "item_id": _VALUE,
            "item": _VALUE | st.dictionaries(st.sampled_from(["id", "type", "role", "call_id", "output"]), _VALUE),
        },
    ),
    st.sampled_from([None, "conversation.item.created"]),
)
def test_any_event_kept_as_text_comes_back_whole_and_only_what_it_held(event: dict[str, Any], beta: str | None) -> None:
    """Whatever the event holds, of whatever type (a field absent, null, empty, of another type, a beta name that is
    not the change's kind): `event()` gives back the event as sent, no field more, no field less."""
    change = _sent(event, kind=None if beta is None else event["type"])
    if beta is not None:
        event["type"] = change.sent["type"] = beta  # type: ignore[index]  (the raw name; the kind is the GA one)
    kept = change.keep_as_text()
    assert kept == (not isinstance(event.get("item"), dict) or "type" in event["item"] or change.item_type is None)
    assert change.event() == event
