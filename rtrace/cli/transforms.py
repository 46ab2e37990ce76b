"""The file-to-file commands: `redact`, `minimize`, `convert`. Thin shells over `transform` and `core.importers`."""

from pathlib import Path
from typing import Annotated

import typer

from ..core.loader import DEFAULT_MAX_LINE_BYTES, UnreadableInput
from ..engine.fold import Report
from ..report.console import stderr_console
from ..report.outputs import ReportFormat
from ..rules import find_rule
from ..rules.base import Config
from .common import AllowSpecial, allow_special, refuse_overwrite, verbatim, working
from .outputs import write_report
from .root import UsageError, app, say

REDACT_EXAMPLES = """Examples:
  rtrace redact session.jsonl -o clean.jsonl    # keys and tokens removed
  rtrace redact session.jsonl -o clean.jsonl --user-text --audio   # for a public issue"""


@app.command(epilog=verbatim(REDACT_EXAMPLES))
def redact(
    path: Annotated[Path, typer.Argument(help="The trace to clean; - for stdin.")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write here (default: stdout).")] = None,
    user_text: Annotated[bool, typer.Option(help="Also remove conversation text, transcripts, instructions.")] = False,
    audio: Annotated[bool, typer.Option(help="Also replace audio payloads by their byte count and SHA-256.")] = False,
    tool_output: Annotated[bool, typer.Option(help="Also remove tool call arguments and outputs.")] = False,
    max_line_bytes: Annotated[int, typer.Option(help="Longer lines are dropped.")] = DEFAULT_MAX_LINE_BYTES,
    allow_special_files: AllowSpecial = False,
) -> None:
    """Remove secrets (and, on request, user text, audio, tool payloads) so a trace can go into a public issue."""
    allow_special(allow_special_files)
    from ..transform.redact import RedactOptions, redact_file

    refuse_overwrite([str(path)], [output])
    err = stderr_console()
    options = RedactOptions(user_text, audio, tool_output, max_line_bytes)

    def dropped(line: int, reason: str) -> None:
        say(f"{path}:{line}:1: {reason}; line dropped (a placeholder note keeps the numbering)", console=err)

    try:
        with working(f"redacting {path}"):
            stats = redact_file(path, output, options, dropped)
    except OSError as e:
        raise UsageError(f"{e.filename or output}: cannot write: {e.strerror or e}") from None
    say(
        f"rtrace redact: {stats.lines} lines, {stats.secrets} with secrets removed, {stats.dropped} dropped"
        + (f", {stats.texts} texts" if user_text else "")
        + (f", {stats.audio} audio payloads" if audio else "")
        + (f", {stats.tool} tool payloads" if tool_output else ""),
        console=err,
    )


MINIMIZE_EXAMPLES = """Example:
  rtrace minimize session.jsonl --rule RT101 -o repro.jsonl"""


@app.command("minimize", epilog=verbatim(MINIMIZE_EXAMPLES))
def minimize_command(
    path: Annotated[Path, typer.Argument(help="The trace with the finding.")],
    rule: Annotated[str, typer.Option("--rule", "-r", help="The rule (id or slug) whose finding must still hold.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Write the reproducer here.")],
    max_line_bytes: Annotated[int, typer.Option(help="Longer lines are skipped.")] = DEFAULT_MAX_LINE_BYTES,
) -> None:
    """The fewest records of a trace in which a rule's finding still holds (delta debugging over connections, turns
    and records, the protocol kept valid); writes them and prints their report."""
    import time

    from ..engine.fold import analyze_path
    from ..transform import minimize as mz

    found = find_rule(rule)
    if output.exists() and path.exists() and output.resolve() == path.resolve():
        raise UsageError(f"{output}: is the input; write the reproducer elsewhere")
    started = time.perf_counter()
    try:
        result = mz.minimize(path, found, max_line_bytes=max_line_bytes)
    except mz.NothingToMinimize as e:
        raise UsageError(str(e)) from None
    from ..core.writer import replacing_trace

    try:
        with replacing_trace(output) as out:  # whole or not at all, compressed as its name says
            written = mz.write(result, out, max_line_bytes=max_line_bytes)
    except OSError as e:
        raise UsageError(f"{e.filename or output}: cannot write: {e.strerror or e}") from None
    seconds = time.perf_counter() - started
    say(
        f"rtrace minimize: {result.records} records -> {written} lines ({found.id} {found.slug} holds; "
        f"{result.tests} candidates folded in {seconds:.2f} s) -> {output}"
    )
    write_report(Report([analyze_path(output, max_line_bytes=max_line_bytes)], Config()), ReportFormat.terminal, None)


CONVERT_EXAMPLES = """Examples:
  rtrace convert capture.har -o session.jsonl   # browser devtools export
  rtrace convert flows.mitm -o session.jsonl    # mitmdump -w (pip install 'rtrace-cli[mitmproxy]')"""


@app.command(epilog=verbatim(CONVERT_EXAMPLES))
def convert(
    path: Annotated[Path, typer.Argument(help="A HAR, JSON-array or JSONL event log, mitmproxy dump or livekit log.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Write the native trace here.")],
    allow_special_files: AllowSpecial = False,
) -> None:
    """Convert another tool's capture to a native rtrace trace (secrets removed)."""
    allow_special(allow_special_files)
    from ..core.importers import convert as convert_file
    from ..core.importers import detect
    from ..core.writer import replacing_trace

    refuse_overwrite([str(path)], [output])
    kind = detect(str(path))
    try:
        with replacing_trace(output) as out, working(f"converting {path}"):
            count = convert_file(str(path), out, kind)
            if count == 0:
                raise UnreadableInput(f"{path}: no event to convert; {output} is not written")
    except OSError as e:
        raise UsageError(f"{e.filename or output}: {e.strerror or e}") from None
    say(f"rtrace convert: {count} records ({kind}) -> {output}")
