"""The `rtrace` command line: thin typer commands over the library. `main` maps every error to an exit code."""

import os
import sys
from collections.abc import Callable
from enum import Enum, IntEnum
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from . import __version__
from .core.loader import DEFAULT_MAX_LINE_BYTES, TraceReader, UnreadableInput
from .engine.fold import Report, TraceReport
from .net.examples import EXAMPLE_SCRIPT, EXAMPLE_TOOL
from .rules import RULES, UnknownRule, find_rule, select_rules
from .rules.base import SEVERITY_RANK, Config

if TYPE_CHECKING:
    from .net.server import ServerOptions
    from .report.outputs import ReportFormat


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


class Engine(str, Enum):
    local = "local"
    dask = "dask"


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
    console = Console(highlight=False, soft_wrap=False, emoji=False)
    if not console.is_terminal:
        console = Console(highlight=False, soft_wrap=False, width=120, emoji=False)
    return console


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)  # `file:100:1` is not :100:


#: Longest message shown (a path or a value quoted in it is user input of any length).
MESSAGE_LIMIT = 2000


def shown(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """Text that may quote user input (a path, a URL, an option value, trace text), fit for a terminal
    (`core.escape.shown`: secrets scrubbed, control characters, ESC and bidi overrides as escapes, cut). Every
    message of the CLI goes through here, by `say` or `EscapedLines`."""
    from .core.escape import shown as escaped

    return escaped(text, limit)


def say(text: str, style: str | None = None, console: Console | None = None) -> None:
    """One message on stderr (or `console`), through `shown`."""
    (console or stderr_console()).print(shown(text), style=style, markup=False, highlight=False)


class EscapedLines:
    """A text stream that passes each line written to it through `shown` (for the `print`s of `serve`, `record`)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._partial = ""

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            self._stream.write(shown(line) + "\n")
        return len(text)

    def flush(self) -> None:
        self._stream.flush()


#: `--allow-special-files`, on every command that reads a trace by name.
AllowSpecial = Annotated[
    bool,
    typer.Option(
        "--allow-special-files", help="Also read FIFOs and devices by name (lines still bounded by --max-line-bytes)."
    ),
]


def allow_special(allowed: bool) -> None:
    """Let every reader of this run (other processes included) open FIFOs and devices (`loader.open_input`)."""
    if allowed:
        from .core.loader import ALLOW_SPECIAL_ENV

        os.environ[ALLOW_SPECIAL_ENV] = "1"


def _split(values: list[str] | None) -> list[str]:
    return [v.strip() for value in values or [] for v in value.split(",") if v.strip()]


def refuse_overwrite(inputs: list[str], outputs: list[Path | str | None]) -> None:
    """A usage error when an output is one of the inputs (or two outputs are one file): no command writes over
    what it reads."""
    from .core.writer import same_file

    outs = [str(o) for o in outputs if o is not None and str(o) != "-"]
    for out in outs:
        for given in inputs:
            if given not in ("-", "<stdin>") and "://" not in given and same_file(out, given):
                raise UsageError(f"{out}: is the input {given}; rtrace never writes over its input (choose another)")
    for k, a in enumerate(outs):
        for b in outs[k + 1 :]:
            if same_file(a, b):
                raise UsageError(f"{a} and {b}: one file given for two outputs")


def local_inputs(paths: list[Path]) -> list[str]:
    """The local files among the traces the command line names (directories expanded; `file://` URLs as paths):
    what `refuse_overwrite` compares the outputs with (a remote URL is never a local output)."""
    from .engine.parallel import url_of

    out: list[str] = []
    for path in paths:
        url = url_of(path)
        if url.startswith("file://"):
            out.append(url[len("file://") :])
        elif "://" not in url:
            out.extend(trace_paths([Path(url)]))
    return out


def stop_on_sigterm() -> None:
    """Until the event loop installs its own handler, SIGTERM stops a server like Ctrl-C (its trace closed, exit
    0), not the default way (killed mid-line)."""
    import signal

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def bind_host(host: str) -> str:
    """The one address `--host` names: an IP address as given, a name resolved to its first address. (An empty
    host, or a name with several addresses, would bind several sockets, each on its own free port, and the URL
    printed would reach only one of them.)"""
    import ipaddress
    import socket

    if not host.strip() or host != host.strip() or "," in host:
        raise UsageError(f"--host must name one address to bind, not {host!r} (127.0.0.1 by default, 0.0.0.0 for all)")
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as e:
        raise UsageError(f"--host {host!r}: cannot resolve it ({e})") from None
    return str(infos[0][4][0])


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


def storage_options_of(text: str | None, pairs: list[str] | None) -> dict[str, Any]:
    """fsspec storage options from `--storage-options JSON` and then each `--storage-option KEY=VALUE` (a string;
    `true`/`false` are booleans). Messages never repeat a value: it may be a secret."""
    import orjson

    out: dict[str, Any] = {}
    if text:
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            raise UsageError("--storage-options is not valid JSON") from None
        if not isinstance(value, dict):
            raise UsageError("--storage-options must be a JSON object")
        out.update(value)
    for k, pair in enumerate(pairs or [], 1):
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--storage-option number {k} is not KEY=VALUE")
        out[key.strip()] = {"true": True, "false": False}.get(value.lower(), value)
    return out


def inputs(paths: list[Path], storage_options: dict[str, Any]) -> list[tuple[str, int]]:
    """The traces the command line names, with their sizes: files as given, directories expanded to their
    `*.jsonl` files, fsspec URLs and globs listed by their backend (`parallel.expand_urls`)."""
    from .engine import parallel

    out: list[tuple[str, int]] = []
    for path in paths:
        url = parallel.url_of(path)
        if "://" in url:
            out.extend(parallel.expand_urls([url], storage_options))
        else:
            out.extend(parallel.expand_urls(trace_paths([Path(url)])))
    return out


def analyze_many(
    paths: list[Path],
    config: Config,
    rules: tuple,
    max_line_bytes: int,
    jobs: int,
    engine: Engine,
    scheduler: str | None,
    storage_options: dict[str, Any],
) -> list[TraceReport]:
    from .engine import parallel

    if jobs < 0:
        raise UsageError("--jobs must be 0 (one per CPU) or more")
    if engine is Engine.dask and not scheduler:
        raise UsageError("--engine dask needs --scheduler ADDRESS")
    found = inputs(paths, storage_options)
    try:
        if engine is Engine.local:
            return parallel.analyze_local([p for p, _ in found], config, rules, max_line_bytes, jobs, storage_options)
        if any(p == "-" for p, _ in found):
            raise UsageError("stdin (-) cannot be sent to a Dask cluster")
        urls = [p if "://" in p else os.path.abspath(p) for p, _ in found]
        sizes = [size for _, size in found]
        assert scheduler is not None
        return parallel.analyze_dask(urls, config, rules, max_line_bytes, scheduler, storage_options, sizes)
    except parallel.EngineUnavailable as e:
        raise UsageError(str(e)) from None


def exit_code_for(report: Report, fail_on: FailOn, strict: bool) -> ExitCode:
    if any(t.unreadable or t.events == 0 for t in report.traces):
        return ExitCode.UNREADABLE
    if strict and any(t.problem_count for t in report.traces):
        return ExitCode.UNREADABLE
    if any(t.failed_rules for t in report.traces):
        return ExitCode.FINDINGS  # a rule failed on this input: the analysis is incomplete, never "clean"
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
    reply_timeout: Annotated[
        float, typer.Option(help="Seconds after a function_call_output within which a response must be asked for.")
    ] = 10.0,
    max_line_bytes: Annotated[int, typer.Option(help="Longer lines are skipped.")] = DEFAULT_MAX_LINE_BYTES,
    json_path: Annotated[Path | None, typer.Option("--json", help="Also write the JSON report here.")] = None,
    sarif_path: Annotated[Path | None, typer.Option("--sarif", help="Also write a SARIF 2.1.0 report here.")] = None,
    junit_path: Annotated[Path | None, typer.Option("--junit", help="Also write a JUnit XML report here.")] = None,
    html_path: Annotated[Path | None, typer.Option("--html", help="Also write the HTML report here.")] = None,
    markdown_path: Annotated[Path | None, typer.Option("--markdown", help="Also write Markdown here.")] = None,
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
        float | None, typer.Option(help="With --follow: end after this many seconds without a new line.")
    ] = None,
) -> None:
    """Rebuild both conversations of each trace and report every anomaly with the lines that prove it."""
    allow_special(allow_special_files)
    rules = tuple(select_rules(_split(select), _split(ignore)))
    config = Config(ack_timeout=ack_timeout, burst_window=burst_window, reply_timeout=reply_timeout)
    options = storage_options_of(storage_options, storage_option)
    side = {"json": json_path, "sarif": sarif_path, "junit": junit_path, "html": html_path, "markdown": markdown_path}
    refuse_overwrite(local_inputs(paths), [output, *side.values()])
    if follow:
        traces = [follow_trace(paths, config, rules, max_line_bytes, follow_timeout)]
    else:
        traces = analyze_many(paths, config, rules, max_line_bytes, jobs, engine, scheduler, options)
    report = Report(traces, config, rules)
    write_report(report, format, output)
    write_side_outputs(report, {k: v for k, v in side.items() if v is not None}, max_line_bytes)
    for trace in traces:
        if trace.events == 0 and not trace.unreadable:
            say(f"{trace.path}: no usable event", style="red")
    raise typer.Exit(exit_code_for(report, fail_on, strict))


def follow_trace(
    paths: list[Path], config: Config, rules: tuple, max_line_bytes: int, idle: float | None
) -> TraceReport:
    """`analyze --follow`: one file, folded as it grows (`engine.live`) until Ctrl-C or `idle` seconds without a
    new line; each finding is printed to stderr as it becomes certain."""
    import signal
    import threading

    from .engine.live import FollowFile, finding_line, fold_live

    if len(paths) != 1 or str(paths[0]) == "-" or paths[0].is_dir():
        raise UsageError("--follow reads one trace file")
    if idle is not None and idle <= 0:
        raise UsageError("--follow-timeout must be a positive number of seconds")
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


def write_side_outputs(
    report: Report, paths: dict[str, Path], max_line_bytes: int, html_data: list | None = None
) -> None:
    from .report.outputs import ReportFormat, write_outputs

    try:
        write_outputs(report, [(ReportFormat(k), p) for k, p in paths.items()], max_line_bytes, html_data)
    except OSError as e:
        raise UsageError(f"{e.filename or ''}: cannot write: {e.strerror or e}") from None


@app.command()
def report(
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
) -> None:
    """Write a report to attach to a bug: Markdown with sequence diagrams, or a one-file HTML step-through view.

    Exit 0 when written (findings or not; `analyze` is the check), 3 when a trace cannot be read."""
    allow_special(allow_special_files)
    from .report.outputs import ReportFormat, format_for_path, render_bytes

    if format is not None:
        try:
            fmt = ReportFormat({"md": "markdown", "xml": "junit"}.get(format.lower(), format.lower()))
        except ValueError:
            raise UsageError(f"unknown report format {format!r} (markdown, html, json, sarif, junit)") from None
    elif output is not None:
        found = format_for_path(output)
        if found is None:
            raise UsageError(f"{output}: cannot tell the format from the extension; use --format")
        fmt = found
    else:
        fmt = ReportFormat.markdown
    rules = tuple(select_rules(_split(select), _split(ignore)))
    config = Config()
    given = trace_paths(paths)
    refuse_overwrite(given, [output])
    html_data = None
    if fmt is ReportFormat.html:  # the page data comes from the analysis itself: one reading of each trace
        from .report import html

        folded = [html.analyze(p, config, rules, max_line_bytes) for p in given]
        traces = [trace for trace, _ in folded]
        html_data = [data for _, data in folded]
    else:
        from .engine.parallel import analyze_file

        traces = [analyze_file(p, config, rules, max_line_bytes) for p in given]
    result = Report(traces, config, rules)
    if minimize:
        if output is None and fmt is not ReportFormat.markdown:
            raise UsageError("--minimize writes its reproducers beside --output; give -o (or Markdown to stdout)")
        data = report_with_reproducers(result, fmt, output, max_line_bytes)
    else:
        data = render_bytes(result, fmt, max_line_bytes, html_data)
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    elif minimize:
        from .core.writer import write_replacing

        try:
            write_replacing(output, data)
        except OSError as e:
            raise UsageError(f"{e.filename or output}: cannot write: {e.strerror or e}") from None
    else:
        write_side_outputs(result, {fmt.value: output}, max_line_bytes, html_data)
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

    from .report import markdown
    from .report.outputs import ReportFormat, render_bytes
    from .transform import minimize as mz

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


def write_report(report: Report, format: OutputFormat, output: Path | None) -> None:
    from .core.writer import write_replacing

    if format is OutputFormat.json:
        from .report import json_report

        data = json_report.render(report)
        if output is None:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        else:
            _written(output, lambda: write_replacing(output, data))
        return
    from .report import terminal

    if output is None:
        terminal.render(report, stdout_console())
    else:
        import io

        text = io.StringIO()
        terminal.render(report, Console(file=text, width=120, color_system=None, highlight=False))
        _written(output, lambda: write_replacing(output, text.getvalue().encode("utf-8")))


def _written(output: Path, write: Callable[[], None]) -> None:
    try:
        write()
    except OSError as e:
        raise UsageError(f"{e.filename or output}: cannot write: {e.strerror or e}") from None


@app.command()
def show(
    path: Annotated[Path, typer.Argument(help="A trace file.")],
    at: Annotated[int | None, typer.Option(help="Show the state after this line (default: the end).")] = None,
    conn: Annotated[int | None, typer.Option(help="Only this connection; without --at, its event timeline.")] = None,
    max_line_bytes: Annotated[int, typer.Option(help="Longer lines are skipped.")] = DEFAULT_MAX_LINE_BYTES,
    allow_special_files: AllowSpecial = False,
) -> None:
    """Both conversations side by side at a line, or the timeline of one connection."""
    allow_special(allow_special_files)
    from .engine.fold import state_at
    from .report import show as show_view

    console = stdout_console()
    with TraceReader.open(path, max_line_bytes=max_line_bytes) as reader:
        if conn is not None and at is None:
            show_view.render_timeline(reader, conn, console)
            count = reader.count
        else:
            state = state_at(reader, at)
            count = reader.count
            show_view.render_state(state, state.last_line if at is None else at, console, [conn] if conn else None)
    for problem in reader.problems[:20]:
        say(str(problem), style="yellow")
    if count == 0:
        say(f"{path}: no usable event", style="red")
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


@app.command()
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
    from .transform.redact import RedactOptions, redact_file

    refuse_overwrite([str(path)], [output])
    err = stderr_console()
    options = RedactOptions(user_text, audio, tool_output, max_line_bytes)

    def dropped(line: int, reason: str) -> None:
        say(f"{path}:{line}:1: {reason}; line dropped (a placeholder note keeps the numbering)", console=err)

    try:
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


@app.command("minimize")
def minimize_command(
    path: Annotated[Path, typer.Argument(help="The trace with the finding.")],
    rule: Annotated[str, typer.Option("--rule", "-r", help="The rule (id or slug) whose finding must still hold.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Write the reproducer here.")],
    max_line_bytes: Annotated[int, typer.Option(help="Longer lines are skipped.")] = DEFAULT_MAX_LINE_BYTES,
) -> None:
    """The fewest records of a trace in which a rule's finding still holds (delta debugging over connections, turns
    and records, the protocol kept valid); writes them and prints their report."""
    import time

    from .engine.fold import analyze_path
    from .transform import minimize as mz

    found = find_rule(rule)
    if output.exists() and path.exists() and output.resolve() == path.resolve():
        raise UsageError(f"{output}: is the input; write the reproducer elsewhere")
    started = time.perf_counter()
    try:
        result = mz.minimize(path, found, max_line_bytes=max_line_bytes)
    except mz.NothingToMinimize as e:
        raise UsageError(str(e)) from None
    try:
        with output.open("wb") as out:
            written = mz.write(result, out, max_line_bytes=max_line_bytes)
    except OSError as e:
        raise UsageError(f"{e.filename or output}: cannot write: {e.strerror or e}") from None
    seconds = time.perf_counter() - started
    stderr_console().print(
        f"rtrace minimize: {result.records} records -> {written} lines ({found.id} {found.slug} holds; "
        f"{result.tests} candidates folded in {seconds:.2f} s) -> {output}",
        markup=False,
    )
    write_report(Report([analyze_path(output, max_line_bytes=max_line_bytes)], Config()), OutputFormat.terminal, None)


def _verbatim(text: str) -> str:
    """`text` shown as it is in a command's help: kept from rewrapping, brackets kept from rich markup."""
    return "\b\n" + "\n".join("  " + line.replace("[", "\\[") for line in text.splitlines())


# The fake endpoint's options, shared by `serve` and `sweep` (both go through `net.server.options_from_cli`).
_Spec = "TYPE[:ITEM_TYPE]"
SeedOpt = Annotated[int | None, typer.Option(help="Seed for the jitter and the tool arguments.")]
CloseAfterOpt = Annotated[int | None, typer.Option(help="Fault: close after N server events.")]
DropOnOpt = Annotated[list[str] | None, typer.Option(help=f"Fault: drop the socket when a client event is {_Spec}.")]
DropAfterOpt = Annotated[
    list[str] | None, typer.Option(help=f"Fault: drop the socket after a server event {_Spec}, e.g. response.done.")
]
CloseCodeOpt = Annotated[
    int | None, typer.Option(help="Close code of the faults: 1006 no close frame (drops), 1000, 1001, 1011, ...")
]
FailResponseOpt = Annotated[list[int] | None, typer.Option(help="Fault: the connection's Nth response fails.")]
ErrorOnOpt = Annotated[list[str] | None, typer.Option(help=f"Fault: answer {_Spec} with an error.")]
ExpireAfterOpt = Annotated[str | None, typer.Option(help="Fault: session_expired, close 1001 after this.")]
FaultTimesOpt = Annotated[int, typer.Option(help="Times each fault fires per server (0: every time).")]
ToolOpt = Annotated[
    str | None, typer.Option(help="Call this tool on each user turn: NAME, or NAME='{\"k\": 1}' for its arguments.")
]
AudioToneOpt = Annotated[float | None, typer.Option(help="Output audio: a tone of this many Hz (0: silence).")]
AudioPaceOpt = Annotated[
    float | None, typer.Option(help="Output audio pace: 0 all at once (default), 1 real time, 0.5 twice as fast.")
]
TranscriptOpt = Annotated[
    list[str] | None, typer.Option(help="What the user says in each audio turn (server VAD), in order.")
]
VadThresholdOpt = Annotated[
    float | None, typer.Option(help="Server VAD: RMS of a speech frame, fraction of full scale (0.02).")
]
LiveOpt = Annotated[
    bool | None, typer.Option(help="Print each finding to stderr as it becomes certain (default: on a terminal).")
]
ScriptOpt = Annotated[
    Path | None, typer.Option(help="A scenario script (TOML): turns that answer, call, fail, close, delay.")
]


@app.command(
    epilog="A script (the schema: README, or the docstring of rtrace.net.script):\n\n"
    + _verbatim(EXAMPLE_SCRIPT)
    + "\n\nA custom tool, called on each user turn:\n\n"
    + _verbatim(EXAMPLE_TOOL)
)
def serve(
    latency: Annotated[
        list[str] | None, typer.Option(help="Delay of server events: 50ms, or TYPE=120ms for one event type.")
    ] = None,
    jitter: Annotated[str, typer.Option(help="Random +/- variation of each delay (order is kept).")] = "0",
    seed: SeedOpt = None,
    record: Annotated[Path | None, typer.Option(help="Write every event received and sent to this trace.")] = None,
    from_trace: Annotated[
        Path | None, typer.Option("--from", help="Take the responses, in order and paced, from this trace.")
    ] = None,
    host: Annotated[str, typer.Option(help="Address to bind (not loopback: a warning is printed).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0: a free one).")] = 0,
    close_after: CloseAfterOpt = None,
    drop_on: DropOnOpt = None,
    drop_after: DropAfterOpt = None,
    close_code: CloseCodeOpt = None,
    fail_response: FailResponseOpt = None,
    error_on: ErrorOnOpt = None,
    expire_after: ExpireAfterOpt = None,
    duplicate_id: Annotated[str, typer.Option(help="append_duplicate, ignore or reject.")] = "append_duplicate",
    story_chunk_delay: Annotated[str | None, typer.Option(help="Pause before each delta of a story.")] = None,
    fault_times: FaultTimesOpt = 1,
    tool: ToolOpt = None,
    audio_tone: AudioToneOpt = None,
    audio_pace: AudioPaceOpt = None,
    transcript: TranscriptOpt = None,
    vad_threshold: VadThresholdOpt = None,
    script: ScriptOpt = None,
    live: LiveOpt = None,
    exit_with_findings: Annotated[
        bool,
        typer.Option(
            "--exit-with-findings", help="At the end (SIGTERM, Ctrl-C): print the report; exit 1 on --fail-on findings."
        ),
    ] = False,
    fail_on: Annotated[FailOn, typer.Option(help="With --exit-with-findings: the severity that fails.")] = (
        FailOn.error
    ),
) -> None:
    """A fake realtime endpoint with injected latency and faults: its own tools, audio, server VAD, scripts.
    Prints the base URL (OPENAI_BASE_URL) and the full websocket URL, and waits."""
    from .net.server import options_from_cli, serve_main

    refuse_overwrite([str(from_trace)] if from_trace else [], [record])
    try:
        options = options_from_cli(
            host=bind_host(host), port=port, latency=latency, jitter=jitter, seed=seed,
            record=str(record) if record else None, from_trace=str(from_trace) if from_trace else None,
            close_after=close_after, drop_on=drop_on, fail_response=fail_response, error_on=error_on,
            expire_after=expire_after, duplicate_id=duplicate_id, story_chunk_delay=story_chunk_delay,
            fault_times=fault_times or None, tool=tool, drop_after=drop_after, close_code=close_code,
            audio_tone=audio_tone, audio_pace=audio_pace, transcript=transcript, vad_threshold=vad_threshold,
            script=str(script) if script else None,
        )  # fmt: skip
    except ValueError as e:
        raise UsageError(str(e)) from None
    from .net.common import scrubbed_logging

    stop_on_sigterm()
    scrubbed_logging(sys.stderr)
    live = sys.stderr.isatty() if live is None else live
    if live or exit_with_findings:
        serve_watched(options, live, fail_on if exit_with_findings else None)
    else:
        serve_main(options, EscapedLines(sys.stdout), EscapedLines(sys.stderr))  # type: ignore[arg-type]


def serve_watched(options: "ServerOptions", live: bool, fail_on: FailOn | None) -> None:
    """`serve --live` / `--exit-with-findings`: the recording folded as it is written (`net.live.watch`); at the
    end, with `fail_on`, the report on stdout and exit 1 on findings at that severity or above."""
    import dataclasses

    from .net.live import watch
    from .net.server import serve_main

    out: Any = EscapedLines(sys.stdout)
    err: Any = EscapedLines(sys.stderr)
    watched = watch(lambda path, tap: serve_main(dataclasses.replace(options, record=path, tap=tap), out, err),
                    options.record, live)  # fmt: skip
    if fail_on is None:
        return
    write_report(Report([watched.report], Config()), OutputFormat.terminal, None)
    if watched.trace is not None:
        print(f"rtrace serve: trace kept at {watched.trace}", flush=True)
    floor = SEVERITY_RANK.get(fail_on.value)
    if floor is not None and any(SEVERITY_RANK[f.severity] >= floor for f in watched.report.findings):
        raise typer.Exit(ExitCode.FINDINGS)


@app.command()
def sweep(
    command: Annotated[list[str], typer.Argument(help="The command to run, after --.")],
    latency: Annotated[str, typer.Option(help="Latencies to try, e.g. 0,10,50,200ms.")] = "0,10,50,200ms",
    runs: Annotated[int, typer.Option(help="Runs per latency.")] = 5,
    out: Annotated[Path, typer.Option(help="Directory for the recorded traces.")] = Path("rtrace-sweep"),
    timeout: Annotated[float, typer.Option(help="Seconds before a run is killed.")] = 300.0,
    seed: SeedOpt = None,
    close_after: CloseAfterOpt = None,
    drop_on: DropOnOpt = None,
    drop_after: DropAfterOpt = None,
    close_code: CloseCodeOpt = None,
    fail_response: FailResponseOpt = None,
    error_on: ErrorOnOpt = None,
    expire_after: ExpireAfterOpt = None,
    fault_times: FaultTimesOpt = 1,
    tool: ToolOpt = None,
    audio_tone: AudioToneOpt = None,
    audio_pace: AudioPaceOpt = None,
    transcript: TranscriptOpt = None,
    vad_threshold: VadThresholdOpt = None,
    script: ScriptOpt = None,
) -> None:
    """Run a command against a fresh `rtrace serve` at each latency (faults in each run); table of latency x rule.
    Exit 1 on errors."""
    from .net.server import options_from_cli
    from .net.sweep import sweep_main
    from .report.sweep import progress, render

    console = stdout_console()
    try:
        template = options_from_cli(
            seed=seed, close_after=close_after, drop_on=drop_on, drop_after=drop_after, close_code=close_code,
            fail_response=fail_response, error_on=error_on, expire_after=expire_after, fault_times=fault_times or None,
            tool=tool, audio_tone=audio_tone, audio_pace=audio_pace, transcript=transcript,
            vad_threshold=vad_threshold, script=str(script) if script else None,
        )  # fmt: skip
        result = sweep_main(command, latency, runs, out, timeout, lambda r: progress(r, console), template)
    except ValueError as e:
        raise UsageError(str(e)) from None
    console.print()
    render(result, console)
    raise typer.Exit(1 if result.has_errors() else 0)


@app.command()
def record(
    upstream: Annotated[str, typer.Option(help="The real endpoint, e.g. wss://api.openai.com/v1/realtime.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Write the trace here.")],
    port: Annotated[int, typer.Option(help="Local port (0: a free one).")] = 0,
    host: Annotated[str, typer.Option(help="Address to bind (not loopback: a warning is printed).")] = "127.0.0.1",
    keep_audio: Annotated[bool, typer.Option(help="Keep audio payloads (default: byte count and SHA-256).")] = False,
    live: LiveOpt = None,
) -> None:
    """A recording websocket proxy: point the client at the printed OPENAI_BASE_URL; Ctrl-C to stop."""
    from .net.proxy import RecordOptions, check_upstream, record_main

    bind_host(host)
    try:
        check_upstream(upstream)
    except ValueError as e:
        raise UsageError(str(e)) from None
    options = RecordOptions(upstream=upstream, output=output, host=host, port=port, keep_audio=keep_audio)
    out, err = EscapedLines(sys.stdout), EscapedLines(sys.stderr)
    stop_on_sigterm()
    try:
        if sys.stderr.isatty() if live is None else live:
            import dataclasses

            from .net.live import watch

            watch(lambda path, tap: record_main(dataclasses.replace(options, output=path, tap=tap), out, err),  # type: ignore[arg-type]
                  output, True)  # fmt: skip
        else:
            record_main(options, out, err)  # type: ignore[arg-type]
    except OSError as e:
        raise UsageError(f"{e.filename or output}: {e.strerror or e}") from None


@app.command()
def convert(
    path: Annotated[Path, typer.Argument(help="A HAR file, a JSON-array or JSONL event log, or a mitmproxy dump.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Write the native trace here.")],
    allow_special_files: AllowSpecial = False,
) -> None:
    """Convert another tool's capture to a native rtrace trace (secrets removed)."""
    allow_special(allow_special_files)
    from .core.importers import convert as convert_file
    from .core.importers import detect
    from .core.writer import Replacing

    refuse_overwrite([str(path)], [output])
    kind = detect(str(path))
    try:
        with Replacing(output) as out:
            count = convert_file(str(path), out, kind)
            if count == 0:
                raise UnreadableInput(f"{path}: no event to convert; {output} is not written")
    except OSError as e:
        raise UsageError(f"{e.filename or output}: {e.strerror or e}") from None
    say(f"rtrace convert: {count} records ({kind}) -> {output}")


@app.command()
def replay(
    path: Annotated[Path, typer.Argument(help="The recorded trace.")],
    target: Annotated[str, typer.Option(help="fake (an in-process rtrace serve) or a ws:// / wss:// URL.")] = "fake",
    compare: Annotated[str | None, typer.Option(help="With --target fake: also replay here and diff.")] = None,
    latency: Annotated[list[str] | None, typer.Option(help="Latency of the fake: 50ms, or TYPE=120ms.")] = None,
    pace: Annotated[str, typer.Option(help="reactive, recorded or asap.")] = "reactive",
    speed: Annotated[float, typer.Option(help="Time scale of the recorded pauses (2: twice as fast).")] = 1.0,
    timeout: Annotated[float, typer.Option(help="Seconds each wait for an answer may take.")] = 5.0,
    own_responses: Annotated[bool, typer.Option(help="The fake generates its own responses.")] = False,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Keep the replayed trace here.")] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(
            "--api-key-env",
            metavar="NAME",
            help="Send the key in this environment variable to --target/--compare (wss://, or ws:// on this machine).",
        ),
    ] = None,
    allow_special_files: AllowSpecial = False,
) -> None:
    """Send the client side of a trace again, record the answers, and show both traces' findings side by side."""
    allow_special(allow_special_files)
    from .net.common import check_ws_url, parse_latencies
    from .net.replay import ReplayFailed, ReplayOptions, check_key_target
    from .net.replay import compare as compare_replays
    from .net.replay import replay as run_replay
    from .report.replay import render

    refuse_overwrite([str(path)], [output])
    try:
        default, by_type = parse_latencies(latency or []) if latency else (None, {})
        options = ReplayOptions(
            target=target, pace=pace, speed=speed, timeout=timeout, latency=default, latency_by_type=by_type,
            recorded_responses=not own_responses, output=output, api_key_env=api_key_env,
            on_key=lambda text: say(f"rtrace replay: {text}"),
        )  # fmt: skip
        if pace not in ("reactive", "recorded", "asap") or speed <= 0:
            raise ValueError("--pace must be reactive, recorded or asap, and --speed positive")
        if compare is not None and target != "fake":
            raise ValueError("--compare needs --target fake")
        for option, url in (("--target", target), ("--compare", compare)):
            if url is not None and url != "fake":
                check_ws_url(url, option)
                check_key_target(url, api_key_env)
    except ValueError as e:
        raise UsageError(str(e)) from None
    console = stdout_console()

    def emit(text: str) -> None:
        say(text, console=console)

    try:
        if compare is not None:
            fake, real, diff = compare_replays(str(path), options, compare)
            render(fake, emit)
            render(real, emit)
            emit("where the fake answered differently:" if diff else "the fake answered like the endpoint")
            for line in diff:
                emit("  " + line)
            result = fake
        else:
            result = run_replay(str(path), options)
            render(result, emit)
            waits = sum(c.timeouts for c in result.conns)
            if waits or result.divergences:
                # The endpoint was slow or answered differently: what came back is not the recording's story.
                raise ReplayFailed(
                    f"{len(result.divergences)} divergence(s) from the recording, {waits} wait(s) over --timeout; "
                    + (f"the partial trace is kept in {result.replayed}" if output else "keep it with -o FILE")
                )
    except ReplayFailed as e:
        say(f"rtrace: replay failed: {e}")
        raise typer.Exit(ExitCode.REPLAY_FAILED) from None
    report = result.replay_report
    raise typer.Exit(ExitCode.FINDINGS if report and any(f.severity == "error" for f in report.findings) else 0)


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
        say(f"rtrace: unknown rule {e.args[0]!r} (see `rtrace rules`)")
        return ExitCode.USAGE
    except UsageError as e:
        say(f"rtrace: {e}")
        return ExitCode.USAGE
    except UnreadableInput as e:
        say(f"rtrace: {e}")
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
            import io

            text = io.StringIO()
            show(file=text)  # click's usage error quotes the value given: shown like every other message
            for line in text.getvalue().splitlines():
                sys.stderr.write(shown(line) + "\n")
            return code
        say(f"rtrace: internal error: {type(e).__name__}: {e}")
        if os.environ.get("RTRACE_DEBUG"):
            raise
        return 70
    return int(code) if isinstance(code, int) else ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())
