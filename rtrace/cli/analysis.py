"""The analysis commands: `analyze`, `report`, `show`, `rules`. Thin shells over `engine` and `report`."""

import os
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..core.loader import DEFAULT_MAX_LINE_BYTES, TraceReader, UnreadableInput
from ..core.writer import write_replacing
from ..engine.fold import Report, TraceReport
from ..report.outputs import ReportFormat
from ..rules import RULES, find_rule, select_rules
from ..rules.base import Config

if TYPE_CHECKING:
    from ..report.progress import Progress

from .common import (
    AllowSpecial,
    FailOn,
    Given,
    allow_special,
    duration_option,
    inputs,
    load_baseline,
    local_inputs,
    project_settings,
    refuse_overwrite,
    spliced,
    split_names,
    storage_options_of,
    threshold_parameters,
    trace_paths,
    verbatim,
    working,
    written,
)
from .outputs import file_format, output_format, write_bytes, write_report, write_side_outputs
from .root import ExitCode, UsageError, app, exit_code, say


class Engine(str, Enum):
    local = "local"
    dask = "dask"


def analyze_many(
    paths: list[Path],
    config: Config,
    rules: tuple,
    max_line_bytes: int,
    jobs: int,
    engine: Engine,
    scheduler: str | None,
    storage_options: dict[str, Any],
    progress: "Progress | None" = None,
) -> list[TraceReport]:
    """`progress` shows the fraction of one trace read, or the traces of several done of their total."""
    from ..engine import parallel

    if jobs < 0:
        raise UsageError("--jobs must be 0 (one per CPU) or more")
    if engine is Engine.dask and not scheduler:
        raise UsageError("--engine dask needs --scheduler ADDRESS")
    found = inputs(paths, storage_options)
    try:
        if engine is Engine.local:
            on_read = on_trace = None
            if progress is not None and len(found) == 1 and found[0][1]:
                progress.measure(found[0][1], "bytes")
                on_read = progress.update
            elif progress is not None and len(found) > 1:
                progress.measure(len(found), "traces")
                on_trace = progress.advance
            local = [p for p, _ in found]
            so = storage_options
            return parallel.analyze_local(local, config, rules, max_line_bytes, jobs, so, on_read, on_trace)
        if any(p == "-" for p, _ in found):
            raise UsageError("stdin (-) cannot be sent to a Dask cluster")
        urls = [p if "://" in p else os.path.abspath(p) for p, _ in found]
        sizes = [size for _, size in found]
        assert scheduler is not None
        return parallel.analyze_dask(urls, config, rules, max_line_bytes, scheduler, storage_options, sizes)
    except parallel.EngineUnavailable as e:
        raise UsageError(str(e)) from None


def analyze_with_page_data(
    paths: list[Path], config: Config, rules: tuple, max_line_bytes: int, storage_options: dict[str, Any]
) -> tuple[list[TraceReport], list[Any] | None]:
    """`analyze --html`: each local trace read once, its HTML page data made by the analysis itself (as `report`
    does); remote traces are analyzed as without `--html` (the page then reads them again)."""
    found = [p for p, _ in inputs(paths, storage_options)]
    if any("://" in p for p in found):
        return analyze_many(paths, config, rules, max_line_bytes, 1, Engine.local, None, storage_options), None
    from ..report import html

    folded = [html.analyze(p, config, rules, max_line_bytes) for p in found]
    return [trace for trace, _ in folded], [data for _, data in folded]


def exit_code_for(report: Report, fail_on: str, strict: bool) -> ExitCode:
    if any(t.unreadable or t.events == 0 for t in report.traces):
        return ExitCode.UNREADABLE
    if strict and any(t.problem_count for t in report.traces):
        return ExitCode.UNREADABLE
    if any(t.failed_rules for t in report.traces):
        return ExitCode.FINDINGS  # a rule failed on this input: the analysis is incomplete, never "clean"
    return exit_code(report.findings, fail_on)


ANALYZE_EXAMPLES = """Examples:
  rtrace analyze session.jsonl                  # the findings, with the lines that prove them
  rtrace analyze traces/ -f concise             # one line per finding
  rtrace analyze traces/ --statistics           # findings per rule
  rtrace analyze t.jsonl -o report.sarif        # format from the extension
  rtrace analyze t.jsonl --baseline known.json --write-baseline
Settings: [tool.rtrace] in pyproject.toml, or rtrace.toml (looked for upward)."""


@app.command(epilog=verbatim(ANALYZE_EXAMPLES))
@spliced("thresholds", threshold_parameters())
def analyze(
    ctx: typer.Context,
    paths: Annotated[list[Path], typer.Argument(help="Trace files, or directories of *.jsonl traces; - for stdin.")],
    format: Annotated[
        ReportFormat | None, typer.Option("--format", "-f", help="Output format (default: from -o, else terminal).")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the report here; the extension picks the format.")
    ] = None,
    fail_on: Annotated[FailOn, typer.Option(help="Exit 1 when a finding is at or above this severity.")] = FailOn.error,
    select: Annotated[list[str] | None, typer.Option(help="Only these rules (ids or slugs, comma-separated).")] = None,
    ignore: Annotated[list[str] | None, typer.Option(help="Skip these rules (ids or slugs, comma-separated).")] = None,
    strict: Annotated[bool, typer.Option(help="Treat input problems as errors (exit 3).")] = False,
    *,
    thresholds: dict[str, float],
    max_line_bytes: Annotated[int, typer.Option(help="Longer lines are skipped.")] = DEFAULT_MAX_LINE_BYTES,
    json_path: Annotated[Path | None, typer.Option("--json", help="Also write the JSON report here.")] = None,
    sarif_path: Annotated[Path | None, typer.Option("--sarif", help="Also write a SARIF 2.1.0 report here.")] = None,
    junit_path: Annotated[Path | None, typer.Option("--junit", help="Also write a JUnit XML report here.")] = None,
    html_path: Annotated[Path | None, typer.Option("--html", help="Also write the HTML report here.")] = None,
    markdown_path: Annotated[Path | None, typer.Option("--markdown", help="Also write Markdown here.")] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Only the findings, one line each; nothing when clean.")
    ] = False,
    statistics: Annotated[bool, typer.Option("--statistics", help="Only the count of findings per rule.")] = False,
    baseline: Annotated[
        Path | None, typer.Option(help="Accept the findings this file lists (known ones); report the others.")
    ] = None,
    write_baseline: Annotated[
        bool, typer.Option("--write-baseline", help="Write every finding of this run to --baseline FILE; exit 0.")
    ] = False,
    config_file: Annotated[
        Path | None, typer.Option("--config", help="Settings from this file (rtrace.toml or pyproject.toml).")
    ] = None,
    isolated: Annotated[bool, typer.Option("--isolated", help="Ignore every settings file.")] = False,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs",
            "-j",
            help="Processes: traces analyzed at once, or the two parts of one large trace (0: one per CPU).",
        ),
    ] = 0,
    engine: Annotated[Engine, typer.Option(help="Where: local processes, or a Dask cluster (--scheduler).")] = (
        Engine.local
    ),
    scheduler: Annotated[
        str | None, typer.Option(help="Dask scheduler address (tcp://host:8786), for --engine dask.")
    ] = None,
    storage_options: Annotated[
        str | None,
        typer.Option("--storage-options", help="fsspec options for URLs, as a JSON object (credentials, endpoint)."),
    ] = None,
    storage_option: Annotated[
        list[str] | None,
        typer.Option("--storage-option", help="One fsspec option for URLs, KEY=VALUE (repeat it; over the JSON)."),
    ] = None,
    allow_special_files: AllowSpecial = False,
    follow: Annotated[
        bool, typer.Option("--follow", help="Read the trace as it grows; findings on stderr as found; Ctrl-C ends.")
    ] = False,
    follow_timeout: Annotated[
        float | None,
        duration_option("--follow-timeout", "With --follow: end after this long without a new line (30s).", None),
    ] = None,
) -> None:
    """Rebuild both conversations of each trace and report every anomaly with the lines that prove it."""
    allow_special(allow_special_files)
    settings = project_settings(config_file, isolated)
    given = Given(ctx, settings)
    select = given("select", select)
    ignore = given("ignore", ignore)
    level = FailOn(given("fail_on", fail_on)).value
    strict = given("strict", strict)
    baseline = given("baseline", baseline)
    rules = tuple(select_rules(split_names(select), split_names(ignore)))
    config = given.config(**thresholds)
    if write_baseline and baseline is None:
        raise UsageError("--write-baseline writes the file --baseline names; give --baseline FILE")
    options = storage_options_of(storage_options, storage_option)
    side = {"json": json_path, "sarif": sarif_path, "junit": junit_path, "html": html_path, "markdown": markdown_path}
    named = local_inputs(paths)
    refuse_overwrite(named, [output, *side.values(), baseline if write_baseline else None])
    fmt = output_format(format, output)
    known = None if write_baseline or baseline is None else load_baseline(baseline)
    html_data = None
    if follow:
        traces = [follow_trace(paths, config, rules, max_line_bytes, follow_timeout)]
    else:
        more = f" and {len(paths) - 1} more" if len(paths) > 1 else ""
        with working(f"analyzing {paths[0]}{more}") as progress:
            if html_path is not None and engine is Engine.local:
                traces, html_data = analyze_with_page_data(paths, config, rules, max_line_bytes, options)
            else:
                traces = analyze_many(paths, config, rules, max_line_bytes, jobs, engine, scheduler, options, progress)
    report = Report(traces, config, rules)
    if write_baseline:
        assert baseline is not None
        from ..report import baseline as baselines

        written(baseline, lambda: write_replacing(baseline, baselines.render(report)))
        say(f"rtrace analyze: {len(report.findings)} findings written to the baseline {baseline}")
        raise typer.Exit(ExitCode.OK)
    if known is not None:
        from ..report import baseline as baselines

        report = baselines.apply(report, known)
    write_report(report, fmt, output, quiet=quiet, statistics=statistics, max_line_bytes=max_line_bytes)
    write_side_outputs(report, {k: v for k, v in side.items() if v is not None}, max_line_bytes, html_data)
    for trace in traces:
        if trace.events == 0 and not trace.unreadable:
            say(f"{trace.path}: no usable event", style="red")
    raise typer.Exit(exit_code_for(report, level, strict))


def follow_trace(
    paths: list[Path], config: Config, rules: tuple, max_line_bytes: int, idle: float | None
) -> TraceReport:
    """`analyze --follow`: one file, folded as it grows (`engine.live`) until Ctrl-C or `idle` seconds without a
    new line; each finding is printed to stderr as it becomes certain."""
    import signal
    import threading

    from ..engine.live import FollowFile, finding_line, fold_live
    from ..report.console import stderr_console

    if len(paths) != 1 or str(paths[0]) == "-" or paths[0].is_dir():
        raise UsageError("--follow reads one trace file")
    if idle is not None and idle <= 0:
        raise UsageError("--follow-timeout must be a time above 0, e.g. 30s")
    err = stderr_console()
    stop = threading.Event()
    try:
        stream = FollowFile(paths[0], stop, idle)
    except OSError as e:
        raise UnreadableInput(f"{paths[0]}: {e.strerror or e}") from None
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())  # Ctrl-C ends the trace, which is then reported
    try:
        reader = TraceReader(stream, str(paths[0]), max_line_bytes=max_line_bytes)  # type: ignore[arg-type]
        return fold_live(reader, lambda f, at_end: err.print(finding_line(f, at_end), markup=False), config, rules)
    finally:
        signal.signal(signal.SIGINT, previous)
        stream.close()


REPORT_EXAMPLES = """Examples:
  rtrace report session.jsonl -o bug.md         # Markdown with sequence diagrams, for an issue
  rtrace report session.jsonl -o bug.html       # one file, step through every event
  rtrace report session.jsonl -o bug.md --minimize   # and the fewest lines that still show each finding"""


@app.command(epilog=verbatim(REPORT_EXAMPLES))
def report(
    ctx: typer.Context,
    paths: Annotated[list[Path], typer.Argument(help="Trace files, or directories of *.jsonl traces.")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here; the extension picks the format.")
    ] = None,
    format: Annotated[str | None, typer.Option("--format", "-f", help="markdown, html, json, sarif or junit.")] = None,
    select: Annotated[list[str] | None, typer.Option(help="Only these rules (ids or slugs, comma-separated).")] = None,
    ignore: Annotated[list[str] | None, typer.Option(help="Skip these rules (ids or slugs, comma-separated).")] = None,
    max_line_bytes: Annotated[int, typer.Option(help="Longer lines are skipped.")] = DEFAULT_MAX_LINE_BYTES,
    allow_special_files: AllowSpecial = False,
    minimize: Annotated[
        bool, typer.Option(help="Also a minimal reproducer per rule found (files beside -o; quoted in Markdown).")
    ] = False,
    config_file: Annotated[
        Path | None, typer.Option("--config", help="Settings from this file (rtrace.toml or pyproject.toml).")
    ] = None,
    isolated: Annotated[bool, typer.Option("--isolated", help="Ignore every settings file.")] = False,
) -> None:
    """Write a report to attach to a bug: Markdown with sequence diagrams, or a one-file HTML step-through view.

    Exit 0 when written (findings or not; `analyze` is the check), 3 when a trace cannot be read."""
    allow_special(allow_special_files)
    fmt = file_format(format, output)
    settings = Given(ctx, project_settings(config_file, isolated))
    rules = tuple(select_rules(split_names(settings("select", select)), split_names(settings("ignore", ignore))))
    config = settings.config()
    given = trace_paths(paths)
    refuse_overwrite(given, [output])
    html_data = None
    with working(f"reading {len(given)} trace{'s' if len(given) != 1 else ''}"):
        if fmt is ReportFormat.html:  # the page data comes from the analysis itself: one reading of each trace
            from ..report import html

            folded = [html.analyze(p, config, rules, max_line_bytes) for p in given]
            traces = [trace for trace, _ in folded]
            html_data = [data for _, data in folded]
        else:
            from ..engine.parallel import analyze_file

            traces = [analyze_file(p, config, rules, max_line_bytes) for p in given]
    result = Report(traces, config, rules)
    if output is not None and all(t.unreadable or t.events == 0 for t in traces):  # nothing to report: no file
        for t in traces:
            say(f"rtrace: {t.unreadable or t.path + ': no usable event'}; {output} is not written")
        raise typer.Exit(ExitCode.UNREADABLE)
    if minimize:
        if output is None and fmt is not ReportFormat.markdown:
            raise UsageError("--minimize writes its reproducers beside --output; give -o (or Markdown to stdout)")
        write_bytes(report_with_reproducers(result, fmt, output, max_line_bytes), output)
    else:  # rendered once, whole or not at all
        write_report(result, fmt, output, max_line_bytes=max_line_bytes, html_data=html_data)
    if output is not None:
        count, findings = len(traces), len(result.findings)
        say(f"rtrace report: {fmt.value} of {count} trace{'s' if count != 1 else ''}, {findings} findings -> {output}")
    if any(t.unreadable or t.events == 0 for t in traces):
        for t in traces:
            if t.unreadable or t.events == 0:
                say(f"rtrace: {t.unreadable or t.path + ': no usable event'}")
        raise typer.Exit(ExitCode.UNREADABLE)


def report_with_reproducers(report: Report, fmt: "ReportFormat", output: Path | None, max_line_bytes: int) -> bytes:
    """`report --minimize`: a reproducer per trace and rule found (`transform.minimize`), written beside `output`
    as `STEM.min-RULE.jsonl` (`STEM.K.min-RULE.jsonl` for the Kth of several traces; a temporary folder without
    `output`); Markdown quotes each."""
    import tempfile

    from ..report import markdown
    from ..report.outputs import render_bytes
    from ..transform import minimize as mz

    data = render_bytes(report, fmt, max_line_bytes)
    with tempfile.TemporaryDirectory(prefix="rtrace-min-") as tmp:
        folder, stem = (output.parent, output.stem) if output is not None else (Path(tmp), "report")
        made: list[tuple[str, str, int, str, str]] = []
        for k, trace in enumerate(report.traces, start=1):
            for rule_id in dict.fromkeys(f.rule for f in trace.findings):
                found = mz.minimize(trace.path, find_rule(rule_id), report.config, max_line_bytes=max_line_bytes)
                name = f"{stem}.{k}.min-{rule_id}.jsonl" if len(report.traces) > 1 else f"{stem}.min-{rule_id}.jsonl"
                try:
                    with open(folder / name, "wb") as out:
                        mz.write(found, out, max_line_bytes=max_line_bytes)
                except OSError as e:
                    raise UsageError(f"{folder / name}: cannot write: {e.strerror or e}") from None
                made.append((trace.path, rule_id, found.records, str(folder / name), name))
        if fmt is ReportFormat.markdown and made:
            data = data.rstrip(b"\n") + b"\n\n" + markdown.render_reproducers(made).encode("utf-8")
    return data


SHOW_EXAMPLES = """Examples:
  rtrace show session.jsonl                     # both conversations at the end
  rtrace show session.jsonl --at 45             # after line 45 (a witness line of a finding)
  rtrace show session.jsonl --conn 2            # the event timeline of connection 2"""


@app.command(epilog=verbatim(SHOW_EXAMPLES))
def show(
    path: Annotated[Path, typer.Argument(help="A trace file.")],
    at: Annotated[int | None, typer.Option(help="Show the state after this line (default: the end).")] = None,
    conn: Annotated[int | None, typer.Option(help="Only this connection; without --at, its event timeline.")] = None,
    max_line_bytes: Annotated[int, typer.Option(help="Longer lines are skipped.")] = DEFAULT_MAX_LINE_BYTES,
    allow_special_files: AllowSpecial = False,
) -> None:
    """Both conversations side by side at a line, or the timeline of one connection."""
    allow_special(allow_special_files)
    from ..engine.fold import state_at
    from ..report import show as show_view
    from ..report.console import stdout_console

    if at is not None and at < 1:
        raise UsageError(f"--at {at}: lines count from 1")
    if conn is not None and conn < 1:
        raise UsageError(f"--conn {conn}: connections count from 1")
    console = stdout_console()
    with TraceReader.open(path, max_line_bytes=max_line_bytes) as reader:
        if conn is not None and at is None:
            conns = show_view.render_timeline(reader.rows(), conn, console)
            count = reader.count
        else:
            state = state_at(reader, at)
            count, conns = reader.count, set(state.conns)
            if count and at is not None and at > reader.lines:
                raise UsageError(f"--at {at}: {path} has {reader.lines} lines")
            if count and (conn is None or conn in conns):
                shown_at = state.last_line if at is None else at
                show_view.render_state(state, shown_at, console, [conn] if conn else None)
    for problem in reader.problems[:20]:
        say(str(problem), style="yellow")
    if count == 0:
        say(f"{path}: {reader.unusable or 'no usable event'}", style="red")
        raise typer.Exit(ExitCode.UNREADABLE)
    if conn is not None and conn not in conns:
        has = f"connections 1 to {max(conns)}" if len(conns) > 1 else "one connection (1)"
        raise UsageError(f"--conn {conn}: {path} has {has}" + (f" up to line {at}" if at is not None else ""))


RULES_EXAMPLES = """Examples:
  rtrace rules                                  # every rule: id, slug, severity
  rtrace rules RT101                            # what it means, why it matters, the fix"""


@app.command(epilog=verbatim(RULES_EXAMPLES))
def rules(
    name: Annotated[str | None, typer.Argument(help="A rule id or slug to explain.")] = None,
) -> None:
    """List the rules, or explain one."""
    from ..report.console import stdout_console

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
