"""`python -m rtrace.cli`: the same command line as `rtrace`."""

import sys

from . import main

sys.exit(main())
