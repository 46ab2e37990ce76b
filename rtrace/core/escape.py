"""Making untrusted text safe to show: secrets scrubbed, control characters, ANSI escapes and bidi controls made
visible, long text cut.

Every renderer and every message passes untrusted text (trace text, paths, URLs, option values) through `shown`
(terminal, Markdown, messages), `json_visible` (the JSON it prints or quotes) or `html.escape` (HTML) before output.
"""

from __future__ import annotations

import re

from .secrets import scrub_text

#: What JSON writers leave raw but a terminal or an editor acts on: DEL, C1 controls (U+009B is a CSI), bidi
#: embeddings, overrides and isolates, zero-width and direction marks, line and paragraph separators, the BOM.
_INVISIBLE = re.compile("[\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")

#: Default cut for one payload shown in a terminal (base64 audio is megabytes).
PREVIEW_LIMIT = 120


def shown(text: str, limit: int = PREVIEW_LIMIT) -> str:
    """Untrusted text for people: secrets scrubbed (`core.secrets.scrub_text`), then `printable`."""
    return printable(scrub_text(text), limit)


def printable(text: str, limit: int = PREVIEW_LIMIT) -> str:
    """`text` with C0/C1 control characters (ESC included) shown as `\\xNN`, cut at `limit` with a count."""
    cut = text[:limit]
    if cut.isprintable():
        s = cut
    else:
        out = []
        for ch in cut:
            code = ord(ch)
            if code < 0x20 or code == 0x7F or 0x80 <= code < 0xA0:
                out.append(f"\\x{code:02x}")
            elif not ch.isprintable() and ch != " ":
                out.append(f"\\u{code:04x}")
            else:
                out.append(ch)
        s = "".join(out)
    if len(text) > limit:
        s += f"… (+{len(text) - limit} chars)"
    return s


def json_visible(data: bytes) -> bytes:
    """JSON text (UTF-8) with every character of `_INVISIBLE` written as its `\\uXXXX` escape: the same JSON value,
    shown as it is. (Such characters can only stand inside JSON strings, where the escape means the same.)"""
    text = data.decode("utf-8")
    if _INVISIBLE.search(text) is None:
        return data
    return _INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")
