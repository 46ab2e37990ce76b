#!/usr/bin/env node
// Drive @openai/agents-realtime 0.20 (RealtimeSession over OpenAIRealtimeWebSocket) against a realtime endpoint,
// for rtrace's real-client tests (tests/test_e2e_openai_agents_realtime.py). One text turn; the SDK runs the
// session's one function tool (ours: --tool-name, ORDER_SCHEMA) itself and sends its output and a response.create;
// ONE JSON line on stdout at the end, in the summary format of ../scenario_common.py (`rtrace.scenario/1`).
//
//   node agents_realtime_scenario.mjs --url 'ws://127.0.0.1:PORT/v1/realtime?model=gpt-realtime'
//        [--tool-name lookup_order] [--timeout 20] [--modality text|audio] [--tool-seconds 0.3]
//        [--user-text "..."] [--model gpt-realtime] [--grace 1.0] [--verbose]
//
// --url is used by the SDK verbatim (openaiRealtimeWebsocket.mjs:418-431): nothing is appended. The SDK never
// reconnects: once its socket closed and every started tool returned, the run ends after --grace seconds (a
// tool that finishes after the close fails to send its output: "WebSocket is not connected").
//
// Exit codes: 0 the run reached its end (`status` done; check `ok`), 3 hard timeout (--timeout), 4 the client
// failed (could not connect, threw), 2 bad arguments.

import {
  EXIT_DONE,
  EXIT_FAILED,
  INSTRUCTIONS,
  ORDER_SCHEMA,
  Run,
  TOOL_DESCRIPTION,
  lookupOrder,
  messageText,
  packageVersion,
  parseOptions,
} from './scenario_common.mjs';

const opts = parseOptions('agents_realtime_scenario', 'the full websocket URL, .../v1/realtime?model=gpt-realtime', {
  grace: { type: 'string', default: '1.0' },
});
const run = new Run('@openai/agents-realtime', packageVersion('@openai/agents-realtime'), opts);
const { summary } = run;

let sdk;
try {
  sdk = await import('@openai/agents-realtime');
} catch (err) {
  run.error('import', err);
  run.finish(EXIT_FAILED, 'the client did not import');
}
if (run.finished) await new Promise(() => {}); // finish() exits the process
const { RealtimeAgent, RealtimeSession, OpenAIRealtimeWebSocket, tool } = sdk;

let toolsRunning = 0;
const lookup = tool({
  name: opts['tool-name'],
  description: TOOL_DESCRIPTION,
  parameters: ORDER_SCHEMA,
  strict: true,
  async execute(args, _ctx, details) {
    const call = details?.toolCall;
    run.toolCall(opts['tool-name'], call?.callId ?? null, call?.arguments ?? JSON.stringify(args ?? {}));
    toolsRunning += 1;
    try {
      return await lookupOrder(run, args);
    } finally {
      toolsRunning -= 1;
      // The SDK sends the output right after this returns (and fails to, once the socket is gone).
      if (call?.callId) run.outputSent(call.callId);
      endIfDisconnected();
    }
  },
});

const agent = new RealtimeAgent({ name: 'rtrace-driver', instructions: INSTRUCTIONS, tools: [lookup] });
const transport = new OpenAIRealtimeWebSocket({ url: opts.url });
const session = new RealtimeSession(agent, {
  transport,
  model: opts.model,
  config: {
    outputModalities: [opts.modality],
    audio: { input: { turnDetection: null, transcription: null } },
  },
});
run.beforeExit = async () => session.close(); // a close frame, not a TCP reset

let disconnected = false;
let graceTimer = null;
function endIfDisconnected() {
  // The socket is gone and no tool runs: the SDK does nothing more by itself.
  if (!disconnected || toolsRunning > 0 || graceTimer !== null) return;
  graceTimer = setTimeout(() => run.finish(EXIT_DONE, 'socket closed, no reconnect'), opts.grace * 1000);
}

session.on('transport_event', (event) => {
  run.serverEvent(event);
  if (event?.type === 'session.created' && summary.connections > 1) summary.reconnected += 1;
  if (event?.type === 'response.done') {
    const output = Array.isArray(event.response?.output) ? event.response.output : [];
    if (!output.some((i) => i?.type === 'function_call')) {
      for (const text of output.map(messageText).filter((t) => t !== null)) run.answer(text);
    }
  }
});
session.on('error', (ev) => run.error('session error', ev));
transport.on('connection_change', (status) => {
  run.log(`connection ${status}`);
  if (status === 'disconnected' && summary.connections > 0) {
    disconnected = true;
    run.mark('disconnected');
    endIfDisconnected();
  }
});

try {
  await session.connect({ apiKey: 'sk-rtrace-test-key', url: opts.url });
} catch (err) {
  run.error('connect', err);
  run.finish(EXIT_FAILED, 'could not connect');
}
if (run.finished) await new Promise(() => {});
try {
  run.mark('user_turn');
  session.sendMessage(opts['user-text']);
} catch (err) {
  run.error('sendMessage', err);
  run.finish(EXIT_FAILED, 'sendMessage threw');
}
