"""Responses of the fake endpoint: the default script, streaming and pauses, one active response, out-of-band
responses, cancel."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from rtrace.core.audio import decode, rms
from rtrace.net.fake.endpoint import EndpointConnection, EndpointOptions
from rtrace.net.fake.responses import Reply, choose_reply, chunks, tokens
from rtrace.net.fake.tools import DEFAULT_TOOL, Tool

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
    d = Driver(EndpointConnection(1, EndpointOptions(audio_tone=440)))
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


def _folded(events: list[dict[str, Any]]) -> list[tuple[str, int | None]]:
    """(type, output_index) of each event from `response.created` on, a run of one delta type folded into one."""
    out: list[tuple[str, int | None]] = []
    for e in events[types(events).index("response.created") :]:
        token = (e["type"], e.get("output_index"))
        if not (e["type"].endswith(".delta") and out and out[-1] == token):
            out.append(token)
    return out


def test_gpt_realtime_2_1_says_a_preamble_then_calls_in_one_response_in_the_real_servers_order() -> None:
    """The realapi recording `text-and-tool-one-response` (gpt-realtime-2.1): a `commentary` message at output
    index 0, then the call at 1 while the message is still open; the message ends after the call's argument
    deltas, before the call's own done events. gpt-realtime (three recordings) calls alone."""
    d = make(model="gpt-realtime-2.1")
    done = weather_call(d)
    sent = [e for _, e in d.sent]
    assert _folded(sent) == [
        ("response.created", None),
        ("response.output_item.added", 0),
        ("conversation.item.added", None),
        ("response.content_part.added", 0),
        ("response.output_text.delta", 0),
        ("response.output_item.added", 1),
        ("conversation.item.added", None),
        ("response.function_call_arguments.delta", 1),
        ("response.output_text.done", 0),
        ("response.content_part.done", 0),
        ("conversation.item.done", None),
        ("response.output_item.done", 0),
        ("response.function_call_arguments.done", 1),
        ("conversation.item.done", None),
        ("response.output_item.done", 1),
        ("response.done", None),
    ]
    tail = sent[types(sent).index("response.created") :]
    message, call = done["response"]["output"]
    assert (message["type"], message["phase"], message["status"]) == ("message", "commentary", "completed")
    assert message["content"] == [{"type": "output_text", "text": "One moment, I'll check that for you."}]
    assert (call["type"], call["name"], call["arguments"]) == ("function_call", "get_weather", '{"city": "Paris"}')
    parts = [e for e in tail if e["type"].startswith(("response.output_text", "response.content"))]
    assert parts and all(e["content_index"] == 0 for e in parts)
    assert all(e["item_id"] == message["id"] for e in tail if e["type"].startswith("response.output_text"))
    added = [e for e in tail if e["type"] == "conversation.item.added"]
    assert [a["previous_item_id"] for a in added] == ["U1", message["id"]]  # the call enters after the message
    assert d.conn.conv.ids() == ["U1", message["id"], call["id"]]
    # the same model's answer without a call is one message, `final_answer`
    fco = {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"}
    d.send({"type": "conversation.item.create", "item": fco})
    [answer] = done_of(d.send({"type": "response.create"}))["response"]["output"]
    assert (answer["phase"], answer["content"][0]["text"]) == ("final_answer", "Tool result: sunny")


def test_the_preamble_option_holds_whatever_the_model_and_a_script_text_before_a_call_is_one() -> None:
    """`preamble=True` on gpt-realtime: the message (no `phase`: the model has none) then the call; `False` on
    gpt-realtime-2.1: the call alone. A script turn's text before its call is that call's preamble, same order."""
    on = weather_call(make(preamble=True))["response"]["output"]
    assert [(o["type"], o.get("phase")) for o in on] == [("message", None), ("function_call", None)]
    off = weather_call(make(model="gpt-realtime-2.1", preamble=False))["response"]["output"]
    assert [o["type"] for o in off] == ["function_call"]
    from rtrace.net.faults.script import parse_script

    turn = '[[turn]]\nwhen = { user = "weather" }\ntext = "Checking {user}"\ncall = { name = "get_weather" }\n'
    d = make(model="gpt-realtime-2.1", schedule=parse_script(turn))
    weather_call(d)
    scripted = _folded([e for _, e in d.sent])
    preamble_done = scripted.index(("response.output_item.done", 0))
    assert scripted.index(("response.function_call_arguments.delta", 1)) < preamble_done
    assert preamble_done < scripted.index(("response.function_call_arguments.done", 1))


def test_the_analyzer_finds_nothing_in_a_preamble_round(tmp_path: Any) -> None:
    """A message and a call in one response, the output sent while the response is still open, the answer after:
    a clean round for the analyzer (output indexes, content indexes and acks as it expects them)."""
    import json

    from rtrace.engine.fold import analyze_path
    from rtrace.net.fake.fidelity import serve_session

    weather = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}
    session = {"type": "realtime", "output_modalities": ["text"], "tools": [weather]}
    q = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Oslo?"}]}
    first = serve_session(
        [("client", {"type": "session.update", "session": session}),
         ("client", {"type": "conversation.item.create", "item": q}), ("client", {"type": "response.create"})],
        EndpointOptions(model="gpt-realtime-2.1"),
    )  # fmt: skip
    call = next(e["item"] for d, e in first if e["type"] == "response.output_item.added" and e["output_index"] == 1)
    fco = {"type": "function_call_output", "call_id": call["call_id"], "output": "cold"}
    client = [e for d, e in first if d == "client"]
    client += [{"type": "conversation.item.create", "item": fco}, {"type": "response.create"}]
    records = serve_session([("client", e) for e in client], EndpointOptions(model="gpt-realtime-2.1"))
    assert [e["type"] for _, e in records].count("response.output_item.added") == 3
    path = tmp_path / "preamble.jsonl"
    lines = [json.dumps({"t": 0.01 * n, "dir": d, "conn": 1, "event": e}) for n, (d, e) in enumerate(records)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = analyze_path(path)
    assert [(f.rule, f.message) for f in report.findings] == []


def test_a_response_cancelled_before_its_output_has_none_and_no_usage() -> None:
    """The realapi recording `webrtc-barge-ins-and-tool-call`: cancelled before its first item, a response's
    `response.done` comes alone, `output: []`, every token count 0. With `first_output_delay` serve's responses
    take the real server's time to their first item, so a cancel (or speech) can come first."""
    d = make(first_output_delay=0.3)
    d.send(user("hello", "U"))
    created = d.send({"type": "response.create"}, follow=False)
    assert types(created) == ["response.created"] and d.conn.responses.active is not None
    out = d.send({"type": "response.cancel"})
    assert types(out) == ["response.done"]
    resp = out[0]["response"]
    assert resp["status"] == "cancelled"
    assert resp["status_details"] == {"type": "cancelled", "reason": "client_cancelled"}
    assert resp["output"] == [] and resp["usage"]["total_tokens"] == resp["usage"]["input_tokens"] == 0
    assert d.conn.wake(("run", resp["id"])) == []  # the pending first-output pause produces nothing
    assert d.conn.conv.ids() == ["U"]
    # not cancelled, the same response streams its answer once the pause is over
    d.send(user("again", "V"))
    t0 = d.t
    d.send({"type": "response.create"})
    first_item = next(t for t, e in d.sent if e["type"] == "response.output_item.added" and t >= t0)
    assert first_item - t0 == pytest.approx(0.3)


def test_a_response_cancelled_during_its_preamble_keeps_what_it_said() -> None:
    """Cancelled with partial output (the real server's barge-ins): the item being generated ends `incomplete`
    with the text so far, the call never starts, the usage counts what was generated."""
    options = EndpointOptions(model="gpt-realtime-2.1", audio_pace=1.0, rate_limits_after_done=False)
    d = Driver(EndpointConnection(1, options))
    d.open()  # audio out: the preamble's audio is paced, so the cancel comes while it speaks
    d.send(user("What's the weather in Paris?", "U1"))
    first = d.send({"type": "response.create"}, follow=False)
    said = "".join(e["delta"] for e in first if e["type"] == "response.output_audio_transcript.delta")
    assert said and "response.output_audio.delta" in types(first)
    out = d.send({"type": "response.cancel"})
    resp = done_of(out)["response"]
    [message] = resp["output"]
    assert (message["type"], message["status"], message["phase"]) == ("message", "incomplete", "commentary")
    assert message["content"][0]["transcript"] == said != "One moment, I'll check that for you."
    assert resp["usage"]["output_tokens"] > 0 and "response.output_item.added" not in types(out)
