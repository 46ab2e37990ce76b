"""Secrets: the one model of what a credential looks like, and how it is removed.

Every writer of a trace, a report or a log scrubs through here: the recorders (`record`, `serve --record`,
`replay`, the livekit integration: `redact_event`, `DeltaWindows` through `core.writer.TraceWriter`), `redact`
(`rtrace.transform.redact` builds the publishing rewrite on top), the reports and the problems (`scrub_text`), the
logs and messages of `record`, `serve` and the CLI (`scrub_text`), the paths a trace keeps (`safe_path`). Pure: no
files, no terminal.

The model, in the order it is applied:

* **Field names** (`is_secret_name`). A name is split into words (`openaiApiKey`, `x-api-key`, `bearer_token` ->
  `openai api key`, `x api key`, `bearer token`); it names a secret when its last word is `token`, `secret`,
  `password`, `passwd`, `passphrase`, `credential(s)`, `cookie`, `authorization`, `auth` or `apikey`, or its last
  two are `<api|private|secret|access|auth|client|ephemeral|encryption|signing|session|master> key`, or any word is
  `secret`, `password`, `passwd` or `credentials`. So `id_token`, `auth_token`, `private_key`, `credentials`,
  `client_secret` are secrets, and `max_tokens`, `input_token_details`, `author`, `key` (a keyboard key) are not.
  Every string under such a field is replaced (`[redacted]`), its shape kept (a `client_secret` keeps `expires_at`).
  A name can also be a key of an object: a key that is itself a secret (`{"sk-proj-...": 1}`) is scrubbed too.
* **Header shapes**: `[name, value]` pairs and HAR-style objects (`{"name": "Authorization", "value": ...}`, also
  with `key`/`header`/`field` for `name`) whose name is a secret name lose their value.
* **Value patterns**, in any string (`secret_spans`): OpenAI keys (`sk-`, `sk-proj-`, ... 8 characters on) and
  ephemeral keys (`ek_`, 4 characters on: short ones too); the browser key subprotocol
  (`openai-insecure-api-key.`); `Bearer` and `Basic` credentials (a token that looks like one: digits, punctuation,
  or base64 case); JWTs (`eyJ...`); AWS, GitHub, Slack, Google and Stripe key formats and PEM private key blocks;
  `NAME=value`, `NAME: value` and `"NAME": "value"` with a secret name (free text, close reasons, JSON fragments
  such as streamed tool arguments); secret query parameters (`api-key=`, `key=`, `token=`, `sig=`, ...); the user
  and password of a URL (`wss://user:pw@host`).
* **Encodings**. URL encoding: the patterns take `%2D`, `%5F`, `%20`, `+`, `%3A`, `%3D` where a key or a header
  has `-`, `_`, a space, `:` or `=`, and a string with `%XX` escapes is also decoded (twice, for double encoding):
  when the decoded text holds a secret, the string is replaced by its decoded, scrubbed form. JSON in strings: a
  string that parses as a JSON object or array (tool `arguments` and `output`) is scrubbed as JSON, by all of the
  above, and written back when something was removed. Base64: a string of 16 to 1024 base64 characters that holds
  the base64 form (at any of the three alignments) of `sk-`, `ek_`, `Bearer`, `{"`, `password`, `api_key`/`api-key`,
  `token` or `secret` is decoded, and replaced whole when the decoded text holds a secret. Longer runs of pure
  base64 (audio payloads, megabytes of them) are not decoded: audio is not text, decoding every payload would cost
  more than the analysis, and random bytes decode to noise that trips the patterns.
* **Streamed text** (`DeltaWindows`): a secret split across the deltas of one stream (the text, the transcript or
  the tool arguments of one item of one response, or one input transcription) is found in the stream's joined text,
  over a window of the last `WINDOW_CHARS` characters, and each delta that holds part of it is written masked
  (`*` for each character, byte for byte the length of the original, so a line already written can be rewritten in
  place). Limits: a secret longer than the window, or one whose start left the window, is not joined; a stream is
  only rewritten where its lines can be (a regular file: see `core.writer.TraceWriter`, `transform.redact`).

What is never touched: ids, types, numbers, booleans, and text that matches nothing above.

The hashing and URL modules are imported where they are used, and the value patterns are compiled at the first
text with a hint (`_patterns`): every `rtrace analyze` loads this module for `scrub_text` alone, and start-up time
is paid by every command.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from .trace import MAX_DEPTH, TOO_DEEP

#: What replaces a secret value.
REDACTED = "[redacted]"
#: What replaces each character of a secret in a streamed delta (repeated to keep the line's byte length).
MASK = "*"

# -- field names -------------------------------------------------------------------------------------------------

#: Last words that make a name a secret's (`access_token`, `client_secret`, `x-api-key` via `apikey`, ...).
_LAST_WORDS = frozenset(
    {
        "token",
        "secret",
        "password",
        "passwd",
        "passphrase",
        "credential",
        "credentials",
        "cookie",
        "authorization",
        "auth",
        "apikey",
        "signature",
        "secrets",
        "passwords",
    }
)
#: Words before a last `key` that make it a secret (`api key`, `private key`, ...).
_KEY_KINDS = frozenset(
    {"api", "private", "secret", "access", "auth", "client", "ephemeral", "encryption", "signing", "session", "master"}
)
#: Words that make a name a secret's wherever they stand (`password_hash`, `secret_value`).
_ANY_WORDS = frozenset({"secret", "secrets", "password", "passwords", "passwd", "credentials"})
#: Names that are secrets as they are (headers and the like the rules above would not catch).
SECRET_FIELDS = frozenset({"set-cookie", "x-api-key", "api-key", "apikey", "sig", "x-goog-api-key"})
#: Query parameters that carry a credential in a URL or path, besides those with a secret name.
SECRET_PARAMS = ("key", "sig", "code", "api-key", "api_key", "apikey", "token", "access_token", "client_secret")

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD_SPLIT = re.compile(r"[^a-z0-9]+")
_NAME_CACHE: dict[str, bool] = {}


def name_words(name: str) -> list[str]:
    """`openaiApiKey` -> [`openai`, `api`, `key`]; `X-API-Key` -> [`x`, `api`, `key`]."""
    return [w for w in _WORD_SPLIT.split(_CAMEL.sub(" ", name).lower()) if w]


def is_secret_name(name: str) -> bool:
    """Whether a field, header or parameter of this name holds a credential (the field-name model above)."""
    found = _NAME_CACHE.get(name)
    if found is not None:
        return found
    words = name_words(name)
    found = bool(
        name.lower() in SECRET_FIELDS
        or (words and words[-1] in _LAST_WORDS)
        or (len(words) >= 2 and words[-1] in ("key", "keys") and words[-2] in _KEY_KINDS)
        or any(w in _ANY_WORDS for w in words)
    )
    if len(_NAME_CACHE) > 8192:
        _NAME_CACHE.clear()
    _NAME_CACHE[name] = found
    return found


# -- value patterns ----------------------------------------------------------------------------------------------

# The regex form of the name model, for `NAME=value` in text: a word (no longer than 40 characters) ending in a
# secret word, and not followed by a letter (`tokens`, `author` are not secret names).
_TEXT_NAME = (
    r"(?<![A-Za-z0-9_\-.])[A-Za-z0-9_\-.]{0,40}?"
    r"(?:api[_\-. ]?key|apikey|(?:private|secret|access|auth|client|ephemeral|signing|encryption|master)[_\-. ]?key"
    r"|client[_\-. ]?secret|secret|password|passwd|passphrase|credentials?|token|authorization|auth|cookie)"
    r"(?![A-Za-z])"
)
_SEP = r"(?:\s*(?:=|:|%3[dDaA])\s*)"
_QUOTE = r"(?:\\?[\"'])"
_SCHEME = r"(?:(?:Bearer|Basic|Token)(?:\s+|%20|\+))?"


@functools.cache
def _patterns() -> tuple[re.Pattern[str], ...]:
    """The value patterns, compiled when a text is first hinted (`_HINT`): most runs never need them, and
    compiling them is most of what importing this module would cost (`rtrace analyze` always imports it)."""
    return (
        # The browser way to pass a key: a websocket subprotocol `openai-insecure-api-key.<key>`.
        re.compile(r"openai-insecure-api-key\.(?P<s>[^\s,;\"']+)", re.IGNORECASE),
        # OpenAI keys: sk-..., sk-proj-..., sk-svcacct-..., sk-admin-...; ephemeral client secrets ek_... (short too).
        re.compile(r"(?<![A-Za-z0-9_\-])sk(?:-|%2[dD])(?P<s>[A-Za-z0-9_\-]{8,}|(?:[A-Za-z0-9_\-]|%2[dD]|%5[fF]){8,})"),
        re.compile(r"(?<![A-Za-z0-9_\-])ek(?:_|%5[fF])(?P<s>[A-Za-z0-9_\-]{4,})"),
        # Authorization schemes (checked in `_plausible`: a word after `Bearer` in prose is not a token).
        re.compile(
            r"(?<![A-Za-z0-9])(?P<scheme>Bearer|Basic)(?:\s+|%20|\+)(?P<s>[A-Za-z0-9._~+/=\-]{8,})", re.IGNORECASE
        ),
        # JWTs (id_token, access tokens).
        re.compile(r"(?P<s>eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*)"),
        # Other vendors' key formats.
        re.compile(
            r"(?<![A-Za-z0-9])(?P<s>AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
            r"|xox[abposr]-[A-Za-z0-9\-]{10,}|AIza[0-9A-Za-z_\-]{30,}|[sr]k_live_[A-Za-z0-9]{16,})"
        ),
        re.compile(r"-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----(?P<s>[\s\S]{0,20000}?)-----END"),
        # NAME=value, NAME: value, "NAME": "value" (free text, JSON fragments, close reasons, headers as text).
        re.compile(_TEXT_NAME + _QUOTE + r"?" + _SEP + _QUOTE + r"(?P<s>(?:[^\"'\\]|\\.){1,2000})", re.IGNORECASE),
        re.compile(
            _TEXT_NAME + _QUOTE + r"?" + _SEP + r"(?![\"'\\{\[])(?P<s>" + _SCHEME + r"[^\s\"',;&}\]]+)", re.IGNORECASE
        ),
        re.compile(
            r"(?<![A-Za-z])(?:password|passphrase|api[ _\-]?key)\s+(?:is|was)\s+(?P<s>[^\s\"',;]+)", re.IGNORECASE
        ),
        # Secret query parameters.
        re.compile(
            r"[?&;](?:" + "|".join(re.escape(p) for p in SECRET_PARAMS) + r")=(?P<s>[^&#\s\"']+)", re.IGNORECASE
        ),
        # The user and password of a URL.
        re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{0,15}://(?P<s>[^\s/@?#\[\]\"']{1,500})@"),
    )


def _plausible(m: re.Match[str]) -> bool:
    """A Bearer or Basic match is a credential only when the token looks like one: `Bearer sk-...`, a JWT, a token
    with digits or punctuation; `Basic` with base64 of a whole length and mixed case, digits or padding."""
    scheme = m.groupdict().get("scheme")
    if scheme is None:
        return True
    token = m.group("s")
    if scheme.lower() == "bearer":
        return any(c.isdigit() or c in "._~+/=-" for c in token) or len(token) >= 24
    body = token[1:]
    mixed = any(c.isupper() for c in body) and any(c.islower() for c in body)
    return len(token) % 4 == 0 and (mixed or any(c.isdigit() or c in "+/=" for c in token))


# What must be in a string for any pattern (or the base64 rule) to match: one search, so most strings cost one scan.
_HINT_WORDS = (
    "sk-", "sk%2d", "ek_", "ek%5f", "bearer", "basic", "key", "token", "secret", "passw", "passphrase", "auth",
    "cookie", "credential", "://", "eyj", "akia", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat", "xox",
    "aiza", "_live_", "private", "sig=", "code=", "signature",
)  # fmt: skip
#: Words whose base64 forms, at each of the three alignments, mark a string worth decoding.
_B64_WORDS = (b"sk-", b"ek_", b"Bearer", b'{"', b"password", b"api_key", b"api-key", b"token", b"secret")


def _b64_fragments(word: bytes) -> set[str]:
    out = set()
    for pad in range(3):
        enc = base64.b64encode(b"\0" * pad + word).decode()
        # Characters that depend only on `word`: skip those mixed with the padding, and the last partial group.
        start = (pad * 8 + 5) // 6
        end = ((pad + len(word)) * 8) // 6
        frag = enc[start:end]
        if len(frag) >= 3:
            out.add(frag)
            out.add(frag.replace("+", "-").replace("/", "_"))
    return out


_B64_HINTS = sorted({f for w in _B64_WORDS for f in _b64_fragments(w)})


def _trie(words: list[str], *also: str) -> str:
    """One regex for a set of words, their common prefixes factored out (`re` tries each branch of an alternation
    at each position; a trie tries each first character once). `also`: other patterns, as more branches of the
    trie's root: one alternation searches twice as fast as the trie beside another branch (`(?:trie)|%..`)."""
    tree: dict[str, Any] = {}
    for word in words:
        node = tree
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def walk(node: dict[str, Any], also: tuple[str, ...] = ()) -> str:
        if "" in node and len(node) == 1 and not also:
            return ""
        branches = [*(re.escape(ch) + walk(child) for ch, child in sorted(node.items()) if ch), *also]
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return walk(tree, also)


# Searched in lower-cased text (one C call), so the patterns themselves need no IGNORECASE.
_HINT = re.compile(_trie(sorted(set(_HINT_WORDS)), r"%[0-9a-f]{2}"))
_B64_HINT = re.compile(_trie(_B64_HINTS))
_B64_CANDIDATE = re.compile(r"[A-Za-z0-9+/_\-]{16,1024}={0,2}")
_PAYLOAD = re.compile(r"[A-Za-z0-9+/]{1025,}={0,2}")
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
#: Byte-level hints for JSON text as it crosses the wire (`may_hold_secret`): the text hints, the base64 ones, and
#: the escapes a client may write a secret with (`\u0073k-`, `:\/\/`); searched in lower-cased bytes.
_RAW_HINT = re.compile(
    _trie(sorted({*_HINT_WORDS, *(f.lower() for f in _B64_HINTS)}), r"%[0-9a-f]{2}", r"\\u", r"\\/").encode()
)


#: The characters other than ASCII letters that `re.IGNORECASE` takes for an ASCII letter (long s, dotless i, dotted
#: I, the Kelvin sign): folded before the hints are searched, so `paſſword=...` is hinted as the patterns would match
#: it (tests/test_core_secrets.py checks every character of Unicode).
_FOLD = {"\u017f": "s", "\u0131": "i", "\u0130": "i", "\u212a": "k"}
_FOLD_BYTES = tuple((c.encode(), a.encode()) for c, a in _FOLD.items())


def _lowered(text: str) -> str:
    if not text.isascii():
        for c, a in _FOLD.items():
            text = text.replace(c, a)
    return text.lower()


#: The C scanner's screen (`_scan.c: hinted`), which answers as `_HINT` does on ASCII text; None without it (it is
#: optional, as the scanner is, and a build older than the source may lack it).
_fast_hinted: Callable[[str], bool | None] | None
try:
    from . import _scan

    _scan.set_hints(tuple(w.encode() for w in sorted(set(_HINT_WORDS))))
    _fast_hinted = _scan.hinted
except (ImportError, AttributeError):
    _fast_hinted = None


def _hinted(text: str) -> bool:
    """Whether `text` holds a hint of `_HINT_WORDS` (every match of every pattern does: the fast path's premise,
    checked by tests/test_core_secrets.py for each pattern)."""
    if _fast_hinted is not None:
        fast = _fast_hinted(text)
        if fast is not None:
            return fast
    return _HINT.search(_lowered(text)) is not None


def may_hold_secret(raw: bytes) -> bool:
    """Whether JSON text could hold anything `scrub_secrets` removes: a writer that already has an event's bytes
    scrubs only when this says so (no false negatives: every pattern, name and encoding needs one of its hints)."""
    if not raw.isascii():
        for c, a in _FOLD_BYTES:
            raw = raw.replace(c, a)
    return _RAW_HINT.search(raw.lower()) is not None


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    spans.sort()
    out: list[tuple[int, int]] = []
    for a, b in spans:
        if a >= b:
            continue
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def secret_spans(text: str) -> list[tuple[int, int]]:
    """Where the value patterns find secrets in `text`: sorted, merged (start, end) character spans. The name or
    prefix that gives a secret away (`sk-`, `Bearer `, `api_key=`) is outside the span and stays readable."""
    if not _hinted(text):
        return []
    spans = []
    for pattern in _patterns():
        for m in pattern.finditer(text):
            if _plausible(m):
                spans.append(m.span("s"))
    return _merge(spans)


def _replaced(text: str, spans: list[tuple[int, int]]) -> str:
    out, at = [], 0
    for a, b in spans:
        out.append(text[at:a])
        out.append(REDACTED)
        at = b
    out.append(text[at:])
    return "".join(out)


def _decoded_b64(text: str) -> str | None:
    """The text a base64 string encodes, when it is printable UTF-8."""
    padded = text + "=" * (-len(text) % 4)
    for decode in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            raw = decode(padded)
            decoded = raw.decode("utf-8")
        except (binascii.Error, ValueError, UnicodeDecodeError):
            continue
        if decoded and all(c.isprintable() or c in "\t\r\n" for c in decoded):
            return decoded
    return None


def scrub_text(text: str, depth: int = 0) -> str:
    """`text` with every secret the model finds replaced by `[redacted]`: value patterns, JSON in the string,
    URL-encoded and base64 forms. A text shorter than any secret, or without a hint of a pattern (nor, when it is
    JSON or base64 whole, of a base64 form), is returned as it is after one search (what most texts a report
    quotes take)."""
    if len(text) < 6 or (not _hinted(text) and not (_unwraps(text) and _B64_HINT.search(text))):
        return text
    return _scrub_text(text, depth)


def _json_like(stripped: str) -> bool:
    """Whether `_scrub_text` reads the (stripped) text as the JSON it may hold."""
    return stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]")


def _unwraps(text: str) -> bool:
    """Whether `text` is what `_scrub_text` looks inside of: JSON, or base64 whole. Without a hint of a value
    pattern, only such a text can hide a secret, and only behind a base64 hint (a base64 run inside prose is not
    decoded). Most report texts are prose: one cheap test here spares them the base64 search."""
    # A space is never in base64 whole (`_B64_CANDIDATE`): prose, most of what a report quotes, skips that match.
    return (" " not in text and _B64_CANDIDATE.fullmatch(text) is not None) or _json_like(text.strip())


def _scrub_text(text: str, depth: int) -> str:
    """`scrub_text` without its short-cut."""
    if _PAYLOAD.fullmatch(text):
        return text  # an audio payload: see the module's notes on base64
    stripped = text.strip()
    if _json_like(stripped) and depth < 8:
        parsed = _json_in(stripped)
        if parsed is not None:
            clean = scrub_secrets(parsed, 0, depth + 1)
            if clean != parsed:
                import orjson

                return orjson.dumps(clean).decode("utf-8")
            return text
    spans = secret_spans(text)
    out = _replaced(text, spans) if spans else text
    if _PERCENT.search(out) and depth < 8:
        import urllib.parse

        decoded = urllib.parse.unquote(out)
        decoded = urllib.parse.unquote(decoded) if _PERCENT.search(decoded) else decoded
        if decoded != out and secret_spans(decoded.replace("+", " ")):
            return scrub_text(decoded, depth + 1)
    if not spans and _B64_CANDIDATE.fullmatch(text) and _B64_HINT.search(text) and depth < 8:
        decoded_b64 = _decoded_b64(text)
        if decoded_b64 is not None and scrub_text(decoded_b64, depth + 1) != decoded_b64:
            return REDACTED
    return out


def _json_in(text: str) -> Any:
    import orjson

    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, (dict, list)) else None


def safe_path(path: str) -> str:
    """A request path with every secret query parameter removed (a secret name, or one of `SECRET_PARAMS`) and the
    rest scrubbed: what a trace may say about where a client connected."""
    import urllib.parse

    parts = urllib.parse.urlsplit(path)
    params = {p.lower() for p in SECRET_PARAMS}
    query = [
        (k, v)
        for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        if k.lower() not in params and not is_secret_name(k)
    ]
    out = parts.path
    if query:
        out += "?" + urllib.parse.urlencode(query)
    return scrub_text(out)


# -- JSON values --------------------------------------------------------------------------------------------------

# Deeper JSON is replaced by `trace.TOO_DEEP`: a subtree that is not scrubbed must not be passed on either.
#: Keys whose string names the header or field an object's `value` belongs to (HAR headers, form fields).
_NAME_KEYS = ("name", "key", "header", "field")
_KEY_CACHE: dict[str, str] = {}


def _secret_value(value: Any, depth: int = 0) -> Any:
    """A credential field's value: strings replaced, the shape kept (a `client_secret` keeps its `expires_at`)."""
    if depth > MAX_DEPTH:
        return TOO_DEEP
    if isinstance(value, str):
        return REDACTED if value else value
    if isinstance(value, dict):
        return {k: _secret_value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_secret_value(v, depth + 1) for v in value]
    return value


def _clean_key(key: str) -> str:
    found = _KEY_CACHE.get(key)
    if found is None:
        found = scrub_text(key)
        if len(_KEY_CACHE) > 8192:
            _KEY_CACHE.clear()
        _KEY_CACHE[key] = found
    return found


def _names_a_secret(obj: dict[str, Any]) -> bool:
    """A HAR-style header or field object (`{"name": "Authorization", "value": ...}`) whose name is a secret's."""
    if "value" not in obj:
        return False
    for k in _NAME_KEYS:
        name = obj.get(k)
        if isinstance(name, str) and is_secret_name(name):
            return True
    return False


def scrub_secrets(value: Any, depth: int = 0, nesting: int = 0) -> Any:
    """A copy of a JSON value with every secret removed (the model above: field names, header shapes, object keys,
    value patterns and encodings in every string). The rest (ids, types, numbers) is untouched; below `MAX_DEPTH`
    levels, `TOO_DEEP` (so the copy can always be written back as JSON). `nesting` counts JSON-in-string levels."""
    if isinstance(value, str):
        return scrub_text(value, nesting)
    if depth > MAX_DEPTH and isinstance(value, (dict, list)):
        return TOO_DEEP
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        har = _names_a_secret(value)
        for k, v in value.items():
            if is_secret_name(k) or (har and k == "value"):
                clean = _secret_value(v, depth + 1)
            else:
                clean = scrub_secrets(v, depth + 1, nesting)
            key = _clean_key(k) if isinstance(k, str) else k
            while key in out:
                key = f"{key}#"
            out[key] = clean
        return out
    if isinstance(value, list):
        if len(value) == 2 and isinstance(value[0], str) and is_secret_name(value[0]):
            return [value[0], _secret_value(value[1], depth + 1)]
        return [scrub_secrets(v, depth + 1, nesting) for v in value]
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
    import hashlib

    try:
        raw = base64.b64decode(payload, validate=False)
    except (binascii.Error, ValueError):
        raw = payload.encode("utf-8", "surrogatepass")
    obj[key] = ""
    obj.setdefault("rtrace_audio_bytes", len(raw))
    obj.setdefault("rtrace_audio_sha256", hashlib.sha256(raw).hexdigest())


def redact_event(event: dict[str, Any], keep_audio: bool = False) -> dict[str, Any]:
    """A copy of `event` safe to write: every secret of the model removed; audio payloads replaced by `""` plus
    `rtrace_audio_bytes` and `rtrace_audio_sha256` unless `keep_audio` (stripped first: audio is never scanned).
    Ids, types and text are kept. The event itself is not changed."""
    source = event
    if not keep_audio:
        key = AUDIO_FIELDS.get(str(event.get("type")))
        if key is not None and isinstance(event.get(key), str):
            source = dict(event)
            strip_audio(source, key)
    clean = scrub_secrets(source)
    return clean if isinstance(clean, dict) else {}


# -- streamed text --------------------------------------------------------------------------------------------------

#: The characters of a stream's joined text searched for a secret that spans its deltas.
WINDOW_CHARS = 2048
#: Streams a `DeltaWindows` keeps open at most (the oldest is dropped: a stream whose done was never seen).
MAX_STREAMS = 256
#: Streamed text: delta event type -> (the text field, the fields that name its stream, the stream's family).
STREAMS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "response.output_text.delta": ("delta", ("response_id", "item_id", "content_index"), "text"),
    "response.text.delta": ("delta", ("response_id", "item_id", "content_index"), "text"),
    "response.output_audio_transcript.delta": ("delta", ("response_id", "item_id", "content_index"), "transcript"),
    "response.audio_transcript.delta": ("delta", ("response_id", "item_id", "content_index"), "transcript"),
    "response.function_call_arguments.delta": ("delta", ("response_id", "item_id", "call_id"), "arguments"),
    "response.mcp_call_arguments.delta": ("delta", ("response_id", "item_id"), "mcp_arguments"),
    "conversation.item.input_audio_transcription.delta": ("delta", ("item_id", "content_index"), "input"),
}
#: The event that ends each family's stream (its window is dropped).
STREAM_ENDS: dict[str, str] = {
    "response.output_text.done": "text",
    "response.text.done": "text",
    "response.output_audio_transcript.done": "transcript",
    "response.audio_transcript.done": "transcript",
    "response.function_call_arguments.done": "arguments",
    "response.mcp_call_arguments.done": "mcp_arguments",
    "conversation.item.input_audio_transcription.completed": "input",
    "conversation.item.input_audio_transcription.failed": "input",
}

T = TypeVar("T")


def masked(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with each character inside `spans` replaced by `MASK`, once per byte the character takes in JSON
    (UTF-8, escapes counted), so the JSON of the event keeps its length exactly."""
    if not spans:
        return text
    import orjson

    out, at = [], 0
    for a, b in spans:
        out.append(text[at:a])
        out.append("".join(MASK * (len(orjson.dumps(c)) - 2) for c in text[a:b]))
        at = b
    out.append(text[at:])
    return "".join(out)


class _Delta(Generic[T]):
    __slots__ = ("masks", "start", "text", "token")

    def __init__(self, token: T, text: str, start: int) -> None:
        self.token = token
        self.text = text
        #: Offset of its first character in the stream.
        self.start = start
        self.masks: list[tuple[int, int]] = []


class _Stream(Generic[T]):
    __slots__ = ("deltas", "end")

    def __init__(self) -> None:
        self.deltas: list[_Delta[T]] = []
        #: Characters of the stream so far.
        self.end = 0


class DeltaWindows(Generic[T]):
    """Secrets split across the deltas of a stream: the stateful part of the model (see the module's notes).

    `delta(conn, event, token)` takes each delta as it arrives (before it is written) with the caller's handle of
    the line it becomes; it returns `(token, text)` for every delta of the stream, this one included, whose text
    must be written masked (or masked further): the caller writes this one so, and rewrites the earlier ones in
    place (the masked text has the byte length of the original). `end(conn, event)` and `close(conn)` drop the
    windows a done event or a closed connection ends. Memory: the last `WINDOW_CHARS` characters of each open
    stream."""

    def __init__(self, window: int = WINDOW_CHARS) -> None:
        self.window = window
        self._streams: dict[tuple[Any, ...], _Stream[T]] = {}

    @staticmethod
    def key(conn: int, event: dict[str, Any]) -> tuple[Any, ...] | None:
        spec = STREAMS.get(str(event.get("type")))
        if spec is None:
            return None
        _, names, family = spec
        return (conn, family, *(_hashable(event.get(n)) for n in names))

    def delta(self, conn: int, event: dict[str, Any], token: T) -> list[tuple[T, str]]:
        spec = STREAMS.get(str(event.get("type")))
        text = event.get(spec[0]) if spec is not None else None
        key = self.key(conn, event)
        if key is None or not isinstance(text, str):
            return []
        stream = self._streams.get(key)
        if stream is None:
            stream = self._streams[key] = _Stream()
            if len(self._streams) > MAX_STREAMS:
                del self._streams[next(iter(self._streams))]
        entry = _Delta(token, text, stream.end)
        stream.deltas.append(entry)
        stream.end += len(text)
        # Forget what fell out of the window (it stays as written).
        first = stream.end - self.window
        while len(stream.deltas) > 1 and stream.deltas[0].start + len(stream.deltas[0].text) <= first:
            stream.deltas.pop(0)
        base = stream.deltas[0].start
        joined = "".join(d.text for d in stream.deltas)
        spans = secret_spans(joined)
        at = entry.start - base
        own = secret_spans(text)
        if not own and scrub_text(text) != text:
            own = [(0, len(text))]  # a secret only an encoding shows (URL, base64, JSON): the whole delta
        spans += [(a + at, b + at) for a, b in own]
        if not spans:
            return []
        out = []
        for d in stream.deltas:
            lo, hi = d.start - base, d.start - base + len(d.text)
            mine = [(max(a, lo) - lo, min(b, hi) - lo) for a, b in spans if a < hi and b > lo]
            if not mine:
                continue
            merged = _merge(d.masks + mine)
            if merged != d.masks or d is entry:
                d.masks = merged
                out.append((d.token, masked(d.text, merged)))
        return out

    def end(self, conn: int, event: dict[str, Any]) -> None:
        """A done event ends the stream it names (its response, item and part, as the deltas named them)."""
        family = STREAM_ENDS.get(str(event.get("type")))
        if family is None:
            return
        names = next(spec[1] for spec in STREAMS.values() if spec[2] == family)
        self._streams.pop((conn, family, *(_hashable(event.get(n)) for n in names)), None)

    def close(self, conn: int) -> None:
        for key in [k for k in self._streams if k[0] == conn]:
            del self._streams[key]

    def open_streams(self) -> Iterator[tuple[Any, ...]]:
        return iter(self._streams)


def _hashable(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)
