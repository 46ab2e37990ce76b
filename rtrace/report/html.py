"""The one-file HTML report: timeline, findings linked to their witness events, and a step-through view.

Folds each trace again with `reducer.step` and embeds, per trace, compact event columns (no payloads) and the
state of each connection after every event that changed it, as list deltas that the page rebuilds. All trace
text is untrusted: it travels only as JSON inside `<script type="application/json">` (with `<`, `>`, `&`,
U+2028/2029 escaped) and the page writes it with `textContent`. No network: CSS and JS are inlined.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import html
import os
from collections.abc import Sequence
from importlib import resources
from typing import Any

import orjson

from .. import __version__
from ..core.conversation import Item
from ..core.describe import describe
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
from ..core.state import Connection, TraceState, client_view, divergence
from ..engine.fold import Fold, Report, TraceReport
from ..rules.base import Config, as_json
from .excerpt import read_lines, scrub, scrub_text

#: Times are stored as integer steps of this many seconds (0.1 ms).
TIME_UNIT = 1e-4
SUMMARY_CHARS = 140
ITEM_TEXT_CHARS = 80
#: Facts after which the server conversation is read again, and after which the client view is: a record
#: without one of these leaves what the page shows as it was.
_SERVER_FACTS: tuple[type[Fact], ...] = (
    ItemAdded,
    ItemUpdated,
    ItemDone,
    ItemDeleted,
    ItemTruncated,
    ConnOpened,
    ConnClosed,
)
_CLIENT_FACTS: tuple[type[Fact], ...] = (ChangeSent, ChangeAnswered, LocalSnapshot, ConnClosed, ConnOpened)

ListDelta = list[Any] | int


def _common_prefix(a: list[int], b: list[int]) -> int:
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # slice comparisons run in C; the common case is an append
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def list_delta(old: list[int], new: list[int]) -> ListDelta:
    """`0` when equal, else `[prefix, suffix, middle]`: new = old[:prefix] + middle + old[len(old)-suffix:]."""
    if old == new:
        return 0
    p = _common_prefix(old, new)
    s = _common_prefix(old[p:][::-1], new[p:][::-1])
    return [p, s, new[p : len(new) - s]]


class _Interner:
    def __init__(self) -> None:
        self.index: dict[Any, int] = {}
        self.values: list[Any] = []

    def __call__(self, value: Any) -> int:
        k = self.index.get(value)
        if k is None:
            k = self.index[value] = len(self.values)
            self.values.append(value)
        return k


@dataclasses.dataclass(slots=True)
class _ConnSnapshot:
    server_ids: list[str]
    server: list[int]
    client: list[int]
    pending: list[int]
    div: list[list[int]]


class TraceData:
    """Everything the page needs about one trace, built in one fold."""

    def __init__(self) -> None:
        self.kinds = _Interner()
        self.ids = _Interner()
        self.items = _Interner()
        self.pending = _Interner()
        self.t: list[int] = []
        self.k: list[int] = []
        self.conn_runs: list[list[int]] = []
        self.line_jumps: list[list[int]] = []
        self.summary_at: list[int] = []
        self.summary: list[str] = []
        self.states: list[list[Any]] = []
        self._last: dict[int, _ConnSnapshot] = {}
        self._memo: dict[int, tuple[Item, str, str, int, int]] = {}
        self._prev_t = 0
        self._prev_line = 0
        self._prev_conn: int | None = None
        self._t0: float | None = None

    def add_event(self, index: int, line: int, t: float, direction: str, conn: int, summary: str, kind: str) -> None:
        if self._t0 is None:
            self._t0 = t
        ticks = round(min(max(t - self._t0, -1e9), 1e9) / TIME_UNIT)  # absurd `t` values stay in int64/JS range
        self.t.append(ticks - self._prev_t)
        self._prev_t = ticks
        self.k.append(self.kinds((direction, kind)))
        if conn != self._prev_conn:
            self.conn_runs.append([index, conn])
            self._prev_conn = conn
        if line != self._prev_line + 1:
            self.line_jumps.append([index, line])
        self._prev_line = line
        if summary != kind:
            self.summary_at.append(index)
            self.summary.append(scrub_text(summary)[:SUMMARY_CHARS])

    def _item(self, item: Item | None, item_id: str) -> int:
        if item is None:
            return self.items((self.ids(item_id), scrub_text(item_id)[:SUMMARY_CHARS], ""))
        memo = self._memo.get(id(item))
        if memo is not None and memo[0] is item and memo[1] is item.text and memo[2] is item.arguments:
            if memo[3] == item.copies:
                return memo[4]
        text = item.text or (f"args={item.arguments}" if item.arguments else "")
        if item.copies > 1:
            text = f"×{item.copies} {text}"
        label = scrub_text(item.label())[:SUMMARY_CHARS]
        k = self.items((self.ids(item.id), label, scrub_text(text)[:ITEM_TEXT_CHARS]))
        self._memo[id(item)] = (item, item.text, item.arguments, item.copies, k)
        return k

    def snapshot(self, index: int, conn: Connection, server_changed: bool, client_changed: bool) -> None:
        """Record the state of `conn` after event `index` if it differs from the last one recorded."""
        last = self._last.get(conn.n)
        if last is None or server_changed:
            server_ids = conn.conv.ids()
            server = [self._item(conn.conv.items[i], i) for i in server_ids]
        else:
            server_ids, server = last.server_ids, last.server
        if last is None or server_changed or client_changed:
            view = client_view(conn)
            local = {it.id: it for it in conn.local} if conn.local is not None else {}
            client = [self._item(local.get(i) or conn.expected_item(i) or conn.conv.get(i), i) for i in view]
            pending = [self.pending((c.line, scrub_text(c.summary)[:SUMMARY_CHARS])) for c in conn.pending.values()]
            d = divergence(view, server_ids)
            div = [[self.ids(i) for i in side] for side in (d.only_client, d.only_server, d.reordered)] if d else []
        else:
            client, pending, div = last.client, last.pending, last.div
        before = last or _ConnSnapshot([], [], [], [], [])
        if last is not None and (server, client, pending, div) == (last.server, last.client, last.pending, last.div):
            return
        self.states.append(
            [
                index,
                conn.n,
                list_delta(before.server, server),
                list_delta(before.client, client),
                list_delta(before.pending, pending),
                div or 0,
            ]
        )
        self._last[conn.n] = _ConnSnapshot(server_ids, server, client, pending, div)

    def json(self) -> dict[str, Any]:
        return {
            "unit": TIME_UNIT,
            "t0": self._t0 or 0.0,
            "kinds": [list(k) for k in self.kinds.values],
            "t": self.t,
            "k": self.k,
            "connRuns": self.conn_runs,
            "lineJumps": self.line_jumps,
            "summaryAt": self.summary_at,
            "summary": self.summary,
            "ids": self.ids.values,
            "items": [list(v) for v in self.items.values],
            "pending": [list(v) for v in self.pending.values],
            "states": self.states,
        }


def fold_trace(path: str, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> tuple[TraceData, TraceState]:
    """Fold the trace at `path` (`engine.Fold`, no rules), recording events and per-connection states for the page."""
    data = TraceData()

    def observe(row: Row, facts: Sequence[Fact], state: TraceState) -> None:
        index, line, t, direction, conn, event, etype, _ = row
        data.add_event(index, line, t, direction, conn, describe(etype, event), etype)
        if not facts:
            return
        server_changed = any(isinstance(f, _SERVER_FACTS) for f in facts)
        client_changed = any(isinstance(f, _CLIENT_FACTS) for f in facts)
        touched = {conn}
        for fact in facts:
            if isinstance(fact, ConnClosed):
                touched.add(fact.conn.n)
        for n in sorted(touched):
            c = state.conns.get(n)
            if c is not None:
                data.snapshot(index, c, server_changed, client_changed)

    fold = Fold(Config(), (), observe)
    with TraceReader.open(path, max_line_bytes=max_line_bytes) as reader:
        fold.rows(reader.rows())
    return data, fold.state


def trace_json(trace: TraceReport, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> dict[str, Any]:
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
    if trace.path in ("-", "<stdin>"):
        out["missing"] = "read from standard input: the timeline and step view need the trace as a file"
        return out
    if trace.unreadable:
        return out
    try:
        data, _ = fold_trace(trace.path, max_line_bytes)
    except UnreadableInput as e:
        out["unreadable"] = str(e)
        return out
    out["data"] = data.json()
    raw = read_lines(trace.path, {w.line for f in trace.findings for w in f.witness})
    out["raw"] = {str(k): v for k, v in sorted(raw.items())}
    return out


def embed_json(value: Any) -> str:
    """JSON safe inside a `<script type="application/json">` element."""
    text = orjson.dumps(value).decode("utf-8")
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _asset(name: str) -> str:
    return resources.files("rtrace.report").joinpath("html_assets").joinpath(name).read_text(encoding="utf-8")


def render(report: Report, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> str:
    payload = {
        "schema": "rtrace.html/1",
        "version": __version__,
        "rules": {r.id: {"slug": r.slug, "title": r.title, "severity": r.severity} for r in report.rules},
        "traces": [trace_json(t, max_line_bytes) for t in report.traces],
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
