"""The examples `rtrace serve --help` and docs/serve.md show: a scenario script and a custom tool. Text only (the CLI
imports it at start-up); `tests/test_cli_examples.py` runs both against a client."""

#: A scenario script (`rtrace.net.faults.script` has the schema).
EXAMPLE_SCRIPT = """\
# scenario.toml: rtrace serve --script scenario.toml
[[turn]]
when = { user = "order" }                 # the user mentions an order
call = { name = "lookup_order", arguments = { order_id = "42" } }

[[turn]]
when = { tool_output = "lookup_order" }   # the answer after its output
text = "Order 42: {output}"

[[turn]]
when = { sent = "response.done:function_call", connection = 1 }
close = 1011                              # close while the tool runs, once
"""

#: A custom tool forced on every user turn, with its arguments (left out: made from its schema).
EXAMPLE_TOOL = """rtrace serve --tool 'lookup_order={"order_id": "42"}'"""
