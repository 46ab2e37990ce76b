"""What the fake endpoint's frames look like: client frames decoded (never raising), and the API's objects as
templates (the default session, items, usage, errors, rate limits). `Emission`, what the endpoint asks the server
to do, is the fault language's (`rtrace.net.faults.emission`), whose notes and closes are emissions too.

Pure functions of their arguments: no connection state here (that is `rtrace.net.fake.endpoint`).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import re
from typing import Any

import orjson

from ..faults.emission import Emission as Emission  # the endpoint's emissions are the fault language's

#: Frames larger than this are answered with an error and not processed (the server reads up to its own limit).
DEFAULT_MAX_EVENT_BYTES = 8 * 1024 * 1024


@dataclasses.dataclass(frozen=True, slots=True)
class FrameError:
    """Why a frame could not become a client event."""

    code: str
    message: str


def decode_frame(data: str | bytes, max_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> dict[str, Any] | FrameError:
    """A client event from one websocket message, or the reason it is not one. Never raises."""
    if isinstance(data, bytes | bytearray | memoryview):
        return FrameError("invalid_event", "Binary frames are not supported; send events as JSON text frames.")
    size = len(data.encode("utf-8", "surrogatepass")) if len(data) * 4 > max_bytes else len(data)
    if size > max_bytes:
        return FrameError("event_too_large", f"The event is {size} bytes; the maximum is {max_bytes} bytes.")
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        return FrameError("invalid_json", f"The event is not valid JSON: {e.args[0] if e.args else e}.")
    if not isinstance(obj, dict):
        return FrameError("invalid_event", "The event must be a JSON object.")
    if not isinstance(obj.get("type"), str):
        return FrameError("missing_required_parameter", "Missing required parameter: 'type'.")
    return obj


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (an event is sent later than it is made; the conversation may change meanwhile)."""
    try:
        return orjson.loads(orjson.dumps(value))
    except (orjson.JSONEncodeError, orjson.JSONDecodeError):
        return copy.deepcopy(value)


def merge_session(base: dict[str, Any], update: dict[str, Any]) -> None:
    """`session.update`: only present fields change; nested objects merge, anything else is replaced."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge_session(base[key], value)
        else:
            base[key] = copy_json(value)


def item_text(item: dict[str, Any]) -> str:
    """The text of a wire item's content parts (`text` or `transcript` of each), joined by spaces."""
    content = item.get("content")
    parts: list[str] = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, dict):
                for key in ("text", "transcript"):
                    value = part.get(key)
                    if isinstance(value, str) and value:
                        parts.append(value)
                        break
    return " ".join(parts)


def error_event(
    code: str | None, message: str, param: str | None, event_id: str | None, etype: str = "invalid_request_error"
) -> dict[str, Any]:
    """An `error` server event (docs/protocol.md 1.7); `event_id` is the offending client event's, when echoed."""
    return {
        "type": "error",
        "error": {"type": etype, "code": code, "message": message, "param": param, "event_id": event_id},
    }


def usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    """A response's `usage`, text tokens only."""
    return {
        "total_tokens": input_tokens + output_tokens,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "input_token_details": {
            "text_tokens": input_tokens,
            "audio_tokens": 0,
            "image_tokens": 0,
            "cached_tokens": 0,
            "cached_tokens_details": {"text_tokens": 0, "audio_tokens": 0, "image_tokens": 0},
        },
        "output_token_details": {"text_tokens": output_tokens, "audio_tokens": 0},
    }


#: What `rate_limits.updated` says (docs/protocol.md 7.1: whether the GA API still sends it is not known).
RATE_LIMITS = [
    {"name": "requests", "limit": 1000, "remaining": 999, "reset_seconds": 60.0},
    {"name": "tokens", "limit": 50000, "remaining": 49000, "reset_seconds": 60.0},
]


#: What differs between the models' default sessions (the realapi recordings' `session.created`): the voice, and
#: the silence server VAD waits for. gpt-realtime and the previews say alloy and 200 ms; the 2.1 family marin and 500.
MODEL_DEFAULTS: dict[str, tuple[str, int]] = {"gpt-realtime-2.1": ("marin", 500)}


def model_defaults(model: str) -> tuple[str, int]:
    """(voice, silence_duration_ms) of a model's default session."""
    for prefix, found in MODEL_DEFAULTS.items():
        if model.startswith(prefix):
            return found
    return "alloy", 200


_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def opaque_id(prefix: str, *key: object, length: int = 21) -> str:
    """An id shaped as the real server's (`item_` and 21 letters and digits; `call_` and 16), made from `key`
    (connection and count: unique, the same on every run)."""
    digest = int.from_bytes(hashlib.sha256(repr(key).encode()).digest(), "big")
    chars = []
    for _ in range(length):
        digest, k = divmod(digest, 62)
        chars.append(_BASE62[k])
    return f"{prefix}_{''.join(chars)}"


def hex_id(prefix: str, *key: object, length: int = 16) -> str:
    """An id of `length` hex digits made from `key` (the real server's `output_audio_buffer.*` event ids:
    `event_fd8cb17ab18a4a3f`)."""
    return f"{prefix}_{hashlib.sha256(repr(key).encode()).hexdigest()[:length]}"


def ga_rate_limits(tokens_used: int, limit: int = 15_000_000) -> list[dict[str, Any]]:
    """What the GA server's `rate_limits.updated` says after a response (the realapi recordings): tokens only."""
    return [{"name": "tokens", "limit": limit, "remaining": max(0, limit - tokens_used), "reset_seconds": 0.001}]


def default_session(session_id: str, model: str, expires_at: int = 3600) -> dict[str, Any]:
    """The session a connection starts with: the GA defaults of `model` (its voice and VAD silence), 24 kHz PCM
    both ways, server VAD; `expires_at` in seconds since the epoch, as the real server says it."""
    voice, silence = model_defaults(model)
    return {
        "type": "realtime",
        "object": "realtime.session",
        "id": session_id,
        "model": model,
        "output_modalities": ["audio"],
        "instructions": "",
        "tools": [],
        "tool_choice": "auto",
        "max_output_tokens": "inf",
        "tracing": None,
        "truncation": "auto",
        "prompt": None,
        "expires_at": expires_at,
        "audio": {
            "input": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "transcription": None,
                "noise_reduction": None,
                "turn_detection": {
                    "type": "server_vad",
                    "threshold": 0.5,
                    "prefix_padding_ms": 300,
                    "silence_duration_ms": silence,
                    "idle_timeout_ms": None,
                    "create_response": True,
                    "interrupt_response": True,
                },
            },
            "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": voice, "speed": 1.0},
        },
        "include": None,
    }


#: The fields the real server fills in an `audio.input.transcription` a client gives (the rest as given).
TRANSCRIPTION_DEFAULTS = {"language": None, "prompt": None}


def _item(item_id: str, itype: str, status: str, **fields: Any) -> dict[str, Any]:
    # GA items carry no `object` (the realapi recordings): id, type, status, then the type's fields
    return {"id": item_id, "type": itype, "status": status, **fields}


def assistant_message(item_id: str) -> dict[str, Any]:
    """A response's message item as `response.output_item.added` shows it (no content yet)."""
    return _item(item_id, "message", "in_progress", role="assistant", content=[])


def function_call(item_id: str, call_id: str, name: str) -> dict[str, Any]:
    """A response's function call item as `response.output_item.added` shows it (no arguments yet)."""
    return _item(item_id, "function_call", "in_progress", name=name, call_id=call_id, arguments="")


def committed_audio_message(item_id: str) -> dict[str, Any]:
    """The user message committed input audio becomes (its transcript comes with the transcription, if any)."""
    return _item(item_id, "message", "completed", role="user", content=[{"type": "input_audio", "transcript": None}])


_TOKEN = re.compile(r"\s?[A-Za-z]{1,8}|\s?\d{1,3}|\s?[^\s\w]|\s?\w|\s+")
_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def token_pieces(text: str) -> list[str]:
    """`text` in token-sized deltas, as the real server streams it (' fog', 'gy', ' 12', '.'): a word of up to
    eight letters with the space before it, up to three digits, one other character."""
    pieces = _TOKEN.findall(text)
    return pieces if pieces and "".join(pieces) == text else [text]


def obfuscation(delta: str, n: int) -> str:
    """The padding the real server puts beside a delta (`obfuscation`, letters and digits) so that the frame's
    length does not tell the text's: delta and padding are 16 characters together. Deterministic in `n`."""
    return "".join(_ALPHABET[(n * 31 + i * 17) % len(_ALPHABET)] for i in range(max(1, 16 - len(delta))))


def transcription_events(item_id: str, text: str, seconds: int) -> list[dict[str, Any]]:
    """The input audio transcription of a committed user item as the real server sends it: token-sized deltas,
    then `completed` with the duration it billed (`usage` of type `duration`, whole seconds of speech)."""
    ids = {"item_id": item_id, "content_index": 0}
    used = {"type": "duration", "seconds": seconds}
    return [
        *(
            {"type": "conversation.item.input_audio_transcription.delta", **ids, "delta": piece}
            for piece in token_pieces(text or "")
            if piece  # nothing heard: no delta, only `completed` (the realapi idle-timeout turn)
        ),
        {"type": "conversation.item.input_audio_transcription.completed", **ids, "transcript": text, "usage": used},
    ]


def transcription_failed(item_id: str, code: str | None) -> dict[str, Any]:
    """The failed input audio transcription of a committed user item, instead of its deltas and `completed` (the
    shape the real server sends: an error of type `server_error` naming the item; a rate-limited transcription
    ends its message with the HTTP status)."""
    message = f"Input transcription failed for item '{item_id}'."
    if code == "rate_limit_exceeded":
        message += " 429 Too Many Requests"
    error = {"type": "server_error", "code": code, "message": message, "param": None}
    return {"type": "conversation.item.input_audio_transcription.failed", "item_id": item_id, "content_index": 0,
            "error": error}  # fmt: skip


#: How a rate limit is named in its error message, and the limit of each (the realapi recordings' GA limits).
_LIMITS = {"tokens": ("tokens per min (TPM)", 15_000_000), "requests": ("requests per min (RPM)", 20_000)}
#: Seconds until a rate limit resets, in a rate-limited answer.
RATE_LIMIT_RESET = 1.2


def rate_limited(limit: str, model: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A response that hits the rate limit `limit` (`tokens` or `requests`): the `rate_limits` of the
    `rate_limits.updated` sent at its start (that limit with none remaining), and the `status_details` of its
    `response.done` failed `rate_limit_exceeded`, worded as the API's 429 answers are (no realapi recording holds
    one: the error's `type` names the limit, as in those answers)."""
    words, most = _LIMITS.get(limit, _LIMITS["tokens"])
    limits = [{"name": limit, "limit": most, "remaining": 0, "reset_seconds": RATE_LIMIT_RESET}]
    message = (
        f"Rate limit reached for {model} on {words}: Limit {most}, Used {most}, Requested 1. "
        f"Please try again in {RATE_LIMIT_RESET}s."
    )
    error = {"type": limit, "code": "rate_limit_exceeded", "message": message}
    return limits, {"type": "failed", "reason": None, "error": error}
