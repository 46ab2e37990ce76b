"""Which renderer writes which file: formats by name and by file extension, and writing several at once.

Thin glue between the CLI and the renderers; it renders a `Report` it is given and never analyzes.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.loader import DEFAULT_MAX_LINE_BYTES
from ..engine.fold import Report

if TYPE_CHECKING:  # the HTML renderer is imported only when one is written
    from .html import TraceData


class ReportFormat(str, Enum):
    """Every format a report renders to (`analyze --format` offers them all, `report --format` the files)."""

    terminal = "terminal"
    json = "json"
    concise = "concise"
    github = "github"
    sarif = "sarif"
    junit = "junit"
    markdown = "markdown"
    html = "html"


#: The formats `rtrace report` writes: files to attach to a bug.
FILE_FORMATS = (ReportFormat.markdown, ReportFormat.html, ReportFormat.json, ReportFormat.sarif, ReportFormat.junit)


SUFFIXES: dict[str, ReportFormat] = {
    ".md": ReportFormat.markdown,
    ".markdown": ReportFormat.markdown,
    ".html": ReportFormat.html,
    ".htm": ReportFormat.html,
    ".json": ReportFormat.json,
    ".sarif": ReportFormat.sarif,
    ".xml": ReportFormat.junit,
}


def format_for_path(path: Path) -> ReportFormat | None:
    """The format a file name asks for (`report.md` -> markdown, `out.sarif.json` -> sarif), or None."""
    name = path.name.lower()
    if name.endswith((".sarif.json", ".sarif")):
        return ReportFormat.sarif
    return SUFFIXES.get(path.suffix.lower())


def render_bytes(
    report: Report,
    fmt: ReportFormat,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    html_data: Sequence[TraceData | None] | None = None,
) -> bytes:
    """`report` in `fmt`. `html_data`: the HTML page data of each trace, when its analysis made it (`html.analyze`);
    without it the HTML report reads each trace again."""
    if fmt is ReportFormat.terminal:
        import io

        from . import terminal
        from .console import plain_console

        text = io.StringIO()
        terminal.render(report, plain_console(text))
        return text.getvalue().encode("utf-8")
    if fmt is ReportFormat.concise:
        from . import concise

        return concise.render(report).encode("utf-8")
    if fmt is ReportFormat.github:
        from . import github

        return github.render(report).encode("utf-8")
    if fmt is ReportFormat.markdown:
        from . import markdown

        return markdown.render(report).encode("utf-8")
    if fmt is ReportFormat.html:
        from . import html

        return html.render(report, max_line_bytes, html_data).encode("utf-8")
    if fmt is ReportFormat.json:
        from . import json_report

        return json_report.render(report)
    if fmt is ReportFormat.sarif:
        from . import sarif

        return sarif.render(report)
    if fmt is ReportFormat.junit:
        from . import junit

        return junit.render(report)
    raise AssertionError(fmt)


def write_outputs(
    report: Report,
    outputs: list[tuple[ReportFormat, Path]],
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    html_data: Sequence[TraceData | None] | None = None,
) -> None:
    """Write each requested format to its path, whole or not at all (`core.writer.write_replacing`); raises OSError
    when a path cannot be written."""
    from ..core.writer import write_replacing

    for fmt, path in outputs:
        write_replacing(path, render_bytes(report, fmt, max_line_bytes, html_data))
