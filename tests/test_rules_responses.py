"""Response rules on small traces."""

from __future__ import annotations

from rtrace.engine.fold import analyze_path

from .conftest import SAMPLES

RULES = SAMPLES / "rules"


def findings(name: str, slug: str) -> list[str]:
    return [f.explanation for f in analyze_path(RULES / name).findings if f.slug == slug]


def test_orphaned_by_replacement() -> None:
    [text] = findings("orphaned-generation/positive-replaced.jsonl", "orphaned-generation")
    assert "still open when another response was created at line 10" in text


def test_orphaned_by_close_but_not_by_trace_end(tmp_path: object) -> None:
    [text] = findings("orphaned-generation/positive-connection-closed.jsonl", "orphaned-generation")
    assert "the connection (server, network or client) cut it mid-response" in text
    assert "ask for the response again on the next connection" in text
    # the same trace without its close note: the recording stopped, not the response
    from pathlib import Path

    src = (RULES / "orphaned-generation/positive-connection-closed.jsonl").read_bytes().splitlines(keepends=True)
    cut = Path(str(tmp_path)) / "cut.jsonl"
    cut.write_bytes(b"".join(src[:-1]))
    assert not [f for f in analyze_path(cut).findings if f.slug == "orphaned-generation"]


def test_local_generation_overwritten() -> None:
    [text] = findings("orphaned-generation/positive-local-generation.jsonl", "orphaned-generation")
    assert "while the one opened at line 3 was still open" in text


def test_failed_not_retried_needs_the_end() -> None:
    [text] = findings("failed-response-not-retried/positive-never-retried.jsonl", "failed-response-not-retried")
    assert "server_error" in text


def test_retry_raced() -> None:
    [text] = findings("retry-raced-by-new-response/positive-server-vad-first.jsonl", "retry-raced-by-new-response")
    assert "another response was created at line 6" in text


def test_concurrent_create_rejected_with_event_id() -> None:
    [text] = findings("concurrent-response-create/positive-rejected.jsonl", "concurrent-response-create")
    assert "active since line 4" in text and "rejected it at line 6" in text


def test_server_error_joined_by_event_id() -> None:
    [text] = findings("server-error/positive-cancel-not-active.jsonl", "server-error")
    assert "It answers line 3 (response.cancel)" in text and "joined by error.event_id" in text


def test_server_error_says_the_order_join_was_restricted_to_what_the_code_answers() -> None:
    [text] = findings("ack-timeout/positive-cancel-error-is-not-the-delete.jsonl", "server-error")
    assert "It answers line 7 (response.cancel)" in text
    assert "by order, as the oldest pending response.cancel (response_cancel_not_active answers no other event)" in text


def test_server_error_session_level_is_joined_to_nothing() -> None:
    [text] = findings("unconfirmed-item-lost-on-reconnect/positive-session-expired-output.jsonl", "server-error")
    assert "A session-level error: it answers no client event." in text


def test_server_error_whose_kind_is_not_pending(tmp_path: object) -> None:
    from pathlib import Path

    from tests.tracebuilder import TraceBuilder, user_msg

    b = TraceBuilder()
    b.open()
    b.create(user_msg("item_u1", "hi"), prev="root")
    b.error("response_cancel_not_active", "Cancellation failed: no active response found", None, dt=0.01)
    path = b.write(Path(str(tmp_path)) / "t.jsonl")
    [finding] = [f for f in analyze_path(path).findings if f.slug == "server-error"]
    assert "response_cancel_not_active answers only response.cancel, and none is pending" in finding.explanation
    assert finding.lines == (4,)  # the create (line 3) is not its cause


def severities(name: str, slug: str) -> list[str]:
    return [f.severity for f in analyze_path(RULES / name).findings if f.slug == slug]


def test_a_response_cut_by_the_connection_is_a_warning_without_local_annotations() -> None:
    assert severities("orphaned-generation/positive-cut-by-server-fault.jsonl", "orphaned-generation") == ["warning"]
    [text] = findings("orphaned-generation/positive-cut-by-server-fault.jsonl", "orphaned-generation")
    assert "(code 1011)" in text and "The trace cannot show whether the client closed its own generation" in text
    # a replaced response is the server stream's own doing: still an error
    assert severities("orphaned-generation/positive-replaced.jsonl", "orphaned-generation") == ["error"]


def test_the_client_annotations_decide_a_cut_response() -> None:
    left_open = "orphaned-generation/positive-cut-generation-left-open.jsonl"
    assert severities(left_open, "orphaned-generation") == ["error"]  # one finding, not two
    [text] = findings(left_open, "orphaned-generation")
    assert "the client never closed its generation opened at line 3" in text
    assert not severities("orphaned-generation/negative-cut-client-closed-generation.jsonl", "orphaned-generation")


def test_the_recorder_side_of_a_close_is_named(tmp_path: object) -> None:
    from pathlib import Path

    src = (RULES / "orphaned-generation/positive-cut-by-server-fault.jsonl").read_bytes().splitlines(keepends=True)
    proxied = src[-1].replace(b'"code":1011', b'"code":1011,"by":"server"')
    path = Path(str(tmp_path)) / "proxied.jsonl"
    path.write_bytes(b"".join([*src[:-1], proxied]))
    [finding] = [f for f in analyze_path(path).findings if f.slug == "orphaned-generation"]
    assert "the recorder says the server closed it" in finding.explanation
