"""What a hunt is told and what one run of it is (`rtrace hunt`, `rtrace.net.hunt.hunt`): the options, a run and its
outcome, the progress told after (and during) each run, what runs the client (`Target`; the user's command:
`CommandTarget` against a server of its own, `UpstreamTarget` through a link to a real upstream), a run's server
options and records, and the budget's shares.
Judges nothing: `rtrace.net.hunt.hunt` turns runs into bugs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shlex
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ...rules.base import Finding
from ..faults.schedule import Schedule
from ..link.common import safe_url
from ..link.intercept import intercepting
from ..link.proxy import RecordOptions
from ..link.server import ServerOptions, run_server
from ..link.tls import trust_env
from ..link.upstream import run_link
from .bugs import About
from .keys import BugKey
from .processes import Ended, Stopped, Stopper, kill_strays_default
from .sweep import CommandNotFound, command_env, how_ended, run_command

#: Defaults of the command line.
SHRINK_RUNS = 3
REPRO_RUNS = 10
MAX_BUGS = 10


@dataclasses.dataclass
class HuntOptions:
    """What a hunt is told (durations in seconds)."""

    #: Seconds the whole hunt may take - clean run, search, shrinking, reproduction - wall time (None: no limit;
    #: then `runs` must be given). The search stops at `SEARCH_SHARE` of it; a run in flight at its end is cut.
    budget: float | None = 600.0
    #: Runs the search may take (None: no limit).
    runs: int | None = None
    jobs: int = 1
    #: A run is killed after this long and is a finding of the client's survival.
    timeout: float = 300.0
    seed: int = 0
    shrink_runs: int = SHRINK_RUNS
    repro_runs: int = REPRO_RUNS
    max_bugs: int = MAX_BUGS
    #: Where traces, scripts and minimized traces go.
    out_dir: Path = Path("rtrace-hunt")
    #: The options every run's server starts from (a tool, transcripts, the user's script...); the schedule sets
    #: its latency and adds its faults' turns before the template's own (`server_options`).
    template: ServerOptions = dataclasses.field(default_factory=ServerOptions)
    #: The user's script the template's schedule was read from (`--script`): named in each bug's command.
    script: Path | None = None
    #: Only these schedules, `runs` times each (`--schedule`): no clean run's surface, no search.
    schedules: list[Schedule] | None = None
    #: The bug numbers of `schedules` (`bug-4.toml` -> 4), so a re-run names its entries as the hunt did.
    numbers: list[int | None] | None = None
    #: Kill what a command left running outside its process group (`--kill-strays`; default on in CI).
    kill_strays: bool = dataclasses.field(default_factory=kill_strays_default)
    #: A run of the search ends early once client and server were quiet this long after a fault, with no response
    #: done since (the client hangs: the test's own deadline is not waited out); the re-runs that confirm a bug
    #: wait `CONFIRM_QUIET` times as long (`quiet_of`); None: never.
    quiet: float | None = 3.0
    #: Write into a fresh directory under `out_dir` (`out_dir/N/`), never where another hunt wrote.
    fresh_dir: bool = True
    #: What stops the hunt early (signals, or another thread: the pytest plugin).
    stopper: Stopper | None = None
    #: The command's stdout joins the stderr lines kept (a child pytest reports its failure on stdout).
    stdout_in_tail: bool = False
    #: `--upstream`: every run through a link to this endpoint (`rtrace.net.link.upstream`), the faults it cannot make
    #: (`link.link_makes`) left out of the search.
    upstream: str | None = None
    #: `--intercept`: each run's command is given an HTTPS proxy that answers the realtime hosts itself.
    intercept: bool = False


@dataclasses.dataclass
class Run:
    """One run of the command under one schedule."""

    index: int
    phase: str
    schedule: Schedule
    trace: Path
    exit_code: int | None
    seconds: float
    findings: list[Finding] = dataclasses.field(default_factory=list)
    #: One key per defect of the run - a group of findings that name one item or call (`keys.linked`), keyed
    #: by its primary finding (`primary_order`) - then the client's failure.
    keys: list[BugKey] = dataclasses.field(default_factory=list)
    reaction: tuple[str, tuple[str, ...]] = ("continued", ())
    problem: str | None = None
    stderr_tail: list[str] = dataclasses.field(default_factory=list)
    #: What each finding kept is about -> what the findings of its group are about (itself included).
    about: dict[About, set[About]] = dataclasses.field(default_factory=dict)
    #: What each finding kept is about -> its key in this run, and its first finding.
    key_of: dict[About, BugKey] = dataclasses.field(default_factory=dict)
    finding_of: dict[About, Finding] = dataclasses.field(default_factory=dict)
    #: Seconds from the hunt's start to the end of this run.
    ended: float = 0.0
    #: Why rtrace cut the run (`budget`, or a stop): not judged; None: the command ended, or hit `--timeout`.
    cut: str | None = None
    #: Seconds of quiet after a fault that ended the run early (the client hung; `HuntOptions.quiet`), else None.
    ended_early: float | None = None
    #: Processes the command left running outside its process group, and whether they were killed.
    strays: list[int] = dataclasses.field(default_factory=list)
    strays_killed: bool = False
    #: Where the traceback of rtrace's own failure during the run is (`cut` is then `internal error`).
    internal: Path | None = None
    #: Where on the client's surface the first fault acted (`bugs.point_of`).
    point: str = ""

    @property
    def survived(self) -> bool:
        return self.exit_code == 0

    def how(self) -> str:
        """How the command ended: `exit 0`, `exit 3`, `killed by SIGSEGV`, `timeout`, `hung (...)`."""
        if self.ended_early is not None:
            return f"hung (ended early: quiet {self.ended_early:g}s after the fault)"
        if self.cut == "trace not written":
            return f"discarded: its trace could not be written ({self.problem})"
        if self.cut == "internal error":
            return f"discarded: an internal error of rtrace (traceback in {self.internal or 'no file'})"
        if self.cut is not None:
            return f"cut by the {self.cut} (not judged)"
        return how_ended(self.exit_code)

    def left_running(self) -> str:
        """What the command left running, in words ("" when nothing)."""
        if not self.strays:
            return ""
        pids = ", ".join(str(p) for p in self.strays)
        done = "killed" if self.strays_killed else "still running (--kill-strays ends them)"
        return f"the command left pid {pids} running ({done})"

    def signals(self) -> set[Any]:
        """What the random phase is told about the run: its keys, its rules, the client's reaction sequence."""
        out: set[Any] = set(self.keys)
        out |= {("rule", k.rule) for k in self.keys}
        out |= {("finding", a) for a in self.about}
        out.add(("reaction", self.reaction))
        return out


@dataclasses.dataclass
class Progress:
    """What the hunt tells its progress callback after each run."""

    phase: str
    runs: int
    bugs: int
    #: Seconds the hunt has taken (the budget is the whole hunt's).
    elapsed: float
    budget: float | None
    last: Run | None = None
    #: Seconds the run in flight has taken (a line while it goes on), else None.
    running: float | None = None


class Target(Protocol):
    """What a hunt runs: one run of the client under `options` (a server's), recorded to `options.record`: how it
    ended (`processes.Ended`, or its exit status and last stderr lines); ended early (`Ended.cut` `quiet`) once
    client and server were quiet `quiet` seconds after a fault with a connection open (None: never)."""

    async def run(
        self, options: ServerOptions, timeout: float, quiet: float | None = None
    ) -> tuple[int | None, list[str]] | Ended: ...

    def reproduce(self, script: Path, schedule: Schedule, runs: int) -> str: ...


@dataclasses.dataclass
class CommandTarget:
    """The user's command, run against a server in this process, told its URL as `sweep` tells it."""

    command: list[str]
    #: The user's script every run's schedule runs on (`--script`).
    script: Path | None = None
    #: `HuntOptions.kill_strays`.
    kill_strays: bool = False
    stdout_in_tail: bool = False
    #: `--intercept`: the command reaches the server through an HTTPS proxy (`rtrace.net.link.intercept`).
    intercept: bool = False

    async def run(self, options: ServerOptions, timeout: float, quiet: float | None = None) -> Ended:
        async with run_server(options) as srv, intercepting(self.intercept, srv.port) as proxied:
            env = {**command_env(srv.url, srv.http_url, srv.realtime_url, options.latency), **proxied}
            ended = await _run_at(srv, self, env, options, timeout, quiet)
            if srv.internal_errors:
                ended.internal = "\n".join(srv.internal_errors)
        if srv.recorder is not None and srv.recorder.failed is not None:  # known once the trace is closed
            ended.unwritten = srv.recorder.failed
        return ended

    def reproduce(self, script: Path, schedule: Schedule, runs: int) -> str:
        return _reproduce([], self, script, runs)


class _Quiets(Protocol):
    """What a run's command talks to, the fake server or a link: whether it has been quiet since a fault."""

    def hung_after_fault(self, quiet: float) -> bool: ...


async def _run_at(
    endpoint: _Quiets,
    target: CommandTarget | UpstreamTarget,
    env: dict[str, str],
    options: ServerOptions,
    timeout: float,
    quiet: float | None,
) -> Ended:
    """`target`'s command run with `env` against `endpoint`: told it is hunted (a pytest plugin hands out this
    server), trusting `--tls`'s made authority (`tls.trust_env`), ended early once quiet `quiet` seconds after a
    fault (None: only at `timeout`)."""
    env = {**env, "RTRACE_HUNT": "1"}
    if options.tls is not None:
        env.update((name, value) for name, value, _ in trust_env(options.tls))

    def hung() -> str | None:
        return "quiet" if quiet is not None and endpoint.hung_after_fault(quiet) else None

    return await run_command(target.command, env, timeout, "hunt", False, target.kill_strays, hung,
                             target.stdout_in_tail)  # fmt: skip


def _reproduce(before: list[str], target: CommandTarget | UpstreamTarget, script: Path, runs: int) -> str:
    """The command line that re-runs a bug's `script` `runs` times against what `target` ran against."""
    base = [*before, *(["--script", str(target.script)] if target.script is not None else [])]
    base += ["--intercept"] if target.intercept else []
    return shlex.join(["rtrace", "hunt", *base, "--schedule", str(script), "--runs", str(runs), "--", *target.command])


@dataclasses.dataclass
class UpstreamTarget:
    """`rtrace hunt --upstream URL`: each run of the command through a `LinkProxy` of its own to `upstream`."""

    command: list[str]
    upstream: str
    script: Path | None = None
    intercept: bool = False
    #: `HuntOptions.kill_strays`, `HuntOptions.stdout_in_tail` (as `CommandTarget`'s).
    kill_strays: bool = False
    stdout_in_tail: bool = False

    async def run(self, options: ServerOptions, timeout: float, quiet: float | None = None) -> Ended:
        record = RecordOptions(upstream=self.upstream, output=options.record, header=options.header, tls=options.tls)
        async with run_link(record, options) as proxy, intercepting(self.intercept, proxy.port) as proxied:
            realtime_url = f"{proxy.url}/realtime?model=gpt-realtime"
            env = {**command_env(proxy.url, proxy.http_url, realtime_url, options.latency), **proxied}
            ended = await _run_at(proxy, self, env, options, timeout, quiet)
        if proxy.writer is not None and proxy.writer.failed is not None:  # known once the trace is closed
            ended.unwritten = proxy.writer.failed  # the hunt discards the run and stops (as CommandTarget's)
        return ended

    def reproduce(self, script: Path, schedule: Any, runs: int) -> str:
        return _reproduce(["--upstream", safe_url(self.upstream)], self, script, runs)


def server_options(template: ServerOptions, schedule: Schedule, trace: Path, header: dict[str, Any]) -> ServerOptions:
    """The options of one run: `template` with the schedule's latency, turns (before the template's own: the
    user's script is the base the faults act on, its turns numbered after theirs) and seed, recording to `trace`
    with the hunt's header fields."""
    default, by_type = schedule.latency()
    jitter, jitter_by_type = schedule.jitter()
    turns = schedule.script() if schedule.turn_faults() else None
    endpoint = dataclasses.replace(template.endpoint, seed=schedule.seed)
    return dataclasses.replace(
        template, host="127.0.0.1", port=0, record=trace, latency=default, latency_by_type=by_type,
        jitter=jitter or template.jitter, jitter_by_type={**template.jitter_by_type, **jitter_by_type},
        schedule=turns + template.schedule if turns is not None else template.schedule, endpoint=endpoint,
        seed=schedule.seed, header={**template.header, "hunt": header},
    )  # fmt: skip


def records_of(trace: Path) -> list[dict[str, Any]]:
    """The records of a native trace (its header and unreadable lines left out), each with its `line`."""
    out: list[dict[str, Any]] = []
    try:
        with trace.open(encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict) and "dir" in rec:
                    rec["line"] = n  # where a finding's lines point (`bugs.injected`)
                    out.append(rec)
    except OSError:
        return []
    return out


class Spent(Exception):
    """The hunt's budget ran out (before a run, or during it: the run was cut and is not judged)."""


#: The share of the budget the clean run and the search may take; the rest is the bugs' (shrinking, reproduction).
SEARCH_SHARE = 0.6
#: The share of the budget by the end of which shrinking stops (the rest: re-runs for each bug's rate).
SHRINK_SHARE = 0.8
#: Seconds between two progress lines while a run goes on.
HEARTBEAT = 5.0
#: The runs that confirm a bug (the re-runs of its rate, `--schedule`'s) end early only after this many times the
#: search's quiet (3 s -> 12 s): a run the search ended early is a candidate, and "hung" is said only of a client
#: still quiet past the deadlines real clients keep on a silent server (livekit-agents 1.8.9 and agents-js: 5 s
#: for the acks of a context update, 10 s for `response.created` and for a connection; openai-agents: none).
CONFIRM_QUIET = 4.0
#: The phases whose runs confirm a bug.
CONFIRMING = ("reproducing", "re-run")


def quiet_of(quiet: float | None, phase: str) -> float | None:
    """The quiet after a fault that ends a run of `phase` early (`HuntOptions.quiet`; `CONFIRM_QUIET` times it for
    the runs that confirm a bug); None: never."""
    if quiet is None:
        return None
    return quiet * CONFIRM_QUIET if phase in CONFIRMING else quiet


class Runner:
    """One hunt's runs: their numbering, the baseline, the clock, the budget's deadlines, the stop; what judges a
    run is the subclass's (`judge`: `rtrace.net.hunt.hunt.Hunt`)."""

    def __init__(
        self,
        target: Target,
        options: HuntOptions,
        progress: Callable[[Progress], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.target = target
        self.options = options
        self.progress = progress
        self.clock = clock
        self.started = clock()
        #: When the search started (the clean run done): what `budget` counts from.
        self.search_started: float | None = None
        self.count = 0
        self.runs: list[Run] = []
        self.baseline: set[tuple[str, tuple[str, ...]]] = set()
        self.bugs_so_far: set[tuple[str, tuple[str, ...], tuple[str, ...]]] = set()
        self.phase = "clean run"
        #: The client events of the clean run (`bugs.client_counts`), once it ran: what `judge` reads a session
        #: completed by.
        self.clean_client: dict[str, int] | None = None
        #: Candidates the cap (`max_bugs`) left out, one line each (`HuntResult.left_out`).
        self.left_out: list[str] = []
        self.traces = options.out_dir / "runs"
        #: At most `jobs` runs at once, whatever asks for them (the search's batches, the bugs' confirmations).
        self.slots = asyncio.Semaphore(max(1, options.jobs))
        self.stopper = options.stopper or Stopper()
        #: When the whole hunt must end (the budget, wall time), and the search (`SEARCH_SHARE` of it).
        self.deadline = None if options.budget is None else self.started + options.budget
        self.search_deadline = None if options.budget is None else self.started + options.budget * SEARCH_SHARE
        #: When shrinking ends (`SHRINK_SHARE`): the rest is the re-runs' that measure each bug's rate.
        self.shrink_deadline = None if options.budget is None else self.started + options.budget * SHRINK_SHARE
        self.shrink_cut = False
        #: Why a run's trace could not be written (a full disk under --out): the hunt stops there.
        self.unwritten: str | None = None
        #: Seconds between two progress lines while a run goes on (the clean run too).
        self.heartbeat = HEARTBEAT

    def elapsed(self) -> float:
        return self.clock() - self.started

    def time_left(self) -> float | None:
        """Seconds of the budget left (None: no budget)."""
        return None if self.deadline is None else self.deadline - self.clock()

    def searched(self) -> float:
        """Seconds the search has taken (0 before it starts)."""
        return 0.0 if self.search_started is None else self.clock() - self.search_started

    def tell(self, phase: str, last: Run | None = None, running: float | None = None) -> None:
        if self.progress is not None:
            self.progress(Progress(phase, len(self.runs), len(self.bugs_so_far), self.elapsed(),
                                   self.options.budget, last, running))  # fmt: skip

    async def _beat(self, phase: str, start: float) -> None:
        """A progress line every `heartbeat` seconds while a run goes on (from its start: the clean run too)."""
        self.tell(phase, running=0.0)
        while True:
            await asyncio.sleep(self.heartbeat)
            self.tell(phase, running=self.clock() - start)

    async def run(self, schedule: Schedule, phase: str) -> Run:
        """One run of `schedule`, judged. Raises `Stopped` (the hunt was stopped: the run ended, not judged) and
        `Spent` (the budget ran out before it, or cut it)."""
        if self.stopper.stopped:
            raise Stopped(self.stopper.reason or "stopped")
        if phase == "shrinking" and self.shrink_deadline is not None and self.clock() >= self.shrink_deadline:
            # shrinking's share is spent: a step not run does not hold, so each bug is re-run as shrunk so far
            self.shrink_cut = True
            return Run(0, phase, schedule, self.traces / "not-run", 0, 0.0, cut="budget")
        async with self.slots:
            left = self.time_left()
            if (left is not None and left <= 0) or self.unwritten is not None:
                raise Spent()
            self.count += 1
            index = self.count
            trace = self.traces / f"run{index:04d}.jsonl"
            header = {"seed": schedule.seed, "schedule": schedule.to_json(), "run": index, "phase": phase}
            options = server_options(self.options.template, schedule, trace, header)
            limit = self.options.timeout if left is None else min(self.options.timeout, left)
            quiet = quiet_of(self.options.quiet, phase)
            start = self.clock()
            beat = asyncio.ensure_future(self._beat(phase, start))
            try:
                ended = await self.stopper.guard(self.target.run(options, limit, quiet))
            except (Stopped, asyncio.CancelledError, CommandNotFound):
                raise
            except Exception:  # rtrace's own failure (its server could not start or record): not the client's
                ended = Ended(None, internal=traceback.format_exc())
            finally:
                beat.cancel()
        if not isinstance(ended, Ended):
            ended = Ended(*ended)
        run = Run(index, phase, schedule, trace, ended.code, self.clock() - start, stderr_tail=ended.tail,
                  strays=ended.strays, strays_killed=ended.strays_killed)  # fmt: skip
        if ended.unwritten is not None:
            run.cut, run.problem = "trace not written", ended.unwritten
            self.unwritten = ended.unwritten  # a full disk stays full: no run starts after this one
        elif ended.internal is not None:
            run.cut, run.internal = "internal error", self._keep_traceback(index, ended.internal)
        elif ended.cut == "quiet":
            run.ended_early = quiet
        elif ended.code is None and limit < self.options.timeout:
            run.cut = "budget"  # the budget's end, not the command's --timeout: not the client's failure
        if run.cut is None:
            # off the event loop: the servers of the runs still going share it, and their timing is measured
            await asyncio.to_thread(self.judge, run)
        run.ended = self.elapsed()
        self.runs.append(run)
        self.bugs_so_far |= {(k.rule, k.items, k.faults) for k in run.keys}
        self.tell(phase, run)
        if run.cut == "budget":
            raise Spent()
        return run

    def _keep_traceback(self, index: int, text: str) -> Path | None:
        """Write an internal error's traceback beside the runs (`internal-error-runNNNN.txt`); its path."""
        path = self.options.out_dir / f"internal-error-run{index:04d}.txt"
        try:
            path.write_text(text, encoding="utf-8")
        except OSError:
            return None
        return path

    async def batch(self, schedules: list[Schedule], phase: str) -> list[Run]:
        """Runs of `schedules`, those that ran whole. Raises `Stopped`, and `Spent` when none did."""
        done = await asyncio.gather(*(self.run(s, phase) for s in schedules), return_exceptions=True)
        for outcome in done:
            if isinstance(outcome, BaseException) and not isinstance(outcome, Spent):
                raise outcome
        runs = [r for r in done if isinstance(r, Run)]
        if schedules and not runs:
            raise Spent()
        return runs

    def spent(self, searched: int) -> str | None:
        o = self.options
        if self.unwritten is not None:
            return "trace not written"
        if o.runs is not None and searched >= o.runs:
            return "runs"
        if self.search_deadline is not None and self.clock() >= self.search_deadline:
            return "budget"
        return None

    def judge(self, run: Run) -> None:
        """Set `run`'s findings, reaction and keys from its trace."""
        raise NotImplementedError
