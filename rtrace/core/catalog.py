"""The event catalogue: every realtime event type, which side sends it, and the beta -> GA renames.

Facts from the OpenAI realtime types (GA and beta) as summarised in docs/protocol.md section 1. This module is
data only: no parsing, no state.
"""

from __future__ import annotations

from typing import Final, Literal

Side = Literal["client", "server", "meta", "local"]

#: Client events (GA names; `transcription_session.update` is beta-only but still seen).
CLIENT_EVENTS: Final = frozenset(
    {
        "session.update",
        "transcription_session.update",
        "conversation.item.create",
        "conversation.item.delete",
        "conversation.item.truncate",
        "conversation.item.retrieve",
        "input_audio_buffer.append",
        "input_audio_buffer.commit",
        "input_audio_buffer.clear",
        "output_audio_buffer.clear",
        "response.create",
        "response.cancel",
    }
)

#: Server events under their GA names (beta names are normalised before lookup).
SERVER_EVENTS: Final = frozenset(
    {
        "error",
        "session.created",
        "session.updated",
        "transcription_session.updated",
        "conversation.created",
        "conversation.item.added",
        "conversation.item.done",
        "conversation.item.deleted",
        "conversation.item.truncated",
        "conversation.item.retrieved",
        "conversation.item.input_audio_transcription.delta",
        "conversation.item.input_audio_transcription.completed",
        "conversation.item.input_audio_transcription.failed",
        "conversation.item.input_audio_transcription.segment",
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "input_audio_buffer.cleared",
        "input_audio_buffer.timeout_triggered",
        "input_audio_buffer.dtmf_event_received",
        "output_audio_buffer.started",
        "output_audio_buffer.stopped",
        "output_audio_buffer.cleared",
        "response.created",
        "response.done",
        "response.output_item.added",
        "response.output_item.done",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.delta",
        "response.output_text.done",
        "response.output_audio.delta",
        "response.output_audio.done",
        "response.output_audio_transcript.delta",
        "response.output_audio_transcript.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.in_progress",
        "response.mcp_call.completed",
        "response.mcp_call.failed",
        "mcp_list_tools.in_progress",
        "mcp_list_tools.completed",
        "mcp_list_tools.failed",
        "rate_limits.updated",
    }
)

#: Server events that acknowledge one client event each (`session.update`, an item's create, delete, truncate or
#: retrieve, an audio commit or clear, `response.create`): where an answer's latency matters, so a hunt delays
#: these (`rtrace.net.hunt.search`). The server's own moments are not here (`session.created`, speech, a response's
#: output and end: nothing the client asked for waits on them), nor `error` (a refusal, a fault of its own).
ACK_TYPES: Final = frozenset(
    {
        "session.updated",
        "conversation.item.added",
        "conversation.item.done",
        "conversation.item.deleted",
        "conversation.item.truncated",
        "conversation.item.retrieved",
        "input_audio_buffer.committed",
        "input_audio_buffer.cleared",
        "response.created",
    }
)

#: Server events a replay waits for before sending the client event that followed one in the recording
#: (`rtrace.net.replay.session`): the acknowledgements, and what a client reacts to that the server sends of its
#: own accord: `session.created` (the session is ready), server VAD's speech edges, a response's output items and
#: its end, and `error`. Streaming deltas are not (another endpoint may chunk differently).
ANCHOR_TYPES: Final = ACK_TYPES | frozenset(
    {
        "session.created",
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "response.output_item.added",
        "response.output_item.done",
        "response.done",
        "error",
    }
)

#: Item types of the conversation, and the roles of a message: what `TYPE:ITEM_TYPE` (`--drop-on`, a script's
#: `event`) may name after the colon.
ITEM_TYPES: Final = frozenset(
    {
        "message",
        "function_call",
        "function_call_output",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
    }
)
ROLES: Final = frozenset({"user", "assistant", "system"})

#: Notes written by a recorder, not events of the protocol.
META_EVENTS: Final = frozenset({"connection.opened", "connection.closed", "fault.injected", "note"})

#: Client-side annotations: what the client itself believed (see docs/trace-format.md, "local annotations").
#: `local.conversation` carries `items` (the client's own conversation, in order);
#: `local.generation.opened` / `local.generation.closed` carry `response_id` when known.
LOCAL_EVENTS: Final = frozenset({"local.conversation", "local.generation.opened", "local.generation.closed"})

#: Beta wire names and their GA equivalents (docs/protocol.md 1.4). `conversation.item.created` maps to
#: `conversation.item.added`; the reducer treats the missing `done` as implied.
BETA_TO_GA: Final = {
    "conversation.item.created": "conversation.item.added",
    "response.text.delta": "response.output_text.delta",
    "response.text.done": "response.output_text.done",
    "response.audio.delta": "response.output_audio.delta",
    "response.audio.done": "response.output_audio.done",
    "response.audio_transcript.delta": "response.output_audio_transcript.delta",
    "response.audio_transcript.done": "response.output_audio_transcript.done",
}

#: Error codes the API is known to send (docs/protocol.md 1.7).
FATAL_ERROR_CODES: Final = frozenset(
    {"insufficient_quota", "invalid_api_key", "account_deactivated", "billing_hard_limit_reached"}
)

_ITEM_REFS: Final = frozenset({"conversation.item.delete", "conversation.item.truncate", "conversation.item.retrieve"})
_SESSION_UPDATES: Final = frozenset({"session.update", "transcription_session.update"})

#: Which client event types an `error` with this code can answer (docs/protocol.md 1.7 and 3, and the fake server's
#: own codes). An empty set: a session-level error, which answers no client event (expiry, fatal account
#: errors). A code not listed (`server_error`, one rtrace has not seen) may answer any client event. Codes that
#: only say a field was wrong (`GENERIC_ERROR_CODES`) are narrowed by the error's `param` (`ERROR_PARAMS`).
ERROR_ANSWERS: Final[dict[str, frozenset[str]]] = {
    "invalid_tool_call_id": frozenset({"conversation.item.create"}),
    "invalid_previous_item_id": frozenset({"conversation.item.create"}),
    "duplicate_item_id": frozenset({"conversation.item.create"}),
    "item_delete_invalid_item_id": frozenset({"conversation.item.delete"}),
    "item_delete_has_output": frozenset({"conversation.item.delete"}),
    "item_truncate_invalid_item_id": frozenset({"conversation.item.truncate"}),
    "item_retrieve_invalid_item_id": frozenset({"conversation.item.retrieve"}),
    "unsupported_content_type": frozenset({"conversation.item.truncate"}),
    "conversation_already_has_active_response": frozenset({"response.create"}),
    "response_cancel_not_active": frozenset({"response.cancel"}),
    "input_audio_buffer_commit_empty": frozenset({"input_audio_buffer.commit"}),
    "rate_limit_exceeded": frozenset({"response.create"}),  # a limit on generation [I]
    "session_expired": frozenset(),
    **{code: frozenset() for code in FATAL_ERROR_CODES},
}

#: Codes that say a field of the event was wrong, not which event: the error's `param` tells (`ERROR_PARAMS`).
GENERIC_ERROR_CODES: Final = frozenset(
    {"invalid_value", "unknown_parameter", "missing_required_parameter", "invalid_type"}
)

#: The client event types whose field an error's `param` names, by the param's first segment (`item.call_id`
#: -> `item`). `audio` is a field of `input_audio_buffer.append` only, which no answer ever follows.
ERROR_PARAMS: Final[dict[str, frozenset[str]]] = {
    "session": _SESSION_UPDATES,
    "item": frozenset({"conversation.item.create"}),
    "previous_item_id": frozenset({"conversation.item.create"}),
    "item_id": _ITEM_REFS,
    "content_index": frozenset({"conversation.item.truncate"}),
    "audio_end_ms": frozenset({"conversation.item.truncate"}),
    "audio": frozenset({"input_audio_buffer.append"}),
    "response": frozenset({"response.create"}),
    "response_id": frozenset({"response.cancel"}),
}


def normalize_type(event_type: str) -> str:
    """The GA name of an event type (beta names renamed, others unchanged)."""
    return BETA_TO_GA.get(event_type, event_type)


def side_of(event_type: str) -> Side | None:
    """Which side sends a (normalised) event type, or None when the type is unknown."""
    if event_type in CLIENT_EVENTS:
        return "client"
    if event_type in SERVER_EVENTS:
        return "server"
    if event_type in META_EVENTS:
        return "meta"
    if event_type in LOCAL_EVENTS:
        return "local"
    return None


def is_known(event_type: str) -> bool:
    return side_of(event_type) is not None


def error_answers(code: object, param: object) -> frozenset[str] | None:
    """The client event types an `error` with this `code` and `param` can answer, or None: any of them (an
    unknown code, or a generic one whose param rtrace cannot place). Empty: none (a session-level error)."""
    if isinstance(code, str) and code in ERROR_ANSWERS:
        return ERROR_ANSWERS[code]
    if code is None or (isinstance(code, str) and code in GENERIC_ERROR_CODES):
        if isinstance(param, str) and param:
            return ERROR_PARAMS.get(param.split(".", 1)[0].split("[", 1)[0])
    return None
