"""The network floor, in packages by concern (docs/ARCHITECTURE.md, held by tests/test_layers.py): `faults` the fault
language and `fake` the fake endpoint, both sans I/O; `link` the asyncio layers that move frames and time (`serve`,
`record`); `replay`; `hunt` the hunt and the sweep, which nothing else in net imports. Renders nothing (tables live in
`rtrace.report`, what a command says in `rtrace.cli`)."""
