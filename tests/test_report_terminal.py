"""The terminal report: summary, findings as two-lane timelines, problems; untrusted text always escaped."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from rtrace.core.trace import Header, Problem
from rtrace.engine.fold import Report, TraceReport, analyze_path
from rtrace.report import terminal
from rtrace.rules.base import Config, Finding, Witness

from .conftest import REAL

RACE_188 = REAL / "tool-output-race.livekit-1.8.8.jsonl"
RACE_189 = REAL / "tool-output-race.livekit-1.8.9.jsonl"
RECONNECT_184 = REAL / "reconnect-during-tool.livekit-1.8.4.jsonl"
EVIL = "\x1b[31mred\x1b[0m [bold]loud[/bold] [link=http://x]y[/link] \x07\x9b"
B64 = "QUJD" * 20_000


def render(*traces: TraceReport, width: int = 120) -> str:
    out = io.StringIO()
    terminal.render(Report(list(traces), Config()), Console(file=out, width=width, color_system=None, highlight=False))
    return out.getvalue()


def assert_clean(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text


def test_summary_and_finding_of_a_real_trace() -> None:
    text = render(analyze_path(RACE_188))
    assert text.splitlines()[0] == str(RACE_188)
    assert "76 events · 1 connection · 1.55 s · 2 errors, 2 warnings" in text
    assert "error   RT101 deleted-function-call-output  conn 1  lines 15, 42, 43, 45, 46, 47" in text
    assert "fix: " in text
    # The two lanes: a client event has the arrow to the server, a server event the arrow back.
    lane = next(line for line in text.splitlines() if line.strip().startswith("45 "))
    assert "delete item_2cd9ef851886" in lane and "→" in lane
    lane = next(line for line in text.splitlines() if line.strip().startswith("47 "))
    assert "deleted item_2cd9ef851886" in lane and "←" in lane


def test_clean_trace_and_totals_for_several() -> None:
    text = render(
        analyze_path(RACE_188), analyze_path(RACE_189), analyze_path(REAL / "reconnect-during-tool.livekit-1.8.5.jsonl")
    )
    assert "no findings" in text  # 1.8.5
    assert "findings by rule" in text and "RT101 deleted-function-call-output" in text


def test_off_a_terminal_the_totals_keep_trace_names_distinguishable(tmp_path: Path) -> None:
    """Names that share a long start were cut until the columns read `reconnect-duri…kit-1.8.4…` and
    `reconnect-duri…kit-1.8.5.…`; off a terminal a column per trace is numbered and each name given whole, and the
    fleet table's names are whole too. A file name in two folders is told apart by its path."""
    from rtrace.report.console import plain_console

    long = "reconnect-during-tool-while-a-long-call-runs.livekit-"
    paths = []
    for version, source in (("1.8.4", RECONNECT_184), ("1.8.5", REAL / "reconnect-during-tool.livekit-1.8.5.jsonl"),
                            ("1.8.8", RACE_188)):  # fmt: skip
        paths.append(tmp_path / f"{long}{version}.jsonl")
        paths[-1].write_bytes(source.read_bytes())
    out = io.StringIO()
    terminal.render(Report([analyze_path(p) for p in paths], Config()), plain_console(out))
    text = out.getvalue()
    for k, path in enumerate(paths, 1):
        assert f"  {k}  {path.name}\n" in text
    assert " rule " in text and " 1  2  3\n" in text and "…" not in text.split("findings by rule")[1]
    assert "RT101 deleted-function-call-output     error     0  0  1" in text
    # The same file name in two folders: the paths tell them apart.
    assert terminal.trace_names(["a/t.jsonl", "b/t.jsonl"], None) == ["a/t.jsonl", "b/t.jsonl"]
    # A fleet: the traces each rule was found in, named whole.
    many = [analyze_path(paths[k % 3]) for k in range(terminal.MAX_TRACE_COLUMNS + 1)]
    for k, trace in enumerate(many):
        trace.path = str(tmp_path / f"run-{k}" / f"{long}{k}.jsonl")
    out = io.StringIO()
    terminal.render(Report(many, Config()), plain_console(out))
    fleet = out.getvalue().split("findings by rule over")[1]
    assert "…" not in fleet and f"run-0/{long}0.jsonl" not in fleet
    assert f"  RT105 in {long}0.jsonl,\n{long}3.jsonl,\n{long}6.jsonl\n" in fleet  # wrapped between names only


def _finding(message: str, explanation: str, summary: str) -> Finding:
    witness = (
        Witness(3, 0.1, "client", 1, "conversation.item.create", summary),
        Witness(4, 0.15, "server", 1, "error", summary),
        Witness(5, 0.2, "meta", 1, "connection.closed", summary),
    )
    return Finding("RT199", "test-rule", "error", 1, message, explanation, witness, {}, "fix it", 5)


def _trace(path: str, findings: list[Finding], problems: list[Problem] | None = None) -> TraceReport:
    problems = problems or []
    return TraceReport(path, 5, 1, 0.2, findings, problems, len(problems), Header(1, {"client": EVIL}))


def test_control_characters_and_markup_in_trace_text_are_printed_escaped() -> None:
    finding = _finding(f"message {EVIL}", f"explanation {EVIL}", f"summary {EVIL}")
    problem = Problem(f"trace{EVIL}.jsonl", 2, 7, f"malformed JSON {EVIL}", excerpt=EVIL)
    text = render(_trace(f"trace{EVIL}.jsonl", [finding], [problem]), width=200)
    assert_clean(text)
    # Path (twice), header client, problem, excerpt, message, explanation, three witness lanes: all escaped.
    assert text.count("\\x1b[31mred\\x1b[0m [bold]loud[/bold]") == 10, text
    assert text.count("[link=http://x]y[/link] \\x07\\x9b") == 10, text
    assert "[bold]loud[/bold]" in text  # rich markup is text, not style


def test_long_base64_payloads_are_truncated() -> None:
    finding = _finding(f"bad audio {B64}", f"Line 4 said: {B64} and more.", f"error: {B64}")
    problem = Problem("t.jsonl", 2, 1, f"malformed JSON near {B64}", excerpt=B64[:80])
    text = render(_trace("t.jsonl", [finding], [problem]), width=120)
    assert len(text) < 6000, len(text)
    assert "QUJD" * 30 not in text
    assert "… (+79920 chars)" in text and "more." in text


def test_long_base64_in_a_real_error_message(tmp_path: Path) -> None:
    data = RECONNECT_184.read_bytes().replace(
        b"not found in conversation.", b"not found in conversation. \\u001b[2J" + B64.encode()
    )
    path = tmp_path / "evil.jsonl"
    path.write_bytes(data)
    text = render(analyze_path(path))
    assert_clean(text)
    assert "\\x1b[2J" in text and "QUJD" * 30 not in text and len(text) < 12_000


def test_problems_shown_and_counted() -> None:
    problems = [Problem("t.jsonl", n, 1, f"problem {n}") for n in range(1, 31)]
    trace = TraceReport("t.jsonl", 0, 0, 0.0, [], problems, 45)
    text = render(trace)
    assert "t.jsonl:1:1: problem 1" in text and "t.jsonl:20:1: problem 20" in text
    assert "problem 21" not in text and "… and 25 more input problems" in text


def test_unreadable_trace() -> None:
    trace = TraceReport("gone.jsonl", 0, 0, 0.0, [], [], 0, unreadable=f"permission denied {EVIL}")
    text = render(trace)
    assert_clean(text)
    assert "unreadable: permission denied" in text


def test_many_findings_of_one_rule_are_counted_not_all_drawn(tmp_path: Path) -> None:
    from rtrace.report.terminal import MAX_FINDINGS_SHOWN_PER_RULE

    lines = ['{"t":0.0,"dir":"server","conn":1,"event":{"type":"session.created","session":{}}}']
    for k in range(40):
        lines.append(
            f'{{"t":{k + 1}.0,"dir":"client","conn":1,"event":{{"type":"response.cancel","event_id":"c{k}"}}}}'
        )
        lines.append(
            f'{{"t":{k + 1}.1,"dir":"server","conn":1,"event":{{"type":"error","error":'
            '{"code":"response_cancel_not_active",'
            f'"message":"Cancellation failed: no active response found","event_id":"c{k}"}}}}}}'
        )
    trace = tmp_path / "many.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    report = analyze_path(trace)
    assert len(report.findings) == 40
    out = render(report)
    assert out.count("RT112 server-error") == MAX_FINDINGS_SHOWN_PER_RULE
    assert f"… and {40 - MAX_FINDINGS_SHOWN_PER_RULE} more RT112 findings" in out


def test_trace_names_are_cut_in_the_middle_so_the_part_that_differs_shows() -> None:
    from rtrace.report.terminal import trace_name

    a = trace_name("/x/reconnect-during-tool.livekit-1.8.4.jsonl")
    b = trace_name("/x/reconnect-during-tool.livekit-1.8.5.jsonl")
    assert a != b and len(a) == len(b) == 30
    assert a.startswith("reconnect-du") and a.endswith("1.8.4.jsonl") and "…" in a
    assert trace_name("short.jsonl") == "short.jsonl"
    assert "\x1b" not in trace_name("evil\x1b[2J" + "x" * 40 + ".jsonl")


def test_what_rules_could_not_judge_is_said_escaped() -> None:
    from rtrace.engine.fold import NotJudged

    trace = analyze_path(RACE_189)
    trace.not_judged = [NotJudged(("RT105", "RT106"), "reconnect-replay", f"the log {EVIL} omits the replay")]
    text = render(trace, width=400)
    assert "not judged by RT105, RT106: the log" in text and "omits the replay" in text
    assert_clean(text)
    assert "not judged" not in render(analyze_path(RACE_189))
