"""The fake endpoint's speech part, sans I/O: the input audio buffer (append, commit, clear), server VAD's turns
(`speech_started` / `speech_stopped`; speech cancelling a response), a schedule's barge-in, the committed turn's
transcription, and the idle timeout. `SpeechTurns` is mixed into `rtrace.net.fake.endpoint.EndpointConnection`, which
owns the conversation, the ids and the responses it uses (declared below: what the host provides).
No sockets, no asyncio, no clocks: a pause is an `Emission.wake`, as in the endpoint.
"""

from __future__ import annotations

import abc
import base64
import binascii
import math
from typing import Any, Literal, Protocol

from ...core.audio import DEFAULT_FORMAT, audio_ms, decode, session_codec, session_format
from ...core.conversation import Conversation, Item
from ..faults.actions import CANCEL_REASONS
from ..faults.script import ConnectionScript, Turn
from .responses import Responses, Run
from .vad import VadSettings, VoiceDetector, settings_of, turn_detection
from .wire import Emission, committed_audio_message, transcription_events, transcription_failed

#: How long the user speaks in a barge-in (a schedule's `barge_in`): from `speech_started` to `speech_stopped`.
BARGE_IN_SPEECH_MS = 600

#: The system item the idle timeout inserts (the real server says so in its own words, at more length).
IDLE_NOTE = "No user speech was detected for a while: if the user was speaking, answer; else check in briefly."


class SpeechOptions(Protocol):
    """The endpoint options the speech part reads (`rtrace.net.fake.endpoint.EndpointOptions` has them)."""

    vad_threshold: float
    transcript: list[str]


class SpeechTurns(abc.ABC):
    """One connection's input audio and the user's spoken turns: their state, the `input_audio_buffer.*` handlers,
    and what server VAD, a barge-in and the idle timeout do."""

    options: SpeechOptions
    session: dict[str, Any]
    conv: Conversation
    responses: Responses
    script: ConnectionScript

    def __init__(self) -> None:
        self.audio_buffer_bytes = 0
        #: Server VAD over the appended audio; the id of the user item the speech in progress will become; how
        #: many audio turns were committed (which transcript the next one gets).
        self.vad = VoiceDetector()
        self.speech_item: str | None = None
        self.speech_start_ms = 0
        #: Which idle-timeout wake is current (speech and each response make the earlier ones stale).
        self.idle_epoch = 0
        self.audio_turns = 0
        #: Responses a schedule's barge-in waits in, by response id: the turn (`barge_in`: after how much output
        #: audio the user speaks).
        self.barging: dict[str, Turn] = {}

    # -- what the host provides ---------------------------------------------------------------------------

    @abc.abstractmethod
    def _event(self, event: dict[str, Any]) -> Emission:
        """`event` with the connection's next event id."""

    @abc.abstractmethod
    def _new_item_id(self) -> str:
        """The connection's next item id."""

    @abc.abstractmethod
    def _error(
        self, code: str | None, message: str, param: str | None = None, client: dict[str, Any] | None = None
    ) -> Emission:
        """The `invalid_request_error` answering `client`."""

    @abc.abstractmethod
    def _ack_item(self, wire: dict[str, Any], previous: str | None) -> list[Emission]:
        """`conversation.item.added` and `.done` of an item placed after `previous`."""

    @abc.abstractmethod
    def _item(self, wire: dict[str, Any], source: Literal["client", "audio"]) -> Item:
        """The conversation item `wire` becomes."""

    @abc.abstractmethod
    def _start_response(self, params: dict[str, Any], event: dict[str, Any] | None) -> list[Emission]:
        """A response begins (`event` None: after speech)."""

    @abc.abstractmethod
    def _rate_limits_after(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`events` with the server's `rate_limits.updated` after each `response.done`."""

    # -- input audio --------------------------------------------------------------------------------------

    def _audio_append(self, event: dict[str, Any]) -> list[Emission]:
        audio = event.get("audio")
        if not isinstance(audio, str):
            return [self._error("missing_required_parameter", "Missing required parameter: 'audio'.", "audio", event)]
        try:
            data = base64.b64decode(audio, validate=True)
        except (binascii.Error, ValueError):
            return [self._error("invalid_value", "Invalid 'audio': expected base64-encoded audio.", "audio", event)]
        self.audio_buffer_bytes += len(data)
        config = turn_detection(self.session)
        if config is None:
            return []
        rate, codec = session_codec(self.session, "input")
        settings = settings_of(config, self.options.vad_threshold)
        out: list[Emission] = []
        for edge, ms in self.vad.feed(decode(data, codec), rate, settings):
            if edge == "started":
                out.extend(self._speech_started(ms, settings))
            else:
                out.extend(self._speech_stopped(ms, settings))
        return out

    def _speech_started(self, ms: int, settings: VadSettings) -> list[Emission]:
        """Speech began: its user item's id is taken now; a response generating in the conversation is cancelled
        (`turn_detected`) when the session lets speech interrupt."""
        self.speech_item = self._new_item_id()
        self.speech_start_ms = ms
        self.idle_epoch += 1  # the user spoke: no idle timeout
        started = {"type": "input_audio_buffer.speech_started", "audio_start_ms": ms, "item_id": self.speech_item}
        out = [self._event(started)]
        active = self.responses.active
        if active is not None and settings.interrupt_response:
            cancelled = self.responses.cancel(active, CANCEL_REASONS[0])  # the server's own reason: it heard the user
            out.extend(self._event(e) for e in self._rate_limits_after(cancelled))
        return out

    def _speech_stopped(self, ms: int, settings: VadSettings) -> list[Emission]:
        """Speech ended: the buffer is committed as the user's item, and a response begins when the session says
        `create_response` and none is generating."""
        item_id = self.speech_item or self._new_item_id()
        self.speech_item = None
        out = [self._event({"type": "input_audio_buffer.speech_stopped", "audio_end_ms": ms, "item_id": item_id})]
        committed, transcript = self._commit(item_id, ms - self.speech_start_ms)
        out.extend(committed)
        if settings.create_response and self.responses.active is None:
            # the real server transcribes while the response streams: its transcription comes after
            # `response.created`
            out.extend(self._transcribed_while_answering(self._start_response({}, None), transcript))
        else:
            out.extend(self._placed(transcript))
        return out

    def _transcribed_while_answering(
        self, answer: list[Emission], transcript: list[dict[str, Any] | Emission]
    ) -> list[Emission]:
        """The automatic response's emissions with the turn's transcription among them, as the real server sends it
        while the answer streams: after `response.created`, a transcription delta after each of the answer's first
        deltas, `completed` after the next one (what the answer has not streamed yet by its first pause comes
        before that pause)."""
        if not transcript:
            return answer
        out = answer[:1]
        left = self._placed(transcript)
        for em in answer[1:]:
            if em.wake is not None and left:  # the answer pauses here: the rest of the transcription first
                out.extend(left)
                left = []
            out.append(em)
            if left and em.event is not None and str(em.event.get("type")).endswith(".delta"):
                out.append(left.pop(0))
                if out[-1].event is None and left:  # a fault's note goes with the event it notes
                    out.append(left.pop(0))
        return [*out, *left] if left else out

    def _placed(self, transcript: list[dict[str, Any] | Emission]) -> list[Emission]:
        """A transcription's events numbered as they are placed (a fault's note goes as it is)."""
        return [self._event(e) if isinstance(e, dict) else e for e in transcript]

    def _commit(self, item_id: str, speech_ms: int) -> tuple[list[Emission], list[dict[str, Any] | Emission]]:
        """The buffer becomes a user message: `committed` and the item's acks, and the events of its transcription
        when the session enables it (`speech_ms` long), for the caller to place. A schedule's `transcription`
        turn makes it fail instead (`conversation.item.input_audio_transcription.failed`, no delta, no
        transcript in the item), its note before it."""
        self.audio_buffer_bytes = 0
        self.vad.reset()
        n = self.audio_turns
        self.audio_turns += 1
        lines = self.options.transcript or list(self.script.transcripts)
        said = lines[min(n, len(lines) - 1)] if lines else ""
        wire = committed_audio_message(item_id)
        previous = self.conv.tail
        self.conv.insert(self._item(wire, "audio"), previous)
        self.responses.heard[item_id] = said
        committed = {"type": "input_audio_buffer.committed", "previous_item_id": previous, "item_id": item_id}
        out = [self._event(committed), *self._ack_item(wire, previous)]
        transcript: list[dict[str, Any] | Emission] = []
        failing = self.script.on_transcription() if _transcribes(self.session) else None
        if failing is not None:
            transcript = [failing.note("fail"), transcription_failed(item_id, failing.fail)]
        elif _transcribes(self.session):
            wire["content"][0]["transcript"] = said
            seconds = max(0, math.ceil(speech_ms / 1000))  # 0 for a turn without speech (the idle timeout's)
            transcript = [
                self.responses.delta(e) if e["type"].endswith(".delta") else e
                for e in transcription_events(item_id, said, seconds)
            ]
        return out, transcript

    def _audio_commit(self, event: dict[str, Any]) -> list[Emission]:
        rate, sample_bytes = session_format(self.session, "input") or DEFAULT_FORMAT
        ms = audio_ms(self.audio_buffer_bytes, rate, sample_bytes)
        if ms < 100:
            message = (
                "Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, "
                f"but buffer only has {ms:.2f}ms of audio."
            )
            return [self._error("input_audio_buffer_commit_empty", message, None, event)]
        item_id = self.speech_item or self._new_item_id()
        self.speech_item = None
        committed, transcript = self._commit(item_id, int(ms))
        return [*committed, *self._placed(transcript)]

    def _audio_clear(self, event: dict[str, Any]) -> list[Emission]:
        self.audio_buffer_bytes = 0
        self.vad.reset()
        self.speech_item = None
        return [self._event({"type": "input_audio_buffer.cleared"})]

    # -- barge-in ---------------------------------------------------------------------------------------------

    def _barge_in(self, run: Run, turn: Turn) -> list[Emission]:
        """A schedule's barge-in: the user starts speaking during `run`, as server VAD hears it (`speech_started`;
        the response cancelled `turn_detected` when the session lets speech interrupt), and stops
        `BARGE_IN_SPEECH_MS` later (a wake: `speech_stopped`, the turn committed as a user item, a response when
        the session creates one)."""
        config = turn_detection(self.session)
        if config is None:
            return []
        settings = settings_of(config, self.options.vad_threshold)
        start = max(self.vad.position_ms, self.vad.stopped_ms)
        out = [turn.note("barge_in"), *self._speech_started(start, settings)]
        stop = start + BARGE_IN_SPEECH_MS
        out.append(Emission(wake=("barge", self.speech_item, stop), delay=BARGE_IN_SPEECH_MS / 1000))
        return out

    # -- idle timeout -------------------------------------------------------------------------------------

    def _idle_after(self, run: Run) -> list[Emission]:
        """After a response, when the session's server VAD has `idle_timeout_ms`: a wake that long after the
        answer's audio has played (the realapi recording: 5.8 s after the `response.done` of 0.8 s of audio with a
        5,000 ms timeout). Speech or another response first makes it stale."""
        config = turn_detection(self.session)
        idle = settings_of(config, self.options.vad_threshold).idle_timeout_ms if config is not None else None
        self.idle_epoch += 1
        if idle is None or not run.response.in_conversation:
            return []
        rate, sample_bytes = session_format(self.session) or DEFAULT_FORMAT
        played = sum(audio_ms(run.items[i].audio_bytes, rate, sample_bytes) for i in run.response.output)
        return [Emission(wake=("idle", self.idle_epoch, idle), delay=(played + idle) / 1000)]

    def _idle_timeout(self, idle_ms: int) -> list[Emission]:
        """No speech for `idle_ms`: `input_audio_buffer.timeout_triggered`, the server's system item that says so,
        the buffer committed as the user's (silent) turn, and a response, as the real server does."""
        if self.responses.active is not None:
            return []
        item_id = self.speech_item or self._new_item_id()
        self.speech_item = None
        end = self.vad.position_ms + idle_ms
        triggered = {"audio_start_ms": self.vad.position_ms, "audio_end_ms": end, "item_id": item_id}
        out = [self._event({"type": "input_audio_buffer.timeout_triggered", **triggered})]
        note = {"type": "message", "role": "system", "content": [{"type": "input_text", "text": IDLE_NOTE}]}
        wire = {"id": self._new_item_id(), "type": "message", "status": "completed", **note}
        previous = self.conv.tail
        self.conv.insert(self._item(wire, "audio"), previous)
        out.extend(self._ack_item(wire, previous))
        committed, transcript = self._commit(item_id, 0)
        out.extend(committed)
        return [*out, *self._transcribed_while_answering(self._start_response({}, None), transcript)]


def _transcribes(session: dict[str, Any]) -> bool:
    """Whether the session asks for input audio transcription (GA `audio.input.transcription`, beta
    `input_audio_transcription`)."""
    audio = session.get("audio")
    if isinstance(audio, dict) and isinstance(audio.get("input"), dict) and "transcription" in audio["input"]:
        return isinstance(audio["input"]["transcription"], dict)
    return isinstance(session.get("input_audio_transcription"), dict)
