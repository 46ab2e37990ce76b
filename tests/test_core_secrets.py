"""Secret scrubbing (`rtrace.core.secrets`): credentials by field name and by pattern, audio stripped to counts,
paths and URLs without their secret parameters; ids, types and the input itself untouched."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rtrace.core import secrets
from rtrace.core.secrets import redact_event, safe_path, scrub_secrets, scrub_text

KEY = "sk-proj-TESTKEY0123456789abcdefSECRET"
EPHEMERAL = "ek_68c1ephemeralSECRET0123456789"


def test_redact_event_audio_and_secrets() -> None:
    pcm = bytes(range(256)) * 10
    payload = base64.b64encode(pcm).decode()
    ev = redact_event({"type": "input_audio_buffer.append", "audio": payload, "event_id": "e1"})
    assert ev["audio"] == "" and ev["rtrace_audio_bytes"] == 2560 and len(ev["rtrace_audio_sha256"]) == 64
    assert ev["event_id"] == "e1"
    delta = redact_event({"type": "response.output_audio.delta", "delta": payload, "item_id": "i"})
    assert delta["delta"] == "" and delta["rtrace_audio_bytes"] == 2560
    kept = redact_event({"type": "response.audio.delta", "delta": payload}, keep_audio=True)
    assert kept["delta"] == payload
    secret = {"type": "session.created", "session": {"client_secret": {"value": EPHEMERAL, "expires_at": 5}}}
    clean = redact_event(secret)
    assert EPHEMERAL not in json.dumps(clean) and clean["session"]["client_secret"]["expires_at"] == 5
    assert EPHEMERAL not in json.dumps(redact_event({"type": "x", "text": f"use {EPHEMERAL}"}))
    original = {"type": "input_audio_buffer.append", "audio": payload}
    redact_event(original)
    assert original["audio"] == payload  # the forwarded frame is never touched


def test_safe_path_drops_the_keys_a_client_puts_in_its_path() -> None:
    assert safe_path(f"/v1/realtime?model=m&api-key={KEY}&token=x&client_secret=y") == "/v1/realtime?model=m"


def test_safe_path_removes_keys() -> None:
    assert safe_path("/v1/realtime?model=m&api_key=sk-1&token=t") == "/v1/realtime?model=m"
    assert safe_path("/v1/realtime") == "/v1/realtime"


def test_ids_and_types_are_not_mistaken_for_keys() -> None:
    event = {"type": "response.done", "event_id": "event_desk-abcdefghijkl", "response": {"id": "resp_week_abcdefghij"}}
    assert scrub_secrets(event) == event
    assert scrub_text("task-1234567890 and desk-1234567890") == "task-1234567890 and desk-1234567890"


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(event=st.dictionaries(st.text(max_size=8), _json, max_size=5), where=st.integers(0, 50))
def test_redact_event_never_keeps_a_planted_key(event: dict[str, Any], where: int) -> None:
    """A key planted in any string of any event (or as a credential field) is gone; the input is untouched."""
    planted = dict(event)
    strings = [k for k, v in planted.items() if isinstance(v, str)]
    if strings:
        k = strings[where % len(strings)]
        planted[k] = planted[k] + f" {KEY} "
    planted["client_secret"] = {"value": EPHEMERAL}
    before = json.dumps(planted, sort_keys=True)
    clean = redact_event(planted)
    assert KEY not in json.dumps(clean) and EPHEMERAL not in json.dumps(clean)
    assert json.dumps(planted, sort_keys=True) == before


# -- the model, class by class (`make harden` class 4) -------------------------------------------------------------

from rtrace.core.secrets import (  # noqa: E402
    MASK,
    REDACTED,
    DeltaWindows,
    is_secret_name,
    masked,
    may_hold_secret,
    secret_spans,
)


def test_field_names_by_their_words() -> None:
    secret = [
        "authorization", "Authorization", "api_key", "api-key", "apiKey", "openaiApiKey", "x-api-key", "bearer_token",
        "auth_token", "id_token", "access_token", "refresh_token", "private_key", "client_secret", "credentials",
        "password", "userPassword", "Set-Cookie", "secret_value", "ephemeral_key", "x_auth", "api_keys",
    ]  # fmt: skip
    plain = [
        "max_tokens", "max_output_tokens", "input_token_details", "cached_tokens", "total_tokens", "token_type",
        "author", "key", "keys", "keyboard", "monkey", "type", "id", "event_id", "oauth", "tokens", "name", "value",
    ]  # fmt: skip
    assert [n for n in secret if not is_secret_name(n)] == []
    assert [n for n in plain if is_secret_name(n)] == []


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        ("Bearer sk-proj-abcdefgh12345", "abcdefgh12345"),
        ("Authorization%3A%20Bearer%20abcdef123456789", "abcdef123456789"),
        ("my api-key: K1234567abcd", "K1234567abcd"),
        ("password=hunter2&x=1", "hunter2"),
        ("my password is hunter2", "hunter2"),
        ("bad api-key=SECRETV", "SECRETV"),
        ("sk%2Dproj%2Dabcdefghijkl", "abcdefghijkl"),
        ("%73%6B%2D%70%72%6F%6A%2Dabcdefghijk", "abcdefghijk"),
        ("wss://user:pw123456@host/v1", "pw123456"),
        ("wss://sk-abc@host/v1", "sk-abc"),
        ('{"api_key": "abc123", "password": "pw", "token": "tok"}', "abc123"),
        ("ek_ab12", "ab12"),
        ("Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abc", "eyJzdWIiOiIxMjM0NTY3ODkwIn0"),
        ("AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"),
        ("c2stcHJvai1hYmNkZWZnaGlqa2xtbm9w", "c2stcHJvai1hYmNkZWZnaGlqa2xtbm9w"),
        ("openaiApiKey=xyz987", "xyz987"),
        ("?model=m&key=abcdef", "abcdef"),
    ],
)
def test_value_patterns_and_encodings(text: str, gone: str) -> None:
    assert gone not in scrub_text(text), scrub_text(text)


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens: 100",
        "input_tokens=5",
        "Basic information here",
        "a bearer of bad news",
        "author: Jane",
        "task-1234567890 and desk-1234567890",
        "the keyboard key is Enter",
        "https://example.com/docs?model=gpt-realtime",
        "gpt%2Drealtime",
        "item_abcdefghijklmnop",
        "QUJD" * 400,
    ],
)
def test_plain_text_is_left_alone(text: str) -> None:
    assert scrub_text(text) == text


def test_header_shapes_object_keys_and_json_in_strings() -> None:
    value = {
        "headers": [{"name": "Authorization", "value": "opaque1"}, {"name": "Accept", "value": "json"}],
        "pairs": [["api-key", "opaque2"]],
        "sk-proj-abcdefghijkl": 1,
        "arguments": '{"city": "Paris", "password": "opaque3", "nested": "{\\"token\\": \\"opaque4\\"}"}',
        "client_secret": {"value": "opaque5", "expires_at": 7},
    }
    clean = scrub_secrets(value)
    text = json.dumps(clean)
    assert all(f"opaque{k}" not in text for k in range(1, 6)) and "abcdefghijkl" not in text
    assert clean["headers"][1] == {"name": "Accept", "value": "json"} and clean["client_secret"]["expires_at"] == 7
    assert json.loads(clean["arguments"])["city"] == "Paris"


def test_may_hold_secret_never_misses_what_scrub_secrets_removes() -> None:
    import orjson

    from .secret_corpus import PLANTS

    for plant in PLANTS:
        for _, event in plant.lines:
            if scrub_secrets(event) != event:
                assert may_hold_secret(orjson.dumps(event)), plant.name
    escaped = b'{"type":"x","text":"\\u0073k-proj-abcdefghijklmnop"}'
    assert may_hold_secret(escaped) and scrub_secrets(json.loads(escaped)) != json.loads(escaped)
    assert not may_hold_secret(b'{"type":"response.output_text.delta","delta":"Hello there"}')


@given(st.text(), st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=4))
def test_masked_text_keeps_the_json_length(text: str, spans: list[tuple[int, int]]) -> None:
    import orjson

    spans = sorted((min(a, b), max(a, b)) for a, b in spans if min(a, b) < len(text))
    merged: list[tuple[int, int]] = []
    for a, b in spans:
        b = min(b, len(text))
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        elif a < b:
            merged.append((a, b))
    assert len(orjson.dumps(masked(text, merged))) == len(orjson.dumps(text))


def _delta(text: str, item: str = "i") -> dict[str, Any]:
    ids = {"response_id": "r", "item_id": item, "content_index": 0}
    return {"type": "response.output_text.delta", **ids, "delta": text}


def test_delta_windows_mask_a_secret_across_deltas_and_say_which_to_rewrite() -> None:
    key = "sk-proj-ABCDEFGHIJKLMNOPQRSTUV0123"
    pieces = ["my key is ", key[:5], key[5:16], key[16:], " ok"]
    windows: DeltaWindows[int] = DeltaWindows()
    written = {}
    for n, piece in enumerate(pieces):
        written[n] = piece
        for token, text in windows.delta(1, _delta(piece), n):
            assert len(text) == len(pieces[token])
            written[token] = text
    joined = "".join(written[n] for n in range(len(pieces)))
    assert key[3:] not in joined and "ABCDEFGH" not in joined and joined.startswith("my key is sk-")
    assert joined.endswith(" ok") and MASK * 5 in joined
    # Another item's stream is another window: no mask leaks across.
    assert windows.delta(1, _delta("plain text", "other"), 9) == []
    windows.end(1, {"type": "response.output_text.done", "response_id": "r", "item_id": "i", "content_index": 0})
    assert list(windows.open_streams()) == [(1, "text", "r", "other", 0)]
    windows.close(1)
    assert list(windows.open_streams()) == []


def test_secret_spans_keep_the_giveaway_prefix() -> None:
    text = "Authorization: Bearer abcdef123456 and sk-proj-abcdefghijkl"
    spans = secret_spans(text)
    shown = "".join(text[a:b] for a, b in spans)
    assert "abcdef123456" in shown and "abcdefghijkl" in shown and "sk-" not in shown
    assert scrub_text(text).count(REDACTED) == 2


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_every_match_of_every_pattern_holds_a_hint(data: st.DataObject) -> None:
    """What lets `scrub_text` return a text without a hint untouched (and `may_hold_secret` say no): no pattern can
    match it. A new pattern needs its hint in `_HINT_WORDS`."""
    pattern = data.draw(st.sampled_from(secrets._patterns()))
    text = data.draw(st.from_regex(pattern))
    match = pattern.search(text)
    assert match is not None
    assert secrets._hinted(match.group(0)), (pattern.pattern, text)
    assert may_hold_secret(json.dumps(match.group(0), ensure_ascii=False).encode()), (pattern.pattern, text)


#: Letters of the hints, the characters `re.IGNORECASE` takes for ASCII letters, and the separators of the patterns.
_HINTY = [*"sk-ek_=BbearerAaicKk.?&;:/@%2dDpPwWoOtn xyz09", "\u212a", "\u017f", "\u0131", "\u0130"]


@settings(max_examples=300)
@given(st.text(alphabet=st.sampled_from(_HINTY), max_size=60))
def test_the_hint_check_changes_no_result(text: str) -> None:
    assert scrub_text(text) == secrets._scrub_text(text, 0)
    spans = [m.span("s") for p in secrets._patterns() for m in p.finditer(text) if secrets._plausible(m)]
    assert secret_spans(text) == secrets._merge(spans)


_B64_PIECES = st.lists(
    st.sampled_from([*secrets._B64_WORDS, KEY.encode(), b"proj-", b"hello ", b"\0", b"~~"]), max_size=4
)
_WRAPS = st.sampled_from(["@", '{"k": "@"}', '["@"]', ' [ "@" ] ', "@ x", "x @", "@==", '{"@": 1}', '{"k": ["@", 2]}'])


@settings(max_examples=300)
@given(_B64_PIECES, st.integers(0, 2), st.booleans(), _WRAPS, st.integers(0, 8))
def test_the_short_cut_changes_no_result_on_json_and_base64(
    pieces: list[bytes], pad: int, urlsafe: bool, wrap: str, depth: int
) -> None:
    """Without a hint of a value pattern, only JSON or base64 whole is looked inside (`_unwraps`): a text of base64
    words, bare, in JSON or in prose, gets from `scrub_text` what the full path gives."""
    raw = b"\0" * pad + b"".join(pieces)
    encoded = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(raw).decode()
    text = wrap.replace("@", encoded)
    assert scrub_text(text, depth) == secrets._scrub_text(text, depth), text


_needs_fast_hint = pytest.mark.skipif(secrets._fast_hinted is None, reason="the C scanner is not built")
#: Pieces of the hint words, in both cases, with the characters around them and some that are not ASCII.
_HINT_PIECES = st.sampled_from(
    [
        *secrets._HINT_WORDS,
        *(w.upper() for w in secrets._HINT_WORDS),
        *(w[:-1] for w in secrets._HINT_WORDS if len(w) > 1),
        *"%0aAfFgG9 -_:/=xyz",
        "\u017f",
        "\u212a",
        "\u0130",
        "\xe9",
    ]
)


@_needs_fast_hint
@settings(max_examples=1000)
@given(st.lists(_HINT_PIECES, max_size=8).map("".join))
def test_the_c_screen_answers_as_the_hint_pattern(text: str) -> None:
    """`_scan.hinted` is `_HINT` searched in the lowered text, on ASCII text; on any other it says None and the
    pattern decides. `_hinted` gives the pattern's answer either way."""
    pattern = secrets._HINT.search(secrets._lowered(text)) is not None
    fast = secrets._fast_hinted(text)  # type: ignore[misc]
    assert fast is (pattern if text.isascii() else None), text
    assert secrets._hinted(text) is pattern


@_needs_fast_hint
def test_the_c_screen_finds_every_hint_word_at_every_place() -> None:
    for word in secrets._HINT_WORDS:
        for text in (word, word.upper(), f"x {word}", f"{word} x", f"ab{word.title()}cd"):
            assert secrets._fast_hinted(text) is True, text  # type: ignore[misc]
        assert secrets._fast_hinted(word[:-1]) is (secrets._HINT.search(word[:-1]) is not None)  # type: ignore[misc]
    assert secrets._fast_hinted("a %2f") is secrets._fast_hinted("%Af") is True  # type: ignore[misc]
    assert secrets._fast_hinted("%2") is secrets._fast_hinted("%g1") is False  # type: ignore[misc]


def test_the_hint_fold_covers_every_character_ignorecase_takes_for_an_ascii_letter() -> None:
    letter = re.compile("[a-z]", re.IGNORECASE)
    for cp in range(128, sys.maxunicode + 1):
        c = chr(cp)
        if not letter.fullmatch(c):
            continue
        folded = secrets._lowered(c)
        assert folded.isascii() and letter.fullmatch(folded[0]), (hex(cp), folded)
        for word in secrets._HINT_WORDS:
            if folded[0] in word:
                spelled = word.replace(folded[0], c, 1)
                assert secrets._hinted(spelled), (hex(cp), word)
                assert may_hold_secret(json.dumps({"x": spelled}, ensure_ascii=False).encode()), (hex(cp), word)


@settings(max_examples=300)
@given(
    st.lists(st.text(alphabet="abk%-_:/", min_size=1, max_size=6), min_size=1, max_size=8),
    st.text(alphabet="abk%-_:/0f\\u", max_size=30),
)
def test_a_trie_with_more_branches_matches_where_the_trie_or_a_branch_does(words: list[str], text: str) -> None:
    """`_trie(words, *also)` puts `also` among the root's branches (one alternation, the faster search): it finds a
    match exactly where the trie alone or one of `also` would."""
    also = (r"%[0-9a-f]{2}", r"\\u")
    words = sorted(set(words))
    joined = re.compile(secrets._trie(words, *also)).search(text) is not None
    apart = any(re.search(p, text) for p in (secrets._trie(words), *also))
    assert joined == apart


def test_the_value_patterns_are_compiled_on_the_first_hinted_text() -> None:
    """Importing the module (which every `rtrace` command does) compiles none of the value patterns."""
    code = (
        "import rtrace.core.secrets as s; print(s._patterns.cache_info().currsize);"
        "s.scrub_text('no hint here at all'); print(s._patterns.cache_info().currsize);"
        "s.scrub_text('api_key=abcdefgh12345678'); print(s._patterns.cache_info().currsize)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["0", "0", "1"], done.stderr
