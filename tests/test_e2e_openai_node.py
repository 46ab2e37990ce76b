"""End to end: the official openai Node SDK 7.59.0 (`OpenAIRealtimeWS` of `openai/realtime/ws`;
tests/e2e/node/node_modules) driven by tests/e2e/node/openai_node_scenario.mjs against `rtrace serve --tls` at
50 ms latency, with and without the SDK's opt-in `reconnect`.

The SDK opens only `wss://` (`buildRealtimeURL`): it reaches serve through `--tls`, trusting the made authority by
`NODE_EXTRA_CA_CERTS`, at `wss://HOST/v1/realtime?model=...` from `baseURL`, or, as `AzureOpenAI` with
`OpenAIRealtimeWS.azure`, at `wss://HOST/openai/v1/realtime?model=DEPLOYMENT`. Without `reconnect` a close ends
the session. With it the SDK opens a new socket on a recoverable close (not 1000), queues what the application
sends meanwhile, and leaves restoring the session to the application before `flushPending()`: the driver, a
queue-and-flush application, flushes without restoring, so the new connection's first events are the old call's
output (rejected: the new session never saw the call) and a `response.create` answered from an empty session.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .realclients import (
    DROP_OUTPUT,
    FAULT_CLOSE_CODE,
    Client,
    Run,
    assert_closed_while_the_tool_ran,
    assert_dropped_on_the_output,
    assert_healthy,
    assert_slugs,
    common_tests,
    events_through_call,
    http_url,
    node_client,
    run,
    scenario_fixtures,
    trace_records,
)

pytestmark = pytest.mark.e2e


def client() -> Client:
    return node_client("openai-node", "openai_node_scenario.mjs", http_url, tls=True)


healthy, healthy_audio, reconnect, drop = scenario_fixtures(client)
test_healthy_audio_turn, test_audio_is_streamed, test_serve_calls_the_session_tool = common_tests(client)

RECONNECT = ("--reconnect",)


def test_healthy_turn(healthy: Run) -> None:
    assert healthy.summary["client_version"] == "7.59.0", healthy.explain()
    assert healthy.summary["url"].startswith("wss://127.0.0.1:"), healthy.explain()
    assert_healthy(healthy)
    (conn,) = healthy.conns()
    assert conn.close_code == 1000, healthy.explain()


def test_a_healthy_turn_with_reconnect_on_is_clean(tmp_path: Path) -> None:
    assert_healthy(run(client(), tmp_path, driver_args=RECONNECT))


def test_azure_path_with_the_deployment_as_model(tmp_path: Path) -> None:
    azure = run(client(), tmp_path, driver_args=("--azure",))
    assert_healthy(azure)
    (opened,) = [r["event"] for r in trace_records(azure.trace) if r["event"].get("type") == "connection.opened"]
    assert opened["route"] == "/openai/v1/realtime" and opened["protocol"] == "azure-openai", opened
    assert opened["model"] == "gpt-realtime", opened


def test_a_close_while_the_tool_runs_without_reconnect(reconnect: Run) -> None:
    assert_closed_while_the_tool_ran(reconnect, FAULT_CLOSE_CODE)
    assert len(reconnect.conns()) == 1 and reconnect.summary["reconnected"] == 0, reconnect.explain()
    assert_slugs(reconnect, {"unanswered-function-call"})


def test_output_dropped_before_its_ack_without_reconnect(drop: Run) -> None:
    assert_dropped_on_the_output(drop, FAULT_CLOSE_CODE)
    assert len(drop.conns()) == 1 and drop.summary["final_answer"] is None, drop.explain()
    assert_slugs(drop, {"unanswered-function-call", "changes-lost-at-final-close"})


def test_a_reconnect_that_only_flushes_restores_nothing(healthy: Run, tmp_path: Path) -> None:
    flushed = run(
        client(), tmp_path, driver_args=RECONNECT, close_after=events_through_call(healthy), close_code=FAULT_CLOSE_CODE
    )
    assert_closed_while_the_tool_ran(flushed, FAULT_CLOSE_CODE)
    _, second = flushed.conns()
    assert flushed.summary["reconnected"] == 1, flushed.explain()
    # conn 2: only what was queued while reconnecting: the output (of a call it never saw) and response.create
    assert second.creates() == ["function_call_output"] and second.sent("session.update") == 0, flushed.explain()
    assert second.sent("response.create") == 1 and second.errors() == ["invalid_tool_call_id"], flushed.explain()
    # the answer comes from an empty session; the old connection ended with the call unanswered
    assert flushed.summary["final_answer"] == "Hello! How can I help?", flushed.explain()
    expected = {"reconnect-restores-nothing", "unanswered-function-call", "output-for-unknown-call", "server-error"}
    assert_slugs(flushed, expected)


def test_output_dropped_before_its_ack_with_reconnect_is_lost(tmp_path: Path) -> None:
    dropped = run(client(), tmp_path, driver_args=RECONNECT, drop_on=DROP_OUTPUT, close_code=FAULT_CLOSE_CODE)
    assert_dropped_on_the_output(dropped, FAULT_CLOSE_CODE)
    _, second = dropped.conns()
    assert dropped.summary["reconnected"] == 1 and second.creates() == [], dropped.explain()
    assert_slugs(dropped, {"unanswered-function-call", "unconfirmed-item-lost-on-reconnect"})


def test_hunt_tls_reaches_the_wss_only_sdk_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`rtrace hunt --tls` with nothing added by hand: the SDK is given the https:// base URL and
    NODE_EXTRA_CA_CERTS by the hunt itself, its clean run passes over wss://, and the search's first faults (ack
    latencies, then drops) find a bug it reproduces."""
    import json

    from rtrace.cli import main

    from .conftest import client_node
    from .realclients import E2E, TOOL

    monkeypatch.setenv("RTRACE_TLS_DIR", str(tmp_path / "tls"))
    monkeypatch.delenv("NODE_EXTRA_CA_CERTS", raising=False)
    node, driver = client_node(), E2E / "node" / "openai_node_scenario.mjs"
    command = ["sh", "-c", f'exec "{node}" "{driver}" --url "$OPENAI_BASE_URL" --tool-name {TOOL} --timeout 10']
    args = ["hunt", "--tls", "--runs", "6", "-j", "2", "--timeout", "40s", "--shrink-runs", "1", "--repro-runs", "2",
            "--max-bugs", "2", "--fail-on", "warning", "--out", str(tmp_path / "h"),
            "-o", str(tmp_path / "hunt.json")]  # fmt: skip
    code = main([*args, "--", *command])
    doc = json.loads((tmp_path / "hunt.json").read_text(encoding="utf-8"))
    clean = tmp_path / "h" / "1" / "runs" / "run0001.jsonl"  # the hunt's own directory (a fresh one per hunt)
    opened = [r for r in trace_records(clean) if r["event"].get("type") == "connection.opened"]
    assert opened and opened[0]["event"]["path"].startswith("/v1/realtime"), doc
    assert doc["baseline"]["exit"] == "exit 0", doc
    assert code == 1 and doc["bugs"] and all(b["rate"] > 0 for b in doc["bugs"]), doc
