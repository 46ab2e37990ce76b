"""The report of `rtrace hunt` (rtrace/report/hunt.py) in every format, from a result made by hand: each bug with
its rule id and slug, minimal schedule as a script, rate, minimized trace and command; the baseline; hostile
text from a trace or the command shown, never obeyed."""

from __future__ import annotations

import dataclasses
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

from rtrace.net.faults.schedule import Fault, Schedule
from rtrace.net.faults.script import parse_script
from rtrace.net.hunt.hunt import Bug, HuntOptions, HuntResult, Progress, Run
from rtrace.net.hunt.keys import SURVIVAL, BugKey
from rtrace.net.hunt.search import Surface
from rtrace.report.console import plain_console
from rtrace.report.hunt import progress_line, render, render_terminal, result_json

HOSTILE = "\x1b[31mred\u202e</pre><script>x</script>"


def result(tmp_path: Path) -> HuntResult:
    latency = Schedule((Fault("latency", "all", "*", 0.025),), 5)
    drop = Schedule((Fault("drop", "event", "conversation.item.create:function_call_output", 1006),))
    bug = Bug(BugKey("RT101", ("function_call_output",), ("latency",), "continued"), "error",
              "deleted-function-call-output", f"output deleted {HOSTILE}", "Line 16 created ...", "Diff pushes ...",
              Schedule((Fault("latency", "all", "*", 0.05),)), latency, 9, 10,
              trace=tmp_path / "run0002.jsonl", minimized=tmp_path / "bug-1.min.jsonl", script=tmp_path / "bug-1.toml",
              command="rtrace hunt --schedule bug-1.toml --runs 10 -- python agent.py", shrink_runs=3,
              also=["RT102 stale-snapshot-delete"],
              rules=[("RT101", "deleted-function-call-output"), ("RT102", "stale-snapshot-delete")])  # fmt: skip
    survival = Bug(BugKey(SURVIVAL, ("exit 1",), ("drop event",), "gave up"), "error", SURVIVAL,
                   "the client did not survive this fault (exit 1)", "...", "Make the client recover", drop, drop,
                   3, 3, command="rtrace hunt ...", how="exit 1")  # fmt: skip
    flaky = Bug(BugKey("RT102", (), ("latency",), "continued"), "error", "stale-snapshot-delete", "m", "e", "f",
                latency, latency, 0, 10)  # fmt: skip
    clean = Run(1, "clean run", Schedule(), tmp_path / "run0001.jsonl", 0, 1.0)
    return HuntResult([f"python agent.py {HOSTILE}"], HuntOptions(seed=5), clean, Surface(connections=1), [clean],
                      [bug, survival], [flaky], 12.0, "budget")  # fmt: skip


def test_json_carries_each_bugs_rule_id_slug_rate_script_and_command(tmp_path: Path) -> None:
    doc = json.loads(render(result(tmp_path), "json"))
    first = doc["bugs"][0]
    assert (first["rule"], first["slug"], first["reproduced"], first["runs"], first["rate"]) == (
        "RT101", "deleted-function-call-output", 9, 10, 0.9
    )  # fmt: skip
    assert first["serve_args"] == ["--latency", "25ms", "--seed", "5"]
    assert first["minimized_trace"].endswith("bug-1.min.jsonl") and first["command"].startswith("rtrace hunt")
    assert doc["bugs"][1]["rule"] == SURVIVAL
    # one defect seen by two rules is one entry that carries each rule's id and slug
    assert first["rules"] == [{"rule": "RT101", "slug": "deleted-function-call-output"},
                              {"rule": "RT102", "slug": "stale-snapshot-delete"}]  # fmt: skip
    assert doc["bugs"][1]["rules"] == [{"rule": SURVIVAL, "slug": SURVIVAL}]
    assert [b["slug"] for b in doc["not_reproduced"]] == ["stale-snapshot-delete"]
    assert doc["baseline"] == {"exit": "exit 0", "trace": str(tmp_path / "run0001.jsonl"), "findings": []}
    assert doc == result_json(result(tmp_path)) | {"command": doc["command"]}


def test_the_script_in_a_report_is_one_serve_reads(tmp_path: Path) -> None:
    doc = json.loads(render(result(tmp_path), "json"))
    parse_script(doc["bugs"][1]["script"])
    assert "```toml" in render(result(tmp_path), "markdown")


def test_terminal_lists_bugs_then_what_did_not_reproduce(tmp_path: Path) -> None:
    out = io.StringIO()
    render_terminal(result(tmp_path), plain_console(out, width=200))
    text = out.getvalue()
    assert "bug 1: RT101 deleted-function-call-output (error)" in text
    assert "reproduced 9/10 runs" in text and "minimal schedule: ack latency 25ms on every server event" in text
    assert "with it (the same defect, seen by other rules): RT102 stale-snapshot-delete" in text
    assert "bug 2: client-did-not-survive (error)" in text
    assert "not reproduced (0/10 re-runs, not a bug): RT102 stale-snapshot-delete" in text
    assert "\x1b" not in text and "\u202e" not in text


def test_hostile_text_is_escaped_in_every_format(tmp_path: Path) -> None:
    for fmt in ("json", "markdown", "html", "sarif", "junit"):
        text = render(result(tmp_path), fmt)
        assert "\x1b" not in text and "\u202e" not in text, fmt
    assert "<script>" not in render(result(tmp_path), "html")
    assert "<script>" not in render(result(tmp_path), "markdown")


def test_sarif_and_junit_have_one_entry_per_bug(tmp_path: Path) -> None:
    sarif = json.loads(render(result(tmp_path), "sarif"))
    results = sarif["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == ["RT101", SURVIVAL]
    assert results[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("bug-1.min.jsonl")
    assert {r["id"] for r in sarif["runs"][0]["tool"]["driver"]["rules"]} == {"RT101", SURVIVAL}
    suite = ET.fromstring(render(result(tmp_path), "junit")).find("testsuite")
    assert suite is not None and suite.get("failures") == "2"


def test_progress_says_runs_bugs_and_budget_left(tmp_path: Path) -> None:
    run = Run(3, "systematic", Schedule((Fault("latency", "all", "*", 0.05),)), tmp_path / "r.jsonl", 0, 1.0)
    line = progress_line(Progress("systematic", 3, 1, 40.0, 600.0, run))
    assert line.startswith("hunt: 3 runs, 1 distinct bug, 40s in, 560s of budget left  [systematic] ack latency 50ms")
    going = progress_line(Progress("clean run", 0, 0, 0.4, 600.0, None, running=0.0))
    assert going == "hunt: 0 runs, 0 distinct bugs, 0s in, 600s of budget left  [clean run] a run going on, 0s so far"


def test_a_finding_repeated_in_the_clean_run_is_one_line_with_its_count() -> None:
    from rtrace.report.hunt import counted

    assert counted(["RT112 server-error"] * 101 + ["RT101 x"]) == "RT112 server-error x101, RT101 x"
    assert counted([]) == ""


def test_the_html_report_is_one_file_with_each_entrys_report_page_embedded(tmp_path: Path) -> None:
    """Each entry carries the page `rtrace report` makes of its minimized trace, whole (an iframe's `srcdoc`): no
    link to a local path, no other file; its script's newlines are newlines, not `\\x0a`."""
    import shutil

    from .conftest import REAL

    shutil.copy(REAL / "tool-output-race.livekit-1.8.8.jsonl", tmp_path / "bug-1.min.jsonl")
    multi = Schedule((Fault("latency", "all", "*", 0.05), Fault("drop", "event", "response.create", 1006)))
    hunted = result(tmp_path)
    hunted.bugs[0].schedule = multi
    page = render(hunted, "html")
    assert page.count("<iframe") == 1 and "srcdoc=\"&lt;!DOCTYPE html&gt;" in page
    assert "rtrace-data" in page and "deleted-function-call-output" in page  # the report page's own data
    assert "\\x0a" not in page and "[[turn]]\nwhen" in page
    assert "href=" not in page.split("<iframe")[0] and "file:" not in page


def test_the_time_split_is_said_in_the_progress_lines_unit(tmp_path: Path) -> None:
    res = result(tmp_path)
    res.split = {"clean run": 2.6, "search": 145.0, "confirming": 93.4}
    out = io.StringIO()
    render_terminal(res, plain_console(out))
    assert "time: clean run 3s, search 145s, confirming 93s" in out.getvalue()


def test_a_candidate_never_re_run_is_unconfirmed_never_not_a_bug(tmp_path: Path) -> None:
    """A budget that ran out before a candidate's first re-run (0/0) says nothing of it: it is listed apart as
    unconfirmed in every format, and only what was re-run and never reproduced is called "not a bug"."""
    done = result(tmp_path)
    untried = dataclasses.replace(done.unconfirmed[0], slug="turn-never-completed", hits=0, tries=0,
                                  key=BugKey("RT126", (), ("close sent",), "hung"))  # fmt: skip
    done = dataclasses.replace(done, unconfirmed=[*done.unconfirmed, untried])
    doc = json.loads(render(done, "json"))
    assert [b["slug"] for b in doc["not_reproduced"]] == ["stale-snapshot-delete"]
    assert [b["slug"] for b in doc["unconfirmed"]] == ["turn-never-completed"]
    out = io.StringIO()
    render_terminal(done, plain_console(out, width=200))
    assert "not reproduced (0/10 re-runs, not a bug): RT102" in out.getvalue()
    assert "unconfirmed (never re-run): RT126" in out.getvalue() and "0/0 re-runs" not in out.getvalue()
    for fmt in ("markdown", "html"):
        text = render(done, fmt)
        aside, unconfirmed = text.split("Not reproduced (not bugs)")[1].split("Unconfirmed (the budget ran out")
        assert "RT102" in aside and "RT126" not in aside and "RT126" in unconfirmed, fmt
