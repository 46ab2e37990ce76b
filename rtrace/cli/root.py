"""The root of the command line: the typer `app`, the exit codes, and `main`, the one place errors become them.

Every message goes through `say` (user input shown escaped); the commands live in the family modules."""

import gc
import importlib
import os
import sys
from collections.abc import Iterable
from enum import IntEnum
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

from .. import __version__
from ..core.loader import UnreadableInput
from ..core.severity import failing
from ..rules import UnknownRule
from ..rules.base import Finding

if TYPE_CHECKING:  # rich is imported by what prints with it, when it prints
    from rich.console import Console


class ExitCode(IntEnum):
    OK = 0
    FINDINGS = 1
    USAGE = 2
    UNREADABLE = 3
    REPLAY_FAILED = 4
    INTERNAL = 70  # a bug of rtrace (sysexits' EX_SOFTWARE); RTRACE_DEBUG=1 shows the traceback
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)


class UsageError(Exception):
    """Bad arguments that typer itself cannot see (an unknown rule name, a path that is not a trace)."""


class OutputClosed(Exception):
    """Stdout's reader left before the output's end (`rtrace show ... | head`): a `BrokenPipeError` carried past
    typer, which would make any OSError of EPIPE an exit 1 (`main` makes it 0)."""


class PeerLeft(Exception):
    """A broken pipe that is not stdout's (a socket whose peer left) escaped a command: a bug of rtrace, carried past
    typer (which makes every EPIPE an exit 1) to `main`, which says so."""


class Commands(TyperGroup):
    """The commands' group: a broken pipe inside a command goes on to `main` as `OutputClosed` when stdout's reader
    has gone, else as `PeerLeft`."""

    def invoke(self, ctx: Any) -> Any:  # typer's own click Context (typer._click, private)
        try:
            return super().invoke(ctx)
        except BrokenPipeError as e:
            raise (OutputClosed if stdout_closed() else PeerLeft)(str(e)) from e


def stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone: its write end polls as an error (POLLERR), which a pipe with
    a reader, a file or a terminal never does. False wherever it cannot be asked (stdout replaced, no poll)."""
    try:
        import select

        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both OSError and ValueError
        return False


app = typer.Typer(
    cls=Commands,
    add_completion=True,
    no_args_is_help=True,
    help="Trace analyzer and race detector for realtime LLM websocket sessions.",
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

#: The commands in the order `rtrace --help` lists them, each with its family: the module of `cli` that registers
#: it on `app` (imported by `load_commands` when a command line needs it).
COMMANDS = {
    "analyze": "analysis", "report": "analysis", "show": "analysis", "rules": "analysis",
    "redact": "transforms", "minimize": "transforms", "serve": "serving", "sweep": "serving", "hunt": "hunt",
    "record": "serving", "convert": "transforms", "replay": "serving",
}  # fmt: skip

#: Longest message shown (a path or a value quoted in it is user input of any length).
MESSAGE_LIMIT = 2000


def shown(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """Text that may quote user input (a path, a URL, an option value, trace text), fit for a terminal
    (`core.escape.shown`: secrets scrubbed, control characters, ESC and bidi overrides as escapes, cut). Every
    message of the CLI goes through here, by `say` or `EscapedLines`."""
    from ..core.escape import shown as escaped

    return escaped(text, limit)


def say(text: str, style: str | None = None, console: "Console | None" = None) -> None:
    """One message on stderr (or `console`), through `shown`. An unstyled one on stderr is written without loading
    rich, as rich writes it on any stream, terminal or not (`report.console.stderr_console` soft-wraps, and `shown`
    leaves no tab, newline or control character for it to change): the text and a newline, flushed."""
    line = shown(text)
    if style is None and console is None:
        try:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
            return
        except BrokenPipeError:
            from ..report.console import stderr_console

            stderr_console().on_broken_pipe()  # stderr's reader left: the program ends as rich's console ends it
    from ..report.console import stderr_console

    (console or stderr_console()).print(line, style=style, markup=False, highlight=False)


def version_callback(value: bool) -> None:
    if value:
        print(f"rtrace {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", "-V", callback=version_callback, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    pass


def order_commands() -> None:
    """Put the registered commands in `COMMANDS` order (the order `--help` shows)."""
    names = list(COMMANDS)
    app.registered_commands.sort(key=lambda c: names.index(c.name or c.callback.__name__))  # type: ignore[union-attr]


def load_commands(argv: list[str] | None = None) -> None:
    """Register the commands `argv` can run on `app`: the family of the command it names first (`rtrace analyze
    ...` imports `cli.analysis` only, not the network's commands and what they import), else every family (the
    help, the version, completion, a name typer will refuse). `argv` None: every family."""
    name = argv[0] if argv else None
    families = [COMMANDS[name]] if name in COMMANDS else dict.fromkeys(COMMANDS.values())
    for family in families:
        importlib.import_module(f"{__package__}.{family}")
    order_commands()


def exit_code(findings: "Iterable[Finding]", fail_on: str) -> ExitCode:
    """The one reading of "findings, so exit 1": FINDINGS when one is at or above `fail_on` (`rules.base.failing`;
    `never`: none is), else OK. `analyze`, `serve --exit-with-findings`, `replay` and `sweep` end with it."""
    return ExitCode.FINDINGS if failing(findings, fail_on) else ExitCode.OK


def help_for(terminal: bool) -> None:
    """Rich help (panels, colour) on a terminal; anywhere else click's plain text, wrapped, every option and word
    whole, as ruff and pytest print it for grep and pagers (rich's panels cut both at 80 columns off a terminal).
    The examples are written for rich (brackets escaped, `common.verbatim`): plain text shows them as they are."""
    app.rich_markup_mode = "rich" if terminal else None
    for info in app.registered_commands:
        rich_epilog = _RICH_EPILOGS.setdefault(id(info), info.epilog)
        info.epilog = rich_epilog if terminal or rich_epilog is None else rich_epilog.replace("\\[", "[")


#: Each command's examples as written (for rich help), by its registration.
_RICH_EPILOGS: dict[int, str | None] = {}


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; the one place where errors become exit codes. Stdout is flushed here, not at the interpreter's
    exit (where a reader gone by then would make it exit 120, with a message)."""
    code = run_command(argv)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        return reader_left()
    return code


def reader_left() -> ExitCode:
    """Stdout's reader left (`| head`): what it read was written, a success; the rest goes nowhere."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return ExitCode.OK


def run_command(argv: list[str] | None) -> int:
    """The command `argv` names, run, and its exit code, whatever it raised."""
    try:
        load_commands(sys.argv[1:] if argv is None else argv)
        help_for(sys.stdout.isatty())
        code = app(args=argv, standalone_mode=False)
    except typer.Exit as e:
        return int(e.exit_code)
    except UnknownRule as e:
        say(f"rtrace: {e}")
        return ExitCode.USAGE
    except UsageError as e:
        say(f"rtrace: {e}")
        return ExitCode.USAGE
    except UnreadableInput as e:
        say(f"rtrace: {e}")
        return ExitCode.UNREADABLE
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except OutputClosed:
        return reader_left()
    except PeerLeft as e:
        return internal_error(e.__cause__ or e)
    except BrokenPipeError as e:
        return reader_left() if stdout_closed() else internal_error(e)
    except typer.Abort:
        return ExitCode.INTERRUPTED
    except Exception as e:  # typer's usage errors (its own click) and anything else: never a traceback
        show, code = getattr(e, "show", None), getattr(e, "exit_code", None)
        if callable(show) and isinstance(code, int):
            import io

            text = io.StringIO()
            show(file=text)  # click's usage error quotes the value given: shown like every other message
            for line in text.getvalue().splitlines():
                sys.stderr.write(shown(line) + "\n")
            return code
        return internal_error(e)
    return int(code) if isinstance(code, int) else ExitCode.OK


def internal_error(e: BaseException) -> ExitCode:
    """A bug of rtrace: said in one line, the traceback only with `RTRACE_DEBUG=1` (called inside the handler)."""
    say(f"rtrace: internal error: {type(e).__name__}: {e}")
    if os.environ.get("RTRACE_DEBUG"):
        raise e
    return ExitCode.INTERNAL


def run() -> NoReturn:
    """The `rtrace` program (the console script, `python -m rtrace.cli`): `main`, then the exit.

    Before it the cyclic GC is frozen (`gc.freeze`), which spares the interpreter's last collections of
    everything imported: they were a fifth of the CPU of a short command (about 30 ms of 155), for memory the
    process gives back whole. Nothing else of the exit changes: `atexit` handlers and `weakref.finalize`
    (temporary directories) still run and the streams are flushed, and every command closes what it writes.
    Only for the process's own end: `main` is what callers inside a process use."""
    code = main()
    gc.freeze()
    sys.exit(code)
