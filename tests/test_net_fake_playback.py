"""Recorded responses (`rtrace serve --from`): cut out of a trace, handed out in order, played back with this
connection's ids, predecessors, metadata and pacing."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from rtrace.core.loader import TraceReader
from rtrace.net.fake.endpoint import EndpointConnection
from rtrace.net.fake.playback import RecordedResponse, ResponseSource, recorded_responses, remap

from .netdriver import Driver, done_of, make, user

REAL = Path(__file__).resolve().parent.parent / "sample_traces" / "real"


def test_responses_are_taken_in_order_and_ids_remapped_anywhere() -> None:
    a, b = RecordedResponse([]), RecordedResponse([])
    source = ResponseSource([a, b])
    assert (source.take(), source.take(), source.take()) == (a, b, None)
    assert remap({"id": "x", "list": ["x", {"k": "y"}], "n": 1}, {"x": "X"}) == {
        "id": "X",
        "list": ["X", {"k": "y"}],
        "n": 1,
    }


def test_from_recording_replays_responses_with_pacing_and_new_ids() -> None:
    with TraceReader.open(REAL / "tool-output-race.livekit-1.8.8.jsonl") as reader:
        responses = recorded_responses(reader)
    assert len(responses) == 4
    d = make()
    d.conn.source = ResponseSource(responses)
    d.conn.conn = 1
    d.send(user("anything", "Z"))
    out = d.send({"type": "response.create", "response": {"metadata": {"k": "v"}}})
    call = done_of(out)["response"]["output"][0]
    assert call["type"] == "function_call" and call["name"] == "get_weather"
    assert done_of(out)["response"]["metadata"] == {"k": "v"}
    assert out[2]["previous_item_id"] == "Z"
    t0 = d.t
    out = d.send({"type": "response.create"})
    deltas = [t - t0 for t, e in d.sent if e["type"] == "response.output_text.delta"]
    assert len(deltas) == 8 and 0.4 < deltas[-1] < 0.6
    assert "".join(e["delta"] for e in out if e["type"] == "response.output_text.delta").startswith("Once upon")
    assert json.dumps(out).count("resp_fake0002") >= 1


def test_recorded_audio_gives_its_item_the_length_a_truncate_is_checked_against() -> None:
    item = {"id": "item_R", "object": "realtime.item", "type": "message", "role": "assistant", "status": "in_progress"}
    done_item = {**item, "status": "completed", "content": [{"type": "output_audio", "transcript": "hi"}]}
    ids = {"response_id": "resp_R", "item_id": "item_R", "output_index": 0, "content_index": 0}
    recorded = RecordedResponse(
        [
            (0.0, {"type": "response.created", "response": {"id": "resp_R"}}),
            (0.0, {"type": "response.output_item.added", "response_id": "resp_R", "item": {**item, "content": []}}),
            (0.0, {"type": "response.output_audio.delta", **ids, "delta": "", "rtrace_audio_bytes": 4000}),
            (0.0, {"type": "response.output_audio.delta", **ids, "delta": base64.b64encode(bytes(800)).decode()}),
            (0.0, {"type": "response.output_item.done", "response_id": "resp_R", "item": done_item}),
            (0.0, {"type": "response.done", "response": {"id": "resp_R", "status": "completed"}}),
        ]
    )
    d = Driver(EndpointConnection(1, source=ResponseSource([recorded])))
    d.open()
    out = d.send({"type": "response.create"})
    new_id = done_of(out)["response"]["output"][0]["id"]
    assert new_id == "item_s1_0001" and d.conn.conv.items[new_id].audio_bytes == 4800  # 100 ms at 24 kHz
    [err] = d.send({"type": "conversation.item.truncate", "item_id": new_id, "content_index": 0, "audio_end_ms": 101})
    assert err["error"]["message"] == "Audio content of 100ms is already shorter than 101ms"
    [ok] = d.send({"type": "conversation.item.truncate", "item_id": new_id, "content_index": 0, "audio_end_ms": 100})
    assert ok["type"] == "conversation.item.truncated"


def test_a_recorded_message_and_call_that_interleave_are_played_each_to_its_own_item() -> None:
    """A recorded response of gpt-realtime-2.1's shape (the preamble message still open while the call streams):
    each done event and text delta goes to the item it names, so both items end as recorded."""
    recording = make(model="gpt-realtime-2.1")
    recording.send(user("What's the weather in Paris?", "U"))
    out = recording.send({"type": "response.create"})
    start = [e["type"] for e in out].index("response.created")
    recorded = RecordedResponse([(0.0, e) for e in out[start:]])
    d = make()
    d.conn.source = ResponseSource([recorded])
    d.send(user("anything", "Z"))
    message, call = done_of(d.send({"type": "response.create"}))["response"]["output"]
    assert (message["type"], message["status"]) == ("message", "completed")
    assert message["content"][0]["text"] == "One moment, I'll check that for you."
    assert (call["type"], call["status"], call["arguments"]) == ("function_call", "completed", '{"city": "Paris"}')
    assert [d.conn.conv.get(i).wire["type"] for i in d.conn.conv.ids()] == ["message", "message", "function_call"]
    assert all(run.open_items == [] for run in d.conn.responses.runs.values())
