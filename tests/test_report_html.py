"""The one-file HTML report: structure and escaping here; the page itself in a real headless Chromium
(marker `browser`): findings, the step view against Python's own fold, keys, zoom, XSS, a screenshot."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rtrace.core.loader import TraceReader
from rtrace.core.reducer import step
from rtrace.core.state import TraceState, client_view
from rtrace.engine.fold import Report, analyze_path
from rtrace.report import html as html_report
from rtrace.rules.base import Config

from .chromium import find_chromium, run_chromium
from .conftest import REAL
from .hostile_trace import SECRET, XSS, write_hostile_trace

REAL_TRACES = sorted(REAL.glob("*.jsonl"))
RACE_188 = REAL / "tool-output-race.livekit-1.8.8.jsonl"
RECONNECT_184 = REAL / "reconnect-during-tool.livekit-1.8.4.jsonl"
_DATA = re.compile(r'<script type="application/json" id="rtrace-data">(.*?)</script>', re.S)


def render(*paths: Path) -> str:
    return html_report.render(Report([analyze_path(p) for p in paths], Config()))


def embedded(page: str) -> dict[str, Any]:
    m = _DATA.search(page)
    assert m is not None
    data: dict[str, Any] = json.loads(m.group(1))
    return data


def apply_delta(old: list[Any], d: Any) -> list[Any]:
    if d == 0:
        return old
    p, s, mid = d
    return old[:p] + mid + old[len(old) - s :]


def rebuild(data: dict[str, Any]) -> dict[int, list[tuple[int, list[str], list[str], list[int]]]]:
    """Per connection: (event index, server ids, client ids, pending lines) after each recorded change,
    rebuilt from the deltas the way the page does."""
    out: dict[int, list[tuple[int, list[str], list[str], list[int]]]] = {}
    cur: dict[int, tuple[list[int], list[int], list[int]]] = {}
    ids, items, pending = data["ids"], data["items"], data["pending"]
    for index, conn, ds, dc, dp, _div in data["states"]:
        s, c, p = cur.get(conn, ([], [], []))
        s, c, p = apply_delta(s, ds), apply_delta(c, dc), apply_delta(p, dp)
        cur[conn] = (s, c, p)
        out.setdefault(conn, []).append(
            (index, [ids[items[k][0]] for k in s], [ids[items[k][0]] for k in c], [pending[k][0] for k in p])
        )
    return out


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


@pytest.mark.parametrize("path", REAL_TRACES, ids=lambda p: p.name)
def test_step_states_rebuild_to_the_fold(path: Path) -> None:
    """At every event, the state the page rebuilds equals Python's own fold of the prefix."""
    data = embedded(render(path))["traces"][0]["data"]
    states = rebuild(data)
    state = TraceState()
    with TraceReader.open(path) as reader:
        for index, rec in enumerate(reader):
            step(state, rec)
            for n, conn in state.conns.items():
                entries = [e for e in states.get(n, []) if e[0] <= index]
                assert entries, (index, n)
                _, server, client, pending = entries[-1]
                assert server == conn.conv.ids(), (rec.line, n)
                assert client == client_view(conn), (rec.line, n)
                assert pending == [c.line for c in conn.pending.values()], (rec.line, n)


@given(st.lists(st.integers(0, 5), max_size=12), st.lists(st.integers(0, 5), max_size=12))
def test_list_delta_round_trips(old: list[int], new: list[int]) -> None:
    d = html_report.list_delta(old, new)
    assert apply_delta(old, d) == new
    if d != 0:
        assert len(d[2]) <= len(new)


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
def test_browser_several_traces_in_one_page(chromium: str, tmp_path: Path) -> None:
    page = render(RACE_188, RECONNECT_184)
    result, _ = selftest(chromium, tmp_path, page, "trace=1&lines=31")
    assert result["trace_options"] == [RACE_188.name, RECONNECT_184.name]
    assert result["trace"] == RECONNECT_184.name
    assert result["rules_rendered"] == [f.rule for f in analyze_path(RECONNECT_184).findings]
    assert result["steps"][0]["conn"] == 2
