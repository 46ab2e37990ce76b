"""End to end: `rtrace hunt` given only a real client's driver command (tests/e2e/, each client in its own
environment) and a short budget, no hint of the fault: it finds #7880 (RT101) on livekit-agents 1.8.8 and not on
1.8.9, and the function call lost on reconnect (RT105) on livekit-agents 1.8.4 (the fake's drop or close) and,
through a link to an upstream, on @livekit/agents 1.9.0 (the link's drop or close; #7880 on 1.8.4 from the link's
latency); each bug's minimal schedule reproduces it at the rate the hunt states. (Each client once, each fault site
once: agents-js under the fake's own faults is tests/test_e2e_agentsjs.py's.)

The budgets are runs, not seconds: a loaded 2-core machine (`make test` beside other work) makes each run slower
but the hunt still reaches the point of the surface where the bug is (the systematic phase's order is the
client's surface, the same on any machine); each is a few runs past where `bench/bench_hunt.py`'s hunts first saw
the bug. Only the candidates the test looks at are confirmed (`max_bugs`): the long budgets, with every
candidate shrunk, are the benchmark.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rtrace.engine.fold import analyze_path
from rtrace.net.hunt.hunt import Bug, HuntOptions, HuntResult, hunt, records_of
from rtrace.net.hunt.keys import SURVIVAL

from .conftest import ROOT, client_node, client_python

pytestmark = pytest.mark.e2e

E2E = ROOT / "tests" / "e2e"
#: The drivers give up by themselves after this (a run the fault left hanging costs this much).
DRIVER_TIMEOUT = "10"


def livekit(version: str, scenario: str) -> list[str]:
    python = client_python(version)
    driver = E2E / "livekit_scenario.py"
    return ["sh", "-c", f'exec "{python}" "{driver}" --url "$RTRACE_URL" --scenario {scenario} '
            f"--timeout {DRIVER_TIMEOUT}"]  # fmt: skip


def agents_js() -> list[str]:
    node = client_node()
    driver = E2E / "node" / "agentsjs_scenario.mjs"
    return ["sh", "-c", f'exec "{node}" "{driver}" --url "$RTRACE_URL" --tool-name lookup_order '
            f"--timeout {DRIVER_TIMEOUT}"]  # fmt: skip


def run_hunt(command: list[str], out: Path, runs: int, max_bugs: int = 2) -> HuntResult:
    options = HuntOptions(budget=None, runs=runs, jobs=2, timeout=40, seed=1, shrink_runs=1, repro_runs=3,
                          max_bugs=max_bugs, out_dir=out)  # fmt: skip
    return hunt(command, options)


def explain(result: HuntResult) -> str:
    runs = [f"{r.index} [{r.phase}] {r.schedule.describe()}: {r.how()} {[k.text() for k in r.keys]}"
            for r in result.runs]  # fmt: skip
    bugs = [f"{b.key.text()} {b.hits}/{b.tries} {b.schedule.describe()}" for b in result.bugs]
    return "\n".join(["runs:", *runs, "bugs:", *bugs, f"stopped: {result.stopped}"])


def the_bug(result: HuntResult, rule: str) -> Bug:
    found = [b for b in result.bugs if rule in {r for r, _ in b.rules}]  # its entry, or one it is part of
    assert found, explain(result)
    bug = found[0]
    assert bug.reproduced and bug.tries == 3, explain(result)
    assert bug.script is not None and bug.script.exists(), explain(result)
    if bug.minimized is not None:
        assert bug.rule in {f.rule for f in analyze_path(bug.minimized).findings}, explain(result)
    return bug


def test_hunt_finds_7880_on_livekit_1_8_8(tmp_path: Path) -> None:
    result = run_hunt(livekit("1.8.8", "race"), tmp_path, runs=4)  # the first search run is 50 ms on every event
    bug = the_bug(result, "RT101")
    assert bug.slug == "deleted-function-call-output" and "function_call_output" in bug.key.items
    assert bug.minimized is not None, explain(result)


def test_hunt_does_not_find_7880_on_livekit_1_8_9(tmp_path: Path) -> None:
    result = run_hunt(livekit("1.8.9", "race"), tmp_path, runs=8, max_bugs=0)  # what 1.8.8 fails under, and more
    assert not result.clean_failed, explain(result)
    searched = [r for r in result.runs if r.phase in ("systematic", "random")]
    assert any(r.schedule.latency()[0] for r in searched), explain(result)  # it tried what 1.8.8 fails under
    assert not any(f.rule == "RT101" for r in result.runs for f in r.findings), explain(result)
    assert "RT101" not in {b.rule for b in result.bugs}, explain(result)


def test_hunt_finds_the_call_lost_on_reconnect_on_livekit_1_8_4(tmp_path: Path) -> None:
    result = run_hunt(livekit("1.8.4", "reconnect"), tmp_path, runs=12)  # a drop on the output's create is the 9th
    bug = the_bug(result, "RT105")
    assert bug.key.reaction.startswith("reconnected") and bug.rule != SURVIVAL, explain(result)
    assert [f.kind for f in bug.schedule.faults] in (["drop"], ["close"]), explain(result)


def link_hunt(command: list[str], out: Path, runs: int) -> HuntResult:
    """`rtrace hunt --upstream ws://127.0.0.1:P/v1` (P a plain serve): every run through a fault-injecting proxy."""
    from .test_net_link_upstream import Upstream

    with Upstream() as url:
        options = HuntOptions(budget=None, runs=runs, jobs=2, timeout=40, seed=1, shrink_runs=1, repro_runs=3,
                              max_bugs=2, out_dir=out, upstream=url)  # fmt: skip
        result = hunt(command, options)
    assert {"client", "server"} <= {r["dir"] for r in records_of(result.runs[0].trace)}, explain(result)
    return result


def test_hunt_through_a_link_finds_7880_on_livekit_1_8_4(tmp_path: Path) -> None:
    """#7880 (RT101), as the direct hunt finds it on 1.8.8: the link's latency on every upstream event."""
    the_bug(link_hunt(livekit("1.8.4", "race"), tmp_path, runs=4), "RT101")


def test_hunt_through_a_link_finds_the_call_lost_on_reconnect_on_livekit_agents_js_1_9_0(tmp_path: Path) -> None:
    """From a fault the link makes (a drop or close at an event), its command through the link; the Node client's
    key went upstream, into no artifact."""
    result = link_hunt(agents_js(), tmp_path, runs=12)
    bug = the_bug(result, "RT105")
    assert bug.key.reaction.startswith("reconnected") and "--upstream" in bug.command, explain(result)
    assert [f.kind for f in bug.schedule.faults] in (["drop"], ["close"]), explain(result)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert files and not [p for p in files if b"sk-rtrace-test-key" in p.read_bytes()]
