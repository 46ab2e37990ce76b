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
   (`rtrace.transform.minimize`). Where that does not reproduce it reliably, the next schedules that showed the
   finding are tried too (a race the clean run showed by chance, and a latency shows every time). Bugs whose shrunk
   keys agree are one. A finding that reproduces in no re-run is kept apart (`HuntResult.unconfirmed`), never
   reported as a bug.
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
from .intercept import intercepting
from .link import UpstreamTarget, link_makes
from .schedule import (
    SURVIVAL,
    BugKey,
    Generator,
    Schedule,
    Surface,
    acted,
    bug_key,
    item_calls_of,
    item_kinds_of,
    linked,
    reaction,
    shrink,
    surface_of,
    systematic,
)
from .script import SCRIPT_BYTES, parse_script
from .script import Schedule as ScriptSchedule
from .server import ServerOptions, run_server
from .sweep import check_command, command_env, how_ended, run_command
from .tls import trust_env

#: Defaults of the command line.
SHRINK_RUNS = 3
REPRO_RUNS = 10
MAX_BUGS = 10
#: The line of a bug's script that holds its schedule as JSON (`load_schedule`).
SCHEDULE_LINE = "# rtrace-schedule: "
#: What a finding is about (`BugKey.finding`): its rule and the kinds of its items.
About = tuple[str, tuple[str, ...]]


@dataclasses.dataclass
class HuntOptions:
    """What a hunt is told (durations in seconds)."""

    #: Seconds the search may take, from the end of the clean run (None: no limit; then `runs` must be given).
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
    #: `--upstream`: every run through a link to this endpoint (`rtrace.net.link`), the faults it cannot make
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
    #: One key per defect of the run - a group of findings that name one item or call (`schedule.linked`), keyed
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
        out |= {("finding", a) for a in self.about}
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
    #: The other findings of the defect, `RULE slug` each: linked to this one (`schedule.linked`) in every run
    #: that reproduced it - one bug seen by several rules, reported once.
    also: list[str] = dataclasses.field(default_factory=list)
    #: Every rule of the bug, (id, slug), its own first.
    rules: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    #: What its findings are about (its own and `also`'s).
    covers: set[About] = dataclasses.field(default_factory=set)
    #: (hits, runs) of the clean schedule when it reproduced the bug too: no fault is needed (a race).
    without_fault: tuple[int, int] | None = None
    #: The other schedules it was confirmed under, with their rates (bugs merged into this one).
    variants: list[str] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        self.rules = self.rules or [(self.key.rule, self.slug)]
        self.covers = self.covers or {self.key.finding}

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
    #: Seconds the search has taken (0 until the clean run is done: the budget is the search's).
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
    #: The user's script every run's schedule runs on (`--script`).
    script: Path | None = None
    #: `--intercept`: the command reaches the server through an HTTPS proxy (`rtrace.net.intercept`).
    intercept: bool = False

    async def run(self, options: ServerOptions, timeout: float) -> tuple[int | None, list[str]]:
        async with run_server(options) as srv, intercepting(self.intercept, srv.port) as proxied:
            env = {**command_env(srv, options.latency), "RTRACE_HUNT": "1"}  # a pytest plugin hands out this server
            env.update(proxied)
            if options.tls is not None:  # --tls: the command trusts the made authority (`tls.trust_env`)
                env.update((name, value) for name, value, _ in trust_env(options.tls))
            return await run_command(self.command, env, timeout, "hunt", echo=False)

    def reproduce(self, script: Path, schedule: Schedule, runs: int) -> str:
        base = ["--script", str(self.script)] if self.script is not None else []
        base += ["--intercept"] if self.intercept else []
        args = ["rtrace", "hunt", *base, "--schedule", str(script), "--runs", str(runs), "--", *self.command]
        return shlex.join(args)


def server_options(template: ServerOptions, schedule: Schedule, trace: Path, header: dict[str, Any]) -> ServerOptions:
    """The options of one run: `template` with the schedule's latency, turns (before the template's own: the
    user's script is the base the faults act on, its turns numbered after theirs) and seed, recording to `trace`
    with the hunt's header fields."""
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


def injected_kinds(schedule: Schedule, base: ScriptSchedule) -> set[str]:
    """The kinds of fault a run injects: its schedule's, and those the turns of the user's script inject (an
    `error` it answers with, a `close`, a `fail`ed response, an `expire`): what `echoes` forgives."""
    kinds: set[str] = {f.kind for f in schedule.faults}
    for turn in base.turns:
        kinds |= {kind for kind, value in (("error", turn.error), ("close", turn.close), ("fail", turn.fail),
                                           ("expire", turn.expire)) if value is not None}  # fmt: skip
    return kinds


def echoes(finding: Finding, injected: set[str]) -> bool:
    """Whether `finding` only restates a fault of a kind in `injected` (`FAULT_ECHOES`)."""
    kinds, severity = FAULT_ECHOES.get(finding.rule, (frozenset(), None))
    return bool(kinds & injected) and severity in (None, finding.severity)


def primary_order(finding: Finding) -> tuple[int, int, int, str]:
    """Which finding of a defect names it: the most severe, then the one whose evidence starts first (its first
    witness line: the cause, whose story the others continue - a deleted output goes back to its call, the stale
    delete that deleted it only to the delete), then the one certain first, then the lowest rule id."""
    first = min(finding.lines) if finding.lines else finding.at_line
    return (_severity_rank(finding.severity), first, finding.at_line, finding.rule)


def keys_of(run: Run, records: list[dict[str, Any]], base: ScriptSchedule | None = None) -> list[BugKey]:
    """The keys of a run's defects (findings that restate a fault the run's schedule or the user's script `base`
    injected left out; findings that name one item or call one defect, keyed by its primary: `Run.about`), and
    of the client's failure."""
    kinds = item_kinds_of(records)
    calls = item_calls_of(records)
    faults = acted(run.schedule, records)
    reacted = run.reaction[0]
    injected = injected_kinds(run.schedule, base or ScriptSchedule())
    kept = [f for f in run.findings if not echoes(f, injected)]
    keys: list[BugKey] = []
    for group in linked([f.ids for f in kept], calls):
        members = [kept[i] for i in group]
        abouts: set[About] = set()
        for f in members:
            key = bug_key(f.rule, f.ids, kinds, faults, reacted)
            run.key_of.setdefault(key.finding, key)
            run.finding_of.setdefault(key.finding, f)
            abouts.add(key.finding)
        for about in abouts:
            run.about.setdefault(about, set()).update(abouts)
        primary = min(members, key=primary_order)
        key = bug_key(primary.rule, primary.ids, kinds, faults, reacted)
        if key not in keys:
            keys.append(key)
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
        #: When the search started (the clean run done): what `budget` counts from.
        self.search_started: float | None = None
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

    def searched(self) -> float:
        """Seconds the search has taken (0 before it starts)."""
        return 0.0 if self.search_started is None else self.clock() - self.search_started

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
        # off the event loop: the servers of the runs still going share it, and their timing is what is measured
        await asyncio.to_thread(_judge, run, self.options.template.schedule)
        run.ended = self.elapsed()
        self.runs.append(run)
        self.bugs_so_far |= {(k.rule, k.items, k.faults) for k in run.keys}
        if self.progress is not None:
            self.progress(Progress(phase, len(self.runs), len(self.bugs_so_far), self.searched(),
                                   self.options.budget, run))  # fmt: skip
        return run

    async def batch(self, schedules: list[Schedule], phase: str) -> list[Run]:
        return list(await asyncio.gather(*(self.run(s, phase) for s in schedules)))

    def spent(self, searched: int) -> str | None:
        o = self.options
        if o.runs is not None and searched >= o.runs:
            return "runs"
        if o.budget is not None and self.searched() >= o.budget:
            return "budget"
        return None


def _judge(run: Run, base: ScriptSchedule | None = None) -> None:
    """A run's findings, the client's reaction to the schedule's faults and the keys, from its trace (`base`: the
    user's script the schedule ran on)."""
    records = records_of(run.trace)
    try:
        run.findings = analyze_path(run.trace).findings if run.trace.exists() else []
    except Exception as e:  # an unreadable trace is a result of the run
        run.problem = str(e)
    run.reaction = reaction(records, turns=len(run.schedule.turn_faults()))
    run.keys = keys_of(run, records, base)


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
    hunt.search_started = hunt.clock()  # the budget is the search's: a slow clean run does not eat it
    jobs = max(1, options.jobs)
    makes = link_makes if options.upstream is not None else None
    queue = [s for s in systematic(surface, options.seed) if makes is None or all(map(makes, s.faults))]
    generator = Generator(surface, options.seed, makes=makes)
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
    """`--schedule`: each schedule `runs` times (default `repro_runs`); each defect a bug with its rate."""
    o = hunt.options
    times = o.runs or o.repro_runs
    found: list[Bug] = []
    for schedule in schedules:
        runs = await hunt.batch([schedule] * times, "re-run")
        wanted = dict.fromkeys(k.finding for r in runs for k in _findings_first(r.keys))
        for want in wanted:
            hits = [r for r in runs if _holds(r, want) is not None]
            bug = _bug_of(want, hits, schedule)
            bug.hits, bug.tries = len(hits), len(runs)
            found.append(bug)
    bugs = _merged(found)
    await _finish(hunt, bugs)
    return HuntResult([], o, None, Surface(), hunt.runs, bugs, [], hunt.elapsed(), "runs")


def _finding_of(run: Run, key: BugKey) -> Finding | None:
    return run.finding_of.get(key.finding) or next((f for f in run.findings if f.rule == key.rule), None)


def _bug(key: BugKey, run: Run, schedule: Schedule) -> Bug:
    finding = _finding_of(run, key) if key.rule != SURVIVAL else None
    if finding is not None:
        return Bug(key, finding.severity, finding.slug, finding.message, finding.explanation, finding.fix,
                   run.schedule, schedule, 0, 0, trace=run.trace)  # fmt: skip
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


def _bug_of(want: About, hits: list[Run], schedule: Schedule) -> Bug:
    """The bug of the runs of `schedule` that showed `want` (`hits`, at least one): the findings linked to it in
    every one of them are one defect with it, named by the primary of them (`primary_order`, in the first run)."""
    first = hits[0]
    if want not in first.about:  # the client's failure: a key of its own
        key = next(k for k in first.keys if k.finding == want)
        return _bug(key, first, schedule)
    common = set.intersection(*(r.about.get(want, {want}) for r in hits))
    order = sorted(common, key=lambda a: primary_order(first.finding_of[a]))
    bug = _bug(first.key_of[order[0]], first, schedule)
    for about in order[1:]:
        slug = first.finding_of[about].slug
        if (about[0], slug) not in bug.rules:
            bug.rules.append((about[0], slug))
            bug.also.append(f"{about[0]} {slug}")
    bug.covers = common
    return bug


def _holds(run: Run, want: About) -> BugKey | None:
    """The key `want` has in `run` when the run showed it (as a defect's primary or as one of its findings)."""
    return run.key_of.get(want) or next((k for k in run.keys if k.finding == want), None)


def _bug_order(bug: Bug) -> tuple[Any, ...]:
    return (_severity_rank(bug.severity), bug.rule == SURVIVAL, bug.rule, bug.schedule.cost, bug.key)


def _merged(bugs: list[Bug]) -> list[Bug]:
    """One entry per key, the most severe first: a bug found again with another schedule that shrank to the same,
    or a candidate whose finding came in every reproducing run with a finding that names its defect better (a
    stale delete with the output it deleted: `_bug_of` keys it by that one), joins the first; its rules join it.
    A finding that some bug reproduced with no fault at all is one bug whatever the faults it was found under
    (the fault acted, but is not what causes it: livekit-agents 1.8.8's race shows on a connection a close
    replaced as on the first); the other schedules are listed with it (`variants`)."""
    faultless = {b.key.finding for b in bugs if b.without_fault or b.schedule.clean}
    out: dict[Any, Bug] = {}
    for bug in sorted(bugs, key=_bug_order):
        keeper = out.setdefault(bug.key.finding if bug.key.finding in faultless else bug.key, bug)
        if keeper is bug:
            continue
        if bug.schedule != keeper.schedule:
            keeper.variants.append(f"{bug.schedule.describe()} ({bug.hits}/{bug.tries})")
        keeper.without_fault = keeper.without_fault or bug.without_fault
        for rule, slug in bug.rules:
            if (rule, slug) not in keeper.rules:
                keeper.rules.append((rule, slug))
                keeper.also.append(f"{rule} {slug}")
        keeper.covers |= bug.covers
    return list(out.values())


async def _confirm(hunt: Hunt, searched: list[Run]) -> tuple[list[Bug], list[Bug]]:
    """Shrink, re-run and minimize each candidate bug (see the module docstring), `jobs` runs at once across
    them; when there are more than `max_bugs`, each finding once first (the most severe first), then the same
    findings under other kinds of fault. A candidate that does not reproduce, or not reliably (under `RELIABLE`),
    gives way to the next one left out of the cap that showed its finding (at most `FALLBACKS`; the steps measured
    are not measured again), and the bug is the one of them with the best rate (the first on a tie)."""
    o = hunt.options
    hunt.phase = "shrinking"
    first: dict[tuple[str, tuple[str, ...], tuple[str, ...]], tuple[BugKey, Run, Finding | None]] = {}
    for run in sorted(searched, key=lambda r: (r.schedule.cost, r.index)):
        for key in _findings_first(run.keys):
            first.setdefault((key.rule, key.items, key.faults), (key, run, _finding_of(run, key)))
    ranked = sorted(first.values(), key=lambda c: (_severity_rank(c[2].severity if c[2] else "error"),
                                                   c[0].rule == SURVIVAL, c[1].schedule.cost, c[1].index))  # fmt: skip
    # each finding once before any finding again under other faults (often one race the faults only moved: a
    # finding `_merged` may make one bug): the cap keeps distinct findings, not variants of the first one
    seen: set[Any] = set()
    fresh: list[tuple[BugKey, Run, Finding | None]] = []
    again: list[tuple[BugKey, Run, Finding | None]] = []
    for c in ranked:
        about = _candidate_of(c[0])
        (again if about in seen else fresh).append(c)
        seen.add(about)
    ranked = fresh + again
    # the rest, by finding: where a candidate's schedule does not reproduce it reliably (a race its cheapest schedule,
    # often the clean one, showed by chance: livekit 1.8.8's on a loaded machine), the next schedule that showed it
    spare: dict[Any, list[tuple[BugKey, Run, Finding | None]]] = {}
    for c in ranked[o.max_bugs :]:
        spare.setdefault(_candidate_of(c[0]), []).append(c)

    async def confirm(key: BugKey, run: Run) -> Bug:
        measured: Measured = {}
        best = await _confirm_one(hunt, key, run, measured)
        others = spare.get(_candidate_of(key), [])
        spent = best.shrink_runs
        for _ in range(FALLBACKS):
            if best.rate >= RELIABLE or not others:
                break
            other, found_by, _ = others.pop(0)
            bug = await _confirm_one(hunt, other, found_by, measured)
            spent += bug.shrink_runs
            if bug.rate > best.rate:
                best = bug
        best.shrink_runs = spent
        best.without_fault = _without_fault(measured)
        return best

    outcomes = await asyncio.gather(*(confirm(key, run) for key, run, _ in ranked[: o.max_bugs]))
    unconfirmed = [bug for bug in outcomes if not bug.reproduced]
    bugs = _merged([bug for bug in outcomes if bug.reproduced])
    await _finish(hunt, bugs)
    return bugs, unconfirmed


def _candidate_of(key: BugKey) -> Any:
    """What candidates of one bug share: the finding (whatever the faults it came under), or the client's
    failure with the faults that caused it."""
    return key if key.rule == SURVIVAL else key.finding


#: A shrunk schedule whose rate is below this is measured against the steps before it (see `_confirm_one`).
RELIABLE = 0.5
#: How many times shrinking goes on from a step before one that held only by chance (see `_confirm_one`).
RESUMES = 2
#: Each step a candidate's confirmation measured: its rate, the re-runs that reproduced, how many there were.
Measured = dict[Schedule, tuple[float, list[Run], int]]
#: How many other schedules that showed a finding are tried when the first does not reproduce it reliably (`_confirm`).
FALLBACKS = 2


async def _confirm_one(hunt: Hunt, key: BugKey, run: Run, measured: Measured) -> Bug:
    """One candidate: shrink its schedule, take the rate of the result; a bug (reproduced or not). The shrinker
    may reach the clean schedule (a race the client has without any fault, which one clean run may not have
    shown; not for the client's failure, judged against its clean run). A shrinking step that held only by
    chance (a loaded machine, a flaky race) shows as a rate under `RELIABLE`: the steps before it are measured
    then, back to the schedule the search found, and shrinking goes on from the first that reproduces at
    `RELIABLE` or more, never through the chance steps again (at most `RESUMES` times), so the result is
    1-minimal as measured; the bug's schedule is the last reliable step (else the one with the best rate; none
    that reproduces: not a bug). `measured`: the steps an earlier candidate of the same finding measured, neither
    measured nor shrunk through again; this one's are added (what the clean schedule showed among them is the
    bug's `without_fault`, which `_confirm` sets: a finding it reproduced needs no fault, whatever fault it was
    found under)."""
    o = hunt.options
    want = key.finding
    spent = 0
    path = [run.schedule]
    reliable: Schedule | None = None  # the smallest step measured at RELIABLE or more
    for _ in range(RESUMES + 1):
        steps = shrink(path[-1], allow_clean=key.rule != SURVIVAL, exclude=set(measured) | set(path))
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
        at = len(path) - 1
        while at >= 0:
            final = path[at]
            if final not in measured:
                reruns = await hunt.batch([final] * o.repro_runs, "reproducing")
                hits = [r for r in reruns if _holds(r, want) is not None]
                measured[final] = (len(hits) / len(reruns), hits, len(reruns))
            if measured[final][0] >= RELIABLE:
                reliable = final
                break
            at -= 1
        if at < 0 or at == len(path) - 1:  # none held reliably, or the last step did: nothing to shrink on from
            break
        path = path[: at + 1]  # shrink on from the last reliable step; the chance steps are `measured`: not again
    if reliable is None and any(hits for _, hits, _ in measured.values()):
        reliable = max((s for s in measured if measured[s][1]), key=lambda s: measured[s][0])
    if reliable is not None:
        _, hits, runs = measured[reliable]
        bug = _bug_of(want, hits, reliable)
        bug.found = run.schedule
        bug.hits, bug.tries, bug.shrink_runs = len(hits), runs, spent
        return bug
    bug = _bug(key, run, run.schedule)
    bug.tries, bug.shrink_runs = o.repro_runs, spent
    return bug


def _without_fault(measured: Measured) -> tuple[int, int] | None:
    """(hits, runs) of the clean schedule among the steps `measured`, when it reproduced the finding."""
    return next(((len(hits), runs) for step, (_, hits, runs) in measured.items() if step.clean and hits), None)


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
        text = bug_script(bug.schedule, hunt.options.template.schedule)
        script.write_text(text, encoding="utf-8")
        bug.script = script
        bug.command = hunt.target.reproduce(script, bug.schedule, hunt.options.repro_runs)
        if bug.rule != SURVIVAL and bug.trace is not None:
            bug.minimized = await asyncio.to_thread(_minimized, bug.trace, bug.rule, out / f"bug-{n}.min.jsonl")


def bug_script(schedule: Schedule, base: ScriptSchedule) -> str:
    """The script of a bug's schedule (`bug-N.toml`): its turns, then those of the user's script it ran on
    (`base`), so `rtrace serve --script` runs the whole of it by hand; its schedule as JSON in the last comment
    (`load_schedule`)."""
    text = schedule.script_toml()
    if base:
        head = "\n".join(line for line in text.splitlines() if line.startswith("#"))
        ours = parse_script(text, "<schedule>") if schedule.turn_faults() else ScriptSchedule()
        text = f"{head}\n# then the turns of {base.path or 'the script'} the hunt ran on\n\n{(ours + base).to_toml()}"
    return text + f"{SCHEDULE_LINE}{json.dumps(schedule.to_json())}\n"


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
    target: Target = CommandTarget(command, options.script, options.intercept)
    if options.upstream is not None:
        target = UpstreamTarget(command, options.upstream, options.script, options.intercept)
    result = asyncio.run(hunt_async(target, options, progress))
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
