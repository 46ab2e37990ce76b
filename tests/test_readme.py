"""README and the documentation pages of docs/, run: README's pytest example under pytester, docs/testing.md's
`minimize` command on the bundled trace (with the sizes it states), its live line and the Vitest files CI runs it
quotes, every `rtrace` command README and the pages show, and their links (nothing outside the repository)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from rtrace.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
SECTION = README.split("## Use rtrace in your tests")[1].split("\n## ")[0]
#: The documentation site's pages (mkdocs.yml: docs_dir), every Markdown file under docs/.
PAGES = sorted((ROOT / "docs").rglob("*.md"))
TESTING = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
pytest_plugins = ("pytester",)


def blocks(text: str, info: str = "") -> list[str]:
    """The fenced code blocks of `text` with that info string, in order."""
    found, body, opened = [], [], None
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            if opened is None:
                opened, body = line[3:].strip(), []
            else:
                if opened == info:
                    found.append("".join(body))
                opened = None
        elif opened is not None:
            body.append(line)
    return found


def test_the_pytest_example_passes_and_fails_as_the_readme_says(pytester: pytest.Pytester) -> None:
    (example,) = blocks(SECTION, "python")
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_agent=example)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)
    # without fail_on="never" the deleted tool output fails the test, with the finding and the kept trace
    pytester.makepyfile(test_agent=example.replace('@pytest.mark.rtrace(fail_on="never")', ""))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["rtrace: * at or above error in this test's session; trace kept at *", "*RT101 deleted-function-call-output*"]
    )


def test_docs_testing_quotes_the_readme_example() -> None:
    """One example, shown in both places (the page is the site's, README the onboarding); it cannot drift."""
    assert blocks(TESTING, "python") == blocks(SECTION, "python")


def test_the_minimize_command_gives_the_sizes_the_docs_state(tmp_path: Path) -> None:
    minimizing = TESTING.split("## Minimal reproducers")[1]
    (command,) = [line for line in blocks(minimizing)[0].splitlines() if line.startswith("rtrace minimize ")]
    argv = shlex.split(command.split("#")[0])
    argv[argv.index("-o") + 1] = str(tmp_path / "min.jsonl")
    done = subprocess.run([sys.executable, "-m", "rtrace.cli", *argv[1:]], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 1, done.stderr  # the reproducer's report has RT101, an error: exit 1 (--fail-on)
    written = len((tmp_path / "min.jsonl").read_bytes().splitlines())
    assert written <= 12
    assert f"76 records -> {written} lines (RT101 deleted-function-call-output holds" in done.stderr
    assert f"the 76-line 1.8.8 race becomes {written} lines that still give RT101" in " ".join(minimizing.split())


def test_the_live_line_shown_is_the_one_analyze_follow_prints(capsys: pytest.CaptureFixture[str]) -> None:
    (shown,) = [line for line in TESTING.splitlines() if line.startswith("error RT101 deleted-function-call-output")]
    race = ROOT / "sample_traces" / "real" / "tool-output-race.livekit-1.8.8.jsonl"
    assert main(["analyze", "--follow", "--follow-timeout", "100ms", str(race)]) == 1
    assert shown in capsys.readouterr().err.splitlines()


def test_docs_testing_quotes_the_vitest_files_ci_runs() -> None:
    setup, config = blocks(TESTING, "js")[:2]
    folder = ROOT / "tests" / "e2e" / "node" / "vitest"
    assert setup == (folder / "rtrace.globalSetup.mjs").read_text(encoding="utf-8")
    assert config == "// vitest.config.mjs\n" + (folder / "vitest.config.mjs").read_text(encoding="utf-8")
    assert "(docs/testing.md)" in SECTION


# -- every command README and the docs show is run (docs cannot rot) --------------------------------------------------

#: A client for the sweep line (`-- pytest tests/test_my_agent.py`): one plain turn against the fake endpoint.
MY_AGENT_TEST = '''
import asyncio, json, os
import websockets

def test_one_turn():
    async def turn():
        async with websockets.connect(os.environ["RTRACE_REALTIME_URL"]) as ws:
            assert json.loads(await ws.recv())["type"] == "session.created"
            await ws.send(json.dumps({"type": "conversation.item.create", "item": {"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": "hello"}]}}))
            await ws.send(json.dumps({"type": "response.create"}))
            while json.loads(await ws.recv())["type"] != "response.done":
                pass
    asyncio.run(turn())
'''
#: Commands that serve until Ctrl-C: started, their announcement read, then SIGTERM (exit 0).
SERVING = ("serve", "record")


def readme_commands() -> list[tuple[str, list[str]]]:
    """("file:line", argv) of every `rtrace ...` line in the plain fenced blocks of README and of the docs pages
    (comments dropped; a command shown twice is run once, at its first place). docs/capture.md's tagged snippets
    (`sh capture=NAME`) are run with the real clients by tests/test_docs_capture.py."""
    found: dict[tuple[str, ...], str] = {}
    for doc in [ROOT / "README.md", *PAGES]:
        opened = None
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            if line.startswith("```"):
                opened = line[3:].strip() if opened is None else None
                continue
            if opened in ("", "sh", "bash", "console") and line.lstrip().startswith("rtrace "):
                found.setdefault(tuple(shlex.split(line, comments=True)), f"{doc.relative_to(ROOT)}:{number}")
    return [(place, list(argv)) for argv, place in found.items()]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding every file README's commands name: traces, a fleet, a HAR, the scenario script."""
    import gzip
    import json
    import shutil

    from .test_core_importers import har_of

    work = tmp_path_factory.mktemp("readme")
    real = ROOT / "sample_traces" / "real"
    race = real / "tool-output-race.livekit-1.8.8.jsonl"
    reconnect = real / "reconnect-during-tool.livekit-1.8.4.jsonl"  # two connections: `show --conn 2` has one
    for name, trace in (("trace.jsonl", reconnect), ("a.jsonl", race), ("b.jsonl", reconnect)):
        shutil.copy(trace, work / name)
    shutil.copy(race, work / "recorded.jsonl")
    (work / "trace.jsonl.gz").write_bytes(gzip.compress(reconnect.read_bytes()))
    shutil.copy(ROOT / "tests" / "golden" / "livekit-logs" / "1.8.8-race-json.log", work / "agent.log")
    shutil.copytree(real, work / "sample_traces" / "real")  # README's commands on the bundled traces
    (work / "traces").mkdir()
    for trace in real.glob("*.jsonl"):
        shutil.copy(trace, work / "traces" / trace.name)
    (work / "capture.har").write_text(json.dumps(har_of(race)))
    shutil.copy(ROOT / "tests" / "golden" / "cassettes" / "tool-round.yaml", work / "cassette.yaml")
    docs = "".join(page.read_text(encoding="utf-8") for page in PAGES)
    (script,) = [b for b in blocks(docs, "toml") if b.startswith("# scenario.toml")]
    (work / "scenario.toml").write_text(script)
    (work / "tests").mkdir()
    (work / "tests" / "test_my_agent.py").write_text(MY_AGENT_TEST)
    shutil.copy(ROOT / "tests" / "sweep_client.py", work / "tests")  # docs/hunt.md's example client
    shutil.copy(ROOT / "tests" / "hardcoded_client.py", work / "tests")  # docs/upstream.md's (--intercept)
    assert main(["analyze", str(work / "traces"), "--baseline", str(work / "known.json"), "--write-baseline"]) == 0
    return work


def _env(work: Path) -> dict[str, str]:
    import os

    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", RTRACE_NO_PROGRESS="1")
    env["OPENAI_API_KEY"] = "sk-readme-test-not-a-key"  # the --api-key-env line; nothing listens for it here
    return env


@pytest.mark.parametrize(("line", "argv"), readme_commands(), ids=[place for place, _ in readme_commands()])
def test_every_readme_command_runs_as_written(line: str, argv: list[str], workdir: Path) -> None:
    import signal

    command = [sys.executable, "-m", "rtrace", *argv[1:]]
    if argv[1] in SERVING:
        proc = subprocess.Popen(command, cwd=workdir, env=_env(workdir), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None
        announced = [proc.stdout.readline()]
        while announced[-1] and b"Ctrl-C" not in announced[-1]:
            announced.append(proc.stdout.readline())
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert b"Ctrl-C" in announced[-1] and proc.returncode == 0, (line, announced, err)
        return
    if "--follow" in argv:  # "Ctrl-C or 30 s idle ends": Ctrl-C once the first error was told
        proc = subprocess.Popen(command, cwd=workdir, env=_env(workdir), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stderr is not None
        # Findings are told live on stderr, a line each, in the order they become certain: a warning may come first,
        # and a Ctrl-C right after it could stop the analysis before the error (a race on a loaded machine).
        told = b""
        while b"error RT1" not in told and (line_told := proc.stderr.readline()):
            told += line_told
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=30)
        err = told + rest
        assert proc.returncode == 1 and b"error RT1" in err, (line, err)  # findings told live, on stderr
        return
    done = subprocess.run(command, cwd=workdir, env=_env(workdir), capture_output=True, text=True, timeout=300)
    reaches_openai = any("api.openai.com" in a or "127.0.0.1:9000" in a for a in argv)
    # Without the network (and with nothing on port 9000) a replay to an endpoint cannot reach it: exit 4, said so.
    allowed = (4,) if reaches_openai and argv[1] == "replay" else (0, 1)
    assert done.returncode in allowed, (line, argv, done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr


def test_the_docs_name_no_file_outside_the_repository() -> None:
    import re

    from .test_docs_site import hooks

    generated = {(ROOT / "docs" / page).resolve() for page in hooks().generated_pages()}  # made by `make docs`

    for doc in [ROOT / "README.md", *PAGES]:
        text = doc.read_text(encoding="utf-8")
        assert "../" not in text, doc
        for target in re.findall(r"\]\(([^)#\s]+)", text):  # every relative link resolves inside the repository
            if "://" not in target and not target.startswith("mailto:"):
                place = (doc.parent / target).resolve()
                assert place.is_relative_to(ROOT) and (place.exists() or place in generated), (doc, target)
        paths = r"`((?:docs|rtrace|tests|bench|sample_traces)/[\w./-]+\.(?:md|py|toml|jsonl|c))`"
        for named in re.findall(paths, text) if doc.name != "protocol.md" else ():  # it cites other repositories
            assert (ROOT / named).exists() or named in ("rtrace/a/b.py", "tests/test_a_b.py"), (doc, named)  # patterns


def test_the_demo_output_quoted_in_the_quick_start_is_what_make_demo_prints(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    quoted = README.split("`make demo` prints, among others:")[1].split("```")[1].strip("\n").splitlines()
    monkeypatch.delenv("COLUMNS", raising=False)
    assert main(["analyze", str(ROOT / "sample_traces" / "real" / "tool-output-race.livekit-1.8.8.jsonl")]) == 1
    printed = capsys.readouterr().out.splitlines()
    start = printed.index("  " + quoted[0])  # the report indents each finding by two spaces
    assert [line[2:] for line in printed[start : start + len(quoted)]] == quoted
