"""Making untrusted trace text safe to show: control characters and ANSI escapes made visible, long text cut.

Every renderer passes trace text through here (terminal) or through `html.escape` (HTML) before output.
"""

from __future__ import annotations

#: Default cut for one payload shown in a terminal (base64 audio is megabytes).
PREVIEW_LIMIT = 120


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
