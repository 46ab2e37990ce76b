"""The one-file HTML report: structure and escaping here; the page itself in a real headless Chromium
(marker `browser`): findings, the step view against Python's own fold, keys, zoom, XSS, a screenshot."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import struct
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given

from rtrace.core import loader as loader_module
from rtrace.core.conversation import Conversation, Item
from rtrace.core.describe import describe
from rtrace.core.facts import ChangeAnswered, ItemAdded
from rtrace.core.loader import TraceReader
from rtrace.core.reducer import step
from rtrace.core.secrets import scrub_text
from rtrace.core.state import Connection, TraceState, client_view, divergence
from rtrace.engine.fold import Fold, Report, analyze_path
from rtrace.report import html as html_report
from rtrace.report.excerpt import read_lines
from rtrace.rules import RULES
from rtrace.rules.base import Config

from . import make_samples
from .chromium import find_chromium, run_chromium
from .conftest import REAL
from .hostile_trace import SECRET, XSS, write_hostile_trace
from .strategies import BOUNDED, envelopes

REAL_TRACES = sorted(REAL.glob("*.jsonl"))
SAMPLE_TRACES = [p for p in make_samples.all_sample_traces() if p.parent.parent == make_samples.RULES_DIR]
RACE_188 = REAL / "tool-output-race.livekit-1.8.8.jsonl"
RECONNECT_184 = REAL / "reconnect-during-tool.livekit-1.8.4.jsonl"
_DATA = re.compile(r'<script type="application/json" id="rtrace-data">(.*?)</script>', re.S)


def render(*paths: Path) -> str:
    return html_report.render(Report([analyze_path(p) for p in paths], Config()))


def embedded(page: str) -> dict[str, Any]:
    """The page's embedded payload, each trace's data inflated when it came deflated."""
    m = _DATA.search(page)
    assert m is not None
    data: dict[str, Any] = json.loads(m.group(1))
    for trace in data["traces"]:
        if trace["data"] is not None:
            trace["data"] = html_report.unpack(trace["data"])
    return data


# -- the page's state, rebuilt from its operations in Python as report.js does (stateAt, clientView, divergence) --


class PageConn:
    """One connection as the page holds it: the server conversation as a linked map (id -> [item, prev, next]),
    pending changes in order, the latest local snapshot."""

    def __init__(self) -> None:
        self.nodes: dict[int, list[int]] = {}
        self.head = self.tail = -1
        self.pending: dict[int, None] = {}
        self.local: list[int] | None = None

    def link_after(self, nodes: dict[int, list[int]], ends: list[int], item_id: int, value: int, after: int) -> None:
        nxt = ends[0] if after < 0 else nodes[after][2]
        nodes[item_id] = [value, after, nxt]
        if after < 0:
            ends[0] = item_id
        else:
            nodes[after][2] = item_id
        if nxt < 0:
            ends[1] = item_id
        else:
            nodes[nxt][1] = item_id

    def unlink(self, nodes: dict[int, list[int]], ends: list[int], item_id: int) -> None:
        node = nodes.pop(item_id, None)
        if node is None:
            return
        _, prev, nxt = node
        if prev < 0:
            ends[0] = nxt
        else:
            nodes[prev][2] = nxt
        if nxt < 0:
            ends[1] = prev
        else:
            nodes[nxt][1] = prev

    def apply(self, ops: list[int], items: list[list[Any]]) -> None:
        ends = [self.head, self.tail]
        i = 2  # after the event's index and connection
        while i < len(ops):
            op = ops[i]
            if op == html_report.INSERT:
                self.link_after(self.nodes, ends, items[ops[i + 1]][0], ops[i + 1], ops[i + 2])
                i += 3
            elif op == html_report.REMOVE:
                self.unlink(self.nodes, ends, ops[i + 1])
                i += 2
            elif op == html_report.REPLACE:
                self.nodes[items[ops[i + 1]][0]][0] = ops[i + 1]
                i += 2
            elif op == html_report.PEND:
                self.pending[ops[i + 1]] = None
                i += 2
            elif op == html_report.ANSWER:
                del self.pending[ops[i + 1]]
                i += 2
            elif op == html_report.LOCAL:
                n = ops[i + 1]
                self.local = ops[i + 2 : i + 2 + n]
                i += 2 + n
            elif op == html_report.RESET:
                self.nodes, ends, self.pending, self.local = {}, [-1, -1], {}, None
                i += 1
            elif op == html_report.SERVER:
                n = ops[i + 1]
                self.nodes, ends = {}, [-1, -1]
                for k in ops[i + 2 : i + 2 + n]:
                    self.link_after(self.nodes, ends, items[k][0], k, ends[1])
                i += 2 + n
            elif op == html_report.PENDING:
                n = ops[i + 1]
                self.pending = dict.fromkeys(ops[i + 2 : i + 2 + n])
                i += 2 + n
            else:
                raise AssertionError(f"unknown operation {op}")
        self.head, self.tail = ends

    def server(self) -> list[int]:
        out, cur = [], self.head
        while cur >= 0:
            out.append(cur)
            cur = self.nodes[cur][2]
        return out

    def client(self, data: dict[str, Any]) -> tuple[list[int], list[list[Any]]]:
        items = data["items"]
        if self.local is not None:
            by_id = {items[k][0]: k for k in self.local}
            ids = [items[k][0] for k in self.local]
            return ids, [items[by_id[i]] for i in ids]
        nodes: dict[int, list[int]] = {}
        ends = [-1, -1]
        for i in self.server():
            self.link_after(nodes, ends, i, 0, ends[1])
        last: dict[int, int] = {}
        for p in self.pending:
            _, _, kind, item, prev, entry = data["pending"][p]
            if item < 0:
                continue
            if kind == 2:
                self.unlink(nodes, ends, item)
                last[item] = -1
            elif kind == 1:
                if item not in nodes:
                    after = -1 if prev == html_report.ROOT else prev if prev >= 0 and prev in nodes else ends[1]
                    self.link_after(nodes, ends, item, 0, after)
                if entry >= 0:
                    last[item] = entry
        ids, cur = [], ends[0]
        while cur >= 0:
            ids.append(cur)
            cur = nodes[cur][2]
        entries = []
        for i in ids:
            own = last.get(i, -1)
            server = self.nodes.get(i)
            entries.append(items[own] if own >= 0 else items[server[0]] if server else [i, data["ids"][i], ""])
        return ids, entries


def page_states(data: dict[str, Any]) -> list[dict[int, tuple[Any, ...]]]:
    """After each event: per connection the page has seen, (server ids, client ids, pending lines, divergence,
    server entries, client entries), ids as strings, entries as "label|text"."""
    by_index: dict[int, list[tuple[int, list[int]]]] = {}
    for entry in data["states"]:
        by_index.setdefault(entry[0], []).append((entry[1], entry))
    conns: dict[int, PageConn] = {}
    names = data["ids"]
    out = []
    for index in range(len(data["t"])):
        for conn, ops in by_index.get(index, ()):
            conns.setdefault(conn, PageConn()).apply(ops, data["items"])
        now = {}
        for n, pc in conns.items():
            server = pc.server()
            client, entries = pc.client(data)
            s_ids, c_ids = [names[i] for i in server], [names[i] for i in client]
            div = divergence(c_ids, s_ids)
            now[n] = (
                s_ids,
                c_ids,
                [data["pending"][p][0] for p in pc.pending],
                [list(div.only_client), list(div.only_server), list(div.reordered)] if div else None,
                [f"{e[1]}|{e[2]}" for e in (data["items"][pc.nodes[i][0]] for i in server)],
                [f"{e[1]}|{e[2]}" for e in entries],
            )
        out.append(now)
    return out


def shown_entry(item: Item) -> str:
    """How the page shows an item: its label, and its text or arguments (with copies)."""
    text = item.text or (f"args={item.arguments}" if item.arguments else "")
    if item.copies > 1:
        text = f"×{item.copies} {text}"
    return f"{scrub_text(item.label())[:140]}|{scrub_text(text)[:80]}"


def engine_states(path: Path) -> list[dict[int, tuple[Any, ...]]]:
    """After each event, per connection, what the engine's own fold holds (`engine.fold.Fold`, `core.state`)."""
    out: list[dict[int, tuple[Any, ...]]] = []

    def snapshot(row: Any, facts: Any, state: TraceState) -> None:
        now = {}
        for n, conn in state.conns.items():
            server, client = conn.conv.ids(), client_view(conn)
            div = divergence(client, server)
            local = {it.id: it for it in conn.local} if conn.local is not None else {}
            entries = [local.get(i) or conn.expected_item(i) or conn.conv.get(i) for i in client]
            now[n] = (
                server,
                client,
                [c.line for c in conn.pending.values()],
                [list(div.only_client), list(div.only_server), list(div.reordered)] if div else None,
                [shown_entry(item) for item in conn.conv],
                [shown_entry(e) if e is not None else f"{i}|" for i, e in zip(client, entries, strict=True)],
            )
        out.append(now)

    fold = Fold(Config(), (), snapshot)
    with TraceReader.open(path) as reader:
        fold.rows(reader.rows())
    return out


def assert_page_matches_engine(path: Path, data: dict[str, Any]) -> None:
    page, engine = page_states(data), engine_states(path)
    assert len(page) == len(engine)
    for index, (got, want) in enumerate(zip(page, engine, strict=True)):
        assert got == want, (path.name, index)


# -- structure ------------------------------------------------------------------------------------------


def test_page_is_self_contained_with_a_pinned_script() -> None:
    page = render(RACE_188)
    outside = _DATA.sub("", page)
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", outside, re.S)
    assert len(scripts) == 1 and scripts[0][0] == ""
    for pattern in (r"\bsrc\s*=", r"\bhref\s*=", r"url\(", r"@import", r"https?://", r"fetch\(", r"XMLHttpRequest"):
        assert not re.search(pattern, outside), pattern
    csp = re.search(r"script-src 'sha256-([^']+)'", page)
    assert csp is not None
    digest = base64.b64encode(hashlib.sha256(scripts[0][1].encode()).digest()).decode()
    assert csp.group(1) == digest
    assert "default-src 'none'" in page


def test_embedded_data_is_escaped_and_has_no_payloads(tmp_path: Path) -> None:
    evil = write_hostile_trace(tmp_path / "evil.jsonl")
    with evil.open("ab") as fp:
        fp.write(
            b'{"t":0.2,"dir":"server","conn":1,"event":{"type":"conversation.item.added","item":'
            b'{"id":"item_ls","type":"message","role":"assistant","content":[{"type":"text","text":"a\\u2028b\\u2029c"}]}}}\n'
        )
    page = render(evil)
    raw = _DATA.search(page)
    assert raw is not None
    assert not re.search(r"[<>&\u2028\u2029]", raw.group(1))
    assert SECRET not in page and "[redacted]" in page
    assert "QUJD" * 40 not in page  # the audio frame is not embedded
    data = embedded(page)
    trace = data["traces"][0]
    assert any("</script>" in item[2] or "</script>" in item[1] for item in trace["data"]["items"])
    assert [f["rule"] for f in trace["findings"]] == ["RT104", "RT112"]


def test_events_and_lines_round_trip() -> None:
    data = embedded(render(RACE_188, RECONNECT_184))
    for trace, path in zip(data["traces"], (RACE_188, RECONNECT_184), strict=True):
        d = trace["data"]
        with TraceReader.open(path) as reader:
            records = list(reader)
        assert len(d["t"]) == len(d["k"]) == len(records) == trace["events"]
        lines, line, jumps = [], 0, dict(map(tuple, d["lineJumps"]))
        for i in range(len(records)):
            line = jumps.get(i, line + 1)
            lines.append(line)
        assert lines == [r.line for r in records]
        times, acc = [], 0
        for dt in d["t"]:
            acc += dt
            times.append(acc * d["unit"] + d["t0"])
        assert times == pytest.approx([r.t for r in records], abs=1e-4)
        assert [tuple(d["kinds"][k]) for k in d["k"]] == [(r.dir, r.type) for r in records]
        at, summaries = 0, {}
        for gap, text in zip(d["summaryAt"], d["summary"], strict=True):
            at += gap
            summaries[at] = text
        described = {i: describe(r.type, r.event) for i, r in enumerate(records)}
        assert summaries == {i: scrub_text(text)[:140] for i, text in described.items() if text != records[i].type}


@pytest.mark.parametrize("path", REAL_TRACES + SAMPLE_TRACES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_step_states_rebuild_to_the_fold(path: Path) -> None:
    """At every event, the state the page rebuilds from its operations (server conversation, client view, pending
    changes, divergence, what each item shows) equals the engine's own fold of the prefix."""
    data = embedded(render(path))["traces"][0]["data"]
    assert_page_matches_engine(path, data)
    # The data of the one pass `rtrace report` makes (analysis and page together) is the data of a second reading.
    trace, one_pass = html_report.analyze(str(path), Config(), RULES)
    assert one_pass is not None and one_pass.json() == html_report.fold_trace(str(path))[0].json()
    assert trace.findings == analyze_path(path).findings


@BOUNDED
@given(envelopes(max_size=60))
def test_random_traces_rebuild_to_the_fold(lines: list[dict[str, Any]]) -> None:
    """The same on random traces (duplicate ids, deletes of unknown ids, local snapshots, reconnects, junk)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.jsonl"
        path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
        data, _ = html_report.fold_trace(str(path))
        assert data.resyncs == 0, "a change of the state came without a fact"
        assert_page_matches_engine(path, data.json())


def test_a_change_without_its_fact_is_resynced(tmp_path: Path) -> None:
    """The operations follow the facts; when a fact is missing (a reducer that changed the state silently), the
    connection is sent whole again and the page still matches the fold."""
    path = write_long_trace(tmp_path / "long.jsonl", turns=30)
    data = html_report.TraceData()

    def lossy(row: Any, facts: Any, state: TraceState) -> None:
        if row[1] % 7 == 0:
            facts = [f for f in facts if not isinstance(f, (ItemAdded, ChangeAnswered))]
        data.observe(row, facts, state)

    fold = Fold(Config(), (), lossy)
    with TraceReader.open(path) as reader:
        fold.rows(reader.rows())
    assert data.resyncs > 0
    page = page_states(data.json())
    engine = engine_states(path)
    # Right after each record whose facts were cut the page may lag; from the next change on it is right again.
    assert page[-1] == engine[-1]
    assert sum(p == e for p, e in zip(page, engine, strict=True)) > 0.8 * len(engine)


def test_operations_per_record_do_not_grow_with_the_conversation() -> None:
    """The complexity fix: each record costs the items and changes its facts name, never a walk of the
    conversation (the old page data read `conv.ids()` and `Connection.expected_ids` after every change: for the
    conversation of 3,000 items below, 30 million items walked, counted on e62ccb8). Counted, not timed."""
    from bench.scale import render as render_shape

    walked = [0]
    real_iter = Conversation.__iter__

    def counting_iter(self: Conversation) -> Any:
        for item in real_iter(self):
            walked[0] += 1
            yield item

    calls = {"expected_ids": 0, "expected_item": 0}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "conv.jsonl"
        path.write_bytes(render_shape("html-report", 15, 3000))
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(Conversation, "__iter__", counting_iter)
            for name in calls:
                real = getattr(Connection, name)

                def counted(self: Connection, *a: Any, _real: Any = real, _name: str = name) -> Any:
                    calls[_name] += 1
                    return _real(self, *a)

                mp.setattr(Connection, name, counted)
            trace, data = html_report.analyze(str(path), Config(), RULES)
    assert data is not None and trace.events > 30_000 and not trace.findings
    assert walked[0] == 0 and calls == {"expected_ids": 0, "expected_item": 0}
    assert data.resyncs == 0
    ints = sum(len(entry) for entry in data.json()["states"])
    assert ints < 3 * trace.events  # the operations are O(1) per record


def test_large_page_data_is_deflated_and_comes_back_the_same() -> None:
    folded = html_report.fold_trace(str(RACE_188))[0]
    data = folded.json()
    assert html_report.pack(folded.fields()) == data  # small: as is
    packed = html_report.pack(folded.fields(), compress_over=0)
    assert set(packed) == {"deflate"} and re.fullmatch(r"[A-Za-z0-9+/=]+", packed["deflate"])
    assert html_report.unpack(packed) == data
    assert html_report.pack(iter(())) == {} and html_report.unpack(html_report.pack(iter(()), -1)) == {}


# -- in a real browser ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chromium() -> str:
    return find_chromium()


def selftest(chromium: str, tmp_path: Path, page: str, fragment: str) -> tuple[dict[str, Any], str]:
    target = tmp_path / "report.html"
    target.write_text(page, encoding="utf-8")
    dom = run_chromium(chromium, tmp_path, f"{target.as_uri()}#selftest&{fragment}", "--dump-dom")
    m = re.search(r'<pre id="selftest-result">(.*?)</pre>', dom, re.S)
    assert m is not None, dom[-3000:]
    result: dict[str, Any] = json.loads(html.unescape(m.group(1)))
    assert result["ok"], result["errors"]
    assert 'data-selftest="pass"' in dom
    return result, dom


def fold_to(path: Path, line: int) -> TraceState:
    state = TraceState()
    with TraceReader.open(path) as reader:
        for rec in reader:
            if rec.line > line:
                break
            step(state, rec)
    return state


@pytest.mark.browser
def test_browser_race_188_findings_and_step_view(chromium: str, tmp_path: Path) -> None:
    trace = analyze_path(RACE_188)
    result, _ = selftest(chromium, tmp_path, render(RACE_188), "lines=43,45,47")
    assert result["findings_rendered"] == result["findings_data"] == len(trace.findings) == 4
    assert result["rules_rendered"] == [f.rule for f in trace.findings]
    assert result["witness_buttons"] == sum(len(f.witness) for f in trace.findings)
    click = result["witness_click"]
    assert click["selected"] == click["wanted"] and click["active"] == "finding-0"
    assert click["current"].startswith(f"line {click['wanted']}")
    for got in result["steps"]:
        conn = fold_to(RACE_188, got["line"]).conns[got["conn"]]
        assert got["server"] == conn.conv.ids()
        assert got["client"] == client_view(conn)
        assert [p.split(":")[0] for p in got["pending"] if p != "(none)"] == [
            f"line {c.line}" for c in conn.pending.values()
        ]
    at43, at45, at47 = result["steps"]
    assert "item_2cd9ef851886" in at43["server"] and at43["diverged"] == []
    # After the delete is sent: the server still holds the output, the client view does not; highlighted.
    assert at45["diverged"] == ["item_2cd9ef851886"] and at45["pending"] == ["line 45: delete item_2cd9ef851886"]
    assert "1 only on the server" in at45["note"]
    # After the server deleted it: the output is gone from both; turn C's message is still pending.
    assert "item_2cd9ef851886" not in at47["server"] + at47["client"]
    assert at47["diverged"] == ["item_ea66f32fe7fc"]
    # Arrow keys move forward over events (deltas skipped), shift+arrow to the next state change, left goes back.
    keys = result["keys"]
    assert keys[0] < keys[1] < keys[2] < keys[3] < keys[4] and keys[5] < keys[4]
    assert result["full_view"]["drawn"] > 0 and result["zoom"]["frames"] == 60
    assert result["pwned"] is None


@pytest.mark.browser
def test_browser_reconnect_shows_each_connection(chromium: str, tmp_path: Path) -> None:
    result, _ = selftest(chromium, tmp_path, render(RECONNECT_184), "lines=15,31,32")
    at15, at31, at32 = result["steps"]
    assert (at15["conn"], at31["conn"], at32["conn"]) == (1, 2, 2)
    assert "item_s1_0001" in at15["server"]
    assert "item_s1_0001" not in at31["server"]
    assert any(p.startswith("line 31:") for p in at31["pending"])
    assert at31["diverged"] == ["item_ff74c9df91d6"]
    assert at32["pending"] == ["(none)"] and at32["diverged"] == []


@pytest.mark.browser
def test_browser_xss_payload_renders_as_text(chromium: str, tmp_path: Path) -> None:
    evil = write_hostile_trace(tmp_path / "evil.jsonl")
    page = render(evil)
    result, dom = selftest(chromium, tmp_path, page, "lines=5,8")
    assert result["pwned"] is None and not re.search(r"\sdata-pwned=", dom)
    assert result["title"].startswith("rtrace report")
    body = dom[dom.index("<body") :]
    assert "<img" not in body and "<b>bold" not in body and "<textarea" not in body
    at5 = result["steps"][0]
    assert any(XSS[:60] in text for text in at5["server_text"])  # the transcript, shown as text
    # Loaded without the self-check too: nothing executes.
    target = tmp_path / "plain.html"
    target.write_text(page, encoding="utf-8")
    plain = run_chromium(chromium, tmp_path, target.as_uri(), "--dump-dom")
    assert not re.search(r"\sdata-pwned=", plain) and 'id="findings"' in plain
    assert "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in plain  # the error text, shown as text


@pytest.mark.browser
def test_browser_screenshot(chromium: str, tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    target.write_text(render(RACE_188), encoding="utf-8")
    shot = tmp_path / "shot.png"
    run_chromium(
        chromium, tmp_path, f"{target.as_uri()}#finding=2&line=45", f"--screenshot={shot}", "--window-size=1280,1400"
    )
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1280, 1400)
    assert len(data) > 20_000  # a drawn page, not a blank one


def write_long_trace(path: Path, turns: int = 150) -> Path:
    """Many state changes on two connections (more than the page's keyframe interval), with audio frames,
    deletes and a pending create at the end."""
    lines: list[dict[str, Any]] = []
    t = 0.0

    def add(direction: str, conn: int, event: dict[str, Any]) -> None:
        nonlocal t
        t = round(t + 0.01, 6)
        lines.append({"t": t, "dir": direction, "conn": conn, "event": event})

    for conn in (1, 2):
        add("meta", conn, {"type": "connection.opened", "path": "/v1/realtime"})
        prev = None
        for k in range(turns):
            item = {
                "id": f"item_{conn}_{k}",
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": f"turn {k}"}],
            }
            add("client", conn, {"type": "input_audio_buffer.append", "audio": "AAAA"})
            add(
                "client",
                conn,
                {
                    "type": "conversation.item.create",
                    "event_id": f"e{conn}_{k}",
                    "previous_item_id": prev,
                    "item": item,
                },
            )
            add("server", conn, {"type": "conversation.item.added", "previous_item_id": prev, "item": item})
            if k % 10 == 9:
                add("client", conn, {"type": "conversation.item.delete", "item_id": f"item_{conn}_{k - 5}"})
                add("server", conn, {"type": "conversation.item.deleted", "item_id": f"item_{conn}_{k - 5}"})
            prev = item["id"]
        if conn == 1:
            add("meta", conn, {"type": "connection.closed", "code": 1000})
    add(
        "client",
        2,
        {
            "type": "conversation.item.create",
            "item": {"id": "item_last", "type": "message", "role": "user", "content": []},
        },
    )
    path.write_bytes(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    return path


@pytest.mark.browser
def test_browser_long_trace_rebuilds_late_states(chromium: str, tmp_path: Path) -> None:
    path = write_long_trace(tmp_path / "long.jsonl")
    data = embedded(render(path))["traces"][0]["data"]
    assert len(data["states"]) > 2 * 64
    total = len(path.read_bytes().splitlines())
    probe = [total // 3, total // 2 + 7, total - 1, total]
    result, _ = selftest(chromium, tmp_path, render(path), "lines=" + ",".join(map(str, probe)))
    for got in result["steps"]:
        conn = fold_to(path, got["line"]).conns[got["conn"]]
        assert got["server"] == conn.conv.ids()
        assert got["client"] == client_view(conn)
    assert result["steps"][-1]["diverged"] == ["item_last"]
    assert len(result["steps"][-1]["server"]) == 150 - 15


@pytest.mark.browser
def test_browser_every_state_of_every_sample_matches_the_fold(chromium: str, tmp_path: Path) -> None:
    """The page's own rebuilt state (report.js: replay, client view, divergence), at every event of every golden
    sample and real trace, equals the engine's fold."""
    paths = REAL_TRACES + SAMPLE_TRACES
    page = html_report.render(Report([analyze_path(p) for p in paths], Config()))
    result, _ = selftest(chromium, tmp_path, page, "states")
    assert len(result["every_state"]) == len(paths)
    for path, rows in zip(paths, result["every_state"], strict=True):
        engine = engine_states(path)
        assert [row[0] for row in rows] == list(range(len(engine))), path.name
        for row in rows:
            index, line, conn, *got = row
            assert tuple(got) == engine[index][conn], (path.name, index, line)


@pytest.mark.browser
def test_browser_deflated_data_and_going_back_from_the_end(chromium: str, tmp_path: Path) -> None:
    """A page whose data is deflated shows the same states; stepping back from the last event replays from the
    nearest kept copy of the state (at most max(64, its size) changes), not from the connection's first change."""
    path = write_long_trace(tmp_path / "long.jsonl", turns=300)
    page = html_report.render(Report([analyze_path(path)], Config()), compress_over=0)
    assert '"deflate":' in page
    result, _ = selftest(chromium, tmp_path, page, "states=47")
    engine, rows = engine_states(path), result["every_state"][0]
    assert [row[0] for row in rows] == sorted({*range(0, len(engine), 47), len(engine) - 1})
    for index, line, conn, *got in rows:
        assert tuple(got) == engine[index][conn], (index, line)
    back = result["back_step"]
    assert back["changes"] > 600 and back["marks"] >= 2
    assert back["replayed"] <= max(64, back["size"]) < back["changes"] / 2


@pytest.mark.browser
def test_browser_many_connections_show_a_window_of_bands(chromium: str, tmp_path: Path) -> None:
    """Forty connections: the timeline draws sixteen bands at a time, around the selected event's connection."""
    from bench.scale import render as render_shape

    path = tmp_path / "reconnects.jsonl"
    path.write_bytes(render_shape("many-reconnects", 3, 40))
    page = render(path)
    total = len(path.read_bytes().splitlines())
    result, _ = selftest(chromium, tmp_path, page, f"lines=5,{total}")
    first, last = result["steps"]
    assert (first["conn"], last["conn"]) == (1, 40)
    assert last["server"] == fold_to(path, total).conns[40].conv.ids()
    view = result["full_view"]
    assert view["drawn"] > 0 and "of 40 shown" in view["info"]
    assert view["height"] < 16 * 60 + 40  # sixteen bands, not forty


@pytest.mark.browser
def test_browser_several_traces_in_one_page(chromium: str, tmp_path: Path) -> None:
    page = render(RACE_188, RECONNECT_184)
    result, _ = selftest(chromium, tmp_path, page, "trace=1&lines=31")
    assert result["trace_options"] == [RACE_188.name, RECONNECT_184.name]
    assert result["trace"] == RECONNECT_184.name
    assert result["rules_rendered"] == [f.rule for f in analyze_path(RECONNECT_184).findings]
    assert result["steps"][0]["conn"] == 2


def test_page_data_shows_invisible_characters_escaped() -> None:
    from rtrace.report.html import embed_json

    text = embed_json({"say": "a\u202eb\u0085c</script>"})
    assert "\u202e" not in text and "\\u202e" in text and "\u0085" not in text and "</script>" not in text
    assert json.loads(text) == {"say": "a\u202eb\u0085c</script>"}


def test_analyze_with_html_reads_each_trace_once_and_writes_the_report_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`rtrace analyze --html` makes the page data in its own fold (counted: one reader per trace, no second fold),
    and the page is the one `rtrace report -o x.html` writes."""
    from rtrace.cli import main

    trace = REAL / "tool-output-race.livekit-1.8.8.jsonl"
    opened: list[str] = []
    init = TraceReader.__init__

    def counted(self: TraceReader, *args: Any, **kw: Any) -> None:
        opened.append(str(self))
        init(self, *args, **kw)

    monkeypatch.setattr(TraceReader, "__init__", counted)
    page, report_page = tmp_path / "a.html", tmp_path / "b.html"
    assert main(["analyze", str(trace), "--html", str(page), "-f", "json", "-o", str(tmp_path / "a.json")]) == 1
    assert len(opened) == 1
    opened.clear()
    assert main(["report", str(trace), "-o", str(report_page)]) == 0
    assert len(opened) == 1
    assert page.read_bytes() == report_page.read_bytes()


def _bytes_read() -> int:
    """Bytes this process has read through system calls so far (Linux: /proc/self/io)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="counts reads through /proc/self/io (Linux)")
def test_analyze_with_html_reads_the_trace_once_even_to_quote_its_last_lines(tmp_path: Path) -> None:
    """The page quotes the lines that prove each finding; they are read from where the analysis's reader saw them
    start, not by reading the file again from its start: a 6 MB trace whose findings are at its end costs one
    reading of it (counted in bytes: 1.35x its size, 2.35x when the page quoted them by reading it again), and
    the page quotes what a reading from the start finds."""
    from rtrace.cli import main

    lines = (REAL / "tool-output-race.livekit-1.8.8.jsonl").read_bytes().splitlines(keepends=True)
    quiet = b'{"t":0.0001,"dir":"server","conn":1,"event":{"type":"rate_limits.updated","rate_limits":[],"x":"%s"}}\n'
    padding = [quiet % (b"p" * 200)] * 25_000
    trace = tmp_path / "padded.jsonl"
    trace.write_bytes(b"".join([*lines[:2], *padding, *lines[2:]]))
    size = trace.stat().st_size
    assert main(["analyze", str(trace), "-f", "json", "-o", str(tmp_path / "warm.json")]) == 1  # imports done
    page = tmp_path / "a.html"
    before = _bytes_read()
    assert main(["analyze", str(trace), "--html", str(page), "-f", "json", "-o", str(tmp_path / "a.json")]) == 1
    read = _bytes_read() - before
    assert size < read < 1.5 * size, (read, size)  # once, and the importers' look at its start (1-2 MB, twice)
    [shown] = embedded(page.read_text())["traces"]
    [found] = orjson.loads((tmp_path / "a.json").read_bytes())["traces"]
    wanted = {w["line"] for f in found["findings"] for w in f["witness"]}
    assert max(wanted) > len(padding)
    assert shown["raw"] == {str(k): v for k, v in sorted(read_lines(trace, wanted).items())}  # from the start


def _page_both_ways(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    def made() -> Any:
        trace, data = html_report.analyze(str(path), Config(), RULES)
        return trace, None if data is None else data.json()

    fast = made()
    with monkeypatch.context() as m:
        m.setattr(loader_module, "_scanner", None)
        pure = made()
    return fast, pure


@pytest.mark.skipif(loader_module._scanner is None, reason="the C scanner is not built")
def test_the_page_data_on_the_fast_path_is_the_pure_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The page data and the report of every sample, and of a session of text and audio deltas on two connections
    (quiet records the scanner takes, with their times and types, as `QuietRows`), are the pure path's."""
    from .conftest import SAMPLES

    ids = {"response_id": "r1", "item_id": "i1", "output_index": 0, "content_index": 0}
    lines = []
    for n in (1, 2):
        lines += [
            {"t": 0.1 * n, "dir": "meta", "conn": n, "event": {"type": "connection.opened", "path": "/v1/realtime"}},
            {"t": 0.2 * n, "dir": "server", "conn": n, "event": {"type": "session.created", "session": {}}},
            {"t": 0.3 * n, "dir": "client", "conn": n, "event": {"type": "response.create"}},
        ]
    for k in range(600):
        n = 1 + k % 2
        kind = ("response.output_text.delta", "response.output_audio_transcript.delta", "rate_limits.updated")[k % 3]
        lines.append({"t": 1 + k / 100, "dir": "server", "conn": n, "event": {"type": kind, **ids, "delta": "w"}})
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    for path in [*sorted(SAMPLES.rglob("*.jsonl")), mixed]:
        fast, pure = _page_both_ways(path, monkeypatch)
        assert fast == pure, path
