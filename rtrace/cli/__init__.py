"""The `rtrace` command line: thin typer commands over the library, by family (`analysis`, `transforms`,
`serving`, `hunt`); `root` holds `app`, the exit codes, `main` (the one place errors become them) and `run` (the
program)."""

from . import analysis, hunt, serving, transforms  # noqa: F401  (each registers its commands on `app`)
from .root import ExitCode, UsageError, app, main, order_commands, run

order_commands()

__all__ = ["ExitCode", "UsageError", "app", "main", "run"]
