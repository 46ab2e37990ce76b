"""Audio formats: the sample rate and width a session's format says, and audio bytes <-> milliseconds; samples in
PCM16 and G.711 (encode, decode, a tone, their energy) for the fake server's output audio and voice detection.

The one reading of a session's audio format, for the reducer and the fake server (`rtrace.net.fake.endpoint`). Pure.
"""

from __future__ import annotations

import array
import math
import sys
from collections.abc import Sequence
from typing import Any, Final, Literal

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


def _format_field(session: dict[str, Any], direction: Literal["input", "output"]) -> Any:
    """A session's `audio.<direction>.format` (GA), else its beta `<direction>_audio_format`."""
    fmt: Any = None
    audio = session.get("audio")
    if isinstance(audio, dict) and isinstance(audio.get(direction), dict):
        fmt = audio[direction].get("format")
    return session.get(f"{direction}_audio_format") if fmt is None else fmt


def session_format(session: dict[str, Any], direction: Literal["input", "output"] = "output") -> tuple[int, int] | None:
    """(rate, bytes per sample) of a session's input or output audio (`audio.<direction>.format`, GA; else the beta
    `<direction>_audio_format`), or None when the session says nothing usable (the previous format holds)."""
    fmt = _format_field(session, direction)
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


# -- samples: PCM16 and G.711, for the fake server's output audio and its voice activity detection ----------

Codec = Literal["pcm16", "pcmu", "pcma"]

#: Format types (GA and beta) of the G.711 laws; anything else with a rate is 16-bit little-endian PCM.
_LAWS: dict[str, Codec] = {"audio/pcmu": "pcmu", "g711_ulaw": "pcmu", "audio/pcma": "pcma", "g711_alaw": "pcma"}


def session_codec(session: dict[str, Any], direction: Literal["input", "output"] = "output") -> tuple[int, Codec]:
    """(rate, codec) of a session's input or output audio; the API's default (24 kHz PCM16) when it says nothing."""
    fmt = _format_field(session, direction)
    kind = fmt.get("type") if isinstance(fmt, dict) else fmt
    if isinstance(kind, str) and kind in _LAWS:
        return FIXED_FORMATS[kind][0], _LAWS[kind]
    found = session_format(session, direction)
    return (found[0] if found else DEFAULT_FORMAT[0]), "pcm16"


def _ulaw_decode(u: int) -> int:
    u = ~u & 0xFF
    magnitude = ((((u & 0x0F) << 3) + 0x84) << ((u >> 4) & 0x07)) - 0x84
    return -magnitude if u & 0x80 else magnitude


def _alaw_decode(a: int) -> int:
    a ^= 0x55
    t = (a & 0x0F) << 4
    seg = (a & 0x70) >> 4
    t = t + 8 if seg == 0 else (t + 0x108) << (seg - 1) if seg > 1 else t + 0x108
    return t if a & 0x80 else -t


def _ulaw_encode(sample: int) -> int:
    value = sample >> 2  # G.711 mu-law works on 14 bits
    if value < 0:
        mask, value = 0x7F, -value
    else:
        mask = 0xFF
    value = min(value, 8159) + 0x21
    seg = max(0, value.bit_length() - 6)
    if seg >= 8:
        return 0x7F ^ mask
    return ((seg << 4) | ((value >> (seg + 1)) & 0x0F)) ^ mask


def _alaw_encode(sample: int) -> int:
    value = sample >> 3
    if value >= 0:
        mask = 0xD5
    else:
        mask = 0x55
        value = -value - 1
    seg = max(0, value.bit_length() - 5) if value > 0x1F else 0
    if seg >= 8:
        return 0x7F ^ mask
    low = (value >> 1) & 0x0F if seg < 2 else (value >> seg) & 0x0F
    return ((seg << 4) | low) ^ mask


#: Each G.711 byte as a 16-bit sample.
ULAW_TO_PCM: Final = tuple(_ulaw_decode(u) for u in range(256))
ALAW_TO_PCM: Final = tuple(_alaw_decode(a) for a in range(256))


def encode(samples: Sequence[int], codec: Codec) -> bytes:
    """16-bit samples as bytes of `codec` (PCM16 little-endian, or one G.711 byte a sample)."""
    if codec == "pcmu":
        return bytes(_ulaw_encode(s) for s in samples)
    if codec == "pcma":
        return bytes(_alaw_encode(s) for s in samples)
    pcm = array.array("h", samples)
    if sys.byteorder == "big":
        pcm.byteswap()
    return pcm.tobytes()


def decode(data: bytes, codec: Codec) -> array.array[int]:
    """Bytes of `codec` as 16-bit samples (a trailing odd byte of PCM16 is ignored)."""
    if codec == "pcmu":
        return array.array("h", [ULAW_TO_PCM[b] for b in data])
    if codec == "pcma":
        return array.array("h", [ALAW_TO_PCM[b] for b in data])
    pcm = array.array("h")
    pcm.frombytes(data[: len(data) - len(data) % 2])
    if sys.byteorder == "big":
        pcm.byteswap()
    return pcm


def sample_bytes(codec: Codec) -> int:
    return 2 if codec == "pcm16" else 1


def tone(count: int, rate: int, hz: float, start: int = 0, amplitude: float = 0.25) -> list[int]:
    """`count` 16-bit samples of a sine at `hz` (0: silence), from sample `start` on (so pieces join up)."""
    if hz <= 0 or count <= 0:
        return [0] * max(0, count)
    peak = amplitude * 32767
    step = 2 * math.pi * hz / rate
    return [int(peak * math.sin(step * (start + i))) for i in range(count)]


def rms(samples: Sequence[int]) -> float:
    """Root mean square of 16-bit samples, as a fraction of full scale (0: silence, ~0.707: a full-scale sine)."""
    if not samples:
        return 0.0
    return math.sqrt(sum(s * s for s in samples) / len(samples)) / 32768
