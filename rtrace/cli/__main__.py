"""`python -m rtrace.cli`: the same command line as `rtrace`."""

from . import run

run()
