"""The processes a run starts (rtrace/net/hunt/processes.py): a run ends when its command exits, whatever it left
holding its pipes; its process group dies with it; a process that escaped the group is found by the run's marker,
named, and killed when asked; a stop cancels the run in flight."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from rtrace.net.hunt.processes import (
    RUN_MARKER,
    Stopped,
    Stopper,
    exit_status,
    kill_strays_default,
    marked,
    run_process,
)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def gone(pid: int, within: float = 2.0) -> bool:
    """Whether process `pid` is dead (gone, or a zombie: an exit status not yet reaped) within `within` seconds: a
    process killed with its group dies as the kernel gets to it, not in the instant the kill returns."""
    deadline = time.monotonic() + within
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _escaping(tmp_path: Path, how: str, then: str = "") -> list[str]:
    """A command that leaves a child behind, escaped from its group by `how` (`setsid` or `setpgid`), holding its
    stderr, the child's pid written to `tmp_path/pid`; then the command runs `then` and exits 0."""
    escape = "os.setsid()" if how == "setsid" else "os.setpgid(0, 0)"
    code = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        f"    {escape}\n"
        f"    open({str(tmp_path / 'pid')!r}, 'w').write(str(os.getpid()))\n"
        "    time.sleep(60)\n"
        "    os._exit(0)\n"
        f"while not os.path.exists({str(tmp_path / 'pid')!r}): time.sleep(0.01)\n"
        f"{then}\n"
    )
    return [sys.executable, "-c", code]


def test_a_run_ends_when_its_command_exits_and_names_what_escaped(tmp_path: Path) -> None:
    start = time.monotonic()
    ended = asyncio.run(run_process(_escaping(tmp_path, "setsid"), dict(os.environ), 30, stderr=None, echo=False))
    took = time.monotonic() - start
    pid = int((tmp_path / "pid").read_text())
    try:
        # exit 0 at once: not a timeout, and not as long as the grandchild holding stderr
        assert ended.code == 0 and ended.cut is None and took < 5
        assert ended.strays == [pid] and not ended.strays_killed and _alive(pid)
    finally:
        os.kill(pid, 9)


def test_kill_strays_ends_what_left_the_group(tmp_path: Path) -> None:
    command = _escaping(tmp_path, "setpgid", "time.sleep(60)")
    ended = asyncio.run(run_process(command, dict(os.environ), 1.0, stderr=None, echo=False, kill_strays=True))
    pid = int((tmp_path / "pid").read_text())
    assert ended.code is None and ended.cut == "timeout"
    assert ended.strays == [pid] and ended.strays_killed
    deadline = time.monotonic() + 3
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def test_the_process_group_ends_with_the_run(tmp_path: Path) -> None:
    pidfile = tmp_path / "child"
    command = ["sh", "-c", f"sleep 60 & echo $! > {pidfile}; exit 0"]
    ended = asyncio.run(run_process(command, dict(os.environ), 10, stderr=None, echo=False))
    assert ended.code == 0 and ended.strays == []
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 3
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def test_should_end_cuts_a_run_and_says_why() -> None:
    start = time.monotonic()
    command = [sys.executable, "-c", "import time; time.sleep(60)"]
    ended = asyncio.run(
        run_process(command, dict(os.environ), 60, stderr=None, echo=False,
                    should_end=lambda: "quiet" if time.monotonic() - start > 0.3 else None)
    )  # fmt: skip
    assert ended.code is None and ended.cut == "quiet" and time.monotonic() - start < 5


def test_the_marker_is_in_the_commands_environment(tmp_path: Path) -> None:
    out = tmp_path / "env"
    command = [sys.executable, "-c", f"import os; open({str(out)!r}, 'w').write(os.environ[{RUN_MARKER!r}])"]
    asyncio.run(run_process(command, dict(os.environ), 10, stderr=None, echo=False))
    assert len(out.read_text()) == 32 and marked(out.read_text()) == []


def test_a_stop_cancels_the_run_in_flight_and_kills_it(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    command = ["sh", "-c", f"echo $$ > {pidfile}; exec sleep 60"]

    async def go() -> None:
        stopper = Stopper()
        stopper.attach(asyncio.get_running_loop(), signals=False)
        asyncio.get_running_loop().call_later(0.5, stopper.stop, "SIGINT")
        with pytest.raises(Stopped, match="SIGINT"):
            await stopper.guard(run_process(command, dict(os.environ), 60, stderr=None, echo=False))
        assert stopper.stopped
        with pytest.raises(Stopped):  # nothing starts after a stop
            await stopper.guard(asyncio.sleep(0))

    start = time.monotonic()
    asyncio.run(go())
    assert time.monotonic() - start < 3
    assert not _alive(int(pidfile.read_text()))


def test_exit_status_and_the_ci_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert exit_status(None) == 130 and exit_status(15) == 143 and exit_status(1) == 129
    monkeypatch.setenv("CI", "true")
    assert kill_strays_default()
    monkeypatch.setenv("CI", "0")
    assert not kill_strays_default()
    monkeypatch.delenv("CI")
    assert not kill_strays_default()


def stopped_by(sig: int, args: list[str], tmp_path: Path) -> tuple[int, float, str, str, int]:
    """`rtrace ARGS -- sh -c ...` in its own process, sent `sig` alone (not its terminal's group) once its command
    runs: its exit status, the seconds from the signal to its end, its stdout and stderr, the command's pid."""
    pidfile = tmp_path / "pid"
    argv = [sys.executable, "-m", "rtrace.cli", *args, "--", "sh", "-c", f"echo $$ > {pidfile}; exec sleep 60"]
    return signalled(sig, argv, pidfile)


def signalled(sig: int, argv: list[str], pidfile: Path, cwd: Path | None = None) -> tuple[int, float, str, str, int]:
    """`argv` in its own process (this checkout first on its path), sent `sig` once `pidfile` is written: its exit
    status, the seconds from the signal to its end, its stdout and stderr, the pid in `pidfile`."""
    import signal
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True,
                            cwd=cwd)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        sent = time.monotonic()
        proc.send_signal(signal.Signals(sig))
        out, err = proc.communicate(timeout=20)
        took = time.monotonic() - sent
    finally:
        proc.kill()
    return proc.returncode, took, out.decode(), err.decode(), int(pidfile.read_text().strip())
