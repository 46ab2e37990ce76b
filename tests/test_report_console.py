"""Consoles: rich on a terminal; plain, unpadded lines of COLUMNS (or 120) width anywhere else."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.table import Table

from rtrace.report.console import PIPE_WIDTH, StrippedLines, columns, plain_console, stdout_console


def test_stripped_lines_remove_trailing_blanks_and_keep_a_partial_line_until_flushed() -> None:
    out = io.StringIO()
    lines = StrippedLines(out)
    lines.write("a   \nb  ")
    assert out.getvalue() == "a\n"
    lines.write(" c   \n")
    assert out.getvalue() == "a\nb   c\n"
    lines.write("end  ")
    lines.flush()
    assert out.getvalue() == "a\nb   c\nend" and not lines.isatty()


@given(st.lists(st.text(alphabet=st.sampled_from(" \n\tab\r"), max_size=12), max_size=6))
def test_stripped_lines_are_the_lines_each_stripped_however_the_text_comes_in_pieces(pieces: list[str]) -> None:
    """What `StrippedLines` writes, in one pass over each piece, is every line `rstrip(" ")`ed (spaces only)."""
    out = io.StringIO()
    lines = StrippedLines(out)
    for piece in pieces:
        lines.write(piece)
    lines.flush()
    assert out.getvalue() == "\n".join(line.rstrip(" ") for line in "".join(pieces).split("\n"))


@pytest.mark.parametrize(("value", "want"), [("70", 70), (" 200 ", 200), ("0", None), ("wide", None), ("", None)])
def test_columns_is_a_positive_width_or_none(value: str, want: int | None) -> None:
    assert columns({"COLUMNS": value}) == want
    assert columns({}) is None


def test_plain_console_width_and_no_padding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()
    console = plain_console(out)
    assert console.width == PIPE_WIDTH and not console.is_terminal
    table = Table("a", "b", box=None)
    table.add_row("x" * 5, "y")
    table.add_row("x", "")
    console.print(table)
    text = out.getvalue()
    assert "\x1b" not in text and all(line == line.rstrip() for line in text.splitlines())
    monkeypatch.setenv("COLUMNS", "50")
    assert plain_console(io.StringIO()).width == 50


def test_stdout_console_is_plain_when_not_a_terminal() -> None:
    out = io.StringIO()
    console = stdout_console(out)
    console.print("[bold]hi[/bold]   ")
    assert out.getvalue() == "hi\n"
