"""The `rtrace` command line: thin typer commands over the library, by family (`analysis`, `transforms`,
`serving`); `root` holds `app`, the exit codes and `main`, the one place errors become them."""

from . import analysis, serving, transforms  # noqa: F401  (each registers its commands on `app`)
from .root import ExitCode, UsageError, app, main, order_commands

order_commands()

__all__ = ["ExitCode", "UsageError", "app", "main"]
