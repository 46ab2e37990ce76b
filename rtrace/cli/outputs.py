"""Where a report goes: the format `--format`/`-o` ask for, and the one writer (stdout, or a file whole or not at
all) `analyze`, `report` and `minimize` share. Rendering itself is `report.outputs.render_bytes`."""

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.loader import DEFAULT_MAX_LINE_BYTES
from ..core.writer import write_replacing
from ..engine.fold import Report
from ..report.outputs import FILE_FORMATS, ReportFormat, format_for_path, render_bytes
from .common import written
from .root import UsageError

if TYPE_CHECKING:
    from ..report.html import TraceData

#: What `-o FILE` writes, by the file's extension, beyond the files `report.outputs.format_for_path` knows
#: (anything else needs `--format`).
OUTPUT_SUFFIXES = {".txt": ReportFormat.terminal, ".log": ReportFormat.terminal}


def output_format(format: ReportFormat | None, output: Path | None) -> ReportFormat:
    """The format `--format` names, or the one `-o`'s extension asks for; a usage error when the two disagree or
    the extension says nothing (writing terminal text into `out.json` is never what was meant)."""
    if output is None or str(output) == "-":
        return format or ReportFormat.terminal
    implied = format_for_path(output) or OUTPUT_SUFFIXES.get(output.suffix.lower())
    if format is None:
        if implied is None:
            raise UsageError(
                f"-o {output}: cannot tell the format from the extension; name it .json, .sarif, .xml (JUnit), .md, "
                ".html or .txt, or give --format"
            )
        return implied
    if (
        implied is not None
        and implied is not format
        and not (format in (ReportFormat.concise, ReportFormat.github) and implied is ReportFormat.terminal)
    ):
        raise UsageError(f"-o {output} asks for {implied.value} but --format says {format.value}; make them agree")
    return format


def file_format(format: str | None, output: Path | None) -> ReportFormat:
    """`report`'s format: `--format` by name (`md`, `xml` too), else `-o`'s extension, else Markdown; one of
    `FILE_FORMATS`."""
    if format is not None:
        try:
            fmt = ReportFormat({"md": "markdown", "xml": "junit"}.get(format.lower(), format.lower()))
        except ValueError:
            fmt = None
        if fmt not in FILE_FORMATS:
            names = ", ".join(f.value for f in FILE_FORMATS)
            raise UsageError(f"unknown report format {format!r} ({names})") from None
        assert fmt is not None
        return fmt
    if output is not None:
        found = format_for_path(output)
        if found is None:
            raise UsageError(f"{output}: cannot tell the format from the extension; use --format")
        return found
    return ReportFormat.markdown


def write_report(
    report: Report,
    format: ReportFormat,
    output: Path | None,
    quiet: bool = False,
    statistics: bool = False,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    html_data: "Sequence[TraceData | None] | None" = None,
) -> None:
    """The report in `format` on stdout or into `output` (whole or not at all). `statistics`: the count per rule
    only; `quiet` (terminal): the concise lines of the findings only. Terminal text on stdout is drawn by the
    console (colours on a terminal), everything else is rendered to bytes once."""
    to_stdout = output is None or str(output) == "-"
    if statistics:
        from ..report.concise import statistics as per_rule

        write_bytes(per_rule(report).encode("utf-8"), output)
        return
    if quiet and format is ReportFormat.terminal:
        format = ReportFormat.concise
    if format is ReportFormat.terminal and to_stdout:
        from ..report import terminal
        from ..report.console import stdout_console

        terminal.render(report, stdout_console())
        return
    write_bytes(render_bytes(report, format, max_line_bytes, html_data), output)


def write_bytes(data: bytes, output: Path | None) -> None:
    """The one writer: `data` on stdout (no `output`, or `-`) or into `output`, whole or not at all."""
    if output is None or str(output) == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        written(output, lambda: write_replacing(output, data))


def write_side_outputs(
    report: Report, paths: dict[str, Path], max_line_bytes: int, html_data: "Sequence[TraceData | None] | None" = None
) -> None:
    """`analyze --json/--sarif/...`: each file in its format (`report.outputs.write_outputs`); `html_data`, the page
    data of each trace when the analysis made it."""
    from ..report.outputs import write_outputs

    try:
        write_outputs(report, [(ReportFormat(k), p) for k, p in paths.items()], max_line_bytes, html_data)
    except OSError as e:
        raise UsageError(f"{e.filename or ''}: cannot write: {e.strerror or e}") from None
