"""The CLI end to end, in-process: exit codes, formats, and that bad input never shows a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "--no-such-flag", str(RACE_188)]) == 2
    assert main(["frobnicate"]) == 2


def test_serve_and_sweep_check_their_options_and_script_before_starting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "bad.toml"
    script.write_text('[[turn]]\nwhen = { user = "x" }\n\nclose = 1015\n')
    assert main(["serve", "--script", str(script)]) == 2
    err = capsys.readouterr().err
    assert f"{script}:4: turn 1: `close` must be a close code" in err and "Traceback" not in err
    script.write_text("[[turn]\n")
    assert main(["sweep", "--runs", "1", "--script", str(script), "--", "true"]) == 2
    assert f"{script}:1:" in capsys.readouterr().err
    assert main(["serve", "--close-code", "1015"]) == 2
    assert "--close-code 1015" in capsys.readouterr().err
    assert main(["serve", "--tool", "x=[1]"]) == 2
    assert "must be a JSON object" in capsys.readouterr().err


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


def _without_paths(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in trace.items() if k != "path"} for trace in report["traces"]]


@pytest.mark.parametrize("codec", ["gzip", "bzip2", "xz", "zstd"])
def test_every_sample_compressed_gives_the_report_of_the_plain_file(tmp_path: Path, codec: str) -> None:
    import bz2
    import gzip
    import lzma

    import zstandard

    from .conftest import SAMPLES

    pack = {"gzip": gzip.compress, "bzip2": bz2.compress, "xz": lzma.compress,
            "zstd": zstandard.ZstdCompressor().compress}[codec]  # fmt: skip
    suffix = {"gzip": ".gz", "bzip2": ".bz2", "xz": ".xz", "zstd": ".zst"}[codec]
    samples = sorted(SAMPLES.rglob("*.jsonl"))
    packed = tmp_path / "packed"
    for path in samples:
        target = packed / path.relative_to(SAMPLES)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.with_name(target.name + suffix).write_bytes(pack(path.read_bytes()))
    plain_json, packed_json = tmp_path / "plain.json", tmp_path / "packed.json"
    code = main(["analyze", *map(str, samples), "--format", "json", "-o", str(plain_json), "--fail-on", "never"])
    assert main(["analyze", str(packed), "--format", "json", "-o", str(packed_json), "--fail-on", "never"]) == code
    plain, compressed = json.loads(plain_json.read_text()), json.loads(packed_json.read_text())
    assert len(compressed["traces"]) == len(samples)
    assert _without_paths(compressed) == _without_paths(plain)


def test_a_compressed_trace_on_stdin_and_what_is_no_trace_at_all(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import gzip
    import subprocess
    import sys

    packed = gzip.compress(RACE_188.read_bytes())
    run = [sys.executable, "-m", "rtrace.cli", "analyze", "-", "--format", "json"]
    done = subprocess.run(run, input=packed, capture_output=True, timeout=60)
    assert done.returncode == 1 and json.loads(done.stdout)["traces"][0]["events"] == 76
    for name, data in (("rand.gz", gzip.compress(bytes(range(256)) * 40)), ("package.json", b'{"name": "x"}\n')):
        path = tmp_path / name
        path.write_bytes(data)
        redact = ["redact", str(path), "-o", str(tmp_path / "o.jsonl")]
        for argv in (["analyze", str(path)], ["show", str(path)], redact):
            assert main(argv) == 3, argv
        assert not (tmp_path / "o.jsonl").exists()
    assert "Traceback" not in capfd.readouterr().err


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


def test_minimize_writes_the_reproducer_and_prints_its_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "min.jsonl"
    assert main(["minimize", str(RACE_188), "--rule", "deleted-function-call-output", "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert len(out.read_bytes().splitlines()) <= 12
    assert captured.err.startswith("rtrace minimize: 76 records -> 11 lines (RT101 deleted-function-call-output holds")
    assert "error   RT101 deleted-function-call-output" in captured.out
    # never its own input; a rule with no finding; an unknown rule
    copy = tmp_path / "race.jsonl"
    copy.write_bytes(RACE_188.read_bytes())
    assert main(["minimize", str(copy), "--rule", "RT101", "-o", str(copy)]) == 2
    assert copy.read_bytes() == RACE_188.read_bytes()
    assert main(["minimize", str(RACE_189), "--rule", "RT101", "-o", str(tmp_path / "x.jsonl")]) == 2
    assert main(["minimize", str(RACE_188), "--rule", "RT999", "-o", str(tmp_path / "x.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "is the input" in err and "RT101 deleted-function-call-output reports nothing here" in err
    assert "unknown rule 'RT999'" in err


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


# -- habits of the tools users trust (ruff, pytest, mitmproxy, httpie) -------------------------------------------------


@pytest.mark.parametrize(
    ("name", "starts"),
    [("r.json", b"{"), ("r.sarif", b"{"), ("r.xml", b"<?xml"), ("r.md", b"#"), ("r.html", b"<!doctype html"),
     ("r.txt", str(RACE_188).encode())],
)  # fmt: skip
def test_output_follows_the_extension(name: str, starts: bytes, tmp_path: Path) -> None:
    out = tmp_path / name
    assert main(["analyze", str(RACE_188), "-o", str(out)]) == 1
    assert out.read_bytes().lower().startswith(starts.lower())
    if name.endswith(".sarif"):
        assert json.loads(out.read_bytes())["version"] == "2.1.0"


def test_an_output_whose_extension_says_nothing_or_disagrees_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", str(RACE_188), "-o", str(tmp_path / "out.data")]) == 2
    assert "cannot tell the format from the extension" in capsys.readouterr().err
    assert main(["analyze", str(RACE_188), "-f", "json", "-o", str(tmp_path / "out.html")]) == 2
    assert "asks for html but --format says json" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    assert main(["analyze", str(RACE_188), "-f", "concise", "-o", str(tmp_path / "out.txt")]) == 1
    assert (tmp_path / "out.txt").read_text().startswith(f"{RACE_188}:")


def test_concise_is_one_line_per_finding_and_github_one_annotation_each(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(RACE_188), "-f", "concise"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and all(line.startswith(f"{RACE_188}:") for line in lines)
    assert f"{RACE_188}:47:1: RT101 [error] function_call_output" in lines[2]
    assert main(["analyze", str(RACE_188), "-f", "github"]) == 1
    annotations = capsys.readouterr().out.splitlines()
    assert [a.split(" ", 1)[0] for a in annotations] == ["::warning", "::error", "::error", "::warning"]


def test_quiet_prints_only_findings_and_nothing_when_clean(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(RACE_188), "-q"]) == 1
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 4 and "events" not in out
    assert main(["analyze", str(RACE_189), "-q", "--select", "RT101"]) == 0
    assert capsys.readouterr().out == ""


def test_statistics_counts_per_rule(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(RACE_188), "--statistics"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["2", "RT103", "unanswered-function-call", "warning"]
    assert sorted(line.split()[1] for line in lines[1:3]) == ["RT101", "RT102"]
    assert lines[-1] == "4 findings in 1 of 1 traces"


def _settings(folder: Path, text: str, name: str = "pyproject.toml") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)


def test_settings_from_pyproject_upward_and_the_command_line_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _settings(tmp_path, '[tool.rtrace]\nignore = ["RT103"]\nfail-on = "never"\n')
    (tmp_path / "deep" / "er").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "deep" / "er")
    assert main(["analyze", str(RACE_188), "--statistics"]) == 0  # fail-on never, RT103 ignored
    assert "RT103" not in capsys.readouterr().out
    assert main(["analyze", str(RACE_188), "--statistics", "--fail-on", "error"]) == 1
    assert main(["analyze", str(RACE_188), "--statistics", "--ignore", "RT101"]) == 0
    assert "RT103" in capsys.readouterr().out  # --ignore given: the file's list is not used
    assert main(["analyze", str(RACE_188), "--statistics", "--isolated"]) == 1
    _settings(tmp_path / "deep", 'fail-on = "error"\nselect = ["RT103"]\n', "rtrace.toml")
    assert main(["analyze", str(RACE_188), "--statistics"]) == 0  # the nearest file, not merged with the other
    assert capsys.readouterr().out.split()[1] == "RT103"


def test_settings_thresholds_and_explicit_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "ci.toml"
    config.write_text('ack-timeout = "1ms"\nselect = ["ack-timeout"]\n')
    assert main(["analyze", str(RACE_188), "--config", str(config), "-f", "json", "--fail-on", "warning"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["config"]["ack_timeout"] == 0.001 and data["rules"] == ["RT110"]
    assert data["traces"][0]["findings"]


@pytest.mark.parametrize(
    ("text", "says"),
    [("ignor = ['RT103']\n", "unknown key 'ignor' (did you mean 'ignore'?)"),
     ("ack-timeout = 5\n", "must be a duration string with a unit"),
     ("ack-timeout = '5'\n", "ack-timeout 5: a duration needs a unit: 5ms or 5s"),
     ("fail-on = 'sometimes'\n", "fail-on must be one of error, warning, info, never"),
     ("select = [\n", "not valid TOML")],
)  # fmt: skip
def test_a_wrong_setting_is_a_usage_error_naming_the_file_and_key(
    text: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "rtrace.toml"
    config.write_text(text)
    assert main(["analyze", str(RACE_189), "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert says in err and str(config) in err and "Traceback" not in err


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


def test_version_short_flag_and_python_dash_m() -> None:
    import subprocess
    import sys

    from rtrace import __version__

    for args in (["-m", "rtrace", "-V"], ["-m", "rtrace", "--version"]):
        done = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60)
        assert (done.returncode, done.stdout) == (0, f"rtrace {__version__}\n")
    done = subprocess.run([sys.executable, "-m", "rtrace", "analyze", str(RACE_188), "-q"], capture_output=True)
    assert done.returncode == 1 and done.stdout.count(b"\n") == 4


def test_shell_completion_is_on() -> None:
    import subprocess
    import sys

    rtrace = Path(sys.executable).parent / "rtrace"
    done = subprocess.run([str(rtrace), "--show-completion", "bash"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "complete -o default -F _rtrace_completion rtrace" in done.stdout


def test_every_command_help_has_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    import typer.main

    from rtrace.cli import app

    names = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    assert {"analyze", "report", "show", "serve", "sweep", "record", "replay", "redact", "convert"} <= set(names)
    for name in names:
        assert main([name, "--help"]) == 0
        out = capsys.readouterr().out
        assert "Example" in out and f"rtrace {name.replace('_', '-')}" in out, name


def test_piped_output_has_no_padding_and_follows_columns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["analyze", str(RACE_188)])
    out = capsys.readouterr().out
    assert all(line == line.rstrip() for line in out.splitlines()) and max(map(len, out.splitlines())) <= 120
    monkeypatch.setenv("COLUMNS", "70")
    main(["analyze", str(RACE_188)])
    narrow = capsys.readouterr().out.splitlines()
    assert max(map(len, narrow)) <= 70 and len(narrow) > len(out.splitlines())


# -- every command, every option, bad values: a usage error or a clean answer, never an internal error --------------

#: What each command needs to run at all (a bad option is added to it); `{tmp}` is the test's folder.
BASE: dict[str, list[str]] = {
    "analyze": [str(RACE_189)],
    "report": [str(RACE_189), "-o", "{tmp}/r.md"],
    "show": [str(RACE_189)],
    "rules": [],
    "redact": [str(RACE_189), "-o", "{tmp}/clean.jsonl"],
    "minimize": [str(RACE_188), "--rule", "RT101", "-o", "{tmp}/min.jsonl"],
    "serve": [],
    "sweep": ["--runs", "1", "--", "true"],
    "record": ["--upstream", "ws://127.0.0.1:9/v1", "-o", "{tmp}/rec.jsonl"],
    "convert": [str(RACE_189), "-o", "{tmp}/conv.jsonl"],
    "replay": [str(RACE_189)],
}
#: Values no option takes as meant; the ones that happen to be valid for an option just run it.
BAD = ["", "bogus", "-1", "99999999999999999999999", "nan", "\x1b[31mred"]


def _walk() -> list[tuple[str, str, str]]:
    import typer.main

    from rtrace.cli import app

    group = typer.main.get_command(app)
    cases = []
    for name, command in sorted(group.commands.items()):  # type: ignore[attr-defined]
        assert name in BASE, f"the walk does not know how to run `rtrace {name}`: add it to BASE"
        for param in command.params:
            if param.param_type_name != "option" or param.is_flag or param.name in ("help",):
                continue
            cases.extend((name, param.opts[0], value) for value in BAD)
    return cases


@pytest.fixture
def nothing_runs_forever(monkeypatch: pytest.MonkeyPatch) -> None:
    """Servers, proxies, sweeps and replays stop where they would start serving: the walk checks what the command
    line is given, not the network."""

    async def no_server(*args: object, **kwargs: object) -> None:
        return None

    monkeypatch.setattr("rtrace.net.server.serve_forever", no_server)
    monkeypatch.setattr("rtrace.net.proxy._record_forever", no_server)
    monkeypatch.setattr("rtrace.net.sweep.sweep_main", lambda *a, **k: pytest.skip("not reached"))
    monkeypatch.setattr("rtrace.net.replay.replay", lambda *a, **k: pytest.skip("not reached"))


def test_every_command_walked_with_bad_values_never_fails_inside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], nothing_runs_forever: None
) -> None:
    monkeypatch.chdir(tmp_path)  # a value taken as a file name lands here
    monkeypatch.setenv("RTRACE_NO_PROGRESS", "1")
    cases = _walk()
    assert len(cases) > 300
    seen: dict[int, int] = {}
    for command, option, value in cases:
        argv = [command, *(a.format(tmp=tmp_path) for a in BASE[command])]
        where = argv.index("--") if "--" in argv else len(argv)
        argv[where:where] = [option, value]
        try:
            code = main(argv)
        except pytest.skip.Exception:
            code = 0  # got past every check to the network: the value was valid
        err = capsys.readouterr().err
        assert code in (0, 1, 2, 3, 4), (argv, code, err)
        assert "Traceback" not in err and "internal error" not in err, (argv, err)
        assert "\x1b[31m" not in err, (argv, err)  # the value is shown, never obeyed
        seen[code] = seen.get(code, 0) + 1
    assert seen.get(2, 0) > len(cases) // 3  # most bad values are usage errors


#: Every option of every command that takes a time, each given a bare number: a usage error naming the option
#: and the fix, never a guess (serve read `--latency 50` as 50 s, sweep as 50 ms) and never an internal error.
BARE_DURATIONS = [
    (["analyze", str(RACE_189), "--ack-timeout", "5"], "--ack-timeout 5: a duration needs a unit: 5ms or 5s"),
    (["analyze", str(RACE_189), "--burst-window", "0.01"], "--burst-window 0.01: a duration needs a unit"),
    (["analyze", str(RACE_189), "--reply-timeout", "10"], "--reply-timeout 10: a duration needs a unit"),
    (["analyze", "--follow", str(RACE_189), "--follow-timeout", "30"], "--follow-timeout 30: a duration needs"),
    (["serve", "--latency", "50"], "--latency 50: a duration needs a unit: 50ms or 50s"),
    (["serve", "--latency", "conversation.item.added=120"], "--latency conversation.item.added=120: a duration"),
    (["serve", "--jitter", "5"], "--jitter 5: a duration needs a unit: 5ms or 5s"),
    (["serve", "--expire-after", "10"], "--expire-after 10: a duration needs a unit"),
    (["serve", "--story-chunk-delay", "60"], "--story-chunk-delay 60: a duration needs a unit"),
    (["sweep", "--latency", "0,10,50", "--", "true"], "--latency 0,10,50: a list of durations needs a unit"),
    (["sweep", "--timeout", "300", "--", "true"], "--timeout 300: a duration needs a unit"),
    (["replay", str(RACE_189), "--latency", "50"], "--latency 50: a duration needs a unit"),
    (["replay", str(RACE_189), "--timeout", "5"], "--timeout 5: a duration needs a unit: 5ms or 5s"),
]


@pytest.mark.parametrize(("argv", "message"), BARE_DURATIONS, ids=[f"{a[0]} {a[-2]}" for a, _ in BARE_DURATIONS])
def test_a_bare_number_for_a_time_is_a_usage_error_naming_the_fix(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert_usage_error(argv, message, capsys)


def assert_usage_error(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "internal error" not in err


def test_every_time_option_takes_units(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    argv = ["analyze", str(RACE_189), "--ack-timeout", "5s", "--burst-window", "10ms", "--reply-timeout", "0.5m"]
    assert main([*argv, "--format", "json", "-o", str(out)]) == 0  # `--ack-timeout 5s` was refused (a float option)
    config = json.loads(out.read_text())["config"]
    assert (config["ack_timeout"], config["burst_window"], config["reply_timeout"]) == (5.0, 0.01, 30.0)
    assert main(["analyze", str(RACE_189), "--ack-timeout", "0"]) == 0  # 0 needs no unit


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["serve", "--drop-on", "bogus.type"], "--drop-on bogus.type: 'bogus.type' is not a client event"),
        (["serve", "--latency", "foo=50ms"], "--latency foo: 'foo' is not a server event"),
        (["serve", "--drop-on", "conversation.item.creat"], "(did you mean conversation.item.create?)"),
        (["serve", "--error-on", "response.done"], "response.done is a server event; --error-on takes"),
        (["serve", "--drop-after", "conversation.item.create"], "conversation.item.create is a client event"),
        (["serve", "--drop-after", "response.done:function_cal"], "(did you mean function_call?)"),
        (["serve", "--latency", "conversation.item.created=5ms"], "the beta name of conversation.item.added"),
        (["replay", str(RACE_189), "--latency", "bogus=5ms"], "--latency bogus: 'bogus' is not a server event"),
    ],
)
def test_options_naming_event_types_are_checked_against_the_catalog(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`serve --drop-on bogus.type` was accepted and never fired."""
    assert_usage_error(argv, message, capsys)


def test_minimize_reads_a_compressed_trace_and_writes_one(tmp_path: Path) -> None:
    import bz2
    import gzip

    from rtrace.core.loader import compression_of_file

    packed, out = tmp_path / "race.jsonl.gz", tmp_path / "repro.jsonl.bz2"
    packed.write_bytes(gzip.compress(RACE_188.read_bytes()))
    assert main(["minimize", str(packed), "--rule", "RT101", "-o", str(out)]) == 0
    plain = tmp_path / "repro.jsonl"
    assert main(["minimize", str(RACE_188), "--rule", "RT101", "-o", str(plain)]) == 0
    assert compression_of_file(out) == "bzip2"
    assert bz2.decompress(out.read_bytes()).splitlines()[1:] == plain.read_bytes().splitlines()[1:]


def test_report_of_nothing_but_non_traces_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "package.json"
    junk.write_text('{"name": "x", "version": "1.0.0"}\n')
    for name in ("r.html", "r.md"):
        assert main(["report", str(junk), "-o", str(tmp_path / name)]) == 3
        assert "is not written" in capsys.readouterr().err and not (tmp_path / name).exists()
