"""`python -m rtrace`: the same command line as `rtrace`."""

import sys

from .cli import main

sys.exit(main())
