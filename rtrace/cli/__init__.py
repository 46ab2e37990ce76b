"""The `rtrace` command line: thin typer commands over the library, by family (`analysis`, `transforms`,
`serving`, `hunt`); `root` holds `app`, the exit codes, `main` (the one place errors become them) and `run` (the
program). A command line imports only the family of its command (`root.load_commands`); `rtrace.cli.app` is the app
with every command registered (for the docs and tests that walk or invoke it)."""

from typing import TYPE_CHECKING, Any

from .root import ExitCode, UsageError, load_commands, main, run

if TYPE_CHECKING:
    from .root import app

__all__ = ["ExitCode", "UsageError", "app", "main", "run"]


def __getattr__(name: str) -> Any:
    """`app`, with every command registered: each family imported on first use (`root.load_commands`)."""
    if name == "app":
        from . import root

        load_commands()
        return root.app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
