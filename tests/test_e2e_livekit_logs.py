"""End to end: livekit-agents' own logs (`LK_OPENAI_DEBUG=1`, livekit's `setup_logging` in its production JSON
format and its dev format) of a real client run against `rtrace serve`, analysed by `rtrace analyze agent.log`,
give the findings of serve's recording of the same run, and a reconnect, whose replay a log never shows, gives
no false finding (the rules that judge a replay say they could not).

The client runs tests/e2e/livekit_scenario.py (`--log json:PATH --log dev:PATH`: both handlers in one run, so both
logs go with one serve trace); the server runs in this process.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from rtrace.cli import main
from rtrace.engine.fold import TraceReport, analyze_path
from rtrace.engine.parallel import analyze_file
from rtrace.rules import RULES
from rtrace.rules.base import Config

from .conftest import client_python
from .realclients import drive

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "tests" / "e2e" / "livekit_scenario.py"
SCENARIO_TIMEOUT = 20.0
FORMATS = ("json", "dev")


async def _drive(python: Path, scenario: str, trace: Path, logs: dict[str, Path], **faults: Any) -> dict[str, Any]:
    from rtrace.net.faults.flags import Faults
    from rtrace.net.faults.script import Schedule
    from rtrace.net.link.server import ServerOptions, run_server

    options = ServerOptions(latency=0.05, record=trace, schedule=Schedule.of(Faults(times=1, **faults)))
    async with run_server(options) as server:
        argv = [str(python), str(SCENARIO), "--url", server.url, "--scenario", scenario]
        argv += ["--timeout", str(SCENARIO_TIMEOUT)]
        for kind, path in logs.items():
            argv += ["--log", f"{kind}:{path}"]
        summary, stderr = await drive(f"livekit {scenario} (logs)", argv, SCENARIO_TIMEOUT, {"LK_OPENAI_DEBUG": "1"})
    assert summary.get("status") == "done", f"{summary}\nstderr tail:\n{stderr[-3000:]}"
    return summary


def _run(version: str, scenario: str, tmp_path: Path, **faults: Any) -> tuple[TraceReport, dict[str, TraceReport]]:
    trace = tmp_path / f"{scenario}.serve.jsonl"
    logs = {kind: tmp_path / f"{scenario}-{kind}.log" for kind in FORMATS}
    summary = asyncio.run(_drive(client_python(version), scenario, trace, logs, **faults))
    assert summary["livekit_agents"] == version, summary
    served = analyze_path(trace)
    from_logs = {kind: analyze_file(str(path), Config(), RULES, 1 << 24) for kind, path in logs.items()}
    for kind, report in from_logs.items():
        assert report.unreadable is None and report.events > 0, (kind, report.unreadable)
        assert report.header is not None and report.header.fields["log_format"] == kind
    return served, from_logs


def _findings(report: TraceReport) -> list[tuple[str, int, tuple[tuple[str, tuple[str, ...]], ...]]]:
    """What a finding says, apart from line numbers (a log's are its own): rule, connection, the ids it names."""
    return sorted((f.rule, f.conn, tuple(sorted(f.ids.items()))) for f in report.findings)


def _explain(served: TraceReport, logs: dict[str, TraceReport]) -> str:
    lines = [f"serve: {[(f.rule, f.lines) for f in served.findings]}"]
    for kind, r in logs.items():
        lines.append(f"{kind}: {[(f.rule, f.lines) for f in r.findings]} problems={r.problems[:3]}")
    return "\n".join(lines)


@pytest.mark.parametrize("version", ["1.8.8", "1.8.9"])
def test_a_race_log_gives_the_findings_of_serves_recording(tmp_path: Path, version: str) -> None:
    served, logs = _run(version, "race", tmp_path)
    rules = {f.rule for f in served.findings}
    if version == "1.8.8":
        assert "RT101" in rules, _explain(served, logs)
    else:
        assert not [f for f in served.findings if f.severity == "error"], _explain(served, logs)
    for kind, report in logs.items():
        assert _findings(report) == _findings(served), f"{kind}\n{_explain(served, logs)}"
        for side in ("client", "server"):  # every event once: `unhandled event:` repeats are not counted
            assert report.by_dir.get(side) == served.by_dir.get(side), (kind, report.by_dir, served.by_dir)
        assert report.not_judged == [t for t in report.not_judged if t.what == "output-audio-bytes"]
    # the CLI says the same: exit 1 on 1.8.8's error, 0 on 1.8.9; the JSON names what a log cannot show
    out = tmp_path / "report.json"
    code = main(["analyze", str(tmp_path / "race-json.log"), "--format", "json", "-o", str(out)])
    assert code == (1 if version == "1.8.8" else 0)
    data = json.loads(out.read_text())["traces"][0]
    assert data["header"]["source_format"] == "livekit-log"
    assert [n["what"] for n in data["not_judged"]] == ["output-audio-bytes"]


@pytest.mark.parametrize("version", ["1.8.8", "1.8.9"])
def test_a_reconnect_log_gives_no_false_finding(
    tmp_path: Path, version: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # the socket drops when the tool output's create arrives: the replay (never logged) sends it again
    served, logs = _run(version, "reconnect", tmp_path, drop_on=["conversation.item.create:function_call_output"])
    assert served.connections == 2, _explain(served, logs)
    for kind, report in logs.items():
        assert report.connections == 2, f"{kind}\n{_explain(served, logs)}"
        assert set(_findings(report)) <= set(_findings(served)), f"{kind}\n{_explain(served, logs)}"
        blind = {n.what: n.rules for n in report.not_judged}
        assert {"RT105", "RT106", "RT123"} <= set(blind.get("reconnect-replay", ())), report.not_judged
    capsys.readouterr()
    main(["analyze", str(tmp_path / "reconnect-dev.log")])
    out = capsys.readouterr().out
    assert "not judged by RT105, RT106" in out and "replay_visible: false" in out, out
