"""The analysis commands end to end, in-process: analyze, report, show, rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rtrace.cli import main

from .conftest import REAL

RACE_188 = REAL / "tool-output-race.livekit-1.8.8.jsonl"
RACE_189 = REAL / "tool-output-race.livekit-1.8.9.jsonl"


def test_analyze_exit_1_on_error_findings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(RACE_188)]) == 1
    out = capsys.readouterr().out
    assert "RT101 deleted-function-call-output" in out
    assert "lines 15, 42, 43, 45, 46, 47" in out


def test_analyze_exit_0_on_fixed_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(RACE_189)]) == 0


def test_fail_on_warning(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(RACE_189), "--fail-on", "warning"]) == 1


def test_json_report_schema(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert main(["analyze", str(RACE_188), str(RACE_189), "--format", "json", "-o", str(out)]) == 1
    data = json.loads(out.read_text())
    assert data["schema"] == "rtrace.report/1"
    assert [t["path"] for t in data["traces"]] == [str(RACE_188), str(RACE_189)]
    finding = next(f for f in data["traces"][0]["findings"] if f["slug"] == "deleted-function-call-output")
    assert {"rule", "slug", "severity", "message", "lines", "conn"} <= finding.keys()
    assert finding["lines"] == [15, 42, 43, 45, 46, 47]
    assert finding["ids"]["call_ids"] == ["call_s1_0001_0"]


def test_json_is_deterministic(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    main(["analyze", str(REAL), "--format", "json", "-o", str(a)])
    main(["analyze", str(REAL), "--format", "json", "-o", str(b)])
    assert a.read_bytes() == b.read_bytes()


def test_select_and_ignore(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(RACE_188), "--select", "RT103"]) == 0
    assert main(["analyze", str(RACE_188), "--ignore", "deleted-function-call-output,stale-snapshot-delete"]) == 0
    assert main(["analyze", str(RACE_188), "--select", "no-such-rule"]) == 2


def test_missing_file_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(tmp_path / "nope.jsonl")]) == 3
    assert "Traceback" not in capsys.readouterr().err


def test_empty_file_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert main(["analyze", str(empty)]) == 3
    assert "no usable event" in capsys.readouterr().err


def test_strict_turns_problems_into_exit_3(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(RACE_189.read_bytes() + b'{"t": 9, "dir": "server", "conn": 1, "event": {"type": "x.y"}}\n')
    assert main(["analyze", str(trace)]) == 0
    assert main(["analyze", str(trace), "--strict"]) == 3


def test_show_at_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(RACE_188), "--at", "46"]) == 0
    out = capsys.readouterr().out
    assert "after line 46" in out
    assert "only on the server: item_2cd9ef851886" in out
    assert "line 45: delete item_2cd9ef851886" in out


def test_show_timeline(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(REAL / "reconnect-during-tool.livekit-1.8.4.jsonl"), "--conn", "2"]) == 0
    out = capsys.readouterr().out
    assert "error invalid_tool_call_id" in out
    assert " 21 " not in out  # line 21 belongs to connection 1


def test_rules_list_and_explain(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules"]) == 0
    listing = capsys.readouterr().out
    assert "deleted-function-call-output" in listing and "RT115" in listing
    assert main(["rules", "stale-snapshot-delete"]) == 0
    assert "snapshot" in capsys.readouterr().out
    assert main(["rules", "nope"]) == 2


def test_reply_timeout_option(tmp_path: Path) -> None:
    from .conftest import SAMPLES

    trace = SAMPLES / "rules/no-response-after-tool-output/positive-silent-after-output.jsonl"
    for option, expected in ((["--reply-timeout", "20s"], []), ([], ["RT125"])):
        out = tmp_path / "report.json"
        assert main(["analyze", str(trace), "--format", "json", "-o", str(out), *option]) == 0  # a warning
        data = json.loads(out.read_text())
        assert [f["rule"] for f in data["traces"][0]["findings"]] == expected
        assert data["config"]["reply_timeout"] == (20.0 if option else 10.0)


def test_rules_documents_the_new_rules(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules"]) == 0
    listing = capsys.readouterr().out
    for rule in ("RT122", "RT123", "RT124", "RT125"):
        assert rule in listing
    assert main(["rules", "no-response-after-tool-output"]) == 0
    assert "--reply-timeout" in capsys.readouterr().out
    assert main(["rules", "reconnect-restores-nothing"]) == 0
    assert "replay_visible" in capsys.readouterr().out


def test_analyze_follow_prints_each_finding_as_the_file_grows_then_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import threading
    import time

    from rtrace.engine.fold import analyze_path

    path = tmp_path / "growing.jsonl"
    path.write_bytes(b"")
    lines = RACE_188.read_bytes().splitlines(keepends=True)

    def grow() -> None:
        with path.open("ab") as fp:
            for line in lines:
                fp.write(line)
                fp.flush()
                time.sleep(0.002)

    writer = threading.Thread(target=grow)
    writer.start()
    code = main(["analyze", "--follow", "--follow-timeout", "0.5s", str(path)])
    writer.join()
    assert code == 1
    captured = capsys.readouterr()
    live = captured.err.splitlines()
    expected = [f for f in analyze_path(RACE_188).findings]
    assert live == [f"{f.severity} {f.rule} {f.slug} conn {f.conn} line {f.at_line}: {f.message}" for f in expected]
    assert "RT101 deleted-function-call-output  conn 1  lines 15, 42, 43, 45, 46, 47" in captured.out


def test_analyze_follow_takes_one_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "--follow", str(RACE_188), str(RACE_189)]) == 2
    assert main(["analyze", "--follow", "-"]) == 2
    assert main(["analyze", "--follow", "--follow-timeout", "0", str(RACE_188)]) == 2
    assert main(["analyze", "--follow", str(tmp_path / "missing.jsonl")]) == 3
    err = capsys.readouterr().err
    assert "--follow reads one trace file" in err and "missing.jsonl" in err and "Traceback" not in err


def test_report_minimize_attaches_a_reproducer_per_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bug.md"
    assert main(["report", str(RACE_188), "--minimize", "-o", str(out)]) == 0
    text = out.read_text()
    section = text.split("## Minimal reproducers")[1]
    assert "### RT101 in" in section and "lines of 76" in section and "`bug.min-RT101.jsonl`" in section
    for rule in ("RT101", "RT102", "RT103"):
        assert (tmp_path / f"bug.min-{rule}.jsonl").exists()
    assert main(["report", str(RACE_188), "--minimize", "--format", "html"]) == 2
    assert "--minimize writes its reproducers beside --output" in capsys.readouterr().err


def test_a_baseline_accepts_known_findings_and_reports_new_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    known = tmp_path / "known.json"
    assert main(["analyze", str(RACE_188), "--select", "RT103", "--baseline", str(known), "--write-baseline"]) == 0
    assert "2 findings written to the baseline" in capsys.readouterr().err
    assert main(["analyze", str(RACE_188), "--baseline", str(known), "-f", "json"]) == 1
    trace = json.loads(capsys.readouterr().out)["traces"][0]
    assert trace["accepted"] == 2 and sorted(f["rule"] for f in trace["findings"]) == ["RT101", "RT102"]
    assert main(["analyze", str(RACE_188), "--baseline", str(known), "--select", "RT103"]) == 0
    assert "2 accepted by the baseline" in capsys.readouterr().out
    assert main(["analyze", str(RACE_188), "--write-baseline"]) == 2
    (tmp_path / "bad.json").write_text("{}")
    assert main(["analyze", str(RACE_188), "--baseline", str(tmp_path / "bad.json")]) == 2
    assert "not an rtrace baseline" in capsys.readouterr().err


def test_a_trace_without_timestamps_says_the_timing_rules_could_not_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    untimed = tmp_path / "untimed.jsonl"
    lines = [json.loads(line) for line in RACE_188.read_text().splitlines()]
    untimed.write_text("".join(json.dumps({k: v for k, v in x.items() if k != "t"}) + "\n" for x in lines))
    main(["analyze", str(untimed)])
    out = capsys.readouterr().out
    assert "not judged by RT101, RT102, RT110, RT115, RT119, RT125: no timestamps" in out
    main(["analyze", str(untimed), "-f", "json"])
    [note] = json.loads(capsys.readouterr().out)["traces"][0]["not_judged"]
    assert note["what"] == "timestamps" and note["why"].startswith("no timestamps") and "RT110" in note["rules"]
    main(["analyze", str(RACE_188), "-f", "json"])
    assert json.loads(capsys.readouterr().out)["traces"][0]["not_judged"] == []
    main(["analyze", str(untimed), "--select", "RT103"])
    assert "not judged" not in capsys.readouterr().out  # no rule that needs times selected: nothing was lost


def test_show_out_of_range_line_or_connection_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(RACE_188), "--at", "999"]) == 2
    assert "--at 999" in capsys.readouterr().err
    assert main(["show", str(RACE_188), "--at", "0"]) == 2
    assert main(["show", str(RACE_188), "--conn", "5"]) == 2
    assert "has one connection" in capsys.readouterr().err
    assert main(["show", str(RACE_188), "--at", "40", "--conn", "2"]) == 2
    assert main(["show", str(RACE_188), "--at", "76"]) == 0
    assert main(["show", str(RACE_188), "--conn", "1"]) == 0


def test_report_says_what_it_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bug.md"
    assert main(["report", str(RACE_188), "-o", str(out)]) == 0
    assert capsys.readouterr().err.strip() == f"rtrace report: markdown of 1 trace, 4 findings -> {out}"


def test_report_of_nothing_but_non_traces_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "package.json"
    junk.write_text('{"name": "x", "version": "1.0.0"}\n')
    for name in ("r.html", "r.md"):
        assert main(["report", str(junk), "-o", str(tmp_path / name)]) == 3
        assert "is not written" in capsys.readouterr().err and not (tmp_path / name).exists()
