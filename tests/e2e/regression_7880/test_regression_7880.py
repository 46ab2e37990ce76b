"""Regression test for livekit/agents #7880, as its report asks: both tool-output push paths, against a fake endpoint
that acks each event 50 ms late (rtrace's `rtrace_server` fixture instead of a hand-written mock server).

The agent runs in its own environment (LIVEKIT_PYTHON) and is driven by tests/e2e/livekit_scenario.py
(LIVEKIT_SCENARIO). A push computed from a snapshot taken before the tool output's create was acknowledged deletes
that output: the session then has RT101 (deleted-function-call-output), and the plugin fails the test with it.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest


def run_agent(server, scenario: str) -> dict:
    """One run of the real agent against `server`; its summary line."""
    argv = [os.environ["LIVEKIT_PYTHON"], os.environ["LIVEKIT_SCENARIO"], "--url", server.url, "--scenario", scenario]
    done = subprocess.run([*argv, "--timeout", "20"], capture_output=True, text=True, timeout=45)
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["status"] == "done", done.stderr[-3000:]
    return summary


def client_events(server) -> list[dict]:
    lines = [json.loads(line) for line in server.trace.read_text().splitlines()[1:]]
    return [rec["event"] for rec in lines if rec["dir"] == "client"]


@pytest.mark.rtrace(latency="50ms")
def test_queued_speech_push_keeps_the_tool_output(rtrace_server) -> None:
    """The tool output is pushed once the speech queued during the tool has played; the next user turn's push goes
    out right behind it."""
    summary = run_agent(rtrace_server, "race")
    assert summary["tool_calls"] == ["Paris"] and "turn_c" in summary["marks"]


@pytest.mark.rtrace(latency="50ms", script="interrupted_tool_output.toml")
def test_interrupted_tool_output_push_keeps_the_tool_output(rtrace_server) -> None:
    """The turn that called the tool is interrupted after the tool returned: its output is pushed by the
    interrupted-generation path (after the response.cancel); the next user turn's push goes out right behind it."""
    summary = run_agent(rtrace_server, "interrupted")
    assert summary["tool_calls"] == ["Paris"] and "turn_c" in summary["marks"]
    kinds = [(e["type"], (e.get("item") or {}).get("type")) for e in client_events(rtrace_server)]
    output = kinds.index(("conversation.item.create", "function_call_output"))
    assert ("response.cancel", None) in kinds[:output]
