"""One pass over a trace: analyze_path on the real traces and on bad input, analyze_records on random traces."""

from __future__ import annotations

import gc
import re
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rtrace.core import loader as loader_module
from rtrace.core.loader import TraceReader, UnreadableInput, load
from rtrace.core.trace import QuietRun, Record
from rtrace.engine.fold import Fold, Report, analyze_path, analyze_records, digest, fold_state, state_at
from rtrace.rules import RULES
from rtrace.rules.base import Config, Finding, Rule

from .conftest import REAL, SAMPLES
from .counting import count_parses
from .strategies import BOUNDED, check_invariants, envelopes, event, to_records

RACE_188 = REAL / "tool-output-race.livekit-1.8.8.jsonl"
RACE_189 = REAL / "tool-output-race.livekit-1.8.9.jsonl"
RECONNECT_184 = REAL / "reconnect-during-tool.livekit-1.8.4.jsonl"


def test_analyze_path_summary_of_a_real_trace() -> None:
    report = analyze_path(RACE_188)
    assert report.path == str(RACE_188)
    assert (report.events, report.connections) == (76, 1)
    assert report.duration == pytest.approx(1.5459)
    assert report.by_dir == {"meta": 2, "server": 62, "client": 12}
    assert report.problems == [] and report.problem_count == 0 and report.unreadable is None
    rt101 = [f for f in report.findings if f.slug == "deleted-function-call-output"]
    assert len(rt101) == 1 and rt101[0].lines == (15, 42, 43, 45, 46, 47) and rt101[0].conn == 1
    assert report.counts()["error"] >= 1


def test_fixed_version_has_no_error() -> None:
    report = analyze_path(RACE_189)
    assert report.counts()["error"] == 0


def test_reconnect_trace_counts_connections() -> None:
    report = analyze_path(RECONNECT_184)
    assert (report.events, report.connections) == (46, 2)
    assert "output-for-unknown-call" in {f.slug for f in report.findings}


def test_findings_are_sorted() -> None:
    findings = analyze_path(RACE_188).findings
    assert findings == sorted(findings, key=Finding.sort_key)


def test_bad_lines_do_not_stop_the_analysis(tmp_path: Path) -> None:
    lines = RACE_188.read_bytes().splitlines(keepends=True)
    # A malformed line, a non-object and garbage bytes in the middle; the finding survives (lines shift by 3).
    broken = [*lines[:20], b"{oops\n", b"[1]\n", b"\xff\xfe\x00\n", *lines[20:]]
    path = tmp_path / "broken.jsonl"
    path.write_bytes(b"".join(broken))
    report = analyze_path(path)
    assert report.events == 76 and report.problem_count == 3
    assert [(p.line, p.col) for p in report.problems] == [(21, 2), (22, 1), (23, 1)]
    rt101 = next(f for f in report.findings if f.slug == "deleted-function-call-output")
    assert rt101.lines == (15, 45, 46, 48, 49, 50)


def test_rules_subset_and_config() -> None:
    only = [r for r in RULES if r.slug == "deleted-function-call-output"]
    report = analyze_path(RACE_188, Config(ack_timeout=1.0), only)
    assert {f.slug for f in report.findings} == {"deleted-function-call-output"}


def test_header_and_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(b'{"rtrace": 1, "client": "livekit-agents 1.8.8"}\n' + RACE_189.read_bytes())
    report = analyze_path(path)
    assert report.header is not None and report.header.fields == {"client": "livekit-agents 1.8.8"}
    assert report.events == 74
    with pytest.raises(UnreadableInput):
        analyze_path(tmp_path / "missing.jsonl")


def test_report_collects_findings_of_all_traces() -> None:
    traces = [analyze_path(RACE_188), analyze_path(RACE_189)]
    report = Report(traces, Config())
    assert report.findings == traces[0].findings + traces[1].findings


def test_analyze_records_equals_analyze_path() -> None:
    records, _ = load(RACE_188)
    findings, state = analyze_records(records, Config())
    assert findings == analyze_path(RACE_188).findings
    assert state.records == 76 and all(not c.open for c in state.conns.values())


@BOUNDED
@given(envelopes(max_size=50))
def test_random_traces_never_crash_the_rules(lines: list[dict[str, Any]]) -> None:
    records = to_records(lines)
    findings, state = analyze_records(records, Config(ack_timeout=0.2))
    check_invariants(state)
    known = {r.line for r in records}
    for f in findings:
        assert set(f.lines) <= known, (f.rule, f.lines)
        assert 1 <= f.at_line <= max(known)
        assert f.message and f.rule.startswith("RT")
    assert findings == sorted(findings, key=Finding.sort_key)


def test_rejected_output_without_call_id_does_not_crash_the_rules() -> None:
    """Found by this suite: RT104 asserted on a function_call_output create with no call_id."""
    lines = [
        {"t": 0.0, "dir": "meta", "conn": 1, "event": {"type": "connection.opened"}},
        {"t": 0.1, "dir": "client", "conn": 1,
         "event": {"type": "conversation.item.create", "event_id": "e1", "item": {"type": "function_call_output"}}},
        {"t": 0.2, "dir": "server", "conn": 1,
         "event": {"type": "error", "error": {"code": "invalid_tool_call_id", "message": "x", "event_id": "e1"}}},
    ]  # fmt: skip
    findings, _ = analyze_records(to_records(lines), Config())
    assert "server-error" in {f.slug for f in findings}


def test_no_key_reaches_a_finding_or_a_problem(tmp_path: Path) -> None:
    key = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
    trace = tmp_path / "secret.jsonl"
    trace.write_text(
        '{"t":0.0,"dir":"server","conn":1,"event":{"type":"session.created","session":{}}}\n'
        '{"t":0.1,"dir":"client","conn":1,"event":{"type":"response.cancel","event_id":"e1"}}\n'
        '{"t":0.2,"dir":"server","conn":1,"event":{"type":"error","error":{"code":"invalid_api_key",'
        f'"message":"Incorrect API key provided: {key}","event_id":"e1"}}}}}}\n'
        f'{{"t":0.3,"dir":"server","conn":1,"event":{{"type":"error","message":"{key}"\n'
    )
    report = analyze_path(trace)
    assert report.findings and report.problems
    text = repr(report.findings) + repr(report.problems)
    assert key not in text and "sk-proj-abcd" not in text


def fold_report(rows: list[Any], cut: int | None = None) -> Any:
    """The report of `rows` folded whole, or up to `cut` and then through `digest` from there."""
    fold = Fold(Config(ack_timeout=0.2), RULES)
    if cut is None:
        fold.rows(rows)
    else:
        fold.rows(rows[:cut])
        rest = [(seq - cut, line - cut, *others) for seq, line, *others in rows[cut:]]
        fold.digested(list(digest(iter(rest))), cut, cut)
    return fold.report("x", len(rows), [], 0, None)


@BOUNDED
@given(envelopes(max_size=60), st.floats(0, 1))
def test_the_digest_of_a_part_folds_to_the_same_report(lines: list[dict[str, Any]], where: float) -> None:
    """`parallel.analyze_split` rests on this: folding a first part, then the digest of the rest read on its own,
    gives the report of folding the whole, wherever the cut."""
    rows = [rec_row(r) for r in to_records(lines)]
    cut = int(len(rows) * where)
    assert fold_report(rows, cut) == fold_report(rows)


def rec_row(r: Record) -> tuple[Any, ...]:
    return (r.seq, r.line, r.t, r.dir, r.conn, r.event, r.type, r.raw_type)


def test_the_fold_fast_path_agrees_with_step_on_every_sample() -> None:
    for path in sorted(SAMPLES.rglob("*.jsonl")):
        records, _ = load(path)
        rows = [rec_row(r) for r in records]
        findings, _ = analyze_records(records, Config(ack_timeout=0.2))
        whole = fold_report(rows)
        assert whole.findings == findings, path
        for cut in range(0, len(rows) + 1, max(1, len(rows) // 7)):
            assert fold_report(rows, cut) == whole, (path, cut)


def test_digest_keeps_transitions_whole_and_runs_of_quiet_records_short() -> None:
    events = [
        ("meta", 1, {"type": "connection.opened"}),
        ("client", 1, {"type": "input_audio_buffer.append", "audio": "AAAA"}),
        ("client", 1, {"type": "input_audio_buffer.append", "audio": "AAAA"}),
        ("server", 1, {"type": "response.output_audio.delta", "item_id": "a", "delta": "AAAAAA=="}),
        ("server", 2, {"type": "rate_limits.updated"}),
        ("server", 2, {"type": "rate_limits.updated"}),
    ]
    rows = [(k, k + 1, k / 10, d, n, ev, ev["type"], ev["type"]) for k, (d, n, ev) in enumerate(events)]
    out = list(digest(iter(rows)))
    assert out[0] == rows[0]  # a transition, and the first record of connection 1
    assert out[1] == QuietRun(2, 3, 0.2, 1, "client")  # two quiet appends: one run, the clock of the last
    assert out[2][5] == {"type": "response.output_audio.delta", "item_id": "a", "delta": "", "rtrace_audio_bytes": 4}
    assert out[3] == rows[4]  # the first record of connection 2 stays whole: only the fold knows it is new
    assert out[4] == QuietRun(1, 6, 0.5, 2, "server") and type(out[4]) is QuietRun
    assert rows[3][5]["delta"] == "AAAAAA=="  # the row itself is not changed


def _delta_trace(path: Path, deltas: int) -> int:
    """A session whose bulk is text deltas (quiet records the scanner takes): its line count."""
    ids = {"response_id": "r1", "item_id": "i1", "output_index": 0, "content_index": 0}
    events: list[tuple[str, dict[str, Any]]] = [
        ("meta", {"type": "connection.opened", "path": "/v1/realtime"}),
        ("server", {"type": "session.created", "event_id": "e0", "session": {}}),
        ("client", {"type": "response.create", "event_id": "c1"}),
        ("server", {"type": "response.created", "event_id": "e1", "response": {"id": "r1"}}),
    ]
    events += [("server", {"type": "response.output_text.delta", **ids, "delta": "w "}) for _ in range(deltas)]
    lines = [{"t": k / 1000, "dir": d, "conn": 1, "event": ev} for k, (d, ev) in enumerate(events)]
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return len(lines)


@pytest.mark.skipif(loader_module._scanner is None, reason="the C scanner is not built")
@pytest.mark.parametrize("extra", [[], ["--conn", "1"]])
def test_show_at_parses_only_the_lines_the_scanner_cannot_take(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], extra: list[str]
) -> None:
    """`show --at N` (with `--conn` too) folds on the fast path: counted, of 2,000 deltas before line N none is
    parsed into objects (the path that left it parsed every line)."""
    from rtrace.cli import main

    path = tmp_path / "deltas.jsonl"
    lines = _delta_trace(path, 3000)
    parsed = count_parses(monkeypatch)
    assert main(["show", str(path), "--at", "2004", *extra]) == 0
    assert "after line 2004" in capsys.readouterr().out
    assert 0 < parsed.n < 20, parsed.n  # the first lines of the connection, whole; no delta
    parsed.n = 0
    assert main(["show", str(path), "--at", str(lines), *extra]) == 0
    assert parsed.n < 20, parsed.n


def test_fold_state_is_the_state_without_rules_or_finish() -> None:
    records, _ = load(RACE_188)
    state = fold_state(records[:40])
    assert state.records == 40 and state.last_line == records[39].line
    assert all(conn.open for conn in state.conns.values())  # a prefix is not finished


def test_state_at_stops_after_the_line_on_the_fast_path() -> None:
    records, _ = load(RACE_188)
    for line in (1, 15, 46, records[-1].line, records[-1].line + 10):
        with TraceReader.open(RACE_188) as reader:
            fast = state_at(reader, line)
        slow = fold_state(r for r in records if r.line <= line)
        assert fast.last_line == slow.last_line and fast.records == slow.records, line
        assert {n: c.conv.ids() for n, c in fast.conns.items()} == {n: c.conv.ids() for n, c in slow.conns.items()}
        assert {n: [ch.line for ch in c.pending.values()] for n, c in fast.conns.items()} == {
            n: [ch.line for ch in c.pending.values()] for n, c in slow.conns.items()
        }


def test_an_observer_sees_every_record_once_with_its_facts_and_the_rules_still_run() -> None:
    seen: list[tuple[int, int]] = []

    def observe(row: Any, facts: Any, state: Any) -> None:
        seen.append((row[1], len(facts)))
        assert state.last_line == row[1]

    records, _ = load(RACE_188)
    fold = Fold(Config(), RULES, observe)
    with TraceReader.open(RACE_188) as reader:
        fold.rows(reader.rows())
    assert [line for line, _ in seen] == [r.line for r in records]
    assert sum(n for _, n in seen) > 0
    plain, _ = analyze_records(records, Config())
    assert fold.findings() == plain


_IN_CONNECTION = event().filter(lambda e: e[1]["type"] not in ("connection.opened", "connection.closed"))
_MSG = {"id": "a", "type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
_CALL = {"id": "b", "type": "function_call", "call_id": "k1", "arguments": "{}", "status": "completed"}
_REPLAY = [
    ("client", {"type": "conversation.item.create", "event_id": "e1", "item": _MSG}),
    ("client", {"type": "conversation.item.create", "event_id": "e2", "item": _CALL}),
    ("client", {"type": "conversation.item.create", "item": {"type": "function_call_output", "call_id": "k1"}}),
    ("client", {"type": "response.create", "event_id": "e3", "response": {}}),
    ("client", {"type": "session.update", "session": {}}),
]


@st.composite
def reconnect(draw: st.DrawFn) -> tuple[list[dict[str, Any]], int]:
    """Two connections with notes, random events on each; and the 0-based index of connection 1's close."""
    lines: list[dict[str, Any]] = []
    t = 0.0

    def add(direction: str, conn: int, ev: dict[str, Any]) -> None:
        nonlocal t
        t = round(t + draw(st.floats(0, 0.5)), 6)
        lines.append({"t": t, "dir": direction, "conn": conn, "event": ev})

    add("meta", 1, {"type": "connection.opened", "path": "/v1/realtime"})
    held = [  # what the old connection holds, so that a replay has something to lose
        ("server", {"type": "conversation.item.added", "previous_item_id": None, "item": _MSG}),
        ("server", {"type": "conversation.item.added", "previous_item_id": "a", "item": _CALL}),
        ("server", {"type": "response.function_call_arguments.done", "item_id": "b", "arguments": "{}"}),
    ]
    for direction, ev in draw(st.permutations([*held, *draw(st.lists(_IN_CONNECTION, max_size=16))])):
        add(direction, 1, ev)
    add("meta", 1, {"type": "connection.closed", "code": 1006})
    close = len(lines) - 1
    add("meta", 2, {"type": "connection.opened", "path": "/v1/realtime"})
    replay = draw(st.lists(st.sampled_from(_REPLAY), max_size=4))
    for direction, ev in draw(st.permutations([*replay, *draw(st.lists(_IN_CONNECTION, max_size=16))])):
        add(direction, 2, ev)
    if draw(st.booleans()):
        add("meta", 2, {"type": "connection.closed", "code": 1000})
    return lines, close


def _shape(f: Finding, mapping: dict[int, int]) -> tuple[Any, ...]:
    lines = sorted(mapping.get(n, n) for n in f.lines)
    return (f.rule, f.conn, f.severity, lines, f.ids, re.sub(r"\d+", "#", f.explanation))


@BOUNDED
@given(reconnect())
def test_opening_the_new_connection_before_the_old_close_changes_only_line_numbers(
    drawn: tuple[list[dict[str, Any]], int],
) -> None:
    """A client may open its new socket before the recorder notes the old one's close (agents-js): the reducer
    pairs the two connections either way, so every finding is the same but for the two lines swapped."""
    lines, k = drawn
    swapped = [*lines[:k], lines[k + 1], lines[k], *lines[k + 2 :]]
    config = RECONNECT_CONFIG
    original, _ = analyze_records(to_records(lines), config)
    again, state = analyze_records(to_records(swapped), config)
    check_invariants(state)
    mapping = {k + 1: k + 2, k + 2: k + 1}
    assert sorted(_shape(f, mapping) for f in again) == sorted(_shape(f, {}) for f in original)


#: Thresholds small enough for the random reconnects to reach them (RT110, RT125).
RECONNECT_CONFIG = Config(ack_timeout=0.2, reply_timeout=0.5)


@BOUNDED
@given(reconnect())
def test_a_finding_on_a_random_reconnect_is_certain_at_its_line(drawn: tuple[list[dict[str, Any]], int]) -> None:
    """The prefix property of tests/test_samples.py on random reconnects, where the reconnect rules (RT105,
    RT106, RT122-RT125) fire: the trace cut at a finding's `at_line` gives that finding too (except for the rules
    that need the end of the trace)."""
    from .test_samples import NEEDS_END

    records = to_records(drawn[0])
    findings, _ = analyze_records(records, RECONNECT_CONFIG)
    for f in findings:
        assert max(f.lines) <= f.at_line
        if f.slug in NEEDS_END:
            continue
        again, _ = analyze_records([r for r in records if r.line <= f.at_line], RECONNECT_CONFIG)
        assert (f.rule, f.conn, f.lines, f.message) in {(g.rule, g.conn, g.lines, g.message) for g in again}


@BOUNDED
@given(reconnect(), st.integers(2, 4))
def test_unknown_events_in_a_random_reconnect_change_only_line_numbers(
    drawn: tuple[list[dict[str, Any]], int], every: int
) -> None:
    """The inserted-unknown-events property of tests/test_samples.py on random reconnects: an unknown event on the
    connection of the line before (its first record would begin a connection that has not begun yet)."""
    lines = drawn[0]
    mutated: list[dict[str, Any]] = []
    mapping: dict[int, int] = {}
    for k, line in enumerate(lines, start=1):
        if k % every == 0:
            conn = lines[k - 2]["conn"]
            mutated.append({"t": line["t"], "dir": "server", "conn": conn, "event": {"type": "x.unknown"}})
        mutated.append(line)
        mapping[k] = len(mutated)
    original, _ = analyze_records(to_records(lines), RECONNECT_CONFIG)
    again, _ = analyze_records(to_records(mutated), RECONNECT_CONFIG)
    assert [(f.rule, f.conn, [mapping[n] for n in f.lines]) for f in original] == [
        (f.rule, f.conn, list(f.lines)) for f in again
    ]


class _Explodes(Rule[Config]):
    """A rule that raises on the third fact it is given (a rule bug met by one input)."""

    id = "RT999"
    slug = "explodes"
    severity = "error"
    title = "explodes"
    fix = "none"

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.seen = 0

    def subscribed(self) -> Any:
        from rtrace.core.facts import FACTS
        from rtrace.rules.base import Narrowing, Subscription

        for fact_class in FACTS:
            yield Subscription(fact_class, self.boom, Narrowing())

    def boom(self, fact: Any, state: Any) -> None:
        self.seen += 1
        if self.seen == 3:
            raise TypeError("unhashable type: 'list'")

    def finish(self, state: Any) -> None:
        raise AssertionError("a failed rule is not finished")


@pytest.mark.parametrize("engine", ["rows", "records", "digest", "observed"])
def test_a_rule_that_raises_loses_only_its_own_findings(engine: str) -> None:
    """One bad field must never discard a trace: one rule raising on one event took the whole trace (unreadable,
    every finding lost). `observed`: the fold the HTML report watches isolates the rule the same way, and its
    observer still sees every record."""
    baseline = analyze_path(RACE_188)
    rules = (*RULES, _Explodes)
    if engine == "rows":
        report = analyze_path(RACE_188, Config(), rules)
    elif engine == "observed":
        seen: list[int] = []
        report = analyze_path(RACE_188, Config(), rules, observer=lambda row, facts, state: seen.append(row[1]))
        assert len(seen) == report.events
    else:
        records, reader = load(RACE_188)
        fold = Fold(Config(), rules)
        if engine == "records":
            fold.records(records)
        else:
            with TraceReader.open(RACE_188) as again:
                fold.digested(digest(again.rows()), 0, 0)
        report = fold.report(str(RACE_188), len(records), reader.problems, reader.problem_count, reader.header)
    assert report.unreadable is None
    assert [f.rule for f in report.findings] == [f.rule for f in baseline.findings]
    assert report.failed_rules == ("RT999",)
    failure = report.problems[0]
    assert failure.severity == "error" and failure.line >= 1 and "RT999" in failure.message
    assert str(failure).startswith(f"{RACE_188}:{failure.line}:1: rule RT999 failed on this event (TypeError")


def test_blind_notes_name_the_rules_that_need_what_a_capture_lacks() -> None:
    from rtrace.core.trace import Header
    from rtrace.engine.fold import blind_notes
    from rtrace.rules.base import NEEDS

    needing = {r.id: r.needs for r in RULES if r.needs}
    assert needing and all(set(n) <= set(NEEDS) for n in needing.values())
    state = Fold(Config(), RULES).state
    header = Header(1, {"recorder": "a log", "unseen": ["output-audio-bytes", "reconnect-replay", "no-such-thing"]})
    # no reconnect happened: only what the header lists and some rule needs (the replay needs a reconnect)
    [note] = blind_notes(RULES, state, header)
    assert note.what == "output-audio-bytes" and note.rules == tuple(i for i, n in needing.items() if note.what in n)
    assert "a log does not record" in note.why
    assert blind_notes([r for r in RULES if not r.needs], state, header) == []
    assert blind_notes(RULES, state, None) == []


def test_a_trace_without_times_says_which_rules_needed_them(tmp_path: Path) -> None:
    timed = [r.id for r in RULES if "timestamps" in r.needs]
    assert timed == ["RT101", "RT102", "RT110", "RT115", "RT119", "RT125"]
    trace = tmp_path / "untimed.jsonl"
    trace.write_text('{"dir": "client", "conn": 1, "event": {"type": "session.update", "session": {}}}\n' * 3)
    [note] = analyze_path(trace).not_judged
    assert (note.what, note.rules) == ("timestamps", tuple(timed)) and note.why.startswith("no timestamps")
    trace.write_text('{"t": 0.5, "dir": "client", "conn": 1, "event": {"type": "session.update", "session": {}}}\n')
    assert analyze_path(trace).not_judged == []  # one event: nothing to time
    assert analyze_path(REAL / "tool-output-race.livekit-1.8.8.jsonl").not_judged == []


def _pipeline(path: Path, creates: int) -> Path:
    """A connection that sends `creates` creates, each with a client id, before any is answered (a pipeline)."""
    lines = [{"t": 0.0, "dir": "meta", "conn": 1, "event": {"type": "connection.opened"}}]
    for k in range(creates):
        content = [{"type": "input_text", "text": f"ships tomorrow morning and you will {k}"}]
        item = {"id": f"item_p{k:08d}", "type": "message", "role": "user", "content": content}
        event = {"type": "conversation.item.create", "event_id": f"chat_ctx_create_{k:012d}", "item": item}
        if k:
            event["previous_item_id"] = f"item_p{k - 1:08d}"
        lines.append({"t": 0.1 + k * 4e-5, "dir": "client", "conn": 1, "event": event})
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return path


def _held(path: Path) -> int:
    """The bytes a fold with every rule holds once it has read `path` (before the end closes its connections)."""
    gc.collect()
    tracemalloc.start()
    try:
        fold = Fold(Config(), RULES)
        with TraceReader.open(path) as reader:
            fold.rows(reader.rows())
        gc.collect()
        return tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()


def test_a_create_in_flight_costs_what_it_holds_not_an_item(tmp_path: Path) -> None:
    """What each create waiting for its answer adds to the fold, every rule on (the memory of a pipeline: issue 41.3):
    measured between 2,000 and 4,000 creates in flight, so what any fold holds cancels out. A create holds its change,
    its event as text and the strings it keys by: 530 B compiled, 610 B from source; 1,000 B before (an `Item` made
    at send time, a mapping by seq, the ids of a burst's waiting creates, fields kept twice in the text)."""
    small, large = (_held(_pipeline(tmp_path / f"{n}.jsonl", n)) for n in (2_000, 4_000))
    assert (large - small) / 2_000 < 700, (large - small) / 2_000
