"""The processes a hunt or a sweep starts, and how a run of them ends: each command in its own session and process
group, marked by a variable of its own (`RUN_MARKER`); its whole tree ended with its run, at its timeout, when the
runner asks (`should_end`), and when the hunt stops; a process that escaped its group found by the marker. Also the
stop signals of a long command (`Stopper`: once a clean stop, twice at once). Prints nothing.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import IO, Any

#: Set in the environment of every command a run starts, to a value of the run's own: what finds a process that
#: left the run's process group (`setsid`, a new group) but not its environment.
RUN_MARKER = "RTRACE_RUN_ID"
#: Seconds the command's stderr is still read once it exited (a process it left may hold the pipe open forever).
DRAIN_SECONDS = 0.5
#: How often a running command is looked at (its end, `should_end`).
POLL_SECONDS = 0.1
#: The signals that stop a long command cleanly the first time (then at once): Ctrl-C, `timeout`/CI/systemd, a
#: closed terminal.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclasses.dataclass
class Ended:
    """How one run of a command ended."""

    #: Its exit status (negative: the signal that killed it); None when it was killed by the runner (`cut`).
    code: int | None
    #: The last lines of its stderr.
    tail: list[str] = dataclasses.field(default_factory=list)
    #: Processes it left that had escaped its process group (found by `RUN_MARKER`), and whether they were killed.
    strays: list[int] = dataclasses.field(default_factory=list)
    strays_killed: bool = False
    #: Why the runner ended it: `timeout`, or what `should_end` said (`budget`, `quiet`...); None: it exited.
    cut: str | None = None
    #: The traceback of a failure of rtrace itself during the run (its server's): the run says nothing of the client.
    internal: str | None = None
    #: Why the run's trace could not be written whole (a full disk): the run says nothing of the client either.
    unwritten: str | None = None


class Stopped(Exception):
    """The hunt (or sweep) was asked to stop (`Stopper`): the run in flight was ended, not judged."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


#: Every command running now, by its process group: what a stop at once (a second signal) kills.
_LIVE: dict[int, str] = {}
_LIVE_LOCK = threading.Lock()


def _environ_has(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return needle in fh.read(1 << 20)
    except OSError:  # gone, or not ours to read
        return False


def marked(marker: str) -> list[int]:
    """The processes alive whose environment carries `RUN_MARKER=marker` (on Linux, from /proc; else none)."""
    needle = f"{RUN_MARKER}={marker}\0".encode()
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    me = os.getpid()
    out = []
    for entry in proc.iterdir():
        if entry.name.isdigit() and int(entry.name) != me and _environ_has(int(entry.name), needle):
            if not _zombie(int(entry.name)):
                out.append(int(entry.name))
    return sorted(out)


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] == ["Z"]


def _escaped(marker: str, pgid: int) -> list[int]:
    """The processes of `marker` outside the group `pgid` (killed: its members go within a moment)."""
    deadline = time.monotonic() + 1.0
    while True:
        found = marked(marker)
        out = [pid for pid in found if _group_of(pid) != pgid]
        if len(out) == len(found) or time.monotonic() > deadline:
            return out
        time.sleep(0.01)


def _group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def kill_pids(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def kill_all_live() -> None:
    """Kill every command running now, its group and what escaped it (a stop at once)."""
    with _LIVE_LOCK:
        live = dict(_LIVE)
    for pgid, marker in live.items():
        kill_group(pgid)
        kill_pids(marked(marker))


def kill_strays_default() -> bool:
    """`--kill-strays`' default: on in CI (`CI` set to anything but empty, 0 or false)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


#: The longest stderr line kept whole in the tail (the rest of a longer one is cut).
TAIL_LINE_BYTES = 2000


async def tee(stream: asyncio.StreamReader, tail: collections.deque[str], err: IO[bytes] | None) -> None:
    """Pass the command's stderr on as it comes (in chunks: a line of any length, or none, never stops it),
    keeping its last lines."""
    partial = b""
    while chunk := await stream.read(1 << 16):
        if err is not None:
            with contextlib.suppress(OSError, ValueError):
                err.write(chunk)
                err.flush()
        *lines, partial = (partial + chunk).split(b"\n")
        tail.extend(line[:TAIL_LINE_BYTES].decode("utf-8", "replace").rstrip("\r") for line in lines)
        partial = partial[:TAIL_LINE_BYTES]
    if partial:
        tail.append(partial.decode("utf-8", "replace").rstrip("\r"))


class CannotRun(ValueError):
    """The command could not be started (gone, or not runnable)."""


async def run_process(
    command: list[str],
    env: dict[str, str],
    timeout: float | None,
    *,
    stderr: IO[bytes] | None,
    echo: bool = True,
    tail_lines: int = 8,
    kill_strays: bool = False,
    should_end: Callable[[], str | None] | None = None,
    stdout_in_tail: bool = False,
) -> Ended:
    """Run `command` in its own session and process group with `env` (and `RUN_MARKER`) until it exits, `timeout`
    passes or `should_end` says why it must end; its stderr passed on to `stderr` as it comes (its stdout shown
    only when `echo`). Whatever ended it, its process group is killed then (what it left in it ends with it), its
    stderr read on for at most `DRAIN_SECONDS`, and the processes that escaped the group are named (`Ended.strays`)
    and killed when `kill_strays`; when the caller is cancelled, all of it is killed. `stdout_in_tail`: its stdout
    goes with its stderr (a child pytest reports its failures there). Raises `CannotRun`."""
    marker = uuid.uuid4().hex
    read_end, write_end = os.pipe()  # its stderr (and its stdout, `stdout_in_tail`)
    try:  # not asyncio's subprocess: its wait() lasts as long as the pipes, which a process left behind may hold
        proc = subprocess.Popen(
            command, env={**env, RUN_MARKER: marker}, start_new_session=True, stderr=write_end,
            stdout=write_end if stdout_in_tail else None if echo else subprocess.DEVNULL, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except OSError as e:
        os.close(read_end)
        raise CannotRun(e.strerror or str(e)) from None
    finally:
        os.close(write_end)
    with _LIVE_LOCK:
        _LIVE[proc.pid] = marker
    tail: collections.deque[str] = collections.deque(maxlen=tail_lines)
    loop = asyncio.get_running_loop()
    stream = asyncio.StreamReader()
    pipe = os.fdopen(read_end, "rb", buffering=0)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream), pipe)
    reader = asyncio.ensure_future(tee(stream, tail, stderr))
    deadline = None if timeout is None else time.monotonic() + timeout
    cut: str | None = None
    try:
        while proc.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                cut = "timeout"
                break
            await asyncio.sleep(POLL_SECONDS if left is None else min(POLL_SECONDS, left))
            if proc.poll() is None and should_end is not None and (why := should_end()) is not None:
                cut = why
                break
    except BaseException:
        _end(proc, marker, True, transport, reader)
        raise
    strays = _end(proc, marker, kill_strays, None, None)
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.shield(reader), DRAIN_SECONDS)
    reader.cancel()
    transport.close()
    code = proc.returncode
    return Ended(None if cut is not None else code, list(tail), strays, bool(strays and kill_strays), cut)


def _end(
    proc: subprocess.Popen[Any],
    marker: str,
    kill_strays: bool,
    transport: asyncio.BaseTransport | None,
    reader: asyncio.Future[None] | None,
) -> list[int]:
    """Kill the run's process group (what it left in it ends with it) and reap it; find what escaped, kill it when
    `kill_strays`."""
    kill_group(proc.pid)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    strays = _escaped(marker, proc.pid)
    if strays and kill_strays:
        kill_pids(strays)
    if reader is not None:
        reader.cancel()
    if transport is not None:
        transport.close()
    with _LIVE_LOCK:
        _LIVE.pop(proc.pid, None)
    return strays


class Stopper:
    """The stop of a long command (a hunt, a sweep), asked by a signal or by another thread (`stop`): the first
    time, `reason` is set and the tasks `guard`ed are cancelled (the runs in flight end at once, their processes
    killed); a second signal kills every command running (`kill_all_live`) and ends the process at once with
    128 + the signal."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.signum: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Future[Any]] = set()
        self._installed: list[int] = []

    @property
    def stopped(self) -> bool:
        return self.reason is not None

    @property
    def attached(self) -> bool:
        return self._loop is not None and not self._loop.is_closed()

    def attach(self, loop: asyncio.AbstractEventLoop, signals: bool) -> None:
        """Run on `loop`; take `STOP_SIGNALS` there when `signals` (the main thread only)."""
        self._loop = loop
        if not signals or threading.current_thread() is not threading.main_thread():
            return
        for sig in STOP_SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self._signalled, sig)
                self._installed.append(sig)

    def detach(self) -> None:
        if self._loop is not None:
            for sig in self._installed:
                with contextlib.suppress(Exception):
                    self._loop.remove_signal_handler(sig)
        self._installed.clear()
        self._loop = None

    def _signalled(self, sig: int) -> None:
        if self.reason is not None:
            kill_all_live()
            os._exit(128 + sig)
        self.signum = sig
        self._stop(signal.Signals(sig).name)

    def stop(self, reason: str) -> None:
        """Ask for a stop from any thread."""
        if self._loop is None or self._loop.is_closed():
            self.reason = self.reason or reason
            return
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._stop, reason)

    def _stop(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        for task in list(self._tasks):
            task.cancel()

    async def guard(self, work: Coroutine[Any, Any, Any]) -> Any:
        """Await `work` as a task a stop cancels; raises `Stopped` when it was."""
        if self.reason is not None:
            work.close()
            raise Stopped(self.reason)
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        try:
            return await task
        except asyncio.CancelledError:
            if self.reason is not None and task.cancelled():
                raise Stopped(self.reason) from None
            raise
        finally:
            self._tasks.discard(task)


def exit_status(signum: int | None) -> int:
    """The exit status of a command stopped by `signum` (128 + it, as a shell reports it); 130 by default."""
    return 128 + (signum if signum is not None else signal.SIGINT)


__all__ = [
    "DRAIN_SECONDS",
    "RUN_MARKER",
    "CannotRun",
    "Ended",
    "Stopped",
    "Stopper",
    "exit_status",
    "kill_all_live",
    "kill_strays_default",
    "marked",
    "run_process",
]
