"""Audio formats: the sample rate and width a session's format says, and audio bytes <-> milliseconds.

The one reading of a session's audio format, for the reducer and the fake server (`rtrace.net.endpoint`). Pure.
"""

from __future__ import annotations

from typing import Any, Literal

#: Formats whose type fixes the rate and the bytes per sample (G.711: 8 kHz, one byte a sample), GA and beta names.
FIXED_FORMATS: dict[str, tuple[int, int]] = {
    "audio/pcmu": (8000, 1),
    "audio/pcma": (8000, 1),
    "g711_ulaw": (8000, 1),
    "g711_alaw": (8000, 1),
}
#: PCM at the format's `rate`: 16-bit samples.
PCM_SAMPLE_BYTES = 2
#: (rate, bytes per sample) until a session says otherwise: the API's default, 24 kHz 16-bit PCM.
DEFAULT_FORMAT = (24000, PCM_SAMPLE_BYTES)


def session_format(session: dict[str, Any], direction: Literal["input", "output"] = "output") -> tuple[int, int] | None:
    """(rate, bytes per sample) of a session's input or output audio (`audio.<direction>.format`, GA; else the beta
    `<direction>_audio_format`), or None when the session says nothing usable (the previous format holds)."""
    fmt: Any = None
    audio = session.get("audio")
    if isinstance(audio, dict) and isinstance(audio.get(direction), dict):
        fmt = audio[direction].get("format")
    if fmt is None:
        fmt = session.get(f"{direction}_audio_format")
    if isinstance(fmt, dict):
        rate = fmt.get("rate")
        kind = fmt.get("type")
        if isinstance(kind, str) and kind in FIXED_FORMATS:
            return FIXED_FORMATS[kind]
        if isinstance(rate, int) and rate > 0:
            return rate, PCM_SAMPLE_BYTES
    elif isinstance(fmt, str) and fmt in FIXED_FORMATS:
        return FIXED_FORMATS[fmt]
    return None


def audio_ms(n_bytes: int, rate: int, sample_bytes: int) -> float:
    """Milliseconds of audio in `n_bytes` of this format."""
    return n_bytes * 1000.0 / (rate * sample_bytes)


def bytes_for_ms(ms: float, rate: int, sample_bytes: int) -> int:
    """Bytes of this format that hold `ms` milliseconds (whole bytes, rounded down)."""
    return int(ms * rate * sample_bytes / 1000)


def audio_bytes(payload: str) -> int:
    """The bytes of audio a base64 payload carries, without decoding it."""
    return len(payload) * 3 // 4 - payload.count("=", -2)


def delta_bytes(event: dict[str, Any]) -> int:
    """The bytes of audio an audio delta event carries: its recorder's count (`rtrace_audio_bytes`, where the
    payload was redacted), else its base64 `delta`'s."""
    counted = event.get("rtrace_audio_bytes")
    if type(counted) is int:
        return counted
    delta = event.get("delta")
    return audio_bytes(delta) if type(delta) is str else 0
