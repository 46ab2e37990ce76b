"""The network commands: `serve`, `sweep`, `record`, `replay`. Thin shells over `net`; the fake endpoint's options
are shared by `serve` and `sweep` (both go through `net.server.options_from_cli`)."""

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..engine.fold import Report
from ..net.examples import EXAMPLE_SCRIPT, EXAMPLE_TOOL
from ..report.console import stdout_console
from ..report.outputs import ReportFormat
from ..rules.base import SEVERITY_RANK, Config
from .common import AllowSpecial, EscapedLines, FailOn, allow_special, duration_option, refuse_overwrite, verbatim
from .outputs import write_report
from .root import ExitCode, UsageError, app, say

if TYPE_CHECKING:
    from ..net.server import ServerOptions


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
    epilog=verbatim(SERVE_EXAMPLES)
    + "\n\nA script (the schema: docs/serve.md, or the docstring of rtrace.net.script):\n\n"
    + verbatim(EXAMPLE_SCRIPT)
    + "\n\nA custom tool, called on each user turn:\n\n"
    + verbatim(EXAMPLE_TOOL)
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
    from ..net.server import options_from_cli

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
    from ..net.common import scrubbed_logging

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

    from ..net.live import ConnectionLog, watch
    from ..net.server import serve_main

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
    floor = SEVERITY_RANK.get(fail_on.value)
    if floor is not None and any(SEVERITY_RANK[f.severity] >= floor for f in watched.report.findings):
        raise typer.Exit(ExitCode.FINDINGS)


SWEEP_EXAMPLES = """Examples:
  rtrace sweep --latency 0,10,50,200ms --runs 5 -- python my_agent_test.py
  rtrace sweep --drop-after response.done -- npm test"""


@app.command(epilog=verbatim(SWEEP_EXAMPLES))
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
    from ..net.server import options_from_cli
    from ..net.sweep import sweep_main
    from ..report.sweep import announce, failure, progress, render

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


@app.command(epilog=verbatim(RECORD_EXAMPLES))
def record(
    upstream: Annotated[str, typer.Option(help="The real endpoint, e.g. wss://api.openai.com/v1/realtime.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Write the trace here.")],
    port: Annotated[int, typer.Option(help="Local port (0: a free one).")] = 0,
    host: Annotated[str, typer.Option(help="Address to bind (not loopback: a warning is printed).")] = "127.0.0.1",
    keep_audio: Annotated[bool, typer.Option(help="Keep audio payloads (default: byte count and SHA-256).")] = False,
    live: LiveOpt = None,
) -> None:
    """A recording websocket proxy: point the client at the printed OPENAI_BASE_URL; Ctrl-C to stop."""
    from ..net.proxy import RecordOptions, check_upstream, record_main

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

        from ..net.live import ConnectionLog, watch

        log = ConnectionLog("rtrace record", say)
        watched = watch(lambda path, tap: record_main(dataclasses.replace(options, output=path, tap=tap), out, err),  # type: ignore[arg-type]
                        output, sys.stderr.isatty() if live is None else live, err, log=log)  # type: ignore[arg-type]  # fmt: skip
        say(log.summary(watched.trace, False))
    except OSError as e:
        raise UsageError(f"{e.filename or output}: {e.strerror or e}") from None


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
    from ..net.replay import ReplayFailed, divergence, options_from_cli
    from ..net.replay import compare as compare_replays
    from ..net.replay import replay as run_replay
    from ..report.replay import render

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
