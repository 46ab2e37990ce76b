"""The fake realtime endpoint, sans I/O: one `EndpointConnection` per websocket keeps the conversation the way the
API does (protocol.md sections 2 and 3) and turns client frames into server events, their pacing as data.

No sockets, no asyncio, no clocks here: `rtrace.net.server` moves the frames and the time. The conversation lives in
`rtrace.core.conversation.Conversation`, the model the analyzer uses. Faults are protocol answers too, decided without
I/O (`rtrace.net.faults`); the wire's shapes are `rtrace.net.wire`, recorded responses `rtrace.net.playback`. The
server only executes the `Emission`s.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import math
from collections.abc import Generator, Hashable, Iterator
from typing import Any, Literal

from ..core.catalog import CLIENT_EVENTS, normalize_type
from ..core.conversation import Conversation, item_from_event, update_item
from .faults import ConnectionFaults, Faults, fault_note
from .playback import RecordedResponse, ResponseSource, remap
from .wire import (
    DEFAULT_MAX_EVENT_BYTES,
    RATE_LIMITS,
    Emission,
    FrameError,
    assistant_message,
    committed_audio_message,
    copy_json,
    default_session,
    error_event,
    function_call,
    item_text,
    merge_session,
    usage,
)

_Steps = Generator[dict[str, Any] | float, None, None]
DuplicateMode = Literal["append_duplicate", "ignore", "reject"]
CallDeleteMode = Literal["allow", "cascade", "reject"]


@dataclasses.dataclass
class EndpointOptions:
    """How the fake endpoint behaves where the API leaves a choice (protocol.md sections 2.3 and 7) and its script."""

    #: An item created with an id already present (2.3): appended again (gpt-realtime-1.5), ignored
    #: (gpt-4o-realtime-preview), or rejected with an error.
    duplicate_id: DuplicateMode = "append_duplicate"
    #: Deleting a `function_call` whose output is in the conversation (7.4): allowed, cascaded to the outputs, or
    #: rejected.
    delete_call_with_output: CallDeleteMode = "allow"
    #: Send `conversation.created` after `session.created` (7.2).
    conversation_created: bool = False
    #: Send `rate_limits.updated` right after `response.created` (7.1).
    rate_limits: bool = False
    #: Out-of-band (`conversation: none`) responses also send `conversation.item.added/done` (7.2).
    out_of_band_item_events: bool = False
    #: Fill `error.event_id` with the offending client event's id (7.6; observed both ways).
    echo_error_event_id: bool = True
    #: Error code for a create whose `previous_item_id` is unknown (7.5: the real code is not known).
    previous_item_error_code: str = "invalid_previous_item_id"
    #: Client events larger than this (bytes of the frame) are answered with an error and not processed.
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    #: The default script: a text answer is streamed in this many deltas, without pauses.
    text_chunks: int = 3
    #: A user text asking for a story (or something long) is answered with `story_text` in `story_chunks` deltas,
    #: `story_chunk_delay` seconds before each.
    story_text: str = "Once upon a time there was a very slow story."
    story_chunks: int = 8
    story_chunk_delay: float = 0.06
    #: A user text mentioning the weather gets a call of this tool with these arguments.
    tool_name: str = "get_weather"
    tool_arguments: str = '{"city": "Paris"}'
    model: str = "gpt-realtime"
    #: The API's session limit (60 minutes since GA, protocol.md section 3): `session_expired`, then close 1001.
    #: None: no limit. The `expire_after` fault sets a shorter one and is recorded as a fault.
    max_session_seconds: float | None = 3600.0


def _chunks(text: str, n: int) -> list[str]:
    if not text:
        return [""]
    size = max(1, math.ceil(len(text) / max(1, n)))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4)) if text else 0


def _public(wire: dict[str, Any]) -> dict[str, Any]:
    """The wire item without the endpoint's private keys (those starting with `_`)."""
    return {k: copy_json(v) for k, v in wire.items() if not k.startswith("_")}


class SharedCounters:
    """Ids that are unique across the connections of one server (response ids)."""

    def __init__(self) -> None:
        self.responses = 0
        #: How many times each fault fired, by `kind:spec`.
        self.fired: dict[str, int] = {}

    def next_response(self) -> str:
        self.responses += 1
        return f"resp_fake{self.responses:04d}"


@dataclasses.dataclass(eq=False)
class _Run:
    """A response being generated."""

    id: str
    in_conversation: bool
    metadata: Any
    modalities: list[str]
    event_id: str | None
    gen: _Steps | None = None
    output: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: The wire item being generated, its output index, and its text so far.
    open_item: dict[str, Any] | None = None
    open_index: int = 0
    open_text: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    finished: bool = False


class EndpointConnection:
    """One websocket's server side. Feed it client events; send what it returns, in order, with the delays given.

    Contract: call `open()` once first; `receive(event)` for each decoded client event (`frame_error(err)` for a
    frame that did not decode); `wake(token)` when an `Emission.wake` is reached. After `closed` is true every call
    returns nothing.
    """

    def __init__(
        self,
        conn: int,
        options: EndpointOptions | None = None,
        faults: Faults | None = None,
        shared: SharedCounters | None = None,
        source: ResponseSource | None = None,
    ) -> None:
        self.conn = conn
        self.options = options or EndpointOptions()
        self.shared = shared or SharedCounters()
        self.faults = ConnectionFaults(faults or Faults(), self.shared.fired)
        self.source = source
        self.conv = Conversation()
        #: Full wire items by id (the conversation keeps previews only); retrieve answers from here.
        self.wire: dict[str, dict[str, Any]] = {}
        self.session = default_session(f"sess_fake{conn:04d}", self.options.model)
        self.conversation_id = f"conv_fake{conn:04d}"
        self.active: _Run | None = None
        self.runs: dict[str, _Run] = {}
        self.audio_buffer_bytes = 0
        self.closed = False
        self.response_requests = 0
        self._event_n = 0
        self._item_n = 0

    # -- ids ----------------------------------------------------------------------------------------------

    def _event(self, event: dict[str, Any]) -> Emission:
        self._event_n += 1
        return Emission({"event_id": f"event_s{self.conn}_{self._event_n:05d}", **event})

    def _new_item_id(self) -> str:
        self._item_n += 1
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

    def open(self) -> list[Emission]:
        """What the server sends when the websocket opens."""
        out = [self._event({"type": "session.created", "session": copy_json(self.session)})]
        self.faults.arm_expiry()
        if self.options.conversation_created:
            out.append(
                self._event(
                    {
                        "type": "conversation.created",
                        "conversation": {"id": self.conversation_id, "object": "realtime.conversation"},
                    }
                )
            )
        limit = self._session_limit()
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
        note = self.faults.drop_on(event)
        if note is not None:
            self.closed = True
            return [Emission(meta=note), Emission(close=(self.faults.faults.close_code, "fault: drop-on"), flush=False)]
        note = self.faults.error_on(event)
        if note is not None:
            err = self._error(
                "fault_injected", f"Injected fault: error on {note['spec']}.", client=event, etype="server_error"
            )
            return self._limit([Emission(meta=note), err])
        etype = event.get("type")
        handler = _HANDLERS.get(etype) if isinstance(etype, str) else None
        if handler is None:
            return self._limit(
                [
                    self._error(
                        "invalid_value",
                        f"Invalid value: '{str(etype)[:100]}'. Supported values are: "
                        + ", ".join(f"'{t}'" for t in sorted(_HANDLERS))
                        + ".",
                        "type",
                        event,
                    )
                ]
            )
        return self._limit(handler(self, event))

    def wake(self, token: Hashable) -> list[Emission]:
        """Carry on after a pause the endpoint asked for (`Emission.wake`)."""
        if self.closed or not isinstance(token, tuple) or not token:
            return []
        if token[0] == "expire":
            self.closed = True
            minutes = (self._session_limit() or 0) / 60
            notes = []
            expiry = self.faults.expiry()
            if expiry is not None and expiry == self._session_limit():
                notes.append(Emission(meta=fault_note("expire-after", str(expiry), None)))
            return [
                *notes,
                self._error(
                    "session_expired",
                    f"Your session hit the maximum duration of {minutes:g} minutes.",
                ),
                Emission(close=(1001, "session expired")),
            ]
        if token[0] == "run":
            run = self.runs.get(str(token[1]))
            if run is None or run.finished:
                return []
            return self._limit(self._pump(run))
        return []

    def _session_limit(self) -> float | None:
        limits = [x for x in (self.faults.expiry(), self.options.max_session_seconds) if x is not None]
        return min(limits) if limits else None

    def _limit(self, out: list[Emission]) -> list[Emission]:
        """Apply `close_after` (see `ConnectionFaults.cut`)."""
        kept, closed = self.faults.cut(out)
        if closed:
            self.closed = True
        return kept

    # -- session ------------------------------------------------------------------------------------------

    def _session_update(self, event: dict[str, Any]) -> list[Emission]:
        update = event.get("session")
        if not isinstance(update, dict):
            return [
                self._error("missing_required_parameter", "Missing required parameter: 'session'.", "session", event)
            ]
        update = {k: v for k, v in update.items() if k not in ("model", "id", "object")}
        merge_session(self.session, update)
        return [self._event({"type": "session.updated", "session": copy_json(self.session)})]

    # -- items --------------------------------------------------------------------------------------------

    def _ack_item(self, wire: dict[str, Any], previous: str | None) -> list[Emission]:
        return [
            self._event({"type": "conversation.item.added", "previous_item_id": previous, "item": copy_json(wire)}),
            self._event({"type": "conversation.item.done", "previous_item_id": previous, "item": copy_json(wire)}),
        ]

    def _item_create(self, event: dict[str, Any]) -> list[Emission]:
        obj = event.get("item")
        if not isinstance(obj, dict):
            return [self._error("missing_required_parameter", "Missing required parameter: 'item'.", "item", event)]
        itype = obj.get("type")
        if itype not in ("message", "function_call", "function_call_output"):
            return [
                self._error(
                    "invalid_value",
                    f"Invalid value: '{str(itype)[:100]}'. Supported values are: 'message', 'function_call', "
                    "'function_call_output'.",
                    "item.type",
                    event,
                )
            ]
        if itype == "message" and obj.get("role") not in ("user", "assistant", "system"):
            return [
                self._error(
                    "invalid_value",
                    f"Invalid value: '{str(obj.get('role'))[:100]}'. Supported values are: 'user', 'assistant', "
                    "'system'.",
                    "item.role",
                    event,
                )
            ]
        if itype in ("function_call", "function_call_output") and not isinstance(obj.get("call_id"), str):
            return [
                self._error(
                    "missing_required_parameter", "Missing required parameter: 'item.call_id'.", "item.call_id", event
                )
            ]
        prev = event.get("previous_item_id")
        if prev in ("", None):
            after: str | None = self.conv.tail
        elif prev == "root":
            after = None
        elif isinstance(prev, str) and prev in self.conv:
            after = prev
        else:
            return [
                self._error(
                    self.options.previous_item_error_code,
                    f"Previous item with id '{str(prev)[:100]}' does not exist.",
                    "previous_item_id",
                    event,
                )
            ]
        if itype == "function_call_output" and obj["call_id"] not in self.conv.by_call:
            return [
                self._error(
                    "invalid_tool_call_id",
                    f"Tool call ID '{obj['call_id']}' not found in conversation.",
                    "item.call_id",
                    event,
                )
            ]
        wire = {k: v for k, v in obj.items() if not k.startswith("_")}  # `_` keys are the endpoint's own
        item_id = wire.get("id")
        if not isinstance(item_id, str) or not item_id:
            item_id = self._new_item_id()
            wire["id"] = item_id
        wire.setdefault("object", "realtime.item")
        wire.setdefault("status", "completed")
        if item_id in self.conv:
            mode = self.options.duplicate_id
            if mode == "reject":
                return [self._error("duplicate_item_id", f"Item with id '{item_id}' already exists.", "item.id", event)]
            if mode == "append_duplicate":
                existing = self.conv.items[item_id]
                existing.copies += 1
            # Observed on the real API: both acks report the item's own id as its predecessor.
            return self._ack_item(wire, item_id)
        item = item_from_event(wire)
        assert item is not None
        item.source = "client"
        item.done = True
        self.conv.insert(item, after)
        self.wire[item_id] = wire
        return self._ack_item(wire, self.conv.previous_of(item_id))

    def _unknown_item(self, action: str, item_id: object, event: dict[str, Any]) -> list[Emission]:
        """The API's answer to a delete, retrieve or truncate of an item the conversation does not hold."""
        verb = {"delete": "deleting", "retrieve": "retrieving", "truncate": "truncating"}[action]
        return [
            self._error(
                f"item_{action}_invalid_item_id",
                f"Error {verb} item: the item with id '{str(item_id)[:100]}' does not exist.",
                "item_id",
                event,
            )
        ]

    def _item_delete(self, event: dict[str, Any]) -> list[Emission]:
        item_id = event.get("item_id")
        item = self.conv.get(item_id) if isinstance(item_id, str) else None
        if item is None:
            return self._unknown_item("delete", item_id, event)
        out: list[Emission] = []
        if item.type == "function_call" and item.call_id and self.conv.outputs_by_call.get(item.call_id):
            mode = self.options.delete_call_with_output
            if mode == "reject":
                return [
                    self._error(
                        "item_delete_has_output",
                        f"Error deleting item: the function call '{item.id}' has an output in the conversation.",
                        "item_id",
                        event,
                    )
                ]
            if mode == "cascade":
                for out_id in sorted(self.conv.outputs_by_call[item.call_id]):
                    self._remove(out_id)
                    out.append(self._event({"type": "conversation.item.deleted", "item_id": out_id}))
        self._remove(item.id)
        out.append(self._event({"type": "conversation.item.deleted", "item_id": item.id}))
        return out

    def _remove(self, item_id: str) -> None:
        item = self.conv.get(item_id)
        if item is not None and item.copies > 1:
            item.copies -= 1
            return
        self.conv.remove(item_id)
        self.wire.pop(item_id, None)

    def _item_retrieve(self, event: dict[str, Any]) -> list[Emission]:
        item_id = event.get("item_id")
        if not isinstance(item_id, str) or item_id not in self.conv:
            return self._unknown_item("retrieve", item_id, event)
        return [self._event({"type": "conversation.item.retrieved", "item": _public(self.wire[item_id])})]

    def _item_truncate(self, event: dict[str, Any]) -> list[Emission]:
        item_id = event.get("item_id")
        if not isinstance(item_id, str) or item_id not in self.conv:
            return self._unknown_item("truncate", item_id, event)
        wire = self.wire[item_id]
        audio_ms = wire.get("_audio_ms")
        if wire.get("role") != "assistant" or not isinstance(audio_ms, int):
            return [
                self._error(
                    "unsupported_content_type", "Only model output audio messages can be truncated", "item_id", event
                )
            ]
        end = event.get("audio_end_ms")
        if not isinstance(end, int) or end < 0:
            return [self._error("invalid_value", "Invalid value for 'audio_end_ms'.", "audio_end_ms", event)]
        if end > audio_ms:
            return [
                self._error(
                    "invalid_value",
                    f"Audio content of {audio_ms}ms is already shorter than {end}ms",
                    "audio_end_ms",
                    event,
                )
            ]
        wire["_audio_ms"] = end
        for part in wire.get("content") or []:
            if isinstance(part, dict) and "transcript" in part:
                part["transcript"] = ""
        self.conv.items[item_id].text = ""
        content_index = event.get("content_index", 0)
        return [
            self._event(
                {
                    "type": "conversation.item.truncated",
                    "item_id": item_id,
                    "content_index": content_index,
                    "audio_end_ms": end,
                }
            )
        ]

    # -- input audio --------------------------------------------------------------------------------------

    def _audio_append(self, event: dict[str, Any]) -> list[Emission]:
        audio = event.get("audio")
        if not isinstance(audio, str):
            return [self._error("missing_required_parameter", "Missing required parameter: 'audio'.", "audio", event)]
        try:
            self.audio_buffer_bytes += len(base64.b64decode(audio, validate=True))
        except (binascii.Error, ValueError):
            return [self._error("invalid_value", "Invalid 'audio': expected base64-encoded audio.", "audio", event)]
        return []

    def _audio_commit(self, event: dict[str, Any]) -> list[Emission]:
        rate = 24000
        ms = self.audio_buffer_bytes * 1000 / (rate * 2)
        if ms < 100:
            return [
                self._error(
                    "input_audio_buffer_commit_empty",
                    "Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, "
                    f"but buffer only has {ms:.2f}ms of audio.",
                    None,
                    event,
                )
            ]
        self.audio_buffer_bytes = 0
        item_id = self._new_item_id()
        wire = committed_audio_message(item_id)
        previous = self.conv.tail
        item = item_from_event(wire)
        assert item is not None
        item.source = "audio"
        item.done = True
        self.conv.insert(item, previous)
        self.wire[item_id] = wire
        committed = self._event(
            {"type": "input_audio_buffer.committed", "previous_item_id": previous, "item_id": item_id}
        )
        return [committed, *self._ack_item(wire, previous)]

    def _audio_clear(self, event: dict[str, Any]) -> list[Emission]:
        self.audio_buffer_bytes = 0
        return [self._event({"type": "input_audio_buffer.cleared"})]

    def _output_audio_clear(self, event: dict[str, Any]) -> list[Emission]:
        rid = self.active.id if self.active is not None else None
        return [self._event({"type": "output_audio_buffer.cleared", "response_id": rid})]

    def _transcription_update(self, event: dict[str, Any]) -> list[Emission]:
        update = event.get("session")
        if isinstance(update, dict):
            merge_session(self.session, {k: v for k, v in update.items() if k not in ("model", "id", "object")})
        return [self._event({"type": "transcription_session.updated", "session": copy_json(self.session)})]

    # -- responses ----------------------------------------------------------------------------------------

    def _response_obj(self, run: _Run, status: str, details: Any = None, usage: Any = None) -> dict[str, Any]:
        out_audio = (
            self.session.get("audio", {}).get("output", {}) if isinstance(self.session.get("audio"), dict) else {}
        )
        return {
            "object": "realtime.response",
            "id": run.id,
            "status": status,
            "status_details": details,
            "output": [_public(w) for w in run.output],
            "conversation_id": self.conversation_id if run.in_conversation else None,
            "output_modalities": list(run.modalities),
            "max_output_tokens": self.session.get("max_output_tokens", "inf"),
            "audio": {"output": {"format": out_audio.get("format"), "voice": out_audio.get("voice")}},
            "usage": usage,
            "metadata": run.metadata,
        }

    def _response_create(self, event: dict[str, Any]) -> list[Emission]:
        params = event.get("response")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return [self._error("invalid_type", "Invalid type for 'response': expected an object.", "response", event)]
        in_conversation = params.get("conversation", "auto") != "none"
        if in_conversation and self.active is not None:
            return [
                self._error(
                    "conversation_already_has_active_response",
                    f"Conversation already has an active response in progress: {self.active.id}. Wait until the "
                    "response is finished before creating a new one.",
                    None,
                    event,
                )
            ]
        self.response_requests += 1
        modalities = (
            params.get("output_modalities") or params.get("modalities") or self.session.get("output_modalities")
        )
        if not isinstance(modalities, list):
            modalities = ["audio"]
        metadata = params.get("metadata")
        event_id = event.get("event_id")
        run = _Run(
            id=self.shared.next_response(),
            in_conversation=in_conversation,
            metadata=metadata if isinstance(metadata, dict) else None,
            modalities=[str(m) for m in modalities],
            event_id=event_id if isinstance(event_id, str) else None,
        )
        self.runs[run.id] = run
        out = [self._event({"type": "response.created", "response": self._response_obj(run, "in_progress")})]
        if self.options.rate_limits:
            out.append(self._event({"type": "rate_limits.updated", "rate_limits": RATE_LIMITS}))
        note = self.faults.fail_response(self.response_requests, event)
        if note is not None:
            out.insert(0, Emission(meta=note))
            run.finished = True
            details = {
                "type": "failed",
                "reason": None,
                "error": {"type": "server_error", "code": "server_error"},
            }
            out.append(self._event({"type": "response.done", "response": self._response_obj(run, "failed", details)}))
            return out
        if in_conversation:
            self.active = run
        recorded = self.source.take() if self.source is not None else None
        if recorded is not None:
            run.gen = self._recorded(run, recorded)
        else:
            context = self._context(params)
            run.input_tokens = sum(_tokens(str(w.get("output") or item_text(w))) for w in context) + 10
            run.gen = self._scripted(run, context, params)
        out.extend(self._pump(run))
        return out

    def _context(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """The items a response sees: its `input` when given, else the conversation (copies counted)."""
        given = params.get("input")
        if isinstance(given, list):
            items: list[dict[str, Any]] = []
            for obj in given:
                if isinstance(obj, dict) and obj.get("type") == "item_reference":
                    ref = self.wire.get(str(obj.get("id")))
                    if ref is not None:
                        items.append(ref)
                elif isinstance(obj, dict):
                    items.append(obj)
            return items
        out: list[dict[str, Any]] = []
        for item in self.conv:
            wire = self.wire.get(item.id)
            if wire is not None:
                out.extend([wire] * item.copies)
        return out

    def _pump(self, run: _Run) -> list[Emission]:
        """Run the response's generator up to its next pause (a wake) or its end."""
        out: list[Emission] = []
        assert run.gen is not None
        for step in run.gen:
            if isinstance(step, float | int):
                if step > 0:
                    out.append(Emission(wake=("run", run.id), delay=float(step)))
                    return out
                continue
            out.append(self._event(step))
        run.finished = True
        return out

    def _finish(self, run: _Run, status: str, details: Any = None) -> dict[str, Any]:
        run.finished = True
        if self.active is run:
            self.active = None
        used = usage(run.input_tokens, run.output_tokens)
        return {"type": "response.done", "response": self._response_obj(run, status, details, used)}

    def _start_item(self, run: _Run, wire: dict[str, Any]) -> list[dict[str, Any]]:
        """`response.output_item.added` (+ `conversation.item.added`): the item enters the conversation as it
        starts, at the end."""
        run.open_item = wire
        run.open_index = len(run.output)
        run.open_text = ""
        run.output.append(wire)
        events: list[dict[str, Any]] = [
            {
                "type": "response.output_item.added",
                "response_id": run.id,
                "output_index": run.open_index,
                "item": copy_json(wire),
            }
        ]
        if run.in_conversation:
            previous = self.conv.tail
            item = item_from_event(wire)
            assert item is not None
            item.source = "response"
            item.response_id = run.id
            self.conv.insert(item, previous)
            self.wire[wire["id"]] = wire
            wire["_previous"] = previous
        if run.in_conversation or self.options.out_of_band_item_events:
            events.append(
                {"type": "conversation.item.added", "previous_item_id": wire.get("_previous"), "item": _public(wire)}
            )
        events[0]["item"] = _public(wire)
        return events

    def _end_item(self, run: _Run, status: str) -> list[dict[str, Any]]:
        wire = run.open_item
        assert wire is not None
        wire["status"] = status
        run.open_item = None
        run.output[run.open_index] = wire
        if run.in_conversation and wire["id"] in self.conv:
            update_item(self.conv.items[wire["id"]], wire)
            self.conv.items[wire["id"]].done = True
        events: list[dict[str, Any]] = [
            {
                "type": "response.output_item.done",
                "response_id": run.id,
                "output_index": run.open_index,
                "item": _public(wire),
            }
        ]
        if run.in_conversation or self.options.out_of_band_item_events:
            previous = self.conv.previous_of(wire["id"]) if wire["id"] in self.conv else wire.get("_previous")
            events.append({"type": "conversation.item.done", "previous_item_id": previous, "item": _public(wire)})
        return events

    def _text_parts(self, run: _Run) -> tuple[str, str, str, str, str]:
        """(part type, item part type, delta event, done event, text key) for the response's modality."""
        if "audio" in run.modalities:
            return (
                "audio",
                "output_audio",
                "response.output_audio_transcript.delta",
                "response.output_audio_transcript.done",
                "transcript",
            )
        return "text", "output_text", "response.output_text.delta", "response.output_text.done", "text"

    def _message(self, run: _Run, text: str, chunks: int, delay: float) -> _Steps:
        part_type, _, delta_type, _, key = self._text_parts(run)
        wire = assistant_message(self._new_item_id())
        yield from self._start_item(run, wire)
        ids = {"response_id": run.id, "item_id": wire["id"], "output_index": run.open_index, "content_index": 0}
        yield {"type": "response.content_part.added", **ids, "part": {"type": part_type, key: ""}}
        for chunk in _chunks(text, chunks):
            if delay > 0:
                yield delay
            run.open_text += chunk
            run.output_tokens += _tokens(chunk)
            yield {"type": delta_type, **ids, "delta": chunk}
        yield from self._close_message(run)

    def _close_message(self, run: _Run, status: str = "completed") -> Iterator[dict[str, Any]]:
        part_type, item_part, _, done_type, key = self._text_parts(run)
        wire = run.open_item
        assert wire is not None
        ids = {"response_id": run.id, "item_id": wire["id"], "output_index": run.open_index, "content_index": 0}
        text = run.open_text
        if part_type == "audio":
            yield {"type": "response.output_audio.done", **ids}
            # 60 ms of audio per character: what a truncate is checked against.
            wire["_audio_ms"] = len(text) * 60
        yield {"type": done_type, **ids, key: text}
        yield {"type": "response.content_part.done", **ids, "part": {"type": part_type, key: text}}
        wire["content"] = [{"type": item_part, key: text}]
        yield from self._end_item(run, status)

    def _function_call(self, run: _Run, name: str, arguments: str, index: int) -> _Steps:
        item_id = self._new_item_id()
        call_id = f"call_s{self.conn}_{item_id.rsplit('_', 1)[-1]}_{index}"
        wire = function_call(item_id, call_id, name)
        yield from self._start_item(run, wire)
        ids = {"response_id": run.id, "item_id": item_id, "output_index": run.open_index, "call_id": call_id}
        yield {"type": "response.function_call_arguments.delta", **ids, "delta": arguments}
        yield {"type": "response.function_call_arguments.done", **ids, "name": name, "arguments": arguments}
        wire["arguments"] = arguments
        run.output_tokens += _tokens(arguments)
        yield from self._end_item(run, "completed")

    def _scripted(self, run: _Run, context: list[dict[str, Any]], params: dict[str, Any]) -> _Steps:
        """The default script, decided on the items the response sees (see `choose_reply`)."""
        o = self.options
        kind, text = choose_reply(context, tools_allowed=params.get("tool_choice") != "none")
        if kind == "call":
            yield from self._function_call(run, o.tool_name, o.tool_arguments, 0)
        elif kind == "story":
            yield from self._message(run, o.story_text, o.story_chunks, o.story_chunk_delay)
        else:
            yield from self._message(run, text, o.text_chunks, 0.0)
        yield self._finish(run, "completed")

    def _recorded(self, run: _Run, recorded: RecordedResponse) -> _Steps:
        """A recorded response, ids remapped: its items get this connection's ids, its predecessors are the
        real ones here, and its metadata is this request's."""
        ids: dict[str, str] = {}
        first = True
        for delay, original in recorded.events:
            if not first and delay > 0:
                yield delay
            first = False
            event = remap(original, ids)
            etype = normalize_type(str(event.get("type")))
            if etype == "response.created":
                ids.setdefault(str(original.get("response", {}).get("id")), run.id)
                continue  # already sent when the request arrived
            if etype == "response.output_item.added":
                item = original.get("item")
                if isinstance(item, dict):
                    old = str(item.get("id"))
                    new = self._new_item_id()
                    ids[old] = new
                    old_call = item.get("call_id")
                    if isinstance(old_call, str):
                        ids[old_call] = f"call_s{self.conn}_{new.rsplit('_', 1)[-1]}_0"
                    yield from self._start_item(run, remap(item, ids))
                continue
            if etype in ("conversation.item.added", "conversation.item.done"):
                continue  # sent with the output item events, with this connection's predecessors
            if etype == "response.output_item.done":
                item = event.get("item")
                if isinstance(item, dict) and run.open_item is not None:
                    status = str(item.get("status") or "completed")
                    keep = {k: v for k, v in run.open_item.items() if k.startswith("_")}
                    run.open_item.clear()
                    run.open_item.update(item)
                    run.open_item.update(keep)
                    run.output_tokens += _tokens(item_text(item) + str(item.get("arguments") or ""))
                    yield from self._end_item(run, status)
                continue
            if etype == "response.done":
                resp = event.get("response") if isinstance(event.get("response"), dict) else {}
                done = self._finish(run, str(resp.get("status") or "completed"), resp.get("status_details"))
                if isinstance(resp.get("usage"), dict):
                    done["response"]["usage"] = resp["usage"]
                yield done
                return
            if etype in ("response.output_text.delta", "response.output_audio_transcript.delta"):
                run.open_text += str(event.get("delta") or "")
            event.pop("event_id", None)
            if "response_id" in event:
                event["response_id"] = run.id
            yield event
        yield self._finish(run, "completed")

    def _response_cancel(self, event: dict[str, Any]) -> list[Emission]:
        wanted = event.get("response_id")
        run: _Run | None
        if isinstance(wanted, str) and wanted:
            run = self.runs.get(wanted)
            if run is not None and run.finished:
                run = None
        else:
            run = self.active
        if run is None:
            return [
                self._error("response_cancel_not_active", "Cancellation failed: no active response found", None, event)
            ]
        if run.gen is not None:
            run.gen.close()
        events: list[dict[str, Any]] = []
        wire = run.open_item
        if wire is not None:
            if wire.get("type") == "message":
                events.extend(self._close_message(run, "incomplete"))
            else:
                events.extend(self._end_item(run, "incomplete"))
        events.append(self._finish(run, "cancelled", {"type": "cancelled", "reason": "client_cancelled"}))
        return [self._event(e) for e in events]


def choose_reply(context: list[dict[str, Any]], tools_allowed: bool = True) -> tuple[str, str]:
    """The default script's decision: (`call` | `story` | `text`, text).

    Right after a `function_call_output` -> `Tool result: <output>`. Else, on the last user text: mentioning the
    weather (and not already answered by a call) -> a call; asking for a story (or something long) -> the story;
    otherwise `You said: <text>`.
    """
    if context and context[-1].get("type") == "function_call_output":
        return "text", f"Tool result: {context[-1].get('output') or ''}"
    called = False
    for wire in reversed(context):
        if wire.get("type") == "function_call":
            called = True
        if wire.get("type") == "message" and wire.get("role") == "user":
            text = item_text(wire)
            lowered = text.lower()
            if "weather" in lowered and tools_allowed and not called:
                return "call", text
            if "story" in lowered or "long" in lowered:
                return "story", text
            return "text", f"You said: {text}"
    return "text", "Hello! How can I help?"


_HANDLERS: dict[str, Any] = {
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
