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
from .core.writer import write_replacing
from .engine.fold import Report, TraceReport
from .net.examples import EXAMPLE_SCRIPT, EXAMPLE_TOOL
from .report.console import plain_console, stderr_console, stdout_console
from .rules import RULES, UnknownRule, find_rule, select_rules
from .rules.base import SEVERITY_RANK, Config

if TYPE_CHECKING:
    from .engine.settings import Settings
    from .net.server import ServerOptions
    from .report.outputs import ReportFormat
    from .report.progress import Progress


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
    concise = "concise"
    github = "github"
    sarif = "sarif"
    junit = "junit"
    markdown = "markdown"
    html = "html"


#: What `-o FILE` writes, by the file's extension (anything else needs `--format`).
OUTPUT_SUFFIXES = {".txt": OutputFormat.terminal, ".log": OutputFormat.terminal}


app = typer.Typer(
    add_completion=True,
    no_args_is_help=True,
    help="Trace analyzer and race detector for realtime LLM websocket sessions.",
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)




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


def _verbatim(text: str) -> str:
    """`text` shown as it is in a command's help: kept from rewrapping, brackets kept from rich markup."""
    return "\b\n" + "\n".join("  " + line.replace("[", "\\[") for line in text.splitlines())


def working(what: str) -> "Progress":
    """A spinner with the time spent on stderr, drawn only on a terminal once the work lasts a second
    (`report.progress`); `with working("redacting x"): ...`."""
    from .report.progress import Progress

    return Progress(what)


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


def duration_option(option: str, help: str, default: str | None) -> Any:
    """`typer.Option` of a duration, in the one grammar (`rtrace.core.durations`: `50ms`, `1.5s`, `2m`; a bare
    number other than 0 is a usage error naming the option and the fix). The command gets seconds; `--help`
    shows the default as written."""

    def parse(value: Any) -> float:
        from .core.durations import DurationError, parse_duration

        if isinstance(value, float):  # the default, already seconds
            return value
        try:
            return parse_duration(str(value), option)
        except DurationError as e:
            raise UsageError(str(e)) from None

    return typer.Option(
        option, parser=parse, metavar="DURATION", help=help, show_default=default if default is not None else False
    )


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
    """Files as given; directories expand to their `*.jsonl` files, plain or compressed (`loader.is_trace_name`:
    `*.jsonl.gz`, `.bz2`, `.xz`, `.zst`), sorted."""
    from .core.loader import is_trace_name

    out: list[str] = []
    for path in paths:
        if str(path) != "-" and path.is_dir():
            found = sorted(str(p) for p in path.rglob("*.jsonl*") if is_trace_name(p.name) and p.is_file())
            if not found:
                raise UsageError(f"{path}: no *.jsonl trace (plain or .gz, .bz2, .xz, .zst) in this directory")
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


ANALYZE_EXAMPLES = """Examples:
  rtrace analyze session.jsonl                  # the findings, with the lines that prove them
  rtrace analyze traces/ -f concise             # one line per finding
  rtrace analyze traces/ --statistics           # findings per rule
  rtrace analyze t.jsonl -o report.sarif        # format from the extension
  rtrace analyze t.jsonl --baseline known.json --write-baseline
Settings: [tool.rtrace] in pyproject.toml, or rtrace.toml (looked for upward)."""


@app.command(epilog=_verbatim(ANALYZE_EXAMPLES))
def analyze(
    ctx: typer.Context,
    paths: Annotated[list[Path], typer.Argument(help="Trace files, or directories of *.jsonl traces; - for stdin.")],
    format: Annotated[
        OutputFormat | None, typer.Option("--format", "-f", help="Output format (default: from -o, else terminal).")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the report here; the extension picks the format.")
    ] = None,
    fail_on: Annotated[FailOn, typer.Option(help="Exit 1 when a finding is at or above this severity.")] = FailOn.error,
    select: Annotated[list[str] | None, typer.Option(help="Only these rules (ids or slugs, comma-separated).")] = None,
    ignore: Annotated[list[str] | None, typer.Option(help="Skip these rules (ids or slugs, comma-separated).")] = None,
    strict: Annotated[bool, typer.Option(help="Treat input problems as errors (exit 3).")] = False,
    ack_timeout: Annotated[
        float, duration_option("--ack-timeout", "How long a create/delete/truncate may wait for its answer.", "5s")
    ] = 5.0,
    burst_window: Annotated[
        float, duration_option("--burst-window", "Client changes closer than this are one push (e.g. 10ms).", "10ms")
    ] = 0.010,
    reply_timeout: Annotated[
        float,
        duration_option("--reply-timeout", "How soon after a function_call_output a response must be asked.", "10s"),
    ] = 10.0,
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
    fail_on = FailOn(given("fail_on", fail_on))
    strict = given("strict", strict)
    baseline = given("baseline", baseline)
    rules = tuple(select_rules(_split(select), _split(ignore)))
    config = given.config(ack_timeout=ack_timeout, burst_window=burst_window, reply_timeout=reply_timeout)
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
        with working(f"analyzing {paths[0]}{more}"):
            if html_path is not None and engine is Engine.local:
                traces, html_data = analyze_with_page_data(paths, config, rules, max_line_bytes, options)
            else:
                traces = analyze_many(paths, config, rules, max_line_bytes, jobs, engine, scheduler, options)
    report = Report(traces, config, rules)
    if write_baseline:
        assert baseline is not None
        from .report import baseline as baselines

        _written(baseline, lambda: write_replacing(baseline, baselines.render(report)))
        say(f"rtrace analyze: {len(report.findings)} findings written to the baseline {baseline}")
        raise typer.Exit(ExitCode.OK)
    if known is not None:
        from .report import baseline as baselines

        report = baselines.apply(report, known)
    write_report(report, fmt, output, quiet=quiet, statistics=statistics, max_line_bytes=max_line_bytes)
    write_side_outputs(report, {k: v for k, v in side.items() if v is not None}, max_line_bytes, html_data)
    for trace in traces:
        if trace.events == 0 and not trace.unreadable:
            say(f"{trace.path}: no usable event", style="red")
    raise typer.Exit(exit_code_for(report, fail_on, strict))


def project_settings(config_file: Path | None, isolated: bool) -> "Settings":
    from .engine.settings import SettingsError, resolve

    if config_file is not None and isolated:
        raise UsageError("--config and --isolated exclude each other")
    try:
        return resolve(config_file, isolated)
    except SettingsError as e:
        raise UsageError(str(e)) from None


class Given:
    """An option's value: the command line's when given there, else the settings file's, else the default."""

    def __init__(self, ctx: typer.Context, settings: "Settings") -> None:
        self._ctx = ctx
        self._settings = settings

    def __call__(self, name: str, value: Any) -> Any:
        source = self._ctx.get_parameter_source(name)
        from_file = getattr(self._settings, name)
        if from_file is None or getattr(source, "name", "DEFAULT") not in ("DEFAULT", "DEFAULT_MAP"):
            return value
        return list(from_file) if isinstance(from_file, tuple) else from_file

    def config(self, **given: float) -> Config:
        """The rules' thresholds: `given` (the command's options, by field) where given on the command line, else
        the file's, else the default (a command without such an option has no source: the file's decides)."""
        defaults = Config()
        names = ("ack_timeout", "burst_window", "reply_timeout")
        return Config(**{name: self(name, given.get(name, getattr(defaults, name))) for name in names})


def load_baseline(path: Path) -> frozenset[str]:
    from .report.baseline import BaselineError, load

    try:
        return load(path)
    except BaselineError as e:
        raise UsageError(str(e)) from None


def output_format(format: OutputFormat | None, output: Path | None) -> OutputFormat:
    """The format `--format` names, or the one `-o`'s extension asks for; a usage error when the two disagree or
    the extension says nothing (writing terminal text into `out.json` is never what was meant)."""
    from .report.outputs import format_for_path

    if output is None or str(output) == "-":
        return format or OutputFormat.terminal
    by_name = format_for_path(output)
    implied = OutputFormat(by_name.value) if by_name is not None else OUTPUT_SUFFIXES.get(output.suffix.lower())
    if format is None:
        if implied is None:
            raise UsageError(
                f"-o {output}: cannot tell the format from the extension; name it .json, .sarif, .xml (JUnit), .md, "
                ".html or .txt, or give --format"
            )
        return implied
    if implied is not None and implied is not format and not (
        format in (OutputFormat.concise, OutputFormat.github) and implied is OutputFormat.terminal
    ):
        raise UsageError(f"-o {output} asks for {implied.value} but --format says {format.value}; make them agree")
    return format


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


def analyze_with_page_data(
    paths: list[Path], config: Config, rules: tuple, max_line_bytes: int, storage_options: dict[str, Any]
) -> tuple[list[TraceReport], list[Any] | None]:
    """`analyze --html`: each local trace read once, its HTML page data made by the analysis itself (as `report`
    does); remote traces are analyzed as without `--html` (the page then reads them again)."""
    found = [p for p, _ in inputs(paths, storage_options)]
    if any("://" in p for p in found):
        return analyze_many(paths, config, rules, max_line_bytes, 1, Engine.local, None, storage_options), None
    from .report import html

    folded = [html.analyze(p, config, rules, max_line_bytes) for p in found]
    return [trace for trace, _ in folded], [data for _, data in folded]


def write_side_outputs(
    report: Report, paths: dict[str, Path], max_line_bytes: int, html_data: list[Any] | None = None
) -> None:
    from .report.outputs import ReportFormat, write_outputs

    try:
        write_outputs(report, [(ReportFormat(k), p) for k, p in paths.items()], max_line_bytes, html_data)
    except OSError as e:
        raise UsageError(f"{e.filename or ''}: cannot write: {e.strerror or e}") from None


REPORT_EXAMPLES = """Examples:
  rtrace report session.jsonl -o bug.md         # Markdown with sequence diagrams, for an issue
  rtrace report session.jsonl -o bug.html       # one file, step through every event
  rtrace report session.jsonl -o bug.md --minimize   # and the fewest lines that still show each finding"""


@app.command(epilog=_verbatim(REPORT_EXAMPLES))
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
    settings = Given(ctx, project_settings(config_file, isolated))
    rules = tuple(select_rules(_split(settings("select", select)), _split(settings("ignore", ignore))))
    config = settings.config()
    given = trace_paths(paths)
    refuse_overwrite(given, [output])
    html_data = None
    with working(f"reading {len(given)} trace{'s' if len(given) != 1 else ''}"):
        if fmt is ReportFormat.html:  # the page data comes from the analysis itself: one reading of each trace
            from .report import html

            folded = [html.analyze(p, config, rules, max_line_bytes) for p in given]
            traces = [trace for trace, _ in folded]
            html_data = [data for _, data in folded]
        else:
            from .engine.parallel import analyze_file

            traces = [analyze_file(p, config, rules, max_line_bytes) for p in given]
    result = Report(traces, config, rules)
    if output is not None and all(t.unreadable or t.events == 0 for t in traces):  # nothing to report: no file
        for t in traces:
            say(f"rtrace: {t.unreadable or t.path + ': no usable event'}; {output} is not written")
        raise typer.Exit(ExitCode.UNREADABLE)
    if minimize:
        if output is None and fmt is not ReportFormat.markdown:
            raise UsageError("--minimize writes its reproducers beside --output; give -o (or Markdown to stdout)")
        data = report_with_reproducers(result, fmt, output, max_line_bytes)
    else:
        data = render_bytes(result, fmt, max_line_bytes, html_data)
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:  # the bytes rendered above, whole or not at all (never rendered a second time)
        _written(output, lambda: write_replacing(output, data))
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


def write_report(
    report: Report,
    format: OutputFormat,
    output: Path | None,
    quiet: bool = False,
    statistics: bool = False,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> None:
    """The report in `format` on stdout or into `output` (whole or not at all). `statistics`: the count per rule
    only; `quiet` (terminal): the concise lines of the findings only."""
    data: bytes | None = None
    if statistics:
        from .report.concise import statistics as per_rule

        data = per_rule(report).encode("utf-8")
    elif format is OutputFormat.json:
        from .report import json_report

        data = json_report.render(report)
    elif format is OutputFormat.concise or (quiet and format is OutputFormat.terminal):
        from .report import concise

        data = concise.render(report).encode("utf-8")
    elif format is OutputFormat.github:
        from .report import github

        data = github.render(report).encode("utf-8")
    elif format is not OutputFormat.terminal:
        from .report.outputs import ReportFormat, render_bytes

        data = render_bytes(report, ReportFormat(format.value), max_line_bytes)
    to_stdout = output is None or str(output) == "-"
    if data is None:
        from .report import terminal

        if to_stdout:
            terminal.render(report, stdout_console())
            return
        import io

        text = io.StringIO()
        terminal.render(report, plain_console(text))
        data = text.getvalue().encode("utf-8")
    if to_stdout:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        assert output is not None
        _written(output, lambda: write_replacing(output, data))


def _written(output: Path, write: Callable[[], None]) -> None:
    try:
        write()
    except OSError as e:
        raise UsageError(f"{e.filename or output}: cannot write: {e.strerror or e}") from None


SHOW_EXAMPLES = """Examples:
  rtrace show session.jsonl                     # both conversations at the end
  rtrace show session.jsonl --at 45             # after line 45 (a witness line of a finding)
  rtrace show session.jsonl --conn 2            # the event timeline of connection 2"""


@app.command(epilog=_verbatim(SHOW_EXAMPLES))
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

    if at is not None and at < 1:
        raise UsageError(f"--at {at}: lines count from 1")
    if conn is not None and conn < 1:
        raise UsageError(f"--conn {conn}: connections count from 1")
    console = stdout_console()
    with TraceReader.open(path, max_line_bytes=max_line_bytes) as reader:
        if conn is not None and at is None:
            conns = show_view.render_timeline(reader, conn, console)
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
        say(f"{path}: no usable event", style="red")
        raise typer.Exit(ExitCode.UNREADABLE)
    if conn is not None and conn not in conns:
        has = f"connections 1 to {max(conns)}" if len(conns) > 1 else "one connection (1)"
        raise UsageError(f"--conn {conn}: {path} has {has}" + (f" up to line {at}" if at is not None else ""))


RULES_EXAMPLES = """Examples:
  rtrace rules                                  # every rule: id, slug, severity
  rtrace rules RT101                            # what it means, why it matters, the fix"""


@app.command(epilog=_verbatim(RULES_EXAMPLES))
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


REDACT_EXAMPLES = """Examples:
  rtrace redact session.jsonl -o clean.jsonl    # keys and tokens removed
  rtrace redact session.jsonl -o clean.jsonl --user-text --audio   # for a public issue"""


@app.command(epilog=_verbatim(REDACT_EXAMPLES))
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


@app.command("minimize", epilog=_verbatim(MINIMIZE_EXAMPLES))
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
    from .core.writer import replacing_trace

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
    write_report(Report([analyze_path(output, max_line_bytes=max_line_bytes)], Config()), OutputFormat.terminal, None)


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
ExpireAfterOpt = Annotated[
    str | None, typer.Option(metavar="DURATION", help="Fault: session_expired, close 1001 after this long (10s).")
]
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


SERVE_EXAMPLES = """Examples:
  rtrace serve --latency 120ms --record session.jsonl        # then point the agent at the printed URL
  rtrace serve --drop-after response.done:function_call       # drop the socket while a tool runs
  rtrace serve --exit-with-findings --record session.jsonl   # exit 1 at the end if a race was seen"""


@app.command(
    epilog=_verbatim(SERVE_EXAMPLES)
    + "\n\nA script (the schema: README, or the docstring of rtrace.net.script):\n\n"
    + _verbatim(EXAMPLE_SCRIPT)
    + "\n\nA custom tool, called on each user turn:\n\n"
    + _verbatim(EXAMPLE_TOOL)
)
def serve(
    latency: Annotated[
        list[str] | None,
        typer.Option(metavar="DURATION", help="Delay of server events: 50ms, or TYPE=120ms for one server event type."),
    ] = None,
    jitter: Annotated[
        str, typer.Option(metavar="DURATION", help="Random +/- variation of each delay, e.g. 5ms (order is kept).")
    ] = "0",
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
    story_chunk_delay: Annotated[
        str | None, typer.Option(metavar="DURATION", help="Pause before each delta of a story (60ms).")
    ] = None,
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
    from .net.server import options_from_cli

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
    serve_watched(options, live, fail_on if exit_with_findings else None)


def serve_watched(options: "ServerOptions", live: bool, fail_on: FailOn | None) -> None:
    """`serve`: the recording folded as it is written (`net.live.watch`; a temporary trace without --record), a
    line per connection and a summary at the end on stderr (`net.live.ConnectionLog`), each finding as it is
    found with `live`; with `fail_on` (--exit-with-findings), the report on stdout at the end and exit 1 on
    findings at that severity or above."""
    import dataclasses

    from .net.live import ConnectionLog, watch
    from .net.server import serve_main

    out: Any = EscapedLines(sys.stdout)
    err: Any = EscapedLines(sys.stderr)
    log = ConnectionLog("rtrace serve", say)
    temporary = options.record is None

    def run(path: str, tap: Any) -> None:
        serve_main(dataclasses.replace(options, record=path, tap=tap), out, err, temporary)

    watched = watch(run, options.record, live, err, log=log)
    say(log.summary(watched.trace, temporary))
    if fail_on is None:
        return
    write_report(Report([watched.report], Config()), OutputFormat.terminal, None)
    if watched.trace is not None:
        print(f"rtrace serve: trace kept at {watched.trace}", flush=True)
    floor = SEVERITY_RANK.get(fail_on.value)
    if floor is not None and any(SEVERITY_RANK[f.severity] >= floor for f in watched.report.findings):
        raise typer.Exit(ExitCode.FINDINGS)


SWEEP_EXAMPLES = """Examples:
  rtrace sweep --latency 0,10,50,200ms --runs 5 -- python my_agent_test.py
  rtrace sweep --drop-after response.done -- npm test"""


@app.command(epilog=_verbatim(SWEEP_EXAMPLES))
def sweep(
    command: Annotated[list[str], typer.Argument(help="The command to run, after --.")],
    latency: Annotated[
        str,
        typer.Option(
            metavar="DURATIONS", help="Latencies to try: 0,10,50,200ms (the last item's unit goes to bare numbers)."
        ),
    ] = "0,10,50,200ms",
    runs: Annotated[int, typer.Option(help="Runs per latency.")] = 5,
    out: Annotated[Path, typer.Option(help="Directory for the recorded traces.")] = Path("rtrace-sweep"),
    timeout: Annotated[str, typer.Option(metavar="DURATION", help="A run is killed after this long.")] = "5m",
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
    Exit 1 on an error finding, 4 when the command failed in every run, 2 when it cannot be run."""
    from .net.server import options_from_cli
    from .net.sweep import sweep_main
    from .report.sweep import announce, failure, progress, render

    console = stdout_console()
    try:
        template = options_from_cli(
            seed=seed, close_after=close_after, drop_on=drop_on, drop_after=drop_after, close_code=close_code,
            fail_response=fail_response, error_on=error_on, expire_after=expire_after, fault_times=fault_times or None,
            tool=tool, audio_tone=audio_tone, audio_pace=audio_pace, transcript=transcript,
            vad_threshold=vad_threshold, script=str(script) if script else None,
        )  # fmt: skip
        result = sweep_main(command, latency, runs, out, timeout, lambda r: progress(r, console), template,
                            lambda options: announce(options, console))  # fmt: skip
    except ValueError as e:
        raise UsageError(str(e)) from None
    console.print()
    render(result, console)
    for line in failure(result):
        say(line)
    if result.has_errors():
        raise typer.Exit(ExitCode.FINDINGS)
    raise typer.Exit(ExitCode.REPLAY_FAILED if result.failed_every_run() else ExitCode.OK)


RECORD_EXAMPLES = """Examples:
  rtrace record --upstream wss://api.openai.com/v1/realtime -o session.jsonl
  OPENAI_BASE_URL=<printed URL> python my_agent.py    # in another shell"""


@app.command(epilog=_verbatim(RECORD_EXAMPLES))
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
        import dataclasses

        from .net.live import ConnectionLog, watch

        log = ConnectionLog("rtrace record", say)
        watched = watch(lambda path, tap: record_main(dataclasses.replace(options, output=path, tap=tap), out, err),  # type: ignore[arg-type]
                        output, sys.stderr.isatty() if live is None else live, err, log=log)  # type: ignore[arg-type]  # fmt: skip
        say(log.summary(watched.trace, False))
    except OSError as e:
        raise UsageError(f"{e.filename or output}: {e.strerror or e}") from None


CONVERT_EXAMPLES = """Examples:
  rtrace convert capture.har -o session.jsonl   # browser devtools export
  rtrace convert flows.mitm -o session.jsonl    # mitmdump -w (pip install 'rtrace-cli[mitmproxy]')"""


@app.command(epilog=_verbatim(CONVERT_EXAMPLES))
def convert(
    path: Annotated[Path, typer.Argument(help="A HAR, JSON-array or JSONL event log, mitmproxy dump or livekit log.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Write the native trace here.")],
    allow_special_files: AllowSpecial = False,
) -> None:
    """Convert another tool's capture to a native rtrace trace (secrets removed)."""
    allow_special(allow_special_files)
    from .core.importers import convert as convert_file
    from .core.importers import detect
    from .core.writer import replacing_trace

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


REPLAY_EXAMPLES = """Examples:
  rtrace replay session.jsonl                   # against an in-process fake, recorded answers
  rtrace replay session.jsonl --target fake --compare wss://example.test/v1/realtime"""


@app.command(epilog=_verbatim(REPLAY_EXAMPLES))
def replay(
    path: Annotated[Path, typer.Argument(help="The recorded trace.")],
    target: Annotated[str, typer.Option(help="fake (an in-process rtrace serve) or a ws:// / wss:// URL.")] = "fake",
    compare: Annotated[str | None, typer.Option(help="With --target fake: also replay here and diff.")] = None,
    latency: Annotated[
        list[str] | None, typer.Option(metavar="DURATION", help="Latency of the fake: 50ms, or TYPE=120ms.")
    ] = None,
    pace: Annotated[
        str, typer.Option(help="reactive (after what each event followed, plus its think time), recorded or asap.")
    ] = "reactive",
    speed: Annotated[
        float, typer.Option(help="Time scale of the replay (2: twice as fast; the fake's latency and pacing too).")
    ] = 1.0,
    timeout: Annotated[float, duration_option("--timeout", "How long each wait for an answer may take.", "5s")] = 5.0,
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
    from .net.replay import ReplayFailed, divergence, options_from_cli
    from .net.replay import compare as compare_replays
    from .net.replay import replay as run_replay
    from .report.replay import render

    refuse_overwrite([str(path)], [output])
    try:
        options, compare_url = options_from_cli(
            target=target, compare=compare, latency=latency, pace=pace, speed=speed, timeout=timeout,
            own_responses=own_responses, output=output, api_key_env=api_key_env,
            on_key=lambda text: say(f"rtrace replay: {text}"),
        )  # fmt: skip
    except ValueError as e:
        raise UsageError(str(e)) from None
    console = stdout_console()

    def emit(text: str) -> None:
        say(text, console=console)

    try:
        if compare_url is not None:
            fake, real, diff = compare_replays(str(path), options, compare_url)
            render(fake, emit)
            render(real, emit)
            emit("where the fake answered differently:" if diff else "the fake answered like the endpoint")
            for line in diff:
                emit("  " + line)
            result = fake
            diverged = None
        else:
            result = run_replay(str(path), options)
            render(result, emit)
            diverged = divergence(result, output is not None)
    except ReplayFailed as e:  # the endpoint cannot be reached: nothing was replayed
        say(f"rtrace: replay failed: {e}")
        raise typer.Exit(ExitCode.REPLAY_FAILED) from None
    if diverged is not None:  # the endpoint answered, differently from the recording: a finding of the replay
        say(f"rtrace: the replay diverged: {diverged}")
        raise typer.Exit(ExitCode.FINDINGS)
    report = result.replay_report
    raise typer.Exit(ExitCode.FINDINGS if report and any(f.severity == "error" for f in report.findings) else 0)


def version_callback(value: bool) -> None:
    if value:
        print(f"rtrace {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", "-V", callback=version_callback, is_eager=True, help="Print the version.")
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
