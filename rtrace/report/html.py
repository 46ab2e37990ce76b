"""The one-file HTML report: timeline, findings linked to their witness events, and a step-through view.

The page data of a trace comes from the fold of the analysis itself (`engine.fold.Fold`'s observer hook), in one
pass: compact event columns (no payloads), and per connection what changed at each event that changed something,
as operations the page replays (`TraceData`). An operation is cheap to make from the facts `reducer.step`
reports: an item inserted after another, removed or changed; a pending client change added or answered; a local
snapshot. The page replays them per connection (keeping a copy of the state every max(64, its size) operations,
so a jump back costs a copy and a bounded replay) and derives the client view and the divergence of the state it
rebuilds, only for the event shown, by the rules of `core.state` (report.js mirrors `client_view`,
`Connection.expected_ids` / `expected_item` and `divergence`; tests/test_report_html.py holds the page to the
fold at every event, in Python and in Chromium).

All trace text is untrusted: it travels only as JSON inside `<script type="application/json">` (with `<`, `>`, `&`,
U+2028/2029 escaped), or deflated and base64-encoded in it when large, and the page writes it with `textContent`.
No network: CSS and JS are inlined.
"""

from __future__ import annotations

import array
import base64
import hashlib
import html
import os
import zlib
from collections.abc import Iterable, Iterator, Sequence
from importlib import resources
from typing import Any, Final

import orjson

from .. import __version__
from ..core.conversation import Item
from ..core.describe import DESCRIBED, describe
from ..core.escape import json_visible
from ..core.facts import (
    ChangeAnswered,
    ChangeSent,
    ConnClosed,
    ConnOpened,
    Fact,
    ItemAdded,
    ItemDeleted,
    ItemDone,
    ItemTruncated,
    ItemUpdated,
    LocalSnapshot,
)
from ..core.loader import DEFAULT_MAX_LINE_BYTES, Row, TraceReader, UnreadableInput
from ..core.secrets import scrub_text
from ..core.state import Change, Connection, TraceState
from ..engine.fold import Fold, Observer, Report, TraceReport
from ..rules.base import Config, Rule, as_json
from .excerpt import read_lines, scrub

#: Times are stored as integer steps of this many seconds (0.1 ms).
TIME_UNIT: Final = 1e-4
SUMMARY_CHARS: Final = 140
ITEM_TEXT_CHARS: Final = 80
#: A trace's page data larger than this (JSON bytes) is embedded deflated (zlib) and base64-encoded; the page
#: inflates it with the browser's `DecompressionStream`.
COMPRESS_OVER: Final = 256 * 1024
#: Entries of each memo of `TraceData` (item entries, scrubbed summaries) before it starts again.
MEMO_SIZE: Final = 1 << 12

# The operations of `TraceData.states`: each entry is one flat list of integers, the event's index, the connection,
# then the operations, each an opcode and its arguments.
# Items are indexes into `items` ([id index, label, text]), ids into `ids`, pending changes into `pending`.
#: `INSERT k after`: the server conversation gets item k after the item of id index `after` (-1: first).
INSERT: Final = 0
#: `REMOVE id`: the item of that id leaves the server conversation.
REMOVE: Final = 1
#: `REPLACE k`: the item of k's id is now shown as k (its text, copies or arguments changed).
REPLACE: Final = 2
#: `PEND p`: client change p is pending (after those already pending).
PEND: Final = 3
#: `ANSWER p`: client change p is no longer pending (answered, or indeterminate).
ANSWER: Final = 4
#: `LOCAL n k1..kn`: the client's latest local snapshot (`local.conversation`): these items, in its order.
LOCAL: Final = 5
#: `RESET`: a new connection under this ordinal: nothing in it yet.
RESET: Final = 6
#: `SERVER n k1..kn`: the server conversation is these items (a resync; see `TraceData._resync`).
SERVER: Final = 7
#: `PENDING n p1..pn`: these client changes are pending (a resync).
PENDING: Final = 8

#: Pending change kinds, as the page's client view needs them (`Connection.expected_ids`).
_KIND_CODES: Final = {"conversation.item.create": 1, "conversation.item.delete": 2}
#: `previous_item_id` of a pending create: none given (-1), or the start of the conversation.
NO_ID: Final = -1
ROOT: Final = -2


class _Interner:
    """Values by first use: each gets the index of its first appearance."""

    def __init__(self) -> None:
        self.index: dict[Any, int] = {}
        self.values: list[Any] = []

    def __call__(self, value: Any) -> int:
        k = self.index.get(value)
        if k is None:
            k = self.index[value] = len(self.values)
            self.values.append(value)
        return k


class _JsonArray:
    """A JSON array written as it grows: bytes, not a list of Python objects (a few times less memory)."""

    __slots__ = ("buf", "count")

    def __init__(self) -> None:
        self.buf = bytearray(b"[")
        self.count = 0

    def append(self, value: Any) -> int:
        """Add `value`; its index."""
        if self.count:
            self.buf += b","
        self.buf += orjson.dumps(value)
        self.count += 1
        return self.count - 1

    def __len__(self) -> int:
        return self.count

    def fragment(self) -> orjson.Fragment:
        return orjson.Fragment(bytes(self.buf) + b"]")


class _Shown:
    """What the page holds of one connection after the operations emitted so far: the item entry of each id in
    its server conversation, and its pending changes by seq (entry index). No order: that is the fold's."""

    __slots__ = ("conn", "items", "pending")

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.items: dict[str, int] = {}
        self.pending: dict[int, int] = {}


class _Touched:
    """What the facts of one record touched on one connection."""

    __slots__ = ("changes", "items", "local")

    def __init__(self) -> None:
        self.items: dict[str, None] = {}
        self.changes: dict[int, Change] = {}
        self.local: list[Item] | None = None


class TraceData:
    """Everything the page needs about one trace, built in the fold that analyzes it: `observe` is its observer
    (`engine.fold.Observer`). Each record costs O(1) plus the items and changes its facts name."""

    def __init__(self) -> None:
        self.kinds = _Interner()
        self.ids = _Interner()
        #: Item entries [id index, label, text] and pending changes (see `_change`), by index. Not interned: an
        #: item shown again unchanged soon after reuses its entry (`_entries`), a change is shown once.
        self.items = _JsonArray()
        self.pending = _JsonArray()
        #: Per event: the time since the one before, in `TIME_UNIT`s, and its (direction, type) in `kinds`.
        self.t = array.array("q")
        self.k = array.array("l")
        self.conn_runs: list[list[int]] = []
        self.line_jumps: list[list[int]] = []
        #: The events that have a summary (each as the gap from the one before: small numbers deflate well).
        self.summary_at = array.array("q")
        self.summary = _JsonArray()
        #: [event index, connection, *operations] for each event that changed what the page shows of a connection.
        self.states = _JsonArray()
        #: Operations emitted, and resyncs needed (facts that did not say everything: 0 when the reducer is right).
        self.ops = 0
        self.resyncs = 0
        self._shown: dict[int, _Shown] = {}
        #: Item content -> its entry, and summary -> scrubbed: recent ones (an item is shown again when its create
        #: is acknowledged and when it is done; a replay describes the same items again). Cleared when full.
        self._entries: dict[tuple[Any, ...], int] = {}
        self._scrubbed: dict[str, str] = {}
        #: Item text -> scrubbed, recent ones (a conversation repeats its phrases; labels, with ids, do not).
        self._texts: dict[str, str] = {}
        self._t0: float | None = None
        #: The observer of the fold (`engine.fold.Observer`): records the event, then what its facts changed.
        self.observe = self._observer()

    # -- the observer -------------------------------------------------------------------------------------

    def _observer(self) -> Observer:
        """`observe`: a closure, as it runs once per record of the trace."""
        t_out, k_out, runs, jumps = self.t.append, self.k.append, self.conn_runs.append, self.line_jumps.append
        summary_at, summary_out = self.summary_at.append, self.summary.append
        kind_index: dict[str, dict[str, int]] = {}
        kinds, changed, described, unit, scrubbed = self.kinds, self._changed, DESCRIBED, TIME_UNIT, self._scrubbed
        scrub_summary = self._summary
        t0: float | None = None
        prev_t, prev_line, prev_conn, prev_summary = 0, 0, -1, 0

        def observe(row: Row, facts: Sequence[Fact], state: TraceState) -> None:
            nonlocal t0, prev_t, prev_line, prev_conn, prev_summary
            index, line, t, direction, conn, event, etype, _ = row
            if t0 is None:
                t0 = self._t0 = t
            x = (t - t0) / unit
            ticks = round(x) if -1e13 < x < 1e13 else (10**13 if x > 0 else -(10**13))  # absurd `t`s stay in range
            t_out(ticks - prev_t)
            prev_t = ticks
            by_type = kind_index.get(direction)
            if by_type is None:
                by_type = kind_index[direction] = {}
            kind = by_type.get(etype)
            if kind is None:
                kind = by_type[etype] = kinds((direction, etype))
            k_out(kind)
            if conn != prev_conn:
                runs([index, conn])
                prev_conn = conn
            if line != prev_line + 1:
                jumps([index, line])
            prev_line = line
            if etype in described:
                summary = describe(etype, event)
                if summary != etype:
                    summary_at(index - prev_summary)
                    prev_summary = index
                    shown = scrubbed.get(summary)
                    summary_out(shown if shown is not None else scrub_summary(summary))
            if facts:
                changed(index, facts, state)

        def quiet(
            seq: int, line: int, times: Sequence[float], direction: str, conn: int, etypes: Sequence[str]
        ) -> None:
            """What `observe` does for each of quiet records in a row (`seq` and `line` the first's): no facts, no
            summary (their types are not in `DESCRIBED`), consecutive lines of one connection."""
            nonlocal t0, prev_t, prev_line, prev_conn
            if t0 is None:
                t0 = self._t0 = times[0]
            by_type = kind_index.get(direction)
            if by_type is None:
                by_type = kind_index[direction] = {}
            if conn != prev_conn:
                runs([seq, conn])
                prev_conn = conn
            if line != prev_line + 1:
                jumps([seq, line])
            prev_line = line + len(times) - 1
            for t, etype in zip(times, etypes, strict=True):
                x = (t - t0) / unit
                ticks = round(x) if -1e13 < x < 1e13 else (10**13 if x > 0 else -(10**13))
                t_out(ticks - prev_t)
                prev_t = ticks
                kind = by_type.get(etype)
                if kind is None:
                    kind = by_type[etype] = kinds((direction, etype))
                k_out(kind)

        observe.quiet = quiet  # type: ignore[attr-defined]  # for the fold's runs of quiet records (`QuietRows`)
        return observe

    def _changed(self, index: int, facts: Sequence[Fact], state: TraceState) -> None:
        """Emit what the facts of event `index` changed, per connection, as operations."""
        touched: dict[int, _Touched] = {}
        for fact in facts:
            cls = type(fact)
            if cls is ChangeSent or cls is ChangeAnswered:
                change = fact.change  # type: ignore[attr-defined]
                _touch(touched, change.conn).changes[change.seq] = change
            elif cls is ConnClosed:
                into = _touch(touched, fact.conn.n)  # type: ignore[attr-defined]
                for change in fact.indeterminate:  # type: ignore[attr-defined]
                    into.changes[change.seq] = change
            elif cls is ItemAdded or cls is ItemDone or cls is ItemUpdated:
                _touch(touched, fact.conn.n).items[fact.item.id] = None  # type: ignore[attr-defined]
            elif cls is ItemDeleted or cls is ItemTruncated:
                _touch(touched, fact.conn.n).items[fact.item_id] = None  # type: ignore[attr-defined]
            elif cls is LocalSnapshot:
                _touch(touched, fact.conn.n).local = fact.items  # type: ignore[attr-defined]
            elif cls is ConnOpened:
                _touch(touched, fact.conn.n)  # type: ignore[attr-defined]
        for n, touch in touched.items():
            conn = state.conns.get(n)
            if conn is None:
                continue
            ops: list[int] = [index, n]
            shown = self._shown.get(n)
            if shown is None or shown.conn is not conn:  # a connection new, or opened again under its ordinal
                shown = self._shown[n] = _Shown(conn)
                ops.append(RESET)
            self._server_ops(conn, shown, touch.items, ops)
            self._pending_ops(conn, shown, touch.changes, ops)
            if touch.local is not None:
                ops.append(LOCAL)
                ops.append(len(touch.local))
                ops.extend(self._item(item) for item in touch.local)
            if len(ops) > 2:
                self.ops += 1
                self.states.append(ops)

    def _server_ops(self, conn: Connection, shown: _Shown, ids: dict[str, None], ops: list[int]) -> None:
        conv = conn.conv
        inserts: dict[str, Item] = {}
        for item_id in ids:
            item = conv.get(item_id)
            was = shown.items.get(item_id)
            if item is None:
                if was is not None:
                    del shown.items[item_id]
                    ops.append(REMOVE)
                    ops.append(self.ids(item_id))
                continue
            if was is None:
                inserts[item_id] = item
                continue
            k = self._item(item)
            if k != was:
                shown.items[item_id] = k
                ops.append(REPLACE)
                ops.append(k)
        while inserts:  # an item goes in after its previous one, which may be new too
            item_id, item = next(iter(inserts.items()))
            while (before := conv.previous_of(item_id)) in inserts:
                item_id, item = before, inserts[before]
            del inserts[item_id]
            if before is not None and before not in shown.items:  # not told of it by any fact: resync
                self._resync(conn, shown, ops)
                return
            k = self._item(item)
            shown.items[item_id] = k
            ops.append(INSERT)
            ops.append(k)
            ops.append(NO_ID if before is None else self.ids(before))
        if len(shown.items) != len(conv):
            self._resync(conn, shown, ops)

    def _pending_ops(self, conn: Connection, shown: _Shown, changes: dict[int, Change], ops: list[int]) -> None:
        for seq in sorted(changes):
            change = changes[seq]
            was = shown.pending.get(seq)
            if change.status == "pending":  # pending exactly while in `conn.pending` (`core.state.Change`)
                if was is None:
                    shown.pending[seq] = p = self._change(change)
                    ops.append(PEND)
                    ops.append(p)
            elif was is not None:
                del shown.pending[seq]
                ops.append(ANSWER)
                ops.append(was)
        if len(shown.pending) != len(conn.pending):  # a change came or went without a fact: resync
            self.resyncs += 1
            shown.pending = {c.seq: self._change(c) for c in conn.pending.values()}
            ops.append(PENDING)
            ops.append(len(shown.pending))
            ops.extend(shown.pending.values())

    def _resync(self, conn: Connection, shown: _Shown, ops: list[int]) -> None:
        """The whole server conversation again: the facts did not name an item that changed (never, while every
        change of the conversation comes with a fact; counted in `resyncs`)."""
        self.resyncs += 1
        shown.items = {item.id: self._item(item) for item in conn.conv}
        ops.append(SERVER)
        ops.append(len(shown.items))
        ops.extend(shown.items.values())

    # -- entries ------------------------------------------------------------------------------------------

    def _item(self, item: Item) -> int:
        """The entry of `item` as shown now: [id index, label, text], scrubbed; made again only when its content
        changed or was last shown long ago (`MEMO_SIZE` entries before)."""
        key = (item.id, item.type, item.role, item.call_id, item.text, item.arguments, item.copies)
        k = self._entries.get(key)
        if k is None:
            if len(self._entries) >= MEMO_SIZE:
                self._entries.clear()
            text = item.text or (f"args={item.arguments}" if item.arguments else "")
            if item.copies > 1:
                text = f"×{item.copies} {text}"
            label = scrub_text(item.label())[:SUMMARY_CHARS]
            shown = self._texts.get(text)
            if shown is None:
                if len(self._texts) >= MEMO_SIZE:
                    self._texts.clear()
                shown = self._texts[text] = scrub_text(text)[:ITEM_TEXT_CHARS]
            k = self.items.append((self.ids(item.id), label, shown))
            self._entries[key] = k
        return k

    def _summary(self, summary: str) -> str:
        """`summary` scrubbed and cut, kept while recent: the summary of an event that sends a change is the
        change's, and the page shows both."""
        shown = self._scrubbed.get(summary)
        if shown is None:
            if len(self._scrubbed) >= MEMO_SIZE:
                self._scrubbed.clear()
            shown = self._scrubbed[summary] = scrub_text(summary)[:SUMMARY_CHARS]
        return shown

    def _change(self, change: Change) -> int:
        """A pending change as the page lists it and builds the client view from it: [line, summary, kind (1
        create, 2 delete, 0 other), item id index or -1, previous id index (-1 none, -2 root), item or -1]."""
        item_id = change.item_id
        prev = change.previous_item_id
        item = change.sent_item() if item_id else None  # (pending: whole, its text and arguments too)
        return self.pending.append(
            (
                change.line,
                self._summary(change.summary),
                _KIND_CODES.get(change.kind, 0),
                self.ids(item_id) if item_id else NO_ID,
                ROOT if prev == "root" else self.ids(prev) if prev else NO_ID,
                self._item(item) if item is not None else NO_ID,
            )
        )

    def fields(self) -> Iterator[tuple[str, Any]]:
        """The page data, one field at a time (`pack` makes its JSON so; tuples are JSON arrays)."""
        yield "unit", TIME_UNIT
        yield "t0", self._t0 or 0.0
        yield "kinds", self.kinds.values
        yield "t", self.t.tolist()
        yield "k", self.k.tolist()
        yield "connRuns", self.conn_runs
        yield "lineJumps", self.line_jumps
        yield "summaryAt", self.summary_at.tolist()
        yield "summary", self.summary.fragment()
        yield "ids", self.ids.values
        yield "items", self.items.fragment()
        yield "pending", self.pending.fragment()
        yield "states", self.states.fragment()

    def json(self) -> dict[str, Any]:
        """The page data as the page reads it (JSON types: arrays as lists)."""
        data: dict[str, Any] = orjson.loads(orjson.dumps(dict(self.fields())))
        return data


def _touch(touched: dict[int, _Touched], n: int) -> _Touched:
    found = touched.get(n)
    if found is None:
        found = touched[n] = _Touched()
    return found


def fold_trace(path: str, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> tuple[TraceData, TraceState]:
    """Fold the trace at `path` (`engine.Fold`, no rules), recording the page data (for a report that was
    analyzed elsewhere: `analyze --html`, another process)."""
    data = TraceData()
    fold = Fold(Config(), (), data.observe)
    with TraceReader.open(path, max_line_bytes=max_line_bytes) as reader:
        fold.rows(reader.rows())
    return data, fold.state


def analyze(
    path: str, config: Config, rules: Sequence[type[Rule]], max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> tuple[TraceReport, TraceData | None]:
    """Analyze one trace (as `rtrace analyze -j 1` does: never raises) and build its page data in the same fold.
    The data is None when the trace could not be read."""
    from ..engine.parallel import analyze_file

    data = TraceData()
    trace = analyze_file(path, config, rules, max_line_bytes, observer=data.observe)
    return trace, None if trace.unreadable else data


def trace_json(
    trace: TraceReport,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    data: TraceData | None = None,
    compress_over: int = COMPRESS_OVER,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "path": scrub_text(trace.path),
        "name": scrub_text(os.path.basename(trace.path)),
        "events": trace.events,
        "connections": trace.connections,
        "duration": trace.duration,
        "header": scrub(trace.header.fields) if trace.header else None,
        "problemCount": trace.problem_count,
        "unreadable": trace.unreadable,
        "findings": [as_json(f) for f in trace.findings],  # already scrubbed by the analysis
        "raw": {},
        "data": None,
    }
    if trace.unreadable:
        return out
    if data is None:
        if trace.path in ("-", "<stdin>"):
            out["missing"] = "read from standard input: the timeline and step view need the trace as a file"
            return out
        try:
            data, _ = fold_trace(trace.path, max_line_bytes)
        except UnreadableInput as e:
            out["unreadable"] = str(e)
            return out
    out["data"] = pack(data.fields(), compress_over)
    raw = read_lines(trace.path, {w.line for f in trace.findings for w in f.witness}, trace.line_marks)
    out["raw"] = {str(k): v for k, v in sorted(raw.items())}
    return out


def pack(fields: Iterable[tuple[str, Any]], compress_over: int = COMPRESS_OVER) -> dict[str, Any]:
    """The page data (`TraceData.fields`) as a JSON object, or `{"deflate": base64}` of its JSON when that is over
    `compress_over` bytes. The JSON is made and deflated a field at a time: never whole in memory."""
    # Level 4: within 12% of the size of level 6 at a fifth of its time (1M-event session: 2.7 MB in 0.13 s).
    deflate = zlib.compressobj(4)
    out: list[bytes] = []
    kept: list[bytes] | None = []  # the JSON itself while it is small
    size = 0
    for k, (key, value) in enumerate(fields):
        piece = (b"{" if k == 0 else b",") + orjson.dumps(key) + b":" + orjson.dumps(value)
        size += len(piece)
        out.append(deflate.compress(piece))
        if kept is not None:
            kept.append(piece)
            if size > compress_over:
                kept = None
    out.append(deflate.compress(b"}" if size else b"{}"))
    out.append(deflate.flush())
    if kept is not None:
        small: dict[str, Any] = orjson.loads(b"".join(kept) + b"}") if kept else {}
        return small
    return {"deflate": base64.b64encode(b"".join(out)).decode("ascii")}


def unpack(packed: dict[str, Any]) -> dict[str, Any]:
    """`pack` undone (what the page does)."""
    if "deflate" not in packed:
        return packed
    data: dict[str, Any] = orjson.loads(zlib.decompress(base64.b64decode(packed["deflate"])))
    return data


def embed_json(value: Any) -> str:
    """JSON safe inside a `<script type="application/json">` element, and shown as it is: bidi overrides, C1 and
    other invisible characters as their `\\uXXXX` escapes (`core.escape.json_visible`), the same JSON value."""
    text = json_visible(orjson.dumps(value)).decode("utf-8")
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _asset(name: str) -> str:
    return resources.files("rtrace.report").joinpath("html_assets").joinpath(name).read_text(encoding="utf-8")


def render(
    report: Report,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    data: Sequence[TraceData | None] | None = None,
    compress_over: int = COMPRESS_OVER,
) -> str:
    """The page of `report`. `data`: the page data of each trace, from its analysis (`analyze`); a trace without
    it is read again."""
    found = list(data) if data is not None else [None] * len(report.traces)
    payload = {
        "schema": "rtrace.html/2",
        "version": __version__,
        "rules": {r.id: {"slug": r.slug, "title": r.title, "severity": r.severity} for r in report.rules},
        "traces": [
            trace_json(t, max_line_bytes, d, compress_over) for t, d in zip(report.traces, found, strict=True)
        ],
    }
    names = ", ".join(os.path.basename(t.path) for t in report.traces)
    title = html.escape(f"rtrace report: {scrub_text(names)[:200]}")
    css = _asset("report.css")
    js = _asset("report.js")
    for text in (css, js):
        assert "</" not in text, "inline assets must not contain an end tag"
    script = f"\n{js}\n"
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; img-src data:; '
        f"style-src 'unsafe-inline'; script-src 'sha256-{digest}'\">\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{title}</title>\n<style>\n{css}\n</style>\n</head>\n<body>\n"
        "<noscript>This report needs JavaScript to draw the timeline; the data is embedded below.</noscript>\n"
        f'<script type="application/json" id="rtrace-data">{embed_json(payload)}</script>\n'
        f"<script>{script}</script>\n</body>\n</html>\n"
    )
