"""livekit-agents' own logs as traces: the records its OpenAI realtime session writes with `LK_OPENAI_DEBUG=1`.

With the flag (read when `livekit.agents` is imported) and the `livekit.agents` logger at DEBUG (production:
`LIVEKIT_LOG_LEVEL=DEBUG` or `--log-level debug`; a dev run's default), the session logs each client event after
sending it (`>>>`, every type but `input_audio_buffer.append`) and each server event as it reads it (`<<<`), the
event in the record's extra `lk.pii.event`, and a `connecting to Realtime API: URL` line per websocket. Two
renderings are read, found by their content (`sniff`):

- `json`: the worker's production formatter, one object per line (`message`, `level`, `name`, the extras,
  `timestamp` in ISO 8601 with its zone);
- `dev`: `YYYY-MM-DD HH:MM:SS,mmm - LEVEL name - message {extras as JSON}` in ANSI colours (written whatever the
  terminal; stripped here), local time with no zone; a line that does not start with a time (a traceback) belongs
  to the record before.

Only `>>>` and `<<<` become records: `unhandled event: TYPE` and `failed to handle event` repeat a `<<<` and are
never counted twice. A connection starts at a `connecting to` line, or at a `session.created` of a connection
that already had one; it ends at `Error in _recv_task`, `... connection failed, retrying` or `session closed`.
Times are the records' own (the client's clock, from the first record). A worker's log may interleave several
jobs (records carry `job_id` when a job runs in its own process): the first job's records are read, and the first
record of each other job is a problem that says so.

What a log cannot show is said in the trace, so that no rule judges it: the reconnect replay is sent past the
logging (`"replay_visible": false` on every connection after the first), audio appends are never logged, and an
output audio delta's payload is logged as `"..."` (dropped here; the header's `unseen` lists
`output-audio-bytes`). Line numbers are the log's own, for findings and problems alike.
"""

from __future__ import annotations

import calendar
import codecs
import datetime
import re
from collections.abc import Iterator
from typing import Any

import orjson

from .catalog import BETA_TO_GA, side_of
from .escape import printable
from .loader import Row, TraceReader
from .secrets import safe_path
from .trace import Direction, Header

#: What the header of a trace read from a log says it cannot show (`engine.fold` turns each into a note).
UNSEEN = {
    "reconnect-replay": "the client's reconnect replay is not logged (it is sent past the `>>>` logging)",
    "input-audio": "input_audio_buffer.append is never logged",
    "output-audio-bytes": "output audio deltas are logged without their payload (`\"delta\": \"...\"`)",
}
RECORDER = "livekit-agents log (LK_OPENAI_DEBUG)"

_ANSI = re.compile(rb"\x1b\[[0-9;]*m")
_DEV = re.compile(rb"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) - ([A-Z]+) +(\S+) - (.*)", re.DOTALL)
_CONNECTING = "connecting to Realtime API: "
#: Messages that end the connection being logged.
_ENDS = ("Error in _recv_task", "OpenAI Realtime API connection failed", "session closed")
#: Output audio deltas (GA and beta names): their logged payload is a placeholder.
_AUDIO_DELTAS = ("response.output_audio.delta", "response.audio.delta")
#: How many of the first lines `sniff` looks at (an application may log much before its first session: a start-up
#: banner, a stack trace); the caller bounds the bytes (`importers.SNIFF_BYTES`).
SNIFF_LINES = 50_000


def _json_record(raw: bytes) -> dict[str, Any] | None:
    """A line of the JSON formatter as its object, or None."""
    if not raw.startswith(b"{"):
        return None
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if isinstance(obj, dict) and isinstance(obj.get("message"), str) and "timestamp" in obj and "level" in obj:
        return obj
    return None


def _dev_record(raw: bytes) -> tuple[float, str, str, bytes] | None:
    """A line of the dev formatter as (time, level, logger name, the rest), or None."""
    match = _DEV.match(_ANSI.sub(b"", raw))
    if match is None:
        return None
    try:
        stamp = datetime.datetime.strptime(match.group(1).decode(), "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None
    seconds = calendar.timegm(stamp.timetuple()) + int(match.group(2)) / 1000  # local time: only differences count
    return seconds, match.group(3).decode(), match.group(4).decode("utf-8", "replace"), match.group(5)


def sniff(head: bytes) -> str | None:
    """`json` or `dev` when the first lines of `head` are livekit-agents log records of that formatter (a record
    of a `livekit` logger among them, past any preamble); None otherwise, and at once when the first record is a
    trace's (a header or an event). UTF-16 and a UTF-8 BOM are read as the loader reads them."""
    head = _utf8(head)
    for raw in head.split(b"\n")[:SNIFF_LINES]:
        raw = raw.strip(b"\r")
        obj = _json_record(raw)
        if obj is not None and str(obj.get("name", "")).startswith("livekit"):
            return "json"
        if obj is None and raw.startswith(b"{") and _is_trace_line(raw):
            return None
        dev = _dev_record(raw)
        if dev is not None and dev[2].startswith("livekit"):
            return "dev"
    return None


def _is_trace_line(raw: bytes) -> bool:
    """Whether a line is a trace's own: an rtrace header or an event record (then the input is no log)."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return isinstance(obj, dict) and ("rtrace" in obj or "event" in obj or "type" in obj)


def utf16_codec(head: bytes) -> str | None:
    """The UTF-16 codec the first bytes of an input announce (a BOM, or ASCII text with every other byte NUL), as
    the loader reads them; None for anything else."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    if len(head) >= 4 and head[0] and not head[1] and head[2] and not head[3]:
        return "utf-16-le"
    if len(head) >= 4 and not head[0] and head[1] and not head[2] and head[3]:
        return "utf-16-be"
    return None


def _utf8(head: bytes) -> bytes:
    """The first bytes of an input as UTF-8: past a UTF-8 BOM, converted from UTF-16."""
    if head.startswith(codecs.BOM_UTF8):
        return head[3:]
    codec = utf16_codec(head)
    if codec is None:
        return head
    return codecs.getincrementaldecoder(codec)(errors="replace").decode(head).encode("utf-8")


def _iso_seconds(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        stamp = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=datetime.timezone.utc)
    return stamp.timestamp()


def _split_dev(rest: bytes) -> tuple[str, Any]:
    """The message and the extras (a dict, or None) of a dev line after its `name - `."""
    text = rest.decode("utf-8", "replace").rstrip()
    brace = text.find(" {")
    while brace >= 0:
        try:
            extra = orjson.loads(text[brace + 1 :])
        except orjson.JSONDecodeError:
            brace = text.find(" {", brace + 1)
            continue
        return text[:brace], extra if isinstance(extra, dict) else None
    return text, None


class LogReader(TraceReader):
    """A `TraceReader` over a livekit-agents log: the same `Row`s, the log's own line numbers, problems and
    header, read through the loader's line splitting (limits, compression) with `raw_lines`."""

    def __init__(self, stream: Any, path: str, log_format: str | None = None, **kw: Any) -> None:
        super().__init__(stream, path, **kw)
        self.log_format = log_format
        self._set_header()
        self._conn = 0
        self._created = False  # the current connection had its session.created
        self._open = False
        #: The job whose records are read (None: none named yet), and the other jobs met.
        self.job: str | None = None
        self.other_jobs: set[str] = set()

    def _set_header(self) -> None:
        fields = {"recorder": RECORDER, "source_format": "livekit-log", "log_format": self.log_format}
        self.header = Header(1, {**fields, "unseen": sorted(UNSEEN)})

    def _found(self, kind: str) -> None:
        """The first record decides the formatter: the rest of the log is read as that one."""
        if self.log_format is None:
            self.log_format = kind
            self._set_header()

    def _entries(
        self, table: dict[bytes, int] | None = None, until_line: int | None = None, keep: int = 0, detail: bool = False
    ) -> Iterator[Row]:
        t0: float | None = None
        for lineno, raw, _ in self.raw_lines():
            if until_line is not None and lineno > until_line:
                break
            if type(raw) is int:
                self._problem(lineno, 1, f"line is {raw:,} bytes, over the {self._max:,}-byte limit; skipped")
                continue
            assert isinstance(raw, bytes)
            raw = raw.rstrip(b"\r")
            parsed = self._parse(raw)
            if parsed is None:
                continue  # another program's output, a traceback line: not a record of the session
            seconds, message, extra = parsed
            if not self._of_this_job(lineno, extra):
                continue
            if seconds is None:
                seconds = self.last_t if t0 is None else self.last_t + t0
            if t0 is None:
                t0 = seconds
            t = round(max(0.0, seconds - t0), 6)
            yield from self._rows(lineno, t, message, extra)

    def _of_this_job(self, lineno: int, extra: Any) -> bool:
        job = extra.get("job_id") if isinstance(extra, dict) else None
        if not isinstance(job, str) or job == self.job:
            return True
        if self.job is None:
            self.job = job
            return True
        if job not in self.other_jobs:
            self.other_jobs.add(job)
            self._problem(
                lineno,
                1,
                f"a record of another job ({printable(job, 40)}; job {printable(self.job, 40)} is read): this log "
                "interleaves jobs; keep one job's lines (its job_id) to analyze it",
            )
        return False

    def _parse(self, raw: bytes) -> tuple[float | None, str, Any] | None:
        # The first record of a `livekit` logger decides the formatter (another program's lines before it, in
        # either rendering, decide nothing).
        if self.log_format != "dev":
            obj = _json_record(raw)
            if obj is not None:
                if str(obj.get("name", "")).startswith("livekit"):
                    self._found("json")
                return _iso_seconds(obj.get("timestamp")), obj["message"], obj
        if self.log_format != "json":
            dev = _dev_record(raw)
            if dev is not None:
                if dev[2].startswith("livekit"):
                    self._found("dev")
                message, extra = _split_dev(dev[3])
                return dev[0], message, extra
        return None

    def _meta(self, lineno: int, t: float, event: dict[str, Any]) -> Row:
        row: Row = (self.count, lineno, t, "meta", max(self._conn, 1), event, event["type"], event["type"])
        self.count += 1
        return row

    def _opened(self, lineno: int, t: float, url: str | None) -> Row:
        self._conn += 1
        self._created = False
        self._open = True
        event: dict[str, Any] = {"type": "connection.opened"}
        if url is not None:
            parts = url.split("://", 1)[-1]
            slash = parts.find("/")
            event["path"] = safe_path(parts[slash:] if slash >= 0 else "/")
        if self._conn > 1:
            event["replay_visible"] = False
        return self._meta(lineno, t, event)

    def _rows(self, lineno: int, t: float, message: str, extra: Any) -> Iterator[Row]:
        self.last_t = t
        if message.startswith(_CONNECTING):
            yield self._opened(lineno, t, message[len(_CONNECTING) :].strip())
            return
        if message.startswith(_ENDS):
            if self._open:
                self._open = False
                yield self._meta(lineno, t, {"type": "connection.closed"})
            return
        if message.startswith("reconnecting to OpenAI Realtime API"):
            text = "the client reconnects: its replay of the conversation is not in the log"
            yield self._meta(lineno, t, {"type": "note", "text": text})
            return
        if message not in (">>>", "<<<"):
            return  # `unhandled event:` and `failed to handle event` repeat a `<<<`; other records are not events
        event = extra.get("lk.pii.event") if isinstance(extra, dict) else None
        if not isinstance(event, dict):
            self._problem(lineno, 1, f"a `{message}` record without an `lk.pii.event` object; skipped")
            return
        raw_type = event.get("type")
        if type(raw_type) is not str or not raw_type:
            self._problem(lineno, 1, "event has no `type`; skipped")
            return
        direction: Direction = "client" if message == ">>>" else "server"
        etype = BETA_TO_GA.get(raw_type, raw_type)
        if direction == "server" and etype == "session.created" and (self._created or not self._open):
            yield self._opened(lineno, t, None)  # a new connection with no `connecting to` line (flag-less build)
        elif not self._open:
            yield self._opened(lineno, t, None)
        if etype == "session.created" and direction == "server":
            self._created = True
        if etype in _AUDIO_DELTAS and event.get("delta") == "...":
            event = {k: v for k, v in event.items() if k != "delta"}
        if side_of(etype) is None:
            self._problem(lineno, 1, f"unknown event type {printable(repr(raw_type), 60)}; kept, not interpreted")
        self.shapes["livekit-log"] = self.shapes.get("livekit-log", 0) + 1
        row: Row = (self.count, lineno, t, direction, self._conn, event, etype, raw_type)
        self.count += 1
        yield row


__all__ = ["RECORDER", "UNSEEN", "LogReader", "sniff", "utf16_codec"]
