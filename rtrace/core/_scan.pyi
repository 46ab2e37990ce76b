"""The C scanner of the reader's fast path (`_scan.c`); see its source for what it takes and returns."""

from typing import Any

def scan(
    buffer: bytes,
    start: int,
    end: int,
    table: dict[bytes, int],
    seen: set[int],
    keep: int = 0,
    detail: bool = False,
    heads: bool = False,
) -> list[Any]: ...
def set_hints(words: tuple[bytes, ...], /) -> None: ...
def hinted(text: str, /) -> bool | None: ...
