"""One-line event summaries."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rtrace.core.catalog import CLIENT_EVENTS, LOCAL_EVENTS, META_EVENTS, SERVER_EVENTS
from rtrace.core.describe import DESCRIBED, describe, item_label

from .strategies import BOUNDED


@pytest.mark.parametrize(
    ("etype", "event", "text"),
    [
        (
            "conversation.item.create",
            {"item": {"id": "o1", "type": "function_call_output", "call_id": "k"}, "previous_item_id": "m1"},
            "create function_call_output o1 (k) after m1",
        ),
        (
            "conversation.item.create",
            {"item": {"type": "message", "role": "user"}},
            "create user message (no id) at the end",
        ),
        ("conversation.item.create", {"item": {"id": "a"}, "previous_item_id": "root"}, "create item a at the start"),
        (
            "conversation.item.added",
            {"item": {"id": "a", "type": "message", "role": "assistant"}, "previous_item_id": None},
            "added assistant message a first",
        ),
        (
            "conversation.item.done",
            {"item": {"id": "a", "type": "message"}, "previous_item_id": "z"},
            "done ? message a after z",
        ),
        ("conversation.item.delete", {"item_id": "a"}, "delete a"),
        ("conversation.item.deleted", {"item_id": "a"}, "deleted a"),
        ("conversation.item.truncate", {"item_id": "a", "audio_end_ms": 1500}, "truncate a at 1500 ms"),
        (
            "error",
            {"error": {"code": "invalid_tool_call_id", "message": "Tool call ID 'k' not found in conversation."}},
            "error invalid_tool_call_id: Tool call ID 'k' not found in conversation.",
        ),
        ("error", {"error": "weird"}, "error error: None"),
        ("response.created", {"response": {"id": "r1", "status": "in_progress"}}, "response r1 created"),
        ("response.done", {"response": {"id": "r1", "status": "cancelled"}}, "response r1 done (cancelled)"),
        (
            "response.create",
            {"event_id": "rc_1", "response": {"conversation": "none"}},
            "response.create out-of-band rc_1",
        ),
        ("response.create", {}, "response.create"),
        ("response.cancel", {"response_id": "r1"}, "response.cancel r1"),
        ("response.output_item.added", {"item": {"id": "f", "type": "function_call"}}, "added output function_call f"),
        ("connection.opened", {"path": "/v1/realtime"}, "connection opened /v1/realtime"),
        ("connection.closed", {"code": 1001, "reason": "bye"}, "connection closed 1001 bye"),
        ("connection.closed", {}, "connection closed"),
        ("local.conversation", {"items": [{}, {}]}, "local conversation (2 items)"),
        ("response.output_text.delta", {"delta": "x"}, "response.output_text.delta"),
    ],
)
def test_describe(etype: str, event: dict[str, Any], text: str) -> None:
    assert describe(etype, event) == text


def test_long_ids_are_cut() -> None:
    out = describe("conversation.item.delete", {"item_id": "x" * 500})
    assert len(out) < 80 and out.endswith("…")


def test_item_label_of_garbage() -> None:
    assert item_label(None) == "item" and item_label({}) == "item (no id)"


ALL_TYPES = sorted(CLIENT_EVENTS | SERVER_EVENTS | META_EVENTS | LOCAL_EVENTS)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
keys = st.sampled_from(["item", "item_id", "previous_item_id", "error", "response", "event_id", "items", "path"])


@BOUNDED
@given(st.sampled_from(ALL_TYPES), st.dictionaries(keys, json_values, max_size=5))
def test_describe_never_crashes(etype: str, event: dict[str, Any]) -> None:
    assert isinstance(describe(etype, event), str)
    if etype not in DESCRIBED:  # what the HTML report relies on to skip the call
        assert describe(etype, event) == etype


def test_every_described_type_is_in_the_catalogue() -> None:
    assert DESCRIBED <= set(ALL_TYPES)
    event = {"item": {"id": "a"}, "item_id": "a", "event_id": "e", "response_id": "r"}
    assert all(describe(etype, event) != etype for etype in DESCRIBED)
