"""`rtrace redact`: a trace made safe to publish, line for line.

Secrets always go (`rtrace.core.secrets`, with a secret split across the deltas of a stream joined first:
`DeltaWindows`, each such delta masked, the earlier ones rewritten in place in the output); user text, audio and tool
payloads on request. Ids, types, order, times and the line count are kept, so an analysis of the redacted trace
finds what the original's did. A line that cannot be parsed may hold a secret too: it becomes a `note` placeholder,
never a copy. No terminal output here.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from typing import IO, Any

import orjson

from ..core.loader import DEFAULT_MAX_LINE_BYTES, TraceReader, UnreadableInput, open_input
from ..core.secrets import AUDIO_FIELDS, STREAMS, DeltaWindows, scrub_secrets, strip_audio
from ..core.writer import replacing_trace, rewrite_at

#: The text of the placeholder written for a line that could not be read.
DROPPED_NOTE = "line dropped by rtrace redact"


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
    #: Lines that are trace records (an event with a `type`; the header is none).
    records: int = 0
    dropped: int = 0
    secrets: int = 0
    texts: int = 0
    audio: int = 0
    tool: int = 0
    #: `(line, reason)` for each dropped line.
    notes: list[tuple[int, str]] = dataclasses.field(default_factory=list)
    #: Why the input holds no trace at all (empty, binary data), as the loader says it (`TraceReader.unusable`).
    unusable: str | None = None


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


class _Written:
    """A delta line already written to the output: where, and the objects to write it again from."""

    __slots__ = ("event", "field", "length", "line", "offset")

    def __init__(self, line: dict[str, Any], event: dict[str, Any], field: str) -> None:
        self.line, self.event, self.field = line, event, field
        self.offset = -1
        self.length = 0


def redact_stream(
    src: IO[bytes],
    dst: IO[bytes],
    options: RedactOptions | None = None,
    on_drop: Callable[[int, str], None] | None = None,
) -> RedactStats:
    """Rewrite a trace line for line. `on_drop(line, reason)` is told about each line replaced by a placeholder.
    Lines are split as the loader splits them (`TraceReader.raw_lines`: BOM, UTF-16, oversized lines, and no end
    looked for beyond `MAX_SKIP_FACTOR` times the limit). A delta that shares a secret with the deltas before it is
    rewritten in `dst` where it stands (`dst` must then be seekable; `redact_file` sees to it)."""
    options = options or RedactOptions()
    stats = RedactStats()
    rewriter = _Rewriter(options, stats)
    last_t, last_conn = 0.0, 1
    reader = TraceReader(src, "<redact>", max_line_bytes=options.max_line_bytes)
    windows: DeltaWindows[_Written] = DeltaWindows()
    at = 0  # bytes written so far: where the next line starts

    def put(data: bytes) -> int:
        nonlocal at
        start = at
        dst.write(data)
        at += len(data)
        return start

    def placeholder(lineno: int, reason: str) -> None:
        stats.dropped += 1
        stats.notes.append((lineno, reason))
        if on_drop is not None:
            on_drop(lineno, reason)
        note = {"type": "note", "text": DROPPED_NOTE}
        put(orjson.dumps({"t": last_t, "dir": "meta", "conn": last_conn, "event": note}) + b"\n")

    for lineno, raw, _ in reader.raw_lines():
        stats.lines = lineno
        if isinstance(raw, bytes) and not raw.strip():
            put(raw + b"\n")
            continue
        redacted, reason = _redact_line(raw, rewriter, stats)
        if redacted is None:
            placeholder(lineno, reason)
            continue
        original, clean = redacted
        source = _event_of(original)
        if source is not None and isinstance(source.get("type"), str):
            stats.records += 1
        t, conn = _envelope(clean)
        last_t = t if t is not None else last_t
        last_conn = conn if conn is not None else last_conn
        written = _stream_delta(windows, original, clean, last_conn, options, stats)
        data = orjson.dumps(clean) + b"\n"
        start = put(data)
        if written is not None:
            mine, earlier = written
            mine.offset, mine.length = start, len(data)
            for line, text in earlier:
                line.event[line.field] = text
                again = orjson.dumps(line.line) + b"\n"
                if len(again) == line.length:
                    rewrite_at(dst, line.offset, again)
    stats.unusable = reader.unusable
    if reader.gave_up is not None:
        stats.lines = reader.gave_up
        placeholder(reader.gave_up, reader.problems[-1].message if reader.problems else "no line end")
    if reader.broken is not None:  # a compressed input that breaks: the lines before are kept, a note says where
        stats.lines = reader.broken
        placeholder(reader.broken, reader.problems[-1].message if reader.problems else "the stream breaks")
    return stats


def _event_of(obj: Any) -> dict[str, Any] | None:
    if not isinstance(obj, dict):
        return None
    event = obj.get("event")
    if isinstance(event, dict):
        return event
    return obj if "type" in obj else None


def _stream_delta(
    windows: DeltaWindows[_Written],
    original: Any,
    clean: Any,
    conn: int,
    options: RedactOptions,
    stats: RedactStats,
) -> tuple[_Written, list[tuple[_Written, str]]] | None:
    """Feed a line to the delta windows: for a streamed delta, (its handle, the earlier deltas to rewrite), with
    its own text set masked where needed; None for any other line (a done or a close ends windows)."""
    source, event = _event_of(original), _event_of(clean)
    if source is None or event is None:
        return None
    etype = source.get("type")
    spec = STREAMS.get(str(etype))
    if spec is None:
        windows.end(conn, source)
        if etype == "connection.closed":
            windows.close(conn)
        return None
    field, _, family = spec
    if (options.tool_output and family in ("arguments", "mcp_arguments")) or (
        options.user_text and family != "arguments" and family != "mcp_arguments"
    ):
        return None  # the whole text is replaced by its tag anyway
    text = source.get(field)
    if not isinstance(text, str):
        return None
    event[field] = text
    mine = _Written(clean, event, field)
    earlier = []
    for line, now in windows.delta(conn, source, mine):
        if line is mine:
            event[field] = now
        else:
            earlier.append((line, now))
    stats.secrets += len(earlier)  # lines written before the secret showed, rewritten now
    return mine, earlier


def _envelope(obj: Any) -> tuple[float | None, int | None]:
    if not isinstance(obj, dict):
        return None, None
    t, conn = obj.get("t"), obj.get("conn")
    return (
        float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None,
        conn if type(conn) is int and conn >= 1 else None,
    )


def _redact_line(raw: bytes | int, rewriter: _Rewriter, stats: RedactStats) -> tuple[tuple[Any, Any] | None, str]:
    """(the line as read, the line redacted), or None and why the line cannot be kept."""
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
        orjson.dumps(clean)
        return (obj, clean), ""
    except RecursionError:
        return None, "nested too deeply"
    except orjson.JSONEncodeError as e:
        return None, f"cannot be written back ({e})"


def _check_read(src: str, stats: RedactStats, dst: str) -> None:
    """`UnreadableInput` when `src` held no trace record at all (nothing, another kind of file, random bytes): then
    nothing is written to `dst`."""
    if stats.unusable is not None:
        raise UnreadableInput(f"{src}: {stats.unusable}; {dst} is not written")
    if stats.lines == 0:
        raise UnreadableInput(f"{src}: no line to redact; {dst} is not written")
    if stats.records == 0:
        raise UnreadableInput(f"{src}: no trace record in its {stats.lines:,} lines; {dst} is not written")


def redact_file(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str] | None,
    options: RedactOptions | None = None,
    on_drop: Callable[[int, str], None] | None = None,
) -> RedactStats:
    """Redact `src` into `dst` (`None` or `-`: stdout). The output appears only once complete (`core.writer.
    Replacing`: a new temporary file beside it, renamed), so an interrupted run never leaves a half-redacted file,
    and an input with no line leaves `dst` as it was (`UnreadableInput`). The CLI refuses `dst` = `src`."""
    s = os.fspath(src)
    fin = sys.stdin.buffer if s == "-" else open_input(s)
    try:
        d = None if dst is None else os.fspath(dst)
        if d is None or d == "-":
            # Through a temporary file: deltas may be rewritten where they stand, which a pipe cannot do.
            with tempfile.TemporaryFile() as spool:
                stats = redact_stream(fin, spool, options, on_drop)
                _check_read(s, stats, "stdout")
                spool.seek(0)
                shutil.copyfileobj(spool, sys.stdout.buffer)
            sys.stdout.buffer.flush()
            return stats
        with replacing_trace(d) as fout:
            stats = redact_stream(fin, fout, options, on_drop)
            _check_read(s, stats, d)
        return stats
    finally:
        if fin is not sys.stdin.buffer:
            fin.close()
