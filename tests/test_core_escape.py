"""Escaping untrusted trace text for the terminal."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rtrace.core.escape import PREVIEW_LIMIT, printable

from .strategies import BOUNDED


def test_plain_text_unchanged() -> None:
    assert printable("hello [bold]world[/bold] é 漢字") == "hello [bold]world[/bold] é 漢字"


def test_control_characters_and_ansi_escapes_are_visible() -> None:
    assert printable("a\x1b[31mred\x1b[0m\n\tb\x00\x7f") == "a\\x1b[31mred\\x1b[0m\\x0a\\x09b\\x00\\x7f"
    assert printable("x\x9by") == "x\\x9by"  # C1 CSI
    assert printable("a\u2028b\u200bc") == "a\\u2028b\\u200bc"


def test_long_text_is_cut_with_a_count() -> None:
    b64 = "QUJD" * 10_000
    out = printable(b64)
    assert out == b64[:PREVIEW_LIMIT] + f"… (+{len(b64) - PREVIEW_LIMIT} chars)"
    assert printable("abcdef", 3) == "abc… (+3 chars)"
    assert printable("abc", 3) == "abc"


@BOUNDED
@given(st.text(max_size=300), st.integers(1, 200))
def test_never_lets_a_control_character_through(text: str, limit: int) -> None:
    out = printable(text, limit)
    assert all(ch.isprintable() for ch in out)
    assert len(out) <= 6 * limit + 30


def test_json_visible_escapes_what_a_terminal_would_act_on_and_keeps_the_value() -> None:
    import orjson

    from rtrace.core.escape import json_visible

    value = {"k\u202e": ["a\u2028b", "\u009b2J", "é 漢字 \u2066x\u2069", "\ufeff"]}
    raw = orjson.dumps(value)
    out = json_visible(raw)
    assert orjson.loads(out) == value
    assert out.decode() == '{"k\\u202e":["a\\u2028b","\\u009b2J","é 漢字 \\u2066x\\u2069","\\ufeff"]}'
    plain = orjson.dumps({"a": "é"})
    assert json_visible(plain) is plain


@BOUNDED
@given(st.recursive(st.text(), lambda kids: st.lists(kids, max_size=4), max_leaves=10))
def test_json_visible_never_changes_the_value(value: object) -> None:
    import orjson

    from rtrace.core.escape import json_visible

    assert orjson.loads(json_visible(orjson.dumps(value))) == value
