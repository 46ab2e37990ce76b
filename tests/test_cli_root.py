"""The root of the command line, in-process: exit codes, help, completion, and every option of every command
given bad values."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rtrace.cli import ExitCode, main

from .conftest import REAL

RACE_188 = REAL / "tool-output-race.livekit-1.8.8.jsonl"
RACE_189 = REAL / "tool-output-race.livekit-1.8.9.jsonl"


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "--no-such-flag", str(RACE_188)]) == 2
    assert main(["frobnicate"]) == 2


def test_version_short_flag_and_python_dash_m() -> None:
    import subprocess
    import sys

    from rtrace import __version__

    for args in (["-m", "rtrace", "-V"], ["-m", "rtrace", "--version"]):
        done = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60)
        assert (done.returncode, done.stdout) == (0, f"rtrace {__version__}\n")
    done = subprocess.run([sys.executable, "-m", "rtrace", "analyze", str(RACE_188), "-q"], capture_output=True)
    assert done.returncode == 1 and done.stdout.count(b"\n") == 4


def test_shell_completion_is_on() -> None:
    import subprocess
    import sys

    rtrace = Path(sys.executable).parent / "rtrace"
    done = subprocess.run([str(rtrace), "--show-completion", "bash"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "complete -o default -F _rtrace_completion rtrace" in done.stdout


def test_every_command_help_has_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    import typer.main

    from rtrace.cli import app

    names = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    assert {"analyze", "report", "show", "serve", "sweep", "record", "replay", "redact", "convert"} <= set(names)
    for name in names:
        assert main([name, "--help"]) == 0
        out = capsys.readouterr().out
        assert "Example" in out and f"rtrace {name.replace('_', '-')}" in out, name


# -- every command, every option, bad values: a usage error or a clean answer, never an internal error --------------

#: What each command needs to run at all (a bad option is added to it); `{tmp}` is the test's folder.
BASE: dict[str, list[str]] = {
    "analyze": [str(RACE_189)],
    "report": [str(RACE_189), "-o", "{tmp}/r.md"],
    "show": [str(RACE_189)],
    "rules": [],
    "redact": [str(RACE_189), "-o", "{tmp}/clean.jsonl"],
    "minimize": [str(RACE_188), "--rule", "RT101", "-o", "{tmp}/min.jsonl"],
    "serve": [],
    "sweep": ["--runs", "1", "--", "true"],
    "hunt": ["--runs", "1", "--", "true"],
    "record": ["--upstream", "ws://127.0.0.1:9/v1", "-o", "{tmp}/rec.jsonl"],
    "convert": [str(RACE_189), "-o", "{tmp}/conv.jsonl"],
    "replay": [str(RACE_189)],
}
#: Values no option takes as meant; the ones that happen to be valid for an option just run it.
BAD = ["", "bogus", "-1", "99999999999999999999999", "nan", "\x1b[31mred"]


def _walk() -> list[tuple[str, str, str]]:
    import typer.main

    from rtrace.cli import app

    group = typer.main.get_command(app)
    cases = []
    for name, command in sorted(group.commands.items()):  # type: ignore[attr-defined]
        assert name in BASE, f"the walk does not know how to run `rtrace {name}`: add it to BASE"
        for param in command.params:
            if param.param_type_name != "option" or param.is_flag or param.name in ("help",):
                continue
            cases.extend((name, param.opts[0], value) for value in BAD)
    return cases


@pytest.fixture
def nothing_runs_forever(monkeypatch: pytest.MonkeyPatch) -> None:
    """Servers, proxies, sweeps and replays stop where they would start serving: the walk checks what the command
    line is given, not the network."""

    async def no_server(*args: object, **kwargs: object) -> None:
        return None

    monkeypatch.setattr("rtrace.net.link.server.serve_forever", no_server)
    monkeypatch.setattr("rtrace.net.link.proxy.record_forever", no_server)
    monkeypatch.setattr("rtrace.cli.mains.sweep_main", lambda *a, **k: pytest.skip("not reached"))
    monkeypatch.setattr("rtrace.net.hunt.hunt.hunt", lambda *a, **k: pytest.skip("not reached"))
    monkeypatch.setattr("rtrace.net.replay.runner.replay", lambda *a, **k: pytest.skip("not reached"))


def test_every_command_walked_with_bad_values_never_fails_inside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], nothing_runs_forever: None
) -> None:
    monkeypatch.chdir(tmp_path)  # a value taken as a file name lands here
    monkeypatch.setenv("RTRACE_NO_PROGRESS", "1")
    cases = _walk()
    assert len(cases) > 300
    seen: dict[int, int] = {}
    for command, option, value in cases:
        argv = [command, *(a.format(tmp=tmp_path) for a in BASE[command])]
        where = argv.index("--") if "--" in argv else len(argv)
        argv[where:where] = [option, value]
        try:
            code = main(argv)
        except pytest.skip.Exception:
            code = 0  # got past every check to the network: the value was valid
        err = capsys.readouterr().err
        assert code in (0, 1, 2, 3, 4), (argv, code, err)
        assert "Traceback" not in err and "internal error" not in err, (argv, err)
        assert "\x1b[31m" not in err, (argv, err)  # the value is shown, never obeyed
        seen[code] = seen.get(code, 0) + 1
    assert seen.get(2, 0) > len(cases) // 3  # most bad values are usage errors


def test_help_off_a_terminal_is_plain_wrapped_text(capsys: pytest.CaptureFixture[str]) -> None:
    """It was rich's panels squeezed to 80 columns, option names and words cut (`<terminal|json|co` / `ncise|...`);
    off a terminal it is click's plain help, as ruff and pytest print it, every option whole."""
    import typer.main

    from rtrace.cli import app

    for name in sorted(typer.main.get_command(app).commands):  # type: ignore[attr-defined]
        assert main([name, "--help"]) == 0
        out = capsys.readouterr().out
        assert not set(out) & set("╭╮╰╯│─"), name
        assert out.startswith("Usage: ") and f" {name} [OPTIONS]" in out.splitlines()[0] and "\\[" not in out, name
        assert all(len(line) <= 80 for line in out.splitlines() if not line.lstrip().startswith("rtrace ")), name
    assert main(["analyze", "--help"]) == 0
    out = capsys.readouterr().out
    assert "-f, --format <terminal|json|concise|github|sarif|junit|markdown|html>" in out
    assert main(["convert", "--help"]) == 0
    assert "(pip install 'rtrace-cli[mitmproxy]')" in capsys.readouterr().out  # the example as it is typed
    assert main(["--help"]) == 0
    assert "analyze" in capsys.readouterr().out


def test_help_on_a_terminal_stays_rich(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import re
    import sys

    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["convert", "--help"]) == 0
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    assert "╭─ Options" in out and "rtrace-cli[mitmproxy]" in out


def test_the_help_lists_every_command_in_its_declared_order() -> None:
    import typer.main

    from rtrace.cli import app
    from rtrace.cli.root import COMMANDS

    assert list(typer.main.get_command(app).commands) == list(COMMANDS)  # type: ignore[attr-defined]


def test_an_interrupt_is_130_and_a_bug_70_never_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import rtrace.cli.analysis as analysis

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    def bug(*args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.delenv("RTRACE_DEBUG", raising=False)
    monkeypatch.setattr(analysis, "analyze_many", interrupted)
    assert main(["analyze", str(RACE_189)]) == ExitCode.INTERRUPTED == 130
    monkeypatch.setattr(analysis, "analyze_many", bug)
    assert main(["analyze", str(RACE_189)]) == ExitCode.INTERNAL == 70
    err = capsys.readouterr().err
    assert "rtrace: internal error: RuntimeError: boom" in err and "Traceback" not in err


def test_a_broken_pipe_that_is_not_stdout_is_rtraces_error_not_a_success(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only stdout's reader leaving makes a broken pipe a success: one from a socket whose peer left, escaping a
    command, is a bug of rtrace (exit 70, said in one line), not exit 0 as if `| head` had read enough."""
    import rtrace.cli.analysis as analysis
    import rtrace.cli.root as root

    def peer_left(*args: object) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.delenv("RTRACE_DEBUG", raising=False)
    monkeypatch.setattr(analysis, "analyze_many", peer_left)
    assert main(["analyze", str(RACE_189)]) == ExitCode.INTERNAL
    assert "rtrace: internal error: BrokenPipeError" in capsys.readouterr().err
    monkeypatch.setattr(root, "stdout_closed", lambda: True)  # the same error, with stdout's reader gone
    monkeypatch.setattr(root, "reader_left", lambda: ExitCode.OK)  # (not dup2 over pytest's capture)
    assert main(["analyze", str(RACE_189)]) == ExitCode.OK


def test_stdout_closed_is_asked_of_the_pipe_itself(tmp_path: Path) -> None:
    """`stdout_closed` is true of a pipe whose reader has gone, false while it reads, and false of a file."""
    script = """
import sys
from rtrace.cli.root import stdout_closed
print(stdout_closed(), file=sys.stderr, flush=True)
sys.stdin.readline()  # the parent closes its end of stdout
print(stdout_closed(), file=sys.stderr, flush=True)
"""
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    assert child.stderr.readline() == b"False\n"
    child.stdout.close()
    _, err = child.communicate(b"\n", timeout=60)
    assert err == b"True\n"
    answer = tmp_path / "answer"
    with answer.open("wb") as out:
        ask = "from rtrace.cli.root import stdout_closed; print(stdout_closed())"
        subprocess.run([sys.executable, "-c", ask], stdout=out, timeout=60, check=True)
    assert answer.read_bytes() == b"False\n"


def test_start_up_loads_only_what_analysis_needs() -> None:
    """Every command pays for what `import rtrace.cli` loads: not the event loop or the websocket library (the
    network commands import them when they run), not `decimal` (a fault's duration text) or `tempfile` (an output
    file), and none of the secret value patterns (`core.secrets._patterns`, compiled at the first hinted text)."""
    code = (
        "import sys, rtrace.cli, rtrace.core.secrets as s;"
        "print([m for m in ('asyncio', 'websockets', 'decimal', 'tempfile') if m in sys.modules],"
        " s._patterns.cache_info().currsize)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[] 0", done.stderr


#: What no analysis command line imports: the network floor, the event loop, the other families' commands.
NOT_FOR_ANALYSIS = (
    "rtrace.net", "asyncio", "websockets", "rtrace.cli.serving", "rtrace.cli.hunt", "rtrace.cli.mains",
    "rtrace.cli.transforms",
)  # fmt: skip


@pytest.mark.parametrize(
    ("args", "rich"),
    [
        (["analyze", "{trace}", "-f", "json"], False),
        (["analyze", "{trace}", "-j", "1"], True),  # terminal text is drawn by rich
        (["report", "{trace}", "-o", "{tmp}/r.md"], False),  # its one message is unstyled
        (["show", "{trace}", "--at", "1"], True),
    ],
)
def test_an_analysis_command_line_imports_its_family_only(tmp_path: Path, args: list[str], rich: bool) -> None:
    """The program's own entry (`main` reading `sys.argv`) on a tiny trace: the family of the command named
    (`root.load_commands`) and what it uses; no network module, event loop, serving or hunt command, and rich only
    where the output is drawn with it."""
    trace = tmp_path / "one.jsonl"
    trace.write_text('{"t":0,"dir":"client","type":"session.update","session":{}}\n')
    argv = [a.format(trace=trace, tmp=tmp_path) for a in args]
    forbidden = NOT_FOR_ANALYSIS + (() if rich else ("rich",))
    code = (
        f"import sys; sys.argv = ['rtrace', *{argv!r}]; import rtrace.cli as cli; code = cli.main();"
        f"print(code, sorted(m for m in sys.modules if m.startswith({forbidden!r})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines()[-1] == "0 []", (done.stdout[-2000:], done.stderr)


@pytest.mark.parametrize("terminal", ["0", "1"])
def test_an_unstyled_message_is_written_as_richs_stderr_console_writes_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], terminal: str
) -> None:
    """`say` writes an unstyled message without rich: byte for byte what `stderr_console` prints for it, on a
    terminal (colours on, narrow) and off one, whatever the message holds."""
    import io

    from rtrace.cli.root import say, shown
    from rtrace.report.console import stderr_console

    monkeypatch.setenv("TTY_COMPATIBLE", terminal)
    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.delenv("NO_COLOR", raising=False)
    texts = [
        "rtrace report: markdown of 1 trace, 0 findings -> out.md",
        "x" * 300,
        "寛容 " * 80,
        "trailing blanks   ",
        "[bold]not markup[/] :smile: \x1b[31m red?",
        "tab\there, a newline\nand a bidi \u202e override",
        "",
    ]
    for text in texts:
        say(text)
        console = stderr_console()
        assert console.is_terminal is (terminal == "1")
        console.file = io.StringIO()
        console.print(shown(text), markup=False, highlight=False)
        assert capsys.readouterr().err == console.file.getvalue(), text


def test_the_program_exits_with_mains_code_and_only_the_last_collection_skipped(tmp_path: Path) -> None:
    """`run` freezes the GC before the exit; `atexit` handlers, `weakref.finalize` and the flush of a file left
    open still happen, and the exit code is `main`'s (in a child: a frozen GC would stay so in this process)."""
    left_open, temp = tmp_path / "left-open.txt", tmp_path / "temp"
    script = f"""
import atexit, gc, shutil, sys, weakref
from pathlib import Path
import rtrace.cli.root as root
root.main = lambda: 3
f = open({str(left_open)!r}, "w")
f.write("written, never closed")
Path({str(temp)!r}).mkdir()
weakref.finalize(root, shutil.rmtree, {str(temp)!r})
atexit.register(lambda: print("atexit", gc.get_freeze_count() > 0, flush=True))
sys.stdout.write("before ")
root.run()
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (3, "before atexit True\n", "")
    assert left_open.read_text() == "written, never closed"
    assert not temp.exists()


def piped_to_head(argv: list[str], unbuffered: bool = False) -> tuple[int, bytes, bytes]:
    """`rtrace ARGV | head -1`: rtrace's exit code, what `head` printed, and rtrace's stderr. Stdout buffered as a
    shell leaves it, or not (`PYTHONUNBUFFERED`: a write the reader left during is cut short without an error, the
    next one fails)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    rtrace = subprocess.Popen(
        [sys.executable, "-m", "rtrace", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert rtrace.stdout is not None and rtrace.stderr is not None
    head = subprocess.Popen(["head", "-1"], stdin=rtrace.stdout, stdout=subprocess.PIPE)
    rtrace.stdout.close()  # head holds the only reader: when it leaves, rtrace's writes fail
    shown, _ = head.communicate(timeout=60)
    err = rtrace.stderr.read()
    rtrace.stderr.close()
    return rtrace.wait(timeout=60), shown, err


def test_a_reader_that_leaves_early_is_a_success_for_show_and_analyze(tmp_path: Path) -> None:
    """`rtrace show BIG | head -1` (the view is written as laid out: the reader leaves while it is) and `rtrace
    analyze MANY | head -1` (rich's console, which on its own would exit 1) exit 0, print one line, and say nothing
    on stderr. Each output is far over a pipe's 64 KB, so the writes do fail."""
    from bench.scale import render as render_shape

    big = tmp_path / "big.jsonl"
    big.write_bytes(render_shape("pipelined-creates-ids", 3, 3000))  # about 6,000 lines of view
    for unbuffered in (False, True):
        code, shown, err = piped_to_head(["show", str(big)], unbuffered)
        assert (code, shown.count(b"\n"), err) == (0, 1, b""), err.decode(errors="replace")
        assert shown.startswith(b"after line ")
    races = []
    for k in range(150):  # about 1 KB of findings each
        races.append(tmp_path / f"race-{k}.jsonl")
        races[-1].write_bytes(RACE_188.read_bytes())
    code, shown, err = piped_to_head(["analyze", "-j", "1", *map(str, races)])
    assert (code, shown.count(b"\n"), err) == (0, 1, b""), err.decode(errors="replace")


def test_a_reader_gone_before_the_last_flush_is_a_success_without_a_message() -> None:
    """What a command left in stdout's buffer is flushed by `main`, where a gone reader is exit 0, not at the
    interpreter's exit (exit 120 and "Exception ignored ... BrokenPipeError" on stderr)."""
    script = """
import sys
import rtrace.cli.root as root
sys.stdin.readline()  # the parent has closed its end of stdout
root.run_command = lambda argv: sys.stdout.write("written, never read\\n") and 0
root.run()
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # the write stays in the buffer
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert child.stdin is not None and child.stdout is not None
    child.stdout.close()
    _, err = child.communicate(b"\n", timeout=60)
    assert (child.returncode, err) == (0, b"")
