"""The fake endpoint's server VAD: where speech starts and stops in the input audio a connection appends, by energy,
with the timing of the real server's detector.

The audio is cut in 32 ms frames (the real server's: every edge it reports in the realapi recordings is a multiple of
32 ms). A frame whose RMS (`rtrace.core.audio.rms`, a fraction of full scale) reaches the threshold starts speech;
once speaking, a frame keeps it up while its RMS reaches half the threshold (hysteresis, as a speech detector's
probability has: the quiet syllables inside an utterance do not end it). Speech starts at the end of its first
frame, reported `prefix_padding_ms` earlier (never before 0 nor before the previous stop); it stops once the
frames below half the threshold last `silence_duration_ms` plus `RELEASE_MS` (the real detector's probability
falls that long after the voice does), reported at the end of that silence. On the recorded utterance of the
realapi sessions this gives the real server's one turn, 1460-4256 ms. Positions are milliseconds of audio since
the connection's first append (the API's `audio_start_ms` / `audio_end_ms`), so the result depends only on the
audio, never on when it arrives. Pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Literal

from ...core.audio import rms

#: The length of the frames speech is judged on.
FRAME_MS = 32
#: How long after the voice stops the real detector still says speech (on the realapi recordings: 3 frames).
RELEASE_MS = 96
#: Speech goes on while a frame's RMS reaches this fraction of the threshold that started it.
HYSTERESIS = 0.5
#: Silence that ends speech for `semantic_vad`, by its `eagerness` (the fake has no semantics: only a pause).
SEMANTIC_SILENCE_MS = {"low": 1000, "medium": 500, "auto": 500, "high": 250}


@dataclasses.dataclass(frozen=True)
class VadSettings:
    """What a session's `turn_detection` says, and the threshold of the fake (`EndpointOptions.vad_threshold`)."""

    threshold_rms: float
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 200
    create_response: bool = True
    interrupt_response: bool = True
    #: `idle_timeout_ms`: after a response, this long without speech is a turn of its own (None: never).
    idle_timeout_ms: int | None = None


def turn_detection(session: dict[str, Any]) -> dict[str, Any] | None:
    """The session's turn detection (GA `audio.input.turn_detection`, else the beta `turn_detection`) when it is
    `server_vad` or `semantic_vad`, else None (the client commits)."""
    audio = session.get("audio")
    found: Any = session.get("turn_detection")
    if isinstance(audio, dict) and isinstance(audio.get("input"), dict) and "turn_detection" in audio["input"]:
        found = audio["input"]["turn_detection"]
    if isinstance(found, dict) and found.get("type") in ("server_vad", "semantic_vad"):
        return found
    return None


def settings_of(config: dict[str, Any], threshold_rms: float) -> VadSettings:
    """`VadSettings` from a `turn_detection` object; fields it lacks take the API's defaults."""

    def whole(key: str, default: int) -> int:
        value = config.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default

    silence = whole("silence_duration_ms", 200)
    if config.get("type") == "semantic_vad":
        silence = SEMANTIC_SILENCE_MS.get(str(config.get("eagerness", "auto")), 500)
    return VadSettings(
        threshold_rms,
        whole("prefix_padding_ms", 300),
        silence,
        config.get("create_response", True) is not False,
        config.get("interrupt_response", True) is not False,
        whole("idle_timeout_ms", 0) or None,
    )


Edge = tuple[Literal["started", "stopped"], int]


class VoiceDetector:
    """One connection's speech detection: `feed` it the samples of each append, get the edges they hold."""

    def __init__(self) -> None:
        #: Samples fed so far (all appends of the connection), and the rate they came at.
        self.samples = 0
        self.rate = 0
        self.speaking = False
        self.silence_ms = 0
        #: Where the last speech stopped (the next one's padding does not reach back past it).
        self.stopped_ms = 0
        #: Reset during speech: the voice still going on after it starts nothing.
        self.held = False
        self._pending: list[int] = []

    @property
    def position_ms(self) -> int:
        """Milliseconds of audio fed so far."""
        return self.samples * 1000 // self.rate if self.rate else 0

    def reset(self) -> None:
        """The buffer was committed or cleared by the client: speech in progress is forgotten, and the voice that
        goes on is not a new start (never a second `speech_started` for one utterance): the next speech starts
        after a quiet frame."""
        self.held = self.held or self.speaking
        self.speaking = False
        self.silence_ms = 0

    def feed(self, samples: Sequence[int], rate: int, settings: VadSettings) -> list[Edge]:
        """The speech edges in these samples (appended after the previous ones), each with its position in ms."""
        if rate != self.rate:
            self.samples = self.samples * rate // self.rate if self.rate else 0
            self.rate = rate
            self._pending = []
        frame = max(1, rate * FRAME_MS // 1000)
        buf = self._pending + list(samples)
        edges: list[Edge] = []
        i = 0
        while i + frame <= len(buf):
            level = rms(buf[i : i + frame])
            self.samples += frame
            i += frame
            if self.held:
                self.held = level >= settings.threshold_rms * HYSTERESIS
            elif not self.speaking:
                if level >= settings.threshold_rms:
                    self.speaking = True
                    self.silence_ms = 0
                    edges.append(("started", max(self.stopped_ms, self.position_ms - settings.prefix_padding_ms)))
            elif level >= settings.threshold_rms * HYSTERESIS:
                self.silence_ms = 0
            else:
                self.silence_ms += FRAME_MS
                if self.silence_ms >= settings.silence_duration_ms + RELEASE_MS:
                    self.speaking = False
                    self.silence_ms = 0
                    self.stopped_ms = self.position_ms
                    edges.append(("stopped", self.stopped_ms))
        self._pending = buf[i:]
        return edges
