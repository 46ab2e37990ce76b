"""`rtrace sweep`: run a user's command against a fresh fake endpoint at each latency, record and analyze each run.

Owns the loop (latency x run), the environment handed to the command (`OPENAI_BASE_URL`, `RTRACE_URL`), and the
results a latency x rule table is drawn from. The server is `rtrace.net.link.server`, the analysis `rtrace.engine.fold`,
the table `rtrace.report.sweep`; this module prints nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO

from ...core.durations import parse_duration_list
from ...core.severity import failing
from ...engine.fold import analyze_path
from ...rules.base import Finding
from ..link.server import ServerOptions, run_server
from .processes import CannotRun, Ended, Stopped, Stopper, run_process

#: Lines of the command's stderr kept per run (shown when the command failed in every run).
STDERR_TAIL = 8


class CommandNotFound(ValueError):
    """The command to sweep cannot be run at all (not found, not executable): a usage error, before any run."""


@dataclasses.dataclass
class RunResult:
    """One run of the command at one latency."""

    latency: float
    run: int
    trace: Path
    #: The command's exit status (None: killed after the timeout).
    exit_code: int | None
    findings: list[Finding]
    #: Set when the trace could not be analyzed.
    problem: str | None = None
    #: The last lines of what the command wrote to stderr (it still reaches the user's stderr as it runs).
    stderr_tail: list[str] = dataclasses.field(default_factory=list)
    #: Processes the command left running outside its process group (killed: `kill_strays`).
    strays: list[int] = dataclasses.field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.exit_code != 0

    def how(self) -> str:
        return how_ended(self.exit_code)


def how_ended(exit_code: int | None) -> str:
    """How a command ended, in words: `exit 0`, `exit 3`, `killed by SIGSEGV`, `timeout` (None: killed)."""
    if exit_code is None:
        return "timeout"
    if exit_code < 0:
        try:
            return f"killed by {signal.Signals(-exit_code).name}"
        except ValueError:
            return f"killed by signal {-exit_code}"
    return f"exit {exit_code}"


@dataclasses.dataclass
class SweepResult:
    latencies: list[float]
    runs: int
    results: list[RunResult]
    #: Set when a signal stopped the sweep (its name): the results are those of the runs done before.
    interrupted: str | None = None

    def rules(self) -> list[tuple[str, str, str]]:
        """(id, slug, severity) of every rule that fired at least once, in id order."""
        seen = {(f.rule, f.slug, f.severity) for r in self.results for f in r.findings}
        return sorted(seen)

    def count(self, latency: float, rule_id: str) -> int:
        return sum(1 for r in self.results if r.latency == latency and any(f.rule == rule_id for f in r.findings))

    def findings(self) -> list[Finding]:
        """Every finding of every run."""
        return [f for r in self.results for f in r.findings]

    def has_errors(self) -> bool:
        return bool(failing(self.findings(), "error"))

    def failed_every_run(self) -> bool:
        """The command failed (a non-zero exit, a signal, the timeout) in every run: the sweep showed nothing of
        the client, whatever the table says."""
        return bool(self.results) and all(r.failed for r in self.results)


def label(latency: float) -> str:
    """A latency as a column and a file name show it: always in ms (`0ms`, `50ms`, `1500ms`)."""
    ms = latency * 1000
    return f"{ms:g}ms"


def check_command(command: list[str], what: str = "sweep") -> None:
    """Raise `CommandNotFound` unless `command[0]` names a program this process can run (on PATH, or a path)."""
    if not command:
        raise CommandNotFound(f"give the command to run after --, e.g. rtrace {what} -- pytest tests/x.py")
    program = command[0]
    if os.path.isdir(program):
        raise CommandNotFound(f"{what}: {program}: a directory, not a program (the command to run after --)")
    if os.sep in program or (os.altsep and os.altsep in program):
        if not os.path.isfile(program):
            raise CommandNotFound(f"{what}: {program}: no such file (the command to run after --)")
        if not os.access(program, os.X_OK):
            raise CommandNotFound(f"{what}: {program}: not executable (chmod +x it, or name its interpreter first)")
    elif shutil.which(program) is None:
        raise CommandNotFound(f"{what}: {program}: command not found (not on PATH)")


async def run_command(
    command: list[str],
    env: dict[str, str],
    timeout: float | None,
    what: str = "sweep",
    echo: bool = True,
    kill_strays: bool = False,
    should_end: Callable[[], str | None] | None = None,
    stdout_in_tail: bool = False,
) -> Ended:
    """Run `command` to its end (`processes.run_process`: its own session and process group, killed whole at the
    end, at `timeout` or when `should_end` says so; what escaped it named, and killed when `kill_strays`), its
    stderr passed on as it comes (unless not `echo`; then its stdout is not shown either). Raises
    `CommandNotFound`."""
    try:
        return await run_process(
            command, env, timeout, stderr=_stderr_bytes() if echo else None, echo=echo, tail_lines=STDERR_TAIL,
            kill_strays=kill_strays, should_end=should_end, stdout_in_tail=stdout_in_tail,
        )  # fmt: skip
    except CannotRun as e:  # found by check_command, but gone or not runnable after all
        raise CommandNotFound(f"{what}: {command[0]}: cannot run it ({e})") from None


def command_env(url: str, http_url: str, realtime_url: str, latency: float) -> dict[str, str]:
    """This environment, with the URLs of what the command talks to (a server, or a hunt's link) as the command is
    told them (`RTRACE_URL`, `OPENAI_BASE_URL`, `RTRACE_REALTIME_URL`) and `RTRACE_LATENCY`."""
    env = dict(os.environ)
    env["OPENAI_BASE_URL"] = http_url
    env["RTRACE_URL"] = url
    env["RTRACE_REALTIME_URL"] = realtime_url
    env["RTRACE_LATENCY"] = str(latency)
    return env


async def _run_once(
    command: list[str], latency: float, run: int, out_dir: Path, template: ServerOptions, timeout: float | None
) -> RunResult:
    trace = out_dir / f"latency-{label(latency)}-run{run}.jsonl"
    trace.unlink(missing_ok=True)  # what this run records, or nothing: never the trace of an earlier sweep
    options = dataclasses.replace(template, latency=latency, record=trace, port=0, host="127.0.0.1")
    async with run_server(options) as srv:
        ended = await run_command(command, command_env(srv.url, srv.http_url, srv.realtime_url, latency), timeout)
    code, tail = ended.code, ended.tail
    if not trace.exists():
        return RunResult(latency, run, trace, code, [], problem=NO_CONNECTION, stderr_tail=tail, strays=ended.strays)
    try:
        report = analyze_path(trace)
    except Exception as e:  # an unreadable trace is a result of the run, not a crash of the sweep
        return RunResult(latency, run, trace, code, [], problem=str(e), stderr_tail=tail, strays=ended.strays)
    return RunResult(latency, run, trace, code, report.findings, stderr_tail=tail, strays=ended.strays)


#: A run's problem when its command never connected (no trace).
NO_CONNECTION = "no connection: the command never connected to the server"


def _stderr_bytes() -> IO[bytes]:
    buffer: IO[bytes] | None = getattr(sys.stderr, "buffer", None)
    return buffer if buffer is not None else _TextAsBytes(sys.stderr)  # type: ignore[return-value]


class _TextAsBytes:
    """A text stream (pytest's capture, `EscapedLines`) taking the bytes of the command's stderr."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def write(self, data: bytes) -> int:
        self.stream.write(data.decode("utf-8", "replace"))
        return len(data)

    def flush(self) -> None:
        self.stream.flush()


async def sweep_async(
    command: list[str],
    latencies: list[float],
    runs: int,
    out_dir: Path,
    template: ServerOptions | None = None,
    timeout: float | None = 300.0,
    progress: Callable[[RunResult], None] | None = None,
    announce: Callable[[ServerOptions], None] | None = None,
) -> SweepResult:
    out_dir.mkdir(parents=True, exist_ok=True)
    results: list[RunResult] = []
    stopper = Stopper()
    stopper.attach(asyncio.get_running_loop(), signals=True)
    try:
        for latency in latencies:
            if announce is not None:
                announce(dataclasses.replace(template or ServerOptions(), latency=latency))
            for k in range(1, runs + 1):
                work = _run_once(command, latency, k, out_dir, template or ServerOptions(), timeout)
                result = await stopper.guard(work)
                results.append(result)
                if progress is not None:
                    progress(result)
    except Stopped as e:  # a signal: the run in flight ended; what the runs before showed is the result
        return SweepResult(latencies, runs, results, interrupted=e.reason)
    finally:
        stopper.detach()
    return SweepResult(latencies, runs, results)


def sweep(
    command: list[str],
    latencies: list[float],
    runs: int,
    out_dir: Path,
    template: ServerOptions | None = None,
    timeout: float | None = 300.0,
    progress: Callable[[RunResult], None] | None = None,
    announce: Callable[[ServerOptions], None] | None = None,
) -> SweepResult:
    """Run `command` `runs` times at each latency, each against a fresh recorded server; analyze every trace.
    `announce` is told the options of each latency before its runs. Raises `CommandNotFound`."""
    check_command(command)
    return asyncio.run(sweep_async(command, latencies, runs, out_dir, template, timeout, progress, announce))


def parse_latency_list(text: str, option: str = "--latency") -> list[float]:
    """`0,10,50,200ms` -> seconds (`rtrace.core.durations.parse_duration_list`: the last item's unit applies to
    every bare number; a list with no unit is refused). Raises ValueError."""
    return parse_duration_list(text, option)
