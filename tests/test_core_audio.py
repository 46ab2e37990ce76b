"""Audio formats: one reading of a session's format (GA and beta), bytes <-> milliseconds, base64 sizes."""

from __future__ import annotations

import base64

from rtrace.core.audio import DEFAULT_FORMAT, audio_bytes, audio_ms, bytes_for_ms, session_format


def test_session_format_ga_and_beta() -> None:
    assert session_format({"audio": {"output": {"format": {"type": "audio/pcm", "rate": 24000}}}}) == (24000, 2)
    assert session_format({"audio": {"output": {"format": {"type": "audio/pcmu"}}}}) == (8000, 1)
    assert session_format({"audio": {"output": {"format": {"type": "audio/pcm", "rate": 16000}}}}) == (16000, 2)
    assert session_format({"output_audio_format": "g711_alaw"}) == (8000, 1)
    assert session_format({"audio": {"input": {"format": {"type": "audio/pcma"}}}}, "input") == (8000, 1)
    assert session_format({"input_audio_format": "g711_ulaw"}, "input") == (8000, 1)


def test_session_format_that_says_nothing_usable_is_none() -> None:
    for session in ({}, {"output_audio_format": "pcm16"}, {"audio": {"output": {"format": {"type": "audio/pcm"}}}}):
        assert session_format(session) is None
    assert session_format({"audio": {"input": {"format": {"type": "audio/pcmu"}}}}) is None  # that is the input
    assert DEFAULT_FORMAT == (24000, 2)


def test_bytes_and_milliseconds() -> None:
    assert audio_ms(48000, 24000, 2) == 1000.0
    assert audio_ms(48000, 8000, 1) == 6000.0
    assert bytes_for_ms(100, 24000, 2) == 4800
    assert bytes_for_ms(100, 8000, 1) == 800
    assert audio_ms(bytes_for_ms(3060, 24000, 2), 24000, 2) == 3060.0


def test_audio_bytes_of_a_base64_payload() -> None:
    for n in (0, 1, 2, 3, 4, 100, 4801):
        assert audio_bytes(base64.b64encode(bytes(n)).decode()) == n
