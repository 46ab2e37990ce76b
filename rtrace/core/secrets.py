"""Making a trace safe to publish: secrets always removed; user text, audio and tool payloads on request.

Owns the secret patterns (`scrub_secrets`) and the line-for-line rewrite behind `rtrace redact`. Ids, types, order,
times and the line count are kept, so an analysis of the redacted trace finds what the original's did. A line that
cannot be parsed may hold a secret too: it becomes a `note` placeholder, never a copy. No terminal output here.

The hashing and URL modules are imported where they are used: every `rtrace analyze` loads this module for
`scrub_text` alone, and start-up time is paid by every command.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from collections.abc import Callable, Iterator
from typing import IO, Any

import orjson

from .loader import DEFAULT_MAX_LINE_BYTES, UnreadableInput
from .trace import MAX_DEPTH, TOO_DEEP

#: What replaces a secret value.
REDACTED = "[redacted]"
#: The text of the placeholder written for a line that could not be read.
DROPPED_NOTE = "line dropped by rtrace redact"

#: Field names whose (string) value is a credential wherever they appear; compared lower-case with `_` as `-`.
SECRET_FIELDS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "api-key",
        "apikey",
        "x-api-key",
        "openai-api-key",
        "azure-api-key",
        "x-goog-api-key",
        "client-secret",
        "ephemeral-key",
        "secret",
        "password",
        "access-token",
        "refresh-token",
        "token",
        "cookie",
        "set-cookie",
    }
)
#: Query parameters that carry a credential in a URL or path.
SECRET_PARAMS = (
    "api-key",
    "api_key",
    "apikey",
    "key",
    "token",
    "access_token",
    "client_secret",
    "authorization",
    "sig",
)

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # The browser way to pass a key: a websocket subprotocol `openai-insecure-api-key.<key>`.
    (re.compile(r"(openai-insecure-api-key\.)[^\s,;\"']+", re.IGNORECASE), r"\g<1>" + REDACTED),
    (re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=\-]+", re.IGNORECASE), r"\g<1> " + REDACTED),
    # OpenAI keys: sk-..., sk-proj-..., sk-svcacct-..., sk-admin-...; ephemeral client secrets ek_...
    (re.compile(r"(?<![A-Za-z0-9_\-])sk-[A-Za-z0-9_\-]{8,}"), "sk-" + REDACTED),
    (re.compile(r"(?<![A-Za-z0-9_\-])ek_[A-Za-z0-9_\-]{8,}"), "ek_" + REDACTED),
    (
        re.compile(r"([?&;](?:" + "|".join(re.escape(p) for p in SECRET_PARAMS) + r")=)[^&#\s\"']*", re.IGNORECASE),
        r"\g<1>" + REDACTED,
    ),
)


def scrub_text(text: str) -> str:
    """`text` with every key-like string, bearer token, key subprotocol and secret query parameter replaced."""
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return text


def safe_path(path: str) -> str:
    """A request path with every secret-looking query parameter removed (`api-key`, `key`, `token`,
    `client_secret`, ...) and key-like strings scrubbed: what a trace may say about where a client connected."""
    import urllib.parse

    parts = urllib.parse.urlsplit(path)
    words = (*SECRET_PARAMS, "secret", "auth", "password")
    query = [
        (k, v)
        for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        if not any(word in k.lower() for word in words)
    ]
    out = parts.path
    if query:
        out += "?" + urllib.parse.urlencode(query)
    return scrub_text(out)


def _is_secret_field(name: str) -> bool:
    return name.lower().replace("_", "-") in SECRET_FIELDS


# Deeper JSON is replaced by `trace.TOO_DEEP`: a subtree that is not scrubbed must not be passed on either.


def _secret_value(value: Any, depth: int = 0) -> Any:
    """A credential field's value: strings replaced, the shape kept (a `client_secret` keeps its `expires_at`)."""
    if depth > MAX_DEPTH:
        return TOO_DEEP
    if isinstance(value, str):
        return REDACTED
    if isinstance(value, dict):
        return {k: _secret_value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_secret_value(v, depth + 1) for v in value]
    return value


def scrub_secrets(value: Any, depth: int = 0) -> Any:
    """A copy of a JSON value with every secret removed: credential fields by name, key patterns in any string,
    and `[name, value]` header pairs. The rest (ids, types, numbers) is untouched; below `MAX_DEPTH` levels,
    `TOO_DEEP` (so the copy can always be written back as JSON)."""
    if isinstance(value, str):
        return scrub_text(value)
    if depth > MAX_DEPTH and isinstance(value, (dict, list)):
        return TOO_DEEP
    if isinstance(value, dict):
        return {
            k: _secret_value(v, depth + 1) if _is_secret_field(k) else scrub_secrets(v, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list):
        if len(value) == 2 and isinstance(value[0], str) and _is_secret_field(value[0]):
            return [value[0], _secret_value(value[1], depth + 1)]
        return [scrub_secrets(v, depth + 1) for v in value]
    return value


#: Where each audio event carries its base64 payload.
AUDIO_FIELDS = {
    "input_audio_buffer.append": "audio",
    "response.output_audio.delta": "delta",
    "response.audio.delta": "delta",
}


def strip_audio(obj: dict[str, Any], key: str) -> None:
    """Replace the base64 audio in `obj[key]` by `""` plus `rtrace_audio_bytes` and `rtrace_audio_sha256` (the
    byte counts the analyzer reads); counts already there are kept."""
    payload = obj.get(key)
    if not isinstance(payload, str):
        return
    import base64
    import binascii
    import hashlib

    try:
        raw = base64.b64decode(payload, validate=False)
    except (binascii.Error, ValueError):
        raw = payload.encode("utf-8", "surrogatepass")
    obj[key] = ""
    obj.setdefault("rtrace_audio_bytes", len(raw))
    obj.setdefault("rtrace_audio_sha256", hashlib.sha256(raw).hexdigest())


def redact_event(event: dict[str, Any], keep_audio: bool = False) -> dict[str, Any]:
    """A copy of `event` safe to write: credentials (keys, bearer tokens, `ek_...` ephemeral secrets, `client_secret`
    objects, key subprotocols, secret query parameters) removed; audio payloads replaced by `""` plus
    `rtrace_audio_bytes` and `rtrace_audio_sha256` unless `keep_audio`. Ids, types and text are kept."""
    clean = scrub_secrets(event)
    if not isinstance(clean, dict):
        return {}
    if not keep_audio:
        key = AUDIO_FIELDS.get(str(clean.get("type")))
        if key is not None:
            strip_audio(clean, key)
    return clean


@dataclasses.dataclass(frozen=True)
class RedactOptions:
    """What to remove besides secrets (always removed)."""

    #: Conversation text: input_text, text, transcripts, instructions (theirs and the model's).
    user_text: bool = False
    #: Audio payloads, replaced by their byte count and SHA-256 (`rtrace_audio_bytes`, `rtrace_audio_sha256`).
    audio: bool = False
    #: Tool call arguments and tool outputs.
    tool_output: bool = False
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES


@dataclasses.dataclass
class RedactStats:
    """What one run did, for the closing message."""

    lines: int = 0
    dropped: int = 0
    secrets: int = 0
    texts: int = 0
    audio: int = 0
    tool: int = 0
    #: `(line, reason)` for each dropped line.
    notes: list[tuple[int, str]] = dataclasses.field(default_factory=list)


#: Event types whose `delta` / `text` / `transcript` is conversation text.
_TEXT_EVENTS = frozenset(
    {
        "response.output_text.delta",
        "response.output_text.done",
        "response.text.delta",
        "response.text.done",
        "response.output_audio_transcript.delta",
        "response.output_audio_transcript.done",
        "response.audio_transcript.delta",
        "response.audio_transcript.done",
        "conversation.item.input_audio_transcription.delta",
        "conversation.item.input_audio_transcription.completed",
        "conversation.item.input_audio_transcription.segment",
    }
)
_TOOL_EVENTS = frozenset(
    {
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
    }
)
_TEXT_FIELDS = frozenset({"text", "transcript", "instructions"})


class _Rewriter:
    """The optional (non-secret) redactions, applied to one event."""

    def __init__(self, options: RedactOptions, stats: RedactStats) -> None:
        self.options = options
        self.stats = stats
        # Equal texts stay equal within one run, unguessable across runs (no dictionary attack on short answers).
        import secrets

        self._key = secrets.token_bytes(16)

    def text(self, value: str, kind: str) -> str:
        if not value:
            return value  # nothing to hide, and rules tell an empty payload from a missing one
        import hashlib
        import hmac

        tag = hmac.new(self._key, value.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:8]
        if kind == "tool":
            self.stats.tool += 1
        else:
            self.stats.texts += 1
        return f"[redacted {kind}: {len(value)} chars #{tag}]"

    def audio(self, obj: dict[str, Any], key: str) -> None:
        strip_audio(obj, key)
        self.stats.audio += 1

    def event(self, event: dict[str, Any]) -> None:
        etype = event.get("type")
        o = self.options
        if o.audio and etype in AUDIO_FIELDS and isinstance(event.get(AUDIO_FIELDS[etype]), str):
            self.audio(event, AUDIO_FIELDS[etype])
        if o.user_text and etype in _TEXT_EVENTS:
            for key in ("delta", "text", "transcript"):
                if isinstance(event.get(key), str):
                    event[key] = self.text(event[key], "text")
        if o.tool_output and etype in _TOOL_EVENTS:
            for key in ("delta", "arguments"):
                if isinstance(event.get(key), str):
                    event[key] = self.text(event[key], "tool")
        self.walk(event, 0)

    def walk(self, obj: Any, depth: int) -> None:
        """Items, content parts, sessions and responses anywhere below an event."""
        if isinstance(obj, list):
            for v in obj:
                self.walk(v, depth + 1)
            return
        if not isinstance(obj, dict):
            return
        o = self.options
        kind = obj.get("type")
        if o.audio and isinstance(obj.get("audio"), str) and depth > 0:
            self.audio(obj, "audio")
        if o.user_text:
            for key in _TEXT_FIELDS:
                if isinstance(obj.get(key), str) and (key == "instructions" or depth > 0):
                    obj[key] = self.text(obj[key], "text")
        if o.tool_output and kind in ("function_call", "function_call_output", "mcp_call", "mcp_list_tools"):
            for key in ("arguments", "output", "error"):
                if isinstance(obj.get(key), str):
                    obj[key] = self.text(obj[key], "tool")
        for v in obj.values():
            if isinstance(v, (dict, list)):
                self.walk(v, depth + 1)


def _lines(stream: IO[bytes], limit: int) -> Iterator[bytes | int]:
    """The lines of `stream` without their newline; an oversized line as its size (never held in memory)."""
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith(b"\n"):
            size = len(line)
            while True:
                more = stream.readline(1 << 20)
                size += len(more)
                if not more or more.endswith(b"\n"):
                    break
            yield size
            continue
        yield line[:-1] if line.endswith(b"\n") else line


def redact_stream(
    src: IO[bytes],
    dst: IO[bytes],
    options: RedactOptions | None = None,
    on_drop: Callable[[int, str], None] | None = None,
) -> RedactStats:
    """Rewrite a trace line for line. `on_drop(line, reason)` is told about each line replaced by a placeholder."""
    options = options or RedactOptions()
    stats = RedactStats()
    rewriter = _Rewriter(options, stats)
    last_t, last_conn = 0.0, 1
    for lineno, raw in enumerate(_lines(src, options.max_line_bytes), 1):
        stats.lines = lineno
        if lineno == 1 and isinstance(raw, bytes) and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        if isinstance(raw, bytes) and not raw.strip():
            dst.write(raw + b"\n")
            continue
        out, reason = _redact_line(raw, rewriter, stats)
        if out is None:
            stats.dropped += 1
            stats.notes.append((lineno, reason))
            if on_drop is not None:
                on_drop(lineno, reason)
            note = {"type": "note", "text": DROPPED_NOTE}
            out = orjson.dumps({"t": last_t, "dir": "meta", "conn": last_conn, "event": note})
        else:
            t, conn = _envelope(out)
            last_t = t if t is not None else last_t
            last_conn = conn if conn is not None else last_conn
        dst.write(out + b"\n")
    return stats


def _envelope(line: bytes) -> tuple[float | None, int | None]:
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None, None
    if not isinstance(obj, dict):
        return None, None
    t, conn = obj.get("t"), obj.get("conn")
    return (
        float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None,
        conn if type(conn) is int and conn >= 1 else None,
    )


def _redact_line(raw: bytes | int, rewriter: _Rewriter, stats: RedactStats) -> tuple[bytes | None, str]:
    if isinstance(raw, int):
        return None, f"line is {raw:,} bytes, over the {rewriter.options.max_line_bytes:,}-byte limit"
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return None, "invalid UTF-8"
        return None, f"malformed JSON ({str(e).split(':')[0]})"
    try:
        clean = scrub_secrets(obj)
        if clean != obj:
            stats.secrets += 1
        if isinstance(clean, dict):
            event = clean.get("event")
            if isinstance(event, dict):
                rewriter.event(event)
            elif "type" in clean:
                rewriter.event(clean)
        return orjson.dumps(clean), ""
    except RecursionError:
        return None, "nested too deeply"
    except orjson.JSONEncodeError as e:
        return None, f"cannot be written back ({e})"


def redact_file(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str] | None,
    options: RedactOptions | None = None,
    on_drop: Callable[[int, str], None] | None = None,
) -> RedactStats:
    """Redact `src` into `dst` (`None` or `-`: stdout). The output appears only once complete (written beside it,
    then renamed), so an interrupted run never leaves a half-redacted file; `dst` may be `src`."""
    s = os.fspath(src)
    try:
        if os.path.isdir(s):
            raise UnreadableInput(f"{s}: is a directory")
        fin = sys.stdin.buffer if s == "-" else open(s, "rb")
    except OSError as e:
        raise UnreadableInput(f"{s}: {e.strerror or e}") from None
    try:
        d = None if dst is None else os.fspath(dst)
        if d is None or d == "-":
            stats = redact_stream(fin, sys.stdout.buffer, options, on_drop)
            sys.stdout.buffer.flush()
            return stats
        tmp = f"{d}.rtrace-redact-{os.getpid()}.tmp"
        try:
            with open(tmp, "wb") as fout:
                stats = redact_stream(fin, fout, options, on_drop)
            os.replace(tmp, d)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return stats
    finally:
        if fin is not sys.stdin.buffer:
            fin.close()
