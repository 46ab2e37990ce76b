"""Server VAD of the fake endpoint: speech edges from the energy of 32 ms frames, positioned in audio time, with the
real server's timing."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rtrace.core.audio import tone
from rtrace.net.fake.vad import VadSettings, VoiceDetector, settings_of, turn_detection

RATE = 24000
LOUD = VadSettings(threshold_rms=0.02, prefix_padding_ms=300, silence_duration_ms=200)


def ms(n: int, hz: float = 0) -> list[int]:
    return tone(RATE * n // 1000, RATE, hz)


def test_speech_starts_padded_and_stops_after_the_silence() -> None:
    vad = VoiceDetector()
    assert vad.feed(ms(500), RATE, LOUD) == []
    # the frame 480-512 ms holds the first speech: reported at its end, less 300 ms of padding
    assert vad.feed(ms(400, 440), RATE, LOUD) == [("started", 212)]
    assert vad.feed(ms(250), RATE, LOUD) == []  # 200 ms of silence and the detector's release not yet past
    # the voice ends at 900 (in the frame 896-928); ten frames of silence (>= 200 + 96 ms) end at 1248
    assert vad.feed(ms(150), RATE, LOUD) == [("stopped", 1248)]
    assert vad.position_ms == 1280 and not vad.speaking


def test_a_quiet_pause_inside_an_utterance_does_not_end_it() -> None:
    """The recorded utterance of the realapi sessions (one turn, 1460-4256 ms, on the real server) has a pause of
    about 240 ms at -38 dBFS: under the threshold that starts speech, over the half that keeps it up. A detector
    without hysteresis cut it in two turns."""
    murmur = [int(0.014 * 32767 * (1 if i % 2 else -1)) for i in range(RATE * 240 // 1000)]  # RMS 0.014
    audio = ms(1760) + ms(350, 300) + murmur + ms(1400, 300) + ms(600)
    edges = VoiceDetector().feed(audio, RATE, LOUD)
    assert [kind for kind, _ in edges] == ["started", "stopped"]
    assert edges[0][1] == 1760 + 32 - 300  # the end of the first speech frame, less the padding


def test_edges_depend_on_the_audio_not_on_how_it_was_cut() -> None:
    audio = ms(300) + ms(250, 300) + ms(500) + ms(120, 600) + ms(400)
    whole = VoiceDetector().feed(audio, RATE, LOUD)
    assert whole == [("started", 20), ("stopped", 896), ("started", 896), ("stopped", 1504)]
    pieces = VoiceDetector()
    got = []
    for i in range(0, len(audio), 333):  # not a whole number of frames
        got += pieces.feed(audio[i : i + 333], RATE, LOUD)
    assert got == whole


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 40), st.booleans()), min_size=1, max_size=12), st.integers(1, 997))
def test_any_cut_gives_the_same_edges_and_they_alternate(runs: list[tuple[int, bool]], cut: int) -> None:
    audio = [s for n, loud in runs for s in ms(10 * n, 440 if loud else 0)]
    whole = VoiceDetector().feed(audio, RATE, LOUD)
    vad = VoiceDetector()
    got = [e for i in range(0, len(audio), cut) for e in vad.feed(audio[i : i + cut], RATE, LOUD)]
    assert got == whole
    assert [kind for kind, _ in whole] == ["started", "stopped"] * (len(whole) // 2) + ["started"] * (len(whole) % 2)
    assert [t for _, t in whole] == sorted(t for _, t in whole)


def test_quiet_audio_is_not_speech_and_reset_forgets_speech_in_progress() -> None:
    vad = VoiceDetector()
    quiet = [int(0.01 * 32767 * (1 if i % 2 else -1)) for i in range(RATE)]  # RMS 0.01
    assert vad.feed(quiet, RATE, LOUD) == []
    assert vad.feed(ms(100, 440), RATE, LOUD) == [("started", 724)]  # speech in the frame 992-1024
    vad.reset()
    # no stop for a turn the client committed itself, and the rest of its voice (12 ms in the frame 1088-1120)
    # starts no second turn
    assert vad.feed(ms(400), RATE, LOUD) == []
    assert vad.feed(ms(100, 440), RATE, LOUD) == [("started", 1204)]  # a new utterance after the quiet: 1504 - 300


def test_turn_detection_ga_and_beta_and_settings() -> None:
    assert turn_detection({}) is None
    ga = {"audio": {"input": {"turn_detection": {"type": "server_vad", "silence_duration_ms": 500}}}}
    assert turn_detection(ga) == {"type": "server_vad", "silence_duration_ms": 500}
    off = {"audio": {"input": {"turn_detection": None}}, "turn_detection": {"type": "server_vad"}}
    assert turn_detection(off) is None  # GA's null wins over a beta field
    assert turn_detection({"turn_detection": {"type": "semantic_vad"}}) == {"type": "semantic_vad"}
    assert turn_detection({"turn_detection": {"type": "push_to_talk"}}) is None
    s = settings_of({"type": "server_vad", "silence_duration_ms": 500, "create_response": False}, 0.1)
    assert (s.threshold_rms, s.prefix_padding_ms, s.silence_duration_ms, s.create_response, s.interrupt_response) == (
        0.1, 300, 500, False, True,
    )  # fmt: skip
    assert settings_of({"type": "semantic_vad", "eagerness": "high"}, 0.02).silence_duration_ms == 250
    assert settings_of({"type": "server_vad", "prefix_padding_ms": -5}, 0.02).prefix_padding_ms == 300
