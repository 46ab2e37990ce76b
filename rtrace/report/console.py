"""The consoles every command prints through: on a terminal, rich as it is; anywhere else, plain lines.

Output that is not a terminal (a pipe, a file, a CI log) is read by tools and people who diff it, so it is:
- as wide as `COLUMNS` says when it is set (as on a terminal), else 120 columns (rich's 80 cuts the witness
  tables of a finding in two);
- without colour codes and without the spaces rich pads each table cell and paragraph with: every line is
  written with its trailing blanks removed (`StrippedLines`), so `grep`, `diff` and `wc -L` see the text.
"""

from __future__ import annotations

import errno
import os
from typing import IO

from rich.console import Console

#: Width of output that is not a terminal, when `COLUMNS` does not say.
PIPE_WIDTH = 120


class Output(Console):
    """A console of a command's output. When its reader leaves (`rtrace ... | head`) the `BrokenPipeError` goes
    on to the caller (`cli.root.main` makes it exit 0), where rich's own console would exit 1 on the spot."""

    def on_broken_pipe(self) -> None:
        self.quiet = True  # nothing more is written
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


class StrippedLines:
    """A text stream that writes each line without its trailing blanks (a partial line waits for its end)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._partial = ""

    def write(self, text: str) -> int:
        whole = self._partial + text
        end = whole.rfind("\n") + 1
        self._partial = whole[end:]
        if not end:
            return len(text)
        ended = whole[:end]
        if " \n" in ended:
            self._stream.write("".join(line.rstrip(" ") + "\n" for line in ended[:-1].split("\n")))
        else:  # no line ends with a blank (`show`'s view, 100,000 lines laid out to fit): written as it came
            self._stream.write(ended)
        return len(text)

    def flush(self) -> None:
        if self._partial:
            self._stream.write(self._partial.rstrip(" "))
            self._partial = ""
        self._stream.flush()

    def isatty(self) -> bool:
        return False


def columns(environ: dict[str, str] | os._Environ[str] = os.environ) -> int | None:
    """The width `COLUMNS` asks for, or None when it is unset or not a positive number."""
    value = environ.get("COLUMNS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def plain_console(stream: IO[str], width: int | None = None) -> Console:
    """A console writing plain lines to `stream`: no colour, no trailing blanks, `width` (else COLUMNS or 120)."""
    return Output(
        file=StrippedLines(stream),  # type: ignore[arg-type]
        width=width or columns() or PIPE_WIDTH,
        color_system=None,
        force_terminal=False,
        highlight=False,
        soft_wrap=False,
        emoji=False,
    )


def stdout_console(stream: IO[str] | None = None) -> Console:
    """Rich on a terminal (its own width, COLUMNS included); plain lines otherwise."""
    import sys

    stream = stream or sys.stdout
    console = Output(file=stream, highlight=False, soft_wrap=False, emoji=False)
    return console if console.is_terminal else plain_console(stream)


def stderr_console() -> Console:
    """Messages: soft-wrapped (a `file:100:1` location is never cut) and never markup."""
    return Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)
