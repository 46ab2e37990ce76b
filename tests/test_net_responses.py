"""Responses of the fake endpoint: the default script, streaming and pauses, one active response, out-of-band
responses, cancel."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from rtrace.core.audio import decode, rms
from rtrace.net.endpoint import EndpointConnection, EndpointOptions
from rtrace.net.responses import Reply, choose_reply, chunks, tokens
from rtrace.net.tools import DEFAULT_TOOL, Tool

from .netdriver import Driver, done_of, make, types, user, weather_call


def test_chunks_and_tokens() -> None:
    assert chunks("abcdefg", 3) == ["abc", "def", "g"]
    assert chunks("ab", 8) == ["a", "b"] and chunks("", 3) == [""]
    assert (tokens(""), tokens("a"), tokens("abcde")) == (0, 1, 2)


def test_weather_gets_a_function_call_in_the_order_of_the_api() -> None:
    d = make()
    done = weather_call(d)
    sent = types([e for _, e in d.sent[-20:]])
    sent = sent[sent.index("response.created") :]
    # the arguments in token-sized deltas, as the real server streams them
    assert sent.count("response.function_call_arguments.delta") > 1
    sent = [t for i, t in enumerate(sent) if t != "response.function_call_arguments.delta" or sent[i - 1] != t]
    assert sent == [
        "response.created",
        "response.output_item.added",
        "conversation.item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "conversation.item.done",
        "response.output_item.done",
        "response.done",
    ]
    resp = done["response"]
    assert resp["status"] == "completed" and resp["metadata"] == {"client_event_id": "rc1"}
    call = resp["output"][0]
    assert (call["id"], call["call_id"], call["name"], call["arguments"]) == (
        "item_s1_0001",
        "call_s1_0001_0",
        "get_weather",
        '{"city": "Paris"}',
    )
    assert resp["id"] == "resp_fake0001" and resp["conversation_id"] == "conv_fake0001"
    assert d.conn.conv.ids() == ["U1", "item_s1_0001"]
    assert d.conn.responses.active is None


def test_output_then_response_says_tool_result() -> None:
    d = make()
    weather_call(d)
    fco = {"type": "function_call_output", "call_id": "call_s1_0001_0", "output": "sunny", "id": "O"}
    acks = d.send({"type": "conversation.item.create", "item": fco})
    assert acks[0]["previous_item_id"] == "item_s1_0001"
    out = d.send({"type": "response.create"})
    assert done_of(out)["response"]["output"][0]["content"][0]["text"] == "Tool result: sunny"


def test_story_is_streamed_in_chunks_with_pauses() -> None:
    d = make()
    d.send(user("tell me a slow story", "S"))
    t0 = d.t
    out = d.send({"type": "response.create"})
    deltas = [(t, e["delta"]) for t, e in d.sent if e["type"] == "response.output_text.delta"]
    assert len(deltas) == 8
    assert "".join(x for _, x in deltas) == "Once upon a time there was a very slow story."
    assert [round(t - t0, 3) for t, _ in deltas] == [round(0.06 * k, 3) for k in range(1, 9)]
    assert done_of(out)["response"]["status"] == "completed"


def test_one_active_response_at_a_time_and_out_of_band_runs_beside_it() -> None:
    d = make()
    d.send(user("a long story please", "S"))
    first = d.send({"type": "response.create"}, follow=False)
    assert d.conn.responses.active is not None
    [err] = d.send({"type": "response.create", "event_id": "rc2"})
    assert err["error"]["code"] == "conversation_already_has_active_response"
    assert err["error"]["event_id"] == "rc2" and d.conn.responses.active.response.id in err["error"]["message"]
    oob = d.send({"type": "response.create", "response": {"conversation": "none", "input": []}})
    assert oob[-1]["response"]["conversation_id"] is None
    assert "conversation.item.added" not in types(oob)
    assert d.conn.conv.ids() == ["S", first[1]["item"]["id"]]


def test_cancel_closes_the_open_item_and_the_response() -> None:
    d = make()
    d.send(user("a long story please", "S"))
    d.send({"type": "response.create"}, follow=False)
    out = d.send({"type": "response.cancel"})
    assert types(out) == [
        "response.output_text.done",
        "response.content_part.done",
        "conversation.item.done",
        "response.output_item.done",
        "response.done",
    ]
    assert out[2]["item"]["status"] == "incomplete"
    assert done_of(out)["response"]["status"] == "cancelled"
    assert done_of(out)["response"]["status_details"] == {"type": "cancelled", "reason": "client_cancelled"}
    assert d.conn.responses.active is None
    # The pending pause of the cancelled response produces nothing.
    assert d.conn.wake(("run", done_of(out)["response"]["id"])) == []
    [err] = d.send({"type": "response.cancel", "event_id": "c2"})
    assert err["error"]["code"] == "response_cancel_not_active"
    assert err["error"]["message"] == "Cancellation failed: no active response found"


def test_choose_reply_rules() -> None:
    def u(t: str) -> dict[str, Any]:
        return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]}

    weather = choose_reply([u("weather?")])
    assert (weather.kind, weather.text, weather.tool) == ("call", "weather?", DEFAULT_TOOL)
    assert choose_reply([u("weather?")], choice="none") == Reply("text", "You said: weather?")
    assert choose_reply([u("weather?"), {"type": "function_call"}]) == Reply("text", "You said: weather?")
    assert choose_reply([u("hello")], choice="required").tool == DEFAULT_TOOL
    assert choose_reply([u("hello")], forced="ping").tool == Tool("ping")
    assert choose_reply([u("hello")], forced="ping", choice="none").kind == "text"
    assert choose_reply([u("a story")]).kind == "story"
    assert choose_reply([{"type": "function_call_output", "output": "9"}]) == Reply("text", "Tool result: 9")
    assert choose_reply([]) == Reply("text", "Hello! How can I help?")
    assert choose_reply([], choice="required").kind == "text"  # a call answers a user turn


LOOKUP = {
    "type": "function",
    "name": "lookup_order",
    "description": "Look up an order by its id",
    "parameters": {
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
        "additionalProperties": False,
    },
}


def call_of(out: list[dict[str, Any]]) -> dict[str, Any]:
    [item] = done_of(out)["response"]["output"]
    assert item["type"] == "function_call", out[-1]
    return item


def test_the_declared_tool_is_called_with_arguments_from_its_schema_and_the_text() -> None:
    d = make()
    d.send({"type": "session.update", "session": {"type": "realtime", "tools": [LOOKUP]}})
    d.send(user("Please look up order 42 and tell me the weather where it ships.", "U1"))
    call = call_of(d.send({"type": "response.create"}))
    assert (call["name"], call["arguments"]) == ("lookup_order", '{"order_id": "42"}')
    # the output's answer mentions it
    fco = {"type": "function_call_output", "call_id": call["call_id"], "output": '{"status": "shipped"}'}
    d.send({"type": "conversation.item.create", "item": fco})
    done = d.send({"type": "response.create"})[-1]
    assert done["response"]["output"][0]["content"][0]["text"] == 'Tool result: {"status": "shipped"}'


def test_a_text_that_names_no_tool_gets_text_unless_the_choice_requires_a_call() -> None:
    d = make()
    d.send({"type": "session.update", "session": {"type": "realtime", "tools": [LOOKUP]}})
    d.send(user("hello there", "U1"))
    out = d.send({"type": "response.create"})
    assert done_of(out)["response"]["output"][0]["type"] == "message"
    d.send(user("and again", "U2"))
    call = call_of(d.send({"type": "response.create", "response": {"tool_choice": "required"}}))
    assert call["name"] == "lookup_order" and call["arguments"].startswith('{"order_id": "order_id-')


def test_response_tools_replace_the_session_tools_and_a_named_choice_wins() -> None:
    d = make()
    d.send({"type": "session.update", "session": {"type": "realtime", "tools": [LOOKUP]}})
    d.send(user("What's the weather in Rome?", "U1"))
    ping = {"type": "function", "name": "ping", "parameters": {"type": "object", "properties": {}}}
    params = {"tools": [ping, LOOKUP], "tool_choice": {"type": "function", "name": "ping"}}
    call = call_of(d.send({"type": "response.create", "response": params}))
    assert (call["name"], call["arguments"]) == ("ping", "{}")


def test_a_forced_tool_is_called_on_each_user_turn_with_the_given_or_made_arguments() -> None:
    d = make(tool="lookup_order", tool_arguments='{"order_id": "A-1"}')
    d.send({"type": "session.update", "session": {"type": "realtime", "tools": [LOOKUP]}})
    d.send(user("hi", "U1"))
    assert call_of(d.send({"type": "response.create"}))["arguments"] == '{"order_id": "A-1"}'
    made = make(tool="lookup_order", seed=3)
    made.send({"type": "session.update", "session": {"type": "realtime", "tools": [LOOKUP]}})
    made.send(user("hi", "U1"))
    first = call_of(made.send({"type": "response.create"}))["arguments"]
    again = make(tool="lookup_order", seed=3)
    again.send({"type": "session.update", "session": {"type": "realtime", "tools": [LOOKUP]}})
    again.send(user("hi", "U1"))
    assert call_of(again.send({"type": "response.create"}))["arguments"] == first


def test_section_7_options_rate_limits_and_out_of_band_item_events() -> None:
    d = make(rate_limits=True, out_of_band_item_events=True)
    d.send(user("hi", "A"))
    out = d.send({"type": "response.create"})
    assert types(out)[:2] == ["response.created", "rate_limits.updated"]
    oob = d.send({"type": "response.create", "response": {"conversation": "none"}})
    assert "conversation.item.added" in types(oob)
    assert oob[-1]["response"]["conversation_id"] is None
    assert len(d.conn.conv) == 2  # the out-of-band item is not in the conversation


def audio_of(events: list[dict[str, Any]], codec: str = "pcm16") -> bytes:
    return b"".join(base64.b64decode(e["delta"]) for e in events if e["type"] == "response.output_audio.delta")


def test_an_audio_answer_streams_audio_sized_to_its_transcript_in_the_order_of_the_api() -> None:
    d = Driver(EndpointConnection(1))
    d.open()  # the default session: audio out, 24 kHz PCM16
    d.send(user("hi", "A"))
    out = d.send({"type": "response.create"})
    text = "You said: hi"
    kinds = types(out)
    start, end = kinds.index("response.content_part.added"), kinds.index("response.output_audio.done")
    # each transcript delta, then its audio; then the dones
    streamed = kinds[start + 1 : end]
    assert streamed[0] == "response.output_audio_transcript.delta"
    assert set(streamed) == {"response.output_audio_transcript.delta", "response.output_audio.delta"}
    assert kinds[end : end + 5] == [
        "response.output_audio.done", "response.output_audio_transcript.done", "response.content_part.done",
        "conversation.item.done", "response.output_item.done",
    ]  # fmt: skip
    audio = audio_of(out)
    assert len(audio) == len(text) * 60 * 48 and rms(decode(audio, "pcm16")) == 0.0  # silence by default
    for e in out:
        if e["type"] == "response.output_audio.delta":
            assert {"event_id", "response_id", "item_id", "output_index", "content_index", "delta"} <= set(e)
            assert len(base64.b64decode(e["delta"])) <= 200 * 48
    item = d.conn.conv.items[done_of(out)["response"]["output"][0]["id"]]
    assert item.audio_bytes == len(audio)


def test_g711_output_and_a_tone() -> None:
    d = Driver(EndpointConnection(1, EndpointOptions(audio_tone_hz=440)))
    d.open()
    fmt = {"output": {"format": {"type": "audio/pcma"}}}
    d.send({"type": "session.update", "session": {"type": "realtime", "audio": fmt}})
    d.send(user("hi", "A"))
    audio = audio_of(d.send({"type": "response.create"}))
    assert len(audio) == len("You said: hi") * 60 * 8  # 8 kHz, a byte a sample
    assert 0.15 < rms(decode(audio, "pcma")) < 0.2  # a sine at a quarter of full scale
    # the response's own format wins over the session's
    d.send(user("ho", "B"))
    pcmu = {"output": {"format": {"type": "audio/pcmu"}}}
    audio = audio_of(d.send({"type": "response.create", "response": {"audio": pcmu}}))
    assert 0.15 < rms(decode(audio, "pcmu")) < 0.2


def test_audio_pace_spreads_the_audio_and_a_cancel_keeps_what_was_sent() -> None:
    options = EndpointOptions(audio_pace=1.0, audio_ms_per_char=100, audio_delta_ms=100)
    d = Driver(EndpointConnection(1, options))
    d.open()
    d.send(user("hi", "A"))
    d.send({"type": "response.create"})  # followed to its end on the virtual clock
    times = [t for t, e in d.sent if e["type"] == "response.output_audio.delta"]
    assert len(times) == len("You said: hi")
    assert [t - times[0] for t in times] == pytest.approx([k * 0.1 for k in range(len(times))])  # real time
    d.send(user("ho", "B"))
    first = d.send({"type": "response.create"}, follow=False)
    rid = first[0]["response"]["id"]
    d.run(d.conn.wake(("run", rid)), follow=False)
    item = next(iter(d.conn.responses.runs[rid].items.values()))
    assert item.audio_bytes == 2 * 100 * 48
    cancelled = d.send({"type": "response.cancel"})
    assert done_of(cancelled)["response"]["status"] == "cancelled"
    assert "response.output_audio.delta" not in types(cancelled)
    assert item.audio_bytes == 2 * 100 * 48  # what was sent, no more
    truncate = {"type": "conversation.item.truncate", "item_id": item.id, "content_index": 0, "audio_end_ms": 201}
    [err] = d.send(truncate)
    assert err["error"]["message"] == "Audio content of 200ms is already shorter than 201ms"


def test_the_2_1_models_mark_their_messages_with_a_phase() -> None:
    """The realapi recordings of gpt-realtime-2.1 and 2.1-mini: `phase: final_answer` on an answer's message."""
    for model, phase in (("gpt-realtime-2.1-mini", "final_answer"), ("gpt-realtime", None)):
        d = make(model=model)
        d.send(user("hello", "U"))
        done = d.send({"type": "response.create"})[-1]
        assert done["type"] == "response.done"
        assert done["response"]["output"][0].get("phase") == phase


def test_the_done_of_an_item_after_the_first_says_no_predecessor_as_the_real_server() -> None:
    """Every realapi recording: `conversation.item.added` of the answer names the user item before it, its
    `conversation.item.done` says null when that item is the conversation's first; later ones name theirs."""
    d = make()
    d.send(user("hello", "U1"))
    out = d.send({"type": "response.create"})
    added = next(e for e in out if e["type"] == "conversation.item.added")
    done = next(e for e in out if e["type"] == "conversation.item.done")
    assert added["previous_item_id"] == "U1" and done["previous_item_id"] is None
    d.send(user("again", "U2"))
    out = d.send({"type": "response.create"})
    done = next(e for e in out if e["type"] == "conversation.item.done")
    assert done["previous_item_id"] == "U2"
