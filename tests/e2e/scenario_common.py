"""What the Python client drivers share (openai_sdk_scenario.py, openai_agents_scenario.py, pipecat_scenario.py):
arguments, the test's own tool, the summary line, the end-of-run rule, the watchdog and the exit codes.

Standard library only: each driver runs in its client's own venv (`.venv-e2e-<client>`), where rtrace is not
installed, and imports this module from its own folder. With `--record PATH` a driver adds the two lines of its
client's in-process recorder (`rtrace.integrations.<client>`); rtrace must then be importable (the tests put it on
PYTHONPATH with orjson: tests/realclients.py `rtrace_pythonpath`). The Node drivers (node/*.mjs) print the same
summary.

The run: one user text asks for an order; the model (normally `rtrace serve`) calls the session's tool `--tool-name`
(schema `ORDER_SCHEMA`); the tool "runs" `--tool-seconds`; its output goes back and a response follows. The driver
behaves the same whatever the server does: the faults are the server's, chosen by the test.

Summary line (one JSON object, the last line on stdout; schema `rtrace.scenario/1`):

    {"schema": "rtrace.scenario/1", "client": "openai-agents", "client_version": "0.24.0",
     "tool_name": "lookup_order", "modality": "text",
     "status": "done" | "timeout" | "failed", "ok": true, "finish_reason": "...",
     "answers": ["Tool result: ..."],              # assistant texts, in the order their responses finished
     "final_answer": "Tool result: ...",           # the first answer of a response that finished after an output
     "tool_calls": [{"name", "call_id", "arguments", "conn"}],
     "tool_outputs_sent": 1, "output_acked": true, # an ack (conversation.item.added/created) of our output
     "audio_bytes": 0, "audio_chunks": 0,          # output audio the client received (decoded bytes)
     "reconnected": 0, "connections": 1,           # reconnects the client made; sockets that saw session.created
     "close_codes": [1000],                        # close codes the client saw, where it tells
     "server_errors": ["invalid_tool_call_id"], "errors": ["..."],   # server `error` codes; client-side errors
     "marks": {"tool_started": 0.41, ...}, "elapsed": 1.9}

`ok`: the tool round trip completed (a call of `--tool-name`, its output acknowledged by the server, then an
answer from a response that finished after the output). `status`: `done` when the run reached its end (an answer
after a tool output or before any tool call, or a state the client does not leave by itself: its socket closed and
it did not reconnect, or IDLE_SECONDS without a server event once a tool call was seen and no tool runs),
`timeout` at --timeout (exit 3), `failed` when the client raised or never connected (exit 4). A watchdog
(faulthandler) ends the process 10 s after --timeout whatever the event loop does.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import json
import logging
import os
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

SCHEMA = "rtrace.scenario/1"
#: How long the tool "runs".
TOOL_SECONDS = 0.3
#: After the end condition, how long to keep listening for trailing events before closing.
SETTLE_SECONDS = 0.5
#: Once a tool call was seen, this long without a server event and no tool running means the client sits in a
#: state it does not leave by itself: the run is over.
IDLE_SECONDS = 3.0
#: Names the order: `rtrace serve` calls the session's tool whose name words the user text mentions.
DEFAULT_USER_TEXT = "Where is my order A-1234?"
DEFAULT_TOOL = "lookup_order"
TOOL_DESCRIPTION = "Look up an order by its number: status and expected delivery date."
INSTRUCTIONS = "You help with orders. Use the order tool to look orders up."
#: The drivers' own tool schema (the same in the Node drivers).
ORDER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"order_id": {"type": "string", "description": "The order number, e.g. A-1234."}},
    "required": ["order_id"],
    "additionalProperties": False,
}

EXIT_DONE, EXIT_TIMEOUT, EXIT_FAILED = 0, 3, 4


def parse_args(
    description: str,
    url_help: str,
    argv: list[str],
    extra: Callable[[argparse.ArgumentParser], None] | None = None,
) -> argparse.Namespace:
    """The drivers' command line (`--url` as `url_help` says), plus the arguments `extra` adds."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--url", required=True, help=url_help)
    p.add_argument("--tool-name", default=DEFAULT_TOOL, help=f"the session's tool (default {DEFAULT_TOOL})")
    p.add_argument("--timeout", type=float, default=20.0, help="hard limit of the run in seconds (exit 3)")
    p.add_argument("--modality", choices=["text", "audio"], default="text", help="output modality asked for")
    p.add_argument("--user-text", default=DEFAULT_USER_TEXT)
    p.add_argument("--tool-seconds", type=float, default=TOOL_SECONDS)
    p.add_argument("--verbose", action="store_true", help="client library logs at DEBUG on stderr")
    p.add_argument(
        "--record",
        metavar="PATH",
        help="also record the session in process with rtrace.integrations (rtrace importable: PYTHONPATH)",
    )
    p.add_argument(
        "--snippet",
        metavar="FILE",
        help="instead of --record's lines, run this snippet of docs/capture.md at the same place (run_snippet)",
    )
    if extra is not None:
        extra(p)
    return p.parse_args(argv)


def run_snippet(path: str, **names: Any) -> None:
    """`--snippet`: run a capture snippet of docs/capture.md as written, where the driver's own recorder lines would
    be, with the client's objects bound to the names the guide uses (`conn`, `session`, `llm`)."""
    with open(path, encoding="utf-8") as fh:
        code = fh.read()
    exec(compile(code, path, "exec"), {"__name__": "__snippet__", **names})


def message_text(item: dict[str, Any]) -> str:
    """The text of a message item: its text parts, or the transcripts of its audio parts."""
    parts = []
    for part in item.get("content") or []:
        if isinstance(part, dict):
            text = part.get("text") if part.get("text") is not None else part.get("transcript")
            if isinstance(text, str):
                parts.append(text)
    return "".join(parts)


class Progress:
    """What the run saw; `summary()` is the JSON line."""

    def __init__(self, client: str, version: str, args: argparse.Namespace) -> None:
        self.client, self.version, self.args = client, version, args
        self.t0 = time.monotonic()
        self.marks: dict[str, float] = {}
        self.answers: list[str] = []
        self.final_answer: str | None = None
        self.tool_calls: list[dict[str, Any]] = []
        self.output_call_ids: list[str] = []
        self.acked_call_ids: set[str] = set()
        self.reconnected = 0
        self.connections = 0
        self.close_codes: list[int | None] = []
        self.server_errors: list[str] = []
        self.errors: list[str] = []
        self.status = "done"
        self.last_server_event = time.monotonic()
        self.tools_running = 0
        self.audio_bytes = 0
        self.audio_chunks = 0
        #: Set when the run reached its end (see the module docstring).
        self.finished = asyncio.Event()
        self.finish_reason: str | None = None

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 4)

    def mark(self, name: str) -> None:
        self.marks.setdefault(name, self.now())

    # -- observations ---------------------------------------------------------------------------------------

    def server_event(self) -> None:
        self.last_server_event = time.monotonic()

    def audio(self, size: int) -> None:
        self.audio_chunks += 1
        self.audio_bytes += size

    def tool_call(self, name: str, call_id: str, arguments: str) -> bool:
        """Record a call; False when this call id was already seen (a duplicate notification)."""
        if any(c["call_id"] == call_id for c in self.tool_calls):
            return False
        self.tool_calls.append({"name": name, "call_id": call_id, "arguments": arguments, "conn": self.connections})
        self.mark("tool_call")
        return True

    def output_sent(self, call_id: str) -> None:
        if call_id not in self.output_call_ids:
            self.output_call_ids.append(call_id)
            self.mark("output_sent")

    def item_acked(self, item: dict[str, Any] | None) -> None:
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            cid = item.get("call_id")
            if isinstance(cid, str) and cid in self.output_call_ids:
                self.acked_call_ids.add(cid)
                self.mark("output_acked")

    def answer(self, text: str) -> None:
        """An assistant text from a finished response: the first one after a tool output ends the run, and so does
        one before any tool call."""
        self.answers.append(text)
        if not self.tool_calls:
            self.finish("an answer without a tool call")
        elif self.output_call_ids and self.final_answer is None:
            self.final_answer = text
            self.mark("final_answer")
            self.finish("final answer after the tool output")

    def server_error(self, code: Any) -> None:
        self.server_errors.append(str(code))
        self.mark("server_error")

    def error(self, text: str) -> None:
        self.errors.append(text[:500])

    def fail(self, reason: str) -> None:
        """The client failed (e.g. it never connected): exit 4."""
        self.status = "failed"
        self.error(reason)
        self.finish(reason)

    def finish(self, reason: str) -> None:
        if self.finish_reason is None:
            self.finish_reason = reason
            self.mark("finished")
        self.finished.set()

    # -- the line --------------------------------------------------------------------------------------------

    @property
    def ok(self) -> bool:
        return self.final_answer is not None and any(
            c["name"] == self.args.tool_name and c["call_id"] in self.acked_call_ids for c in self.tool_calls
        )

    def summary(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "client": self.client,
            "client_version": self.version,
            "tool_name": self.args.tool_name,
            "modality": self.args.modality,
            "status": self.status,
            "ok": self.ok,
            "finish_reason": self.finish_reason,
            "answers": self.answers,
            "final_answer": self.final_answer,
            "tool_calls": self.tool_calls,
            "tool_outputs_sent": len(self.output_call_ids),
            "output_acked": bool(self.acked_call_ids),
            "audio_bytes": self.audio_bytes,
            "audio_chunks": self.audio_chunks,
            "reconnected": self.reconnected,
            "connections": self.connections,
            "close_codes": self.close_codes,
            "server_errors": self.server_errors,
            "errors": self.errors,
            "marks": self.marks,
            "elapsed": self.now(),
        }


async def run_tool(args: argparse.Namespace, progress: Progress, arguments: str) -> str:
    """The tool body: `--tool-seconds` of work, then the order as JSON."""
    progress.mark("tool_started")
    progress.tools_running += 1
    try:
        await asyncio.sleep(args.tool_seconds)
    finally:
        progress.tools_running -= 1
    progress.mark("tool_finished")
    try:
        parsed = json.loads(arguments) if arguments else {}
    except ValueError:
        parsed = {}
    order = parsed.get("order_id") if isinstance(parsed, dict) else None
    return json.dumps({"order_id": order, "status": "shipped", "eta": "tomorrow"})


def on_response_done(
    progress: Progress,
    args: argparse.Namespace,
    response: dict[str, Any],
    tasks: set[asyncio.Task[None]],
    tool_then_reply: Callable[[str, str], Awaitable[None]],
) -> None:
    """A `response.done` of a thin-socket driver (the openai SDK, Voice Live): each new call of `--tool-name` runs
    `tool_then_reply(call_id, arguments)` in a task kept in `tasks`; a call of another tool ends the run; each
    message is an answer."""
    for item in response.get("output") or []:
        if item.get("type") == "function_call":
            name, call_id = str(item.get("name")), str(item.get("call_id"))
            arguments = str(item.get("arguments") or "")
            if not progress.tool_call(name, call_id, arguments):
                continue
            if name == args.tool_name:
                task = asyncio.create_task(tool_then_reply(call_id, arguments))  # type: ignore[arg-type]
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            else:
                progress.error(f"the model called {name!r}, which the session does not declare")
                progress.finish("call of an undeclared tool")
        elif item.get("type") == "message":
            progress.answer(message_text(item))


async def read_until_done(
    progress: Progress,
    reader: Awaitable[None],
    tasks: set[asyncio.Task[None]],
    close: Callable[[], Awaitable[Any]],
    close_codes: Callable[[BaseException], int | None] | None = None,
) -> None:
    """Run a thin-socket driver's `reader` until the end condition (`settle`) or until it ends or raises (a raise
    is the run's error, with the close code `close_codes` reads off it); then cancel what runs and `close` the
    connection (2 s at most)."""
    read_task = asyncio.ensure_future(reader)
    settle_task = asyncio.create_task(settle(progress))
    try:
        done, _ = await asyncio.wait([read_task, settle_task], return_when=asyncio.FIRST_COMPLETED)
        if read_task in done and read_task.exception() is not None:
            exc = read_task.exception()
            assert exc is not None
            progress.error(f"connection: {type(exc).__name__}: {exc}")
            code = close_codes(exc) if close_codes is not None else None
            if code is not None:
                progress.close_codes.append(code)
            progress.finish("the connection raised")
            await asyncio.sleep(0.2)
        elif settle_task not in done:
            await settle_task
    finally:
        settle_task.cancel()
        read_task.cancel()
        for task in list(tasks):
            task.cancel()
        try:
            await asyncio.wait_for(close(), timeout=2.0)
        except Exception:
            pass


async def settle(progress: Progress, quiet: float = SETTLE_SECONDS, idle: float = IDLE_SECONDS) -> None:
    """Wait for the end condition (or, once a tool call was seen, for `idle` seconds of silence with no tool
    running), then `quiet` seconds more so trailing events are seen."""
    while not progress.finished.is_set():
        silent = time.monotonic() - progress.last_server_event
        if progress.tool_calls and progress.tools_running == 0 and silent >= idle:
            what = "after the tool output" if progress.output_call_ids else "after the tool call, no output sent"
            progress.finish(f"idle: no server event for {idle:g} s {what}")
            break
        try:
            await asyncio.wait_for(progress.finished.wait(), timeout=0.1)
        except asyncio.TimeoutError:
            pass
    await asyncio.sleep(quiet)


def start(
    distribution: str,
    doc: str | None,
    url_help: str,
    run: Callable[[argparse.Namespace, Progress], Awaitable[None]],
    extra: Callable[[argparse.ArgumentParser], None] | None = None,
) -> None:
    """A driver's `__main__`: its arguments (`parse_args`: the description is the first line of `doc`), the run
    of the client `distribution` (its installed version goes into the summary), then `main`."""
    from importlib.metadata import version

    args = parse_args((doc or "").splitlines()[0], url_help, sys.argv[1:], extra)
    progress = Progress(distribution, version(distribution), args)
    main(progress, lambda: run(args, progress))


def main(progress: Progress, run: Callable[[], Awaitable[None]]) -> None:
    """Run the scenario under a hard limit; print the summary; exit 0/3/4 without waiting on stray threads."""
    args = progress.args
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, stream=sys.stderr)
    # Independent of the event loop: even a wedged loop or a non-daemon thread ends the process.
    faulthandler.dump_traceback_later(args.timeout + 10.0, exit=True)

    async def bounded() -> None:
        try:
            await asyncio.wait_for(run(), timeout=args.timeout)
        except asyncio.TimeoutError:
            progress.status = "timeout"

    try:
        asyncio.run(bounded())
    except Exception as exc:  # a client that raises is a failed run, reported as such
        progress.status = "failed"
        progress.error(f"{type(exc).__name__}: {exc}")
        traceback.print_exc(file=sys.stderr)
    code = {"timeout": EXIT_TIMEOUT, "failed": EXIT_FAILED}.get(progress.status, EXIT_DONE)
    print(json.dumps(progress.summary()), flush=True)
    sys.stderr.flush()
    os._exit(code)
