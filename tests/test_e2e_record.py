"""End to end: the Node clients (agents-js 1.9.0, @openai/agents-realtime 0.20.0) pointed at `rtrace record`, whose
upstream is `rtrace serve`: the way to trace a client rtrace cannot record in process. The proxy's trace must give
the findings serve's own recording of the same session gives, healthy and under a fault."""

from __future__ import annotations

from pathlib import Path

import pytest

from .realclients import (
    DROP_OUTPUT,
    FAULT_CLOSE_CODE,
    ClientTrace,
    Run,
    assert_same_findings,
    events_through_call,
    proxied_run,
    trace_lines,
)
from .test_e2e_agentsjs import client as agentsjs
from .test_e2e_openai_agents_realtime import client as agents_realtime

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def agentsjs_healthy(tmp_path_factory: pytest.TempPathFactory) -> ClientTrace:
    return proxied_run(agentsjs(), tmp_path_factory.mktemp("agentsjs"))


def test_agentsjs_through_record_healthy(agentsjs_healthy: ClientTrace) -> None:
    assert agentsjs_healthy.serve.summary["ok"], agentsjs_healthy.explain()
    assert trace_lines(agentsjs_healthy.trace)[0]["recorder"] == "rtrace record"
    assert assert_same_findings(agentsjs_healthy) == set()
    assert agentsjs_healthy.slugs == set()


def test_agentsjs_through_record_reconnect(agentsjs_healthy: ClientTrace, tmp_path: Path) -> None:
    reference = Run("agents-js", {}, agentsjs_healthy.serve.trace, agentsjs_healthy.serve.report, "")
    rec = proxied_run(agentsjs(), tmp_path, close_after=events_through_call(reference), close_code=FAULT_CLOSE_CODE)
    assert rec.serve.summary["reconnected"] == 1, rec.explain()
    assert assert_same_findings(rec) == set()
    assert rec.slugs == {"unanswered-function-call", "function-call-lost-on-reconnect"}, rec.explain()


def test_agents_realtime_through_record_healthy(tmp_path: Path) -> None:
    rec = proxied_run(agents_realtime(), tmp_path)
    assert rec.serve.summary["ok"], rec.explain()
    assert assert_same_findings(rec) == set()
    assert rec.slugs == set()


def test_agents_realtime_through_record_drop(tmp_path: Path) -> None:
    rec = proxied_run(agents_realtime(), tmp_path, drop_on=DROP_OUTPUT, close_code=FAULT_CLOSE_CODE)
    # the client's response.create after the output was still in flight when serve closed: the same rules, one
    # more witness (allowed by assert_same_findings)
    assert assert_same_findings(rec) == set()
    assert rec.slugs == {"unanswered-function-call", "changes-lost-at-final-close"}, rec.explain()
