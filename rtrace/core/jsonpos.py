"""Where a field stands in one JSON line: the column a problem or a finding points at (`column_of`)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import orjson

_SPACE = re.compile(r"[ \t\r\n]*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SCALAR = re.compile(r"[^,\]}\s]*")


def column_of(line: str, path: Sequence[str | int]) -> int | None:
    """The 1-based column where the value at `path` (object keys, array positions) starts in one JSON line, or
    None when the line has no such value. A duplicated key is the last one, as the reader takes it."""
    try:
        at = _value_at(line, _skip_space(line, 0), tuple(path))
    except (IndexError, ValueError):
        return None
    return None if at is None else at + 1


def _skip_space(text: str, i: int) -> int:
    m = _SPACE.match(text, i)
    return m.end() if m else i


def _value_at(text: str, i: int, path: tuple[str | int, ...]) -> int | None:
    if not path:
        return i
    head, rest = path[0], path[1:]
    opener = text[i]
    if (opener == "{") != isinstance(head, str) or opener not in "{[":
        return None
    found = None
    i = _skip_space(text, i + 1)
    k = 0
    while text[i] not in "}]":
        if opener == "{":
            m = _STRING.match(text, i)
            if m is None:
                raise ValueError(i)
            key = orjson.loads(m.group())
            i = _skip_space(text, m.end())
            if text[i] != ":":
                raise ValueError(i)
            i = _skip_space(text, i + 1)
            if key == head:
                found = i
        elif k == head:
            found = i
        i = _skip_space(text, _skip_value(text, i))
        k += 1
        if text[i] == ",":
            i = _skip_space(text, i + 1)
    return None if found is None else _value_at(text, found, rest)


def _skip_value(text: str, i: int) -> int:
    """The position just past the JSON value that starts at `i`."""
    if text[i] == '"':
        m = _STRING.match(text, i)
        if m is None:
            raise ValueError(i)
        return m.end()
    if text[i] not in "{[":
        return _SCALAR.match(text, i).end()  # type: ignore[union-attr]
    depth = 0
    while True:
        c = text[i]
        if c == '"':
            m = _STRING.match(text, i)
            if m is None:
                raise ValueError(i)
            i = m.end()
            continue
        if c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
