"""The hunt: `rtrace hunt`, a thin shell over `net.hunt.hunt` (the search, shrinking, rates) and `report.hunt`."""

import dataclasses
import io
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..core.severity import failing
from ..report.console import plain_console, stderr_console, stdout_console
from ..report.outputs import ReportFormat
from .common import EscapedLines, FailOn, verbatim
from .outputs import output_format, write_bytes
from .root import ExitCode, UsageError, app, say

if TYPE_CHECKING:
    from ..net.hunt.hunt import HuntResult
    from ..net.link.server import ServerOptions

HUNT_EXAMPLES = """Examples:
  rtrace hunt --budget 10m -- python my_agent_test.py     # the agent reads OPENAI_BASE_URL
  rtrace hunt --runs 40 -j 2 -o hunt.sarif -- npm test
  rtrace hunt --script agent.toml --budget 5m -- python my_agent_test.py   # the faults on top of your script
  rtrace hunt --tls --runs 20 -- node realtime_test.mjs   # a wss:// client: it is given NODE_EXTRA_CA_CERTS
  rtrace hunt --upstream wss://api.openai.com/v1/realtime --runs 10 -- python my_agent_test.py   # billed
  rtrace hunt --intercept --runs 20 -- python agent_test.py   # its URL is wss://api.openai.com/...: https_proxy
  rtrace hunt --schedule rtrace-hunt/1/bug-1.toml --runs 10 -- python my_agent_test.py   # a bug's rate"""


def announce_upstream(upstream: str, template: "ServerOptions", runs: int | None, *spend: int) -> None:
    """`--upstream`: checked (a ws(s):// URL, the script's turns all on the link), `--runs` demanded unless the
    upstream is this machine, and the first line says what each run costs and what is left out of the search."""
    from ..net.link.common import is_loopback, safe_url
    from ..net.link.proxy import check_upstream
    from ..net.link.upstream import FAKE_ONLY, check_link

    check_upstream(upstream)
    check_link(template)
    where = safe_url(upstream)
    if not is_loopback(upstream):
        if runs is None:
            raise ValueError(f"--upstream {where}: every run is a real, billed session: give --runs N")
        repro, bugs = spend
        say(f"rtrace hunt: warning: every run is a real, billed session at {where}: the clean run, up to {runs} "
            f"searched, then the shrinking and {repro} re-runs of each of at most {bugs} bugs")  # fmt: skip
    say(f"rtrace hunt: through a link to {where}; left out (only the fake model makes them): {', '.join(FAKE_ONLY)}")


@app.command(epilog=verbatim(HUNT_EXAMPLES))
def hunt(
    command: Annotated[list[str], typer.Argument(help="The command to run, after --.")],
    budget: Annotated[
        str | None, typer.Option(metavar="DURATION", help="Time the search may take (0: no limit, give --runs).")
    ] = "10m",
    runs: Annotated[int | None, typer.Option(help="Runs the search may take (with --schedule: runs of each).")] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Runs at once, each against its own server.")] = 1,
    format: Annotated[
        ReportFormat | None, typer.Option("--format", "-f", help="Report format (not concise or github).")
    ] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the report here.")] = None,
    fail_on: Annotated[FailOn, typer.Option(help="Exit 1 when a bug is at or above this severity.")] = FailOn.error,
    timeout: Annotated[str, typer.Option(metavar="DURATION", help="A run is killed after this long.")] = "5m",
    seed: Annotated[int, typer.Option(help="Seed of the schedules drawn.")] = 0,
    out: Annotated[Path, typer.Option(help="Directory for traces, bug scripts and minimized traces.")] = Path(
        "rtrace-hunt"
    ),
    shrink_runs: Annotated[int, typer.Option(help="Tries of each shrinking candidate.")] = 3,
    repro_runs: Annotated[int, typer.Option(help="Runs of each bug's minimal schedule for its rate.")] = 10,
    max_bugs: Annotated[int, typer.Option(help="Candidate bugs shrunk at most.")] = 10,
    schedule: Annotated[
        list[Path] | None, typer.Option(help="Only re-run this bug script (a bug-N.toml a hunt wrote).")
    ] = None,
    script: Annotated[
        Path | None,
        typer.Option(help="Your scenario script (as serve --script): every run, the clean one too, runs on it."),
    ] = None,
    kill_strays: Annotated[
        bool | None,
        typer.Option(help="Kill what a command leaves running outside its process group (default: on when CI is set)."),
    ] = None,
    hung_after: Annotated[
        str,
        typer.Option(
            metavar="DURATION",
            help="End a search run quiet this long after a fault, its turn undone; the re-runs that confirm a bug "
            "wait 4 times as long before they call it hung (0: never).",
        ),
    ] = "3s",
    tls: Annotated[
        bool,
        typer.Option(
            "--tls",
            help="Serve wss:// with a certificate made and kept (as serve --tls); the command is "
            "given the variables that trust it (printed).",
        ),
    ] = False,
    upstream: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="Every run, the clean one too, through a fault-injecting proxy to this endpoint (a real, billed "
            "session per run unless it is on this machine: give --runs); the faults only the fake model makes are "
            "left out.",
        ),
    ] = None,
    intercept: Annotated[
        bool,
        typer.Option(
            "--intercept",
            help="For a client whose URL is hard-coded to the real service: the command is given an HTTPS proxy "
            "(https_proxy) that answers api.openai.com and Azure's realtime hosts itself, with rtrace's authority.",
        ),
    ] = False,
) -> None:
    """Look for bugs by itself: a clean run, then each single fault at each point of what the client did, then
    random combinations; each bug shrunk, re-run and minimized, all within --budget (wall time). Exit 1 on a bug at
    or above --fail-on, 4 when the command fails its clean run; a signal (Ctrl-C, SIGTERM, SIGHUP) stops it with
    what was found so far (128 + the signal; a second one stops it at once)."""
    from ..core.durations import parse_duration
    from ..core.writer import check_writable
    from ..net.hunt.hunt import HuntOptions, load_schedule, schedule_number
    from ..net.hunt.hunt import hunt as run_hunt
    from ..net.hunt.processes import exit_status, kill_strays_default
    from ..net.link.common import check_out_dir
    from ..net.link.server import ServerOptions, options_from_cli
    from ..net.link.tls import tls_files
    from ..net.link.upstream import link_makes
    from ..report.hunt import progress_line, render, render_terminal
    from .mains import announce_tls

    try:
        seconds = parse_duration(budget, "--budget") if budget else None
        limit = parse_duration(timeout, "--timeout")
        if limit <= 0:
            raise ValueError("--timeout: give a time above 0, e.g. 5m")
        quiet = parse_duration(hung_after, "--hung-after")
        if runs is not None and runs < 1:
            raise ValueError("--runs must be at least 1")
        for name, value, least in (("--jobs", jobs, 1), ("--shrink-runs", shrink_runs, 1),
                                   ("--repro-runs", repro_runs, 1), ("--max-bugs", max_bugs, 0)):  # fmt: skip
            if value < least:
                raise ValueError(f"{name} {value}: give {least} or more")
        schedules = [load_schedule(p) for p in schedule] if schedule else None
        check_out_dir(out, "--out")
        if output is not None and str(output) != "-":
            try:
                check_writable(output)
                probe(output)
            except OSError as e:
                raise ValueError(f"-o {output}: cannot write there ({e.strerror or e})") from None
        template = options_from_cli(script=script) if script is not None else ServerOptions()
        if tls and intercept:
            raise ValueError("--intercept serves the realtime hosts' TLS itself: give --tls or --intercept, not both")
        if tls:
            template = dataclasses.replace(template, tls=tls_files(True, None, None, "127.0.0.1"))
        fmt = output_format(format, output)
        if fmt in (ReportFormat.concise, ReportFormat.github):
            raise UsageError(f"hunt reports bugs, not findings: --format {fmt.value} is analyze's (see --help)")
        if upstream is not None:
            announce_upstream(upstream, template, runs, repro_runs, max_bugs)
            for path, bug in zip(schedule or [], schedules or [], strict=True):
                if not all(map(link_makes, bug.faults)):
                    raise ValueError(f"{path}: its faults need the fake model ({bug.describe()}): not with --upstream")
        options = HuntOptions(
            budget=seconds or None, runs=runs, jobs=jobs, timeout=limit, seed=seed, shrink_runs=shrink_runs,
            repro_runs=repro_runs, max_bugs=max_bugs, out_dir=out, schedules=schedules, template=template,
            script=script, numbers=[schedule_number(p) for p in schedule] if schedule else None,
            kill_strays=kill_strays_default() if kill_strays is None else kill_strays, quiet=quiet or None,
            upstream=upstream, intercept=intercept,
        )  # fmt: skip
        err = stderr_console()
        announce_tls(template.tls, EscapedLines(sys.stderr))  # type: ignore[arg-type]
        result = run_hunt(command, options, lambda p: err.print(progress_line(p), markup=False, soft_wrap=True))
    except ValueError as e:
        raise UsageError(str(e)) from None
    to_terminal = output is None or str(output) == "-"
    if not to_terminal or fmt is not ReportFormat.terminal:
        summary(result, output)  # first: what was found reaches the terminal even if the report cannot be written
    if fmt is ReportFormat.terminal and to_terminal:
        render_terminal(result, stdout_console())
    elif fmt is ReportFormat.terminal:
        buffer = io.StringIO()
        render_terminal(result, plain_console(buffer))
        write_bytes(buffer.getvalue().encode("utf-8"), output)
    else:
        write_bytes(render(result, fmt.value).encode("utf-8"), output)
    if result.stopped == "trace not written":  # a full disk under --out: what was found so far is above
        say(f"rtrace: the hunt stopped: a run's trace could not be written under {result.options.out_dir} "
            f"(free some space, or give another --out)")  # fmt: skip
        raise typer.Exit(ExitCode.UNREADABLE)
    if result.stopped == "internal error":
        say(f"rtrace: internal error during the clean run, not a failure of the command: {result.runs[0].how()}")
        raise typer.Exit(ExitCode.INTERNAL)
    if result.interrupted is not None:
        raise typer.Exit(exit_status(result.options.stopper.signum if result.options.stopper else None))
    if result.clean_failed or (result.clean is None and result.options.schedules is None):  # failed, or cut
        raise typer.Exit(ExitCode.REPLAY_FAILED)
    if failing(result.bugs, fail_on.value):  # the one reading of "at or above" (`never`: none)
        raise typer.Exit(ExitCode.FINDINGS)
    raise typer.Exit(ExitCode.OK)


def probe(output: Path) -> None:
    """Raise the OSError a file made beside `output` meets (a folder that takes no new file: /proc, a read-only
    mount, a full disk), leaving nothing."""
    import tempfile

    with tempfile.NamedTemporaryFile(dir=output.absolute().parent, prefix=".rtrace-probe-") as fh:
        fh.write(b"x")
        fh.flush()


def summary(result: "HuntResult", output: Path | None) -> None:
    """A few lines on stderr when the report went elsewhere (`-o`, or another format on stdout): how it ended,
    each bug in a line, where the report and the artifacts are."""
    from ..report.hunt import summary_lines

    err = stderr_console()
    for line in summary_lines(result):
        say(line, console=err)
    if output is not None and str(output) != "-":
        say(f"report: {output}", console=err)
