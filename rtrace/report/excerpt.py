"""Raw trace lines for reports: re-read by line number, payloads cut, secrets redacted.

Reports quote the lines that prove a finding; a quoted line is parsed, cut (base64 audio, long strings) and
scrubbed of credentials before it leaves this module. It never returns a line it could not make safe.
"""

from __future__ import annotations

import bisect
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from ..core import secrets as redact
from ..core.escape import json_visible
from ..core.loader import UnreadableInput, open_trace

#: Strings longer than this are cut (base64 audio deltas are kilobytes).
STRING_LIMIT = 160
#: Keys whose value is a payload, never worth quoting in full.
PAYLOAD_KEYS = frozenset({"audio", "delta", "data", "image_url", "file_data"})
PAYLOAD_LIMIT = 24


def scrub_text(text: str) -> str:
    """`text` with anything that looks like a credential replaced (the patterns of `rtrace.core.secrets`)."""
    return redact.scrub_text(text)


def _cut(value: str, limit: int) -> str:
    if len(value) <= limit:
        return value
    return f"{value[:limit]}…(+{len(value) - limit} chars)"


def _cut_all(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _cut_all(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut_all(v, key) for v in value]
    if isinstance(value, str):
        return _cut(value, PAYLOAD_LIMIT if key in PAYLOAD_KEYS else STRING_LIMIT)
    return value


def scrub(value: Any) -> Any:
    """A JSON value with secrets redacted (`core.secrets.scrub_secrets`, the one model) and long strings cut."""
    return _cut_all(redact.scrub_secrets(value))


def quote_line(raw: bytes) -> str:
    """One trace line made safe to quote: compact JSON, payloads cut, secrets redacted."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        text = raw.decode("utf-8", errors="replace")
        return _cut(scrub_text(text), STRING_LIMIT * 2)
    return json_visible(orjson.dumps(scrub(obj))).decode("utf-8")


def read_lines(
    path: str | os.PathLike[str], lines: Iterable[int], marks: Sequence[tuple[int, int]] = ()
) -> dict[int, str]:
    """The quoted text of the given 1-based lines of a file ({} when it cannot be read, e.g. stdin). `marks`, where
    some lines start in the file as its reader found them (`TraceReader.marks`, `TraceReport.line_marks`): each
    line is read from the mark before it, not from the start of the file (a trace read once, not twice)."""
    wanted = sorted(set(lines))
    found: dict[int, str] = {}
    if not wanted or os.fspath(path) in ("-", "<stdin>"):
        return found
    try:
        with open_trace(path) as fp:
            at = 1  # the line `fp` is at
            for lineno in wanted:
                k = bisect.bisect_right(marks, (lineno, sys.maxsize)) - 1
                if k >= 0 and marks[k][0] > at:
                    fp.seek(marks[k][1])
                    at = marks[k][0]
                while at < lineno and fp.readline():
                    at += 1
                raw = fp.readline() if at == lineno else b""
                if not raw:
                    break
                found[lineno] = quote_line(raw.rstrip(b"\r\n").removeprefix(b"\xef\xbb\xbf"))
                at += 1
    except (OSError, UnreadableInput):
        return found
    return found
    last = max(wanted)
    try:
        with open_trace(path) as fp:
            for lineno, raw in enumerate(fp, start=1):
                if lineno in wanted:
                    found[lineno] = quote_line(raw.rstrip(b"\r\n").removeprefix(b"\xef\xbb\xbf"))
                if lineno >= last:
                    break
    except (OSError, UnreadableInput):
        return found
    return found
