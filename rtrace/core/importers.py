"""Other tools' captures as native traces: HAR files with `_webSocketMessages` (browser devtools, mitmproxy), JSON-array
exports of openai-realtime-api-beta / realtime-console logs, mitmproxy flow dumps (only if mitmproxy is installed),
pydantic-ai's websocket cassettes (YAML, only if PyYAML is installed: `cassette_records`), and livekit-agents logs
written with `LK_OPENAI_DEBUG=1` (`core.livekit_log`, read in place: `reader`). Each may be compressed
(`loader.compression_of`). What a capture holds that a trace cannot keep is a `note` in the trace where it was.

Owns format detection and the conversion to native records (`t`, `dir`, `conn`, `event`): `records` gives the
events as captured, `convert` writes them with every secret removed (`core.writer.TraceWriter` with
`core.secrets.redact_event`, secrets split across streamed deltas included). Line-by-line shapes the loader already
reads (native, bare events, `{time, source, event}`) are passed through it. It never analyzes and prints nothing.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import io
import os
from collections.abc import Iterator
from typing import IO, Any

import orjson

from . import livekit_log
from .loader import Region, TraceReader, UnreadableInput, open_input, open_trace, skip_space, skip_value
from .secrets import redact_event, safe_path
from .trace import Header
from .writer import TraceWriter

#: Largest HAR / JSON-array file read whole (these formats cannot be streamed line by line).
MAX_DOCUMENT_BYTES = 1 << 30
FORMATS = ("native", "har", "json-array", "mitmproxy", "cassette", "livekit-log")
#: How much of the start of an input `detect` looks at (decompressed).
SNIFF_BYTES = 1 << 20  # a log may start with a long banner or a stack trace before its first session


class ImportFailed(UnreadableInput):
    """The input looked like a known capture format but could not be converted."""


def detect(path: str) -> str:
    """`har`, `json-array`, `mitmproxy`, `cassette`, `livekit-log` or `native` (anything the loader reads line by
    line)."""
    lower = path.lower()
    if lower.endswith(".har"):
        return "har"
    if lower.endswith((".yaml", ".yml", ".yaml.gz", ".yml.gz")):
        return "cassette"
    if lower.endswith((".mitm", ".flow", ".flows")):
        return "mitmproxy"
    if path == "-" or not os.path.isfile(path):
        return "native"  # a stream cannot be sniffed and read again: the loader reads it (or says why not)
    try:
        with open_trace(path) as f:
            head = f.read(SNIFF_BYTES)
            if livekit_log.utf16_codec(head) is not None:  # two bytes a character: as much text as UTF-8 gives
                head += f.read(SNIFF_BYTES)
    except (OSError, UnreadableInput):
        return "native"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"["):
        return "json-array"
    if text.startswith(b"{") and b'"log"' in text[:200] and b"\n{" not in text[:4096]:
        return "har"
    if livekit_log.sniff(text) is not None:
        return "livekit-log"
    if text.startswith((b"version:", b"interactions:")) and b"interactions:" in text[:4096]:
        return "cassette"
    return "native"


def reader(path: str, **kw: Any) -> TraceReader | None:
    """A reader of `path` in place (its own line numbers) when it is a format read that way (a livekit-agents
    log, a JSON array); None for the others (`native_path` converts them)."""
    if path == "-":
        return None
    kind = detect(path)
    if kind == "livekit-log":
        return livekit_log.LogReader.open(path, **kw)
    if kind == "json-array":
        return ArrayReader(path, **kw)
    return None


def _document_bytes(path: str, kind: str = "JSON") -> bytes:
    """A whole document (JSON or YAML) read to `MAX_DOCUMENT_BYTES`, without a UTF-8 BOM."""
    try:
        with open_trace(path) as f:
            data = f.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as e:
        raise UnreadableInput(f"{path}: {e.strerror or e}") from None
    if len(data) > MAX_DOCUMENT_BYTES:
        raise ImportFailed(f"{path}: over the {MAX_DOCUMENT_BYTES:,}-byte limit for a {kind} document")
    return data.removeprefix(b"\xef\xbb\xbf")


def _parsed(data: bytes, path: str) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise ImportFailed(f"{path}: not valid JSON ({str(e).split(':')[0]})") from None


def _read_document(path: str) -> Any:
    return _parsed(_document_bytes(path), path)


def _event_of(data: Any) -> dict[str, Any] | str:
    """A websocket text payload as an event, or why not."""
    if not isinstance(data, str):
        return "payload is not text"
    try:
        event = orjson.loads(data)
    except orjson.JSONDecodeError:
        return "payload is not JSON"
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        return "payload is not an event object"
    return event


def _path_of(url: Any) -> str:
    import urllib.parse  # here: `rtrace analyze` of a native trace loads this module and needs none of it

    parts = urllib.parse.urlsplit(url if isinstance(url, str) else "")
    return safe_path(parts.path + (f"?{parts.query}" if parts.query else ""))


def har_records(doc: Any, source: str = "<har>") -> Iterator[dict[str, Any]]:
    """Native records from a HAR document: each entry with `_webSocketMessages` is one connection."""
    entries = doc.get("log", {}).get("entries") if isinstance(doc, dict) and isinstance(doc.get("log"), dict) else None
    if not isinstance(entries, list):
        raise ImportFailed(f"{source}: not a HAR file (no log.entries)")
    conns = [e for e in entries if isinstance(e, dict) and isinstance(e.get("_webSocketMessages"), list)]
    if not conns:
        raise ImportFailed(f"{source}: the HAR file has no websocket messages (_webSocketMessages)")
    rows: list[tuple[float, int, int, dict[str, Any]]] = []
    t0: float | None = None
    for n, entry in enumerate(conns, 1):
        messages = [m for m in entry["_webSocketMessages"] if isinstance(m, dict)]
        times = [float(m["time"]) for m in messages if isinstance(m.get("time"), (int, float))]
        first = min(times) if times else 0.0
        t0 = first if t0 is None else min(t0, first)
        raw_request = entry.get("request")
        request: dict[str, Any] = raw_request if isinstance(raw_request, dict) else {}
        rows.append(
            (first, n, 0, {"dir": "meta", "event": {"type": "connection.opened", "path": _path_of(request.get("url"))}})
        )
        last = first
        for k, m in enumerate(messages, 1):
            t = float(m["time"]) if isinstance(m.get("time"), (int, float)) else last
            last = t
            kind = m.get("type")
            direction = {"send": "client", "receive": "server"}.get(str(kind))
            if direction is None:
                continue
            if m.get("opcode", 1) != 1:
                note = f"{direction} sent a binary frame (opcode {m.get('opcode')}); not converted"
                rows.append((t, n, k, {"dir": "meta", "event": {"type": "note", "text": note}}))
                continue
            event = _event_of(m.get("data"))
            if isinstance(event, str):
                rows.append(
                    (t, n, k, {"dir": "meta", "event": {"type": "note", "text": f"{direction} frame: {event}"}})
                )
                continue
            rows.append((t, n, k, {"dir": direction, "event": event}))
        rows.append((last, n, len(messages) + 1, {"dir": "meta", "event": {"type": "connection.closed"}}))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    base = t0 or 0.0
    for t, n, _, row in rows:
        yield {"t": round(max(0.0, t - base), 6), "dir": row["dir"], "conn": n, "event": row["event"]}


def _via_loader(stream: IO[bytes], name: str) -> Iterator[dict[str, Any]]:
    reader = TraceReader(stream, name)
    for rec in reader:
        yield {"t": rec.t, "dir": rec.dir, "conn": rec.conn, "event": rec.event}


def array_records(doc: Any, source: str = "<json>") -> Iterator[dict[str, Any]]:
    """A JSON array of log entries (`{time, source, event}`, native lines or bare events), via the loader."""
    if not isinstance(doc, list):
        raise ImportFailed(f"{source}: expected a JSON array")
    lines = b"".join(orjson.dumps(obj) + b"\n" for obj in doc)
    yield from _via_loader(io.BytesIO(lines), source)


class ArrayReader(TraceReader):
    """A JSON array of log entries (`{time, source, event}`, native lines or bare events) read in place: each element
    is read as the loader reads a line, and numbered by the line of the file where it starts, so findings and
    problems point into the user's file (a problem of an element at its line and column there), not into a
    conversion. The document is read whole (`MAX_DOCUMENT_BYTES` at most): the format cannot be streamed."""

    def __init__(self, path: str, **kw: Any) -> None:
        data = _document_bytes(path)
        if not isinstance(_parsed(data, path), list):
            raise ImportFailed(f"{path}: expected a JSON array")
        super().__init__(io.BytesIO(b""), path, **kw)
        self.header = Header(1, {"source_format": "json-array"})
        self._text = data.decode("utf-8", "replace")
        self._newlines: list[int] = [i for i, c in enumerate(self._text) if c == "\n"]
        self._start = 0  # where the element being read starts in `_text`
        self._line = 1  # and its line

    def position(self, at: int) -> tuple[int, int]:
        """The 1-based line and column of the character at offset `at` of the document."""
        line = bisect.bisect_left(self._newlines, at)
        return line + 1, at - (self._newlines[line - 1] if line else -1)

    def _blocks(self, regions: bool = False) -> Iterator[tuple[int, list[bytes | int] | Region, bool]]:
        text = self._text
        i = skip_space(text, 0) + 1  # past the `[` (the document is a JSON array)
        while True:
            i = skip_space(text, i)
            if text[i] == ",":
                i = skip_space(text, i + 1)
            if text[i] == "]":
                return
            end = skip_value(text, i)
            self._start = i
            self._line = self.lines = self.position(i)[0]
            raw = text[i:end].encode()
            yield self._line, [raw if len(raw) <= self._max else len(raw)], True
            i = end

    def _problem(self, line: int, col: int, message: str, excerpt: str = "") -> None:
        if line == self._line:  # a problem of the element being read, at a column of its text: where in the file
            line, col = self.position(self._start + max(col, 1) - 1)
        super()._problem(line, col, message, excerpt)


def mitmproxy_records(path: str) -> Iterator[dict[str, Any]]:
    """Websocket flows of a mitmproxy dump (`mitmdump -w`). Needs mitmproxy installed."""
    try:
        from mitmproxy import io as mitm_io
    except ImportError:
        raise ImportFailed(
            f"{path}: reading mitmproxy flow dumps needs mitmproxy (pip install 'rtrace-cli[mitmproxy]')"
        ) from None
    rows: list[tuple[float, int, int, dict[str, Any]]] = []
    try:
        with open_input(path) as f:
            flows = [fl for fl in mitm_io.FlowReader(f).stream() if getattr(fl, "websocket", None) is not None]
    except OSError as e:
        raise UnreadableInput(f"{path}: {e.strerror or e}") from None
    except Exception as e:  # mitmproxy raises its own FlowReadException on a bad file
        raise ImportFailed(f"{path}: not a mitmproxy flow dump ({type(e).__name__})") from None
    for n, flow in enumerate(flows, 1):
        stamps = [float(m.timestamp) for m in flow.websocket.messages]
        start = float(getattr(flow.request, "timestamp_start", 0.0) or 0.0)
        start = min([start, *stamps]) if stamps else start
        rows.append(
            (start, n, 0, {"dir": "meta", "event": {"type": "connection.opened", "path": _path_of(flow.request.url)}})
        )
        last = start
        for k, msg in enumerate(flow.websocket.messages, 1):
            last = float(msg.timestamp)
            direction = "client" if msg.from_client else "server"
            event = _event_of(msg.text) if msg.is_text else "payload is binary"
            if isinstance(event, str):
                rows.append(
                    (last, n, k, {"dir": "meta", "event": {"type": "note", "text": f"{direction} frame: {event}"}})
                )
            else:
                rows.append((last, n, k, {"dir": direction, "event": event}))
        closed: dict[str, Any] = {"type": "connection.closed"}
        if flow.websocket.close_code is not None:
            closed["code"] = int(flow.websocket.close_code)
        rows.append((last, n, 1 << 30, {"dir": "meta", "event": closed}))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    base = rows[0][0] if rows else 0.0
    for t, n, _, row in rows:
        yield {"t": round(max(0.0, t - base), 6), "dir": row["dir"], "conn": n, "event": row["event"]}


#: A cassette's directions, as rtrace names them.
_CASSETTE_DIRS = {"sent": "client", "received": "server"}


def _read_yaml(path: str) -> Any:
    try:
        import yaml
    except ImportError:
        raise ImportFailed(
            f"{path}: reading pydantic-ai websocket cassettes (YAML) needs PyYAML (pip install 'rtrace-cli[yaml]')"
        ) from None
    data = _document_bytes(path, "YAML")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # never the full loader: a cassette is data
    try:
        return yaml.load(data.decode("utf-8", "replace"), Loader=loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ImportFailed(f"{path}: not valid YAML{where}") from None


def cassette_records(doc: Any, source: str = "<cassette>") -> Iterator[dict[str, Any]]:
    """Native records from a pydantic-ai websocket cassette (`version`, `interactions`: each a frame with `kind`
    `message`, `direction` `sent` or `received`, `data` the decoded JSON, and `at` seconds when recorded). One
    cassette is one connection. What is not an event (another kind of interaction, a payload that is no event
    object, an unknown direction) is a note where it was; `at` is kept, and a frame without it keeps the time of
    the one before."""
    interactions = doc.get("interactions") if isinstance(doc, dict) else None
    if not isinstance(interactions, list):
        raise ImportFailed(f"{source}: not a websocket cassette (no interactions list)")
    t = 0.0
    for n, inter in enumerate(interactions, 1):
        if not isinstance(inter, dict):
            yield {"t": t, "dir": "meta", "conn": 1, "event": _note(f"interaction {n} is not a mapping; not converted")}
            continue
        at = inter.get("at")
        if isinstance(at, int | float) and not isinstance(at, bool) and at >= 0:
            t = float(at)
        kind = inter.get("kind", "message")
        direction = _CASSETTE_DIRS.get(str(inter.get("direction")))
        data = inter.get("data")
        if kind != "message":
            text = f"interaction {n}: a {str(kind)[:40]!r} frame; not converted"
            yield {"t": t, "dir": "meta", "conn": 1, "event": _note(text)}
        elif direction is None:
            text = f"interaction {n}: direction {str(inter.get('direction'))[:40]!r} is neither sent nor received"
            yield {"t": t, "dir": "meta", "conn": 1, "event": _note(f"{text}; not converted")}
        elif not isinstance(data, dict) or not isinstance(data.get("type"), str):
            event = _event_of(data) if isinstance(data, str) else "payload is not an event object"
            if isinstance(event, dict):  # a frame kept as its JSON text
                yield {"t": t, "dir": direction, "conn": 1, "event": event}
            else:
                yield {"t": t, "dir": "meta", "conn": 1, "event": _note(f"interaction {n} ({direction}): {event}")}
        else:
            yield {"t": t, "dir": direction, "conn": 1, "event": data}


def _note(text: str) -> dict[str, Any]:
    return {"type": "note", "text": text}


def records(path: str, kind: str | None = None) -> Iterator[dict[str, Any]]:
    """Native records of any supported input, as captured (secrets in: `convert` removes them)."""
    kind = kind or detect(path)
    if kind == "har":
        yield from har_records(_read_document(path), path)
    elif kind == "json-array":
        yield from array_records(_read_document(path), path)
    elif kind == "mitmproxy":
        yield from mitmproxy_records(path)
    elif kind == "cassette":
        yield from cassette_records(_read_yaml(path), path)
    elif kind == "livekit-log":
        with livekit_log.LogReader.open(path) as log:
            for rec in log:
                yield {"t": rec.t, "dir": rec.dir, "conn": rec.conn, "event": rec.event}
    else:
        with TraceReader.open(path) as reader:
            for rec in reader:
                yield {"t": rec.t, "dir": rec.dir, "conn": rec.conn, "event": rec.event}
        if reader.unusable is not None:
            raise UnreadableInput(f"{path}: {reader.unusable}")


def _write_failed(reason: str, lines: int) -> None:
    raise OSError(f"{reason} (after line {lines})")


def convert(src: str, dst: IO[bytes], kind: str | None = None, lost: list[str] | None = None) -> int:
    """Write `src` as a native trace (with a header naming its origin) to `dst`, secrets removed (audio kept);
    the number of records written. What could not be kept (each note the conversion wrote) is appended to `lost`.
    `dst` should be seekable: a secret split across streamed deltas is masked in the lines already written."""
    kind = kind or detect(src)
    header: dict[str, Any] = {"recorder": "rtrace convert", "source_format": kind}
    if kind == "livekit-log":
        header["unseen"] = sorted(livekit_log.UNSEEN)
    writer = TraceWriter(dst, header, lambda: 0.0, _write_failed, functools.partial(redact_event, keep_audio=True))
    count = 0
    for rec in records(src, kind):
        writer.write_at(rec["t"], rec["dir"], rec["conn"], rec["event"])
        count += 1
        if lost is not None and rec["dir"] == "meta" and rec["event"].get("type") == "note":
            lost.append(str(rec["event"].get("text")))
    dst.flush()
    return count


@contextlib.contextmanager
def native_path(path: str) -> Iterator[str]:
    """`path` itself when the loader reads it; otherwise a temporary native conversion, removed afterwards."""
    if detect(path) in ("native", "livekit-log"):  # a log is read in place (`reader`)
        yield path
        return
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix="rtrace-import-", suffix=".jsonl")
    try:
        with os.fdopen(fd, "wb") as out:
            convert(path, out)
        yield tmp
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


__all__ = [
    "FORMATS",
    "ArrayReader",
    "ImportFailed",
    "cassette_records",
    "convert",
    "detect",
    "har_records",
    "native_path",
    "reader",
    "records",
]
