"""The Markdown report: Mermaid diagrams parsed back into participants and messages, raw witness lines, escaping."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rtrace.core.escape import printable
from rtrace.engine.fold import Report, analyze_path
from rtrace.report import markdown
from rtrace.report.excerpt import scrub_text
from rtrace.rules.base import Config, Finding

from .chromium import find_chromium, npm_file, run_chromium
from .conftest import REAL
from .hostile_trace import SECRET, write_hostile_trace

REAL_TRACES = sorted(REAL.glob("*.jsonl"))
_ARROW = re.compile(r"^    (C->>S|S->>C|Note over C,S): (.*)$")
_MESSAGE = re.compile(r"^\+(\d+\.\d) ms L(\d+) (.*)$")


def decode_label(label: str) -> str:
    return re.sub(r"#(\d+);", lambda m: chr(int(m.group(1))), label)


def parse_mermaid(block: str) -> tuple[list[str], list[tuple[str, float, int, str]]]:
    """(participant declarations, [(arrow, +ms, line, text)]); fails on any line it does not understand."""
    lines = block.splitlines()
    assert lines[0] == "sequenceDiagram"
    participants = [ln.strip() for ln in lines[1:] if ln.strip().startswith("participant ")]
    messages = []
    for ln in lines[1 + len(participants) :]:
        m = _ARROW.match(ln)
        assert m, f"not a Mermaid message: {ln!r}"
        label = m.group(2)
        assert re.fullmatch(r"[A-Za-z0-9 _.,()/+=@'\-#;]*", label), label
        text = decode_label(label)
        mm = _MESSAGE.match(text)
        assert mm, text
        messages.append((m.group(1), float(mm.group(1)), int(mm.group(2)), mm.group(3)))
    return participants, messages


def mermaid_blocks(text: str) -> list[str]:
    return re.findall(r"^```mermaid\n(.*?)\n```$", text, flags=re.S | re.M)


def expected_messages(finding: Finding) -> list[tuple[str, int]]:
    arrow = {"client": "C->>S", "server": "S->>C"}
    return [(arrow.get(w.dir, "Note over C,S"), w.line) for w in finding.witness]


@pytest.mark.parametrize("path", REAL_TRACES, ids=lambda p: p.name)
def test_every_finding_has_a_diagram_of_its_witness(path: Path) -> None:
    trace = analyze_path(path)
    text = markdown.render(Report([trace], Config()))
    blocks = mermaid_blocks(text)
    assert len(blocks) == len(trace.findings)
    for finding, block in zip(trace.findings, blocks, strict=True):
        participants, messages = parse_mermaid(block)
        assert participants == ["participant C as Client", "participant S as Server"]
        assert [(a, line) for a, _, line, _ in messages] == expected_messages(finding)
        t0 = finding.witness[0].t
        for (_, rel, _, label), w in zip(messages, finding.witness, strict=True):
            assert rel == pytest.approx((w.t - t0) * 1000, abs=0.051)
            assert label == printable(w.summary, 200)[: len(label)]
        assert rel >= 0


def test_race_188_report_tells_the_story() -> None:
    trace = analyze_path(REAL / "tool-output-race.livekit-1.8.8.jsonl")
    text = markdown.render(Report([trace], Config()))
    assert "- events: 76" in text and "- connections: 1" in text and "- duration: 1.55 s" in text
    assert "RT101 `deleted-function-call-output`" in text
    rt101 = text[text.index("RT101 `deleted-function-call-output`") :]
    _, messages = parse_mermaid(mermaid_blocks(rt101)[0])
    assert [(a, line) for a, _, line, _ in messages] == [
        ("S->>C", 15),
        ("C->>S", 42),
        ("S->>C", 43),
        ("C->>S", 45),
        ("C->>S", 46),
        ("S->>C", 47),
    ]
    assert messages[3][3] == "delete item_2cd9ef851886"
    # The raw witness lines, re-read from the file, exactly as JSON.
    raw = re.search(r"```jsonl\n(.*?)\n```", rt101, flags=re.S)
    assert raw is not None
    quoted = dict(line.split(": ", 1) for line in raw.group(1).splitlines())
    assert sorted(map(int, quoted)) == [15, 42, 43, 45, 46, 47]
    source = (REAL / "tool-output-race.livekit-1.8.8.jsonl").read_bytes().splitlines()
    assert orjson.loads(quoted["45"]) == orjson.loads(source[44])
    assert "**Likely fix.**" in rt101


def test_clean_trace_says_no_findings() -> None:
    trace = analyze_path(REAL / "reconnect-during-tool.livekit-1.8.5.jsonl")
    text = markdown.render(Report([trace], Config()))
    assert "No findings." in text
    assert "```mermaid" not in text
    assert "- connections: 2" in text


def test_hostile_text_is_inert_and_secrets_never_appear(tmp_path: Path) -> None:
    trace = analyze_path(write_hostile_trace(tmp_path / "evil.jsonl"))
    assert trace.findings
    text = markdown.render(Report([trace], Config()))
    assert SECRET not in text
    assert "[redacted]" in text
    # Header: client and versions shown, escaped.
    assert "- client: evil &lt;b&gt;client&lt;/b&gt;" in text
    assert "- versions: livekit-agents 1.8.8" in text
    # Outside code fences no raw markup survives.
    prose = re.sub(r"^(`{3,})[a-z]*\n.*?\n\1$", "", text, flags=re.S | re.M)
    assert "<" not in prose and ">" not in prose.replace("->>", "")
    # Mermaid labels carry no raw syntax characters and no control characters.
    for block in mermaid_blocks(text):
        _, messages = parse_mermaid(block)
        assert any("</script>" in m[3] for m in messages)
    # The long audio frame is never quoted in full.
    assert "QUJD" * 100 not in text
    # Bidi overrides, isolates, line separators and C1 controls are escapes, in prose and in quoted lines alike
    # (quoted lines kept them raw).
    assert re.search("[\u0080-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]", text) is None
    quoted = text.split("Witness lines", 1)[1]
    assert "\\u202eevil\\u2028next line" in quoted


def test_fence_is_longer_than_any_backtick_run() -> None:
    body = "a ```` b"
    fenced = markdown.fence(body, "jsonl")
    assert fenced.startswith("`````jsonl\n") and fenced.endswith("\n`````")


@given(st.text(max_size=200))
def test_mermaid_label_is_safe_and_lossless(text: str) -> None:
    label = markdown.mermaid_label(text, 500)
    assert re.fullmatch(r"[A-Za-z0-9 _.,()/+=@'\-#;]*", label)
    assert decode_label(label) == printable(scrub_text(text), 500).replace("\n", " ")


@given(st.text(max_size=200))
def test_md_text_has_no_markup(text: str) -> None:
    out = markdown.md_text(text)
    assert "<" not in out and ">" not in out and "\n" not in out
    assert html.unescape(re.sub(r"\\(.)", r"\1", out)).replace("\n", " ") == printable(scrub_text(text), 2000).replace(
        "\n", " "
    )


#: Mermaid itself (the library GitHub renders with), run in headless Chromium.
MERMAID = ("mermaid@11.17.2", "package/dist/mermaid.min.js")
MERMAID_SHA256 = "581ed7d74bd9048d0e3a91363927d72ef22942d7722546b27f7cc29e35390eb8"
MERMAID_PAGE = """<!DOCTYPE html><html><body><script src="mermaid.min.js"></script>
<script type="application/json" id="diagrams">%s</script>
<script>
(async function () {
  var out = [];
  mermaid.initialize({startOnLoad: false, securityLevel: "strict"});
  var blocks = JSON.parse(document.getElementById("diagrams").textContent);
  for (var i = 0; i < blocks.length; i++) {
    try {
      await mermaid.parse(blocks[i]);
      var dg = await mermaid.mermaidAPI.getDiagramFromText(blocks[i]);
      var actors = Array.from(dg.db.getActors().values()).map(function (a) { return [a.name, a.description]; });
      var msgs = dg.db.getMessages().map(function (m) { return [m.from, m.to, m.message]; });
      var svg = (await mermaid.render("g" + i, blocks[i])).svg;
      out.push({actors: actors, msgs: msgs, svg: svg});
    } catch (e) { out.push({error: String(e)}); }
  }
  var pre = document.createElement("pre");
  pre.id = "result";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script></body></html>"""


@pytest.mark.browser
def test_real_mermaid_parses_every_diagram(tmp_path: Path) -> None:
    chromium = find_chromium()
    (tmp_path / "mermaid.min.js").write_bytes(npm_file(*MERMAID, MERMAID_SHA256, "mermaid-11.17.2.min.js").read_bytes())
    traces = [analyze_path(p) for p in [*REAL_TRACES, write_hostile_trace(tmp_path / "evil.jsonl")]]
    findings = [f for t in traces for f in t.findings]
    blocks = mermaid_blocks(markdown.render(Report(traces, Config())))
    assert len(blocks) == len(findings) > 5
    page = tmp_path / "mermaid.html"
    page.write_text(MERMAID_PAGE % json.dumps(blocks).replace("<", "\\u003c"), encoding="utf-8")
    dom = run_chromium(chromium, tmp_path, page.as_uri(), "--dump-dom")
    m = re.search(r'<pre id="result">(.*?)</pre>', dom, re.S)
    assert m is not None, dom[-2000:]
    results = json.loads(html.unescape(m.group(1)))
    assert len(results) == len(findings)
    for finding, block, got in zip(findings, blocks, results, strict=True):
        assert "error" not in got, (got, block)
        assert got["actors"] == [["C", "Client"], ["S", "Server"]]
        assert len(got["msgs"]) == len(finding.witness)
        t0 = finding.witness[0].t
        for (src, dst, text), w in zip(got["msgs"], finding.witness, strict=True):
            if w.dir in ("client", "server"):
                assert (src, dst) == (("C", "S") if w.dir == "client" else ("S", "C"))
            # Mermaid keeps entity codes as placeholders until it draws; decode those (once).
            decoded = re.sub(r"\ufb02\u00b0\u00b0(\d+)\u00b6\u00df", lambda m: chr(int(m.group(1))), text)
            label = f"+{(w.t - t0) * 1000:.1f} ms L{w.line} {w.summary}"
            assert decoded == printable(scrub_text(label), markdown.LABEL_CHARS).replace("\n", " ")
        assert "<img" not in got["svg"] and "<script" not in got["svg"]
