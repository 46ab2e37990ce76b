"""The fake realtime endpoint, sans I/O: one `EndpointConnection` per websocket keeps the conversation the way the
API does (docs/protocol.md sections 2 and 3) and turns client frames into server events, their pacing as data.

No sockets, no asyncio, no clocks here: `rtrace.net.link.server` moves the frames and the time. The conversation is the
analyzer's own model (`rtrace.core.conversation.Conversation`, each item's payload in `Item.wire`); responses are
`rtrace.net.fake.responses`, recorded ones `rtrace.net.fake.playback`, the schedule's turns (a script's and the fault
flags', protocol answers too) `rtrace.net.faults.script.ConnectionScript`, the user's speech (input audio, server VAD,
barge-in, idle timeout) `rtrace.net.fake.speech`, the wire's shapes `rtrace.net.fake.wire`. The server only executes the
`Emission`s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable
from typing import Any, Literal

from ...core.audio import DEFAULT_FORMAT, audio_ms, bytes_for_ms, session_codec, session_format
from ...core.catalog import CLIENT_EVENTS
from ...core.conversation import Conversation, Item, item_from_event
from ..faults.actions import KEYS
from ..faults.script import ConnectionScript, ResponseContext, Schedule, Turn
from .options import renamed
from .playback import ResponseSource, play
from .responses import Responses, Run, Steps, last_user_text
from .schema import check_client_event
from .speech import SpeechTurns
from .vad import settings_of, turn_detection
from .wire import (
    DEFAULT_MAX_EVENT_BYTES,
    RATE_LIMITS,
    TRANSCRIPTION_DEFAULTS,
    Emission,
    FrameError,
    copy_json,
    default_session,
    error_event,
    ga_rate_limits,
    hex_id,
    merge_session,
    opaque_id,
    rate_limited,
)

DuplicateMode = Literal["append_duplicate", "ignore", "reject"]
CallDeleteMode = Literal["allow", "cascade", "reject"]


@dataclasses.dataclass
class EndpointOptions:
    """How the fake endpoint behaves where the API leaves a choice (docs/protocol.md sections 2.3 and 7), and its
    script. A field's old name (`rtrace.net.fake.options.RENAMED`) is refused naming the new one."""

    def __new__(cls, *args: Any, **kwargs: Any) -> EndpointOptions:
        said = renamed(kwargs)
        if said is not None:
            raise TypeError(f"EndpointOptions: {said}")
        return super().__new__(cls)

    #: An item created with an id already present (2.3): appended again (gpt-realtime-1.5; the conversation counts
    #: a copy, see `rtrace.core.conversation`), ignored (gpt-4o-realtime-preview), or rejected with an error.
    duplicate_id: DuplicateMode = "append_duplicate"
    #: Deleting a `function_call` whose output is in the conversation (7.4): allowed, cascaded to the outputs, or
    #: rejected.
    delete_call_with_output: CallDeleteMode = "allow"
    #: Send `conversation.created` after `session.created` (7.2).
    conversation_created: bool = False
    #: Send `rate_limits.updated` right after `response.created` (7.1: the beta server's place).
    rate_limits: bool = False
    #: Send `rate_limits.updated` after each `response.done`, tokens only, as the GA server does (the realapi
    #: recordings: every response).
    rate_limits_after_done: bool = True
    #: Out-of-band (`conversation: none`) responses also send `conversation.item.added/done` (7.2).
    out_of_band_item_events: bool = False
    #: Fill `error.event_id` with the offending client event's id (7.6; observed both ways).
    echo_error_event_id: bool = True
    #: Error code for a create whose `previous_item_id` is unknown (7.5: the real code is not known).
    previous_item_error_code: str = "invalid_previous_item_id"
    #: Check each client event against the API's schema (`rtrace.net.fake.schema`, from the openai SDK's types) and
    #: answer one the real server would reject with its error (`unknown_parameter`, `invalid_value`, ...); the
    #: event is not processed.
    validate: bool = True
    #: Send such an error ahead of the answers to earlier events still waiting out their latency (the realapi
    #: recording `history-seed-rejected-item`: the rejected second create's error before the first one's acks).
    schema_errors_ahead: bool = True
    #: Client events larger than this (bytes of the frame) are answered with an error and not processed.
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    #: The default script: a text answer is streamed in this many deltas, without pauses; 0: in token-sized deltas
    #: as the real server (' fog', 'gy', '.'), a call's arguments too.
    text_chunks: int = 0
    #: Text, transcript and argument deltas carry `obfuscation` padding, as the real server's do.
    obfuscation: bool = True
    #: The default script's call comes after a preamble message in the same response, the message still open while
    #: the call's arguments stream (`rtrace serve --preamble on|off`). None (`auto`): as the model does, the realapi
    #: recordings show: gpt-realtime-2.1 models say a `commentary` message first, gpt-realtime answers with the call
    #: alone.
    preamble: bool | None = None
    #: Seconds from `response.created` to a response's first output item (the real server's time to its first
    #: token: 0.30 and 0.35 s in the realapi recording `idle-timeout-nudge`); a cancel or speech in that time
    #: cancels the response with no output (`output: []`, as the real server's barge-ins in
    #: `webrtc-barge-ins-and-tool-call`). 0: the output starts with `response.created`.
    first_output_delay: float = 0.0
    #: A user text asking for a story (or something long) is answered with `story_text` in `story_chunks` deltas,
    #: `story_chunk_delay` seconds before each.
    story_text: str = "Once upon a time there was a very slow story."
    story_chunks: int = 8
    story_chunk_delay: float = 0.06
    #: Force a call of this tool on each user turn not yet answered by a call (`rtrace serve --tool NAME`), whatever
    #: the text says, unless the tool choice is `none`. None: the tool is chosen as `rtrace.net.fake.tools` says.
    tool: str | None = None
    #: The forced tool's arguments (a JSON object's text, `--tool NAME=JSON`); None: made from its schema.
    tool_arguments: str | None = None
    #: Seed of the values made for tool arguments (`rtrace serve --seed`): same seed, same arguments.
    seed: int = 0
    #: An answer with audio in its output modalities streams `response.output_audio.delta`s in the session's
    #: output format (PCM16 at its rate, or G.711 mu-law / A-law): this many milliseconds per character of its
    #: transcript (60: about 150 words a minute), in deltas of `audio_delta_ms`, after each transcript delta.
    audio_ms_per_char: int = 60
    audio_delta_ms: int = 200
    #: The audio is silence (0), or a sine tone of this many Hz.
    audio_tone: float = 0.0
    #: Seconds of pause per second of audio, before each audio delta but the first (0: all at once; 1: in real
    #: time, so a user can speak during an answer and interrupt it).
    audio_pace: float = 0.0
    #: Server VAD (`turn_detection` of type `server_vad` or `semantic_vad`; see `rtrace.net.fake.vad`): a 10 ms frame of
    #: appended audio is speech when its RMS reaches this fraction of full scale (0.02: about -34 dBFS).
    vad_threshold: float = 0.02
    #: What the user said in each committed audio turn of a connection, in order (the last repeats; none: "").
    #: Sent as its transcription when the session enables `audio.input.transcription`, and what the answer reads.
    #: (The schedule's transcripts serve when this is empty.)
    transcript: list[str] = dataclasses.field(default_factory=list)
    model: str = "gpt-realtime"
    #: Ids shaped as the real server's (`item_` and 21 opaque letters and digits, `call_` and 16); by default they
    #: say the connection and the count (`item_s1_0003`, `resp_fake0002`), which a reader of serve's trace follows.
    real_ids: bool = False
    #: The socket is the sideband of a WebRTC call (the realapi recording `webrtc-sideband-audio-turn`): the call
    #: plays the answers' audio, so no `response.output_audio.delta` on the socket but `output_audio_buffer.started`
    #: once it plays (`stopped` after the `response.done`, `cleared` when a cancel cuts it); the call
    #: already made the session, so no `session.created` is sent on it; the first event is the answer to the
    #: client's first.
    sideband: bool = False
    #: The API's session limit (60 minutes since GA, docs/protocol.md section 3): `session_expired`, then close 1001.
    #: None: no limit. The `expire_after` fault sets a shorter one and is recorded as a fault.
    max_session_seconds: float | None = 3600.0


class SharedCounters:
    """What the connections of one server share: response ids (unique across them) and how often each fault fired."""

    def __init__(self) -> None:
        self.responses = 0
        #: How many times each turn of the schedule acted, by `Turn.counter`
        #: (`rtrace.net.faults.script.ConnectionScript`).
        self.fired: dict[str, int] = {}

    def next_response(self, real_ids: bool = False) -> str:
        self.responses += 1
        return opaque_id("resp", self.responses) if real_ids else f"resp_fake{self.responses:04d}"


#: The item types a client may create.
_CREATABLE = "'message', 'function_call', 'function_call_output'"
_ROLES = "'user', 'assistant', 'system'"


class EndpointConnection(SpeechTurns):
    """One websocket's server side. Feed it client events; send what it returns, in order, with the delays given.

    Contract: call `open()` once first; `receive(event)` for each decoded client event (`frame_error(err)` for a
    frame that did not decode); `wake(token)` when an `Emission.wake` is reached. After `closed` is true every call
    returns nothing.
    """

    options: EndpointOptions

    def __init__(
        self,
        conn: int,
        options: EndpointOptions | None = None,
        schedule: Schedule | None = None,
        shared: SharedCounters | None = None,
        source: ResponseSource | None = None,
    ) -> None:
        super().__init__()  # the speech part's state (`SpeechTurns`)
        self.conn = conn
        self.options = options or EndpointOptions()
        self.shared = shared or SharedCounters()
        #: The schedule's turns (`rtrace serve --script` and the fault flags): they answer responses and events
        #: before the default script does.
        self.script = ConnectionScript(schedule, conn, self.shared.fired)
        self.source = source
        #: The conversation, each item's full payload in `Item.wire` (retrieve answers from it).
        self.conv = Conversation()
        #: Changed in place by `session.update` (never replaced: `responses` reads it).
        real = self.options.real_ids
        sess = "sess_u0" if self.options.sideband else "sess"  # a WebRTC call's session (the sideband recording)
        self.session = default_session(opaque_id(sess, conn) if real else f"sess_fake{conn:04d}", self.options.model)
        self.conversation_id = opaque_id("conv", conn) if real else f"conv_fake{conn:04d}"
        self.responses = Responses(conn, self.conv, self.session, self.conversation_id, self.options, self._new_item_id)
        self.closed = False
        self.response_requests = 0
        self.tokens_used = 0
        self._event_n = 0
        self._item_n = 0

    # -- ids ----------------------------------------------------------------------------------------------

    def _event(self, event: dict[str, Any]) -> Emission:
        self._event_n += 1
        n = self._event_n
        if not self.options.real_ids:
            event_id = f"event_s{self.conn}_{n:05d}"
        elif str(event.get("type")).startswith("output_audio_buffer."):
            event_id = hex_id("event", self.conn, n)  # the WebRTC audio buffer's events: 16 hex digits, as recorded
        else:
            event_id = opaque_id("event", self.conn, n)
        return Emission({"event_id": event_id, **event})

    def _new_item_id(self) -> str:
        self._item_n += 1
        if self.options.real_ids:
            return opaque_id("item", self.conn, self._item_n)
        return f"item_s{self.conn}_{self._item_n:04d}"

    def _error(
        self,
        code: str | None,
        message: str,
        param: str | None = None,
        client: dict[str, Any] | None = None,
        etype: str = "invalid_request_error",
    ) -> Emission:
        event_id = client.get("event_id") if client is not None and self.options.echo_error_event_id else None
        return self._event(error_event(code, message, param, event_id if isinstance(event_id, str) else None, etype))

    # -- public entry points ------------------------------------------------------------------------------

    def open(self, now: float = 0.0) -> list[Emission]:
        """What the server sends when the websocket opens; `now` (seconds since the epoch, the server's clock)
        dates the session's `expires_at`."""
        self.script.opened()
        limit = self._session_limit()
        self.session["expires_at"] = int(now + (limit if limit is not None else 3600))
        out: list[Emission] = []
        if not self.options.sideband:
            out.append(self._event({"type": "session.created", "session": copy_json(self.session)}))
        if self.options.conversation_created:
            conversation = {"id": self.conversation_id, "object": "realtime.conversation"}
            out.append(self._event({"type": "conversation.created", "conversation": conversation}))
        if limit is not None:
            out.append(Emission(wake=("expire",), delay=limit))
        return self._limit(out)

    def frame_error(self, err: FrameError) -> list[Emission]:
        """Answer a frame that did not decode into an event; the connection keeps serving."""
        if self.closed:
            return []
        return self._limit([self._error(err.code, err.message)])

    def receive(self, event: dict[str, Any]) -> list[Emission]:
        """Answer one client event (already decoded)."""
        if self.closed:
            return []
        turn = self.script.on_event(event)
        if turn is not None and turn.close is not None:
            self.closed = True
            return turn.closing(event, flush=False)
        if turn is not None and turn.error is not None:
            noted = turn.note("error", event)
            return self._limit([noted, self._error(turn.error, turn.error_message(), None, event, "server_error")])
        etype = event.get("type")
        handler = _HANDLERS.get(etype) if isinstance(etype, str) else None
        if handler is None:
            supported = ", ".join(f"'{t}'" for t in sorted(_HANDLERS))
            message = f"Invalid value: '{str(etype)[:100]}'. Supported values are: {supported}."
            return self._limit([self._error("invalid_value", message, "type", event)])
        invalid = check_client_event(event) if self.options.validate else None
        if invalid is not None:
            rejected = self._error(invalid.code, invalid.message, invalid.param, event)
            return self._limit([dataclasses.replace(rejected, ahead=self.options.schema_errors_ahead)])
        out = handler(self, event)
        if turn is not None and turn.delay is not None and out:
            # the answer goes out that much later than it would, and whatever follows waits behind it
            held = [turn.note("delay", event), *out]
            out = [dataclasses.replace(em, hold=turn.delay) if em.event or em.meta else em for em in held]
        return self._limit(out)

    def wake(self, token: Hashable) -> list[Emission]:
        """Carry on after a pause the endpoint asked for (`Emission.wake`)."""
        if self.closed or not isinstance(token, tuple) or not token:
            return []
        if token[0] == "expire":
            return self._expire()
        if token[0] == "run":
            run = self.responses.runs.get(str(token[1]))
            if run is None or run.finished:
                return []
            return self._limit(self._pump(run))
        if token[0] == "barge" and token[1] == self.speech_item:  # the user of a barge-in stops speaking
            config = turn_detection(self.session)
            settings = settings_of(config, self.options.vad_threshold) if config is not None else None
            return self._limit(self._speech_stopped(int(token[2]), settings)) if settings is not None else []
        if token[0] == "idle" and token[1] == self.idle_epoch:
            return self._limit(self._idle_timeout(int(token[2])))
        return []

    # -- session ------------------------------------------------------------------------------------------

    def _session_limit(self) -> float | None:
        expiry = self.script.expiry.expire if self.script.expiry is not None else None
        limits = [x for x in (expiry, self.options.max_session_seconds) if x is not None]
        return min(limits) if limits else None

    def _expire(self) -> list[Emission]:
        """The session limit is reached: `session_expired` (no param, no event id), then close 1001 with the
        error's message as its reason, as the real server closes (`received 1001 (going away) Your session hit the
        maximum duration of 60 minutes.`, pollen-robotics/reachy_mini_conversation_app#134)."""
        self.closed = True
        limit = self._session_limit()
        notes = []
        expiry = self.script.expiry
        if expiry is not None and expiry.expire == limit:
            notes.append(expiry.note("expire"))
        minutes = (limit or 0) / 60
        message = f"Your session hit the maximum duration of {minutes:g} minutes."
        return [*notes, self._error("session_expired", message), Emission(close=(1001, message))]

    def _limit(self, out: list[Emission]) -> list[Emission]:
        """The schedule's `sent` turns (`ConnectionScript.sent`: `--drop-after`, `--close-after`, a script's)."""
        kept, closed = self.script.sent(out)
        if closed:
            self.closed = True
        return kept

    def _session_update(self, event: dict[str, Any]) -> list[Emission]:
        update = event.get("session")
        if not isinstance(update, dict):
            return [
                self._error("missing_required_parameter", "Missing required parameter: 'session'.", "session", event)
            ]
        if "output_modalities" in update:  # the GA field given: a beta `modalities` set before it no longer holds
            self.session.pop("modalities", None)
        merge_session(self.session, {k: v for k, v in update.items() if k not in ("model", "id", "object")})
        audio = self.session.get("audio")
        audio_in = audio.get("input") if isinstance(audio, dict) else None
        given = audio_in.get("transcription") if isinstance(audio_in, dict) else None
        if isinstance(given, dict):
            for key, value in TRANSCRIPTION_DEFAULTS.items():
                given.setdefault(key, value)
        return [self._event({"type": "session.updated", "session": copy_json(self.session)})]

    def _transcription_update(self, event: dict[str, Any]) -> list[Emission]:
        update = event.get("session")
        if isinstance(update, dict):
            merge_session(self.session, {k: v for k, v in update.items() if k not in ("model", "id", "object")})
        return [self._event({"type": "transcription_session.updated", "session": copy_json(self.session)})]

    # -- items --------------------------------------------------------------------------------------------

    def _ack_item(self, wire: dict[str, Any], previous: str | None) -> list[Emission]:
        return [
            self._event({"type": "conversation.item.added", "previous_item_id": previous, "item": copy_json(wire)}),
            self._event({"type": "conversation.item.done", "previous_item_id": previous, "item": copy_json(wire)}),
        ]

    def _invalid_item(self, obj: dict[str, Any], event: dict[str, Any]) -> Emission | None:
        """The error for an item a client may not create (its type, role or call_id), else None."""
        itype = obj.get("type")
        if itype not in ("message", "function_call", "function_call_output"):
            message = f"Invalid value: '{str(itype)[:100]}'. Supported values are: {_CREATABLE}."
            return self._error("invalid_value", message, "item.type", event)
        if itype == "message" and obj.get("role") not in ("user", "assistant", "system"):
            message = f"Invalid value: '{str(obj.get('role'))[:100]}'. Supported values are: {_ROLES}."
            return self._error("invalid_value", message, "item.role", event)
        if itype in ("function_call", "function_call_output") and not isinstance(obj.get("call_id"), str):
            message = "Missing required parameter: 'item.call_id'."
            return self._error("missing_required_parameter", message, "item.call_id", event)
        return None

    def _item_create(self, event: dict[str, Any]) -> list[Emission]:
        obj = event.get("item")
        if not isinstance(obj, dict):
            return [self._error("missing_required_parameter", "Missing required parameter: 'item'.", "item", event)]
        invalid = self._invalid_item(obj, event)
        if invalid is not None:
            return [invalid]
        prev = event.get("previous_item_id")
        if prev not in ("", None, "root") and not (isinstance(prev, str) and prev in self.conv):
            message = f"Previous item with id '{str(prev)[:100]}' does not exist."
            return [self._error(self.options.previous_item_error_code, message, "previous_item_id", event)]
        after: str | None = self.conv.tail if prev in ("", None) else None if prev == "root" else prev
        if obj.get("type") == "function_call_output" and obj["call_id"] not in self.conv.by_call:
            # as the real server says it (livekit/agents#3344): no param, no event id
            message = f"Tool call ID '{obj['call_id']}' not found in conversation."
            return [self._error("invalid_tool_call_id", message, None, None)]
        wire = dict(obj)
        if not isinstance(wire.get("id"), str) or not wire["id"]:
            wire["id"] = self._new_item_id()
        wire.setdefault("status", "completed")
        item = self._item(wire, "client")
        if item.id in self.conv:
            mode = self.options.duplicate_id
            if mode == "reject":
                message = f"Item with id '{item.id}' already exists."
                return [self._error("duplicate_item_id", message, "item.id", event)]
            if mode == "append_duplicate":
                self.conv.insert(item, after)  # counts a copy of the item already there
            # Observed on the real API: both acks report the item's own id as its predecessor.
            return self._ack_item(wire, item.id)
        self.conv.insert(item, after)
        return self._ack_item(wire, self.conv.previous_of(item.id))

    @staticmethod
    def _item(wire: dict[str, Any], source: Literal["client", "audio"]) -> Item:
        """The conversation item a client create or committed audio adds, its payload with it."""
        item = item_from_event(wire)
        assert item is not None, "the item has an id"
        item.wire = wire
        item.source = source
        item.done = True
        return item

    def _unknown_item(self, action: str, item_id: object, event: dict[str, Any]) -> list[Emission]:
        """The API's answer to a delete, retrieve or truncate of an item the conversation does not hold."""
        verb = {"delete": "deleting", "retrieve": "retrieving", "truncate": "truncating"}[action]
        message = f"Error {verb} item: the item with id '{str(item_id)[:100]}' does not exist."
        return [self._error(f"item_{action}_invalid_item_id", message, "item_id", event)]

    def _item_delete(self, event: dict[str, Any]) -> list[Emission]:
        """Delete the item (every copy of it: one rule with the analyzer, see `Conversation.remove`)."""
        item_id = event.get("item_id")
        item = self.conv.get(item_id) if isinstance(item_id, str) else None
        if item is None:
            return self._unknown_item("delete", item_id, event)
        out: list[Emission] = []
        if item.type == "function_call" and item.call_id and self.conv.outputs_by_call.get(item.call_id):
            mode = self.options.delete_call_with_output
            if mode == "reject":
                message = f"Error deleting item: the function call '{item.id}' has an output in the conversation."
                return [self._error("item_delete_has_output", message, "item_id", event)]
            if mode == "cascade":
                for out_id in sorted(self.conv.outputs_by_call[item.call_id]):
                    self.conv.remove(out_id)
                    out.append(self._event({"type": "conversation.item.deleted", "item_id": out_id}))
        self.conv.remove(item.id)
        self.responses.heard.pop(item.id, None)
        out.append(self._event({"type": "conversation.item.deleted", "item_id": item.id}))
        return out

    def _item_retrieve(self, event: dict[str, Any]) -> list[Emission]:
        item_id = event.get("item_id")
        item = self.conv.get(item_id) if isinstance(item_id, str) else None
        if item is None:
            return self._unknown_item("retrieve", item_id, event)
        return [self._event({"type": "conversation.item.retrieved", "item": copy_json(item.wire)})]

    def _item_truncate(self, event: dict[str, Any]) -> list[Emission]:
        item_id = event.get("item_id")
        item = self.conv.get(item_id) if isinstance(item_id, str) else None
        if item is None or item.wire is None:
            return self._unknown_item("truncate", item_id, event)
        if not _is_output_audio(item):
            message = "Only model output audio messages can be truncated"
            return [self._error("unsupported_content_type", message, "item_id", event)]
        end = event.get("audio_end_ms")
        if not isinstance(end, int) or end < 0:
            return [self._error("invalid_value", "Invalid value for 'audio_end_ms'.", "audio_end_ms", event)]
        rate, sample_bytes = session_format(self.session) or DEFAULT_FORMAT
        length = audio_ms(item.audio_bytes, rate, sample_bytes)
        if end > length:
            message = f"Audio content of {length:.0f}ms is already shorter than {end}ms"
            return [self._error("invalid_value", message, "audio_end_ms", event)]
        item.audio_bytes = bytes_for_ms(end, rate, sample_bytes)
        for part in item.wire.get("content") or []:
            if isinstance(part, dict) and "transcript" in part:
                part["transcript"] = ""
        item.text = ""
        truncated = {"item_id": item.id, "content_index": event.get("content_index", 0), "audio_end_ms": end}
        return [self._event({"type": "conversation.item.truncated", **truncated})]

    def _output_audio_clear(self, event: dict[str, Any]) -> list[Emission]:
        active = self.responses.active
        rid = active.response.id if active is not None else None
        return [self._event({"type": "output_audio_buffer.cleared", "response_id": rid})]

    # -- responses ----------------------------------------------------------------------------------------

    def _response_create(self, event: dict[str, Any]) -> list[Emission]:
        params = event.get("response")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return [self._error("invalid_type", "Invalid type for 'response': expected an object.", "response", event)]
        in_conversation = params.get("conversation", "auto") != "none"
        active = self.responses.active
        if in_conversation and active is not None:
            message = (
                f"Conversation already has an active response in progress: {active.response.id}. Wait until the "
                "response is finished before creating a new one."
            )
            return [self._error("conversation_already_has_active_response", message, None, event)]
        return self._start_response(params, event)

    def _start_response(self, params: dict[str, Any], event: dict[str, Any] | None) -> list[Emission]:
        """A response begins: asked by `event` (a `response.create`), or None: after speech (server VAD). Either
        counts as the connection's next response for `fail_response`."""
        self.idle_epoch += 1
        in_conversation = params.get("conversation", "auto") != "none"
        self.response_requests += 1
        modalities = params.get("output_modalities") or params.get("modalities") or _session_modalities(self.session)
        if not isinstance(modalities, list):
            modalities = ["audio"]
        audio = params.get("audio")
        fmt_given = isinstance(audio, dict) and isinstance(audio.get("output"), dict) and "format" in audio["output"]
        audio_format = session_codec({"audio": audio} if fmt_given else self.session)
        run = self.responses.new_run(
            self.shared.next_response(self.options.real_ids),
            in_conversation,
            params.get("metadata"),
            [str(m) for m in modalities],
            audio_format,
        )
        out = [self._event({"type": "response.created", "response": self.responses.response_object(run)})]
        if self.options.rate_limits:
            out.append(self._event({"type": "rate_limits.updated", "rate_limits": RATE_LIMITS}))
        turn = self.script.on_response(lambda: self._response_context(params))
        for key, value in turn.acts if turn is not None else ():  # in the declaration's order (`ON_RESPONSE`)
            assert turn is not None
            out.extend(ON_RESPONSE[key](self, run, turn, value, event))
            if KEYS[key].ends:
                return [*out, *self._closing_after(run)]
        recorded = self.source.take() if self.source is not None else None
        first = self.options.first_output_delay
        if turn is not None and (turn.text is not None or turn.calls):
            gen = self.responses.answer(run, params, turn.text, turn.calls)
        elif recorded is not None:
            gen, first = play(self.responses, run, recorded), 0.0  # a recorded response keeps its own pacing
        else:
            gen = self.responses.scripted(run, params)
        self.responses.begin(run, _after(first, gen) if first > 0 else gen)
        out.extend(self._pump(run))
        return out

    # -- what each response action does (`ON_RESPONSE`) -------------------------------------------------------

    def _close_after(self, run: Run, turn: Turn, value: Any, event: dict[str, Any] | None) -> list[Emission]:
        self.script.after_response[run.response.id] = turn  # its note and close once the response is done
        return []

    def _fail(self, run: Run, turn: Turn, code: str, event: dict[str, Any] | None) -> list[Emission]:
        return [turn.note("fail", event), self._event(self.responses.failed(run, self._failure(code)))]

    def _rate_limit(self, run: Run, turn: Turn, limit: str, event: dict[str, Any] | None) -> list[Emission]:
        limits, details = rate_limited(limit, str(self.session.get("model") or self.options.model))
        updated = self._event({"type": "rate_limits.updated", "rate_limits": limits})
        return [turn.note("rate_limit", event), updated, self._event(self.responses.failed(run, details))]

    def _cancel(self, run: Run, turn: Turn, reason: str, event: dict[str, Any] | None) -> list[Emission]:
        # the server's own cancel, before any output: the one shape of a cancelled response (`Responses.cancel`)
        cancelled = [self._event(e) for e in self._rate_limits_after(self.responses.cancel(run, reason))]
        return [turn.note("cancel", event), *cancelled]

    def _audio_pace(self, run: Run, turn: Turn, pace: float, event: dict[str, Any] | None) -> list[Emission]:
        run.audio_pace = pace
        return [turn.note("audio_pace", event)]

    def _audio_burst(self, run: Run, turn: Turn, hold: float, event: dict[str, Any] | None) -> list[Emission]:
        run.audio_pace, run.audio_hold = 0.0, hold
        return [turn.note("audio_burst", event)]

    def _stall_audio(self, run: Run, turn: Turn, stall: float, event: dict[str, Any] | None) -> list[Emission]:
        run.audio_stall = stall  # the stream stops after its first chunk (`Responses.audio`)
        return [turn.note("stall_audio", event)]

    def _barge(self, run: Run, turn: Turn, after: float, event: dict[str, Any] | None) -> list[Emission]:
        self.barging[run.response.id] = turn  # acts once that much of its audio was sent (`_pump`)
        return []

    def _response_context(self, params: dict[str, Any]) -> ResponseContext:
        """What a response turn's `when` looks at."""
        context = self.responses.context(params)
        user_text, answered = last_user_text(context)
        tool_output: str | None = None
        if context and context[-1].get("type") == "function_call_output":
            call_id = context[-1].get("call_id")
            calls = [w for w in context if w.get("type") == "function_call" and w.get("call_id") == call_id]
            tool_output = str(calls[-1].get("name") or "") if calls else ""
        vad = turn_detection(self.session) is not None
        return ResponseContext(self.conn, self.response_requests, user_text, answered, tool_output, vad)

    def _closing_after(self, run: Run) -> list[Emission]:
        """A script turn that closes after this response: its note and close, once the response is done."""
        turn = self.script.after_response.pop(run.response.id, None) if run.finished else None
        if turn is None:
            return []
        self.closed = True
        return turn.closing(None, flush=True)

    def _pump(self, run: Run) -> list[Emission]:
        """The response's events up to its next pause (then a wake) or its end; a barge-in where it acts."""
        barge = self.barging.get(run.response.id)
        until = None
        if barge is not None and barge.barge_in is not None:
            rate, heard = run.audio_format[0], barge.barge_in
            until = lambda r: r.audio_samples * 1000 >= heard * 1000 * rate  # noqa: E731 (ms of output audio sent)
        events, pause = self.responses.pump(run, until)
        out = [self._event(e) for e in self._rate_limits_after(events)]
        if run.finished and run.audio_started and run.response.status == "completed":
            # the call has played the answer (the sideband recording: after `response.done` and the rate limits)
            out.append(self._event({"type": "output_audio_buffer.stopped", "response_id": run.response.id}))
        if barge is not None and until is not None and until(run) and not run.finished:
            del self.barging[run.response.id]
            out.extend(self._barge_in(run, barge))
            if not run.finished:  # the session does not let speech interrupt: the response goes on
                out.extend(self._pump(run))
            return [*out, *self._closing_after(run)]
        if run.finished:
            self.barging.pop(run.response.id, None)  # it ended before the user spoke
        if pause is not None:
            out.append(Emission(wake=("run", run.response.id), delay=pause))
        elif run.finished:
            out.extend(self._idle_after(run))
        return [*out, *self._closing_after(run)]

    def _failure(self, code: str) -> dict[str, Any]:
        """The `status_details` of a response failed with `code` (`rate_limit_exceeded`: a rate limit's)."""
        if code == "rate_limit_exceeded":
            return rate_limited("tokens", str(self.session.get("model") or self.options.model))[1]
        return {"type": "failed", "reason": None, "error": {"type": "server_error", "code": code}}

    def _rate_limits_after(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`events` with the GA server's `rate_limits.updated` after each `response.done` (its tokens left of the
        limit, less what the connection's responses used), when `rate_limits_after_done`."""
        if not self.options.rate_limits_after_done:
            return events
        out: list[dict[str, Any]] = []
        for e in events:
            out.append(e)
            if e.get("type") == "response.done":
                used = (e.get("response") or {}).get("usage")
                self.tokens_used += int(used.get("total_tokens") or 0) if isinstance(used, dict) else 0
                out.append({"type": "rate_limits.updated", "rate_limits": ga_rate_limits(self.tokens_used)})
        return out

    def _response_cancel(self, event: dict[str, Any]) -> list[Emission]:
        wanted = event.get("response_id")
        run: Run | None
        if isinstance(wanted, str) and wanted:
            run = self.responses.runs.get(wanted)
            if run is not None and run.finished:
                run = None
        else:
            run = self.responses.active
        if run is None:
            message = "Cancellation failed: no active response found"
            return [self._error("response_cancel_not_active", message, None, event)]
        return [self._event(e) for e in self._rate_limits_after(self.responses.cancel(run))]


def _after(seconds: float, gen: Steps) -> Steps:
    """`gen`, a pause of `seconds` first."""
    yield seconds
    yield from gen


#: What each response action of a script turn does (by its script key, `rtrace.net.faults.actions.KEYS`), tried in the
#: turn's order: one that ends the response (`Key.ends`: failed, cancelled, rate-limited) answers it at once, with
#: no output; the others shape it (its audio, a barge-in in it, a close after it). A response action without its
#: entry here fails `tests/test_net_fake_endpoint.py::test_every_response_action_has_its_behaviour`.
ON_RESPONSE: dict[str, Callable[[EndpointConnection, Run, Turn, Any, dict[str, Any] | None], list[Emission]]] = {
    "close": EndpointConnection._close_after,
    "fail": EndpointConnection._fail,
    "cancel": EndpointConnection._cancel,
    "rate_limit": EndpointConnection._rate_limit,
    "barge_in": EndpointConnection._barge,
    "audio_pace": EndpointConnection._audio_pace,
    "audio_burst": EndpointConnection._audio_burst,
    "stall_audio": EndpointConnection._stall_audio,
}


def _session_modalities(session: dict[str, Any]) -> Any:
    """What a response of the session answers in: the beta `modalities` a beta client (Voice Live, Azure's preview
    API) set on the session (`["text"]`: text only; with `audio`: audio and its transcript), else the GA
    `output_modalities`."""
    beta = session.get("modalities")
    return beta if isinstance(beta, list) and beta else session.get("output_modalities")


def _is_output_audio(item: Item) -> bool:
    """Whether a truncate may cut `item`: a model output audio message (a response's assistant message with an
    audio part), the only kind the API truncates."""
    if item.source != "response" or item.role != "assistant" or item.wire is None:
        return False
    content = item.wire.get("content")
    return isinstance(content, list) and any(
        isinstance(part, dict) and part.get("type") in ("output_audio", "audio") for part in content
    )


_HANDLERS: dict[str, Callable[[EndpointConnection, dict[str, Any]], list[Emission]]] = {
    "session.update": EndpointConnection._session_update,
    "transcription_session.update": EndpointConnection._transcription_update,
    "conversation.item.create": EndpointConnection._item_create,
    "conversation.item.delete": EndpointConnection._item_delete,
    "conversation.item.retrieve": EndpointConnection._item_retrieve,
    "conversation.item.truncate": EndpointConnection._item_truncate,
    "input_audio_buffer.append": EndpointConnection._audio_append,
    "input_audio_buffer.commit": EndpointConnection._audio_commit,
    "input_audio_buffer.clear": EndpointConnection._audio_clear,
    "output_audio_buffer.clear": EndpointConnection._output_audio_clear,
    "response.create": EndpointConnection._response_create,
    "response.cancel": EndpointConnection._response_cancel,
}
assert set(_HANDLERS) == set(CLIENT_EVENTS)
