"""The network commands: `serve`, `sweep`, `record`, `replay`. Thin shells over `net`; the fake endpoint's options
are shared by `serve` and `sweep` (both go through `net.link.server.options_from_cli`)."""

import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..engine.fold import Report
from ..report.console import stdout_console
from ..report.outputs import ReportFormat
from ..rules.base import Config
from .common import (
    AllowSpecial,
    Command,
    EscapedLines,
    FailOn,
    allow_special,
    duration_option,
    refuse_overwrite,
    spliced,
    verbatim,
)
from .examples import EXAMPLE_SCRIPT, EXAMPLE_TOOL
from .outputs import write_report
from .root import ExitCode, UsageError, app, exit_code, say

if TYPE_CHECKING:
    from ..net.fake.options import EndpointOption
    from ..net.link.proxy import RecordOptions
    from ..net.link.server import ServerOptions


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


#: The fake endpoint's options as a command gets them (by field; `net.fake.options.ENDPOINT_OPTIONS`).
Endpoint = dict[str, Any]
_TYPES: dict[str, Any] = {
    "text": str, "int": int, "count": int, "float": float, "duration": str, "path": Path, "flag": bool,
    "texts": list[str], "specs": list[str], "durations": list[str], "numbers": list[int],
}  # fmt: skip


def endpoint_parameter(option: "EndpointOption") -> inspect.Parameter:
    """The typer parameter of one declared endpoint option."""
    from ..net.fake.options import DURATION_KINDS

    kind = _TYPES[option.kind]
    metavar = "DURATION" if option.kind in DURATION_KINDS else None
    named = option.flag or (option.option if option.kind == "flag" else None)  # a flag has no --no- form
    info = typer.Option(*([named] if named else []), help=option.help, metavar=metavar)
    annotation = Annotated[kind | None if option.default is None else kind, info]  # type: ignore[valid-type]
    keyword = inspect.Parameter.KEYWORD_ONLY
    return inspect.Parameter(option.field, keyword, default=option.default, annotation=annotation)


def endpoint_options(command: str) -> Callable[[Command], Command]:
    """The endpoint options `command` takes (`ENDPOINT_OPTIONS`; `sweep` those marked so), spliced where the
    command's `endpoint: Endpoint` parameter is."""
    from ..net.fake.options import ENDPOINT_OPTIONS

    return spliced("endpoint", [endpoint_parameter(o) for o in ENDPOINT_OPTIONS if command == "serve" or o.sweep])


LiveOpt = Annotated[
    bool | None, typer.Option(help="Print each finding to stderr as it becomes certain (default: on a terminal).")
]


SERVE_EXAMPLES = """Examples:
  rtrace serve --latency 120ms --record session.jsonl        # then point the agent at the printed URL
  rtrace serve --drop-after response.done:function_call       # drop the socket while a tool runs
  rtrace serve --exit-with-findings --record session.jsonl   # exit 1 at the end if a race was seen"""


@app.command(
    epilog=verbatim(SERVE_EXAMPLES)
    + "\n\nA script (the schema: docs/serve.md, or the docstring of rtrace.net.faults.script):\n\n"
    + verbatim(EXAMPLE_SCRIPT)
    + "\n\nA custom tool, called on each user turn:\n\n"
    + verbatim(EXAMPLE_TOOL)
)
@endpoint_options("serve")
def serve(
    *,
    endpoint: Endpoint,
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
    upstream: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="A fault-injecting proxy to this endpoint instead of the fake: the faults a link makes, on the link.",
        ),
    ] = None,
    intercept: Annotated[
        bool,
        typer.Option(
            "--intercept", help="With --upstream: also an HTTPS proxy for clients with a hard-coded URL (as record's)."
        ),
    ] = False,
) -> None:
    """A fake realtime endpoint with injected latency and faults: its own tools, audio, server VAD, scripts.
    Prints the base URL (OPENAI_BASE_URL) and the full websocket URL, and waits."""
    from ..net.link.server import options_from_cli

    from_trace, record = endpoint["from_trace"], endpoint["record"]
    refuse_overwrite([str(from_trace)] if from_trace else [], [record])
    try:
        options = options_from_cli(**{**endpoint, "host": bind_host(endpoint["host"])})
    except ValueError as e:
        raise UsageError(str(e)) from None
    if upstream is not None:
        serve_upstream(upstream, options, live, intercept)
        return
    if intercept:
        raise UsageError("--intercept goes with --upstream (serve's fake endpoint: rtrace hunt --intercept)")
    from ..net.link.common import scrubbed_logging

    stop_on_sigterm()
    scrubbed_logging(sys.stderr)
    live = sys.stderr.isatty() if live is None else live
    serve_watched(options, live, fail_on.value if exit_with_findings else None)


def serve_upstream(upstream: str, options: "ServerOptions", live: bool | None, intercept: bool = False) -> None:
    """`serve --upstream URL`: `record`'s proxy to URL with serve's faults on the link (the fake model's options,
    a tool, transcripts, `--from`, do not apply: there is no fake model)."""
    from ..net.link.proxy import RecordOptions, check_upstream

    try:
        check_upstream(upstream)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if options.from_trace is not None or options.endpoint.tool is not None:
        raise UsageError("--upstream: --from and --tool are the fake model's; the upstream answers for itself")
    if intercept and options.tls is not None:
        raise UsageError("--intercept serves the realtime hosts' TLS itself: give --tls or --intercept, not both")
    record = RecordOptions(upstream=upstream, output=options.record, host=options.host, port=options.port,
                           tls=options.tls, intercept=intercept)  # fmt: skip
    record_link(record, options, live)


def serve_watched(options: "ServerOptions", live: bool, fail_on: str | None) -> None:
    """`serve`: the recording folded as it is written (`net.link.live.watch`; a temporary trace without --record), a
    line per connection and a summary at the end on stderr (`net.link.live.ConnectionLog`), each finding as it is
    found with `live`; with `fail_on` (--exit-with-findings), the report on stdout at the end and exit 1 on
    findings at that severity or above."""
    import dataclasses

    from ..net.link.live import ConnectionLog, watch
    from .mains import serve_main

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
    write_report(Report([watched.report], Config()), ReportFormat.terminal, None)
    if watched.trace is not None:
        print(f"rtrace serve: trace kept at {watched.trace}", flush=True)
    raise typer.Exit(exit_code(watched.report.findings, fail_on))


SWEEP_EXAMPLES = """Examples:
  rtrace sweep --latency 0,10,50,200ms --runs 5 -- python my_agent_test.py
  rtrace sweep --drop-after response.done -- npm test"""


@app.command(epilog=verbatim(SWEEP_EXAMPLES))
@endpoint_options("sweep")
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
    *,
    endpoint: Endpoint,
) -> None:
    """Run a command against a fresh `rtrace serve` at each latency (faults in each run); table of latency x rule.
    Exit 1 on an error finding, 4 when the command failed in every run, 2 when it cannot be run."""
    from ..net.link.server import options_from_cli
    from ..report.sweep import announce, failure, progress, render
    from .mains import sweep_main

    console = stdout_console()
    try:
        template = options_from_cli(**endpoint)
        result = sweep_main(command, latency, runs, out, timeout, lambda r: progress(r, console), template,
                            lambda options: announce(options, console))  # fmt: skip
    except ValueError as e:
        raise UsageError(str(e)) from None
    console.print()
    render(result, console)
    for line in failure(result):
        say(line)
    if result.interrupted is not None:  # a signal: the table is of the runs done before it
        import signal

        say(f"sweep interrupted ({result.interrupted}): a partial table, of the {len(result.results)} runs done")
        raise typer.Exit(128 + signal.Signals[result.interrupted].value)
    if result.has_errors():  # error findings: exit 1, as analyze would
        raise typer.Exit(exit_code(result.findings(), "error"))
    raise typer.Exit(ExitCode.REPLAY_FAILED if result.failed_every_run() else ExitCode.OK)


RECORD_EXAMPLES = """Examples:
  rtrace record --upstream wss://api.openai.com/v1/realtime -o session.jsonl
  rtrace record --upstream wss://api.openai.com/v1/realtime -o session.jsonl --intercept   # give the agent https_proxy
  OPENAI_BASE_URL=<printed URL> python my_agent.py    # in another shell"""


#: The options of `serve` that `record` takes too: its listening side's TLS, and the faults a link makes
#: (`rtrace.net.link.upstream`) with their latency, jitter, seed, close code, times and script.
LINK_OPTIONS = ("tls", "cert", "key", "latency", "jitter", "seed", "close_after", "drop_on", "drop_after", "error_on",
                "expire_after", "close_code", "fault_times", "script")  # fmt: skip


def listening_options() -> Callable[[Command], Command]:
    """`LINK_OPTIONS` as `serve` declares them (`ENDPOINT_OPTIONS`), spliced where `record`'s `listen: Endpoint`
    parameter is."""
    from ..net.fake.options import OPTION_BY_FIELD

    return spliced("listen", [endpoint_parameter(OPTION_BY_FIELD[name]) for name in LINK_OPTIONS])


def record_link(options: "RecordOptions", faults: "ServerOptions | None", live: bool | None) -> None:
    """`record` (and `serve --upstream`): the recording proxy, through the faults of `faults` when it has any
    (`rtrace.net.link.upstream.LinkProxy`), its trace folded as it is written, a line per connection on stderr."""
    import dataclasses

    from ..net.link.live import ConnectionLog, watch
    from ..net.link.server import describe
    from ..net.link.upstream import LinkProxy, check_link
    from .mains import record_main

    out, err = EscapedLines(sys.stdout), EscapedLines(sys.stderr)
    make: Any = None
    says: list[str] = []
    if faults is not None and (faults.schedule or faults.latency or faults.latency_by_type or faults.jitter
                               or faults.jitter_by_type):  # fmt: skip
        try:
            check_link(faults)
        except ValueError as e:
            raise UsageError(str(e)) from None
        make, says = (lambda o, w: LinkProxy(o, faults, w)), ["on the link: " + line for line in describe(faults)]
    stop_on_sigterm()
    log = ConnectionLog("rtrace record", say)

    def run(path: str, tap: Any) -> None:
        given = dataclasses.replace(options, output=path, tap=tap)
        if make is None:
            record_main(given, out, err)  # type: ignore[arg-type]
        else:
            record_main(given, out, err, make, says)  # type: ignore[arg-type]

    try:
        watched = watch(run, options.output, sys.stderr.isatty() if live is None else live, err, log=log)  # type: ignore[arg-type]
        say(log.summary(watched.trace, options.output is None))
    except OSError as e:
        raise UsageError(f"{e.filename or options.output}: {e.strerror or e}") from None


@app.command(epilog=verbatim(RECORD_EXAMPLES))
@listening_options()
def record(
    upstream: Annotated[str, typer.Option(help="The real endpoint, e.g. wss://api.openai.com/v1/realtime.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Write the trace here.")],
    port: Annotated[int, typer.Option(help="Local port (0: a free one).")] = 0,
    host: Annotated[str, typer.Option(help="Address to bind (not loopback: a warning is printed).")] = "127.0.0.1",
    keep_audio: Annotated[bool, typer.Option(help="Keep audio payloads (default: byte count and SHA-256).")] = False,
    intercept: Annotated[
        bool,
        typer.Option(
            "--intercept",
            help="Also an HTTPS proxy (printed: https_proxy and the authority to trust) that answers api.openai.com "
            "and Azure's realtime hosts with this recorder, for clients whose URL is hard-coded.",
        ),
    ] = False,
    *,
    listen: Endpoint,
    live: LiveOpt = None,
) -> None:
    """A recording websocket proxy: point the client at the printed OPENAI_BASE_URL; Ctrl-C to stop. With fault
    flags, they act on the link as serve's act (those that need no fake model)."""
    from ..net.link.proxy import RecordOptions, check_upstream
    from ..net.link.server import options_from_cli

    bind_host(host)
    try:
        check_upstream(upstream)
        faults = options_from_cli(**listen, host=host)
        if intercept and faults.tls is not None:
            raise ValueError("--intercept serves the realtime hosts' TLS itself: give --tls or --intercept, not both")
    except ValueError as e:
        raise UsageError(str(e)) from None
    options = RecordOptions(upstream=upstream, output=output, host=host, port=port, keep_audio=keep_audio,
                            tls=faults.tls, intercept=intercept)  # fmt: skip
    record_link(options, faults, live)


REPLAY_EXAMPLES = """Examples:
  rtrace replay session.jsonl                   # against an in-process fake, recorded answers
  rtrace replay session.jsonl --target fake --compare wss://example.test/v1/realtime"""


@app.command(epilog=verbatim(REPLAY_EXAMPLES))
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
    from ..net.replay.runner import ReplayFailed
    from ..net.replay.runner import compare as compare_replays
    from ..net.replay.runner import replay as run_replay
    from ..report.replay import render
    from .mains import replay_divergence, replay_options

    refuse_overwrite([str(path)], [output])
    try:
        options, compare_url = replay_options(
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
            diverged = replay_divergence(result, output is not None)
    except ReplayFailed as e:  # the endpoint cannot be reached: nothing was replayed
        say(f"rtrace: replay failed: {e}")
        raise typer.Exit(ExitCode.REPLAY_FAILED) from None
    if diverged is not None:  # the endpoint answered, differently from the recording: a finding of the replay
        say(f"rtrace: the replay diverged: {diverged}")
        raise typer.Exit(ExitCode.FINDINGS)
    report = result.replay_report
    raise typer.Exit(exit_code(report.findings if report else [], "error"))
