"""`python -m rtrace`: the same command line as `rtrace`."""

from .cli import run

run()
