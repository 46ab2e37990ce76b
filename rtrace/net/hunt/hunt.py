"""`rtrace hunt`: look for the bugs of a real client by itself. Runs the user's command against a fresh fake
endpoint per schedule (`rtrace.net.faults.schedule` the values, `search` the phases, `shrink` the shrinker, `keys` the
bug keys) and turns what the runs showed into distinct, shrunk, re-run bugs. Prints nothing:
`rtrace.report.hunt` renders the result, the progress it is told of.

1. **The clean run**: no fault, no latency. Its trace is the client's surface; its findings are the baseline,
   bugs like any other (their schedule: no fault), and a finding of the same rule on the same kind of item under a
   fault may shrink to the clean schedule and be one bug with it. A command that fails its clean run cannot be
   hunted (`HuntResult.clean_failed`). Findings that restate an injected fault (`bugs.FAULT_ECHOES`) are no bug.
2. **The search**: the systematic phase (each single fault at each point of the surface once, cheapest first),
   then the random phase (`Generator`), in batches of `jobs` runs at once, each against its own server on its own
   port, until `budget` seconds or `runs` runs are spent. A run's signals (its bug keys, its rules, the client's
   reaction to the first fault) feed the random phase in batch order, so one seed and one `jobs` draw the same
   schedules.
3. **The bugs**: candidates by cause (`rtrace.net.hunt.bugs`: the defect, the items, the point of the surface where the
   fault acted, the client's reaction; a client that gave up on a connection fault is one candidate wherever it
   was), the data-losing ones first (`max_bugs` never cuts one for a survival candidate; what it cuts is
   `HuntResult.left_out`); for each, the cheapest schedule that showed it is shrunk (`shrink.shrink`; each
   candidate is re-run up to `shrink_runs` times: a flaky reproduction counts once it shows), its reproduction rate
   taken over `repro_runs` runs, and one reproducing trace minimized keeping the entry's findings
   (`rtrace.transform.minimize`). Where that does not reproduce it reliably, the next schedules that showed the
   finding are tried too (a race the clean run showed by chance, and a latency shows every time). Bugs of one
   cause are one entry (`by_cause`), with a sentence of what the client did wrong and a regression test
   (`bug-N_test.py`). A finding that reproduces in no re-run is kept apart (`HuntResult.unconfirmed`), never
   reported as a bug. A finding made certain by an answer a fault injected, or about what it refused
   (`bugs.echoed_with`), is no bug.
4. **The client did not survive**: a run whose command exits non-zero, dies of a signal or outlives `timeout`
   is a finding of its own kind (`keys.SURVIVAL`), shrunk and re-run the same way.

Every run's trace header holds its seed and its schedule (`hunt`); each bug's schedule is written as a script
(`bug-N.toml`, with its `serve` flags and its schedule as JSON in the comments: `load_schedule` reads it back,
`rtrace hunt --schedule bug-N.toml -- COMMAND` re-runs it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Callable, Iterator
from typing import Any

from ...engine.fold import analyze_path
from ...rules import RULES
from ...rules.base import Finding
from ..faults.schedule import Schedule
from ..faults.script import Schedule as ScriptSchedule
from ..faults.values import check_seed
from ..link.common import fresh_run_dir
from ..link.upstream import link_makes
from .bugs import (
    GAVE_UP,
    GAVE_UP_FIX,
    SESSION_END_RULES,
    About,
    Bug,
    by_cause,
    candidate_id,
    cause_of,
    client_counts,
    completed,
    echoed_with,
    echoes,
    entry_rank,
    first_note,
    gave_up_rank,
    injected_kinds,
    merged,
    point_of,
    primary_order,
    ranked_rules,
    reaction_of,
    regression_test,
    sentence,
)
from .bugs import injected as injected_answers
from .bugscript import SCHEDULE_LINE, bug_script, load_schedule, minimized, schedule_number
from .keys import SURVIVAL, BugKey, acted, bug_key, item_calls_of, item_kinds_of, linked, reaction
from .processes import Stopped, Stopper
from .runs import (
    MAX_BUGS,
    REPRO_RUNS,
    SEARCH_SHARE,
    SHRINK_RUNS,
    CommandTarget,
    HuntOptions,
    Progress,
    Run,
    Runner,
    Spent,
    Target,
    UpstreamTarget,
    records_of,
    server_options,
)
from .search import Generator, Surface, surface_of, systematic
from .shrink import shrink
from .sweep import check_command


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
    #: Why the search stopped: `budget`, `runs`, `space` (nothing left to draw), `clean run failed`, `interrupted`.
    stopped: str
    #: Wall seconds of each part of the hunt: `clean run`, `search`, `confirming` (shrinking, reproduction, scripts).
    split: dict[str, float] = dataclasses.field(default_factory=dict)
    #: Set when a signal (or the plugin) stopped the hunt: its name; the report is partial then.
    interrupted: str | None = None
    #: What was not done (an interrupted hunt, a budget spent before the bugs were confirmed), in words.
    not_done: list[str] = dataclasses.field(default_factory=list)
    #: Processes commands left running outside their process group: (run, pid) each.
    strays: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    #: What the search saw and the report does not list (over `--max-bugs`), one line each.
    left_out: list[str] = dataclasses.field(default_factory=list)

    @property
    def clean_failed(self) -> bool:
        return self.clean is not None and not self.clean.survived and self.clean.cut is None

    @property
    def baseline(self) -> list[Finding]:
        return self.clean.findings if self.clean is not None else []

    def findings(self) -> list[Bug]:
        return self.bugs


def keys_of(
    run: Run, records: list[dict[str, Any]], base: ScriptSchedule | None = None, clean: dict[str, int] | None = None
) -> list[BugKey]:
    """The keys of a run's defects (findings that restate a fault the run's schedule or the user's script `base`
    injected left out; findings that name one item or call one defect, keyed by its primary: `Run.about`), and
    of the client's failure. `clean`: the client events of the clean run (`bugs.client_counts`): a run that sent
    them all completed its session, whatever a fault closed after it."""
    kinds = item_kinds_of(records)
    calls = item_calls_of(records)
    faults = acted(run.schedule, records)
    injected = injected_kinds(run.schedule, base or ScriptSchedule())
    # the fault speaking: a finding of a kind that restates the fault, or one made certain by its injected answer
    spoken = echoed_with(run.findings, injected_answers(records))
    kept = [f for f, fault in zip(run.findings, spoken, strict=True) if not fault and not echoes(f, injected)]
    if clean is not None and completed(records, clean):  # a fault that closed a session already over
        kept = [f for f in kept if f.rule not in SESSION_END_RULES]
    # what the client did: gave up, hung, reconnected and restored or lost what the kept findings say
    rules = {f.rule for f in kept}
    # a client that reconnected and lost items is keyed by the loss even when it then hung (`reaction_of`); a turn
    # that never completed is a hang only when the command then failed (its own deadline): one that ended the turn
    # unanswered and exited 0 lost it (livekit-agents 1.8.9 discards the generation a close cut, and goes on)
    hung = run.exit_code is None or run.ended_early is not None or ("RT126" in rules and not run.survived)
    reacted = reaction_of(run.reaction[0], rules, run.survived or run.phase == "clean run", hung)
    run.point = point_of(records, first_note(records, len(run.schedule.turn_faults())))
    keys: list[BugKey] = []
    for group in linked([f.ids for f in kept], calls):
        members = [kept[i] for i in group]
        abouts: set[About] = set()
        for f in members:
            key = dataclasses.replace(bug_key(f.rule, f.ids, kinds, faults, reacted), point=run.point)
            run.key_of.setdefault(key.finding, key)
            run.finding_of.setdefault(key.finding, f)
            abouts.add(key.finding)
        for about in abouts:
            run.about.setdefault(about, set()).update(abouts)
        primary = min(members, key=primary_order)
        key = dataclasses.replace(bug_key(primary.rule, primary.ids, kinds, faults, reacted), point=run.point)
        if key not in keys:
            keys.append(key)
    if not run.survived and run.phase != "clean run":
        how = run.how().split(" ")[0] if run.exit_code is None or run.exit_code < 0 else run.how()
        keys.append(BugKey(SURVIVAL, (how,), faults, reacted, run.point))
    return keys


class Hunt(Runner):
    """One hunt: its runs (`hunt_runs.Runner`), each judged by its trace (`_judge`)."""

    def judge(self, run: Run) -> None:
        _judge(run, self.options.template.schedule, self.clean_client)


def _judge(run: Run, base: ScriptSchedule | None = None, clean: dict[str, int] | None = None) -> None:
    """A run's findings, the client's reaction to the schedule's faults and the keys, from its trace (`base`: the
    user's script the schedule ran on)."""
    records = records_of(run.trace)
    try:
        run.findings = analyze_path(run.trace).findings if run.trace.exists() else []
    except Exception as e:  # an unreadable trace is a result of the run
        run.problem = str(e)
    run.reaction = reaction(records, turns=len(run.schedule.turn_faults()))
    run.keys = keys_of(run, records, base, clean)


async def hunt_async(
    target: Target, options: HuntOptions, progress: Callable[[Progress], None] | None = None
) -> HuntResult:
    """Hunt (see the module docstring). Into a fresh directory under `out_dir` (`fresh_dir`; the result's options
    name it), whose `runs/` no other hunt wrote. A stop (`options.stopper`) or the budget's end gives what is known
    so far, with what was not done (`HuntResult.interrupted`, `not_done`)."""
    if options.fresh_dir:
        options = dataclasses.replace(options, out_dir=fresh_run_dir(options.out_dir, "--out"))
    else:
        options.out_dir.mkdir(parents=True, exist_ok=True)
    (options.out_dir / "runs").mkdir(exist_ok=True)
    stopper = options.stopper or Stopper()
    options = dataclasses.replace(options, stopper=stopper)
    mine = not stopper.attached
    if mine:
        stopper.attach(asyncio.get_running_loop(), signals=False)
    hunt = Hunt(target, options, progress)
    try:
        if options.schedules is not None:
            return _stamped(hunt, await _rerun(hunt, options.schedules))
        return _stamped(hunt, await _search(hunt))
    finally:
        if mine:
            stopper.detach()


async def _search(hunt: Hunt) -> HuntResult:
    options = hunt.options
    split: dict[str, float] = {}
    try:
        clean = await hunt.run(Schedule(seed=options.seed), "clean run")
    except (Spent, Stopped) as e:
        why = "budget" if isinstance(e, Spent) else "interrupted"
        result = HuntResult([], options, None, Surface(), hunt.runs, [], [], hunt.elapsed(), why)
        result.not_done = ["the clean run (cut " + ("by the budget" if why == "budget" else "short") + ")",
                           "the search", "shrinking", "reproduction"]  # fmt: skip
        return result
    split["clean run"] = hunt.elapsed()
    if clean.cut is not None:  # rtrace failed (or could not write), not the command: nothing to hunt on
        return HuntResult([], options, clean, Surface(), hunt.runs, [], [], hunt.elapsed(), clean.cut)
    surface = surface_of(records_of(clean.trace))
    hunt.clean_client = client_counts(records_of(clean.trace))
    if not clean.survived:
        result = HuntResult([], options, clean, surface, hunt.runs, [], [], hunt.elapsed(), "clean run failed")
        result.split = split
        return result
    hunt.baseline = {k.finding for k in clean.keys}
    hunt.search_started = hunt.clock()
    jobs = max(1, options.jobs)
    makes = link_makes if options.upstream is not None else None
    queue = [s for s in systematic(surface, options.seed) if makes is None or all(map(makes, s.faults))]
    generator = Generator(surface, options.seed, makes=makes)
    searched: list[Run] = []
    stopped = None
    not_done: list[str] = []
    try:
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
    except Spent:
        stopped = "trace not written" if hunt.unwritten is not None else "budget"
    except Stopped:
        stopped = "interrupted"
    if queue:
        not_done.append(f"{len(queue)} point{'s' if len(queue) != 1 else ''} of the single-fault pass")
    split["search"] = hunt.elapsed() - split["clean run"]
    if stopped == "interrupted":
        candidates = _seen([clean, *searched])
        many = "s" if len(candidates) != 1 else ""
        not_done.append(f"shrinking and reproduction of {len(candidates)} candidate{many} (listed as seen once)")
        result = HuntResult([], options, clean, surface, hunt.runs, [], candidates, hunt.elapsed(), stopped)
    else:
        bugs, unconfirmed = await _confirm(hunt, [clean, *searched])
        result = HuntResult([], options, clean, surface, hunt.runs, bugs, unconfirmed, hunt.elapsed(), stopped,
                            left_out=hunt.left_out)  # fmt: skip
        if hunt.stopper.stopped:
            result.stopped = "interrupted"
            not_done.append("confirming the bugs (those listed were confirmed before the stop)")
        if hunt.shrink_cut:
            not_done.append("shrinking to the end (the budget's share ran out: the schedules may not be minimal)")
        if any(not b.tries for b in unconfirmed):
            not_done.append("confirming every candidate (the budget ran out: those not re-run are unconfirmed)")
    split["confirming"] = hunt.elapsed() - split["clean run"] - split["search"]
    result.split, result.not_done = split, not_done
    return result


def _seen(runs: list[Run]) -> list[Bug]:
    """The candidates the runs showed, each once, as first seen (not shrunk nor re-run: an interrupted hunt's)."""
    out: dict[Any, Bug] = {}
    for run in sorted(runs, key=lambda r: (r.schedule.cost, r.index)):
        for key in _findings_first(run.keys):
            if _candidate_of(key) not in out:
                bug = _bug(key, run, run.schedule)
                bug.hits, bug.tries = 1, 0
                out[_candidate_of(key)] = bug
    return list(out.values())


def _stamped(hunt: Hunt, result: HuntResult) -> HuntResult:
    """`result` with the stop's name and what commands left running."""
    if hunt.stopper.stopped:
        result.interrupted = hunt.stopper.reason
        result.stopped = "interrupted"
    result.strays = [(r.index, pid) for r in hunt.runs for pid in r.strays]
    return result


async def _rerun(hunt: Hunt, schedules: list[Schedule]) -> HuntResult:
    """`--schedule`: each schedule `runs` times (default `repro_runs`); each defect a bug with its rate."""
    o = hunt.options
    times = o.runs or o.repro_runs
    found: list[Bug] = []
    for schedule in schedules:
        try:
            runs = await hunt.batch([schedule] * times, "re-run")
        except (Spent, Stopped):
            break
        wanted = dict.fromkeys(k.finding for r in runs for k in _findings_first(r.keys))
        for want in wanted:
            hits = [r for r in runs if _holds(r, want) is not None]
            bug = _bug_of(want, hits, schedule)
            bug.hits, bug.tries = len(hits), len(runs)
            found.append(bug)
    bugs = by_cause(merged(found))
    numbers = None
    if o.numbers and len(o.numbers) == len(schedules):  # each entry keeps the number of the script it re-runs
        by_schedule = dict(zip(schedules, o.numbers, strict=True))  # type: dict[Schedule, int | None]
        if len(bugs) == len({b.schedule for b in bugs}):
            numbers = [by_schedule.get(b.schedule) for b in bugs]
    await _finish(hunt, bugs, numbers)
    return HuntResult([], o, None, Surface(), hunt.runs, bugs, [], hunt.elapsed(), "runs")


def _finding_of(run: Run, key: BugKey) -> Finding | None:
    return run.finding_of.get(key.finding) or next((f for f in run.findings if f.rule == key.rule), None)


def _bug(key: BugKey, run: Run, schedule: Schedule) -> Bug:
    bug = _bare_bug(key, run, schedule)
    bug.cause = cause_of(key.rule, key.items, key.point or run.point, key.reaction, key.faults)
    title = next((r.title for r in RULES if r.id == key.rule), bug.message)
    bug.sentence = sentence(bug.cause, title)
    if bug.cause.family == "gave up":
        bug.fix = GAVE_UP_FIX
    bug.ended_early = run.ended_early  # the runner's, when it ended the run quiet after its fault
    return bug


def _bare_bug(key: BugKey, run: Run, schedule: Schedule) -> Bug:
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


async def _confirm(hunt: Hunt, searched: list[Run]) -> tuple[list[Bug], list[Bug]]:
    """Shrink, re-run and minimize each candidate bug (see the module docstring), `jobs` runs at once across
    them; when there are more than `max_bugs`, each finding once first (the most severe first), then the same
    findings under other kinds of fault. A candidate that does not reproduce, or not reliably (under `RELIABLE`),
    gives way to the next one left out of the cap that showed its finding (at most `FALLBACKS`; the steps measured
    are not measured again), and the bug is the one of them with the best rate (the first on a tie)."""
    o = hunt.options
    hunt.phase = "shrinking"
    first: dict[tuple[Any, ...], tuple[BugKey, Run, Finding | None]] = {}
    gave_up: dict[str, None] = {}  # the faults the client gave up on, as the search saw them
    gave_up_rules: dict[str, str] = {}  # and the rules that said so
    for run in sorted(searched, key=lambda r: (r.schedule.cost, r.index)):
        for key in _findings_first(run.keys):
            cid = candidate_id(key)
            if cid == GAVE_UP:
                gave_up.setdefault(run.schedule.describe())
            held = first.get(cid)
            # one candidate per cause; a client that gives up is named by its failure to survive when it has one,
            # else by its never coming back (RT127), and the rest come with it
            if cid == GAVE_UP:
                finding = _finding_of(run, key)
                gave_up_rules.setdefault(key.rule, finding.slug if finding is not None else SURVIVAL)
            if held is None or (cid == GAVE_UP and gave_up_rank(key) < gave_up_rank(held[0])):
                first[cid] = (key, run, _finding_of(run, key))
    # data lost first (a cap never hides a loss behind a survival entry), then by severity, the failure after
    ranked = sorted(first.values(), key=lambda c: (*entry_rank(ranked_rules(c[0]), c[2].severity if c[2] else "error"),
                                                   c[1].schedule.cost, c[1].index))  # fmt: skip
    # each finding once before any finding again under other faults (often one race the faults only moved: a
    # finding `merged` may make one bug): the cap keeps distinct findings, not variants of the first one
    seen: set[Any] = set()
    fresh: list[tuple[BugKey, Run, Finding | None]] = []
    again: list[tuple[BugKey, Run, Finding | None]] = []
    for c in ranked:
        about = _candidate_of(c[0])
        (again if about in seen else fresh).append(c)
        seen.add(about)
    # and every data-losing candidate before any other, fresh or not: the cap never hides a loss behind a survival
    ranked = sorted(fresh + again, key=lambda c: entry_rank(ranked_rules(c[0]), "error")[0])
    # the rest, by finding: where a candidate's schedule does not reproduce it reliably (a race its cheapest schedule,
    # often the clean one, showed by chance: livekit 1.8.8's on a loaded machine), the next schedule that showed it
    spare: dict[Any, list[tuple[BugKey, Run, Finding | None]]] = {}
    for c in ranked[o.max_bugs :]:
        spare.setdefault(_candidate_of(c[0]), []).append(c)

    async def confirm(key: BugKey, run: Run) -> Bug:
        measured: Measured = {}
        try:
            best = await _confirm_one(hunt, key, run, measured)
        except (Spent, Stopped):  # the budget's end or a stop: what was measured of it so far
            return _cut_short(key, run, measured)
        others = spare.get(_candidate_of(key), [])
        spent = best.shrink_runs
        for _ in range(FALLBACKS):
            if best.rate >= RELIABLE or not others:
                break
            other, found_by, _ = others.pop(0)
            try:
                bug = await _confirm_one(hunt, other, found_by, measured)
            except (Spent, Stopped):
                break
            spent += bug.shrink_runs
            if bug.rate > best.rate:
                best = bug
        best.shrink_runs = spent
        best.without_fault = _without_fault(measured)
        return best

    # at most `jobs` candidates at once, in rank order: under a budget the first are confirmed whole, not all cut
    turns = asyncio.Semaphore(max(1, o.jobs))

    async def in_turn(key: BugKey, run: Run) -> Bug:
        async with turns:
            return await confirm(key, run)

    outcomes = await asyncio.gather(*(in_turn(key, run) for key, run, _ in ranked[: o.max_bugs]))
    unconfirmed = [bug for bug in outcomes if not bug.reproduced]
    bugs = by_cause(merged([bug for bug in outcomes if bug.reproduced]))
    for bug in bugs:
        if bug.cause is not None and bug.cause.family == "gave up":
            bug.seen_under = list(gave_up)
            for rule, slug in gave_up_rules.items():
                if rule != bug.rule and (rule, slug) not in bug.rules:
                    bug.rules.append((rule, slug))
                    bug.also.append(slug if rule == SURVIVAL else f"{rule} {slug}")
    listed = {_candidate_of(b.key) for b in outcomes}
    hunt.left_out = [f"{key.text()} (run {run.index}: {run.schedule.describe()})"
                     for key, run, _ in ranked[o.max_bugs :] if _candidate_of(key) not in listed]  # fmt: skip
    await _finish(hunt, bugs)
    return bugs, unconfirmed


def _cut_short(key: BugKey, run: Run, measured: Measured) -> Bug:
    """A candidate whose confirmation the budget's end or a stop cut: the step measured with the best rate, else
    the candidate as the search found it, unconfirmed (no re-run: `tries` 0)."""
    steps = [s for s in measured if measured[s][1]]
    if steps:
        best = max(steps, key=lambda s: measured[s][0])
        _, hits, runs = measured[best]
        bug = _bug_of(key.finding, hits, best)
        bug.found, bug.hits, bug.tries = run.schedule, len(hits), runs
        return bug
    return _bug(key, run, run.schedule)


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


async def _finish(hunt: Hunt, bugs: list[Bug], numbers: list[int | None] | None = None) -> None:
    """Write each bug's script (`bug-N.toml`, N its place, or `numbers`' when given: a re-run keeps the numbers of
    the scripts it re-ran) and its regression test (`bug-N_test.py`), minimize its trace keeping the entry's
    findings (not once the hunt was stopped or its budget spent), name its command."""
    out = hunt.options.out_dir
    taken = {n for n in numbers or [] if n is not None}
    spare = (n for n in itertools.count(1) if n not in taken)
    for i, bug in enumerate(bugs):
        given = numbers[i] if numbers is not None else None
        n = given if given is not None else next(spare)
        script = out / f"bug-{n}.toml"
        text = bug_script(bug.schedule, hunt.options.template.schedule)
        script.write_text(text, encoding="utf-8")
        bug.script = script
        bug.command = hunt.target.reproduce(script, bug.schedule, hunt.options.repro_runs)
        command = getattr(hunt.target, "command", None)  # the user's command: a regression test runs it again
        if command:
            test = regression_test(n, bug.sentence or bug.message, [r for r, _ in bug.rules], script.name,
                                   bug.schedule.serve_args(), command, hunt.options.timeout)  # fmt: skip
            bug.test = out / f"bug-{n}_test.py"
            bug.test.write_text(test, encoding="utf-8")
        left = hunt.time_left()
        if bug.rule != SURVIVAL and bug.trace is not None and not hunt.stopper.stopped and (left is None or left > 0):
            keep = [rule for rule, _ in bug.rules if rule != SURVIVAL]  # the entry's finding set, kept
            bug.minimized = await asyncio.to_thread(minimized, bug.trace, bug.rule, out / f"bug-{n}.min.jsonl", keep)



def hunt(
    command: list[str], options: HuntOptions, progress: Callable[[Progress], None] | None = None, signals: bool = True
) -> HuntResult:
    """Hunt with the user's command (see the module docstring); in the main thread and when `signals`, SIGINT,
    SIGTERM and SIGHUP stop it (once: the runs in flight end, the result is partial; twice: at once, see
    `processes.Stopper`). Raises `CommandNotFound` (a ValueError)."""
    check_command(command, "hunt")
    check_seed(options.seed, "--seed")
    if options.budget is None and options.runs is None and options.schedules is None:
        raise ValueError("give --budget or --runs (or both)")
    stopper = options.stopper or Stopper()
    target: Target = CommandTarget(command, options.script, options.kill_strays, options.stdout_in_tail,
                                   options.intercept)  # fmt: skip
    if options.upstream is not None:
        target = UpstreamTarget(command, options.upstream, options.script, options.intercept, options.kill_strays,
                                options.stdout_in_tail)  # fmt: skip

    async def main() -> HuntResult:
        stopper.attach(asyncio.get_running_loop(), signals)
        try:
            return await hunt_async(target, dataclasses.replace(options, stopper=stopper), progress)
        finally:
            stopper.detach()

    result = asyncio.run(main())
    result.command = command
    return result


def bug_runs(result: HuntResult) -> Iterator[Run]:
    """The runs of the search (the clean run, shrinking and re-runs left out)."""
    return (r for r in result.runs if r.phase in ("systematic", "random"))


__all__ = [
    "MAX_BUGS",
    "REPRO_RUNS",
    "SCHEDULE_LINE",
    "SEARCH_SHARE",
    "SHRINK_RUNS",
    "Bug",
    "CommandTarget",
    "Hunt",
    "HuntOptions",
    "HuntResult",
    "Progress",
    "Run",
    "Target",
    "bug_script",
    "hunt",
    "hunt_async",
    "load_schedule",
    "records_of",
    "schedule_number",
    "server_options",
]
