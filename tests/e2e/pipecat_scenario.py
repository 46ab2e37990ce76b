"""Drive pipecat's OpenAI realtime service (OpenAIRealtimeLLMService) in a pipeline without a transport.

Pipeline: user context aggregator -> OpenAIRealtimeLLMService -> assistant context aggregator. The user's text is
the first message of the LLMContext, with this script's own tool (`--tool-name`, schema `ORDER_SCHEMA`); an
LLMRunFrame queued into the pipeline starts the turn. The service sends the context as items, a session.update and
response.create; the registered function handler runs the tool; the service sends the function_call_output and the
assistant aggregator asks for the next response. pipecat has no automatic reconnect for this service. One JSON
line at the end (see scenario_common.py).

    .venv-e2e-pipecat/bin/python pipecat_scenario.py --url ws://127.0.0.1:PORT/v1/realtime
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from typing import Any

from scenario_common import (
    INSTRUCTIONS,
    ORDER_SCHEMA,
    TOOL_DESCRIPTION,
    Progress,
    run_snippet,
    run_tool,
    settle,
    start,
)

MODEL = "gpt-realtime"


async def _run(args: Any, progress: Progress) -> None:
    from loguru import logger
    from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
    from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
    from pipecat.frames.frames import (
        ErrorFrame,
        FunctionCallResultFrame,
        LLMFullResponseEndFrame,
        LLMRunFrame,
        LLMTextFrame,
        TTSAudioRawFrame,
    )
    from pipecat.observers.base_observer import BaseObserver, FramePushed
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.worker import PipelineWorker
    from pipecat.processors.aggregators.llm_context import LLMContext
    from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
    from pipecat.processors.frame_processor import FrameDirection
    from pipecat.services.openai.realtime import events
    from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService
    from pipecat.workers.runner import WorkerRunner

    # pipecat logs through loguru: keep WARNING and above on stderr, and keep them as client-side errors.
    logger.remove()
    logger.add(sys.stderr, level="DEBUG" if args.verbose else "WARNING")

    def keep(message: Any) -> None:
        text = str(message.record["message"])
        if "is not emitting turn frames" in text:  # expected without a transport / local VAD
            return
        progress.error(f"log {message.record['level'].name}: {text}")

    logger.add(keep, level="WARNING")

    class Service(OpenAIRealtimeLLMService):
        """Only counts the sockets (each starts with session.created); behaviour unchanged."""

        async def _handle_evt_session_created(self, evt: Any) -> None:
            progress.connections += 1
            progress.server_event()
            progress.mark(f"session_created_{progress.connections}")
            await super()._handle_evt_session_created(evt)

    input_audio = events.AudioInput(turn_detection=False)  # text in: no server VAD (serialized as null)
    session = events.SessionProperties(
        output_modalities=[args.modality],
        instructions=INSTRUCTIONS,
        audio=events.AudioConfiguration(input=input_audio),
    )
    # base_url gets "?model=..." appended as is (llm.py __init__): it ends with /realtime.
    llm = Service(
        api_key="sk-rtrace-test",
        base_url=args.url,
        settings=OpenAIRealtimeLLMService.Settings(model=MODEL, session_properties=session),
    )
    if args.snippet:  # the guide's lines instead (tests/test_docs_capture.py)
        run_snippet(args.snippet, llm=llm)
    elif args.record:  # the two lines of the in-process recorder
        from rtrace.integrations.pipecat import record_service

        record_service(llm, args.record)

    async def handler(params: Any) -> None:
        arguments = json.dumps(params.arguments) if not isinstance(params.arguments, str) else params.arguments
        progress.mark("handler_called")
        result = await run_tool(args, progress, arguments)
        await params.result_callback(json.loads(result))

    llm.register_function(args.tool_name, handler)
    schema = FunctionSchema(
        name=args.tool_name,
        description=TOOL_DESCRIPTION,
        properties=ORDER_SCHEMA["properties"],
        required=ORDER_SCHEMA["required"],
    )

    @llm.event_handler("on_conversation_item_created")
    async def on_item_created(_service: Any, item_id: str, item: Any) -> None:
        progress.server_event()
        if item is not None:
            progress.item_acked(item.model_dump() if hasattr(item, "model_dump") else dict(item))

    @llm.event_handler("on_conversation_item_updated")
    async def on_item_updated(_service: Any, item_id: str, item: Any) -> None:
        # conversation.item.done (and response.done's output): a function call with its arguments
        progress.server_event()
        if item is not None and getattr(item, "type", None) == "function_call":
            progress.tool_call(str(item.name), str(item.call_id), str(item.arguments or ""))

    context = LLMContext(
        messages=[{"role": "user", "content": args.user_text}],
        tools=ToolsSchema(standard_tools=[schema]),
    )
    pair = LLMContextAggregatorPair(context)
    pipeline = Pipeline([pair.user(), llm, pair.assistant()])

    class Watch(BaseObserver):
        """Frames the realtime service pushes: text, audio, tool results (sent by then), errors."""

        def __init__(self) -> None:
            super().__init__()
            self.text: list[str] = []

        async def on_push_frame(self, data: FramePushed) -> None:
            if data.source is not llm:
                return
            frame = data.frame
            if isinstance(frame, ErrorFrame):  # pushed upstream (push_error); the text is also logged
                if progress.connections == 0:
                    progress.fail(f"the service never connected: {frame.error}")
                elif "type='error'" in str(frame.error):
                    # a server `error` event (llm.py _handle_evt_error); the service stops reading after it
                    found = re.search(r"code='([^']*)'", str(frame.error))
                    progress.server_error(found.group(1) if found else None)
                return
            if data.direction != FrameDirection.DOWNSTREAM:
                return
            if isinstance(frame, LLMTextFrame):
                progress.server_event()
                self.text.append(frame.text)
            elif isinstance(frame, TTSAudioRawFrame):
                progress.server_event()
                progress.audio(len(frame.audio))
            elif isinstance(frame, LLMFullResponseEndFrame):
                progress.server_event()
                if self.text:
                    progress.answer("".join(self.text))
                self.text = []
            elif isinstance(frame, FunctionCallResultFrame):
                # pushed downstream by the service after it sent the output (llm.py push_frame)
                progress.output_sent(frame.tool_call_id)

    worker = PipelineWorker(
        pipeline,
        observers=[Watch()],
        idle_timeout_secs=None,
        enable_rtvi=False,
        check_dangling_tasks=False,
    )
    runner = WorkerRunner(handle_sigint=False, check_dangling_tasks=False)
    await runner.add_workers(worker)
    run_task = asyncio.create_task(runner.run())
    progress.mark("user_turn")
    await worker.queue_frames([LLMRunFrame()])
    try:
        done, _ = await asyncio.wait([run_task, asyncio.create_task(settle(progress))], return_when="FIRST_COMPLETED")
        if run_task in done:
            exc = run_task.exception()
            progress.error(f"runner ended: {exc!r}")
            progress.finish("the pipeline ended")
    finally:
        ws = getattr(llm, "_websocket", None)  # diagnostic only: the close code the client saw, if it saw one
        code = getattr(ws, "close_code", None)
        if code is not None:
            progress.close_codes.append(code)
        try:
            await asyncio.wait_for(worker.cancel(), timeout=3.0)
            await asyncio.wait_for(run_task, timeout=3.0)
        except Exception:
            run_task.cancel()


if __name__ == "__main__":
    start(
        "pipecat-ai", __doc__, "the service's base_url, ws://127.0.0.1:PORT/v1/realtime (it appends ?model=...)", _run
    )
