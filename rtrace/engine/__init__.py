"""The engine: the one fold of a trace through `core.reducer.step` and the rules (`fold`), over processes, a
split trace or a Dask cluster (`parallel`). Prints nothing."""
