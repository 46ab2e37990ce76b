"""The fake endpoint's speech part (`rtrace.net.fake.speech`), through the connection it is mixed into: the input audio
buffer, the transcript each committed turn is heard as, a schedule's barge-in, the idle timeout, and the host
interface the part declares."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from rtrace.core.audio import encode, tone
from rtrace.net.fake.endpoint import EndpointConnection, EndpointOptions
from rtrace.net.fake.speech import BARGE_IN_SPEECH_MS, IDLE_NOTE, SpeechTurns
from rtrace.net.faults.flags import Faults
from rtrace.net.faults.script import Schedule

from .netdriver import Driver, make, types, user


def speech(ms: int, hz: float = 440) -> dict[str, Any]:
    """An `input_audio_buffer.append` of `ms` of a 24 kHz PCM16 tone (hz 0: silence)."""
    data = encode(tone(24000 * ms // 1000, 24000, hz), "pcm16")
    return {"type": "input_audio_buffer.append", "audio": base64.b64encode(data).decode()}


def session(d: Driver, vad: dict[str, Any] | None) -> None:
    audio_in = {"turn_detection": vad, "transcription": {"model": "gpt-4o-mini-transcribe"}}
    d.send({"type": "session.update", "session": {"type": "realtime", "audio": {"input": audio_in}}})


def test_each_committed_turn_is_heard_as_the_next_transcript_the_last_repeating() -> None:
    d = make(transcript=["one", "two"])
    session(d, None)
    heard = []
    for _ in range(3):
        d.send(speech(200))
        out = d.send({"type": "input_audio_buffer.commit"})
        [done] = [e for e in out if e["type"] == "conversation.item.input_audio_transcription.completed"]
        heard.append(done["transcript"])
    assert heard == ["one", "two", "two"] and d.conn.audio_turns == 3 and d.conn.audio_buffer_bytes == 0


def test_clear_empties_the_buffer_and_forgets_the_speech_in_progress() -> None:
    d = make()
    session(d, {"type": "server_vad", "silence_duration_ms": 200})
    started = d.send(speech(600))
    assert types(started) == ["input_audio_buffer.speech_started"] and d.conn.speech_item is not None
    assert types(d.send({"type": "input_audio_buffer.clear"})) == ["input_audio_buffer.cleared"]
    assert (d.conn.audio_buffer_bytes, d.conn.speech_item) == (0, None)
    [err] = d.send({"type": "input_audio_buffer.commit"})
    assert err["error"]["code"] == "input_audio_buffer_commit_empty"
    assert d.send(speech(400, hz=0)) == []  # no speech to stop


def test_a_barge_in_speaks_during_the_answer_for_its_fixed_length_and_cancels_it() -> None:
    conn = EndpointConnection(1, EndpointOptions(rate_limits_after_done=False), Schedule.of(Faults(barge_in={1})))
    d = Driver(conn)
    d.open()  # the default session: audio both ways, server VAD that interrupts
    d.send(user("hello", "U"))
    out = d.send({"type": "response.create"})
    started = next(e for e in out if e["type"] == "input_audio_buffer.speech_started")
    stopped = next(e for e in out if e["type"] == "input_audio_buffer.speech_stopped")
    assert stopped["audio_end_ms"] - started["audio_start_ms"] == BARGE_IN_SPEECH_MS
    assert started["item_id"] == stopped["item_id"]
    first = next(e for e in out if e["type"] == "response.done")["response"]
    assert first["status_details"] == {"type": "cancelled", "reason": "turn_detected"}
    assert [m["fault"] for m in d.meta] == ["barge-in"] and conn.barging == {}


def test_the_idle_timeout_inserts_the_servers_system_note() -> None:
    d = make()
    session(d, {"type": "server_vad", "silence_duration_ms": 200, "idle_timeout_ms": 1000})
    d.send(user("hi", "U"))
    ems = d.conn.receive({"type": "response.create"})
    [idle] = [em for em in ems if isinstance(em.wake, tuple) and em.wake[0] == "idle"]
    assert idle.wake == ("idle", d.conn.idle_epoch, 1000)
    out = d.run(d.conn.wake(idle.wake), follow=False)
    note = out[1]["item"]
    assert (note["role"], note["content"]) == ("system", [{"type": "input_text", "text": IDLE_NOTE}])
    assert d.conn.wake(idle.wake) == []  # the response it started made the wake stale


def test_the_speech_part_declares_what_its_host_provides() -> None:
    assert not EndpointConnection.__abstractmethods__

    class Bare(SpeechTurns):
        pass

    with pytest.raises(TypeError, match="_start_response"):
        Bare()  # type: ignore[abstract]
