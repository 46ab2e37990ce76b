"""Client events against the API's schema (`rtrace.net.fake.schema`, data from `tests/make_client_schema.py`)."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rtrace.core.loader import TraceReader
from rtrace.net.fake.endpoint import EndpointConnection
from rtrace.net.fake.schema import Invalid, check_client_event, client_schema

from .netdriver import Driver

ROOT = Path(__file__).resolve().parent.parent
SDK_PYTHON = ROOT / ".venv-e2e-openai" / "bin" / "python"

ASSISTANT_TEXT = {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "Nice to meet you"}]}

VALID: list[dict[str, Any]] = [
    {"type": "session.update", "session": {"type": "realtime", "instructions": "hi", "output_modalities": ["text"]}},
    {
        "type": "session.update",
        "event_id": "e1",
        "session": {
            "type": "realtime",
            "audio": {"input": {"turn_detection": {"type": "server_vad", "silence_duration_ms": 500}}},
            "tools": [{"type": "function", "name": "f", "description": "d", "parameters": {"type": "object"}}],
        },
    },
    {
        "type": "conversation.item.create",
        "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}]},
    },
    {"type": "conversation.item.create", "item": {"type": "function_call_output", "call_id": "c", "output": "o"}},
    {"type": "conversation.item.truncate", "item_id": "i", "content_index": 0, "audio_end_ms": 10},
    {"type": "conversation.item.delete", "item_id": "i"},
    {"type": "input_audio_buffer.append", "audio": "AAAA"},
    {"type": "response.create", "response": {"output_modalities": ["audio"], "metadata": {"k": "v"}}},
    {"type": "response.cancel"},
]


def test_the_recorded_rejections_are_answered_as_the_real_server_does() -> None:
    """The realapi recording `history-seed-rejected-item` and langchain_dart#643's `unknown_parameter`."""
    assert check_client_event({"type": "conversation.item.create", "item": ASSISTANT_TEXT}) == Invalid(
        "invalid_value", "Invalid value: 'text'. Value must be 'output_text'.", "item.content[0].type"
    )
    assert check_client_event({"type": "session.update", "session": {"type": "realtime", "custom_voice_id": "x"}}) == (
        Invalid("unknown_parameter", "Unknown parameter: 'session.custom_voice_id'.", "session.custom_voice_id")
    )


def test_other_problems_have_the_api_codes() -> None:
    item = {"type": "nope"}
    found = check_client_event({"type": "conversation.item.create", "item": item})
    assert found is not None and (found.code, found.param) == ("invalid_value", "item.type")
    assert "'message'" in found.message and "'function_call_output'" in found.message
    found = check_client_event(
        {"type": "conversation.item.truncate", "item_id": "i", "content_index": 0, "audio_end_ms": "5"}
    )
    assert found == Invalid(
        "invalid_type",
        "Invalid type for 'audio_end_ms': expected an integer, but got a string instead.",
        "audio_end_ms",
    )
    found = check_client_event({"type": "conversation.item.create", "item": {"type": "message", "content": []}})
    assert found is not None and found.code == "missing_required_parameter" and found.param == "item.role"
    assert check_client_event({"type": "transcription_session.update", "session": {}}) is None  # beta: not judged


@pytest.mark.parametrize("event", VALID, ids=lambda e: e["type"])
def test_valid_events_pass(event: dict[str, Any]) -> None:
    assert check_client_event(event) is None


def test_every_client_event_of_the_real_client_traces_passes() -> None:
    """No false rejection: livekit's, the Agents SDKs', pipecat's events in the bundled traces are all valid."""
    paths = sorted((ROOT / "sample_traces").rglob("*.jsonl"))
    assert paths
    for path in paths:
        with TraceReader.open(path) as reader:
            for rec in reader:
                if rec.dir == "client" and isinstance(rec.event.get("type"), str):
                    found = check_client_event(rec.event)
                    assert found is None or "rejected" in path.name, (path.name, rec.line, found)


def test_serve_rejects_the_invalid_item_and_does_not_add_it() -> None:
    d = Driver(EndpointConnection(1))
    d.open()
    [err] = d.send({"type": "conversation.item.create", "event_id": "c2", "item": {**ASSISTANT_TEXT, "id": "A"}})
    assert err["type"] == "error"
    assert err["error"] == {
        "type": "invalid_request_error",
        "code": "invalid_value",
        "message": "Invalid value: 'text'. Value must be 'output_text'.",
        "param": "item.content[0].type",
        "event_id": "c2",
    }
    assert "A" not in d.conn.conv
    [err] = d.send({"type": "session.update", "session": {"type": "realtime", "voice_x": 1}})
    assert err["error"]["code"] == "unknown_parameter" and err["error"]["param"] == "session.voice_x"
    assert "voice_x" not in d.conn.session


def _mutations(event: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    json_values = st.recursive(
        st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "text", "output_text", "realtime"]),
        lambda inner: (
            st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from(["type", "x", "text"]), inner, max_size=2)
        ),
        max_leaves=4,
    )

    def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        out = [prefix]
        if isinstance(value, dict):
            for k, v in value.items():
                out.extend(paths(v, (*prefix, k)))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                out.extend(paths(v, (*prefix, i)))
        return out

    def mutate(path: tuple[Any, ...], action: str, new: Any) -> dict[str, Any]:
        out = copy.deepcopy(event)
        if not path:
            return out
        parent: Any = out
        for key in path[:-1]:
            parent = parent[key]
        if action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == "add" and isinstance(parent[path[-1]], dict):
            parent[path[-1]]["unknown_field"] = new
        else:
            parent[path[-1]] = new
        return out

    return st.builds(mutate, st.sampled_from(paths(event)[1:]), st.sampled_from(["delete", "add", "set"]), json_values)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(VALID).flatmap(_mutations))
def test_the_validator_agrees_with_jsonschema_on_what_is_valid(event: dict[str, Any]) -> None:
    schema = client_schema()
    validator = jsonschema.Draft202012Validator(schema)
    if event.get("type") in [e["type"] for e in VALID]:
        assert (check_client_event(event) is None) == validator.is_valid(event), event


@pytest.mark.skipif(not SDK_PYTHON.exists(), reason="the openai SDK's environment (.venv-e2e-openai) is not made")
def test_the_committed_schema_is_what_the_sdk_types_make() -> None:
    done = subprocess.run(
        [str(SDK_PYTHON), str(ROOT / "tests" / "make_client_schema.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
