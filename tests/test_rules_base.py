"""Findings, witnesses, bursts and durations."""

from __future__ import annotations

import typing
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from rtrace.core.facts import FACTS, ChangeAnswered, ChangeSent, ConnClosed, Fact
from rtrace.core.state import Change, TraceState
from rtrace.rules import RULES
from rtrace.rules.base import Bursts, Config, Rule, Witness, as_json, ms, on


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
    """A pipeline of 10,000 creates is one burst: it keeps its size, its last time, its item ids (when asked) and
    the first creates the rules quote, not every change (memory bounded by live state)."""
    bursts = Bursts(0.01, ids=True)
    for k in range(10_000):
        burst = bursts.add(Change("conversation.item.create", 1, k, k + 1, k * 1e-6, item_id=f"i{k % 7}"))
    assert len(burst) == 10_000 and len(burst.creates) <= 12 and burst.ids == {f"i{k}" for k in range(7)}


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
