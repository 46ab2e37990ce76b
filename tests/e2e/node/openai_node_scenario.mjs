#!/usr/bin/env node
// Drive the official openai Node SDK 7 (`OpenAIRealtimeWS` of `openai/realtime/ws`) against a realtime endpoint,
// for rtrace's real-client tests (tests/test_e2e_openai_node.py). The SDK is a thin socket: this is the minimal
// application on it, as tests/e2e/openai_sdk_scenario.py is for the Python SDK. On the first `session.created` it
// sends one `session.update` (the tool, text or audio out, no turn detection), the user text and
// `response.create`; when a `response.done` holds a call of the tool it runs it and sends the
// `function_call_output` and a `response.create`. ONE JSON line on stdout at the end (`rtrace.scenario/1`).
//
//   node openai_node_scenario.mjs --url https://127.0.0.1:PORT/v1 [--reconnect] [--azure] [--tool-name ...]
//        [--timeout 20] [--modality text|audio] [--tool-seconds 0.3] [--user-text "..."] [--grace 1.0]
//
// --url is the client's `baseURL` (the http(s) one `rtrace serve` prints): the SDK opens
// `wss://HOST/v1/realtime?model=...` and only `wss://` (buildRealtimeURL in realtime/internal-base.mjs), so the
// endpoint must serve TLS and Node must trust it (NODE_EXTRA_CA_CERTS). --azure: an `AzureOpenAI` client with
// that origin as `endpoint` and `OpenAIRealtimeWS.azure` (`wss://HOST/openai/v1/realtime?model=DEPLOYMENT`, the
// key in an `api-key` header).
//
// --reconnect opts in to the SDK's recovery (`reconnect: true`): on a recoverable close (not 1000) it opens a new
// socket and queues what the application sends meanwhile; the application must restore the new session itself
// and then call `flushPending()`. This driver does what a queue-and-flush application does: on `reconnected` it
// flushes, restoring nothing. Without --reconnect a close ends the run after --grace seconds (an output the tool
// finishes afterwards cannot be sent).
//
// Exit codes: 0 the run reached its end (`status` done; check `ok`), 3 hard timeout, 4 the client failed, 2 bad
// arguments.

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

const opts = parseOptions('openai_node_scenario', 'the baseURL, https://127.0.0.1:PORT/v1', {
  reconnect: { type: 'boolean', default: false },
  azure: { type: 'boolean', default: false },
  grace: { type: 'string', default: '1.0' },
});
const run = new Run('openai-node', packageVersion('openai'), opts);
const { summary } = run;

let OpenAI, AzureOpenAI, OpenAIRealtimeWS;
try {
  ({ OpenAI, AzureOpenAI } = await import('openai'));
  ({ OpenAIRealtimeWS } = await import('openai/realtime/ws'));
} catch (err) {
  run.error('import', err);
  run.finish(EXIT_FAILED, 'the client did not import');
}
if (run.finished) await new Promise(() => {});

const recovery = opts.reconnect ? { reconnect: true, reconnectInitialDelay: 100, maxReconnectAttempts: 3 } : {};
let rt;
try {
  if (opts.azure) {
    const origin = new URL(opts.url).origin;
    const client = new AzureOpenAI({ endpoint: origin, apiKey: 'sk-rtrace-test', apiVersion: '2025-08-28' });
    rt = await OpenAIRealtimeWS.azure(client, { deploymentName: opts.model, ...recovery });
  } else {
    const client = new OpenAI({ apiKey: 'sk-rtrace-test', baseURL: opts.url });
    rt = new OpenAIRealtimeWS({ model: opts.model, ...recovery }, client);
  }
} catch (err) {
  run.error('connect', err);
  run.finish(EXIT_FAILED, 'could not connect');
}
if (run.finished) await new Promise(() => {});
summary.url = String(rt.url);
run.beforeExit = async () => rt.close();

function sessionConfig() {
  const tool = { type: 'function', name: opts['tool-name'], description: TOOL_DESCRIPTION, parameters: ORDER_SCHEMA };
  const session = {
    type: 'realtime',
    instructions: INSTRUCTIONS,
    output_modalities: [opts.modality],
    tools: [tool],
    tool_choice: 'auto',
    audio: { input: { turn_detection: null } },
  };
  if (opts.modality === 'audio') {
    session.audio = {
      input: { format: { type: 'audio/pcm', rate: 24000 }, turn_detection: null },
      output: { format: { type: 'audio/pcm', rate: 24000 }, voice: 'marin' },
    };
  }
  return session;
}

let toolsRunning = 0;
let closed = false;
let graceTimer = null;
function endIfClosed() {
  if (!closed || toolsRunning > 0 || graceTimer !== null) return;
  graceTimer = setTimeout(() => run.finish(EXIT_DONE, 'socket closed, no reconnect'), opts.grace * 1000);
}

async function toolThenReply(callId, args) {
  toolsRunning += 1;
  try {
    let parsed = {};
    try {
      parsed = JSON.parse(args || '{}');
    } catch {
      // the fake model's arguments are JSON; anything else is the tool's to refuse
    }
    const output = await lookupOrder(run, parsed);
    // With recovery, while the SDK reconnects these are queued until flushPending().
    rt.send({ type: 'conversation.item.create', item: { type: 'function_call_output', call_id: callId, output } });
    run.outputSent(callId);
    rt.send({ type: 'response.create' });
    run.mark('response_create_after_output');
  } catch (err) {
    run.error('sending the tool output', err);
  } finally {
    toolsRunning -= 1;
    endIfClosed();
  }
}

let sentUserTurn = false;
rt.on('event', (event) => {
  run.serverEvent(event);
  if (event.type === 'session.created' && summary.connections === 1) {
    rt.send({ type: 'session.update', session: sessionConfig() });
  } else if (event.type === 'session.updated' && !sentUserTurn) {
    sentUserTurn = true;
    run.mark('user_turn');
    rt.send({
      type: 'conversation.item.create',
      item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: opts['user-text'] }] },
    });
    rt.send({ type: 'response.create' });
  } else if (event.type === 'response.done') {
    const output = Array.isArray(event.response?.output) ? event.response.output : [];
    for (const item of output) {
      if (item?.type === 'function_call') {
        if (run.toolCall(String(item.name), String(item.call_id), String(item.arguments ?? ''))) {
          if (item.name === opts['tool-name']) void toolThenReply(String(item.call_id), String(item.arguments ?? ''));
          else run.finish(EXIT_FAILED, 'call of an undeclared tool');
        }
      } else if (item?.type === 'message') {
        const text = messageText(item);
        if (text !== null) run.answer(text);
      }
    }
  }
});
rt.on('error', (err) => run.error('realtime error', err));

if (opts.reconnect) {
  rt.on('reconnecting', (event) => {
    summary.close_codes.push(event?.code ?? event?.closeCode ?? null);
    run.mark(`reconnecting_${summary.reconnected + 1}`);
  });
  rt.on('reconnected', () => {
    summary.reconnected += 1;
    run.mark(`reconnected_${summary.reconnected}`);
    rt.flushPending(); // restores nothing: only what was queued while reconnecting leaves
    // What the flush asked for is answered within --grace, or nothing more comes: the run ends either way.
    setTimeout(() => run.finish(EXIT_DONE, 'reconnected, nothing more came'), (opts.grace + opts['tool-seconds']) * 1000);
  });
  rt.on('close', (code) => {
    summary.close_codes.push(code ?? null);
    closed = true;
    run.mark('socket_closed');
    endIfClosed();
  });
} else {
  rt.socket.on('close', (code) => {
    summary.close_codes.push(code ?? null);
    closed = true;
    run.mark('socket_closed');
    endIfClosed();
  });
}
rt.socket.on('error', (err) => run.error('socket', err));
