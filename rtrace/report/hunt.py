"""The output of `rtrace hunt`: a progress line per run on a terminal, then the report of one `HuntResult` in each
format `analyze` writes (terminal, JSON, Markdown, HTML, SARIF, JUnit).

Each bug: its rule id and slug, what it means and the likely fix, the minimal schedule (as the script and the flags
that run it by hand), the reproduction rate, the minimized trace, the one command that reproduces it; then the
clean run's baseline and the findings no re-run reproduced. Renders only; every text that came from a trace, a
path or the user's command is escaped for where it lands.
"""

from __future__ import annotations

import collections
import dataclasses
import html
import json
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.console import Console

from .. import __version__
from ..core.durations import format_duration
from ..core.escape import json_visible, shown
from ..net.hunt.hunt import Bug, HuntResult, Progress
from ..net.hunt.keys import SURVIVAL
from ..net.link.common import safe_url
from ..net.link.upstream import FAKE_ONLY
from ..rules import RULES
from .markdown import md_text

FORMATS = ("terminal", "json", "markdown", "html", "sarif", "junit")
#: How many of the faults a client gave up under the terminal names (the JSON has them all).
SEEN_SHOWN = 8


def progress_line(p: Progress) -> str:
    """One line after a run: runs done, distinct bugs so far, budget left, the run's schedule and outcome."""
    left = f", {round(p.elapsed)}s in"  # one unit, seconds, in every line
    if p.budget is not None:
        left += f", {max(0, round(p.budget - p.elapsed))}s of budget left"
    run = p.last
    what = ""
    if p.running is not None:
        what = f"  [{p.phase}] a run going on, {round(p.running)}s so far"
    elif run is not None:
        rules = ", ".join(sorted({k.rule for k in run.keys})) or "nothing"
        what = f"  [{run.phase}] {run.schedule.describe()}: {run.how()}, {rules}"
    bugs = f"{p.bugs} distinct bug{'s' if p.bugs != 1 else ''}"
    return shown(f"hunt: {p.runs} run{'s' if p.runs != 1 else ''}, {bugs}{left}{what}", 4096)


def counted(names: Iterable[str]) -> str:
    """`names` joined, each once in its first place, with how many times it came when more than once."""
    counts = collections.Counter(names)
    return ", ".join(f"{name} x{n}" if n > 1 else name for name, n in counts.items())


def rate(bug: Bug) -> str:
    return f"{bug.hits}/{bug.tries}"


def set_aside(result: HuntResult) -> list[tuple[str, list[Bug]]]:
    """The candidates that are no entry, under their heading: re-run and never reproduced (no bug), or never re-run
    at all (the budget ran out first: unknown, so never called "not a bug"; JSON `unconfirmed`)."""
    tried = [b for b in result.unconfirmed if b.tries]
    untried = [b for b in result.unconfirmed if not b.tries]
    headed = [("Not reproduced (not bugs)", tried), ("Unconfirmed (the budget ran out before any re-run)", untried)]
    return [(heading, bugs) for heading, bugs in headed if bugs]


def _rule_title(bug: Bug) -> str:
    return f"{bug.rule} {bug.slug}" if bug.rule != SURVIVAL else SURVIVAL


def render_terminal(result: HuntResult, console: Console) -> None:
    say = lambda text: console.print(shown(text, 8192), markup=False, soft_wrap=True, highlight=False)  # noqa: E731
    o = result.options
    searched = sum(1 for r in result.runs if r.phase in ("systematic", "random"))
    many = "s" if len(result.runs) != 1 else ""
    took = format_duration(round(result.elapsed))
    say(f"rtrace hunt: {len(result.runs)} run{many} ({searched} searching) in {took}, "
        f"seed {o.seed}; stopped: {result.stopped}")  # fmt: skip
    for line in _run_management_lines(result):
        say(line)
    if result.clean is not None:
        clean = result.clean
        found = counted(f"{f.rule} {f.slug}" for f in clean.findings) or "no finding"
        say(f"clean run: {clean.how()}, {found}  {clean.trace}")
        say(f"surface: {_surface_text(result)}")
    if result.clean_failed:
        say("the command failed its clean run: nothing to hunt (fix the run without faults first)")
        for line in result.clean.stderr_tail if result.clean else []:
            say(f"  {line}")
        return
    if not result.bugs:
        say("no bug found" + (" (the budget may be too short)" if result.stopped == "budget" else ""))
    for n, bug in enumerate(result.bugs, 1):
        console.print()
        say(f"bug {n}: {_rule_title(bug)} ({bug.severity}) - {bug.sentence or bug.message}")
        say(f"  about: {bug.cause.text() if bug.cause is not None else bug.key.text()}")
        if bug.sentence:
            say(f"  seen: {bug.message}")
        if bug.seen_under:
            shown_faults = "; ".join(bug.seen_under[:SEEN_SHOWN])
            more = len(bug.seen_under) - SEEN_SHOWN
            rest = f"; and {more} more" if more > 0 else ""
            say(f"  under each of {len(bug.seen_under)} faults: {shown_faults}{rest}")
        if bug.ended_early is not None:
            say(f"  ended early: quiet {format_duration(round(bug.ended_early, 1))} after the fault")
        if bug.also:
            say(f"  with it (the same defect, seen by other rules): {', '.join(bug.also)}")
        say(f"  minimal schedule: {bug.schedule.describe()} (found with: {bug.found.describe()})")
        say(f"  reproduced {rate(bug)} runs; shrinking took {bug.shrink_runs} runs")
        if bug.without_fault is not None and not bug.schedule.clean:
            say(f"  with no fault at all too: {bug.without_fault[0]}/{bug.without_fault[1]} runs (a race)")
        if bug.variants:
            say(f"  also under: {'; '.join(bug.variants)}")
        say(f"  why: {bug.explanation}")
        say(f"  fix: {bug.fix}")
        if bug.script is not None:
            say(f"  script: {bug.script}")
        if bug.test is not None:
            say(f"  regression test: {bug.test} (pytest; fails while the bug is there)")
        if bug.minimized is not None:
            say(f"  minimized trace: {bug.minimized}")
        elif bug.trace is not None:
            say(f"  trace: {bug.trace}")
        say(f"  reproduce: {bug.command}")
    if result.left_out:
        console.print()
        say(f"seen and not reported (over --max-bugs {o.max_bugs}): {len(result.left_out)}")
        for line in result.left_out:
            say(f"  {line}")
    for bug in result.unconfirmed:
        why = f"not reproduced (0/{bug.tries} re-runs, not a bug)" if bug.tries else "unconfirmed (never re-run)"
        say(f"{why}: {_rule_title(bug)} under {bug.found.describe()}")


def _run_management_lines(result: HuntResult) -> list[str]:
    """The hunt's own story: interrupted (partial) and what was not done, the budget's split, processes left."""
    out = []
    if result.interrupted is not None:
        out.append(f"interrupted ({result.interrupted}): a partial report")
    if result.not_done:
        out.append(f"not done: {'; '.join(result.not_done)}")
    if result.split:
        # in seconds, as the progress lines count them (one unit: the parts add up to the whole at a glance)
        out.append("time: " + ", ".join(f"{k} {round(v)}s" for k, v in result.split.items()))
    out += [f"run {run}: the command left pid {pid} running" for run, pid in result.strays]
    out += [f"run {r.index}: {r.how()}" for r in result.runs if r.cut in ("internal error", "trace not written")]
    return out


def summary_lines(result: HuntResult) -> list[str]:
    """A few lines for the terminal when the report goes elsewhere: how the hunt ended, a line per bug, where its
    artifacts are."""
    took = format_duration(round(result.elapsed))
    out = [f"rtrace hunt: {len(result.runs)} runs in {took}; stopped: {result.stopped}", *_run_management_lines(result)]
    if result.clean_failed:
        out.append("the command failed its clean run: nothing to hunt")
    out += [f"bug {n}: {_rule_title(b)} ({b.severity}, {rate(b)}) - {b.message}" for n, b in enumerate(result.bugs, 1)]
    if not result.bugs and not result.clean_failed:
        out.append("no bug found")
    out.append(f"artifacts: {result.options.out_dir}")
    return [shown(line, 4096) for line in out]


def _surface_text(result: HuntResult) -> str:
    s = result.surface
    return (f"{len(s.client)} client event kinds, {len(s.server)} server event kinds, {s.connections} "
            f"connection{'s' if s.connections != 1 else ''}, {s.responses} responses"
            + (", reconnects" if s.reconnects else ""))  # fmt: skip


def bug_json(bug: Bug) -> dict[str, Any]:
    return {
        "rule": bug.rule,
        "slug": bug.slug,
        "severity": bug.severity,
        "message": bug.message,
        "explanation": bug.explanation,
        "fix": bug.fix,
        "about": {"items": list(bug.key.items), "faults": list(bug.key.faults), "reaction": bug.key.reaction,
                  "point": bug.key.point},
        "cause": None if bug.cause is None else dataclasses.asdict(bug.cause),
        "sentence": bug.sentence,
        "seen_under": bug.seen_under,
        "ended_early": bug.ended_early,
        "with_it": bug.also,
        "rules": [{"rule": rule, "slug": slug} for rule, slug in bug.rules],
        "without_fault": None if bug.without_fault is None else
                         {"reproduced": bug.without_fault[0], "runs": bug.without_fault[1]},
        "also_under": bug.variants,
        "schedule": bug.schedule.to_json(),
        "schedule_text": bug.schedule.describe(),
        "script": bug.schedule.script_toml(),
        "serve_args": bug.schedule.serve_args(),
        "found_with": bug.found.to_json(),
        "reproduced": bug.hits,
        "runs": bug.tries,
        "rate": round(bug.rate, 3),
        "shrink_runs": bug.shrink_runs,
        "script_path": str(bug.script) if bug.script else None,
        "trace": str(bug.trace) if bug.trace else None,
        "minimized_trace": str(bug.minimized) if bug.minimized else None,
        "regression_test": str(bug.test) if bug.test else None,
        "command": bug.command,
    }


def result_json(result: HuntResult) -> dict[str, Any]:
    o = result.options
    clean = result.clean
    return {
        "tool": "rtrace",
        "version": __version__,
        "command": result.command,
        "seed": o.seed,
        "budget": o.budget,
        "runs_limit": o.runs,
        "jobs": o.jobs,
        "elapsed": round(result.elapsed, 3),
        "stopped": result.stopped,
        "interrupted": result.interrupted,
        "not_done": result.not_done,
        "split": {k: round(v, 3) for k, v in result.split.items()},
        "left_running": [{"run": run, "pid": pid} for run, pid in result.strays],
        "out_dir": str(o.out_dir),
        "runs": len(result.runs),
        "left_out": result.left_out,
        "search_runs": sum(1 for r in result.runs if r.phase in ("systematic", "random")),
        "baseline": None if clean is None else {
            "exit": clean.how(),
            "trace": str(clean.trace),
            "findings": [{"rule": f.rule, "slug": f.slug, "severity": f.severity, "message": f.message}
                         for f in clean.findings],
        },
        "surface": result.surface.to_json(),
        "upstream": None if o.upstream is None else {"url": safe_url(o.upstream), "left_out": list(FAKE_ONLY)},
        "bugs": [bug_json(b) for b in result.bugs],
        "not_reproduced": [bug_json(b) for b in result.unconfirmed if b.tries],
        "unconfirmed": [bug_json(b) for b in result.unconfirmed if not b.tries],
    }


def render_json(result: HuntResult) -> str:
    return _json(result_json(result))


def _json(doc: Any) -> str:
    """JSON text whose invisible characters (bidi controls, separators) are written as escapes."""
    return json_visible(json.dumps(doc, indent=2, ensure_ascii=False).encode("utf-8")).decode("utf-8") + "\n"


def render_markdown(result: HuntResult) -> str:
    out = [f"# rtrace hunt: {len(result.bugs)} bug{'s' if len(result.bugs) != 1 else ''}", ""]
    out.append(f"`{md_text(' '.join(result.command))}` · seed {result.options.seed} · {len(result.runs)} runs · "
               f"stopped: {result.stopped}")  # fmt: skip
    out.append("")
    for n, bug in enumerate(result.bugs, 1):
        out += [f"## Bug {n}: {md_text(_rule_title(bug))} ({bug.severity})", "", md_text(bug.message), ""]
        out += [f"- **about**: {md_text(bug.key.text())}",
                f"- **rules**: {md_text(', '.join(f'{r} {s}' for r, s in bug.rules))}",
                f"- **minimal schedule**: {md_text(bug.schedule.describe())}",
                f"- **reproduced**: {rate(bug)} runs",
                f"- **minimized trace**: `{md_text(str(bug.minimized or bug.trace or '-'))}`", ""]  # fmt: skip
        out += [md_text(bug.explanation, 8000), "", f"**Fix**: {md_text(bug.fix, 4000)}", ""]
        out += ["```toml", bug.schedule.script_toml().replace("```", "` ` `").rstrip(), "```", ""]
        out += ["Reproduce:", "", "```sh", bug.command.replace("```", "` ` `"), "```", ""]
    if result.clean is not None:
        found = ", ".join(f"{f.rule} {f.slug}" for f in result.clean.findings) or "no finding"
        out += ["## Clean run (baseline)", "", f"{md_text(result.clean.how())}: {md_text(found)}", ""]
    for heading, bugs in set_aside(result):
        out += [f"## {heading}", ""]
        out += [f"- {md_text(_rule_title(b))} under {md_text(b.found.describe())}: 0/{b.tries}" for b in bugs]
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _text_block(text: str, limit: int = 8000) -> str:
    """Multi-line text for a `<pre>`: each line shown (control characters escaped), the newlines kept."""
    return html.escape("\n".join(shown(line, limit) for line in text[:limit].splitlines()))


def trace_page(path: Path) -> str | None:
    """The page `rtrace report` writes of one trace (its timeline, both conversations, the findings), or None
    when it cannot be read."""
    from ..engine.fold import Report
    from ..rules.base import Config
    from . import html as report_html

    try:
        trace, data = report_html.analyze(str(path), Config(), RULES)
    except Exception:
        return None
    if trace.unreadable:
        return None
    return report_html.render(Report([trace], Config(), RULES), data=[data])


def render_html(result: HuntResult) -> str:
    """One self-contained page: each entry with its sentence, schedule, rate and fix, and the page `rtrace
    report` makes of its minimized trace embedded (an `iframe` whose `srcdoc` holds it whole: no link to a local
    path, no other file)."""
    e = html.escape
    parts = ["<!doctype html><html lang='en'><head><meta charset='utf-8'><title>rtrace hunt</title>",
             "<style>body{font-family:sans-serif;max-width:72em;margin:2em auto}pre{background:#f4f4f4;"
             "padding:.5em;overflow:auto}.error{color:#b00}.warning{color:#a60}"
             "iframe{width:100%;height:40em;border:1px solid #ccc}</style></head><body>",
             f"<h1>rtrace hunt: {len(result.bugs)} bug{'s' if len(result.bugs) != 1 else ''}</h1>",
             f"<p><code>{e(shown(' '.join(result.command), 4096))}</code> · seed {result.options.seed} · "
             f"{len(result.runs)} runs · stopped: {e(result.stopped)}</p>"]  # fmt: skip
    for n, bug in enumerate(result.bugs, 1):
        parts.append(f"<h2 class='{e(bug.severity)}'>Bug {n}: {e(shown(_rule_title(bug)))} ({e(bug.severity)})</h2>")
        parts.append(f"<p><b>{e(shown(bug.sentence or bug.message))}</b></p><ul>")
        about = bug.cause.text() if bug.cause is not None else bug.key.text()
        parts.append(f"<li>about: {e(shown(about))}</li><li>seen: {e(shown(bug.message))}</li>")
        parts.append(f"<li>rules: {e(shown(', '.join(f'{r} {s}' for r, s in bug.rules)))}</li>")
        parts.append(f"<li>minimal schedule: {e(shown(bug.schedule.describe()))}</li>")
        if bug.seen_under:
            parts.append(f"<li>under each of: {e(shown('; '.join(bug.seen_under), 8000))}</li>")
        if bug.variants:
            parts.append(f"<li>also under: {e(shown('; '.join(bug.variants), 8000))}</li>")
        if bug.ended_early is not None:
            parts.append(f"<li>ended early: quiet {e(format_duration(round(bug.ended_early, 1)))} after the fault</li>")
        parts.append(f"<li>reproduced: {rate(bug)} runs</li></ul>")
        parts.append(f"<p>{e(shown(bug.explanation, 8000))}</p><p><b>Fix</b>: {e(shown(bug.fix, 4000))}</p>")
        parts.append(f"<p>Its script (<code>rtrace serve --script</code> runs it):</p><pre>"
                     f"{_text_block(bug.schedule.script_toml())}</pre>")  # fmt: skip
        parts.append(f"<p>Reproduce:</p><pre>{e(shown(bug.command, 8000))}</pre>")
        page = trace_page(bug.minimized) if bug.minimized is not None else None
        if page is None and bug.trace is not None:
            page = trace_page(bug.trace)
        if page is not None:
            what = "minimized trace" if bug.minimized is not None else "trace"
            parts.append(f"<p>Its {what}, as <code>rtrace report</code> shows it:</p>")
            parts.append(f"<iframe title='bug {n}' sandbox='allow-scripts' srcdoc=\"{e(page, quote=True)}\">"
                         "</iframe>")  # fmt: skip
    if result.left_out:
        parts.append(f"<h2>Seen and not reported (over --max-bugs {result.options.max_bugs})</h2><ul>")
        parts += [f"<li>{e(shown(line, 4000))}</li>" for line in result.left_out]
        parts.append("</ul>")
    if result.clean is not None:
        found = ", ".join(f"{f.rule} {f.slug}" for f in result.clean.findings) or "no finding"
        parts.append(f"<h2>Clean run (baseline)</h2><p>{e(result.clean.how())}: {e(found)}</p>")
    for heading, bugs in set_aside(result):
        parts.append(f"<h2>{e(heading)}</h2><ul>")
        parts += [f"<li>{e(shown(_rule_title(b)))} under {e(shown(b.found.describe()))}: 0/{b.tries}</li>"
                  for b in bugs]  # fmt: skip
        parts.append("</ul>")
    parts.append("</body></html>\n")
    return "".join(parts)


_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def render_sarif(result: HuntResult) -> str:
    rules: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    results = []
    for bug in result.bugs:
        if bug.rule not in index:
            index[bug.rule] = len(rules)
            rule = next((r for r in RULES if r.id == bug.rule), None)
            name = rule.slug if rule is not None else SURVIVAL
            rules.append({"id": bug.rule, "name": name, "shortDescription": {"text": bug.message if rule is None
                          else (rule.doc() or name).strip().splitlines()[0]}})  # fmt: skip
        where = bug.minimized or bug.trace or bug.script
        location = {"physicalLocation": {"artifactLocation": {"uri": str(where).replace("\\", "/")}}} if where else None
        entry: dict[str, Any] = {
            "ruleId": bug.rule,
            "ruleIndex": index[bug.rule],
            "level": _LEVEL.get(bug.severity, "warning"),
            "message": {"text": shown(f"{bug.message} (reproduced {rate(bug)}; schedule: {bug.schedule.describe()}; "
                                      f"reproduce: {bug.command})", 8192)},
            "partialFingerprints": {"rtraceBug/v1": bug.key.text()},
            "properties": {"schedule": bug.schedule.to_json(), "rate": round(bug.rate, 3),
                           "rules": [{"rule": r, "slug": s} for r, s in bug.rules]},
        }
        if location is not None:
            entry["locations"] = [location]
        results.append(entry)
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "rtrace", "version": __version__, "rules": rules}},
                  "results": results}],
    }  # fmt: skip
    return _json(doc)


def _xml(text: str) -> str:
    return "".join(c for c in shown(text, 8192) if c in "\t\n" or ord(c) >= 0x20)


def render_junit(result: HuntResult) -> str:
    suite = ET.Element("testsuite", name="rtrace hunt", tests=str(max(1, len(result.bugs))),
                       failures=str(len(result.bugs)), time=f"{result.elapsed:.3f}")  # fmt: skip
    if not result.bugs:
        ET.SubElement(suite, "testcase", classname="rtrace.hunt", name="no bug found")
    for n, bug in enumerate(result.bugs, 1):
        case = ET.SubElement(suite, "testcase", classname="rtrace.hunt", name=_xml(f"bug {n}: {_rule_title(bug)}"))
        failure = ET.SubElement(case, "failure", message=_xml(bug.message), type=bug.rule)
        failure.text = _xml(f"{bug.explanation}\nschedule: {bug.schedule.describe()}\nreproduced {rate(bug)}\n"
                            f"reproduce: {bug.command}")  # fmt: skip
    root = ET.Element("testsuites")
    root.append(suite)
    return ET.tostring(root, encoding="unicode") + "\n"


def render(result: HuntResult, fmt: str) -> str:
    """The report in `fmt` (one of `FORMATS` but terminal)."""
    renderers = {"json": render_json, "markdown": render_markdown, "html": render_html, "sarif": render_sarif,
                 "junit": render_junit}  # fmt: skip
    return renderers[fmt](result)


__all__ = ["FORMATS", "progress_line", "render", "render_terminal", "result_json"]
