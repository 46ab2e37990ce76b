"""Audio formats: one reading of a session's format (GA and beta), bytes <-> milliseconds, base64 sizes; PCM16 and
G.711 samples (checked against the stdlib's codec on every sample where it still exists), tones and their energy."""

from __future__ import annotations

import base64
import math
import warnings

import pytest

from rtrace.core.audio import (
    DEFAULT_FORMAT,
    audio_bytes,
    audio_ms,
    bytes_for_ms,
    decode,
    encode,
    rms,
    sample_bytes,
    session_codec,
    session_format,
    tone,
)


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


def test_session_codec_names_the_law_and_the_rate() -> None:
    assert session_codec({}) == (24000, "pcm16")
    assert session_codec({"audio": {"output": {"format": {"type": "audio/pcm", "rate": 16000}}}}) == (16000, "pcm16")
    assert session_codec({"audio": {"output": {"format": {"type": "audio/pcmu"}}}}) == (8000, "pcmu")
    assert session_codec({"audio": {"input": {"format": {"type": "audio/pcma"}}}}, "input") == (8000, "pcma")
    assert session_codec({"output_audio_format": "g711_alaw"}) == (8000, "pcma")
    assert session_codec({"input_audio_format": "pcm16"}, "input") == (24000, "pcm16")


ALL_SAMPLES = list(range(-32768, 32768))


@pytest.mark.parametrize("codec", ["pcmu", "pcma"])
def test_g711_agrees_with_the_reference_codec_on_every_sample(codec: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        audioop = pytest.importorskip("audioop")  # the stdlib's G.711 (until Python 3.13)
    pcm = encode(ALL_SAMPLES, "pcm16")
    to_law, from_law = (audioop.lin2ulaw, audioop.ulaw2lin) if codec == "pcmu" else (audioop.lin2alaw, audioop.alaw2lin)
    assert encode(ALL_SAMPLES, codec) == to_law(pcm, 2)  # type: ignore[arg-type]
    every_byte = bytes(range(256))
    assert decode(every_byte, codec).tobytes() == from_law(every_byte, 2)  # type: ignore[arg-type]


@pytest.mark.parametrize("codec", ["pcmu", "pcma"])
def test_g711_round_trip_stays_within_its_quantization(codec: str) -> None:
    back = decode(encode(ALL_SAMPLES, codec), codec)  # type: ignore[arg-type]
    for sample, got in zip(ALL_SAMPLES[::7], back[::7], strict=True):
        assert abs(got - sample) <= max(16, abs(sample) // 16)  # 4 bits of mantissa a segment
    # decoding then encoding a byte gives it back (mu-law's two zeros, 0x7f and 0xff, both decode to 0)
    every_byte = bytes(range(256))
    again = encode(decode(every_byte, codec), codec)  # type: ignore[arg-type]
    assert sum(a != b for a, b in zip(again, every_byte, strict=True)) <= 1


def test_pcm16_is_little_endian_and_an_odd_byte_is_ignored() -> None:
    assert encode([1, -2], "pcm16") == b"\x01\x00\xfe\xff"
    assert list(decode(b"\x01\x00\xfe\xff\x07", "pcm16")) == [1, -2]
    assert sample_bytes("pcm16") == 2 and sample_bytes("pcmu") == 1


def test_tone_joins_up_across_pieces_and_rms_measures_its_energy() -> None:
    whole = tone(480, 24000, 440)
    assert tone(200, 24000, 440) + tone(280, 24000, 440, start=200) == whole
    assert rms(tone(24000, 24000, 440)) == pytest.approx(0.25 / math.sqrt(2), rel=0.01)
    assert tone(10, 24000, 0) == [0] * 10 and rms([]) == 0.0 and rms([0] * 5) == 0.0
    assert rms([32767, -32768]) == pytest.approx(1.0, rel=1e-4)
