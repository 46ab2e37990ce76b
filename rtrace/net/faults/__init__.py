"""The fault language, pure: each fault action declared once (`actions`), the fault flags (`flags`), scenario
scripts and the engine that runs them (`script`), a hunt's faults and schedules as values (`schedule`), what a
schedule may hold (`values`). Imports only `rtrace.core` and itself: no asyncio, no socket, no clock, no endpoint."""
