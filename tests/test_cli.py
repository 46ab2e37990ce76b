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
    for option, expected in ((["--reply-timeout", "20"], []), ([], ["RT125"])):
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
