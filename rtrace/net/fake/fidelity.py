"""The differential check of the fake endpoint against recordings of the real server (`make fidelity`).

A recorded session with client events is replayed into a fresh `EndpointConnection` (the sans-I/O endpoint, its
pauses skipped): each client event goes in as recorded, its ids mapped to the ones this endpoint gave (the k-th
real `item.id` of an event type is the endpoint's k-th, and so on), and what comes out is compared with what the
real server sent:

- order: after each client action (a run of client events; an audio stream counts as one action), the server's
  event types, consecutive equal types and runs of deltas folded into one, aligned with `difflib`;
- shapes: for each event type both sent, every field path (`[]` for any array index) with its JSON types;
- ids: the shape of each id (`item_` + 21 letters and digits);
- values: the session of `session.created` and the first `session.updated`, and every `error`, field by field.

Every difference found is looked up in `KNOWN`, the table of differences that stay, each with the reason it is
kept; one not in the table is unexplained (the check fails), and an entry that matched nothing is stale (so is the
check: a fixed difference leaves the table). Pure: records in, differences out; `bench/fidelity.py` reads the
files and prints.
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from .endpoint import EndpointConnection, EndpointOptions
from .ids import learn_by_type, remap
from .schema import json_type
from .wire import Emission

Event = dict[str, Any]
#: (dir, event) as a trace holds it: "client" or "server".
Record = tuple[str, Event]

#: Subtrees whose keys are the user's, not the protocol's (a tool's JSON schema, metadata): only their type counts.
OPAQUE_KEYS = frozenset({"parameters", "metadata"})
#: Fields whose values are compared in these events (the rest of their values are the model's words).
VALUE_EVENTS = ("session.created", "session.updated", "error")
#: Paths never compared by value (an id is compared by shape; a time by type).
NOT_VALUES = frozenset({"session.id", "session.expires_at", "event_id"})


@dataclasses.dataclass(frozen=True, order=True)
class Difference:
    """One way the endpoint's answers differ from the recording's.

    `kind`: `missing` (an event the real server sent after `where`, the endpoint did not), `extra` (the other way),
    `missing-field`, `extra-field`, `json-type`, `id-shape` or `value`; `event_type` and `path` say where; `real`
    and `serve` what each side had."""

    kind: str
    event_type: str
    path: str
    real: str
    serve: str
    case: str = ""
    where: str = ""

    def line(self) -> str:
        at = f" {self.path}" if self.path else ""
        where = f" after {self.where}" if self.where else ""
        return f"{self.kind} {self.event_type}{at}{where}: real {self.real} / serve {self.serve}"


@dataclasses.dataclass(frozen=True)
class Known:
    """A difference that stays: `kind`, and `fnmatch` patterns of the event type, the path, the client action it
    follows and the case; `reason` is why it is kept."""

    kind: str
    event_type: str
    path: str
    reason: str
    where: str = "*"
    case: str = "*"

    def matches(self, d: Difference) -> bool:
        return (
            self.kind == d.kind
            and fnmatch.fnmatchcase(d.event_type, self.event_type)
            and fnmatch.fnmatchcase(d.path, self.path)
            and fnmatch.fnmatchcase(d.where, self.where)
            and fnmatch.fnmatchcase(d.case, self.case)
        )


_RATE = (
    "rate limits: serve sends `rate_limits.updated` after each `response.done`; the real server did not in one "
    "recorded session (tool-call-round.c has none)"
)
_TRANSCRIBE = (
    "input transcription timing: both servers transcribe while the answer streams, deltas interleaved with the "
    "answer's and completing mid-response; serve puts one after each of the answer's first deltas, the real "
    "server where its transcription model happens to be"
)
_REASONING = (
    "reasoning tokens: the 2.1 models report `reasoning_tokens` only when they reasoned (a response of "
    "text-and-tool-one-response has none); serve's model does not reason, so its usage never has them"
)

#: The differences that stay, each with why.
KNOWN: tuple[Known, ...] = (
    Known("value", "session.*", "session.instructions", "the real default instructions are OpenAI's prompt text"),
    Known("count", "rate_limits.updated", "", _RATE, case="*tool-call-round.c*"),
    Known("count", "conversation.item.input_audio_transcription.*", "", _TRANSCRIBE, case="*server-vad*"),
    Known("position", "conversation.item.input_audio_transcription.*", "*", _TRANSCRIBE),
    Known("missing", "deltas{*}", "", _TRANSCRIBE, "input_audio_buffer.append", "*server-vad*"),
    Known("extra", "deltas{*}", "", _TRANSCRIBE, "input_audio_buffer.append", "*server-vad*"),
    Known("missing", "deltas{*}", "", _TRANSCRIBE, "input_audio_buffer.append", "*idle-timeout*"),
    Known("extra", "deltas{*}", "", _TRANSCRIBE, case="*idle-timeout*"),
    Known("missing-field", "response.done", "response.usage.output_token_details.reasoning_tokens", _REASONING),
)


# -- the endpoint's side -----------------------------------------------------------------------------------


def _run(conn: EndpointConnection, out: list[Emission], idle: list[int]) -> list[tuple[bool, Event]]:
    """(ahead, event) of `out`, wakes of responses run at once (their pauses skipped), and of the idle timeout
    while `idle[0]` (how many the recording shows) allows; the session's expiry never wakes here."""
    events: list[tuple[bool, Event]] = []
    for em in out:
        if em.event is not None:
            events.append((em.ahead, em.event))
        elif isinstance(em.wake, tuple) and em.wake and em.wake[0] == "run":
            events.extend(_run(conn, conn.wake(em.wake), idle))
        elif isinstance(em.wake, tuple) and em.wake and em.wake[0] == "idle" and idle[0] > 0:
            idle[0] -= 1
            events.extend(_run(conn, conn.wake(em.wake), idle))
    return events


def options_for(records: Sequence[Record]) -> EndpointOptions:
    """The endpoint's options for a recorded session: its model, the transcripts the real server made of the
    user's audio, the tool it called (so the default script calls it too), the sideband mode when the socket got no
    `session.created`, and ids shaped as the real ones."""
    model = "gpt-realtime"
    transcripts: list[str] = []
    tool: str | None = None
    for direction, ev in records:
        if direction != "server":
            continue
        etype = ev.get("type")
        session = ev.get("session")
        if etype in ("session.created", "session.updated") and isinstance(session, dict):
            model = str(session.get("model") or model)
        elif etype == "conversation.item.input_audio_transcription.completed":
            transcripts.append(str(ev.get("transcript") or ""))
        elif etype == "response.output_item.added" and tool is None:
            item = ev.get("item")
            if isinstance(item, dict) and item.get("type") == "function_call":
                tool = str(item.get("name"))
    first = next((ev.get("type") for d, ev in records if d == "server"), None)
    sideband = first not in (None, "session.created")  # a WebRTC call's sideband socket: the call made the session
    return EndpointOptions(model=model, transcript=transcripts, tool=tool, sideband=sideband, real_ids=True)


def serve_session(records: Sequence[Record], options: EndpointOptions | None = None) -> list[Record]:
    """The recorded client events fed to a fresh endpoint, interleaved with its answers (client events as sent,
    after their ids were mapped to the endpoint's). Client events the recording shows sent together (no server
    event between them) are a burst, as on a socket with latency: an `ahead` answer (a schema error) goes before
    the burst's answers to earlier events."""
    conn = EndpointConnection(1, options or options_for(records))
    idle = [sum(1 for d, ev in records if d == "server" and ev.get("type") == "input_audio_buffer.timeout_triggered")]
    out: list[Record] = [("server", ev) for _, ev in _run(conn, conn.open(), idle)]
    real_so_far: list[Event] = []
    ids: dict[str, str] = {}
    waiting: list[Record] = []  # the burst's answers, not yet out
    ahead = 0
    for direction, ev in records:
        if direction == "server":
            real_so_far.append(ev)
            out.extend(waiting)
            waiting, ahead = [], 0
            continue
        learn_by_type(real_so_far, [e for d, e in [*out, *waiting] if d == "server"], ids)
        sent = remap(ev, ids)
        out.append(("client", sent))
        for first, answer in _run(conn, conn.receive(sent), idle):
            if first:
                waiting.insert(ahead, ("server", answer))
                ahead += 1
            else:
                waiting.append(("server", answer))
    out.extend(waiting)
    return out


# -- order ---------------------------------------------------------------------------------------------------


def _tokens(records: Iterable[Record]) -> list[tuple[str, str]]:
    """(token, action) per server event: its type, runs of one type folded, runs of deltas folded into
    `deltas{...}`; `action` is the client action before it (an audio stream is one action)."""
    out: list[tuple[str, str]] = []
    action = "open"
    deltas: set[str] = set()

    def flush() -> None:
        if deltas:
            out.append(("deltas{" + ",".join(sorted(deltas)) + "}", action))
            deltas.clear()

    for direction, ev in records:
        etype = str(ev.get("type"))
        if direction == "client":
            if etype != action:
                flush()
                action = etype
            continue
        if etype.endswith(".delta"):
            deltas.add(etype)
            continue
        flush()
        if out and out[-1][0] == etype:
            continue
        out.append((etype, action))
    flush()
    return out


#: Server events the real server sends on its own clock (a transcription, the rate limits): their place among the
#: others depends on timing, so they are left out of the alignment and compared by count and by what precedes.
ASYNC_EVENTS = ("conversation.item.input_audio_transcription.", "rate_limits.updated")


def _is_async(token: str) -> bool:
    return token.startswith(ASYNC_EVENTS) or (
        token.startswith("deltas{") and all(t.startswith(ASYNC_EVENTS) for t in token[7:-1].split(","))
    )


def async_differences(real: Sequence[Record], serve: Sequence[Record]) -> list[Difference]:
    """Each asynchronous event type: how many runs of it each side sent, and the events it followed (kind
    `position`, `path` the event before it that only one side shows)."""
    sides = []
    for records in (real, serve):
        counts: dict[str, int] = defaultdict(int)
        after: dict[str, set[str]] = defaultdict(set)
        last = "open"
        for token, _ in _tokens(records):
            for t in token[7:-1].split(",") if token.startswith("deltas{") else [token]:
                if t.startswith(ASYNC_EVENTS):
                    counts[t] += 1
                    after[t].add(last)
            if not _is_async(token):
                last = token
        sides.append((counts, after))
    (ca, aa), (cb, ab) = sides
    out: list[Difference] = []
    for t in sorted(set(ca) | set(cb)):
        if ca[t] != cb[t]:
            out.append(Difference("count", t, "", str(ca[t]), str(cb[t])))
        if ca[t] and cb[t]:
            for before in sorted(ab[t] - aa[t]):
                out.append(Difference("position", t, before, "/".join(sorted(aa[t])), "after " + before))
    return out


def order_differences(real: Sequence[Record], serve: Sequence[Record]) -> list[Difference]:
    """The server events one side sent and the other did not, or in another order: `difflib`'s alignment of the
    two sides' server events (so an answer that came one client event later on the real server, its responses
    taking seconds, is not a difference), each named with the client action before it."""
    a = [(t, w) for t, w in _tokens(real) if not _is_async(t)]
    b = [(t, w) for t, w in _tokens(serve) if not _is_async(t)]
    matcher = difflib.SequenceMatcher(None, [t for t, _ in a], [t for t, _ in b], autojunk=False)
    out: list[Difference] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        for token, action in a[i1:i2]:
            out.append(Difference("missing", token, "", "sent", "not sent", where=action))
        for token, action in b[j1:j2]:
            out.append(Difference("extra", token, "", "not sent", "sent", where=action))
    return out


# -- shapes, ids, values -------------------------------------------------------------------------------------

_ID_KEY = re.compile(r"(^|_)id$")


def id_shape(value: str) -> str:
    """`item_Dz2piXGFPhsEX41kr8w86` -> `item_<alnum 21>`; `event_fd8cb17ab18a4a3f` -> `event_<hex 16>`."""
    prefix, sep, rest = value.partition("_")
    if not sep:
        prefix, rest = "", value
    if not rest:
        kind = "empty"
    elif re.fullmatch(r"[0-9a-f]+", rest):
        kind = "hex"
    elif re.fullmatch(r"[A-Za-z0-9]+", rest):
        kind = "alnum"
    else:
        kind = re.sub(r"[A-Za-z0-9]+", lambda m: f"<{len(m.group())}>", rest)
        return f"{prefix}{sep}{kind}"
    return f"{prefix}{sep}<{kind} {len(rest)}>"


def walk(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, value) of every field under `value`, arrays as `[]`; opaque subtrees only as themselves."""
    yield path, value
    key = path.rsplit(".", 1)[-1]
    if key in OPAQUE_KEYS:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            yield from walk(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for v in value:
            yield from walk(v, f"{path}[]")


Shapes = dict[str, dict[str, set[str]]]


def shapes(records: Iterable[Record]) -> tuple[Shapes, Shapes]:
    """Per server event type: every path's JSON types, and every id path's id shapes."""
    types: Shapes = defaultdict(lambda: defaultdict(set))
    idents: Shapes = defaultdict(lambda: defaultdict(set))
    for direction, ev in records:
        if direction != "server":
            continue
        etype = str(ev.get("type"))
        for path, value in walk(ev):
            if not path or path == "type":
                continue
            types[etype][path].add(json_type(value))
            if isinstance(value, str) and _ID_KEY.search(path.rsplit(".", 1)[-1]) and value:
                idents[etype][path].add(id_shape(value))
    return types, idents


def shape_differences(real: Iterable[Record], serve: Iterable[Record]) -> list[Difference]:
    """Fields, JSON types and id shapes of the event types both sides sent."""
    real_types, real_ids = shapes(real)
    serve_types, serve_ids = shapes(serve)
    out: list[Difference] = []
    for etype in sorted(set(real_types) & set(serve_types)):
        a, b = real_types[etype], serve_types[etype]
        for path in sorted(set(a) | set(b)):
            if path not in b:
                out.append(Difference("missing-field", etype, path, "/".join(sorted(a[path])), "absent"))
            elif path not in a:
                out.append(Difference("extra-field", etype, path, "absent", "/".join(sorted(b[path]))))
            elif b[path] - a[path]:
                out.append(Difference("json-type", etype, path, "/".join(sorted(a[path])), "/".join(sorted(b[path]))))
        for path in sorted(set(real_ids[etype]) & set(serve_ids[etype])):
            if serve_ids[etype][path] - real_ids[etype][path]:
                shown = ("|".join(sorted(x[etype][path])) for x in (real_ids, serve_ids))
                out.append(Difference("id-shape", etype, path, *shown))
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def value_differences(real: Sequence[Record], serve: Sequence[Record]) -> list[Difference]:
    """Field values of the first `session.created` and `session.updated` and of every `error`, k-th to k-th."""
    out: list[Difference] = []
    for etype in VALUE_EVENTS:
        a = [ev for d, ev in real if d == "server" and ev.get("type") == etype]
        b = [ev for d, ev in serve if d == "server" and ev.get("type") == etype]
        if etype != "error":
            a, b = a[:1], b[:1]
        for x, y in zip(a, b, strict=False):
            xs = {p: v for p, v in walk(x) if not isinstance(v, dict | list) or p.rsplit(".", 1)[-1] in OPAQUE_KEYS}
            ys = {p: v for p, v in walk(y) if not isinstance(v, dict | list) or p.rsplit(".", 1)[-1] in OPAQUE_KEYS}
            for path in sorted(set(xs) & set(ys)):
                if path in NOT_VALUES or (path.endswith("[]") and not path.endswith(("tools[]", "include[]"))):
                    continue
                if _ID_KEY.search(path.rsplit(".", 1)[-1]) and isinstance(xs[path], str):
                    continue
                if xs[path] != ys[path]:
                    out.append(Difference("value", etype, path, _short(xs[path]), _short(ys[path])))
    return out


# -- the check -----------------------------------------------------------------------------------------------


def has_client_events(records: Iterable[Record]) -> bool:
    return any(d == "client" for d, _ in records)


def _until_the_recording_ends(real: Sequence[Record], served: list[Record]) -> list[Record]:
    """`served` without what it sent on its own clock after the recording's last server event (the client closed
    the socket there: a `rate_limits.updated` after the last `response.done` was never recorded)."""
    last = next((str(ev.get("type")) for d, ev in reversed(real) if d == "server"), None)
    if last != "response.done":
        return served
    end = len(served)
    while end and served[end - 1][0] == "server" and str(served[end - 1][1].get("type")).startswith(ASYNC_EVENTS):
        end -= 1
    return served[:end]


@dataclasses.dataclass
class CaseResult:
    case: str
    differences: list[Difference]


def compare(case: str, records: Sequence[Record], options: EndpointOptions | None = None) -> CaseResult:
    """Every difference between a recorded session and the endpoint fed its client events."""
    served = _until_the_recording_ends(records, serve_session(records, options))
    found = [
        *order_differences(records, served),
        *async_differences(records, served),
        *shape_differences(records, served),
        *value_differences(records, served),
    ]
    return CaseResult(case, sorted({dataclasses.replace(d, case=case) for d in found}))


@dataclasses.dataclass
class Verdict:
    """The differences of all cases, each with the `Known` entry that explains it (None: unexplained), and the
    entries that explained nothing."""

    explained: list[tuple[Difference, Known]]
    unexplained: list[Difference]
    stale: list[Known]

    @property
    def ok(self) -> bool:
        return not self.unexplained and not self.stale


def judge(results: Iterable[CaseResult], known: Sequence[Known] = KNOWN) -> Verdict:
    explained: list[tuple[Difference, Known]] = []
    unexplained: list[Difference] = []
    used: set[int] = set()
    for result in results:
        for d in result.differences:
            entry = next((i for i, k in enumerate(known) if k.matches(d)), None)
            if entry is None:
                unexplained.append(d)
            else:
                used.add(entry)
                explained.append((d, known[entry]))
    stale = [k for i, k in enumerate(known) if i not in used]
    return Verdict(explained, unexplained, stale)


__all__ = [
    "KNOWN",
    "CaseResult",
    "Difference",
    "Known",
    "Verdict",
    "compare",
    "judge",
    "serve_session",
]
