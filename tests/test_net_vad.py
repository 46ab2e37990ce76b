"""Server VAD of the fake endpoint: speech edges from the energy of 10 ms frames, positioned in audio time."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rtrace.core.audio import tone
from rtrace.net.vad import VadSettings, VoiceDetector, settings_of, turn_detection

RATE = 24000
LOUD = VadSettings(threshold_rms=0.02, prefix_padding_ms=300, silence_duration_ms=200)


def ms(n: int, hz: float = 0) -> list[int]:
    return tone(RATE * n // 1000, RATE, hz)


def test_speech_starts_padded_and_stops_after_the_silence() -> None:
    vad = VoiceDetector()
    assert vad.feed(ms(500), RATE, LOUD) == []
    assert vad.feed(ms(400, 440), RATE, LOUD) == [("started", 200)]  # 500 - 300 of padding
    assert vad.feed(ms(150), RATE, LOUD) == []  # not yet 200 ms of silence
    assert vad.feed(ms(100), RATE, LOUD) == [("stopped", 1100)]  # 900 + 200: the end of the silence
    assert vad.position_ms == 1150 and not vad.speaking


def test_edges_depend_on_the_audio_not_on_how_it_was_cut() -> None:
    audio = ms(300) + ms(250, 300) + ms(500) + ms(120, 600) + ms(400)
    whole = VoiceDetector().feed(audio, RATE, LOUD)
    assert whole == [("started", 0), ("stopped", 750), ("started", 750), ("stopped", 1370)]
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
    assert vad.feed(ms(100, 440), RATE, LOUD) == [("started", 700)]
    vad.reset()
    assert vad.feed(ms(300), RATE, LOUD) == []  # no stop for a turn the client committed itself


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
