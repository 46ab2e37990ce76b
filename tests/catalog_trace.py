"""A trace with an event of every type of the catalogue (`rtrace.core.catalog`), each in a place where the reducer
and the rules read it (an error that answers a pending create, a done that closes an open response, ...), with the
fields the API sends. The wrong-type fuzz (tests/test_hardening.py, bench/harden.py) mutates one field of one line.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from rtrace.core.catalog import CLIENT_EVENTS, LOCAL_EVENTS, META_EVENTS, SERVER_EVENTS

_USER = {"id": "item_u1", "type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
_AUDIO_USER = {
    "id": "item_a1",
    "type": "message",
    "role": "user",
    "status": "completed",
    "content": [{"type": "input_audio", "transcript": None}],
}
_FC = {
    "id": "item_fc1",
    "type": "function_call",
    "status": "completed",
    "call_id": "call_1",
    "name": "get_weather",
    "arguments": '{"city": "Paris"}',
}
_FCO = {"id": "item_fco1", "type": "function_call_output", "call_id": "call_1", "output": '{"temp": 21}'}
_ASSISTANT = {
    "id": "item_as1",
    "type": "message",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_audio", "transcript": "Sunny."}],
}
_MCP = {
    "id": "item_mcp1",
    "type": "mcp_call",
    "server_label": "docs",
    "name": "search",
    "arguments": '{"q": "x"}',
    "output": "found",
    "error": None,
}
_SESSION = {
    "type": "realtime",
    "id": "sess_1",
    "object": "realtime.session",
    "model": "gpt-realtime",
    "output_modalities": ["audio"],
    "instructions": "Be brief.",
    "audio": {
        "input": {"format": {"type": "audio/pcm", "rate": 24000}, "turn_detection": {"type": "server_vad"}},
        "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "alloy"},
    },
    "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
    "max_output_tokens": "inf",
}
_USAGE = {
    "total_tokens": 30,
    "input_tokens": 20,
    "output_tokens": 10,
    "input_token_details": {"text_tokens": 5, "audio_tokens": 15, "cached_tokens": 0},
    "output_token_details": {"text_tokens": 2, "audio_tokens": 8},
}


def _response(rid: str, status: str, output: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": rid,
        "object": "realtime.response",
        "status": status,
        "status_details": None,
        "output": output,
        "conversation_id": "conv_1",
        "output_modalities": ["audio"],
        "metadata": None,
        "usage": _USAGE if status != "in_progress" else None,
    }
    body.update(extra)
    return body


def catalog_lines() -> list[dict[str, Any]]:
    """The trace as native lines (no header): two connections, every catalogue type at least once."""
    out: list[dict[str, Any]] = []
    t = 0.0

    def add(direction: str, event: dict[str, Any], conn: int = 1) -> None:
        nonlocal t
        t = round(t + 0.01, 6)
        out.append({"t": t, "dir": direction, "conn": conn, "event": event})

    c = lambda ev: add("client", ev)  # noqa: E731
    s = lambda ev: add("server", ev)  # noqa: E731
    add("meta", {"type": "connection.opened", "path": "/v1/realtime?model=gpt-realtime"})
    s({"type": "session.created", "event_id": "ev_1", "session": _SESSION})
    s(
        {
            "type": "conversation.created",
            "event_id": "ev_2",
            "conversation": {"id": "conv_1", "object": "realtime.conversation"},
        }
    )
    c({"type": "session.update", "event_id": "c_1", "session": _SESSION})
    s({"type": "session.updated", "event_id": "ev_3", "session": _SESSION})
    c({"type": "transcription_session.update", "event_id": "c_2", "session": {"input_audio_format": "pcm16"}})
    s({"type": "transcription_session.updated", "event_id": "ev_4", "session": {"input_audio_format": "pcm16"}})
    s(
        {
            "type": "rate_limits.updated",
            "event_id": "ev_5",
            "rate_limits": [{"name": "tokens", "limit": 100, "remaining": 99, "reset_seconds": 1.5}],
        }
    )
    c({"type": "conversation.item.create", "event_id": "c_3", "previous_item_id": None, "item": _USER})
    s({"type": "conversation.item.added", "event_id": "ev_6", "previous_item_id": None, "item": _USER})
    s({"type": "conversation.item.done", "event_id": "ev_7", "previous_item_id": None, "item": _USER})
    c({"type": "input_audio_buffer.append", "event_id": "c_4", "audio": "AAAAAAAA"})
    s({"type": "input_audio_buffer.speech_started", "event_id": "ev_8", "audio_start_ms": 10, "item_id": "item_a1"})
    s({"type": "input_audio_buffer.speech_stopped", "event_id": "ev_9", "audio_end_ms": 500, "item_id": "item_a1"})
    s(
        {
            "type": "input_audio_buffer.timeout_triggered",
            "event_id": "ev_10",
            "audio_start_ms": 10,
            "audio_end_ms": 600,
            "item_id": "item_a1",
        }
    )
    s({"type": "input_audio_buffer.dtmf_event_received", "event_id": "ev_11", "event": "5", "received_at": 1})
    c({"type": "input_audio_buffer.commit", "event_id": "c_5"})
    s(
        {
            "type": "input_audio_buffer.committed",
            "event_id": "ev_12",
            "previous_item_id": "item_u1",
            "item_id": "item_a1",
        }
    )
    s({"type": "conversation.item.added", "event_id": "ev_13", "previous_item_id": "item_u1", "item": _AUDIO_USER})
    s(
        {
            "type": "conversation.item.input_audio_transcription.delta",
            "event_id": "ev_14",
            "item_id": "item_a1",
            "content_index": 0,
            "delta": "what is",
        }
    )
    s(
        {
            "type": "conversation.item.input_audio_transcription.segment",
            "event_id": "ev_15",
            "item_id": "item_a1",
            "content_index": 0,
            "text": "what is",
            "id": "seg_1",
            "speaker": "A",
            "start": 0.0,
            "end": 0.5,
        }
    )
    s(
        {
            "type": "conversation.item.input_audio_transcription.completed",
            "event_id": "ev_16",
            "item_id": "item_a1",
            "content_index": 0,
            "transcript": "what is the weather",
            "usage": {"type": "duration", "seconds": 1},
        }
    )
    s(
        {
            "type": "conversation.item.input_audio_transcription.failed",
            "event_id": "ev_17",
            "item_id": "item_a1",
            "content_index": 0,
            "error": {
                "type": "transcription_error",
                "code": "audio_unintelligible",
                "message": "bad audio",
                "param": None,
            },
        }
    )
    c({"type": "input_audio_buffer.clear", "event_id": "c_6"})
    s({"type": "input_audio_buffer.cleared", "event_id": "ev_18"})
    c(
        {
            "type": "response.create",
            "event_id": "c_7",
            "response": {
                "conversation": "auto",
                "metadata": {"client_event_id": "c_7"},
                "output_modalities": ["audio"],
                "instructions": "Answer.",
            },
        }
    )
    s(
        {
            "type": "response.created",
            "event_id": "ev_19",
            "response": _response("resp_1", "in_progress", [], metadata={"client_event_id": "c_7"}),
        }
    )
    s(
        {
            "type": "response.output_item.added",
            "event_id": "ev_20",
            "response_id": "resp_1",
            "output_index": 0,
            "item": {**_FC, "status": "in_progress", "arguments": ""},
        }
    )
    s(
        {
            "type": "conversation.item.added",
            "event_id": "ev_21",
            "previous_item_id": "item_a1",
            "item": {**_FC, "status": "in_progress", "arguments": ""},
        }
    )
    s(
        {
            "type": "response.function_call_arguments.delta",
            "event_id": "ev_22",
            "response_id": "resp_1",
            "item_id": "item_fc1",
            "output_index": 0,
            "call_id": "call_1",
            "delta": '{"city": ',
        }
    )
    s(
        {
            "type": "response.function_call_arguments.done",
            "event_id": "ev_23",
            "response_id": "resp_1",
            "item_id": "item_fc1",
            "output_index": 0,
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
        }
    )
    s(
        {
            "type": "response.output_item.done",
            "event_id": "ev_24",
            "response_id": "resp_1",
            "output_index": 0,
            "item": _FC,
        }
    )
    s({"type": "conversation.item.done", "event_id": "ev_25", "previous_item_id": "item_a1", "item": _FC})
    s({"type": "response.done", "event_id": "ev_26", "response": _response("resp_1", "completed", [_FC])})
    c({"type": "conversation.item.create", "event_id": "c_8", "previous_item_id": "item_fc1", "item": _FCO})
    s({"type": "conversation.item.added", "event_id": "ev_27", "previous_item_id": "item_fc1", "item": _FCO})
    c({"type": "response.create", "event_id": "c_9"})
    s({"type": "response.created", "event_id": "ev_28", "response": _response("resp_2", "in_progress", [])})
    s(
        {
            "type": "response.output_item.added",
            "event_id": "ev_29",
            "response_id": "resp_2",
            "output_index": 0,
            "item": {**_ASSISTANT, "status": "in_progress", "content": []},
        }
    )
    s(
        {
            "type": "conversation.item.added",
            "event_id": "ev_30",
            "previous_item_id": "item_fco1",
            "item": {**_ASSISTANT, "status": "in_progress", "content": []},
        }
    )
    s(
        {
            "type": "response.content_part.added",
            "event_id": "ev_31",
            "response_id": "resp_2",
            "item_id": "item_as1",
            "output_index": 0,
            "content_index": 0,
            "part": {"type": "output_audio", "transcript": ""},
        }
    )
    s({"type": "output_audio_buffer.started", "event_id": "ev_32", "response_id": "resp_2"})
    s(
        {
            "type": "response.output_audio.delta",
            "event_id": "ev_33",
            "response_id": "resp_2",
            "item_id": "item_as1",
            "output_index": 0,
            "content_index": 0,
            "delta": "AAAAAAAAAAAA",
        }
    )
    s(
        {
            "type": "response.output_audio_transcript.delta",
            "event_id": "ev_34",
            "response_id": "resp_2",
            "item_id": "item_as1",
            "output_index": 0,
            "content_index": 0,
            "delta": "Sunny.",
        }
    )
    s(
        {
            "type": "response.output_text.delta",
            "event_id": "ev_35",
            "response_id": "resp_2",
            "item_id": "item_as1",
            "output_index": 0,
            "content_index": 0,
            "delta": "Sunny.",
        }
    )
    s(
        {
            "type": "response.output_text.done",
            "event_id": "ev_36",
            "response_id": "resp_2",
            "item_id": "item_as1",
            "output_index": 0,
            "content_index": 0,
            "text": "Sunny.",
        }
    )
    s(
        {
            "type": "response.output_audio.done",
            "event_id": "ev_37",
            "response_id": "resp_2",
            "item_id": "item_as1",
            "output_index": 0,
            "content_index": 0,
        }
    )
    s(
        {
            "type": "response.output_audio_transcript.done",
            "event_id": "ev_38",
            "response_id": "resp_2",
            "item_id": "item_as1",
            "output_index": 0,
            "content_index": 0,
            "transcript": "Sunny.",
        }
    )
    s(
        {
            "type": "response.content_part.done",
            "event_id": "ev_39",
            "response_id": "resp_2",
            "item_id": "item_as1",
            "output_index": 0,
            "content_index": 0,
            "part": {"type": "output_audio", "transcript": "Sunny."},
        }
    )
    s(
        {
            "type": "response.output_item.done",
            "event_id": "ev_40",
            "response_id": "resp_2",
            "output_index": 0,
            "item": _ASSISTANT,
        }
    )
    s({"type": "conversation.item.done", "event_id": "ev_41", "previous_item_id": "item_fco1", "item": _ASSISTANT})
    c(
        {
            "type": "conversation.item.truncate",
            "event_id": "c_10",
            "item_id": "item_as1",
            "content_index": 0,
            "audio_end_ms": 100,
        }
    )
    s(
        {
            "type": "conversation.item.truncated",
            "event_id": "ev_42",
            "item_id": "item_as1",
            "content_index": 0,
            "audio_end_ms": 100,
        }
    )
    c({"type": "output_audio_buffer.clear", "event_id": "c_11"})
    s({"type": "output_audio_buffer.cleared", "event_id": "ev_43", "response_id": "resp_2"})
    s({"type": "output_audio_buffer.stopped", "event_id": "ev_44", "response_id": "resp_2"})
    c({"type": "response.cancel", "event_id": "c_12", "response_id": "resp_2"})
    s(
        {
            "type": "response.done",
            "event_id": "ev_45",
            "response": _response(
                "resp_2",
                "cancelled",
                [_ASSISTANT],
                status_details={"type": "cancelled", "reason": "client_cancelled", "error": None},
            ),
        }
    )
    c({"type": "conversation.item.retrieve", "event_id": "c_13", "item_id": "item_u1"})
    s({"type": "conversation.item.retrieved", "event_id": "ev_46", "item": _USER})
    s({"type": "mcp_list_tools.in_progress", "event_id": "ev_47", "item_id": "item_mcpl"})
    s({"type": "mcp_list_tools.completed", "event_id": "ev_48", "item_id": "item_mcpl"})
    s({"type": "mcp_list_tools.failed", "event_id": "ev_49", "item_id": "item_mcpl"})
    c({"type": "response.create", "event_id": "c_14", "response": {"conversation": "none", "metadata": {"topic": "x"}}})
    s(
        {
            "type": "response.created",
            "event_id": "ev_50",
            "response": _response("resp_3", "in_progress", [], conversation_id=None),
        }
    )
    s(
        {
            "type": "response.mcp_call_arguments.delta",
            "event_id": "ev_51",
            "response_id": "resp_3",
            "item_id": "item_mcp1",
            "output_index": 0,
            "delta": '{"q": ',
        }
    )
    s(
        {
            "type": "response.mcp_call_arguments.done",
            "event_id": "ev_52",
            "response_id": "resp_3",
            "item_id": "item_mcp1",
            "output_index": 0,
            "arguments": '{"q": "x"}',
        }
    )
    s({"type": "response.mcp_call.in_progress", "event_id": "ev_53", "item_id": "item_mcp1", "output_index": 0})
    s({"type": "response.mcp_call.completed", "event_id": "ev_54", "item_id": "item_mcp1", "output_index": 0})
    s({"type": "response.mcp_call.failed", "event_id": "ev_55", "item_id": "item_mcp1", "output_index": 0})
    s(
        {
            "type": "response.done",
            "event_id": "ev_56",
            "response": _response(
                "resp_3",
                "failed",
                [_MCP],
                conversation_id=None,
                status_details={
                    "type": "failed",
                    "reason": None,
                    "error": {"type": "server_error", "code": "server_error", "message": "boom"},
                },
            ),
        }
    )
    c({"type": "conversation.item.delete", "event_id": "c_15", "item_id": "item_fco1"})
    s({"type": "conversation.item.deleted", "event_id": "ev_57", "item_id": "item_fco1"})
    c(
        {
            "type": "conversation.item.create",
            "event_id": "c_16",
            "item": {"id": "item_u1", "type": "message", "role": "user", "content": []},
        }
    )
    s(
        {
            "type": "error",
            "event_id": "ev_58",
            "error": {
                "type": "invalid_request_error",
                "code": "item_already_exists",
                "message": "Item 'item_u1' already exists",
                "param": None,
                "event_id": "c_16",
            },
        }
    )
    add("local", {"type": "local.generation.opened", "response_id": "resp_2"})
    add("local", {"type": "local.generation.closed", "response_id": "resp_2"})
    add("local", {"type": "local.conversation", "items": [_USER, _AUDIO_USER, _FC, _ASSISTANT]})
    add("meta", {"type": "fault.injected", "fault": "drop_on", "detail": "conversation.item.create"})
    add("meta", {"type": "note", "text": "a note"})
    add("meta", {"type": "connection.closed", "by": "server", "code": 1011, "reason": "fault"})
    add("meta", {"type": "connection.opened", "path": "/v1/realtime?model=gpt-realtime"}, 2)
    add("server", {"type": "session.created", "event_id": "ev_59", "session": _SESSION}, 2)
    add(
        "server",
        {
            "type": "error",
            "event_id": "ev_60",
            "error": {"type": "invalid_request_error", "code": "invalid_api_key", "message": "no key"},
        },
        2,
    )
    add("meta", {"type": "connection.closed", "by": "client", "code": 1000, "reason": ""}, 2)
    return out


CATALOG_LINES = catalog_lines()
ALL_TYPES = CLIENT_EVENTS | SERVER_EVENTS | META_EVENTS | LOCAL_EVENTS
assert ALL_TYPES <= {line["event"]["type"] for line in CATALOG_LINES}, ALL_TYPES - {
    line["event"]["type"] for line in CATALOG_LINES
}

#: Wrong-typed values by the JSON kind of the value they replace (every kind but its own).
WRONG: dict[str, list[Any]] = {
    "string": [7, -1.5, True, [], ["x"], {}, {"x": 1}],
    "number": ["7", True, [], {}, {"a": [1]}, "NaN"],
    "boolean": ["true", 1, [], {}],
    "null": [0, "", [], {}, False],
    "array": ["[]", 0, {}, {"0": "x"}, True],
    "object": ["{}", 0, [], [{}], True, ["a", "b"]],
}


def kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


Path = tuple[str | int, ...]


def field_paths(value: Any, prefix: Path = ()) -> Iterator[Path]:
    """Every field below an event (keys and list positions), the event's `type` excepted."""
    if isinstance(value, dict):
        for k, v in value.items():
            if prefix == () and k == "type":
                continue
            yield (*prefix, k)
            yield from field_paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield (*prefix, i)
            yield from field_paths(v, (*prefix, i))


def get_path(value: Any, path: Path) -> Any:
    for p in path:
        value = value[p]
    return value


def mutated(lines: list[dict[str, Any]], index: int, path: Path, wrong: Any) -> list[dict[str, Any]]:
    """A copy of `lines` with the field at `path` of line `index`'s event set to `wrong`."""
    copy = orjson.loads(orjson.dumps(lines))
    target = copy[index]["event"]
    for p in path[:-1]:
        target = target[p]
    target[path[-1]] = wrong
    return copy


def mutations(lines: list[dict[str, Any]] | None = None) -> Iterator[tuple[int, Path, Any]]:
    """(line index, field path, wrong value) for every field of every line, each wrong kind once."""
    lines = CATALOG_LINES if lines is None else lines
    for index, line in enumerate(lines):
        event = line.get("event")
        if not isinstance(event, dict):
            continue
        for path in field_paths(event):
            for wrong in WRONG[kind_of(get_path(event, path))]:
                yield index, path, wrong


def dumps_lines(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)
