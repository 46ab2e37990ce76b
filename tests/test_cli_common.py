"""What the commands share: compressed traces and stdin, settings files, and the one grammar of durations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rtrace.cli import main

from .conftest import REAL

RACE_188 = REAL / "tool-output-race.livekit-1.8.8.jsonl"
RACE_189 = REAL / "tool-output-race.livekit-1.8.9.jsonl"


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
