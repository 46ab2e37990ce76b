"""Findings, witnesses, bursts and durations."""

from __future__ import annotations

import ast
import inspect
import pickle
import typing
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rtrace.core.conversation import Item
from rtrace.core.facts import (
    FACTS,
    KIND_OF,
    ChangeAnswered,
    ChangeSent,
    ConnClosed,
    Fact,
    ItemAdded,
    ItemDeleted,
)
from rtrace.core.facts import item_type as item_type_of
from rtrace.core.loader import load
from rtrace.core.reducer import finish, step
from rtrace.core.state import Change, Connection, TraceState
from rtrace.core.trace import Record
from rtrace.engine.fold import analyze_records
from rtrace.rules import RULES
from rtrace.rules.base import Bursts, Config, Finding, Rule, Witness, as_json, ms, on

from .conftest import SAMPLES
from .strategies import BOUNDED, envelopes, to_records


def attributes(rule: Rule[Config]) -> dict[str, Any]:
    """What a rule keeps: its attributes, whether it runs from source (`vars`) or compiled (mypyc's native
    classes have no `__dict__`; `__mypyc_attrs__` names their attributes)."""
    names = getattr(type(rule), "__mypyc_attrs__", None)
    if names is None:
        return vars(rule)
    return {name: getattr(rule, name, None) for name in names if name != "__dict__"}


class Dummy(Rule[Config]):
    """Doc."""

    id = "RT999"
    slug = "dummy"
    severity = "warning"
    title = "t"
    fix = "f"


def test_a_finding_is_placed_at_the_line_its_message_is_about() -> None:
    w = [Witness(2, 0.2, "client", 1, "conversation.item.delete", "d"), Witness(5, 0.5, "server", 1, "x", "b")]
    rule = Dummy(Config())
    assert rule.finding(1, "item deleted at line 2 while its call stays", "e", w, 5).subject_line == 2
    # A line the message quotes from the trace (an error's text) but no witness holds is not where it is.
    assert rule.finding(1, "server error: bad JSON at line 9; create at line 2", "e", w, 5).subject_line == 2
    assert rule.finding(1, "nothing cited", "e", w, 5).subject_line == 5
    assert rule.finding(1, "nothing cited", "e", w, 0).subject_line == 2


def test_every_sample_finding_is_placed_on_one_of_its_lines() -> None:
    """RT101 at the delete its message names, not at the ack that made it certain; every finding of every sample
    on a line of its witness or where it became certain."""
    from pathlib import Path

    from rtrace.engine.fold import analyze_path

    root = Path(__file__).resolve().parent.parent / "sample_traces"
    for path in sorted(root.rglob("*.jsonl")):
        for f in analyze_path(path).findings:
            assert f.subject_line in {*f.lines, f.at_line}, (path, f.rule)
    (rt101,) = [f for f in analyze_path(root / "real" / "tool-output-race.livekit-1.8.8.jsonl").findings
                if f.rule == "RT101"]  # fmt: skip
    assert (rt101.at_line, rt101.subject_line) == (47, 45) and "deleted at line 45 " in rt101.message


def test_finding_witness_sorted_and_unique() -> None:
    w = [
        Witness(5, 0.5, "server", 1, "x", "b"),
        None,
        Witness(2, 0.2, "client", 1, "y", "a"),
        Witness(5, 0.5, "server", 1, "x", "b"),
    ]
    f = Dummy(Config()).finding(1, "m", "e", w, 5, items=["a", None, "a", "b"])
    assert f.lines == (2, 5)
    assert f.ids == {"items": ("a", "b")}
    data = as_json(f)
    assert data["lines"] == [2, 5] and data["rule"] == "RT999" and data["ids"] == {"items": ["a", "b"]}


def test_a_finding_may_carry_a_severity_of_its_own() -> None:
    rule = Dummy(Config())
    assert rule.finding(1, "m", "e", [], 1).severity == "warning"
    assert rule.finding(1, "m", "e", [], 1, severity="error", items=["a"]).severity == "error"


def test_ms() -> None:
    assert ms(0.0017) == "1.7 ms"
    assert ms(0.0504) == "50 ms"
    assert ms(2.314) == "2.31 s"


def test_bursts_split_on_gaps_and_connections() -> None:
    bursts = Bursts(0.01)

    def change(conn: int, t: float) -> Change:
        return Change(kind="conversation.item.create", conn=conn, seq=int(t * 1000), line=1, t=t)

    a = bursts.add(change(1, 0.0))
    b = bursts.add(change(1, 0.005))
    c = bursts.add(change(2, 0.006))
    d = bursts.add(change(1, 0.02))
    assert a is b and len(a) == 2
    assert c is not a and d is not a


# -- typed subscriptions ----------------------------------------------------------------------------------------


def subscription_problems(rule: type[Rule[Config]]) -> list[str]:
    """What is wrong with a rule's subscriptions: a class `step` never reports, or a handler whose `fact`
    annotation does not name exactly the classes it subscribed to."""
    problems = []
    by_method: dict[str, set[type[Fact]]] = {}
    for fact_class, names in rule.subscriptions.items():
        if fact_class not in FACTS:
            problems.append(f"{rule.__name__} subscribes to {fact_class!r}, which step never reports")
        for name in names:
            by_method.setdefault(name, set()).add(fact_class)
    for name, classes in by_method.items():
        hint = typing.get_type_hints(getattr(rule, name)).get("fact")
        annotated = set(typing.get_args(hint)) if typing.get_args(hint) else {hint}
        if annotated != classes:
            problems.append(f"{rule.__name__}.{name} handles {classes} but its `fact` is annotated {hint}")
    return problems


@pytest.mark.source  # compiled methods keep no annotations
def test_every_rule_subscribes_to_facts_that_exist_and_handles_what_it_subscribed_to() -> None:
    for rule in RULES:
        assert rule.subscriptions, rule.__name__
        assert subscription_problems(rule) == []


class NotAFact:
    pass


class BadSubscription(Dummy):
    @on(ChangeSent)
    def sent(self, fact: ChangeAnswered, state: TraceState) -> None:
        pass

    @on(NotAFact)  # type: ignore[arg-type]
    def other(self, fact: NotAFact, state: TraceState) -> None:
        pass


def test_the_subscription_check_catches_a_wrong_annotation_and_an_unknown_fact() -> None:
    problems = subscription_problems(BadSubscription)
    assert len(problems) == 2
    assert "sent handles" in " ".join(problems) and "never reports" in " ".join(problems)


class Counting(Dummy):
    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.seen: list[type[Fact]] = []

    @on(ChangeSent, ConnClosed)
    def watched(self, fact: ChangeSent | ConnClosed, state: TraceState) -> None:
        self.seen.append(type(fact))


def test_dispatch_is_by_class_and_hands_a_rule_only_what_it_subscribed_to() -> None:
    assert Counting.subscriptions == {ChangeSent: ("watched",), ConnClosed: ("watched",)}
    rule = Counting(Config())
    handlers = dict(rule.handlers())
    assert set(handlers) == {ChangeSent, ConnClosed}


def test_a_burst_keeps_a_few_changes_whatever_its_length() -> None:
    """A pipeline of 10,000 creates is one burst: it keeps its size, its last time and the first creates the rules
    quote, not every change, and no item id while the creates wait (memory bounded by live state); with `ids` it
    says which ids it creates all the same, from its connection's pending creates and the ids of those answered."""
    bursts = Bursts(0.01, ids=True)
    conn = Connection(1, 1, 0.0)
    before = Change("conversation.item.create", 1, 0, 1, -1.0, item_id="i9")  # pending, from an earlier burst
    conn.pending.add(before)
    bursts.add(before)
    changes = [Change("conversation.item.create", 1, k, k + 1, k * 1e-6, item_id=f"i{k % 7}") for k in range(1, 10_001)]
    for change in changes:
        burst = bursts.add(change)
        conn.pending.add(change)
    assert len(burst) == 10_000 and len(burst.creates) <= 12 and burst.ids == set()
    assert all(burst.creates_id(f"i{k}", conn) for k in range(7)) and not burst.creates_id("i9", conn)
    for change in changes:
        if change.item_id != "i3":
            conn.pending.remove(change)
            bursts.answered(change, conn)
    bursts.answered(before, conn)  # (answered too, but not in the burst)
    assert burst.ids == {f"i{k}" for k in range(7) if k != 3}
    assert all(burst.creates_id(f"i{k}", conn) for k in range(7)) and not burst.creates_id("i9", conn)


@given(st.lists(st.sampled_from(["a", "b", "c", "d", "e", None]), max_size=30), st.sampled_from(["a", "b", "z", None]))
def test_a_burst_names_the_first_creates_of_another_id_as_a_full_list_would(ids: list[Any], other: Any) -> None:
    bursts = Bursts(0.01)
    creates = [Change("conversation.item.create", 1, k, k + 1, 0.0, item_id=i) for k, i in enumerate(ids)]
    burst = None
    for change in creates:
        burst = bursts.add(change)
    if burst is not None:
        assert burst.creates_besides(other) == [c for c in creates if c.item_id != other][:3]
        assert burst.creates[:3] == creates[:3]


def test_every_threshold_is_an_analyze_option_a_settings_key_and_in_the_docs() -> None:
    """The rules' thresholds are declared once (`Config`'s fields, `THRESHOLDS`); a new one reaches every
    consumer or fails here."""
    import dataclasses
    from pathlib import Path

    import typer.main

    from rtrace.cli import app
    from rtrace.engine.settings import KEYS, Settings
    from rtrace.rules.base import THRESHOLDS

    analyze = typer.main.get_command(app).commands["analyze"]  # type: ignore[attr-defined]
    options = {o for p in analyze.params for o in p.opts}
    settings_fields = {f.name for f in dataclasses.fields(Settings)}
    root = Path(__file__).resolve().parent.parent
    docs = (root / "README.md").read_text() + "".join(p.read_text() for p in sorted((root / "docs").glob("*.md")))
    for field in THRESHOLDS:
        key = field.name.replace("_", "-")
        assert f"--{key}" in options and KEYS[key] == (field.name, "duration") and field.name in settings_fields
        assert field.metadata["help"] and f"--{key}" in docs


# -- narrowed subscriptions ---------------------------------------------------------------------------------------


def every_handler_called(records: list[Record], config: Config) -> tuple[list[Finding], list[str]]:
    """Fold `records` with every rule, calling every handler with every fact of its classes, narrowed or not: the
    findings of the handlers (and `finish`) called with what they take, and a problem for each call with what a
    narrowing (`on(kinds=..., items=..., after=...)`) says the handler does not take that returned a finding or
    changed its rule."""
    state = TraceState()
    rules = [cls(config) for cls in RULES]
    subs = [(rule, sub) for rule in rules for sub in rule.subscribed()]
    findings: list[Finding] = []
    problems: list[str] = []

    seen: set[type[Fact]] = set()

    def deliver(facts: Sequence[Fact]) -> None:
        for fact in facts:
            cls = type(fact)
            kind = KIND_OF[cls](fact) if cls in KIND_OF else None
            item_type = item_type_of(fact)
            for rule, sub in subs:
                if sub.fact is not cls:
                    continue
                if sub.narrowing.takes(kind, item_type) and sub.narrowing.awake(seen):
                    findings.extend(sub.handler(fact, state) or ())
                    continue
                before = pickle.dumps(attributes(rule))
                if sub.handler(fact, state) or pickle.dumps(attributes(rule)) != before:
                    name = f"{type(rule).__name__}.{sub.handler.__name__}"
                    problems.append(f"{name} acted on {cls.__name__} ({kind}, {item_type}) at line {fact.rec.line}")
            seen.add(cls)

    for rec in records:
        deliver(step(state, rec)[1])
    deliver(finish(state))
    for rule in rules:
        findings.extend(rule.finish(state) or ())
    return sorted(findings, key=Finding.sort_key), problems


def test_a_narrowed_handler_does_nothing_with_what_it_does_not_take_on_every_sample() -> None:
    """The engine never calls a handler with a fact its narrowing leaves out: on every sample, calling it anyway
    finds nothing and changes nothing, and the findings are the fold's."""
    narrowed = [r for r in RULES if any(n.narrows for n in r.narrowings.values())]
    assert len(narrowed) >= 10
    for path in sorted(SAMPLES.rglob("*.jsonl")):
        records, _ = load(path)
        findings, problems = every_handler_called(records, Config())
        assert problems == [], path
        assert findings == analyze_records(records, Config())[0], path


@BOUNDED
@given(envelopes(max_size=50))
def test_a_narrowed_handler_does_nothing_with_what_it_does_not_take_on_random_traces(
    lines: list[dict[str, Any]],
) -> None:
    records = to_records(lines)
    findings, problems = every_handler_called(records, Config(ack_timeout=0.2))
    assert problems == []
    assert findings == analyze_records(records, Config(ack_timeout=0.2))[0]


class Narrowed(Dummy):
    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.seen: list[tuple[str, str]] = []

    @on(ChangeSent, kinds=["response.create", "conversation.item.create"], items=["function_call_output"])
    def sent(self, fact: ChangeSent, state: TraceState) -> None:
        self.seen.append(("sent", fact.change.kind))

    @on(ChangeSent)
    def every(self, fact: ChangeSent, state: TraceState) -> None:
        self.seen.append(("every", fact.change.kind))

    @on(ItemAdded, ItemDeleted, items=["message"])
    def item(self, fact: ItemAdded | ItemDeleted, state: TraceState) -> None:
        self.seen.append(("item", type(fact).__name__))

    @on(ChangeSent, kinds=["response.create"], after=[ConnClosed])
    def later(self, fact: ChangeSent, state: TraceState) -> None:
        self.seen.append(("later", fact.change.kind))


def test_a_fact_reaches_the_handlers_that_take_it_in_subscription_order() -> None:
    """A narrowing by kind and by item type takes what both name; an item-less fact (a response.create, a delete of
    an item never seen) is no item type; a kind or type no narrowing names reaches only the handlers that take any;
    a dormant handler (`after`) takes nothing before the first fact of the class it waits for."""
    from rtrace.engine.fold import _Dispatch

    dispatch = _Dispatch(Config(), [Narrowed])
    rule = dispatch.active[0]
    assert isinstance(rule, Narrowed)
    rec = Record(0, 1, 0.0, "client", 1, {}, "x", "x")
    output = Item(id="o", type="function_call_output", call_id="k")
    message = Item(id="m", type="message")

    def change(kind: str, item: Item | None = None) -> ChangeSent:
        held = {"item_type": item.type, "call_id": item.call_id} if item is not None else {}
        return ChangeSent(rec, Change(kind, 1, 0, 1, 0.0, **held))

    conn = Connection(1, 1, 0.0)
    facts: list[Fact] = [
        change("conversation.item.create", output),
        change("conversation.item.create", message),
        change("response.create"),
        change("conversation.item.delete"),
        ItemAdded(rec, conn, message, None, True, False),
        ItemAdded(rec, conn, Item(id="x", type="a type of its own"), None, True, False),
        ItemDeleted(rec, conn, "m", message, None),
        ItemDeleted(rec, conn, "q", None, None),
    ]
    dispatch.feed(facts, TraceState())
    assert rule.seen == [
        ("sent", "conversation.item.create"),
        ("every", "conversation.item.create"),
        ("every", "conversation.item.create"),
        ("every", "response.create"),
        ("every", "conversation.item.delete"),
        ("item", "ItemAdded"),
        ("item", "ItemDeleted"),
    ]
    rule.seen.clear()  # `later` takes its facts from the one after the first ConnClosed on, in the same feed too
    dispatch.feed([ConnClosed(rec, conn, [], None), change("response.create")], TraceState())
    dispatch.feed([change("response.create")], TraceState())
    assert rule.seen == [("every", "response.create"), ("later", "response.create")] * 2


def test_a_narrowing_names_what_its_facts_carry() -> None:
    with pytest.raises(TypeError, match="no change kind"):
        on(ItemAdded, kinds=["conversation.item.create"])
    with pytest.raises(TypeError, match="no item type"):
        on(ConnClosed, items=["message"])
    with pytest.raises(ValueError, match="empty"):
        on(ChangeSent, items=[""])
    with pytest.raises(ValueError, match="no fact class"):
        on(ChangeSent, after=[])


class Outer:
    class Inner:
        """The inner one's doc."""


@pytest.mark.source  # compares with the docstrings Python keeps, which a compiled class has not
def test_a_rule_manual_read_from_its_source_is_its_docstring_and_each_source_is_parsed_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rtrace.rules import base

    parsed: list[str] = []
    real_parse = ast.parse
    monkeypatch.setattr(base, "_DOCS", {})
    monkeypatch.setattr(base.ast, "parse", lambda source, *a, **k: parsed.append("x") or real_parse(source, *a, **k))
    for rule in RULES:
        assert inspect.cleandoc(base._source_doc(rule.__module__, rule.__qualname__)) == rule.doc(), rule.slug
    assert len(parsed) == len({rule.__module__ for rule in RULES})  # one parse per module, not per rule
    assert base._source_doc(__name__, "Outer.Inner") == "The inner one's doc."
    assert base._source_doc(__name__, "Outer") == "" and base._source_doc("no.such.module", "X") == ""
