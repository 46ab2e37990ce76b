"""`rtrace hunt`: look for the bugs of a real client by itself. Runs the user's command against a fresh fake
endpoint per schedule (`rtrace.net.schedule`: the fault space, the phases, the shrinker, the bug keys) and
turns what the runs showed into distinct, shrunk, re-run bugs. Prints nothing: `rtrace.report.hunt` renders
the result, the progress it is told of.

1. **The clean run**: no fault, no latency. Its trace is the client's surface; its findings are the baseline,
   bugs like any other (their schedule: no fault), and a finding of the same rule on the same kind of item under a
   fault may shrink to the clean schedule and be one bug with it. A command that fails its clean run cannot be
   hunted (`HuntResult.clean_failed`). Findings that restate an injected fault (`FAULT_ECHOES`) are no bug.
2. **The search**: the systematic phase (each single fault at each point of the surface once, cheapest first),
   then the random phase (`Generator`), in batches of `jobs` runs at once, each against its own server on its own
   port, until `budget` seconds or `runs` runs are spent. A run's signals (its bug keys, its rules, the client's
   reaction to the first fault) feed the random phase in batch order, so one seed and one `jobs` draw the same
   schedules.
3. **The bugs**: candidates by (rule, items, faults that acted); for each, the cheapest schedule that showed it
   is shrunk (`schedule.shrink`; each candidate is re-run up to `shrink_runs` times: a flaky reproduction counts
   once it shows), its reproduction rate taken over `repro_runs` runs, and one reproducing trace minimized
   (`rtrace.transform.minimize`). Bugs whose shrunk keys agree are one. A finding that reproduces in no re-run is
   kept apart (`HuntResult.unconfirmed`), never reported as a bug.
4. **The client did not survive**: a run whose command exits non-zero, dies of a signal or outlives `timeout`
   is a finding of its own kind (`schedule.SURVIVAL`), shrunk and re-run the same way.

Every run's trace header holds its seed and its schedule (`hunt`); each bug's schedule is written as a script
(`bug-N.toml`, with its `serve` flags and its schedule as JSON in the comments: `load_schedule` reads it back,
`rtrace hunt --schedule bug-N.toml -- COMMAND` re-runs it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shlex
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from ..core.inputs import MAX_NESTING, UnreadableInput, nesting_over, read_side_input
from ..engine.fold import analyze_path
from ..rules import RULES
from ..rules.base import Finding
from .schedule import (
    SURVIVAL,
    BugKey,
    Generator,
    Schedule,
    Surface,
    acted,
    bug_key,
    item_kinds_of,
    reaction,
    shrink,
    surface_of,
    systematic,
)
from .script import SCRIPT_BYTES, parse_script
from .server import ServerOptions, run_server
from .sweep import check_command, command_env, how_ended, run_command

#: Defaults of the command line.
SHRINK_RUNS = 3
REPRO_RUNS = 10
MAX_BUGS = 10
#: The line of a bug's script that holds its schedule as JSON (`load_schedule`).
SCHEDULE_LINE = "# rtrace-schedule: "


@dataclasses.dataclass
class HuntOptions:
    """What a hunt is told (durations in seconds)."""

    #: Seconds the search may take (None: no limit; then `runs` must be given).
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
    #: The options every run's server starts from (a tool, transcripts...); the schedule sets its faults.
    template: ServerOptions = dataclasses.field(default_factory=ServerOptions)
    #: Only these schedules, `runs` times each (`--schedule`): no clean run's surface, no search.
    schedules: list[Schedule] | None = None


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
    #: The key of each finding, and of the client's failure (the same order; the failure last).
    keys: list[BugKey] = dataclasses.field(default_factory=list)
    reaction: tuple[str, tuple[str, ...]] = ("continued", ())
    problem: str | None = None
    stderr_tail: list[str] = dataclasses.field(default_factory=list)
    #: Rule id of an error finding -> the findings of the run that follow from it (`consequence_of`).
    also: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    #: The first finding of each key.
    finding_of: dict[BugKey, Finding] = dataclasses.field(default_factory=dict)

    @property
    def survived(self) -> bool:
        return self.exit_code == 0

    def how(self) -> str:
        """How the command ended: `exit 0`, `exit 3`, `killed by SIGSEGV`, `timeout`."""
        return how_ended(self.exit_code)

    def signals(self) -> set[Any]:
        """What the random phase is told about the run: its keys, its rules, the client's reaction sequence."""
        out: set[Any] = set(self.keys)
        out |= {("rule", k.rule) for k in self.keys}
        out.add(("reaction", self.reaction))
        return out


@dataclasses.dataclass
class Bug:
    """One distinct bug: its key, the finding as first seen, the schedule it was found with and the shrunk one,
    the reproduction rate of the shrunk one, its traces and the command that reproduces it."""

    key: BugKey
    severity: str
    slug: str
    message: str
    explanation: str
    fix: str
    found: Schedule
    schedule: Schedule
    hits: int
    tries: int
    #: A trace of a run of `schedule` that reproduced it, its minimized form (None: a survival finding, or
    #: minimizing failed), the script of `schedule`.
    trace: Path | None = None
    minimized: Path | None = None
    script: Path | None = None
    command: str = ""
    #: Runs spent shrinking.
    shrink_runs: int = 0
    #: How the command ended (survival findings), else "".
    how: str = ""
    #: Findings of the same runs that follow from this one (`consequence_of`): reported with it, not apart.
    also: list[str] = dataclasses.field(default_factory=list)

    @property
    def rule(self) -> str:
        return self.key.rule

    @property
    def rate(self) -> float:
        return self.hits / self.tries if self.tries else 0.0

    @property
    def reproduced(self) -> bool:
        return self.hits > 0


@dataclasses.dataclass
class Progress:
    """What the hunt tells its progress callback after each run."""

    phase: str
    runs: int
    bugs: int
    elapsed: float
    budget: float | None
    last: Run | None = None


@dataclasses.dataclass
class HuntResult:
    command: list[str]
    options: HuntOptions
    clean: Run | None
    surface: Surface
    runs: list[Run]
    bugs: list[Bug]
    #: Findings no re-run reproduced (not bugs).
    unconfirmed: list[Bug]
    elapsed: float
    #: Why the search stopped: `budget`, `runs`, `space` (nothing left to draw), `clean run failed`.
    stopped: str

    @property
    def clean_failed(self) -> bool:
        return self.clean is not None and not self.clean.survived

    @property
    def baseline(self) -> list[Finding]:
        return self.clean.findings if self.clean is not None else []

    def findings(self) -> list[Bug]:
        return self.bugs


class Target(Protocol):
    """What a hunt runs: one run of the client under `options` (a server's), recorded to `options.record`."""

    async def run(self, options: ServerOptions, timeout: float) -> tuple[int | None, list[str]]: ...

    def reproduce(self, script: Path, schedule: Schedule, runs: int) -> str: ...


@dataclasses.dataclass
class CommandTarget:
    """The user's command, run against a server in this process, told its URL as `sweep` tells it."""

    command: list[str]

    async def run(self, options: ServerOptions, timeout: float) -> tuple[int | None, list[str]]:
        async with run_server(options) as srv:
            env = {**command_env(srv, options.latency), "RTRACE_HUNT": "1"}  # a pytest plugin hands out this server
            return await run_command(self.command, env, timeout, "hunt", echo=False)

    def reproduce(self, script: Path, schedule: Schedule, runs: int) -> str:
        args = ["rtrace", "hunt", "--schedule", str(script), "--runs", str(runs), "--", *self.command]
        return shlex.join(args)


def server_options(template: ServerOptions, schedule: Schedule, trace: Path, header: dict[str, Any]) -> ServerOptions:
    """The options of one run: `template` with the schedule's latency, turns (before the template's own) and seed,
    recording to `trace` with the hunt's header fields."""
    default, by_type = schedule.latency()
    jitter, jitter_by_type = schedule.jitter()
    turns = parse_script(schedule.script_toml(), "<schedule>") if schedule.turn_faults() else None
    endpoint = dataclasses.replace(template.endpoint, seed=schedule.seed)
    return dataclasses.replace(
        template, host="127.0.0.1", port=0, record=trace, latency=default, latency_by_type=by_type,
        jitter=jitter or template.jitter, jitter_by_type={**template.jitter_by_type, **jitter_by_type},
        schedule=turns + template.schedule if turns is not None else template.schedule, endpoint=endpoint,
        seed=schedule.seed, header={**template.header, "hunt": header},
    )  # fmt: skip


def records_of(trace: Path) -> list[dict[str, Any]]:
    """The records of a native trace (its header and unreadable lines left out)."""
    out: list[dict[str, Any]] = []
    try:
        with trace.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict) and "dir" in rec:
                    out.append(rec)
    except OSError:
        return []
    return out


#: Rules whose finding restates a fault the schedule injected - an `error` the server sent (or the real server's
#: `response_cancel_not_active` to a client cancelling the response the server already cancelled, on a barge-in or
#: its own cancel: livekit 1.8.9 sends `response.cancel` on `speech_started`), a session that expired, a response
#: the server's close cut (RT107 as a warning: the wire cannot show whether the client closed its generation; as an
#: error it is the client's) - with the kinds of fault it restates and the severity it has then: not a bug of the
#: client when the schedule has that kind of fault.
FAULT_ECHOES: dict[str, tuple[frozenset[str], str | None]] = {
    "RT112": (frozenset({"error", "barge_in", "cancel"}), None),
    "RT119": (frozenset({"expire"}), None),
    "RT107": (frozenset({"close", "drop"}), "warning"),
}


def echoes(finding: Finding, injected: set[str]) -> bool:
    """Whether `finding` only restates a fault of a kind in `injected` (`FAULT_ECHOES`)."""
    kinds, severity = FAULT_ECHOES.get(finding.rule, (frozenset(), None))
    return bool(kinds & injected) and severity in (None, finding.severity)


def _ids(finding: Finding) -> set[str]:
    return {i for values in finding.ids.values() for i in values}


def consequence_of(finding: Finding, findings: list[Finding]) -> Finding | None:
    """The error finding of the same run a warning (or info) finding follows from: one about the same item or call
    (an output deleted, then the call reported unanswered: one bug, reported once with its consequences)."""
    if finding.severity == "error":
        return None
    mine = _ids(finding)
    return next((f for f in findings if f.severity == "error" and f is not finding and mine & _ids(f)), None)


def keys_of(run: Run, records: list[dict[str, Any]]) -> list[BugKey]:
    """The keys of a run's findings (but those that restate an injected fault, and those that follow from an
    error finding of the run: `Run.also`), and of the client's failure."""
    kinds = item_kinds_of(records)
    faults = acted(run.schedule, records)
    reacted = run.reaction[0]
    injected: set[str] = {f.kind for f in run.schedule.faults}
    kept = [f for f in run.findings if not echoes(f, injected)]
    keys: list[BugKey] = []
    for f in kept:
        cause = consequence_of(f, kept)
        if cause is not None:
            run.also.setdefault(cause.rule, set()).add(f"{f.rule} {f.slug}")
            continue
        key = bug_key(f.rule, f.ids, kinds, faults, reacted)
        if key not in keys:
            keys.append(key)
            run.finding_of[key] = f
    if not run.survived and run.phase != "clean run":
        how = run.how().split(" ")[0] if run.exit_code is None or run.exit_code < 0 else run.how()
        keys.append(BugKey(SURVIVAL, (how,), faults, reacted))
    return keys


class Hunt:
    """One hunt: its runs, their numbering, the baseline, the clock."""

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
        self.count = 0
        self.runs: list[Run] = []
        self.baseline: set[tuple[str, tuple[str, ...]]] = set()
        self.bugs_so_far: set[tuple[str, tuple[str, ...], tuple[str, ...]]] = set()
        self.phase = "clean run"
        self.traces = options.out_dir / "runs"
        #: At most `jobs` runs at once, whatever asks for them (the search's batches, the bugs' confirmations).
        self.slots = asyncio.Semaphore(max(1, options.jobs))

    def elapsed(self) -> float:
        return self.clock() - self.started

    async def run(self, schedule: Schedule, phase: str) -> Run:
        self.count += 1
        index = self.count
        trace = self.traces / f"run{index:04d}.jsonl"
        header = {"seed": schedule.seed, "schedule": schedule.to_json(), "run": index, "phase": phase}
        options = server_options(self.options.template, schedule, trace, header)
        async with self.slots:
            start = self.clock()
            code, tail = await self.target.run(options, self.options.timeout)
        run = Run(index, phase, schedule, trace, code, self.clock() - start, stderr_tail=tail)
        records = records_of(trace)
        try:
            run.findings = analyze_path(trace).findings if trace.exists() else []
        except Exception as e:  # an unreadable trace is a result of the run
            run.problem = str(e)
        run.reaction = reaction(records)
        run.keys = keys_of(run, records)
        self.runs.append(run)
        self.bugs_so_far |= {(k.rule, k.items, k.faults) for k in run.keys}
        if self.progress is not None:
            self.progress(Progress(phase, len(self.runs), len(self.bugs_so_far), self.elapsed(),
                                   self.options.budget, run))  # fmt: skip
        return run

    async def batch(self, schedules: list[Schedule], phase: str) -> list[Run]:
        return list(await asyncio.gather(*(self.run(s, phase) for s in schedules)))

    def spent(self, searched: int) -> str | None:
        o = self.options
        if o.runs is not None and searched >= o.runs:
            return "runs"
        if o.budget is not None and self.elapsed() >= o.budget:
            return "budget"
        return None


async def hunt_async(
    target: Target, options: HuntOptions, progress: Callable[[Progress], None] | None = None
) -> HuntResult:
    """Hunt (see the module docstring)."""
    options.out_dir.mkdir(parents=True, exist_ok=True)
    (options.out_dir / "runs").mkdir(exist_ok=True)
    hunt = Hunt(target, options, progress)
    if options.schedules is not None:
        return await _rerun(hunt, options.schedules)
    clean = await hunt.run(Schedule(seed=options.seed), "clean run")
    surface = surface_of(records_of(clean.trace))
    if not clean.survived:
        return HuntResult([], options, clean, surface, hunt.runs, [], [], hunt.elapsed(), "clean run failed")
    hunt.baseline = {k.finding for k in clean.keys}
    jobs = max(1, options.jobs)
    queue = systematic(surface, options.seed)
    generator = Generator(surface, options.seed)
    searched: list[Run] = []
    stopped = None
    while (stopped := hunt.spent(len(searched))) is None:
        room = jobs if options.runs is None else min(jobs, options.runs - len(searched))
        phase = "systematic" if queue else "random"
        if queue:
            batch, queue = queue[:room], queue[room:]
        else:
            batch = [generator.next() for _ in range(room)]
        for run in await hunt.batch(batch, phase):
            searched.append(run)
            generator.observe(run.schedule, run.signals())
    bugs, unconfirmed = await _confirm(hunt, [clean, *searched])
    return HuntResult([], options, clean, surface, hunt.runs, bugs, unconfirmed, hunt.elapsed(), stopped)


async def _rerun(hunt: Hunt, schedules: list[Schedule]) -> HuntResult:
    """`--schedule`: each schedule `runs` times (default `repro_runs`); each finding a bug with its rate."""
    o = hunt.options
    times = o.runs or o.repro_runs
    runs: list[Run] = []
    for schedule in schedules:
        runs += await hunt.batch([schedule] * times, "re-run")
    bugs: dict[BugKey, Bug] = {}
    for run in runs:
        for key in run.keys:
            bug = bugs.get(key) or _bug(key, run, run.schedule)
            bugs[key] = bug
            bug.hits += 1
    for bug in bugs.values():
        bug.tries = sum(1 for r in runs if r.schedule == bug.schedule)
    found = list(bugs.values())
    await _finish(hunt, found)
    return HuntResult([], o, None, Surface(), hunt.runs, found, [], hunt.elapsed(), "runs")


def _finding_of(run: Run, key: BugKey) -> Finding | None:
    return run.finding_of.get(key) or next((f for f in run.findings if f.rule == key.rule), None)


def _bug(key: BugKey, run: Run, schedule: Schedule) -> Bug:
    finding = _finding_of(run, key) if key.rule != SURVIVAL else None
    if finding is not None:
        return Bug(key, finding.severity, finding.slug, finding.message, finding.explanation, finding.fix,
                   run.schedule, schedule, 0, 0, trace=run.trace, also=sorted(run.also.get(key.rule, ())))  # fmt: skip
    how = run.how()
    message = f"the client did not survive this fault ({how})"
    explanation = (
        f"Under this schedule the command ended with {how} where its clean run exited 0: the client crashed, "
        "hung past --timeout or gave up instead of recovering. Its last stderr lines: "
        + (" | ".join(run.stderr_tail[-3:]) or "(none)")
    )
    fix = "Make the client recover from this fault (reconnect, retry, or end the turn cleanly) and exit 0."
    return Bug(key, "error", SURVIVAL, message, explanation, fix, run.schedule, schedule, 0, 0,
               trace=run.trace, how=how)  # fmt: skip


def _holds(run: Run, want: tuple[str, tuple[str, ...]]) -> BugKey | None:
    return next((k for k in run.keys if k.finding == want), None)


async def _confirm(hunt: Hunt, searched: list[Run]) -> tuple[list[Bug], list[Bug]]:
    """Shrink, re-run and minimize each candidate bug (see the module docstring), `jobs` runs at once across
    them; the most severe candidates first when there are more than `max_bugs`."""
    o = hunt.options
    hunt.phase = "shrinking"
    first: dict[tuple[str, tuple[str, ...], tuple[str, ...]], tuple[BugKey, Run, Finding | None]] = {}
    for run in sorted(searched, key=lambda r: (r.schedule.cost, r.index)):
        for key in _findings_first(run.keys):
            first.setdefault((key.rule, key.items, key.faults), (key, run, _finding_of(run, key)))
    ranked = sorted(first.values(), key=lambda c: (_severity_rank(c[2].severity if c[2] else "error"),
                                                   c[0].rule == SURVIVAL, c[1].schedule.cost, c[1].index))  # fmt: skip
    outcomes = await asyncio.gather(*(_confirm_one(hunt, key, run) for key, run, _ in ranked[: o.max_bugs]))
    merged: dict[BugKey, Bug] = {}
    unconfirmed: list[Bug] = []
    for bug in outcomes:
        if not bug.reproduced:
            unconfirmed.append(bug)
        elif bug.key not in merged:  # one bug, found again with another schedule that shrank to the same
            merged[bug.key] = bug
    bugs = sorted(merged.values(), key=lambda b: (_severity_rank(b.severity), b.rule, b.key))
    await _finish(hunt, bugs)
    return bugs, unconfirmed


async def _confirm_one(hunt: Hunt, key: BugKey, run: Run) -> Bug:
    """One candidate: shrink its schedule, take the rate of the result; a bug (reproduced or not). A shrinking
    step that held only by chance shows as a rate of 0: the steps before it are measured then, back to the
    schedule the search found, and the first that reproduces is the bug's."""
    o = hunt.options
    want = key.finding
    spent = 0
    steps = shrink(run.schedule, allow_clean=want in hunt.baseline)
    path = [run.schedule]
    try:
        candidate = next(steps)
        while True:
            hit = None
            for _ in range(max(1, o.shrink_runs)):
                spent += 1
                again = await hunt.run(candidate, "shrinking")
                if _holds(again, want) is not None:
                    hit = again
                    break
            if hit is not None:
                path.append(candidate)
            candidate = steps.send(hit is not None)
    except StopIteration:
        pass
    tries = 0
    for final in reversed(path):
        reruns = await hunt.batch([final] * o.repro_runs, "reproducing")
        tries += len(reruns)
        hits = [(r, k) for r in reruns if (k := _holds(r, want)) is not None]
        if hits:
            bug = _bug(hits[0][1], hits[0][0], final)
            bug.found = run.schedule
            bug.hits, bug.tries, bug.shrink_runs = len(hits), len(reruns), spent
            return bug
    bug = _bug(key, run, run.schedule)
    bug.tries, bug.shrink_runs = o.repro_runs, spent
    return bug


def _findings_first(keys: list[BugKey]) -> list[BugKey]:
    """A run's keys, its findings before its failure (a failure is often their consequence)."""
    return sorted(keys, key=lambda k: k.rule == SURVIVAL)


def _severity_rank(severity: str) -> int:
    return {"error": 0, "warning": 1, "info": 2}.get(severity, 3)


async def _finish(hunt: Hunt, bugs: list[Bug]) -> None:
    """Write each bug's script, minimize its trace, name its command."""
    out = hunt.options.out_dir
    for n, bug in enumerate(bugs, 1):
        script = out / f"bug-{n}.toml"
        text = bug.schedule.script_toml() + f"{SCHEDULE_LINE}{json.dumps(bug.schedule.to_json())}\n"
        script.write_text(text, encoding="utf-8")
        bug.script = script
        bug.command = hunt.target.reproduce(script, bug.schedule, hunt.options.repro_runs)
        if bug.rule != SURVIVAL and bug.trace is not None:
            bug.minimized = await asyncio.to_thread(_minimized, bug.trace, bug.rule, out / f"bug-{n}.min.jsonl")


def _minimized(trace: Path, rule_id: str, output: Path) -> Path | None:
    from ..core.writer import write_replacing
    from ..transform.minimize import NothingToMinimize, minimize, write

    rule = next((r for r in RULES if r.id == rule_id), None)
    if rule is None:
        return None
    try:
        result = minimize(trace, rule)
    except (NothingToMinimize, OSError, ValueError):
        return None
    import io

    buffer = io.BytesIO()
    write(result, buffer)
    write_replacing(output, buffer.getvalue())
    return output


def load_schedule(path: str | os.PathLike[str]) -> Schedule:
    """The schedule of a bug's script (its `# rtrace-schedule:` line). Raises ValueError."""
    where = os.fspath(path)
    try:  # a side input like any other: special files refused, size capped, nesting bounded before json recurses
        text = read_side_input(where, "the schedule", SCRIPT_BYTES).decode("utf-8")
    except (UnreadableInput, UnicodeDecodeError) as e:
        raise ValueError(f"{where}: cannot read the schedule: {e}") from None
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith(SCHEDULE_LINE):
            try:
                value = line[len(SCHEDULE_LINE) :]
                deep = nesting_over(value, "json", MAX_NESTING)
                if deep is not None:
                    column = len(SCHEDULE_LINE) + deep[1]
                    raise ValueError(f"nested deeper than {MAX_NESTING} levels at column {column}")
                return Schedule.from_json(json.loads(value))
            except (ValueError, TypeError, KeyError) as e:
                raise ValueError(f"{os.fspath(path)}:{n}: the schedule is not readable: {e}") from None
    raise ValueError(f"{os.fspath(path)}: no `{SCHEDULE_LINE.strip()}` line (a bug script rtrace hunt wrote)")


def hunt(
    command: list[str], options: HuntOptions, progress: Callable[[Progress], None] | None = None
) -> HuntResult:
    """Hunt with the user's command (see the module docstring). Raises `CommandNotFound` (a ValueError)."""
    check_command(command, "hunt")
    if options.budget is None and options.runs is None and options.schedules is None:
        raise ValueError("give --budget or --runs (or both)")
    result = asyncio.run(hunt_async(CommandTarget(command), options, progress))
    result.command = command
    return result


def bug_runs(result: HuntResult) -> Iterator[Run]:
    """The runs of the search (the clean run, shrinking and re-runs left out)."""
    return (r for r in result.runs if r.phase in ("systematic", "random"))


__all__ = [
    "Bug",
    "CommandTarget",
    "HuntOptions",
    "HuntResult",
    "Progress",
    "Run",
    "Target",
    "hunt",
    "hunt_async",
    "load_schedule",
    "server_options",
]
