"""What a hunt's findings say about the client, as data: which trace lines are the fault's own answers (an
injected `error`, a failed or cancelled `response.done`, an expiry), whether a finding only restates one, where on
the client's surface a fault acted and what the client did then, and the cause an entry is grouped by. Pure: reads
records (`{"line", "t", "dir", "conn", "event"}`), never a file or a clock.

A finding is the client's when something the client did (or did not do) after the fault is its evidence; a finding
made certain by an injected answer (`rests_on_injected`) is the fault speaking, not the client.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ...rules import RULES
from ...rules.base import Finding
from ..faults.actions import ACTIONS, SCRIPT_MOMENT
from ..faults.schedule import Schedule
from ..faults.script import Schedule as ScriptSchedule
from .keys import SURVIVAL, BugKey

#: What a finding is about (`BugKey.finding`): its rule and the kinds of its items.
About = tuple[str, tuple[str, ...]]

#: Server events that answer for the fault after its `fault.injected` note: the injected answer ends with the first.
ANSWERS = frozenset({"error", "response.done", "conversation.item.input_audio_transcription.failed"})
#: The note actions (`fault.injected`'s `action`) whose next server events are an answer the server did not mean
#: (a close, a delay or a paced audio moves frames, it answers nothing).
ANSWERING = frozenset({"error", "fail", "rate_limit", "cancel", "expire", "barge_in"})

#: Rules whose findings are data the user loses (an output, a call, a turn, a reply, an item): their entries come
#: first, and a cap never drops one for a survival entry.
DATA_LOSS = frozenset({
    "RT101", "RT102", "RT103", "RT104", "RT105", "RT106", "RT107", "RT108", "RT113", "RT122", "RT124", "RT126",
})  # fmt: skip
#: Rules that say "the client gave up on the connection" when it did (what was pending at the close never asked
#: again: a call unanswered, a generation cut, a failed response not retried, changes lost, no reconnect): one cause
#: with the client's failure to survive a fault it gave up on.
GAVE_UP_RULES = frozenset({"RT103", "RT107", "RT108", "RT122", "RT127"})
#: The points of the client's surface where a fault acts, in the order of a session.
POINTS = ("handshake", "user turn", "in-flight response", "tool call", "after the turn")


def _event(rec: dict[str, Any]) -> dict[str, Any]:
    event = rec.get("event")
    return event if isinstance(event, dict) else {}


def _is_note(rec: dict[str, Any]) -> bool:
    return rec.get("dir") == "meta" and _event(rec).get("type") == "fault.injected"


def _names(event: dict[str, Any]) -> set[tuple[str, str]]:
    """The item and call a client event is about, as `Finding.ids` names them."""
    out: set[tuple[str, str]] = set()
    item = event.get("item")
    if isinstance(item, dict):
        if isinstance(item.get("id"), str):
            out.add(("items", item["id"]))
        if isinstance(item.get("call_id"), str):
            out.add(("call_ids", item["call_id"]))
    if isinstance(event.get("item_id"), str):
        out.add(("items", event["item_id"]))
    return out


@dataclasses.dataclass
class Injected:
    """What a run's faults injected as answers (`injected`): their lines, and what the client events they answered
    were about (the item and call a rejected `function_call_output` names)."""

    lines: set[int] = dataclasses.field(default_factory=set)
    about: set[tuple[str, str]] = dataclasses.field(default_factory=set)


def injected(records: Sequence[dict[str, Any]]) -> Injected:
    """The server events a fault injected as an answer: after each `fault.injected` note that answers
    (`ANSWERING`, or a flag's note, which names no action), the server events of its connection up to the first of
    `ANSWERS` (the `error`, the failed or cancelled `response.done`, the failed transcription); with what the
    client event that set the note off (the last one of its connection before it) was about."""
    out = Injected()
    last_client: dict[Any, dict[str, Any]] = {}
    for i, rec in enumerate(records):
        if rec.get("dir") == "client":
            last_client[rec.get("conn")] = _event(rec)
        if not _is_note(rec) or _event(rec).get("action", "error") not in ANSWERING:
            continue
        conn = rec.get("conn")
        if "client_event_type" in _event(rec) and conn in last_client:
            out.about |= _names(last_client[conn])
        for later in records[i + 1 :]:
            if later.get("conn") != conn or later.get("dir") != "server":
                if later.get("dir") == "meta" and _event(later).get("type") == "connection.closed":
                    break
                continue
            if isinstance(later.get("line"), int):
                out.lines.add(later["line"])
            if _event(later).get("type") in ANSWERS:
                break
    return out


def rests_on_injected(finding: Finding, injected_at: set[int]) -> bool:
    """Whether `finding` only restates an injected answer: the line that made it certain is one (`injected`): the
    fault's `error` read as the server's verdict (RT104 under an injected `invalid_tool_call_id`, RT111 under an
    injected `conversation_already_has_active_response`), its failed or cancelled response read as the client's.
    A finding made certain by what the client did after the answer (it dropped the output, it never re-sent, it
    asked again over an open response) is kept: its line is the client's, or the end of the trace."""
    return finding.at_line in injected_at


def echoed_with(findings: Sequence[Finding], faults: Injected) -> list[bool]:
    """For each finding, whether it is the fault speaking: it rests on an injected answer, or it cites one and is
    about what that answer rejected (the call a rejected output left unanswered: the same answer, read by another
    rule)."""
    out = []
    for f in findings:
        cites = any(line in faults.lines for line in f.lines)
        about = any((kind, v) in faults.about for kind, vs in f.ids.items() for v in vs)
        out.append(rests_on_injected(f, faults.lines) or (cites and about))
    return out


# -- where the fault acted, what the client did ----------------------------------------------------------------


def first_note(records: Sequence[dict[str, Any]], turns: int | None = None) -> int | None:
    """The index of the first `fault.injected` note (with `turns`, of script turns 1 to `turns` only)."""
    for i, rec in enumerate(records):
        if not _is_note(rec):
            continue
        if turns is None:
            return i
        spec = str(_event(rec).get("spec", ""))
        if spec.startswith("turn ") and spec[5:].isdigit() and 1 <= int(spec[5:]) <= turns:
            return i
    return None


def point_of(records: Sequence[dict[str, Any]], at: int | None) -> str:
    """Where on the client's surface the fault noted at `records[at]` acted (`POINTS`): before the client's first
    turn (`handshake`), while a response was generating (`in-flight response`), between a response that called a
    tool and the next one (`tool call`: the tool running, its output sent, the reply asked for), after a response
    ended with nothing asked since (`after the turn`), else in a `user turn`. "" when no fault was noted (latency
    and jitter act everywhere)."""
    if at is None:
        return ""
    conn = records[at].get("conn")
    sent = False
    generating = False
    tools = False  # the last response done called a tool, and no response ended since
    after_done = False
    for rec in records[:at]:
        if rec.get("conn") != conn:
            continue
        event = _event(rec)
        etype = event.get("type")
        if rec.get("dir") == "client" and etype not in ("session.update", "input_audio_buffer.append"):
            sent = True
            after_done = False
        elif rec.get("dir") == "server" and etype == "response.created":
            generating = True
        elif rec.get("dir") == "server" and etype == "response.done":
            generating = False
            after_done = True
            response = event.get("response")
            output = response.get("output") if isinstance(response, dict) else None
            tools = any(isinstance(o, dict) and o.get("type") == "function_call" for o in output or ())
    if not sent and not generating:
        return "handshake"
    if generating:
        return "in-flight response"
    if tools:
        return "tool call"
    if after_done:
        return "after the turn"
    return "user turn"


@dataclasses.dataclass(frozen=True, order=True)
class Cause:
    """What one entry of a hunt's report is about: the defect (`family`: a rule, or `gave up` for a client that
    gives up on the connection), the kinds of the items concerned, the point of the surface where the fault acted
    and the client's reaction. Two bugs with one cause are one entry; distinct causes are never merged."""

    family: str
    items: tuple[str, ...]
    point: str
    reaction: str

    def text(self) -> str:
        items = ",".join(self.items) or "-"
        where = f", fault at the {self.point}" if self.point else ""
        return f"{self.family} on {items}{where}, client {self.reaction}"


def reaction_of(basic: str, rules: Iterable[str], survived: bool, hung: bool) -> str:
    """The client's reaction as an entry is keyed by: `gave up`, `hung` (the turn never completed, or the command
    outlived its deadline), `reconnected and lost data` (a data-losing rule among `rules`: `lost` names what; an
    item lost on the reconnect is the cause even when the turn then hung), `reconnected and restored`, `continued`,
    from `keys.reaction`'s class (`basic`)."""
    lost_items = any(r in DATA_LOSS and FAMILIES.get(r) != TURN_LOST for r in rules)
    if basic == "reconnected" and lost_items:
        return "reconnected and lost data"  # the loss is the cause; a turn that then hung is what followed from it
    if hung:
        return "hung"
    if basic == "gave up":
        return "gave up"
    if basic == "reconnected":
        return "reconnected and lost data" if any(r in DATA_LOSS for r in rules) else "reconnected and restored"
    return "continued" if survived else "gave up"


def lost(rules: Iterable[str]) -> str:
    """What the data-losing rules among `rules` say the client lost, in words ("a function call and a tool
    output"; "data" when none says)."""
    said = sorted({LOST[r] for r in rules if r in LOST})
    return ", ".join(said[:-1]) + " and " + said[-1] if len(said) > 1 else (said[0] if said else "data")


#: Rules that say the client lost what it had created when it reconnected, and those that say it lost the turn it
#: had asked for: one defect each (an output left out of the replay shows as RT105, RT106 or RT103 depending on
#: when the close came; a reply as RT124 or RT126).
FAMILIES = {
    "RT105": "items lost on reconnect", "RT106": "items lost on reconnect", "RT113": "items lost on reconnect",
    "RT123": "items lost on reconnect", "RT124": "turn lost on reconnect", "RT126": "turn lost on reconnect",
}  # fmt: skip
#: The family of a turn that never completed after a reconnect (its client hung: `reaction_of`).
TURN_LOST = "turn lost on reconnect"


def family_of(rule: str, reaction: str) -> str:
    """The defect a rule's finding is part of (`FAMILIES`; a call left unanswered after a reconnect is an item lost
    on reconnect), else the rule itself."""
    if rule == "RT103" and reaction.startswith("reconnected"):
        return FAMILIES["RT105"]
    return FAMILIES.get(rule, rule)


#: The kinds of fault that end a connection (a fault's signature starts with its kind: `close sent`).
CONNECTION_FAULTS = ("close", "drop", "expire")


def cause_of(rule: str, items: tuple[str, ...], point: str, reaction: str, faults: Sequence[str] = ()) -> Cause:
    """The cause of a bug: a client that gave up on a connection a fault ended (its failure to survive, or a rule
    that says it gave up on the connection) is one cause wherever and however the connection ended (close 1000,
    1006, 1011, an expiry, at any point) - one entry listing the faults; any other is its rule, items, point and
    reaction."""
    ended = any(f.split(" ")[0] in CONNECTION_FAULTS for f in faults)
    if reaction == "gave up" and ended and (rule == SURVIVAL or rule in GAVE_UP_RULES):
        return Cause("gave up", (), "connection", "gave up")
    family = family_of(rule, reaction)
    if family == FAMILIES["RT105"]:  # an output is about its call
        items = tuple(sorted({"function_call" if i == "function_call_output" else i for i in items}))
    return Cause(family, items, point, reaction)


def loses_data(rules: Iterable[str]) -> bool:
    return any(r in DATA_LOSS for r in rules)


def entry_rank(rules: Sequence[str], severity: str, cost: Any = 0) -> tuple[Any, ...]:
    """Where an entry goes: data lost first (whatever its severity label), then by severity, a survival entry
    after the findings of its rank, then the cheaper schedule."""
    severity_rank = {"error": 0, "warning": 1, "info": 2}.get(severity, 3)
    return (not loses_data(rules), severity_rank, bool(rules) and rules[0] == SURVIVAL, cost)


#: Rules that say the client never came back after a close: no bug when the client had already done all its clean
#: run did (the fault closed a session that was over).
SESSION_END_RULES = frozenset({"RT127"})


def client_counts(records: Iterable[dict[str, Any]]) -> dict[str, int]:
    """How many client events of each type a trace has."""
    out: dict[str, int] = {}
    for rec in records:
        if rec.get("dir") == "client":
            etype = str(_event(rec).get("type"))
            out[etype] = out.get(etype, 0) + 1
    return out


def completed(records: Iterable[dict[str, Any]], clean: dict[str, int]) -> bool:
    """Whether the client sent, in this run, at least every client event its clean run sent (`client_counts`): it
    did all it meant to do, whatever a fault closed after that."""
    counts = client_counts(records)
    return all(counts.get(etype, 0) >= n for etype, n in clean.items())


#: What a data-losing rule says the client lost, for the entry's reaction ("reconnected and lost the reply").
LOST = {
    "RT101": "a tool output", "RT102": "a tool output", "RT103": "a call's output", "RT104": "a tool output",
    "RT105": "a function call", "RT106": "an unconfirmed item", "RT107": "a generation", "RT108": "a failed response",
    "RT113": "a call's arguments", "RT122": "unsent changes", "RT124": "the reply it asked for",
    "RT126": "the turn in flight",
}  # fmt: skip


#: One sentence per family: what the client did wrong (the rule's own title is used for the others).
SENTENCES = {
    # what it told the app the wire cannot show (openai-agents 0.24.0 raises the close out of its session, and has
    # no reconnect): the entry says only what the trace shows
    "gave up": "The client gave up when the connection ended: it never reconnected.",
    SURVIVAL: "The client did not recover from the fault: it failed, hung or exited with an error.",
}
#: The fix of a client that gave up.
GAVE_UP_FIX = "Reconnect, or surface the close to the app; either way end the session cleanly (exit 0)."


#: How a sentence says where the fault acted (`POINTS`).
WHERE = {"handshake": "at the handshake", "user turn": "during a user turn", "in-flight response": "while a "
         "response was generating", "tool call": "during a tool call", "after the turn": "after a turn had ended"}


def sentence(cause: Cause, title: str, rules: Iterable[str] = ()) -> str:
    """What the client did wrong, in one sentence (`title`: the rule's, "a function_call_output names ...";
    `rules`: the entry's, which name what it lost)."""
    if cause.family in SENTENCES:
        return SENTENCES[cause.family]
    reaction = cause.reaction.replace("lost data", f"lost {lost(rules)}")
    said = [f"fault {WHERE[cause.point]}"] if cause.point in WHERE else []
    said += [f"the client {reaction}"] if cause.reaction != "continued" else []
    how = f" ({'; '.join(said)})" if said else ""
    return f"{title[:1].upper()}{title[1:].rstrip('.')}{how}."


# -- the regression test of an entry ---------------------------------------------------------------------------


def marker_options(serve_args: Sequence[str]) -> dict[str, Any]:
    """The `@pytest.mark.rtrace` options of a schedule's `serve` flags (`Schedule.serve_args`: `--latency 50ms`,
    `--latency TYPE=120ms`, `--jitter ...`, `--seed N`), by field: latencies and jitters as lists, the seed as is."""
    out: dict[str, Any] = {}
    for flag, value in zip(serve_args[::2], serve_args[1::2], strict=False):
        field = flag.lstrip("-").replace("-", "_")
        if field == "seed":
            out[field] = int(value)
        else:
            out.setdefault(field, []).append(value)
    return out


def regression_test(
    n: int, sentence_text: str, rules: Sequence[str], script: str, serve_args: Sequence[str], command: Sequence[str],
    timeout: float,
) -> str:  # fmt: skip
    """`bug-N_test.py`: a pytest test that runs `command` (the hunt's) against the `rtrace_server` fixture with the
    entry's script (`script`, beside the test) and flags, and fails while the client shows one of the entry's
    `rules` (its failure to survive: a non-zero exit), passing once the bug is fixed. For the client's own suite."""
    options = {"script": script, "fail_on": "never", **marker_options(serve_args)}
    marker = ", ".join(f"{k}={v!r}" for k, v in options.items())
    judged = sorted(r for r in rules if r != SURVIVAL)
    return f'''"""Regression test of `rtrace hunt`'s bug {n}: {sentence_text}

Runs the hunt's command against rtrace's fake endpoint with the bug's schedule ({script}, beside this file) and
fails while the client shows it again ({", ".join([*judged, *([SURVIVAL] if SURVIVAL in rules else [])])}).
Drop both files into the client's test suite (`pip install rtrace-cli`: the `rtrace_server` fixture); adjust
COMMAND to run from there.
"""

import os
import subprocess

import pytest

COMMAND = {list(command)!r}
RULES = {set(judged)!r}
TIMEOUT = {timeout!r}


@pytest.mark.rtrace({marker})
def test_bug_{n}_is_fixed(rtrace_server):
    env = {{**os.environ, **rtrace_server.env, "RTRACE_HUNT": "1"}}  # a pytest COMMAND uses this server
    try:
        done = subprocess.run(COMMAND, env=env, capture_output=True, text=True, timeout=TIMEOUT)
        code, tail = done.returncode, (done.stdout + done.stderr).strip().splitlines()[-5:]
    except subprocess.TimeoutExpired:
        code, tail = None, [f"still running after {{TIMEOUT}} s"]
    rtrace_server.close()
    seen = sorted({{f.rule for f in rtrace_server.findings}} & RULES)
    assert not seen, f"the client still shows bug {n} ({{', '.join(seen)}}); trace: {{rtrace_server.trace}}"
    assert code == 0, f"the client did not survive the fault (exit {{code}}): " + " | ".join(tail)
'''


# -- entries -------------------------------------------------------------------------------------------------


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
    #: The other findings of the defect, `RULE slug` each: linked to this one (`keys.linked`) in every run
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
    #: What the entry is about (`bugs.Cause`: the defect, where the fault acted, what the client did) and what the
    #: client did wrong, in one sentence.
    cause: Cause | None = None
    sentence: str = ""
    #: The faults the search saw this cause under (a client that gives up on every connection fault: one entry).
    seen_under: list[str] = dataclasses.field(default_factory=list)
    #: Seconds of quiet after the fault after which the run was ended early (`Run.ended_early`), when it was.
    ended_early: float | None = None
    #: Its regression test (`bug-N_test.py`, beside its script): fails while the bug is there.
    test: Path | None = None

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


#: The candidate id of every finding of a client that gave up on the connection (`cause_of`).
GAVE_UP = ("gave up",)


def candidate_id(key: BugKey) -> tuple[Any, ...]:
    """What one candidate of the search stands for: a cause (`cause_of`) - a client that gave up is one
    wherever the fault acted; any other finding its rule, items, faults, point and reaction."""
    if cause_of(key.rule, key.items, key.point, key.reaction, key.faults).family == "gave up":
        return GAVE_UP
    return (key.rule, key.items, key.faults, key.point, key.reaction)


def gave_up_rank(key: BugKey) -> int:
    """Which finding names a client that gave up: its failure to survive, then its never coming back."""
    return {SURVIVAL: 0, "RT127": 1}.get(key.rule, 2)


def ranked_rules(key: BugKey) -> list[str]:
    """The rules an entry is ranked by: a client that gave up ranks as its failure to survive, not as data lost."""
    return [SURVIVAL] if candidate_id(key) == GAVE_UP else [key.rule]


def by_cause(bugs: list[Bug]) -> list[Bug]:
    """One entry per cause (`Bug.cause`), in the order of `bugs.entry_rank` (data lost first): a bug of a cause
    already listed joins it (its schedule under `variants`, its rules under `also`); the client's failure to
    survive joins the finding of the same point and reaction (it is how that defect ended the run: a turn left
    hung, then the test's deadline), else it is an entry of its own."""
    out: dict[Any, Bug] = {}
    failures = [b for b in bugs if b.rule == SURVIVAL and b.cause is not None and b.cause.family != "gave up"]
    for bug in [b for b in bugs if b not in failures] + failures:
        cause = bug.cause or bug.key
        if bug in failures and bug.cause is not None:
            cause = next((c for c in out if isinstance(c, Cause) and c.family != "gave up"
                          and (c.point, c.reaction) == (bug.cause.point, bug.cause.reaction)), cause)  # fmt: skip
        keeper = out.setdefault(cause, bug)
        if keeper is bug:
            continue
        if bug.rule == SURVIVAL and SURVIVAL not in {r for r, _ in keeper.rules}:
            keeper.rules.append((SURVIVAL, SURVIVAL))
            keeper.also.append(f"{SURVIVAL} ({bug.how})")
        variant = f"{bug.schedule.describe()} ({bug.hits}/{bug.tries})"
        if bug.schedule != keeper.schedule and variant not in keeper.variants:
            keeper.variants.append(variant)
        for rule, slug in bug.rules:
            if (rule, slug) not in keeper.rules:
                keeper.rules.append((rule, slug))
                keeper.also.append(f"{rule} {slug}")
        keeper.covers |= bug.covers
    for keeper in out.values():  # what the client did wrong, with what all of its rules say it lost
        if keeper.cause is not None:
            title = next((r.title for r in RULES if r.id == keeper.rule), keeper.message)
            keeper.sentence = sentence(keeper.cause, title, [r for r, _ in keeper.rules])
    return sorted(out.values(), key=lambda b: entry_rank(ranked_rules(b.key), b.severity, b.schedule.cost))


# -- what restates a fault, which finding names a defect, merging ------------------------------------------


#: Rules whose finding restates a fault the schedule injected - an `error` the server sent (or the real server's
#: `response_cancel_not_active` to a client cancelling the response the server already cancelled, on a barge-in or
#: its own cancel: livekit 1.8.9 sends `response.cancel` on `speech_started`), a session that expired, a response
#: the server's close or expiry cut (RT107 as a warning: the wire cannot show whether the client closed its
#: generation; as an error it is the client's) - with the kinds of fault it restates and the severity it has then:
#: not a bug of the client when the schedule has that kind of fault.
FAULT_ECHOES: dict[str, tuple[frozenset[str], str | None]] = {
    "RT112": (frozenset({"error", "barge_in", "cancel"}), None),
    "RT119": (frozenset({"expire"}), None),
    "RT107": (frozenset({"close", "drop", "expire"}), "warning"),
}


def injected_kinds(schedule: Schedule, base: ScriptSchedule) -> set[str]:
    """The kinds of fault a run injects: its schedule's, and those of every fault action the turns of the user's
    script take (`rtrace.net.faults.actions.ACTIONS`: each action of its script key that acts at the turn's
    moment; a `close` on an event is a close or a drop): what `echoes` forgives."""
    kinds: set[str] = {f.kind for f in schedule.faults}
    for turn in base.turns:
        keys = {key for key, _ in turn.acts}
        kinds |= {a.kind for a in ACTIONS if a.key in keys and turn.moment in {SCRIPT_MOMENT[m] for m in a.moments}}
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
    return (severity_rank(finding.severity), first, finding.at_line, finding.rule)


def bug_order(bug: Bug) -> tuple[Any, ...]:
    return (severity_rank(bug.severity), bug.rule == SURVIVAL, bug.rule, bug.schedule.cost, bug.key)


def merged(bugs: list[Bug]) -> list[Bug]:
    """One entry per key, the most severe first: a bug found again with another schedule that shrank to the same,
    or a candidate whose finding came in every reproducing run with a finding that names its defect better (a
    stale delete with the output it deleted: `_bug_of` keys it by that one), joins the first; its rules join it.
    A finding that some bug reproduced with no fault at all is one bug whatever the faults it was found under
    (the fault acted, but is not what causes it: livekit-agents 1.8.8's race shows on a connection a close
    replaced as on the first); the other schedules are listed with it (`variants`)."""
    faultless = {b.key.finding for b in bugs if b.without_fault or b.schedule.clean}
    out: dict[Any, Bug] = {}
    for bug in sorted(bugs, key=bug_order):
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


def severity_rank(severity: str) -> int:
    return {"error": 0, "warning": 1, "info": 2}.get(severity, 3)
