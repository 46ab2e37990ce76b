"""The `rtrace` command line: thin typer commands over the library. `main` maps every error to an exit code."""

from __future__ import annotations

import os
import sys
from enum import Enum, IntEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from . import __version__
from .analysis import Report, TraceReport, analyze_path
from .detectors import RULES, UnknownRule, find_rule, select_rules
from .detectors.base import SEVERITY_RANK, Config
from .loader import DEFAULT_MAX_LINE_BYTES, TraceReader, UnreadableInput


class ExitCode(IntEnum):
    OK = 0
    FINDINGS = 1
    USAGE = 2
    UNREADABLE = 3
    REPLAY_FAILED = 4


class UsageError(Exception):
    """Bad arguments that typer itself cannot see (an unknown rule name, a path that is not a trace)."""


class FailOn(str, Enum):
    error = "error"
    warning = "warning"
    info = "info"
    never = "never"


class OutputFormat(str, Enum):
    terminal = "terminal"
    json = "json"


app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Trace analyzer and race detector for realtime LLM websocket sessions.",
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def stdout_console() -> Console:
    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal:
        console = Console(highlight=False, soft_wrap=False, width=120)
    return console


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def _split(values: list[str] | None) -> list[str]:
    return [v.strip() for value in values or [] for v in value.split(",") if v.strip()]


def trace_paths(paths: list[Path]) -> list[str]:
    """Files as given; directories expand to their `*.jsonl` files (sorted)."""
    out: list[str] = []
    for path in paths:
        if str(path) != "-" and path.is_dir():
            found = sorted(str(p) for p in path.rglob("*.jsonl") if p.is_file())
            if not found:
                raise UsageError(f"{path}: no *.jsonl trace in this directory")
            out.extend(found)
        else:
            out.append(str(path))
    return out


def analyze_one(path: str, config: Config, rules: tuple, max_line_bytes: int) -> TraceReport:
    try:
        return analyze_path(path, config, rules, max_line_bytes=max_line_bytes)
    except UnreadableInput as e:
        return TraceReport(path, 0, 0, 0.0, [], [], 0, unreadable=str(e))


def exit_code_for(report: Report, fail_on: FailOn, strict: bool) -> ExitCode:
    if any(t.unreadable or t.events == 0 for t in report.traces):
        return ExitCode.UNREADABLE
    if strict and any(t.problem_count for t in report.traces):
        return ExitCode.UNREADABLE
    if fail_on is not FailOn.never:
        floor = SEVERITY_RANK[fail_on.value]
        if any(SEVERITY_RANK[f.severity] >= floor for f in report.findings):
            return ExitCode.FINDINGS
    return ExitCode.OK


@app.command()
def analyze(
    paths: Annotated[list[Path], typer.Argument(help="Trace files, or directories of *.jsonl traces; - for stdin.")],
    format: Annotated[OutputFormat, typer.Option("--format", "-f", help="Output format.")] = OutputFormat.terminal,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the report here instead of stdout.")
    ] = None,
    fail_on: Annotated[FailOn, typer.Option(help="Exit 1 when a finding is at or above this severity.")] = FailOn.error,
    select: Annotated[list[str] | None, typer.Option(help="Only these rules (ids or slugs, comma-separated).")] = None,
    ignore: Annotated[list[str] | None, typer.Option(help="Skip these rules (ids or slugs, comma-separated).")] = None,
    strict: Annotated[bool, typer.Option(help="Treat input problems as errors (exit 3).")] = False,
    ack_timeout: Annotated[float, typer.Option(help="Seconds a create/delete/truncate may wait for its answer.")] = 5.0,
    burst_window: Annotated[float, typer.Option(help="Seconds between client changes of one burst.")] = 0.010,
    max_line_bytes: Annotated[int, typer.Option(help="Longer lines are skipped.")] = DEFAULT_MAX_LINE_BYTES,
) -> None:
    """Rebuild both conversations of each trace and report every anomaly with the lines that prove it."""
    rules = tuple(select_rules(_split(select), _split(ignore)))
    config = Config(ack_timeout=ack_timeout, burst_window=burst_window)
    traces = [analyze_one(p, config, rules, max_line_bytes) for p in trace_paths(paths)]
    report = Report(traces, config, rules)
    write_report(report, format, output)
    for trace in traces:
        if trace.events == 0 and not trace.unreadable:
            stderr_console().print(f"{trace.path}: no usable event", style="red", markup=False)
    raise typer.Exit(exit_code_for(report, fail_on, strict))


def write_report(report: Report, format: OutputFormat, output: Path | None) -> None:
    if format is OutputFormat.json:
        from .report import json_report

        data = json_report.render(report)
        if output is None:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        else:
            output.write_bytes(data)
        return
    from .report import terminal

    if output is None:
        terminal.render(report, stdout_console())
    else:
        with output.open("w", encoding="utf-8") as fp:
            terminal.render(report, Console(file=fp, width=120, color_system=None, highlight=False))


@app.command()
def show(
    path: Annotated[Path, typer.Argument(help="A trace file.")],
    at: Annotated[int | None, typer.Option(help="Show the state after this line (default: the end).")] = None,
    conn: Annotated[int | None, typer.Option(help="Only this connection; without --at, its event timeline.")] = None,
    max_line_bytes: Annotated[int, typer.Option(help="Longer lines are skipped.")] = DEFAULT_MAX_LINE_BYTES,
) -> None:
    """Both conversations side by side at a line, or the timeline of one connection."""
    from .reducer import step
    from .report import show as show_view
    from .state import TraceState

    console = stdout_console()
    with TraceReader.open(path, max_line_bytes=max_line_bytes) as reader:
        if conn is not None and at is None:
            show_view.render_timeline(reader, conn, console)
            count = reader.count
        else:
            state = TraceState()
            for rec in reader:
                if at is not None and rec.line > at:
                    break
                step(state, rec)
            count = reader.count
            show_view.render_state(state, state.last_line if at is None else at, console, [conn] if conn else None)
    for problem in reader.problems[:20]:
        stderr_console().print(str(problem), style="yellow", markup=False)
    if count == 0:
        stderr_console().print(f"{path}: no usable event", style="red", markup=False)
        raise typer.Exit(ExitCode.UNREADABLE)


@app.command()
def rules(
    name: Annotated[str | None, typer.Argument(help="A rule id or slug to explain.")] = None,
) -> None:
    """List the rules, or explain one."""
    console = stdout_console()
    if name is None:
        from rich.table import Table

        table = Table(box=None, header_style="bold")
        table.add_column("id")
        table.add_column("slug")
        table.add_column("severity")
        table.add_column("what it reports")
        for rule in RULES:
            table.add_row(rule.id, rule.slug, rule.severity, rule.title)
        console.print(table)
        return
    rule = find_rule(name)
    from rich.markdown import Markdown

    console.print(f"{rule.id} {rule.slug} ({rule.severity})", style="bold", markup=False)
    console.print(Markdown(rule.doc()))


def version_callback(value: bool) -> None:
    if value:
        print(f"rtrace {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=version_callback, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    pass


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; the one place where errors become exit codes."""
    try:
        code = app(args=argv, standalone_mode=False)
    except typer.Exit as e:
        return int(e.exit_code)
    except UnknownRule as e:
        stderr_console().print(f"rtrace: unknown rule {e.args[0]!r} (see `rtrace rules`)", markup=False)
        return ExitCode.USAGE
    except UsageError as e:
        stderr_console().print(f"rtrace: {e}", markup=False)
        return ExitCode.USAGE
    except UnreadableInput as e:
        stderr_console().print(f"rtrace: {e}", markup=False)
        return ExitCode.UNREADABLE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.OK
    except typer.Abort:
        return 130
    except Exception as e:  # typer's usage errors (its own click) and anything else: never a traceback
        show, code = getattr(e, "show", None), getattr(e, "exit_code", None)
        if callable(show) and isinstance(code, int):
            show()
            return code
        stderr_console().print(f"rtrace: internal error: {type(e).__name__}: {e}", markup=False)
        if os.environ.get("RTRACE_DEBUG"):
            raise
        return 70
    return int(code) if isinstance(code, int) else ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())
