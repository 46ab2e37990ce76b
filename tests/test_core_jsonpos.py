"""`core.jsonpos`: the column of a value in a JSON line."""

from __future__ import annotations

from rtrace.core.jsonpos import column_of


def test_column_of_finds_the_value_at_a_path() -> None:
    line = '{"t": 1, "event": {"type": "error", "x": [1, {"a": "}\\"]"}], "error": {"code": ["x"], "m": "m"}}}'
    col = column_of(line, ("event", "error", "code"))
    assert col is not None and line[col - 1 :].startswith('["x"]')
    col = column_of(line, ("event", "x", 1, "a"))
    assert col is not None and line[col - 1 :].startswith('"}')
    assert column_of(line, ("event", "nope")) is None
    assert column_of(line, ("event", "x", 7)) is None
    assert column_of("{bad", ("a",)) is None and column_of("", ("a",)) is None
    dup = '{"a": 1, "a": [2]}'  # the reader keeps the last of a duplicated key
    assert column_of(dup, ("a",)) == dup.index("[") + 1
