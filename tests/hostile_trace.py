"""A small trace full of hostile text, for the report tests: markup, script end tags, Mermaid syntax, control
characters, bidi overrides and line separators, a credential and a long audio payload, in the places reports quote
(item text, error messages)."""

from __future__ import annotations

import re
from pathlib import Path

import orjson

SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
XSS = (
    "</script><script>document.body.setAttribute('data-pwned','1')</script>"
    "<img src=x onerror=\"document.body.setAttribute('data-pwned','2')\"></textarea><b>bold</b>"
)
#: Text that reads differently from how it is stored: a right-to-left override, a line separator, an isolate.
BIDI = "\u202eevil\u2028next line\u2066x\u2069\u009b2J"
ERROR_TEXT = (
    f"Tool call ID 'call_gone' not found </script><img src=x onerror=alert(1)>; #35; %%{{init}}%% \x1b[31m {SECRET}"
    f" {BIDI}"
)
AUDIO = "QUJD" * 4000


def write_hostile_trace(path: Path) -> Path:
    lines = [
        {"rtrace": 1, "client": "evil <b>client</b>", "versions": {"livekit-agents": "1.8.8"}, "api_key": SECRET},
        {"t": 0.0, "dir": "meta", "conn": 1, "event": {"type": "connection.opened", "path": "/v1/realtime?model=m"}},
        {"t": 0.001, "dir": "server", "conn": 1, "event": {"type": "session.created", "session": {}}},
        {
            "t": 0.01,
            "dir": "client",
            "conn": 1,
            "event": {
                "type": "conversation.item.create",
                "event_id": "evt_1",
                "item": {
                    "id": "item_x",
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": XSS}],
                },
            },
        },
        {
            "t": 0.06,
            "dir": "server",
            "conn": 1,
            "event": {
                "type": "conversation.item.added",
                "previous_item_id": None,
                "item": {
                    "id": "item_x",
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": XSS}],
                },
            },
        },
        {"t": 0.07, "dir": "client", "conn": 1, "event": {"type": "input_audio_buffer.append", "audio": AUDIO}},
        {
            "t": 0.08,
            "dir": "client",
            "conn": 1,
            "event": {
                "type": "conversation.item.create",
                "event_id": "evt_2",
                "previous_item_id": "item_x",
                "item": {"id": "item_out", "type": "function_call_output", "call_id": "call_gone", "output": XSS},
            },
        },
        {
            "t": 0.13,
            "dir": "server",
            "conn": 1,
            "event": {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "code": "invalid_tool_call_id",
                    "message": ERROR_TEXT,
                    "event_id": "evt_2",
                },
            },
        },
    ]
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return path


def outside_code(md: str) -> str:
    """The Markdown text outside fenced code blocks and inline code spans (CommonMark fences: N >= 3 backticks or
    tildes, closed by a line of at least as many)."""
    out, fence = [], ""
    for line in md.splitlines():
        stripped = line.lstrip()
        if fence:
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                fence = ""
            continue
        m = re.match(r"(`{3,}|~{3,})", stripped)
        if m:
            fence = m.group(1)
            continue
        out.append(re.sub(r"(`+).*?\1", "", line))
    return "\n".join(out)
