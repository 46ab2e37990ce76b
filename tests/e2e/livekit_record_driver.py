"""Run tests/e2e/livekit_scenario.py with rtrace's in-process LiveKit recorder attached to the agent.

Runs with the python of a `.venv-e2e-<version>`, with rtrace (and its runtime dependencies) put on `sys.path` by the
caller. The only change to the scenario: `AgentSession.start` also calls `record_session(agent, path)`, the two lines
a user adds. Usage: livekit_record_driver.py TRACE_PATH SCENARIO_ARGS..., or `--snippet FILE SCENARIO_ARGS...` to run
a snippet of docs/capture.md there instead (with `agent` and `session` bound).
"""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    path, argv = sys.argv[1], sys.argv[2:]
    snippet = None
    if path == "--snippet":
        snippet, argv = argv[0], argv[1:]
    import livekit_scenario
    from livekit.agents import AgentSession

    from rtrace.integrations.livekit import record_session

    original = AgentSession.start

    async def start(self: Any, agent: Any, *args: Any, **kwargs: Any) -> Any:
        result = await original(self, agent, *args, **kwargs)
        if snippet is not None:
            with open(snippet, encoding="utf-8") as fh:
                exec(compile(fh.read(), snippet, "exec"), {"__name__": "__snippet__", "agent": agent, "session": self})
        else:
            record_session(agent, path)
        return result

    AgentSession.start = start  # type: ignore[method-assign]
    livekit_scenario.main(argv)


if __name__ == "__main__":
    main()
