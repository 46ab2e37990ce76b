"""What a rule is and what it reports: `Rule`, `Finding`, `Witness`, `Config`.

A finding is data, never an exception. Its witness is the few lines that prove it, each summarised so a
report can be written without the trace at hand.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence, Set
from pathlib import Path
from typing import Any, ClassVar, Generic, Literal, NamedTuple, TypeVar

from mypy_extensions import mypyc_attr

from ..core.conversation import Item
from ..core.describe import describe
from ..core.facts import ITEM_TYPE_OF, KIND_OF, Fact
from ..core.severity import FAIL_ON_LEVELS, SEVERITY_RANK, failing  # noqa: F401  (the rules' vocabulary)
from ..core.state import Change, Connection, Response, TraceState
from ..core.trace import Record

Severity = Literal["error", "warning", "info"]
#: A line a finding's message cites.
_CITED_LINE = re.compile(r"\bline (\d+)\b")


@mypyc_attr(native_class=False)  # crosses processes (pickled): a plain class where compiled
@dataclasses.dataclass(frozen=True, slots=True)
class Witness:
    """One line of the trace that proves a finding, summarised."""

    line: int
    t: float
    dir: str
    conn: int
    type: str
    summary: str

    @classmethod
    def of(cls, rec: Record) -> Witness:
        return cls(rec.line, rec.t, rec.dir, rec.conn, rec.type, describe(rec.type, rec.event))

    @classmethod
    def sent(cls, change: Change) -> Witness:
        return cls(change.line, change.t, "client", change.conn, change.kind, change.summary)

    @classmethod
    def answer(cls, change: Change, summary: str | None = None) -> Witness | None:
        if change.answer_line is None or change.answer_t is None:
            return None
        if summary is None:
            if change.status == "rejected":
                err = change.error or {}
                summary = f"error {err.get('code') or err.get('type') or ''}: {err.get('message') or ''}".strip()
            elif change.status == "indeterminate":
                summary = "connection ended before any answer"
            else:
                summary = f"{change.short} confirmed"
        kind = {"rejected": "error", "indeterminate": "connection.closed"}.get(change.status, change.kind)
        direction = "meta" if change.status == "indeterminate" else "server"
        return cls(change.answer_line, change.answer_t, direction, change.conn, kind, summary)

    @classmethod
    def created(cls, item: Item, conn: Connection) -> Witness | None:
        """The client create that asked for `item`, when one did."""
        if item.created_line is None or item.created_t is None:
            return None
        return cls(
            item.created_line, item.created_t, "client", conn.n, "conversation.item.create", f"create {item.label()}"
        )

    @classmethod
    def added(cls, item: Item, conn: Connection) -> Witness:
        return cls(item.added_line, item.added_t, "server", conn.n, "conversation.item.added", f"added {item.label()}")

    @classmethod
    def response_created(cls, resp: Response) -> Witness:
        return cls(
            resp.created_line, resp.created_t, "server", resp.conn, "response.created", f"response {resp.id} created"
        )

    @classmethod
    def response_done(cls, resp: Response) -> Witness | None:
        if resp.done_line is None or resp.done_t is None:
            return None
        return cls(
            resp.done_line,
            resp.done_t,
            "server",
            resp.conn,
            "response.done",
            f"response {resp.id} done ({resp.status})",
        )

    @classmethod
    def closed(cls, conn: Connection) -> Witness | None:
        if conn.closed_line is None or conn.closed_t is None:
            return None
        how = {"closed": "connection closed", "superseded": "next connection began", "trace-end": "trace ends"}
        text = how.get(conn.ended_by or "", "connection ended")
        if conn.close_code is not None:
            text += f" (code {conn.close_code})"
        kind = "connection.closed" if conn.ended_by == "closed" else "trace.end"
        return cls(conn.closed_line, conn.closed_t, "meta", conn.n, kind, text)


@mypyc_attr(native_class=False)  # crosses processes (pickled): a plain class where compiled
@dataclasses.dataclass(frozen=True, slots=True)
class Finding:
    rule: str
    slug: str
    severity: Severity
    conn: int
    #: One line.
    message: str
    #: Plain language, citing lines.
    explanation: str
    witness: tuple[Witness, ...]
    #: Ids involved: `items`, `call_ids`, `responses`, `event_ids`.
    ids: dict[str, tuple[str, ...]]
    fix: str
    #: The line at which the finding became certain.
    at_line: int

    @property
    def lines(self) -> tuple[int, ...]:
        return tuple(sorted({w.line for w in self.witness}))

    @property
    def subject_line(self) -> int:
        """Where a report places the finding: the line its message is about, which a message names as `line N`
        (the first it cites that is a witness line: "deleted at line 45"), else the line at which it became
        certain."""
        witnessed = {w.line for w in self.witness}
        for m in _CITED_LINE.finditer(self.message):
            if int(m.group(1)) in witnessed:
                return int(m.group(1))
        return self.at_line or (self.witness[0].line if self.witness else 1)

    def sort_key(self) -> tuple[int, int, str]:
        return (self.at_line, -SEVERITY_RANK[self.severity], self.rule)


def _threshold(default: float, help: str) -> Any:
    return dataclasses.field(default=default, metadata={"help": help})


@mypyc_attr(native_class=False)  # crosses processes (pickled): a plain class where compiled
@dataclasses.dataclass(frozen=True)
class Config:
    """Thresholds of the rules, declared once: each field is an `analyze` option (`--ack-timeout`, its `help`
    from the field's metadata, a duration), a settings key (`ack-timeout`) and a key of the JSON report."""

    #: Seconds a create/delete/truncate may wait for its answer (LiveKit waits 5 s).
    ack_timeout: float = _threshold(5.0, "How long a create/delete/truncate may wait for its answer.")
    #: Client events closer than this (seconds) belong to one burst (one push computed from one snapshot).
    burst_window: float = _threshold(0.010, "Client changes closer than this are one push (e.g. 10ms).")
    #: Seconds after a `function_call_output` within which the client must ask for a response (LiveKit waits
    #: 10 s for a requested response to start).
    reply_timeout: float = _threshold(10.0, "How soon after a function_call_output a response must be asked.")


#: The thresholds (`Config`'s fields): what `analyze` and the settings file take.
THRESHOLDS = dataclasses.fields(Config)


ConfigT = TypeVar("ConfigT", bound=Config)
#: A rule's handler of one fact class: `(rule, fact, state) -> findings or None`.
Handler = Callable[[Any, Any, TraceState], Iterable[Finding] | None]
_F = TypeVar("_F", bound=Callable[..., Any])


def on(
    *classes: type[Fact],
    kinds: Iterable[str] | None = None,
    items: Iterable[str] | None = None,
    after: Iterable[type[Fact]] | None = None,
) -> Callable[[_F], _F]:
    """Subscribe a rule method to these fact classes: the engine calls `method(fact, state)` for each such fact
    `step` reports, in trace order. Dispatch is by class; the method's `fact` annotation names the same classes
    (tests/test_rules_base.py holds both, and that every class is one `step` reports: `core.facts.FACTS`).

    The rest narrows it to what it does something with, so that the engine never calls it for the rest: `kinds` to
    the facts whose change is one of these client event types (`core.facts.KIND_OF`: the change facts), `items` to
    those about an item of one of these types (`core.facts.ITEM_TYPE_OF`; an item-less fact is none of them), and
    `after` to the facts that come after the first of one of these classes the trace reports (a reconnect rule's
    handlers before any `Reconnected`). The engine reads the kind and the item type once per fact. A narrowing only
    declares what the handler would do nothing with: its own checks stay, and tests/test_rules_base.py calls every
    handler with what it does not take, to see it return nothing and keep its rule as it was."""
    narrowing = Narrowing(
        None if kinds is None else frozenset(kinds),
        None if items is None else frozenset(items),
        None if after is None else frozenset(after),
    )
    if "" in (narrowing.kinds or ()) or "" in (narrowing.items or ()):
        raise ValueError("no change kind or item type is empty")
    if narrowing.after is not None and not narrowing.after:
        raise ValueError("after names no fact class")
    for fact_class in classes:
        if narrowing.kinds is not None and fact_class not in KIND_OF:
            raise TypeError(f"{fact_class.__name__} has no change kind to narrow to (core.facts.KIND_OF)")
        if narrowing.items is not None and fact_class not in ITEM_TYPE_OF:
            raise TypeError(f"{fact_class.__name__} has no item type to narrow to (core.facts.ITEM_TYPE_OF)")

    def mark(method: _F) -> _F:
        _MARKED[method.__qualname__] = (classes, narrowing)
        return method

    return mark


class Narrowing(NamedTuple):
    """What a subscription takes of its fact classes (`on`): the change kinds, the item types, and the fact classes
    one of which must have come first (None: any)."""

    kinds: frozenset[str] | None = None
    items: frozenset[str] | None = None
    after: frozenset[type[Fact]] | None = None

    @property
    def narrows(self) -> bool:
        """Whether it narrows by the kind or the item type (what the engine reads of each fact)."""
        return self.kinds is not None or self.items is not None

    def takes(self, kind: str | None, item_type: str | None) -> bool:
        """Whether a fact whose change kind and item type are these is for the handler."""
        return (self.kinds is None or kind in self.kinds) and (self.items is None or item_type in self.items)

    def awake(self, seen: Set[type[Fact]]) -> bool:
        """Whether the handler takes facts once the trace reported facts of the classes `seen`."""
        return self.after is None or not self.after.isdisjoint(seen)


class Subscription(NamedTuple):
    """One handler of a rule instance and what it takes: `handler(fact, state)` for each fact of class `fact`
    that `narrowing` takes."""

    fact: type[Fact]
    handler: Callable[[Any, TraceState], Iterable[Finding] | None]
    narrowing: Narrowing


#: The handlers `on` marked whose class is still being made, by qualified name (`Rule.__init_subclass__` takes its
#: own). A table rather than attributes on the method: a compiled method (setup.py) takes none.
_MARKED: dict[str, tuple[tuple[type[Fact], ...], Narrowing]] = {}
#: Each rule class's own marked handlers: method name -> (fact classes, narrowing).
_OWN: dict[type, dict[str, tuple[tuple[type[Fact], ...], Narrowing]]] = {}
_ANY = Narrowing()


#: What a capture may lack, and what a rule then cannot judge: the client's reconnect replay (a log, which is written
#: past it), the output audio bytes (a log of the deltas without payloads), the input audio appends.
NEEDS = {
    "reconnect-replay": "what a reconnect replayed",
    "output-audio-bytes": "how much output audio an item received",
    "input-audio": "the input audio appends",
    "timestamps": "when each event happened (timeouts, bursts, ages)",
}


@mypyc_attr(allow_interpreted_subclasses=True)  # a rule of the user's own, or a test's, when compiled (setup.py)
class Rule(Generic[ConfigT]):
    """Base class. A rule's docstring is its user documentation (`rtrace rules SLUG`).

    A rule is a small fold of its own: it subscribes methods to fact classes with `@on(...)`, keeps what it needs
    between facts (and prunes what is resolved), and returns findings as data. `finish` runs once at the end.
    """

    id: ClassVar[str]
    slug: ClassVar[str]
    severity: ClassVar[Severity]
    #: One line: what the finding means.
    title: ClassVar[str]
    #: The likely fix, one or two sentences.
    fix: ClassVar[str]
    #: What the rule must see to judge, of what a capture may lack (`NEEDS`): a trace that says it lacks one (a
    #: connection opened with `"replay_visible": false`, a header's `unseen`) has the rule report nothing it cannot
    #: judge, and the report says so (`engine.fold.blind_notes`).
    needs: ClassVar[tuple[str, ...]] = ()
    #: Fact class -> names of the methods subscribed to it (collected from `@on` when the class is made).
    subscriptions: ClassVar[dict[type[Fact], tuple[str, ...]]] = {}
    #: Method name -> what it takes of the facts it is subscribed to (`on(kinds=..., items=...)`).
    narrowings: ClassVar[dict[str, Narrowing]] = {}

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        subs: dict[type[Fact], tuple[str, ...]] = {}
        narrowings: dict[str, Narrowing] = {}
        prefix = f"{cls.__qualname__}."
        mine = [key for key in _MARKED if key.startswith(prefix) and "." not in key[len(prefix) :]]
        marks = {key[len(prefix) :]: _MARKED.pop(key) for key in mine}
        _OWN[cls] = {name: marks[name] for name in vars(cls) if name in marks}
        for klass in reversed(cls.__mro__):
            for name, (classes, narrowing) in _OWN.get(klass, {}).items():
                for fact_class in classes:
                    if name not in subs.get(fact_class, ()):
                        subs[fact_class] = (*subs.get(fact_class, ()), name)
                narrowings[name] = narrowing
        cls.subscriptions = subs
        cls.narrowings = narrowings

    def __init__(self, config: ConfigT) -> None:
        self.config = config

    def handlers(self) -> Iterator[tuple[type[Fact], Callable[[Any, TraceState], Iterable[Finding] | None]]]:
        """(fact class, bound handler) for each subscription."""
        for fact_class, names in self.subscriptions.items():
            for name in names:
                yield fact_class, getattr(self, name)

    def subscribed(self) -> Iterator[Subscription]:
        """Each handler with its fact class and what it takes of it (`on`), in the order of `handlers`."""
        for fact_class, names in self.subscriptions.items():
            for name in names:
                yield Subscription(fact_class, getattr(self, name), self.narrowings.get(name, _ANY))

    def finish(self, state: TraceState) -> Iterable[Finding] | None:
        """Called once at the end of the trace, after every connection has ended."""
        return None

    @classmethod
    def doc(cls) -> str:
        """The rule's manual: its docstring, read from its source where the class is compiled (mypyc keeps none)."""
        doc = getattr(cls, "__doc__", None) or _source_doc(getattr(cls, "__module__", ""), cls.__qualname__)
        return inspect.cleandoc(doc)

    def finding(
        self,
        conn: int,
        message: str,
        explanation: str,
        witness: Sequence[Witness | None],
        at_line: int,
        severity: Severity | None = None,
        **ids: Iterable[str | None],
    ) -> Finding:
        """A finding of this rule; `severity` overrides the rule's own for this one (a rule whose evidence can be
        weaker or stronger, e.g. `orphaned-generation` with or without the client's own annotations)."""
        seen: dict[int, Witness] = {}
        for w in witness:
            if w is not None and w.line not in seen:
                seen[w.line] = w
        return Finding(
            rule=self.id,
            slug=self.slug,
            severity=severity or self.severity,
            conn=conn,
            message=message,
            explanation=explanation,
            witness=tuple(sorted(seen.values(), key=lambda w: w.line)),
            ids={k: tuple(dict.fromkeys(v for v in vals if v)) for k, vals in ids.items()},
            fix=self.fix,
            at_line=at_line,
        )


#: The class docstrings of each module read from its source, by qualified name (`_source_doc`).
_DOCS: dict[str, dict[str, str]] = {}


def _source_doc(module: str, qualname: str) -> str:
    """The docstring of class `qualname` in the source file of `module` (beside its compiled file), "" if none. Each
    source is parsed once, for all its classes: the SARIF report asks for every rule's."""
    docs = _DOCS.get(module)
    if docs is None:
        docs = _DOCS[module] = {}
        file = getattr(sys.modules.get(module), "__file__", None)
        if file:
            path = Path(file)
            try:
                tree = ast.parse(path.with_name(path.name.split(".")[0] + ".py").read_bytes())
            except (OSError, SyntaxError, ValueError):
                tree = ast.Module(body=[], type_ignores=[])
            _class_docs(tree.body, "", docs)
    return docs.get(qualname, "")


def _class_docs(nodes: list[ast.stmt], prefix: str, out: dict[str, str]) -> None:
    """Each class among `nodes` (and the classes inside them) with its docstring, by qualified name, into `out`."""
    for node in nodes:
        if isinstance(node, ast.ClassDef):
            out[prefix + node.name] = ast.get_docstring(node, clean=False) or ""
            _class_docs(node.body, f"{prefix}{node.name}.", out)


def injected(answer: Record, change: Change, state: TraceState) -> bool:
    """Whether `answer` (the record that answered `change`) is an answer a fault injected (`core.facts.
    FaultInjected`): the fault speaking, not the server's verdict on the change. Never on a real server's trace."""
    conn = state.conns.get(change.conn)
    return conn is not None and conn.injected_line == answer.line


def ms(seconds: float) -> str:
    """A duration for people: `1.7 ms`, `50 ms`, `2.31 s`."""
    value = seconds * 1000
    if abs(value) < 10:
        return f"{value:.1f} ms"
    if abs(value) < 1000:
        return f"{value:.0f} ms"
    return f"{seconds:.2f} s"


def as_json(finding: Finding) -> dict[str, Any]:
    return {
        "rule": finding.rule,
        "slug": finding.slug,
        "severity": finding.severity,
        "conn": finding.conn,
        "message": finding.message,
        "explanation": finding.explanation,
        "lines": list(finding.lines),
        "at_line": finding.at_line,
        "ids": {k: list(v) for k, v in sorted(finding.ids.items()) if v},
        "witness": [dataclasses.asdict(w) for w in finding.witness],
        "fix": finding.fix,
    }


class Burst:
    """One burst: a run of a connection's client changes each sent within the window of the previous one (one push
    computed from one snapshot). It keeps what the rules read of it, not every change: its size, its first seq, when
    it last grew, the first creates in it (each item id at most `_COPIES` times, until `_IDS` distinct ids: that
    holds the first three creates of any id other than a given one, see `creates_besides`), and with `ids` the item
    ids of the creates in it that were answered while it was the current burst (`Bursts.answered`): with the creates
    still pending, which its connection's `Pending` holds, they say which ids it creates (`creates`). A burst of
    200,000 pipelined creates costs a few changes, not 200,000, and no id while they wait."""

    __slots__ = ("_counts", "changes", "creates", "first", "ids", "last_t")

    _IDS = 4
    _COPIES = 3

    def __init__(self, ids: bool, first: int = 0) -> None:
        #: Changes in it, the seq of the first, and the time of the latest.
        self.changes = 0
        self.first = first
        self.last_t = 0.0
        #: The first creates (see above), in order.
        self.creates: list[Change] = []
        self._counts: dict[str | None, int] = {}
        #: The item ids of the creates in it answered so far, when asked for.
        self.ids: set[str] | None = set() if ids else None

    def __len__(self) -> int:
        return self.changes

    def add(self, change: Change) -> None:
        self.changes += 1
        self.last_t = change.t
        if change.kind != "conversation.item.create":
            return
        counts = self._counts
        seen = counts.get(change.item_id, 0)
        if (seen or len(counts) < self._IDS) and seen < self._COPIES:
            counts[change.item_id] = seen + 1
            self.creates.append(change)

    def creates_besides(self, item_id: str | None) -> list[Change]:
        """The first three creates in the burst whose item id is not `item_id`, in order (all of them when fewer).

        Exact: a create among those three either has an id seen fewer than three times before it (else three
        earlier ones come first), or comes before the burst's fourth distinct id (else three other ids come
        first); `add` keeps both kinds."""
        return [c for c in self.creates if c.item_id != item_id][:3]

    def creates_id(self, item_id: str, conn: Connection) -> bool:
        """Whether a create in it so far carries `item_id` (it keeps `ids`; `conn` is its connection, and the
        burst is its current one): answered (`ids`), or still pending."""
        assert self.ids is not None
        if item_id in self.ids:
            return True
        return any(c.seq >= self.first for c in conn.pending.about("conversation.item.create", item_id))


class Bursts:
    """Groups each connection's client changes into bursts (`Burst`): runs of changes each sent within `window`
    seconds of the previous one. With `ids`, each burst keeps the item ids of its answered creates, which a
    subscriber to `ChangeAnswered` tells `answered`."""

    def __init__(self, window: float, ids: bool = False) -> None:
        self.window = window
        self.ids = ids
        self._current: dict[int, Burst] = {}

    def forget(self, conn: int) -> None:
        """`conn` ended: its burst is over."""
        self._current.pop(conn, None)

    def add(self, change: Change) -> Burst:
        """Record a sent change; return the burst it belongs to (live: later changes may join it)."""
        burst = self._current.get(change.conn)
        if burst is None or change.t - burst.last_t > self.window:
            burst = Burst(self.ids, change.seq)
            self._current[change.conn] = burst
        burst.add(change)
        return burst

    def answered(self, change: Change, conn: Connection) -> None:
        """A change of `conn` was answered (`ChangeAnswered`): a create of its current burst keeps its item id there
        (`Burst.ids`), the pending one gone: the string of the item the conversation holds under that id when it
        does, which lives on with it (the change's goes with the change)."""
        burst = self._current.get(change.conn)
        item_id = change.item_id
        if (
            burst is not None
            and burst.ids is not None
            and change.kind == "conversation.item.create"
            and item_id is not None
            and change.seq >= burst.first
        ):
            held = conn.conv.items.get(item_id)
            burst.ids.add(item_id if held is None else held.id)


ITEM_CHANGES = ("conversation.item.create", "conversation.item.delete", "conversation.item.truncate")
