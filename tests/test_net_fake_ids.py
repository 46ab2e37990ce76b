"""The id mapper for recordings (`rtrace.net.fake.ids`): learning recorded -> other ids side by side or by the k-th
event of a type, and rewriting under id keys or anywhere."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from rtrace.core.trace import Record
from rtrace.net.fake.ids import ID_KEYS, client_ids, learn_by_type, learn_ids, remap, rewrite_ids, value_at


def test_learning_side_by_side_maps_differing_server_ids_under_id_keys_only() -> None:
    ids: dict[str, str] = {}
    rec = {"event_id": "e1", "item": {"id": "i1", "content": [{"text": "i1"}]}, "output": [{"id": "a"}, {"id": ""}]}
    rep = {"event_id": "e2", "item": {"id": "i2", "content": [{"text": "i2"}]}, "output": [{"id": "b"}, {"id": "z"}]}
    learn_ids(rec, rep, set(), ids)
    assert ids == {"i1": "i2", "a": "b"}  # not the event id, not a text, not an empty id
    learn_ids({"id": "i1", "item_id": "same"}, {"id": "other", "item_id": "same"}, set(), ids)
    assert ids == {"i1": "i2", "a": "b"}  # the first mapping holds; an equal id is no mapping
    learn_ids({"item": {"id": "mine"}}, {"item": {"id": "theirs"}}, {"mine"}, ids)
    assert "mine" not in ids


def test_learning_by_type_pairs_the_kth_events_of_each_type_at_the_paths() -> None:
    recorded = [
        {"type": "response.created", "response": {"id": "r1"}},
        {"type": "conversation.item.added", "item": {"id": "i1", "call_id": "c1"}, "previous_item_id": "p1"},
        {"type": "conversation.item.added", "item": {"id": "i2"}},
        {"type": "conversation.item.added", "item": {"id": "i3"}},  # the served side has no third: skipped
    ]
    served = [
        {"type": "conversation.item.added", "item": {"id": "I1", "call_id": "C1"}, "previous_item_id": "P1"},
        {"type": "response.created", "response": {"id": "R1"}},
        {"type": "conversation.item.added", "item": {"id": "I2"}},
    ]
    ids: dict[str, str] = {}
    learn_by_type(recorded, served, ids)
    assert ids == {"r1": "R1", "i1": "I1", "c1": "C1", "i2": "I2"}  # `previous_item_id` is not one of the paths
    only: dict[str, str] = {}
    learn_by_type(recorded, served, only, paths=[("previous_item_id",)])
    assert only == {"p1": "P1"}


def test_rewriting_under_id_keys_or_anywhere_and_always_a_copy() -> None:
    event: dict[str, Any] = {"event_id": "x", "item_id": "x", "ids": ["x", {"call_id": "x"}], "text": "x"}
    assert rewrite_ids(event, {"x": "Y"}) == {"event_id": "x", "item_id": "Y", "ids": ["x", {"call_id": "Y"}],
                                              "text": "x"}  # fmt: skip
    assert rewrite_ids({"ids": ["x"]}, {"x": "Y"}, frozenset({"ids"})) == {"ids": ["Y"]}
    assert remap(event, {"x": "Y"}) == {"event_id": "Y", "item_id": "Y", "ids": ["Y", {"call_id": "Y"}], "text": "Y"}
    for copy in (rewrite_ids(event, {}), remap(event, {})):
        assert copy == event and copy is not event and copy["ids"] is not event["ids"]
    assert event["item_id"] == "x"


def test_client_ids_are_the_ids_of_the_items_the_client_created() -> None:
    def rec(direction: str, event: dict[str, Any]) -> Record:
        return Record(0, 1, 0.0, direction, 1, event, event["type"], event["type"])  # type: ignore[arg-type]

    records = [
        rec("client", {"type": "conversation.item.create", "item": {"id": "mine"}}),
        rec("client", {"type": "conversation.item.create", "item": {"type": "message"}}),
        rec("server", {"type": "conversation.item.added", "item": {"id": "theirs"}}),
    ]
    assert client_ids(records) == {"mine"}
    assert value_at({"a": {"b": 1}}, ("a", "b")) == 1 and value_at({"a": 1}, ("a", "b")) is None


ids_ = st.text("abc", min_size=1, max_size=3)


@given(st.dictionaries(st.sampled_from(sorted(ID_KEYS)), ids_, min_size=1), st.permutations(["a", "b", "c"]))
def test_what_is_learned_side_by_side_rewrites_the_recording_into_the_replay(
    event: dict[str, str], letters: list[str]
) -> None:
    """An event whose ids the other connection renamed (a renaming of letters: one to one): learning the pair, then
    rewriting the recorded event, gives the other connection's event."""
    rename = dict(zip("abc", letters, strict=True))
    replayed = {k: "".join(rename[c] for c in v) for k, v in event.items()}
    ids: dict[str, str] = {}
    learn_ids({"item": event}, {"item": replayed}, set(), ids)
    assert rewrite_ids(event, ids) == replayed
