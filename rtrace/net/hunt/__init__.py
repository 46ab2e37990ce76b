"""The bug hunt and the sweep: the search and shrinking, a hunt's runs, grouping findings into bugs, bug scripts,
the processes a run starts. May import all of `rtrace.net` and `rtrace.transform` (a bug's trace minimized);
nothing in `net` imports it."""
