"""The hunt: `rtrace hunt`, a thin shell over `net.hunt` (the search, shrinking, rates) and `report.hunt`."""

import io
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..report.console import plain_console, stderr_console, stdout_console
from ..report.outputs import ReportFormat
from ..rules.base import SEVERITY_RANK
from .common import FailOn, verbatim
from .outputs import output_format, write_bytes
from .root import ExitCode, UsageError, app, say

if TYPE_CHECKING:
    from ..net.hunt import HuntResult

HUNT_EXAMPLES = """Examples:
  rtrace hunt --budget 10m -- python my_agent_test.py     # the agent reads OPENAI_BASE_URL
  rtrace hunt --runs 40 -j 2 -o hunt.sarif -- npm test
  rtrace hunt --script agent.toml --budget 5m -- python my_agent_test.py   # the faults on top of your script
  rtrace hunt --schedule rtrace-hunt/bug-1.toml --runs 10 -- python my_agent_test.py   # a bug's rate"""


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
        typer.Option(metavar="DURATION", help="End a run quiet this long after a fault, its turn undone (0: never)."),
    ] = "3s",
) -> None:
    """Look for bugs by itself: a clean run, then each single fault at each point of what the client did, then
    random combinations; each bug shrunk, re-run and minimized, all within --budget (wall time). Exit 1 on a bug at
    or above --fail-on, 4 when the command fails its clean run; a signal (Ctrl-C, SIGTERM, SIGHUP) stops it with
    what was found so far (128 + the signal; a second one stops it at once)."""
    from ..core.durations import parse_duration
    from ..core.writer import check_writable
    from ..net.common import check_out_dir
    from ..net.hunt import HuntOptions, load_schedule, schedule_number
    from ..net.hunt import hunt as run_hunt
    from ..net.processes import exit_status, kill_strays_default
    from ..net.server import ServerOptions, options_from_cli
    from ..report.hunt import progress_line, render, render_terminal

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
        fmt = output_format(format, output)
        if fmt in (ReportFormat.concise, ReportFormat.github):
            raise UsageError(f"hunt reports bugs, not findings: --format {fmt.value} is analyze's (see --help)")
        options = HuntOptions(
            budget=seconds or None, runs=runs, jobs=jobs, timeout=limit, seed=seed, shrink_runs=shrink_runs,
            repro_runs=repro_runs, max_bugs=max_bugs, out_dir=out, schedules=schedules, template=template,
            script=script, numbers=[schedule_number(p) for p in schedule] if schedule else None,
            kill_strays=kill_strays_default() if kill_strays is None else kill_strays, quiet=quiet or None,
        )  # fmt: skip
        err = stderr_console()
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
    if fail_on is not FailOn.never:
        floor = SEVERITY_RANK[fail_on.value]
        if any(SEVERITY_RANK.get(b.severity, 0) >= floor for b in result.bugs):
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
