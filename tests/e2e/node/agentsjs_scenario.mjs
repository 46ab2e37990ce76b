#!/usr/bin/env node
// Drive LiveKit agents-js 1.9.0 (@livekit/agents + @livekit/agents-plugin-openai) against a realtime endpoint,
// for rtrace's real-client tests (tests/test_e2e_agentsjs.py). It uses the plugin's realtime.RealtimeModel without
// a LiveKit room: it opens a realtime session, declares one function tool of its own, pushes one user text turn,
// runs each tool call itself the way AgentActivity does (copy of the chat context + FunctionCallOutput ->
// updateChatCtx, interrupt, generateReply), and prints ONE JSON line on stdout when it ends, in the summary format
// of ../scenario_common.py (`rtrace.scenario/1`). The client's own log lines (pino) go to stderr.
//
//   node agentsjs_scenario.mjs --url ws://127.0.0.1:PORT/v1 [--tool-name lookup_order] [--timeout 20]
//        [--modality text|audio] [--tool-seconds 0.3] [--user-text "..."] [--model gpt-realtime]
//        [--max-tool-calls 3] [--verbose]
//
// --url is given to RealtimeModel as `baseURL`; the plugin appends /realtime?model=<model> itself
// (processBaseURL, realtime_model.ts:386-432). The driver behaves the same whatever the server does (the faults
// are the server's): agents-js reconnects on any close and replays its conversation without function calls.
// Every tool call is run (at most --max-tool-calls); the run ends at the first text answer that follows an
// acknowledged function_call_output, or when a reply the client asked for never started.
// Summary extras: `client_warnings` (pino warn/error messages).
//
// Exit codes: 0 the run reached its end (`status` done; check `ok`), 3 hard timeout (--timeout), 4 the client
// failed (threw, or reported an unrecoverable error), 2 bad arguments.

import {
  EXIT_DONE,
  EXIT_FAILED,
  INSTRUCTIONS,
  ORDER_SCHEMA,
  Run,
  TOOL_DESCRIPTION,
  lookupOrder,
  packageVersion,
  parseOptions,
} from './scenario_common.mjs';

const opts = parseOptions('agentsjs_scenario', 'the RealtimeModel baseURL, e.g. ws://127.0.0.1:PORT/v1', {
  'max-tool-calls': { type: 'string', default: '3' },
});
const version = `${packageVersion('@livekit/agents')}+plugin-openai@${packageVersion('@livekit/agents-plugin-openai')}`;
const run = new Run('@livekit/agents', version, opts);
const { summary } = run;

let agents;
let openai;
try {
  agents = await import('@livekit/agents');
  openai = await import('@livekit/agents-plugin-openai');
} catch (err) {
  run.error('import', err);
  run.finish(EXIT_FAILED, 'the client did not import');
}
if (run.finished) await new Promise(() => {}); // finish() exits the process
const { llm, initializeLogger } = agents;
// The plugin calls log() everywhere; it throws until a logger exists.
initializeLogger({ pretty: false, level: opts.verbose ? 'debug' : 'info' });

const lookupTool = llm.tool({
  name: opts['tool-name'],
  description: TOOL_DESCRIPTION,
  parameters: ORDER_SCHEMA,
  execute: async (args) => lookupOrder(run, args),
});

let session = null;
let toolRuns = 0;
let generations = 0;

async function readGeneration(gen) {
  // The messages and function calls of one response; both streams end at response.done (or when the plugin
  // discards the generation, e.g. on reconnect). As in AgentActivity, each tool starts as soon as its call arrives.
  const texts = [];
  const runs = [];
  const readMessages = (async () => {
    for await (const msg of gen.messageStream) {
      let text = '';
      const readText = (async () => {
        for await (const chunk of msg.textStream) text += typeof chunk === 'string' ? chunk : (chunk?.text ?? '');
      })();
      const readAudio = (async () => {
        for await (const frame of msg.audioStream) {
          summary.audio_chunks += 1;
          summary.audio_bytes += frame?.data?.byteLength ?? 0;
        }
      })();
      await Promise.all([readText, readAudio]);
      if (text) texts.push(text);
    }
  })();
  const readCalls = (async () => {
    for await (const fc of gen.functionStream) {
      toolRuns += 1;
      if (toolRuns > opts['max-tool-calls']) {
        run.finish(EXIT_DONE, `more than ${opts['max-tool-calls']} tool calls`);
        return;
      }
      runs.push(runTool(fc));
    }
  })();
  await Promise.all([readMessages, readCalls]);
  return { texts, outputs: await Promise.all(runs) };
}

async function runTool(fc) {
  run.toolCall(fc.name, fc.callId, fc.args);
  let output;
  let isError = false;
  if (fc.name === opts['tool-name']) {
    let args = {};
    try {
      args = JSON.parse(fc.args || '{}');
    } catch (err) {
      run.error('tool arguments', err);
    }
    output = await lookupOrder(run, args);
  } else {
    output = `Unknown function: ${fc.name}`; // as AgentActivity answers a tool it does not have
    isError = true;
  }
  return llm.FunctionCallOutput.create({ callId: fc.callId, output, isError, name: fc.name });
}

async function sendOutputsAndReply(outputs) {
  // AgentActivity (voice/agent_activity.ts:4585-4657): copy the session's (remote) chat context, append the
  // outputs, updateChatCtx, interrupt, then a new generateReply.
  const chatCtx = session.chatCtx.copy();
  chatCtx.items.push(...outputs);
  for (const output of outputs) run.outputSent(output.callId);
  try {
    await session.updateChatCtx(chatCtx);
  } catch (err) {
    run.error('updateChatCtx(function_call_output)', err);
  }
  await session.interrupt();
  requestReply();
}

function requestReply() {
  const before = generations;
  session.generateReply().catch((err) => {
    run.error('generateReply', err);
    // The reply never started (e.g. its request was lost) and nothing else is coming: the client's end state.
    setTimeout(() => {
      if (generations === before) run.finish(EXIT_DONE, 'a reply the client asked for never started');
    }, 1000);
  });
}

function onGeneration(gen) {
  generations += 1;
  void (async () => {
    let result;
    try {
      result = await readGeneration(gen);
    } catch (err) {
      run.error('reading generation', err);
      return;
    }
    if (run.finished) return;
    if (result.outputs.length > 0) {
      try {
        await sendOutputsAndReply(result.outputs);
      } catch (err) {
        run.error('tool round', err);
        run.finish(EXIT_FAILED, 'the tool round threw');
      }
      return;
    }
    for (const text of result.texts) run.answer(text);
  })();
}

try {
  const model = new openai.realtime.RealtimeModel({
    baseURL: opts.url,
    apiKey: 'sk-rtrace-test-key',
    model: opts.model,
    modalities: [opts.modality],
    turnDetection: null,
    inputAudioTranscription: null,
  });
  session = model.session();
  // In 1.9.0 session.close() returns at once without closing the socket (it awaits a Task, which is not a
  // thenable), so the server sees 1006 when the process leaves; it is called anyway.
  run.beforeExit = () => session.close();
  session.on('openai_server_event_received', (event) => run.serverEvent(event));
  session.on('generation_created', onGeneration);
  session.on('session_reconnected', () => {
    summary.reconnected += 1;
    run.mark(`reconnected_${summary.reconnected}`);
  });
  session.on('error', (ev) => {
    run.error(ev?.recoverable === false ? 'realtime error (unrecoverable)' : 'realtime error', ev?.error ?? ev);
    if (ev?.recoverable === false) run.finish(EXIT_FAILED, 'unrecoverable realtime error');
  });

  await session.updateInstructions(INSTRUCTIONS);
  await session.updateTools(new llm.ToolContext([lookupTool]));
  const chatCtx = session.chatCtx.copy();
  chatCtx.addMessage({ role: 'user', content: opts['user-text'] });
  run.mark('user_turn');
  await session.updateChatCtx(chatCtx);
  requestReply();
} catch (err) {
  run.error('setup', err);
  run.finish(EXIT_FAILED, 'setup threw');
}
