"""The wire's shapes: frames decoded without raising, session.update merging, copies, and the API's objects."""

from __future__ import annotations

from typing import Any

from rtrace.core.audio import session_format
from rtrace.net.fake.wire import (
    FrameError,
    assistant_message,
    committed_audio_message,
    copy_json,
    decode_frame,
    default_session,
    error_event,
    function_call,
    item_text,
    merge_session,
    usage,
)


def test_decode_frame_names_what_is_wrong_and_never_raises() -> None:
    cases: dict[Any, str] = {
        b"\x00\x01": "invalid_event",
        "{not json": "invalid_json",
        "[1,2]": "invalid_event",
        '{"x": 1}': "missing_required_parameter",
        '{"type": 1}': "missing_required_parameter",
        "x" * 200: "event_too_large",
        "é" * 60: "event_too_large",  # bytes, not characters, are counted
    }
    for frame, code in cases.items():
        decoded = decode_frame(frame, max_bytes=100)
        assert isinstance(decoded, FrameError) and decoded.code == code, frame
    assert decode_frame('{"type": "response.cancel"}') == {"type": "response.cancel"}
    lone_surrogate = decode_frame('{"type": "\\ud800"}')
    assert isinstance(lone_surrogate, FrameError) and lone_surrogate.code == "invalid_json"


def test_session_update_merges_nested_objects_and_replaces_the_rest() -> None:
    session = default_session("sess_1", "gpt-realtime")
    update = {"instructions": "hi", "audio": {"output": {"voice": "x"}}, "tools": [{"name": "t"}]}
    merge_session(session, update)
    assert session["audio"]["output"] == {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "x", "speed": 1.0}
    assert session["instructions"] == "hi" and session["tools"] == [{"name": "t"}]
    update["tools"][0]["name"] = "changed"
    assert session["tools"] == [{"name": "t"}]  # the session holds copies


def test_copy_json_is_deep() -> None:
    item = {"content": [{"text": "a"}]}
    copied = copy_json(item)
    item["content"][0]["text"] = "b"
    assert copied == {"content": [{"text": "a"}]}


def test_item_text_joins_text_and_transcripts() -> None:
    item = {"content": [{"type": "input_text", "text": "a"}, {"transcript": "b"}, {"transcript": None}, "x"]}
    assert item_text(item) == "a b" and item_text({}) == ""


def test_templates_have_the_api_fields_in_the_api_order() -> None:
    assert list(assistant_message("i")) == ["id", "type", "status", "role", "content"]
    assert list(function_call("i", "c", "n")) == ["id", "type", "status", "name", "call_id", "arguments"]
    assert committed_audio_message("i")["content"] == [{"type": "input_audio", "transcript": None}]
    assert error_event("c", "m", None, "e")["error"] == {
        "type": "invalid_request_error",
        "code": "c",
        "message": "m",
        "param": None,
        "event_id": "e",
    }
    assert usage(3, 4)["total_tokens"] == 7


def test_the_default_session_is_24_khz_pcm_both_ways() -> None:
    session = default_session("sess_1", "m")
    assert session_format(session, "input") == session_format(session, "output") == (24000, 2)


def test_text_streams_in_token_sized_deltas_with_the_real_padding() -> None:
    """As the realapi recordings: 'It', ' is', ' fog', 'gy', ' and', ' ', '12', ...; delta and `obfuscation` are
    16 characters together."""
    from rtrace.net.fake.wire import obfuscation, token_pieces

    text = "It is foggy and 12 degrees in London."
    pieces = token_pieces(text)
    assert "".join(pieces) == text and len(pieces) >= 9 and max(len(p) for p in pieces) <= 9
    assert token_pieces("") == [] or "".join(token_pieces("")) == ""
    assert all(len(p + obfuscation(p, n)) == 16 for n, p in enumerate(pieces))
    assert obfuscation("x", 1) != obfuscation("x", 2) and obfuscation("x", 1).isalnum()
    weird = "naïve — 日本語\n\n  x"
    assert "".join(token_pieces(weird)) == weird
