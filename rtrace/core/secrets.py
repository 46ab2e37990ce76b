"""Secrets: what a credential looks like (field names, value patterns, query parameters) and how it is removed.

Every writer of a trace, a report or a log scrubs through here (`scrub_secrets`, `scrub_text`, `redact_event`,
`safe_path`); `rtrace.transform.redact` builds the publishing rewrite on top. Pure: no files, no terminal.

The hashing and URL modules are imported where they are used: every `rtrace analyze` loads this module for
`scrub_text` alone, and start-up time is paid by every command.
"""

from __future__ import annotations

import re
from typing import Any

from .trace import MAX_DEPTH, TOO_DEEP

#: What replaces a secret value.
REDACTED = "[redacted]"
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


#: Every match of one of `_PATTERNS` holds one of these once case-folded (`str.casefold`), so a text that holds
#: none is returned as it is: one fold and a few substring searches instead of a regex pass per pattern (what most
#: texts a report quotes take). A new pattern needs its trigger here: tests/test_core_secrets.py checks every
#: pattern's matches against this list.
TRIGGERS = ("sk-", "ek_", "=", "bearer", "basic", "openai-insecure-api-key.")


def scrub_text(text: str) -> str:
    """`text` with every key-like string, bearer token, key subprotocol and secret query parameter replaced."""
    folded = text.casefold()
    for trigger in TRIGGERS:
        if trigger in folded:
            break
    else:
        return text
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
