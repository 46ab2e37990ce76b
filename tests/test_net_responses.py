"""Responses of the fake endpoint: the default script, streaming and pauses, one active response, out-of-band
responses, cancel."""

from __future__ import annotations

from typing import Any

from rtrace.net.responses import choose_reply, chunks, tokens

from .netdriver import make, types, user, weather_call


def test_chunks_and_tokens() -> None:
    assert chunks("abcdefg", 3) == ["abc", "def", "g"]
    assert chunks("ab", 8) == ["a", "b"] and chunks("", 3) == [""]
    assert (tokens(""), tokens("a"), tokens("abcde")) == (0, 1, 2)


def test_weather_gets_a_function_call_in_the_order_of_the_api() -> None:
    d = make()
    done = weather_call(d)
    sent = types([e for _, e in d.sent[-8:]])
    assert sent == [
        "response.created",
        "response.output_item.added",
        "conversation.item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "conversation.item.done",
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
    assert out[-1]["response"]["output"][0]["content"][0]["text"] == "Tool result: sunny"


def test_story_is_streamed_in_chunks_with_pauses() -> None:
    d = make()
    d.send(user("tell me a slow story", "S"))
    t0 = d.t
    out = d.send({"type": "response.create"})
    deltas = [(t, e["delta"]) for t, e in d.sent if e["type"] == "response.output_text.delta"]
    assert len(deltas) == 8
    assert "".join(x for _, x in deltas) == "Once upon a time there was a very slow story."
    assert [round(t - t0, 3) for t, _ in deltas] == [round(0.06 * k, 3) for k in range(1, 9)]
    assert out[-1]["response"]["status"] == "completed"


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
        "response.output_item.done",
        "conversation.item.done",
        "response.done",
    ]
    assert out[2]["item"]["status"] == "incomplete"
    assert out[-1]["response"]["status"] == "cancelled"
    assert out[-1]["response"]["status_details"] == {"type": "cancelled", "reason": "client_cancelled"}
    assert d.conn.responses.active is None
    # The pending pause of the cancelled response produces nothing.
    assert d.conn.wake(("run", out[-1]["response"]["id"])) == []
    [err] = d.send({"type": "response.cancel", "event_id": "c2"})
    assert err["error"]["code"] == "response_cancel_not_active"
    assert err["error"]["message"] == "Cancellation failed: no active response found"


def test_choose_reply_rules() -> None:
    def u(t: str) -> dict[str, Any]:
        return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]}

    assert choose_reply([u("weather?")]) == ("call", "weather?")
    assert choose_reply([u("weather?")], tools_allowed=False) == ("text", "You said: weather?")
    assert choose_reply([u("weather?"), {"type": "function_call"}]) == ("text", "You said: weather?")
    assert choose_reply([u("a story")])[0] == "story"
    assert choose_reply([{"type": "function_call_output", "output": "9"}]) == ("text", "Tool result: 9")
    assert choose_reply([])[0] == "text"


def test_section_7_options_rate_limits_and_out_of_band_item_events() -> None:
    d = make(rate_limits=True, out_of_band_item_events=True)
    d.send(user("hi", "A"))
    out = d.send({"type": "response.create"})
    assert types(out)[:2] == ["response.created", "rate_limits.updated"]
    oob = d.send({"type": "response.create", "response": {"conversation": "none"}})
    assert "conversation.item.added" in types(oob)
    assert oob[-1]["response"]["conversation_id"] is None
    assert len(d.conn.conv) == 2  # the out-of-band item is not in the conversation
